/* src/runtime/runtime.h - internal: the runtime layer (dt_init/dt_finalize,
 * the rank_list communicator pool, dt_comm_alloc_shared), on top of the
 * collectives' engine. */
#ifndef DT_RUNTIME_H
#define DT_RUNTIME_H

/* comm_pool.c: free every cached sub-communicator (dt_finalize). */
void dt_comm_pool_clear(void);

#endif
