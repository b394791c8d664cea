/* src/core/mem.c - process-wide memory accounting counters: every category's
 * bytes, and the part of them in device memory. */
#include <stdatomic.h>
#include "core/mem.h"

static _Atomic long long g_cur[DT_MEM_NUM], g_peak[DT_MEM_NUM];
static _Atomic long long g_dcur[DT_MEM_NUM], g_dpeak[DT_MEM_NUM]; /* device memory's part */

static void add(_Atomic long long *cur, _Atomic long long *peak, long long bytes) {
    long long now = atomic_fetch_add(cur, bytes) + bytes;
    long long p = atomic_load(peak);
    while (now > p && !atomic_compare_exchange_weak(peak, &p, now)) {
    }
}

void dt_mem_add(dt_mem_category c, long long bytes) {
    if ((unsigned)c >= DT_MEM_NUM) return;
    add(&g_cur[c], &g_peak[c], bytes);
}

void dt_mem_add_on(dt_mem_category c, long long bytes, int device) {
    if ((unsigned)c >= DT_MEM_NUM) return;
    add(&g_cur[c], &g_peak[c], bytes);
    if (device) add(&g_dcur[c], &g_dpeak[c], bytes);
}

long long dt_mem_current(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_cur[c]) : 0; }
long long dt_mem_peak(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_peak[c]) : 0; }
long long dt_mem_device_current(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_dcur[c]) : 0; }
long long dt_mem_device_peak(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_dpeak[c]) : 0; }

const char *dt_mem_category_name(dt_mem_category c) {
    static const char *const n[DT_MEM_NUM] = {"params", "grads", "optimizer", "comm", "gathered",
                                                 "activations"};
    return (unsigned)c < DT_MEM_NUM ? n[c] : "?";
}

void dt_mem_reset(void) {
    for (int i = 0; i < DT_MEM_NUM; i++) {
        atomic_store(&g_cur[i], 0);
        atomic_store(&g_peak[i], 0);
        atomic_store(&g_dcur[i], 0);
        atomic_store(&g_dpeak[i], 0);
    }
}

void dt_mem_reset_peaks(void) {
    for (int i = 0; i < DT_MEM_NUM; i++) {
        atomic_store(&g_peak[i], atomic_load(&g_cur[i]));
        atomic_store(&g_dpeak[i], atomic_load(&g_dcur[i]));
    }
}
