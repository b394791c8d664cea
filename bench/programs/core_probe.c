/* bench/programs/core_probe.c - dtrain-core-probe: the round trip of one cache
 * line between two CPUs, to tell which state a shared VM is in while the
 * benchmarks run.
 *
 * Two threads, pinned to the first two CPUs this process may use, take turns
 * writing a counter the other one waits on; the time per round trip is two
 * cache-line transfers between the CPUs. On this project's 2-vCPU VM it reads
 * about 100 ns while the two vCPUs share an L3 and about 500 ns while the
 * host runs them on different L3s (CCDs); in the second state every
 * benchmark that moves data between the ranks runs 3-6x slower, the
 * shared-memory allreduce more than MPI's (bench/README.md).
 *
 * Usage: dtrain-core-probe [ROUND_TRIPS]   (default 20000 per sample)
 * Prints one line: the median of 7 samples, in ns, and the two CPUs.
 * Exit status 0; 2 if fewer than two CPUs are usable (prints "n/a"). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { SAMPLES = 7 };

typedef struct probe {
    _Alignas(64) atomic_long ping;
    _Alignas(64) atomic_long pong;
    long trips;
    int cpu[2];
} probe;

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *arg) {
    probe *p = arg;
    (void)pin(p->cpu[1]); /* unpinned it still answers: the probe never hangs */
    for (long i = 1; i <= (long)SAMPLES * p->trips; i++) {
        while (atomic_load_explicit(&p->ping, memory_order_acquire) != i) {}
        atomic_store_explicit(&p->pong, i, memory_order_release);
    }
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    static probe p;
    p.trips = argc > 1 ? atol(argv[1]) : 20000;
    if (p.trips < 1) {
        fprintf(stderr, "usage: dtrain-core-probe [ROUND_TRIPS >= 1]\n");
        return 1;
    }
    cpu_set_t mine;
    int n = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &mine)) p.cpu[n++] = c;
    pthread_t t;
    if (n < 2 || pin(p.cpu[0]) || pthread_create(&t, NULL, answer, &p)) {
        printf("core-to-core round trip: n/a (needs two usable CPUs)\n");
        return 2;
    }
    double ns[SAMPLES];
    long i = 0;
    for (int s = 0; s < SAMPLES; s++) {
        double t0 = now_ns();
        for (long k = 0; k < p.trips; k++) {
            atomic_store_explicit(&p.ping, ++i, memory_order_release);
            while (atomic_load_explicit(&p.pong, memory_order_acquire) != i) {}
        }
        ns[s] = (now_ns() - t0) / (double)p.trips;
    }
    pthread_join(t, NULL);
    qsort(ns, SAMPLES, sizeof ns[0], cmp);
    printf("core-to-core round trip: %.0f ns (CPUs %d and %d; median of %d x %ld; min %.0f, max %.0f)\n",
           ns[SAMPLES / 2], p.cpu[0], p.cpu[1], SAMPLES, p.trips, ns[0], ns[SAMPLES - 1]);
    return 0;
}
