/* fault_prog MODE: a small data-parallel "training loop" (an allreduce of a
 * gradient-sized buffer, an async allreduce and a broadcast per step) in
 * which the LAST rank (or rank 1) misbehaves at step FAULT_STEP (default 20):
 *   skip      the last rank skips the step's allreduce and "computes" for
 *             120 s: the others stall -> stall report, job aborted
 *   skipfin   the last rank skips the allreduce and calls dt_finalize
 *   skipasync the last rank skips an async allreduce (the others wait for it
 *             in dt_work_wait) and sleeps
 *   kill      rank 1 raises SIGKILL
 *   exit      rank 1 calls exit(0) without dt_finalize
 *   segv      rank 1 dereferences NULL (crash)
 *   stop      rank 1 raises SIGSTOP (alive but silent: a stall)
 *   stopin    rank 1 enters a 4 MiB allreduce (the others come 1 s later)
 *             and is stopped by SIGSTOP inside it: every rank has arrived,
 *             the stopped one cannot go on
 *   return    rank 1 returns from main without dt_finalize
 *   mis_create  rank 0 creates the sub-communicator [[0,1]] and allreduces
 *             on it, the others allreduce on the world (DT_ERR_MISMATCH on
 *             both sides; the ranks then finalise and exit 3)
 *   mis_comm  (3+ ranks; [[0,1]] made by all first) rank 1 allreduces on
 *             [[0,1]], the others on the world: waits that cross
 *             communicators
 *   mis_p2p   rank 0 sends to rank 1 (FAULT_RANK if set), the others
 *             allreduce on the world
 *   none      no fault: the job must succeed
 * FAULT_RANK=R makes world rank R the misbehaving rank instead, in every mode
 * (tests/multihost picks a rank on another host than rank 0's).
 * Used by expect_fail.sh, which checks the exit status, the time taken and
 * the text printed (tests/fault/CMakeLists.txt). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dtrain/dtrain.h"

static float *g_buf[3];

static void free_bufs(void) {
    for (int i = 0; i < 3; i++) free(g_buf[i]);
}

static void die(const char *what, int rc) {
    fprintf(stderr, "fault_prog: %s -> %s: %s\n", what, dt_status_str(rc), dt_last_error());
    if (rc == DT_ERR_MISMATCH) { /* every rank got it: a clean end */
        dt_finalize();
        exit(3);
    }
    exit(2);
}

static void *stop_soon(void *arg) {
    (void)arg;
    struct timespec ts = {0, 300000000}; /* 0.3 s: inside the allreduce */
    nanosleep(&ts, NULL);
    raise(SIGSTOP);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "none";
    int steps = 60, fault = getenv("FAULT_STEP") ? atoi(getenv("FAULT_STEP")) : 20;
    int rc = dt_init();
    if (rc) die("dt_init", rc);
    dt_comm *w = dt_comm_world();
    int me = dt_comm_rank(w), n = dt_comm_size(w);
    const char *fr = getenv("FAULT_RANK");
    int last = fr ? me == atoi(fr) : me == n - 1, one = fr ? me == atoi(fr) : me == 1;
    size_t count = 1 << 14, big_count = 1 << 20;
    /* Freed at exit: the modes that exit() or return mid-run leave them behind, which
     * LeakSanitizer would report. */
    float *g = g_buf[0] = calloc(count, sizeof *g), *h = g_buf[1] = calloc(count, sizeof *h), p[16] = {0};
    float *big = g_buf[2] = calloc(big_count, sizeof *big);
    if (!g || !h || !big || atexit(free_bufs) != 0) return 2;
    dt_comm *pair = NULL;
    if (strcmp(mode, "mis_comm") == 0 && (rc = dt_comm_from_rank_list_str("[[0,1]]", &pair))) die("dt_comm_from_rank_list_str", rc);
    for (int step = 0; step < steps; step++) {
        for (size_t i = 0; i < count; i++) g[i] = (float)(me + step);
        if (step == fault) {
            if (strcmp(mode, "kill") == 0 && one) raise(SIGKILL);
            if (strcmp(mode, "stop") == 0 && one) raise(SIGSTOP);
            if (strcmp(mode, "exit") == 0 && one) exit(0);
            if (strcmp(mode, "segv") == 0 && one) { volatile int *z = NULL; *z = 1; }
            if (strcmp(mode, "skip") == 0 && last) { sleep(120); continue; }
            if (strcmp(mode, "skipfin") == 0 && last) { dt_finalize(); return 0; }
            if (strcmp(mode, "skipasync") == 0 && last) { sleep(120); continue; }
            if (strcmp(mode, "return") == 0 && one) return 0;
            if (strcmp(mode, "stopin") == 0) {
                pthread_t t;
                if (one && pthread_create(&t, NULL, stop_soon, NULL) != 0) return 2;
                if (!one) sleep(1);
                rc = dt_allreduce(big, big, big_count, DT_F32, DT_SUM, w);
                if (rc) die("dt_allreduce", rc);
            }
            if (strcmp(mode, "mis_create") == 0 && me == 0) {
                rc = dt_comm_from_rank_list_str("[[0,1]]", &pair);
                if (rc) die("dt_comm_from_rank_list_str", rc);
                rc = dt_allreduce(g, g, count, DT_F32, DT_AVG, pair);
                if (rc) die("dt_allreduce", rc);
            }
            if (strcmp(mode, "mis_comm") == 0 && me == 1) {
                rc = dt_allreduce(g, g, count, DT_F32, DT_AVG, pair);
                if (rc) die("dt_allreduce", rc);
            }
            if (strcmp(mode, "mis_p2p") == 0 && me == 0) {
                rc = dt_send(g, count, DT_F32, fr ? atoi(fr) : 1, w);
                if (rc) die("dt_send", rc);
            }
        }
        rc = dt_allreduce(g, g, count, DT_F32, DT_AVG, w);
        if (rc) die("dt_allreduce", rc);
        dt_work *wk;
        rc = dt_allreduce_async(h, h, count / 4, DT_F32, DT_SUM, w, &wk);
        if (rc) die("dt_allreduce_async", rc);
        rc = dt_work_wait(wk);
        dt_work_free(wk);
        if (rc) die("dt_work_wait", rc);
        rc = dt_broadcast(p, p, 16, DT_F32, 0, w);
        if (rc) die("dt_broadcast", rc);
        struct timespec ts = {0, 2000000}; /* 2 ms of "compute" */
        nanosleep(&ts, NULL);
    }
    rc = dt_finalize();
    if (rc) die("dt_finalize", rc);
    if (me == 0) printf("fault_prog %s: finished %d steps\n", mode, steps);
    return 0;
}
