/* src/bootstrap/bootstrap.c - the table of bootstraps, the process's open
 * bootstrap, its host map, and the "none" bootstrap (a world of one). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "core/error.h"

/* ---- none: a process alone ------------------------------------------------ */

static int none_detect(void) { return 1; }

static int none_open(dt_boot *b) {
    b->hostkey = malloc(sizeof *b->hostkey);
    if (!b->hostkey) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    b->rank = 0;
    b->size = 1;
    b->hostkey[0] = 0;
    return DT_OK;
}

static int none_allgather(dt_boot *b, const void *mine, void *all, size_t bytes) {
    if (bytes && all != mine) memmove(all, mine, bytes);
    return DT_OK;
}

static int none_barrier(dt_boot *b) { return DT_OK; }

static void none_abort(dt_boot *b, int code) { _exit(code); }

static int none_close(dt_boot *b, int clean) { return DT_OK; }

static const dt_boot_ops boot_none = {
    .name = "none",
    .detect = none_detect,
    .open = none_open,
    .allgather = none_allgather,
    .barrier = none_barrier,
    .abort = none_abort,
    .close = none_close,
};

/* ---- the table ------------------------------------------------------------- */

extern const dt_boot_ops dt_boot_tcp;
#ifdef DTRAIN_HAVE_MPI
extern const dt_boot_ops dt_boot_mpi;
#endif

const dt_boot_ops *const dt_bootstraps[] = {
#ifdef DTRAIN_HAVE_MPI
    &dt_boot_mpi,
#endif
    &dt_boot_tcp,
    &boot_none,
    NULL,
};

const dt_boot_ops *dt_boot_find(const char *name) {
    for (int i = 0; dt_bootstraps[i]; i++)
        if (strcmp(dt_bootstraps[i]->name, name) == 0) return dt_bootstraps[i];
    return NULL;
}

const char *dt_boot_names(char *buf, size_t cap) {
    size_t n = 0;
    int k = 0;
    while (dt_bootstraps[k]) k++;
    buf[0] = '\0';
    for (int i = 0; i < k && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ",
                              dt_bootstraps[i]->name);
    return buf;
}

const dt_boot_ops *dt_boot_detect(void) {
    for (int i = 0; dt_bootstraps[i]; i++)
        if (dt_bootstraps[i]->detect()) return dt_bootstraps[i];
    return &boot_none;
}

/* ---- the open bootstrap ------------------------------------------------------ */

static dt_boot g_boot;
/* Set while g_boot is open; read by dt_boot_abort from any thread. */
static _Atomic(dt_boot *) g_open;

int dt_boot_host_map(const uint64_t *key, int n, int *host) {
    int nh = 0;
    for (int i = 0; i < n; i++) {
        host[i] = -1;
        for (int j = 0; j < i; j++)
            if (key[j] == key[i]) { host[i] = host[j]; break; }
        if (host[i] < 0) host[i] = nh++;
    }
    return nh;
}

int dt_boot_open(const dt_boot_ops *ops) {
    if (atomic_load(&g_open)) return DT_ERR(DT_ERR_STATE, "a bootstrap (%s) is already open", g_boot.ops->name);
    dt_boot b;
    memset(&b, 0, sizeof b);
    b.ops = ops;
    int rc = ops->open(&b);
    if (rc) return rc;
    b.host = malloc(sizeof *b.host * (size_t)b.size);
    if (!b.host) {
        ops->close(&b, 0);
        free(b.hostkey);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for the host map of %d ranks", b.size);
    }
    b.nhosts = dt_boot_host_map(b.hostkey, b.size, b.host);
    for (int r = 0; r < b.size; r++)
        if (b.host[r] == b.host[b.rank]) {
            if (r < b.rank) b.local_rank++;
            b.local_size++;
        }
    g_boot = b; /* no abort can be using the last one: the watchdog has stopped */
    atomic_store(&g_open, &g_boot);
    return DT_OK;
}

const dt_boot *dt_boot_get(void) { return atomic_load(&g_open); }

int dt_boot_allgather(const void *mine, void *all, size_t bytes) {
    dt_boot *b = atomic_load(&g_open);
    if (!b) return DT_ERR(DT_ERR_STATE, "no bootstrap is open");
    return b->ops->allgather(b, mine, all, bytes);
}

int dt_boot_barrier(void) {
    dt_boot *b = atomic_load(&g_open);
    if (!b) return DT_ERR(DT_ERR_STATE, "no bootstrap is open");
    return b->ops->barrier(b);
}

_Noreturn void dt_boot_abort(int code) {
    dt_boot *b = atomic_load(&g_open);
    if (b) b->ops->abort(b, code);
    _exit(code);
}

int dt_boot_close(int clean) {
    dt_boot *b = atomic_load(&g_open);
    if (!b) return DT_OK;
    int rc = b->ops->close(b, clean);
    atomic_store(&g_open, NULL);
    /* ops and impl stay: an abort that loaded b just before may still use them */
    free(b->hostkey);
    free(b->host);
    b->hostkey = NULL;
    b->host = NULL;
    b->rank = b->size = b->nhosts = 0;
    return rc;
}
