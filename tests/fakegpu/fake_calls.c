/* tests/fakegpu/fake_calls.c - how often each function of the fake's CUDA
 * runtime and NCCL was called (fakegpu.h, "Calls"): a counter per function,
 * registered on its first call, so that tests and benchmarks can say which
 * CUDA and NCCL calls a dtrain call made. */
#include <pthread.h>
#include <string.h>
#include "fakegpu.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fk_counter *g_list;

void fk_count(fk_counter *c) {
    if (atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed) != 0) return;
    pthread_mutex_lock(&g_mu); /* its first call: onto the list */
    c->next = g_list;
    g_list = c;
    pthread_mutex_unlock(&g_mu);
}

long fk_calls(const char *name) {
    long n = 0;
    pthread_mutex_lock(&g_mu);
    for (const fk_counter *c = g_list; c; c = c->next)
        if (strcmp(c->name, name) == 0) n = atomic_load(&c->n);
    pthread_mutex_unlock(&g_mu);
    return n;
}

int fk_calls_snapshot(fk_call *out, int cap) {
    int n = 0;
    pthread_mutex_lock(&g_mu);
    for (const fk_counter *c = g_list; c; c = c->next, n++)
        if (n < cap) out[n] = (fk_call){c->name, c->lib, atomic_load(&c->n)};
    pthread_mutex_unlock(&g_mu);
    return n;
}

long fk_calls_since(const fk_call *before, int nbefore, fk_call *out, int cap, long *total) {
    fk_call now[FK_MAX_COUNTED];
    int n = fk_calls_snapshot(now, FK_MAX_COUNTED), k = 0;
    long sum[FK_LIB_N] = {0};
    if (n > FK_MAX_COUNTED) n = FK_MAX_COUNTED;
    for (int i = 0; i < n; i++) {
        long was = 0;
        for (int j = 0; j < nbefore; j++)
            if (before[j].name == now[i].name) was = before[j].n;
        if (now[i].n == was) continue;
        sum[now[i].lib] += now[i].n - was;
        if (k < cap) out[k++] = (fk_call){now[i].name, now[i].lib, now[i].n - was};
    }
    for (int l = 0; l < FK_LIB_N; l++)
        if (total) total[l] = sum[l];
    return k;
}
