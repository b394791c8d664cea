/* src/runtime/device_setup.c - dt_init's device part: which path device
 * memory takes (coll.h, "Device memory"), decided once for the whole job.
 *
 * DTRAIN_DEVICE_PATH = auto (default) | nccl | staged, agreed over the job
 * (staged if any rank says staged, else nccl if any says nccl). Every rank
 * then tells every other (one bootstrap allgather) whether it has a device,
 * which GPU (its UUID) on which host, and whether the device transport can
 * run here; dt_dev_decide turns that into one verdict, the same on every
 * rank. The transport (nccl) serves the world, and every rank_list group
 * is split from it, only when every rank has its own GPU; otherwise device
 * memory is staged (and with DTRAIN_DEVICE_PATH=nccl, dt_init fails saying
 * why). Two ranks on one GPU are left to NCCL only when it is forced: NCCL
 * 2.5 and later refuse them ("Duplicate GPU detected").
 *
 * DTRAIN_CUDA_DEVICE = current (default) | local, local: the GPU the world's
 * device transport is made on: the current device (the caller's
 * cudaSetDevice), or local_rank % the devices this process sees, made
 * current by dt_init before it looks at devices (what dtrain-train --device
 * cuda asks for).
 *
 * DTRAIN_DEVICE_BUFFER_CACHE = 1 (default) | 0, local: whether DT_MEM_DEVICE
 * calls over the device transport trust buffers seen before on its device
 * (core/device.h, "Known device buffers") or classify every buffer of every
 * call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "watchdog/watchdog.h"
#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "runtime/runtime.h"

static const dt_dev_transport *g_tp; /* the device transport of this job, NULL: none */
static int g_known_on = 1;           /* DTRAIN_DEVICE_BUFFER_CACHE, for dt_device_setup */
static int g_bind_local;             /* DTRAIN_CUDA_DEVICE=local, for dt_device_setup */

int dt_device_path_read(int *path) {
    if (dt_env_bool("DTRAIN_DEVICE_BUFFER_CACHE", 1, &g_known_on)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        const char *m = strstr(msg, "DTRAIN_");
        return dt_error(DT_ERR_INVALID, "dt_init", "%s", m ? m : msg);
    }
    const char *b = getenv("DTRAIN_CUDA_DEVICE");
    g_bind_local = b && strcmp(b, "local") == 0;
    if (b && *b && !g_bind_local && strcmp(b, "current") != 0)
        return dt_error(DT_ERR_INVALID, "dt_init", "DTRAIN_CUDA_DEVICE='%s' is not a device choice (expected current "
                        "or local)", b);
    const char *v = getenv("DTRAIN_DEVICE_PATH");
    *path = DT_DEVPATH_AUTO;
    if (!v || !*v || strcmp(v, "auto") == 0) return DT_OK;
    if (strcmp(v, "nccl") == 0) { *path = DT_DEVPATH_NCCL; return DT_OK; }
    if (strcmp(v, "staged") == 0) { *path = DT_DEVPATH_STAGED; return DT_OK; }
    return dt_error(DT_ERR_INVALID, "dt_init", "DTRAIN_DEVICE_PATH='%s' is not a device path (expected auto, nccl or "
                    "staged)", v);
}

static const char *path_name(int p) { return p == DT_DEVPATH_NCCL ? "nccl" : p == DT_DEVPATH_STAGED ? "staged" : "auto"; }

int dt_dev_decide(const dt_dev_info *all, int n, const char *tname, int *path, char *why, size_t cap) {
    int want = DT_DEVPATH_AUTO;
    for (int r = 0; r < n; r++)
        if (all[r].path == DT_DEVPATH_STAGED) want = DT_DEVPATH_STAGED;
        else if (all[r].path == DT_DEVPATH_NCCL && want == DT_DEVPATH_AUTO) want = DT_DEVPATH_NCCL;
    *path = want;
    why[0] = '\0';
    if (want == DT_DEVPATH_STAGED) {
        snprintf(why, cap, "DTRAIN_DEVICE_PATH=staged");
        return 0;
    }
    for (int r = 0; r < n; r++)
        if (all[r].ndev <= 0) {
            snprintf(why, cap, "rank %d has no CUDA device", r);
            return 0;
        }
    if (!tname) {
        snprintf(why, cap, "this build has no device transport (NCCL)");
        return 0;
    }
    for (int r = 0; r < n; r++)
        if (!all[r].probe_ok) {
            snprintf(why, cap, "%s cannot run on rank %d", tname, r);
            return 0;
        }
    for (int r = 0; r < n; r++)
        for (int q = 0; q < r; q++)
            if (all[q].hostkey == all[r].hostkey && memcmp(all[q].id, all[r].id, sizeof all[r].id) == 0) {
                snprintf(why, cap, "ranks %d and %d use the same GPU (device %d of one host); %s needs a GPU of its "
                         "own for every rank", q, r, all[r].dev, tname);
                return want == DT_DEVPATH_NCCL; /* forced: let the transport try (and say what it thinks) */
            }
    return 1;
}

/* dt_last_error() without its "function: " prefix */
static const char *last_body(void) {
    const char *m = dt_last_error(), *sep = strstr(m, ": ");
    return sep ? sep + 2 : m;
}

/* The local part of dt_dev_info (and why the transport cannot run here). */
static void local_info(const dt_dev_transport *t, int path, dt_dev_info *me, char *why, size_t cap) {
    const dt_boot *b = dt_boot_get();
    memset(me, 0, sizeof *me);
    me->path = path;
    me->hostkey = b->hostkey[b->rank];
    me->ndev = dt_dev_count();
    me->dev = -1;
    snprintf(why, cap, "%s", me->ndev ? "" : dt_dev_absent_reason());
    if (me->ndev <= 0) return;
    const dt_dev_ops *o = dt_dev();
    if (o->get_device(&me->dev) != DT_OK || o->identity(me->dev, me->id) != DT_OK) {
        snprintf(why, cap, "%s", last_body());
        me->ndev = 0;
        return;
    }
    if (t && t->probe(me->dev) != DT_OK) snprintf(why, cap, "%s", last_body());
    else me->probe_ok = t != NULL;
}

int dt_device_setup(dt_comm *world, int path) {
    const dt_boot *b = dt_boot_get();
    const dt_dev_transport *t = dt_dev_transport_first();
    g_tp = NULL;
    dt_dev_probe();
    dt_dev_known_enable(g_known_on);
    /* DTRAIN_CUDA_DEVICE=local: this rank's GPU before anything is made on one */
    if (g_bind_local && dt_dev_count() > 0) {
        int rc = dt_dev()->set_device(b->local_rank % dt_dev_count());
        if (rc) return rc;
    }
    if (!t) {
        if (path == DT_DEVPATH_NCCL)
            return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "DTRAIN_DEVICE_PATH=nccl, but this build has no device "
                            "transport (configured with DTRAIN_WITH_CUDA=OFF, or without CUDA and NCCL found)");
        return DT_OK; /* the same on every rank: one build */
    }
    dt_dev_info *all = malloc(sizeof *all * (size_t)b->size);
    if (!all) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    dt_dev_info me;
    char mywhy[512], why[600];
    local_info(t, path, &me, mywhy, sizeof mywhy);
    int rc = dt_boot_allgather(&me, all, sizeof me);
    if (rc) { free(all); return rc; }
    int want, use = dt_dev_decide(all, b->size, t->name, &want, why, sizeof why);
    int dev = me.dev;
    free(all);
    if (!use) {
        if (want == DT_DEVPATH_NCCL)
            return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "DTRAIN_DEVICE_PATH=nccl, but %s%s%s", why,
                            mywhy[0] ? "; here: " : "", mywhy);
        return DT_OK; /* device memory (if any) is staged */
    }
    world->dev = t->ops;
    rc = t->world(world, dev);
    if (rc) {
        world->dev = NULL;
        world->dev_impl = NULL;
        if (want == DT_DEVPATH_NCCL) {
            if (!why[0]) return rc;
            /* forced on ranks that share a GPU: dtrain's diagnosis, then NCCL's */
            char nccl[768];
            const char *m = dt_last_error();
            snprintf(nccl, sizeof nccl, "%s", strncmp(m, "dtrain: ", 8) == 0 ? m + 8 : m);
            return dt_error(rc, "dt_init", "DTRAIN_DEVICE_PATH=nccl, but %s, and NCCL refused: %s", why, nccl);
        }
        /* auto: staged after all (every rank got the same verdict), said once */
        if (b->rank == 0)
            fprintf(stderr, "dtrain: device memory takes the staged path: %s (DTRAIN_DEVICE_PATH=%s)\n",
                    dt_last_error(), path_name(want));
        dt_clear_error();
        return DT_OK;
    }
    g_tp = t;
    dt_wd_set_device_hooks(t->poll, t->abort_all);
    return DT_OK;
}

void dt_device_teardown(void) {
    dt_wd_set_device_hooks(NULL, NULL);
    if (g_tp && g_tp->finalize) g_tp->finalize();
    g_tp = NULL;
    dt_dev_release();
}
