/* src/core/mem.h - internal: how components report memory to the accounting
 * of include/dtrain/mem.h (which users read), and the reset the tests use. */
#ifndef DT_CORE_MEM_H
#define DT_CORE_MEM_H

#include "dtrain/mem.h"

/* Add (bytes > 0) or release (bytes < 0). Unknown categories are ignored. */
void dt_mem_add(dt_mem_category c, long long bytes);
/* The same, counted as device memory too when device != 0 (release with the
 * same device flag). */
void dt_mem_add_on(dt_mem_category c, long long bytes, int device);
/* Tests only: zero all counters (current and peak), whatever is still held. */
void dt_mem_reset(void);

#endif
