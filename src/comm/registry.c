/* src/comm/registry.c - communicator names and members by creation index,
 * for messages (mismatches, stall reports). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/registry.h"

typedef struct reg_entry {
    uint32_t cid;
    char name[96];
    int *members;
    int n;
} reg_entry;

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static reg_entry *g_reg;
static int g_reg_n, g_reg_cap;

void dt_reg_add(uint32_t cid, const char *name, const int *members, int n) {
    int *m = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!m) return; /* messages then show "comm#cid" */
    if (n > 0) memcpy(m, members, sizeof(int) * (size_t)n);
    pthread_mutex_lock(&g_reg_mu);
    if (g_reg_n == g_reg_cap) {
        int cap = g_reg_cap ? 2 * g_reg_cap : 16;
        reg_entry *r = realloc(g_reg, sizeof *r * (size_t)cap);
        if (!r) { pthread_mutex_unlock(&g_reg_mu); free(m); return; }
        g_reg = r;
        g_reg_cap = cap;
    }
    reg_entry *e = &g_reg[g_reg_n++];
    e->cid = cid;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->members = m;
    e->n = n;
    pthread_mutex_unlock(&g_reg_mu);
}

static reg_entry *reg_find(uint32_t cid) { /* g_reg_mu held */
    for (int i = g_reg_n - 1; i >= 0; i--)
        if (g_reg[i].cid == cid) return &g_reg[i];
    return NULL;
}

const char *dt_reg_name(uint32_t cid, char *buf, size_t cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    if (e) snprintf(buf, cap, "%s", e->name);
    else snprintf(buf, cap, "comm#%u", cid);
    pthread_mutex_unlock(&g_reg_mu);
    return buf;
}

int dt_reg_members(uint32_t cid, int *out, int cap) {
    pthread_mutex_lock(&g_reg_mu);
    reg_entry *e = reg_find(cid);
    int n = 0;
    if (e) for (; n < e->n && n < cap; n++) out[n] = e->members[n];
    pthread_mutex_unlock(&g_reg_mu);
    return n;
}

void dt_reg_clear(void) {
    pthread_mutex_lock(&g_reg_mu);
    for (int i = 0; i < g_reg_n; i++) free(g_reg[i].members);
    free(g_reg);
    g_reg = NULL;
    g_reg_n = g_reg_cap = 0;
    pthread_mutex_unlock(&g_reg_mu);
}

