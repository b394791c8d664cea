/* src/comm/registry.c - communicator names and members by creation index,
 * for messages (mismatches, stall reports) and the watchdog. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/registry.h"

typedef struct reg_entry {
    uint32_t cid;
    char *key;      /* canonical rank_list, NULL: the world */
    int world_size;
    int my_group;
    int *ranks;     /* every group's members, group after group (the key read) */
    int *lens;
    int ngroups;    /* 0: the key could not be read; `mine` then stands in */
    int *mine;      /* this rank's group */
    int nmine;
} reg_entry;

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static reg_entry *g_reg;
static int g_reg_n, g_reg_cap;

/* "[[0,1],[2,3]]" -> ranks and lens; 0 on success. */
static int read_key(const char *key, int **ranks, int **lens, int *ngroups) {
    size_t nr = 0, ng = 0;
    for (const char *p = key; *p; p++) {
        if (*p == '[' && p != key) ng++;
        if (*p >= '0' && *p <= '9' && (p == key || p[-1] < '0' || p[-1] > '9')) nr++;
    }
    int *r = malloc(sizeof *r * (nr ? nr : 1)), *l = calloc(ng ? ng : 1, sizeof *l);
    if (!r || !l) { free(r); free(l); return -1; }
    size_t i = 0;
    int g = -1;
    for (const char *p = key; *p; p++) {
        if (*p == '[' && p != key) g++;
        else if (*p >= '0' && *p <= '9' && g >= 0 && i < nr) {
            char *end;
            r[i++] = (int)strtol(p, &end, 10);
            l[g]++;
            p = end - 1;
        }
    }
    *ranks = r;
    *lens = l;
    *ngroups = (int)ng;
    return 0;
}

static void free_entry(reg_entry *e) {
    free(e->key);
    free(e->ranks);
    free(e->lens);
    free(e->mine);
}

void dt_reg_add(uint32_t cid, const char *key, int world_size, int my_group, const int *members, int n) {
    reg_entry e;
    memset(&e, 0, sizeof e);
    e.cid = cid;
    e.world_size = world_size;
    e.my_group = my_group;
    e.mine = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!e.mine) return; /* messages then show "comm#cid" */
    if (n > 0) memcpy(e.mine, members, sizeof(int) * (size_t)n);
    e.nmine = n;
    if (key && (!(e.key = strdup(key)) || read_key(key, &e.ranks, &e.lens, &e.ngroups) != 0)) {
        e.ranks = e.lens = NULL;
        e.ngroups = 0;
    }
    pthread_mutex_lock(&g_reg_mu);
    if (g_reg_n == g_reg_cap) {
        int cap = g_reg_cap ? 2 * g_reg_cap : 16;
        reg_entry *r = realloc(g_reg, sizeof *r * (size_t)cap);
        if (!r) { pthread_mutex_unlock(&g_reg_mu); free_entry(&e); return; }
        g_reg = r;
        g_reg_cap = cap;
    }
    g_reg[g_reg_n++] = e;
    pthread_mutex_unlock(&g_reg_mu);
}

static reg_entry *reg_find(uint32_t cid) { /* g_reg_mu held */
    for (int i = g_reg_n - 1; i >= 0; i--)
        if (g_reg[i].cid == cid) return &g_reg[i];
    return NULL;
}

/* world_rank's group in e: its index (-1: in none, -2: unknown), members in
 * *m / *n (NULL / 0 for none). */
static int group_of(const reg_entry *e, int world_rank, const int **m, int *n) {
    *m = NULL;
    *n = 0;
    if (!e->key) return 0; /* the world: every rank, one group */
    if (!e->ngroups) {
        for (int i = 0; i < e->nmine; i++)
            if (e->mine[i] == world_rank) { *m = e->mine; *n = e->nmine; return e->my_group; }
        return -2;
    }
    int off = 0;
    for (int g = 0; g < e->ngroups; off += e->lens[g++])
        for (int i = 0; i < e->lens[g]; i++)
            if (e->ranks[off + i] == world_rank) { *m = e->ranks + off; *n = e->lens[g]; return g; }
    return -1;
}

static void name_of(const reg_entry *e, int group, char *buf, size_t cap) {
    if (!e->key) snprintf(buf, cap, "world");
    else if (group == -2) snprintf(buf, cap, "%.60s%s", e->key, strlen(e->key) > 60 ? "..." : "");
    else if (group < 0) snprintf(buf, cap, "%.60s%s (no group)", e->key, strlen(e->key) > 60 ? "..." : "");
    else snprintf(buf, cap, "%.60s%s group %d", e->key, strlen(e->key) > 60 ? "..." : "", group);
}

const char *dt_reg_name(uint32_t cid, char *buf, size_t cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    if (e) name_of(e, e->my_group, buf, cap);
    else snprintf(buf, cap, "comm#%u", cid);
    pthread_mutex_unlock(&g_reg_mu);
    return buf;
}

const char *dt_reg_name_of(uint32_t cid, int world_rank, char *buf, size_t cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    if (e) {
        const int *m;
        int n;
        name_of(e, group_of(e, world_rank, &m, &n), buf, cap);
    } else {
        snprintf(buf, cap, "comm#%u", cid);
    }
    pthread_mutex_unlock(&g_reg_mu);
    return buf;
}

int dt_reg_members(uint32_t cid, int *out, int cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    int n = 0;
    if (e) for (; n < e->nmine && n < cap; n++) out[n] = e->mine[n];
    pthread_mutex_unlock(&g_reg_mu);
    return n;
}

int dt_reg_members_of(uint32_t cid, int world_rank, int *out, int cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    int n = 0;
    if (e && !e->key) {
        for (; n < e->world_size && n < cap; n++) out[n] = n;
    } else if (e) {
        const int *m;
        int k;
        int g = group_of(e, world_rank, &m, &k);
        if (g == -1 && cap > 0) out[n++] = world_rank; /* in no group: alone */
        for (int i = 0; m && i < k && n < cap; i++) out[n++] = m[i];
    }
    pthread_mutex_unlock(&g_reg_mu);
    return n;
}

void dt_reg_remove(uint32_t cid) {
    pthread_mutex_lock(&g_reg_mu);
    for (int i = g_reg_n - 1; i >= 0; i--)
        if (g_reg[i].cid == cid) {
            free_entry(&g_reg[i]);
            memmove(&g_reg[i], &g_reg[i + 1], sizeof *g_reg * (size_t)(g_reg_n - i - 1));
            g_reg_n--;
            break;
        }
    pthread_mutex_unlock(&g_reg_mu);
}

void dt_reg_clear(void) {
    pthread_mutex_lock(&g_reg_mu);
    for (int i = 0; i < g_reg_n; i++) free_entry(&g_reg[i]);
    free(g_reg);
    g_reg = NULL;
    g_reg_n = g_reg_cap = 0;
    pthread_mutex_unlock(&g_reg_mu);
}
