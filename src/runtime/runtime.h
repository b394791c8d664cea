/* src/runtime/runtime.h - internal: the runtime layer (dt_init/dt_finalize,
 * the rank_list communicator pool, dt_comm_alloc_shared, the device path's
 * set-up), on top of the collectives' engine. */
#ifndef DT_RUNTIME_H
#define DT_RUNTIME_H

#include <stdint.h>
#include "transport/transport.h"

/* comm_pool.c: free every cached sub-communicator (dt_finalize). */
void dt_comm_pool_clear(void);

/* ---- device_setup.c: the path of device memory (DTRAIN_DEVICE_PATH) ---- */
enum { DT_DEVPATH_AUTO = 0, DT_DEVPATH_NCCL = 1, DT_DEVPATH_STAGED = 2 };

/* DTRAIN_DEVICE_PATH (and DTRAIN_DEVICE_BUFFER_CACHE, kept for
 * dt_device_setup): DT_ERR_INVALID naming it when malformed. */
int dt_device_path_read(int *path);

/* What each rank tells the others at dt_init (one bootstrap allgather). */
typedef struct dt_dev_info {
    int32_t path;      /* its DTRAIN_DEVICE_PATH */
    int32_t ndev;      /* devices it sees (0: none) */
    int32_t dev;       /* its current device */
    int32_t probe_ok;  /* the device transport can run there */
    uint64_t hostkey;  /* the bootstrap's host key */
    unsigned char id[16]; /* the GPU's identity (UUID) */
} dt_dev_info;

/* The verdict from every rank's info (all[n]): 1 = the device transport
 * `tname` (NULL: the build has none) serves the job, 0 = staged; *path the
 * agreed setting; why[cap] the reason when 0, or for 1 under a forced nccl
 * what the transport is about to try (ranks sharing a GPU). Pure. */
int dt_dev_decide(const dt_dev_info *all, int n, const char *tname, int *path, char *why, size_t cap);

/* dt_init, after the world exists: probe the device runtime, decide, set up
 * the device transport on the world (collective). DT_OK also when device
 * memory is staged; an error only when DTRAIN_DEVICE_PATH=nccl cannot be
 * served (or the bootstrap fails). */
int dt_device_setup(dt_comm *world, int path);
/* dt_finalize, after every communicator is destroyed. */
void dt_device_teardown(void);

#endif
