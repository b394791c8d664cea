/* src/runtime/runtime.c - dt_init / dt_finalize: which bootstrap starts the
 * job and which transport carries the world (both from their tables), the
 * runtime settings, the watchdog; the timeout setting (reliability.h).
 *
 * dt_init: the settings are read (and rejected when malformed) before
 * anything starts; the bootstrap joins the job; the ranks agree on the
 * settings; the transport builds the world; the device path is decided (and
 * the device transport, nccl, set up on the world: device_setup.c); jobs of
 * several processes start the watchdog. DTRAIN_BOOTSTRAP (auto|mpi|tcp|none) and DTRAIN_BACKEND
 * (auto|mpi|void) choose; auto: the launcher's bootstrap
 * (bootstrap.h), then the first transport that can serve its job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "coll/engine.h"
#include "comm/comm_internal.h"
#include "comm/op_kind.h"
#include "comm/registry.h"
#include "watchdog/watchdog.h"
#include "core/env.h"
#include "core/error.h"
#include "dtrain/reliability.h"
#include "runtime/runtime.h"

static dt_comm *g_world;
static const dt_transport *g_tp; /* the world's transport */
static int g_wd_on;              /* the watchdog runs (jobs of several processes) */
static int g_timeout_user;       /* dt_set_timeout was called: it wins over the environment */

/* DTRAIN_TIMEOUT (or the config key's DTRAIN_TIMEOUT_S). */
static int read_timeout(void) {
    if (g_timeout_user) return DT_OK;
    double t = 300;
    int found, rc = dt_env_number("DTRAIN_TIMEOUT", 0, 1e9, &t, &found);
    if (rc) return rc;
    if (!found && (rc = dt_env_number("DTRAIN_TIMEOUT_S", 0, 1e9, &t, &found))) return rc;
    dt_wd_set_timeout(t);
    return DT_OK;
}

int dt_set_timeout(double seconds) {
    if (!isfinite(seconds) || seconds < 0)
        return DT_ERR(DT_ERR_INVALID, "timeout %g s is not a finite number >= 0", seconds);
    g_timeout_user = 1;
    dt_wd_set_timeout(seconds);
    return DT_OK;
}

double dt_get_timeout(void) { return dt_wd_timeout(); }

int dt_check_collectives_enabled(void) {
    if (dt_is_initialized()) return dt_rel_check_on();
    int on = 1;
    if (dt_env_bool("DTRAIN_CHECK_COLLECTIVES", 1, &on)) { dt_clear_error(); return 1; }
    return on;
}

/* "auto, mpi, tcp or none" from a name list function. */
static const char *choices(const char *(*names)(char *, size_t), char *buf, size_t cap) {
    char list[160];
    names(list, sizeof list);
    snprintf(buf, cap, "auto%s%s", strstr(list, " or ") ? ", " : " or ", list);
    return buf;
}

/* DTRAIN_BACKEND: *tp the transport asked for, NULL for auto. */
static int want_transport(const dt_transport **tp) {
    const char *v = getenv("DTRAIN_BACKEND");
    char c[200];
    *tp = NULL;
    if (!v || !*v || strcmp(v, "auto") == 0) return DT_OK;
    if ((*tp = dt_transport_find(v))) return DT_OK;
    return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "DTRAIN_BACKEND='%s' is not a backend of this build (expected %s)", v,
                  choices(dt_transport_names, c, sizeof c));
}

/* DTRAIN_BOOTSTRAP, else the bootstrap a transport asked for by name
 * implies, else the launcher's. */
static int want_boot(const dt_transport *tp, const dt_boot_ops **bo) {
    const char *v = getenv("DTRAIN_BOOTSTRAP"), *var;
    char c[200];
    if (v && *v && strcmp(v, "auto") != 0) {
        if ((*bo = dt_boot_find(v))) return DT_OK;
        return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "DTRAIN_BOOTSTRAP='%s' is not a bootstrap of this build (expected %s)", v,
                      choices(dt_boot_names, c, sizeof c));
    }
    if (tp && tp->boot && (*bo = dt_boot_find(tp->boot))) return DT_OK;
    if (dt_launch_detect(&var) == DT_LAUNCH_MPI && !dt_boot_find("mpi"))
        return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "this process was started by an MPI launcher (%s is set), but this build of "
                      "dtrain has no MPI (configured with DTRAIN_WITH_MPI=OFF or without MPI found): rebuild it with "
                      "MPI, start the job with torchrun or srun (the tcp bootstrap), or set DTRAIN_BOOTSTRAP=none to "
                      "run each process on its own", var);
    *bo = dt_boot_detect();
    return DT_OK;
}

/* The transport for the open bootstrap's job: the one asked for (its probe
 * must accept the job), or the first of the table that accepts it. */
static int pick_transport(const dt_transport *want, const dt_transport **tp) {
    if (want) {
        int rc = want->probe();
        if (rc) {
            char msg[900];
            const char *m = dt_last_error(), *sep = strstr(m, ": ");
            snprintf(msg, sizeof msg, "%s", sep ? sep + 2 : m);
            return dt_error(rc, "dt_init", "DTRAIN_BACKEND=%s: %s", want->name, msg);
        }
        *tp = want;
        return DT_OK;
    }
    for (int i = 0; dt_transports[i]; i++)
        if (dt_transports[i]->probe() == DT_OK) {
            dt_clear_error();
            *tp = dt_transports[i];
            return DT_OK;
        }
    return dt_error(DT_ERR_UNSUPPORTED, "dt_init", "no transport of this build can serve this job");
}

/* The world communicator on transport tp: every rank of the bootstrap's job. */
static int make_world(const dt_transport *tp, dt_comm **out) {
    const dt_boot *b = dt_boot_get();
    int *wr = malloc(sizeof *wr * (size_t)b->size);
    if (!wr) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < b->size; i++) wr[i] = i;
    int rc = dt_comm_make(tp->ops, wr, b->size, b->rank, 0, 1, out);
    if (rc) return rc;
    rc = tp->world(*out);
    if (rc) { dt_comm_destroy(*out); *out = NULL; }
    return rc;
}

int dt_init(void) {
    if (dt_is_initialized()) return DT_ERR(DT_ERR_STATE, "dtrain is already initialised (dt_init called twice)");
    const dt_transport *want, *tp = NULL;
    const dt_boot_ops *bo;
    dt_settings s;
    int devpath;
    int rc = want_transport(&want);
    if (!rc) rc = want_boot(want, &bo);
    if (!rc) rc = dt_settings_read(&s);
    if (!rc) rc = dt_device_path_read(&devpath);
    if (!rc) rc = read_timeout();
    if (rc) return rc;
    if ((rc = dt_boot_open(bo))) return rc;
    const dt_boot *b = dt_boot_get();
    rc = pick_transport(want, &tp);
    /* the ranks must take the same path through every checked call */
    if (!rc) rc = dt_settings_agree(&s);
    if (!rc) {
        dt_settings_apply(&s);
        rc = make_world(tp, &g_world);
    }
    if (!rc) rc = dt_device_setup(g_world, devpath);
    if (!rc && b->size > 1) {
        rc = dt_wd_start();
        g_wd_on = rc == DT_OK;
    }
    if (rc) {
        char msg[1024], *sep;
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        dt_comm_destroy(g_world);
        g_world = NULL;
        dt_device_teardown();
        if (tp && tp->finalize) tp->finalize();
        dt_boot_close(0);
        /* the message of the failure, not of the clean-up */
        if ((sep = strstr(msg, ": "))) { *sep = '\0'; return dt_error(rc, msg, "%s", sep + 2); }
        return dt_error(rc, "dt_init", "%s", msg);
    }
    g_tp = tp;
    dt_comm_set_identity(g_world, 0);
    dt_comm_set_world(g_world);
    return DT_OK;
}

int dt_finalize(void) {
    if (!dt_is_initialized())
        return DT_ERR(DT_ERR_STATE, "dtrain is not initialised (dt_finalize without dt_init, or called twice)");
    int rc = dt_engine_shutdown();
    if (g_wd_on) {
        /* peers take this rank's exit as normal from here on, and a peer
         * still waiting for one of its calls learns that it left; freeing
         * the communicators (collective for shared windows) and leaving the
         * job (MPI_Finalize, the tcp bootstrap's last barrier) wait for
         * every rank and are watched like any blocking call */
        dt_wd_finalizing();
        dt_wd_op_begin(0, DT_OP_FINALIZE, 1, DT_FP_NONE, 0, -1, DT_FP_NONE, 0);
    }
    dt_comm_pool_clear();
    dt_comm_set_world(NULL);
    dt_comm_destroy(g_world);
    g_world = NULL;
    dt_device_teardown();
    if (g_tp->finalize) g_tp->finalize();
    g_tp = NULL;
    int rc2 = dt_boot_close(1);
    if (!rc) rc = rc2;
    if (g_wd_on) {
        dt_wd_op_end();
        dt_wd_stop();
        g_wd_on = 0;
    }
    dt_reg_clear();
    return rc;
}
