/* src/core/mem.c - process-wide memory accounting counters. */
#include <stdatomic.h>
#include "dtrain/mem.h"

static _Atomic long long g_cur[DT_MEM_NUM], g_peak[DT_MEM_NUM];

void dt_mem_add(dt_mem_category c, long long bytes) {
    if ((unsigned)c >= DT_MEM_NUM) return;
    long long now = atomic_fetch_add(&g_cur[c], bytes) + bytes;
    long long p = atomic_load(&g_peak[c]);
    while (now > p && !atomic_compare_exchange_weak(&g_peak[c], &p, now)) {
    }
}

long long dt_mem_current(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_cur[c]) : 0; }
long long dt_mem_peak(dt_mem_category c) { return (unsigned)c < DT_MEM_NUM ? atomic_load(&g_peak[c]) : 0; }

const char *dt_mem_category_name(dt_mem_category c) {
    static const char *const n[DT_MEM_NUM] = {"params", "grads", "optimizer", "comm", "gathered",
                                                 "activations"};
    return (unsigned)c < DT_MEM_NUM ? n[c] : "?";
}

void dt_mem_reset(void) {
    for (int i = 0; i < DT_MEM_NUM; i++) { atomic_store(&g_cur[i], 0); atomic_store(&g_peak[i], 0); }
}

void dt_mem_reset_peaks(void) {
    for (int i = 0; i < DT_MEM_NUM; i++) atomic_store(&g_peak[i], atomic_load(&g_cur[i]));
}
