/* dtrain/comm.h - runtime start-up and communicators.
 *
 * dt_init() builds the world communicator. How the processes of the job find
 * each other (the bootstrap) follows from the launcher's environment:
 *   - mpirun / mpiexec of Open MPI or MPICH, srun with PMI: MPI (bootstrap and
 *     transport "mpi"), in builds with MPI;
 *   - torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or srun
 *     without MPI (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID in a job step,
 *     plus MASTER_ADDR/MASTER_PORT or DTRAIN_BOOTSTRAP_ADDR=host:port): the
 *     "tcp" bootstrap, a TCP rendezvous through rank 0 that needs no MPI. The
 *     world then has all its attributes and rank_list groups, on the "void"
 *     transport: host-memory collectives between processes return
 *     DT_ERR_UNSUPPORTED (they need the mpi transport); device memory moves
 *     over NCCL when every rank has a GPU of its own (coll.h, "Device memory");
 *   - no launcher: standalone, a world of 1 on the "void" transport.
 * DTRAIN_BOOTSTRAP=auto|mpi|tcp|none and DTRAIN_BACKEND=auto|mpi|void (default
 * auto) override the detection; DTRAIN_BACKEND=mpi implies the mpi bootstrap.
 * DTRAIN_BACKEND=void keeps the launcher's bootstrap: under mpirun -np 2 the
 * world has 2 ranks (0 and 1) on the void transport, whose collectives
 * between processes return DT_ERR_UNSUPPORTED; DTRAIN_BOOTSTRAP=none makes
 * every process a world of its own (each then rank 0 of 1: their output
 * files collide, so only on purpose).
 *
 * Sub-communicators come from a rank_list: a list of disjoint groups of world
 * ranks, e.g. [[0,1],[2,3]]. Rank r joins the group that lists it; a rank in
 * no listed group is standalone (size 1, group_id -1). The sub-communicator for
 * one rank_list is created on first use (a collective call over the world:
 * every world rank must make it, with the same rank_list) and cached in a pool
 * keyed by the canonical rank_list (each group sorted ascending; group order
 * kept, since it defines group_id). Inside a group, ranks are numbered by
 * ascending world rank. Communicators returned by this API are owned by the
 * library and stay valid until dt_comm_release() of that rank_list or
 * dt_finalize(); never free them. Creation (and release) is a checked
 * operation on the world: it takes the world's next collective sequence
 * number, so a rank that calls a collective where the others create a
 * communicator gets DT_ERR_MISMATCH on every rank (reliability.h).
 *
 * Attribute meaning (seed 003's table), for a communicator C seen from rank r:
 *   rank/size            r's index in C / number of ranks in C
 *   local_rank/size      the same, counting only C's ranks on r's host (the
 *                        ranks that can share memory: MPI_COMM_TYPE_SHARED
 *                        under MPI; the same host name and boot id, or
 *                        DTRAIN_HOSTID, under the tcp bootstrap)
 *   world_rank/size      r's index in the world / world size (same for all C)
 *   group_id/group_size  index of r's group in the rank_list / number of listed
 *                        groups; -1 if r is in no listed group. The world
 *                        communicator has group_id 0, group_size 1.
 */
#ifndef DTRAIN_COMM_H
#define DTRAIN_COMM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;

typedef struct dt_comm_info {
    int rank, size;
    int local_rank, local_size;
    int world_rank, world_size;
    int group_id, group_size;
} dt_comm_info;

/* Start the runtime. Calls MPI_Init_thread when the MPI bootstrap is chosen
 * (unless MPI is already initialised by the caller, in which case dtrain uses
 * it and leaves finalisation to the caller). With more than one process it
 * also agrees on the runtime settings (DTRAIN_CHECK_COLLECTIVES, coll.h's
 * DTRAIN_SHM_*) over the world and starts the watchdog thread (stalls and
 * dead ranks, dtrain/reliability.h). Under the tcp bootstrap it waits for
 * every rank to join, at most DTRAIN_BOOTSTRAP_TIMEOUT seconds (default 300;
 * 0: no limit). Errors: DT_ERR_STATE if already initialised (or MPI was
 * finalised); DT_ERR_BACKEND if MPI or the network fails;
 * DT_ERR_UNSUPPORTED if DTRAIN_BACKEND or DTRAIN_BOOTSTRAP asks for one this
 * build lacks or that cannot serve the job (also: started by an MPI launcher
 * in a build without MPI); DT_ERR_INVALID (naming the variable) for a
 * malformed DTRAIN_TIMEOUT, DTRAIN_TIMEOUT_S, DTRAIN_CHECK_COLLECTIVES,
 * DTRAIN_CHECK_INLINE_MAX, DTRAIN_SHM_ALLREDUCE, DTRAIN_SHM_MIN_BYTES (coll.h),
 * launcher variable (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
 * SLURM_*, DTRAIN_BOOTSTRAP_ADDR) or DTRAIN_BOOTSTRAP_TIMEOUT; under the tcp
 * bootstrap DT_ERR_TIMEOUT when rank 0 cannot be reached or ranks are missing
 * (naming them), DT_ERR_MISMATCH on every rank that joined when ranks were
 * started with different world sizes, twice as one rank, or with a
 * LOCAL_RANK that is not their place on their host. When all ranks of
 * the world share one host, it also creates the world's shared-memory window
 * (2 x 2 MiB + 64 bytes per rank; Open MPI maps it from a /dev/shm file it
 * unlinks as soon as every rank has mapped it, so nothing is left behind);
 * so does every sub-communicator whose members share one host (communicators
 * with the same members share one window).
 * CUDA builds: dt_init also decides, for the whole job, the path of device
 * memory (coll.h, "Device memory"; DTRAIN_DEVICE_PATH=auto|nccl|staged, a
 * malformed value DT_ERR_INVALID): when every rank has a CUDA device of its
 * own it creates the world's NCCL communicator on the CURRENT device (call
 * cudaSetDevice first, or set DTRAIN_CUDA_DEVICE=local: dt_init then makes
 * local_rank % the visible devices current before it looks at devices; the
 * default DTRAIN_CUDA_DEVICE=current leaves the caller's; another value is
 * DT_ERR_INVALID) with ncclCommInitRank, the unique id sent over the
 * bootstrap; sub-communicators get theirs from ncclCommSplit. With
 * DTRAIN_DEVICE_PATH=nccl it fails (DT_ERR_UNSUPPORTED, or DT_ERR_BACKEND with
 * NCCL's message, on every rank) when NCCL cannot serve the job. */
int dt_init(void);

/* Stop the runtime: waits for outstanding asynchronous work, frees every
 * communicator, leaves the job (finalises MPI if dt_init initialised it; the
 * tcp bootstrap's last barrier): a blocking wait for every rank, watched by
 * the timeout like any collective; stops the watchdog. From its start, other
 * ranks take this rank's exit as normal; a process that ends without
 * dt_finalize is reported as a lost rank. DT_ERR_STATE if not initialised
 * (including a second dt_finalize). dt_init may be called again afterwards,
 * except under MPI (MPI cannot be re-initialised). */
int dt_finalize(void);

/* 1 if dt_init succeeded and dt_finalize has not been called, else 0. */
int dt_is_initialized(void);

/* The world communicator, or NULL before dt_init / after dt_finalize. */
dt_comm *dt_comm_world(void);

/* All attributes at once. DT_ERR_INVALID on NULL arguments. */
int dt_comm_info_get(const dt_comm *comm, dt_comm_info *info);
/* Single attributes; a negative dt_status if comm is NULL. */
int dt_comm_rank(const dt_comm *comm);
int dt_comm_size(const dt_comm *comm);
/* The transport of host memory: "void" or "mpi"; "?" for NULL. */
const char *dt_comm_backend(const dt_comm *comm);
/* The path device-memory collectives take on comm (coll.h, "Device memory"):
 * "nccl" (comm has an NCCL communicator), "staged" (through pinned host
 * memory and the host transport), "local" (a group of one rank without an
 * NCCL communicator: copies on the stream), or "none" (this process has no
 * CUDA device, or the build no CUDA: every buffer is host memory); "?" for
 * NULL. */
const char *dt_comm_device_path(const dt_comm *comm);

/* Index in comm of the process with world rank `world_rank`, or a negative
 * dt_status (DT_ERR_INVALID, message set) if that process is not in comm. */
int dt_comm_group_rank(const dt_comm *comm, int world_rank);
/* World rank of comm's member number `rank`, or DT_ERR_INVALID. */
int dt_comm_world_rank_of(const dt_comm *comm, int rank);
/* The host of comm's member number `rank`: hosts are numbered 0, 1, ... in
 * the order of their lowest world rank (the same numbers on every rank and
 * for every communicator); local_rank/local_size count the members with this
 * rank's host number. 0 for every member when the job has one host or runs
 * standalone. DT_ERR_INVALID for a NULL comm or a rank out of range. */
int dt_comm_host_of(const dt_comm *comm, int rank);

/* The sub-communicator for a rank_list given flat: `ranks` holds the groups
 * one after another, group g having group_lens[g] entries. Collective over
 * the world communicator. Errors (identical on every rank, never a hang):
 * ngroups < 1, an empty group, a rank outside [0, world_size), a rank listed
 * twice (DT_ERR_INVALID); ranks that passed different rank_lists
 * (DT_ERR_MISMATCH). On success *out is owned by the pool. */
int dt_comm_from_rank_list(const int *ranks, const int *group_lens, int ngroups,
                           dt_comm **out);

/* The same from text "[[0,1],[2,3]]" (whitespace allowed). */
int dt_comm_from_rank_list_str(const char *rank_list, dt_comm **out);

/* Parse rank_list text into flat arrays; nranks and ngroups receive the
 * counts. DT_ERR_INVALID on syntax errors or when the capacities are too small. Only
 * syntax is checked here (duplicates and ranges are checked on use). */
int dt_rank_list_parse(const char *text, int *ranks, int max_ranks, int *nranks,
                       int *group_lens, int max_groups, int *ngroups);

/* Number of sub-communicators currently cached in the pool. */
int dt_comm_pool_size(void);

/* Release a sub-communicator from the pool: its transport state (MPI
 * communicators for its data and its check channel, and its shared-memory
 * window unless another communicator with the same members still uses it)
 * is freed, and the next dt_comm_from_rank_list* of that rank_list creates
 * it anew. The pool has no size limit of its own:
 * a program that uses many distinct rank_lists releases the ones it is done
 * with. Collective over the WORLD, like creation: every world rank calls it
 * for the communicator it got from the same rank_list (ranks in no group of
 * it too), in the same order relative to the world's collectives; it waits
 * for this rank's outstanding asynchronous work first. Afterwards `comm`
 * is invalid on every rank (as after free(); dt_finalize releases the rest).
 * Errors: DT_ERR_INVALID for NULL, the world, or a pointer that is not a
 * pooled communicator (released already); DT_ERR_MISMATCH on every rank
 * when ranks release different rank_lists, or some call a collective on the
 * world instead (the communicator then stays); DT_ERR_STATE before dt_init. */
int dt_comm_release(dt_comm *comm);

/* Memory for tensors that comm reduces in place, e.g. a model's flat gradient
 * buffer (what PyTorch and NCCL call registered / symmetric memory).
 * *ptr receives `bytes` of zeroed memory, aligned to 4096 bytes, owned by the
 * caller until dt_comm_free_shared. On an MPI communicator whose members
 * share one host and use the shared-memory allreduce (coll.h), it lies in a
 * window every member can load directly: a blocking or asynchronous
 * dt_allreduce (any op, f32 f64 i8 u8 i32 i64; not avg on i8 u8 i32) whose
 * buffer is in place and lies in such memory, at the SAME offset and size on
 * every member, is reduced straight between the members' buffers: no copies
 * through the staging buffers, about half the memory traffic, and the same
 * bits as otherwise. Likewise (512 KiB and up in all) a dt_reduce_scatter,
 * dt_allgather or dt_broadcast whose input (the root's, for a broadcast)
 * lies in such memory on every member, at any offset: each member reads
 * straight from the others' memory, one copy per byte, into its output.
 * Anywhere else (one rank, several hosts, the path
 * switched off, /dev/shm short of room on some member) it is plain memory and
 * everything works as usual.
 * Collective over comm: every member calls it, in the same order relative to
 * comm's collectives, with the same bytes. Errors: DT_ERR_INVALID (NULL
 * ptr or comm, bytes 0), DT_ERR_NOMEM, DT_ERR_BACKEND. */
int dt_comm_alloc_shared(dt_comm *comm, size_t bytes, void **ptr);
/* Give back memory from dt_comm_alloc_shared on the same comm. Not
 * collective: shared windows themselves are released with the communicator
 * (dt_finalize), so their memory stays mapped until then. NULL: no-op.
 * DT_ERR_INVALID for a pointer that did not come from dt_comm_alloc_shared on
 * comm or was already given back. */
int dt_comm_free_shared(dt_comm *comm, void *ptr);

#ifdef __cplusplus
}
#endif
#endif
