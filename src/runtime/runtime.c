/* src/runtime/runtime.c - dt_init / dt_finalize, the world communicator and the
 * reliability settings (dtrain/reliability.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "comm/comm_internal.h"
#include "comm/watchdog.h"
#include "coll/engine.h"
#include "core/error.h"
#include "dtrain/reliability.h"

/* Default piggy-back limit: allreduces up to this many bytes carry their
 * fingerprint with the data (measured crossover, see reliability.h). */
#define DT_INLINE_MAX_DEFAULT ((size_t)64 << 10)
#define DT_INLINE_MAX_LIMIT ((size_t)64 << 20)

static dt_comm *g_world;
static int g_initialized;
static int g_mpi_used;          /* the MPI backend was used by this process */
static int g_mpi_we_init;       /* dt_init called MPI_Init_thread */
static int g_check_on = 1;      /* fingerprint checks (effective, after agreement) */
static size_t g_inline_max = DT_INLINE_MAX_DEFAULT;
static int g_timeout_user;      /* dt_set_timeout was called: it wins over the environment */
#define DT_SHM_MIN_DEFAULT ((size_t)16 << 10)
static int g_shm_on = 1;        /* shared-memory allreduce (effective, after agreement) */
static size_t g_shm_min = DT_SHM_MIN_DEFAULT;
#define DT_SHM_CHUNK_DEFAULT ((size_t)1 << 20)
static size_t g_shm_chunk = DT_SHM_CHUNK_DEFAULT;
#define DT_SHM_STREAM_DEFAULT ((size_t)16 << 20)
static size_t g_shm_stream = DT_SHM_STREAM_DEFAULT; /* local: the bits do not depend on it */

int dt_rel_check_on(void) { return g_check_on; }
size_t dt_rel_inline_max(void) { return g_inline_max; }
int dt_rel_shm_on(void) { return g_shm_on; }
size_t dt_rel_shm_min(void) { return g_shm_min; }
size_t dt_rel_shm_chunk(void) { return g_shm_chunk; }
size_t dt_rel_shm_stream(void) { return g_shm_stream; }
void dt_rel_set_for_testing(int check, size_t inline_max) {
    g_check_on = check;
    g_inline_max = inline_max;
}

static int parse_bool(const char *v, int *out) {
    static const char *const t[] = {"1", "true", "yes", "on"}, *const f[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, t[i]) == 0) { *out = 1; return 0; }
        if (strcasecmp(v, f[i]) == 0) { *out = 0; return 0; }
    }
    return -1;
}

static int env_bool(const char *var, int *on) {
    const char *v = getenv(var);
    *on = 1;
    if (!v || !*v) return DT_OK;
    if (parse_bool(v, on))
        return DT_ERR(DT_ERR_INVALID, "%s='%s' is not a boolean (expected 1/0, true/false, yes/no, on/off)", var, v);
    return DT_OK;
}
static int env_check(int *on) { return env_bool("DTRAIN_CHECK_COLLECTIVES", on); }

static int env_number(const char *var, double lo, double hi, double *out, int *found) {
    const char *v = getenv(var);
    *found = 0;
    if (!v || !*v) return DT_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    while (*end == ' ' || *end == '\t') end++;
    if (end == v || *end || errno || !isfinite(x) || x < lo || x > hi)
        return DT_ERR(DT_ERR_INVALID, "%s='%s' is not a number in [%g, %g]", var, v, lo, hi);
    *out = x;
    *found = 1;
    return DT_OK;
}

/* DTRAIN_CHECK_COLLECTIVES, DTRAIN_CHECK_INLINE_MAX, DTRAIN_SHM_ALLREDUCE,
 * DTRAIN_SHM_MIN_BYTES, DTRAIN_SHM_CHUNK_BYTES, DTRAIN_SHM_STREAM_BYTES,
 * DTRAIN_TIMEOUT (or the config key's DTRAIN_TIMEOUT_S), validated before
 * anything starts. */
static int read_settings(int *check, size_t *inline_max, int *shm_on, size_t *shm_min, size_t *shm_chunk,
                         size_t *shm_stream) {
    int rc = env_check(check), found;
    if (rc) return rc;
    double x = (double)DT_INLINE_MAX_DEFAULT;
    rc = env_number("DTRAIN_CHECK_INLINE_MAX", 0, (double)DT_INLINE_MAX_LIMIT, &x, &found);
    if (rc) return rc;
    *inline_max = (size_t)x;
    if ((rc = env_bool("DTRAIN_SHM_ALLREDUCE", shm_on))) return rc;
    x = (double)DT_SHM_MIN_DEFAULT;
    rc = env_number("DTRAIN_SHM_MIN_BYTES", 0, 1e15, &x, &found);
    if (rc) return rc;
    *shm_min = (size_t)x;
    x = (double)DT_SHM_CHUNK_DEFAULT;
    rc = env_number("DTRAIN_SHM_CHUNK_BYTES", 4096, (double)((size_t)1 << 30), &x, &found);
    if (rc) return rc;
    *shm_chunk = ((size_t)x + 63) & ~(size_t)63; /* whole cache lines */
    x = (double)DT_SHM_STREAM_DEFAULT;
    rc = env_number("DTRAIN_SHM_STREAM_BYTES", 0, 1e15, &x, &found);
    if (rc) return rc;
    *shm_stream = (size_t)x;
    if (g_timeout_user) return DT_OK;
    double t = 300;
    rc = env_number("DTRAIN_TIMEOUT", 0, 1e9, &t, &found);
    if (rc) return rc;
    if (!found) {
        rc = env_number("DTRAIN_TIMEOUT_S", 0, 1e9, &t, &found);
        if (rc) return rc;
    }
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
    if (g_initialized) return g_check_on;
    int on = 1;
    if (env_check(&on)) { dt_clear_error(); return 1; }
    return on;
}

int dt_is_initialized(void) { return g_initialized; }

dt_comm *dt_comm_world(void) { return g_initialized ? g_world : NULL; }

/* Launcher detection: the variables Open MPI, MPICH/Hydra, MVAPICH, PMIx and
 * Slurm's PMI set in every process they start. */
static int dt_under_launcher(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK",
                                       "PMIX_RANK", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE",
                                       "HYDI_CONTROL_FD"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int dt_init(void) {
    if (g_initialized) return DT_ERR(DT_ERR_STATE, "dtrain is already initialised (dt_init called twice)");
    const char *want = getenv("DTRAIN_BACKEND");
    int use_mpi;
    if (!want || !*want || strcmp(want, "auto") == 0) use_mpi = dt_under_launcher();
    else if (strcmp(want, "mpi") == 0) use_mpi = 1;
    else if (strcmp(want, "void") == 0) use_mpi = 0;
    else return DT_ERR(DT_ERR_UNSUPPORTED, "DTRAIN_BACKEND='%s' is not a backend of this build (expected auto, mpi or void)", want);

    int check = 1, shm_on = 1;
    size_t inline_max = DT_INLINE_MAX_DEFAULT, shm_min = DT_SHM_MIN_DEFAULT, shm_chunk = DT_SHM_CHUNK_DEFAULT;
    size_t shm_stream = DT_SHM_STREAM_DEFAULT;
    int rc = read_settings(&check, &inline_max, &shm_on, &shm_min, &shm_chunk, &shm_stream);
    if (rc) return rc;
    g_shm_stream = shm_stream;
    if (use_mpi) {
        if (g_mpi_used && g_mpi_we_init)
            return DT_ERR(DT_ERR_STATE, "MPI cannot be initialised again after dt_finalize finalised it");
        rc = dt_mpi_world_create(&g_world, &g_mpi_we_init);
        if (rc) return rc;
        g_mpi_used = 1;
        /* the ranks must take the same path through every checked call */
        if (g_world->info.size > 1) rc = dt_mpi_agree_settings(g_world, &check, &inline_max, &shm_on, &shm_min, &shm_chunk);
        g_shm_on = shm_on;
        g_shm_min = shm_min;
        g_shm_chunk = shm_chunk;
        if (!rc && g_world->info.size > 1) rc = dt_mpi_shm_attach(g_world, NULL);
        if (!rc && g_world->info.size > 1) rc = dt_wd_start(g_world);
        if (rc) {
            dt_comm_destroy(g_world);
            g_world = NULL;
            dt_mpi_finalize(g_mpi_we_init);
            return rc;
        }
    } else {
        rc = dt_comm_make_standalone(0, 1, 0, 1, &g_world);
        if (rc) return rc;
    }
    g_check_on = check;
    g_inline_max = inline_max;
    dt_comm_set_identity(g_world, 0);
    g_initialized = 1;
    return DT_OK;
}

int dt_finalize(void) {
    if (!g_initialized) return DT_ERR(DT_ERR_STATE, "dtrain is not initialised (dt_finalize without dt_init, or called twice)");
    int rc = dt_engine_shutdown();
    dt_pool_clear();
    int is_mpi = g_world->ops == &dt_backend_mpi;
    if (is_mpi) {
        /* peers take this rank's exit as normal from here on; MPI_Finalize
         * waits for every rank and is watched like any blocking call */
        dt_wd_finalizing();
        dt_wd_op_begin(0, DT_WD_FINALIZE, 1, DT_FP_NONE, 0, -1, DT_FP_NONE, 0);
    }
    dt_comm_destroy(g_world);
    g_world = NULL;
    g_initialized = 0;
    if (is_mpi) {
        int rc2 = dt_mpi_finalize(g_mpi_we_init);
        if (!rc) rc = rc2;
        dt_wd_op_end();
        dt_wd_stop();
    }
    dt_reg_clear();
    return rc;
}
