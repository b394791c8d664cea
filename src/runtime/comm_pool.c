/* src/runtime/comm_pool.c - the communicator pool (the cache of rank_list
 * sub-communicators, not to be confused with src/nn/pool.c, the pooling
 * layers): rank_list parsing, validation and the sub-communicator
 * pool (created on first use, cached by canonical rank_list, released by
 * dt_comm_release). Creation and release are checked operations on the world
 * (they take its next sequence number and meet its collectives' fingerprint
 * check, so a rank that calls a collective where the others create or
 * release a communicator fails with DT_ERR_MISMATCH instead of hanging);
 * then the ranks agree on the rank_list over the bootstrap, and the world's
 * transport builds (or frees) the groups; local attributes come from the
 * bootstrap's hosts. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "coll/engine.h"
#include "comm/registry.h"
#include "comm/comm_internal.h"
#include "comm/op_kind.h"
#include "watchdog/watchdog.h"
#include "core/error.h"
#include "runtime/runtime.h"

static dt_comm *g_pool;
static uint32_t g_next_cid; /* creation index of the next sub-communicator - 1 */

int dt_comm_pool_size(void) {
    int n = 0;
    for (dt_comm *c = g_pool; c; c = c->next) n++;
    return n;
}

void dt_comm_pool_clear(void) {
    g_next_cid = 0;
    while (g_pool) {
        dt_comm *c = g_pool;
        g_pool = c->next;
        dt_comm_destroy(c);
    }
}

static void skip_ws(const char **p) { while (isspace((unsigned char)**p)) (*p)++; }

int dt_rank_list_parse(const char *text, int *ranks, int max_ranks, int *nranks,
                       int *group_lens, int max_groups, int *ngroups) {
    if (!text || !ranks || !nranks || !group_lens || !ngroups)
        return DT_ERR(DT_ERR_INVALID, "NULL argument");
    const char *p = text;
    int nr = 0, ng = 0;
    skip_ws(&p);
    if (*p != '[') return DT_ERR(DT_ERR_INVALID, "rank_list '%s': expected '[' at offset %d", text, (int)(p - text));
    p++;
    skip_ws(&p);
    if (*p == ']') { p++; goto done; }
    for (;;) {
        skip_ws(&p);
        if (*p != '[') return DT_ERR(DT_ERR_INVALID, "rank_list '%s': expected '[' opening group %d at offset %d", text, ng, (int)(p - text));
        p++;
        if (ng >= max_groups) return DT_ERR(DT_ERR_INVALID, "rank_list '%s': more than %d groups", text, max_groups);
        int len = 0;
        skip_ws(&p);
        if (*p != ']') {
            for (;;) {
                skip_ws(&p);
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p) return DT_ERR(DT_ERR_INVALID, "rank_list '%s': expected a rank at offset %d", text, (int)(p - text));
                if (v < -1000000000L || v > 1000000000L) return DT_ERR(DT_ERR_INVALID, "rank_list '%s': rank %ld out of range", text, v);
                if (nr >= max_ranks) return DT_ERR(DT_ERR_INVALID, "rank_list '%s': more than %d ranks", text, max_ranks);
                ranks[nr++] = (int)v;
                len++;
                p = end;
                skip_ws(&p);
                if (*p == ',') { p++; continue; }
                if (*p == ']') break;
                return DT_ERR(DT_ERR_INVALID, "rank_list '%s': expected ',' or ']' at offset %d", text, (int)(p - text));
            }
        }
        p++; /* ']' */
        group_lens[ng++] = len;
        skip_ws(&p);
        if (*p == ',') { p++; continue; }
        if (*p == ']') { p++; break; }
        return DT_ERR(DT_ERR_INVALID, "rank_list '%s': expected ',' or ']' after group %d at offset %d", text, ng - 1, (int)(p - text));
    }
done:
    skip_ws(&p);
    if (*p) return DT_ERR(DT_ERR_INVALID, "rank_list '%s': trailing characters at offset %d", text, (int)(p - text));
    *nranks = nr;
    *ngroups = ng;
    return DT_OK;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* 64-bit FNV-1a */
static unsigned long long hash_str(const char *s) {
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}

/* Validates the rank_list against world_size; on success fills `sorted`
 * (groups sorted in place copy), the canonical key and this rank's group. */
static int validate(const int *ranks, const int *lens, int ngroups, int world_size, int me,
                    int *sorted, int *total_out, int *my_group, int *my_off) {
    if (!ranks || !lens) return DT_ERR(DT_ERR_INVALID, "rank_list: NULL ranks or group_lens");
    if (ngroups < 1) return DT_ERR(DT_ERR_INVALID, "rank_list: ngroups is %d (need at least one group)", ngroups);
    int total = 0;
    for (int g = 0; g < ngroups; g++) {
        if (lens[g] < 1) return DT_ERR(DT_ERR_INVALID, "rank_list: group %d is empty (length %d)", g, lens[g]);
        if (lens[g] > world_size || total > world_size)
            return DT_ERR(DT_ERR_INVALID, "rank_list: lists more ranks than the world size %d, so a rank is listed twice or out of range", world_size);
        total += lens[g];
    }
    if (total > world_size)
        return DT_ERR(DT_ERR_INVALID, "rank_list: lists %d ranks but the world has %d, so a rank is listed twice or out of range", total, world_size);
    char *seen = calloc((size_t)world_size, 1);
    if (!seen) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int off = 0;
    *my_group = -1;
    *my_off = 0;
    for (int g = 0; g < ngroups; g++) {
        for (int i = 0; i < lens[g]; i++) {
            int r = ranks[off + i];
            if (r < 0 || r >= world_size) {
                free(seen);
                return DT_ERR(DT_ERR_INVALID, "rank_list: rank %d in group %d is out of range [0, %d)", r, g, world_size);
            }
            if (seen[r]) {
                free(seen);
                return DT_ERR(DT_ERR_INVALID, "rank_list: rank %d is listed twice (again in group %d)", r, g);
            }
            seen[r] = 1;
            if (r == me) { *my_group = g; *my_off = off; }
            sorted[off + i] = r;
        }
        qsort(sorted + off, (size_t)lens[g], sizeof(int), cmp_int);
        off += lens[g];
    }
    free(seen);
    *total_out = total;
    return DT_OK;
}

static char *make_key(const int *sorted, const int *lens, int ngroups) {
    int total = 0;
    for (int g = 0; g < ngroups; g++) total += lens[g];
    size_t cap = (size_t)total * 12 + (size_t)ngroups * 3 + 3;
    char *key = malloc(cap);
    if (!key) return NULL;
    size_t n = 0;
    key[n++] = '[';
    int off = 0;
    for (int g = 0; g < ngroups; g++) {
        n += (size_t)snprintf(key + n, cap - n, "%s[", g ? "," : "");
        for (int i = 0; i < lens[g]; i++)
            n += (size_t)snprintf(key + n, cap - n, "%s%d", i ? "," : "", sorted[off + i]);
        off += lens[g];
        key[n++] = ']';
    }
    key[n++] = ']';
    key[n] = '\0';
    return key;
}

/* Every rank sees every rank's hash `h` of what it passed (its rank_list, or
 * its error when `vrc` says the list was invalid, the message in
 * dt_last_error()), so all reach the same verdict: DT_OK, vrc, or
 * DT_ERR_MISMATCH. */
static int agree(dt_comm *world, int vrc, unsigned long long h, const char *what) {
    int W = world->info.size, me = world->info.rank;
    if (W == 1) return vrc;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", dt_last_error());
    unsigned long long *all = malloc(sizeof *all * (size_t)W);
    if (!all) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = dt_boot_allgather(&h, all, sizeof h);
    int same = 1;
    for (int r = 0; !rc && r < W; r++) same &= all[r] == h;
    free(all);
    if (rc) return rc;
    if (!same)
        return DT_ERR(DT_ERR_MISMATCH, "ranks passed different rank_lists%s (world rank %d passed %s%s)", what, me,
                      vrc ? "an invalid one: " : "a valid one", vrc ? saved : "");
    if (vrc) return dt_error(vrc, NULL, "%s", saved);
    return DT_OK;
}

/* The collective part of dt_comm_from_rank_list: agree on the rank_list over
 * the world, then split. `vrc` is the local validation result (its message in
 * dt_last_error()), `h` the hash of what this rank passed. Takes ownership of
 * `key`. */
static int create(dt_comm *world, int vrc, unsigned long long h, char *key, const int *group_lens,
                  int ngroups, const int *sorted, int my_group, int my_off, dt_comm **out) {
    int W = world->info.size, me = world->info.rank, rc;
    rc = agree(world, vrc, h, "");
    if (rc) { free(key); return rc; }

    int gsize = my_group >= 0 ? group_lens[my_group] : 1;
    dt_comm *c;
    if (gsize == 1) {
        rc = dt_comm_make_standalone(&dt_backend_void, me, W, my_group, ngroups, &c);
        if (rc) { free(key); return rc; }
        if (W > 1 && world->ops->split) rc = world->ops->split(world, -1, NULL, NULL);
        /* the device transport's split is collective over the world too */
        if (world->dev) {
            int drc = world->dev->split(world, -1, NULL);
            if (!rc) rc = drc;
        }
    } else {
        int *wr = malloc(sizeof(int) * (size_t)gsize);
        if (!wr) { free(key); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        memcpy(wr, sorted + my_off, sizeof(int) * (size_t)gsize);
        int myrank = 0;
        while (wr[myrank] != me) myrank++;
        rc = dt_comm_make(world->ops, wr, gsize, myrank, my_group, ngroups, &c);
        if (rc) { free(key); return rc; }
        /* an existing communicator with the same members shares its check
         * channel (the same one on every member: all pools are alike) */
        dt_comm *same = NULL;
        if (gsize == W) same = world;
        for (dt_comm *q = g_pool; q && !same; q = q->next)
            if (q->info.size == gsize && q->ops == world->ops &&
                memcmp(q->world_ranks, wr, sizeof(int) * (size_t)gsize) == 0) same = q;
        rc = world->ops->split(world, my_group, c, same);
        if (world->dev) { /* every rank splits, whatever the host split said */
            c->dev = world->dev;
            int drc = world->dev->split(world, my_group, c);
            if (drc) c->dev = NULL;
            if (!rc) rc = drc;
        }
    }
    c->key = key;
    if (rc) { dt_comm_destroy(c); return rc; }
    dt_comm_set_identity(c, ++g_next_cid);
    dt_wd_comm_created(c->cid); /* no rank has entered any of its calls */
    c->next = g_pool;
    g_pool = c;
    *out = c;
    return DT_OK;
}

int dt_comm_from_rank_list(const int *ranks, const int *group_lens, int ngroups, dt_comm **out) {
    dt_comm *world = dt_comm_world();
    int rc = dt_comm_check(world, __func__);
    if (rc) return rc;
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    int W = world->info.size, me = world->info.rank;

    int total = 0, my_group = -1, my_off = 0;
    int *sorted = malloc(sizeof(int) * (size_t)W);
    if (!sorted) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int vrc = validate(ranks, group_lens, ngroups, W, me, sorted, &total, &my_group, &my_off);
    char *key = NULL;
    unsigned long long h;
    if (vrc == DT_OK) {
        key = make_key(sorted, group_lens, ngroups);
        if (!key) { free(sorted); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        for (dt_comm *c = g_pool; c; c = c->next)
            if (strcmp(c->key, key) == 0) { free(key); free(sorted); *out = c; return DT_OK; }
        h = hash_str(key);
    } else {
        h = hash_str(dt_last_error()); /* identical bad input: identical hash */
    }
    if (W > 1) {
        char vmsg[1024];
        snprintf(vmsg, sizeof vmsg, "%s", vrc ? dt_last_error() : "");
        dt_engine_exclusive_begin();
        rc = dt_coll_op_begin("dt_comm_from_rank_list", world, DT_OP_COMM_CREATE);
        if (!rc && vrc) { /* the validation's message again (the agreement shows it) */
            char *sep = strstr(vmsg, ": ");
            if (sep) { *sep = '\0'; dt_error(vrc, vmsg, "%s", sep + 2); }
        }
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", dt_last_error());
            const char *m = strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;
            rc = dt_error(rc, "dt_comm_from_rank_list", "%s (this rank was creating the sub-communicator of %s)", m,
                          key ? key : "an invalid rank_list");
            free(key);
        }
    }
    if (!rc) rc = create(world, vrc, h, key, group_lens, ngroups, sorted, my_group, my_off, out);
    if (W > 1) {
        dt_wd_op_end();
        dt_engine_exclusive_end();
    }
    free(sorted);
    return rc;
}

int dt_comm_release(dt_comm *comm) {
    dt_comm *world = dt_comm_world();
    int rc = dt_comm_check(world, __func__);
    if (rc) return rc;
    if (!comm) return DT_ERR(DT_ERR_INVALID, "communicator is NULL");
    if (comm == world) return DT_ERR(DT_ERR_INVALID, "the world communicator cannot be released (dt_finalize frees it)");
    dt_comm **at = &g_pool;
    while (*at && *at != comm) at = &(*at)->next;
    if (!*at)
        return DT_ERR(DT_ERR_INVALID, "communicator %p is not one of the pool's sub-communicators (released already, "
                      "or not from dt_comm_from_rank_list*)", (void *)comm);
    int W = world->info.size;
    if (W > 1) {
        dt_engine_exclusive_begin();
        rc = dt_coll_op_begin(__func__, world, DT_OP_COMM_RELEASE);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", dt_last_error());
            const char *m = strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;
            rc = dt_error(rc, __func__, "%s (this rank was releasing the sub-communicator of %s)", m, comm->key);
        }
    }
    if (!rc) rc = agree(world, DT_OK, hash_str(comm->key), " to dt_comm_release");
    if (!rc) {
        *at = comm->next;
        uint32_t cid = comm->cid;
        dt_comm_destroy(comm);
        dt_reg_remove(cid);
    }
    if (W > 1) {
        dt_wd_op_end();
        dt_engine_exclusive_end();
    }
    return rc;
}

int dt_comm_from_rank_list_str(const char *rank_list, dt_comm **out) {
    dt_comm *world = dt_comm_world();
    int rc = dt_comm_check(world, __func__);
    if (rc) return rc;
    int cap = world->info.size + 64;
    int *ranks = malloc(sizeof(int) * (size_t)cap * 2);
    if (!ranks) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int nr = 0, ng = 0;
    rc = dt_rank_list_parse(rank_list, ranks, cap, &nr, ranks + cap, cap, &ng);
    if (rc == DT_OK) rc = dt_comm_from_rank_list(ranks, ranks + cap, ng, out);
    free(ranks);
    return rc;
}
