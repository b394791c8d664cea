/* src/bootstrap/mpi/boot_mpi.c - the bootstrap of jobs started by an MPI
 * launcher: MPI_Init_thread (MPI_THREAD_SERIALIZED, unless the application
 * initialised MPI itself; then dtrain leaves finalisation to it), the ranks
 * of MPI_COMM_WORLD, hosts from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
 * (the ranks that can share memory), and its exchanges on a duplicate of
 * MPI_COMM_WORLD of its own. Abort ends this process without calling MPI
 * (mb_abort says why); the launcher and the other ranks' watchdogs end the
 * rest of the job. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "core/error.h"

typedef struct mpi_boot {
    MPI_Comm comm;
    int we_init; /* dtrain called MPI_Init_thread: it finalises */
} mpi_boot;

static int fail(int rc, const char *call) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return dt_error(DT_ERR_BACKEND, call, "MPI error: %s", msg);
}
#define TRY(call, name) do { int mrc_ = (call); if (mrc_ != MPI_SUCCESS) { rc = fail(mrc_, name); goto out; } } while (0)

static int mb_detect(void) { return dt_launch_detect(NULL) == DT_LAUNCH_MPI; }

static int mb_open(dt_boot *b) {
    int inited = 0, fin = 0, rc = DT_OK;
    MPI_Finalized(&fin);
    if (fin) return dt_error(DT_ERR_STATE, "dt_init", "MPI was finalised (by dt_finalize or the application): it cannot be initialised again");
    mpi_boot *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    m->comm = MPI_COMM_NULL;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        int mrc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (mrc != MPI_SUCCESS) { free(m); return fail(mrc, "MPI_Init_thread"); }
        m->we_init = 1;
    }
    MPI_Comm local = MPI_COMM_NULL;
    int rank = 0, size = 1, leader = 0;
    uint64_t *keys = NULL, mine;
    TRY(MPI_Comm_dup(MPI_COMM_WORLD, &m->comm), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &rank);
    MPI_Comm_size(m->comm, &size);
    /* a host = the ranks MPI lets share memory; its key: its lowest rank */
    TRY(MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
    TRY(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, local), "MPI_Allreduce");
    keys = malloc(sizeof *keys * (size_t)size);
    if (!keys) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory for the host keys of %d ranks", size); goto out; }
    mine = (uint64_t)leader;
    TRY(MPI_Allgather(&mine, 1, MPI_UINT64_T, keys, 1, MPI_UINT64_T, m->comm), "MPI_Allgather");
out:
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    if (rc) {
        free(keys);
        if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
        if (m->we_init) MPI_Finalize();
        free(m);
        return rc;
    }
    b->rank = rank;
    b->size = size;
    b->hostkey = keys;
    b->impl = m;
    return DT_OK;
}

static int mb_allgather(dt_boot *b, const void *mine, void *all, size_t bytes) {
    mpi_boot *m = b->impl;
    int rc = DT_OK;
    if (bytes > (size_t)INT32_MAX) return DT_ERR(DT_ERR_INVALID, "%zu bytes per rank is more than MPI can count", bytes);
    const void *src = (const char *)all + (size_t)b->rank * bytes == (const char *)mine ? MPI_IN_PLACE : mine;
    TRY(MPI_Allgather(src, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->comm), "MPI_Allgather");
out:
    return rc;
}

static int mb_barrier(dt_boot *b) {
    mpi_boot *m = b->impl;
    int rc = DT_OK;
    TRY(MPI_Barrier(m->comm), "MPI_Barrier");
out:
    return rc;
}

/* The watchdog's thread calls this (dt_boot_abort) while the application's
 * thread may be inside MPI: in the very collective that stalled, or in one
 * whose peer died. At MPI_THREAD_SERIALIZED, the level dtrain asks for, no
 * second thread may call MPI then, MPI_Abort included; with Open MPI 4.1 such
 * an MPI_Abort crashed now and then (SIGSEGV in opal_show_help_yylex: its
 * message and the TCP transport's "peer hung up", printed by the other thread,
 * parsed at once by a parser that is not reentrant). So the process ends
 * itself without MPI, with status `code`. mpirun ends the job when a rank
 * exits non-zero before MPI_Finalize; where the launcher would not
 * (mpirun --mca orte_enable_recovery 1, others), the other ranks' watchdogs
 * see this rank lost and end too, and the other hosts' watchdogs were told
 * before (wd_net.c). */
static void mb_abort(dt_boot *b, int code) {
    (void)b;
    _exit(code);
}

static int mb_close(dt_boot *b, int clean) {
    mpi_boot *m = b->impl;
    int rc = DT_OK, fin = 0;
    if (!m) return DT_OK;
    MPI_Finalized(&fin);
    if (!fin && m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    if (m->we_init && !fin) TRY(MPI_Finalize(), "MPI_Finalize");
out:
    free(m);
    b->impl = NULL;
    return rc;
}

const dt_boot_ops dt_boot_mpi = {
    .name = "mpi",
    .detect = mb_detect,
    .open = mb_open,
    .allgather = mb_allgather,
    .barrier = mb_barrier,
    .abort = mb_abort,
    .close = mb_close,
};
