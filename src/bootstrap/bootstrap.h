/* src/bootstrap/bootstrap.h - internal: how the processes of a job find each
 * other, before and beside any transport.
 *
 * A bootstrap knows this process's rank in the job, the job's size and which
 * ranks share a host, and it can move a few bytes between all of them: an
 * allgather, a barrier (an allgather of nothing), and an abort that ends the
 * job. Nothing on the data path uses it; the runtime does (agreeing on the
 * settings at dt_init), the communicator cache (agreeing on a rank_list), the
 * watchdog (its shared-memory segment, the job abort) and transports that
 * need an out-of-band exchange to set themselves up (NCCL's unique id).
 *
 * Bootstraps of this build, in the order dt_init tries them when
 * DTRAIN_BOOTSTRAP is auto (the first whose `detect` says yes):
 *   mpi   under an MPI launcher (mpirun, mpiexec, srun with PMI): MPI_Init,
 *         MPI_COMM_WORLD (bootstrap/mpi/; only in builds with MPI);
 *   tcp   under torchrun or srun without MPI: rank, size and a rendezvous
 *         address from the environment (launch_env.c), a small TCP exchange
 *         through rank 0 (tcp.c);
 *   none  no launcher: a world of one process.
 * Adding one = one file (or folder) + one entry in bootstrap.c's table.
 *
 * One bootstrap is open per process at a time (dt_boot_open .. dt_boot_close);
 * the functions below act on it. Layers: core -> bootstrap -> transport ->
 * comm -> coll -> runtime. */
#ifndef DT_BOOTSTRAP_H
#define DT_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_boot dt_boot;

typedef struct dt_boot_ops {
    const char *name;
    /* 1 if this process was started by the kind of launcher this bootstrap
     * serves (reads the environment only). */
    int (*detect)(void);
    /* Join the job: set b->rank, b->size and b->hostkey[0..size) (ranks with
     * equal keys share a host; allocate it with malloc), b->impl. Collective
     * over the job. On failure a negative dt_status with a message naming
     * the cause; b is then left as it was. */
    int (*open)(dt_boot *b);
    /* all[r * bytes .. ) = rank r's `mine` for every rank r. Every rank
     * passes the same `bytes`. */
    int (*allgather)(dt_boot *b, const void *mine, void *all, size_t bytes);
    int (*barrier)(dt_boot *b);
    /* End every process of the job with exit status `code`, as far as this
     * bootstrap reaches (see each one). Called from any thread, also while
     * another thread is inside allgather/barrier. Never returns. */
    void (*abort)(dt_boot *b, int code);
    /* Leave the job. clean: every rank is closing (a normal end: where the
     * bootstrap needs one, a barrier first so that ranks leave together); 0:
     * this rank gives up alone (dt_init failed here). What abort uses must
     * stay valid afterwards (the watchdog's thread stops after the close); it
     * may be freed by the next open. */
    int (*close)(dt_boot *b, int clean);
} dt_boot_ops;

struct dt_boot {
    const dt_boot_ops *ops;
    int rank, size;
    int local_rank, local_size; /* this rank among the ranks of its host, by rank */
    uint64_t *hostkey;          /* [size] set by open */
    int *host;                  /* [size] host index of each rank: 0, 1, ... in order of first rank */
    int nhosts;
    void *impl;
};

/* The bootstraps of this build in detection order, NULL-terminated. */
extern const dt_boot_ops *const dt_bootstraps[];
/* The bootstrap named `name`, or NULL if this build has none of that name. */
const dt_boot_ops *dt_boot_find(const char *name);
/* "mpi, tcp or none": the names of this build's bootstraps, for messages. */
const char *dt_boot_names(char *buf, size_t cap);
/* The first bootstrap whose detect() says yes ("none" always does). */
const dt_boot_ops *dt_boot_detect(void);

/* Open `ops` as this process's bootstrap (collective over the job) and work
 * out the host map. DT_ERR_STATE if one is open. */
int dt_boot_open(const dt_boot_ops *ops);
/* The open bootstrap, or NULL. */
const dt_boot *dt_boot_get(void);
/* The open bootstrap's operations (DT_ERR_STATE if none is open). */
int dt_boot_allgather(const void *mine, void *all, size_t bytes);
int dt_boot_barrier(void);
/* End the job with status `code` (any thread; without an open bootstrap:
 * this process only). Under MPI this process ends itself without an MPI call
 * (boot_mpi.c says why) and the launcher or the other ranks' watchdogs end
 * the others. Never returns. */
_Noreturn void dt_boot_abort(int code);
/* Close the open bootstrap (no-op if none); clean as for dt_boot_ops.close. */
int dt_boot_close(int clean);

/* Host map of `n` keys: host[i] = index of key[i] among the distinct keys in
 * order of first appearance; returns the number of hosts. Used by open and
 * by tests. */
int dt_boot_host_map(const uint64_t *key, int n, int *host);

/* ---- launcher environments (launch_env.c) ---------------------------------
 * What the launcher of this process says, read from the environment. */
typedef enum dt_launcher {
    DT_LAUNCH_NONE = 0, /* no launcher variables */
    DT_LAUNCH_MPI,      /* an MPI launcher (Open MPI, MPICH/Hydra, MVAPICH, PMI/PMIx) */
    DT_LAUNCH_TORCHRUN, /* RANK / WORLD_SIZE (torchrun, torch.distributed.launch, or by hand) */
    DT_LAUNCH_SLURM     /* srun: SLURM_PROCID / SLURM_NTASKS in a job step */
} dt_launcher;

typedef struct dt_launch_env {
    dt_launcher kind;
    const char *var;      /* the variable that identified the launcher */
    int rank, size;
    int local_rank;       /* -1 if the launcher gives none */
    char addr[256];       /* rank 0's host (torchrun/slurm) */
    int port;
    const char *addr_var; /* where addr and port came from, for messages */
    const char *port_var;
} dt_launch_env;

/* Which launcher started this process (variables only, not validated). */
dt_launcher dt_launch_detect(const char **var);
/* Read and validate the torchrun or Slurm variables (the rendezvous address
 * from DTRAIN_BOOTSTRAP_ADDR=host:port, else MASTER_ADDR and MASTER_PORT).
 * DT_ERR_INVALID naming the variable and its value when one is missing or
 * malformed. */
int dt_launch_env_read(dt_launch_env *e);
/* 64-bit key of this process's host: hostname and kernel boot id, or
 * DTRAIN_HOSTID when set (for hosts that share both, or tests that pretend
 * to run on several hosts). */
uint64_t dt_launch_hostkey(void);

#endif
