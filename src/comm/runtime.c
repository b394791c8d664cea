/* src/comm/runtime.c - dt_init / dt_finalize and the world communicator. */
#include <stdlib.h>
#include <string.h>
#include "comm/comm_internal.h"
#include "coll/engine.h"
#include "core/error.h"

static dt_comm *g_world;
static int g_initialized;
static int g_mpi_used;          /* the MPI backend was used by this process */
static int g_mpi_we_init;       /* dt_init called MPI_Init_thread */

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

    int rc;
    if (use_mpi) {
        if (g_mpi_used && g_mpi_we_init)
            return DT_ERR(DT_ERR_STATE, "MPI cannot be initialised again after dt_finalize finalised it");
        rc = dt_mpi_world_create(&g_world, &g_mpi_we_init);
        if (rc) return rc;
        g_mpi_used = 1;
    } else {
        rc = dt_comm_make_standalone(0, 1, 0, 1, &g_world);
        if (rc) return rc;
    }
    g_initialized = 1;
    return DT_OK;
}

int dt_finalize(void) {
    if (!g_initialized) return DT_ERR(DT_ERR_STATE, "dtrain is not initialised (dt_finalize without dt_init, or called twice)");
    int rc = dt_engine_shutdown();
    dt_pool_clear();
    int is_mpi = g_world->ops == &dt_backend_mpi;
    dt_comm_destroy(g_world);
    g_world = NULL;
    g_initialized = 0;
    if (is_mpi) {
        int rc2 = dt_mpi_finalize(g_mpi_we_init);
        if (!rc) rc = rc2;
    }
    return rc;
}
