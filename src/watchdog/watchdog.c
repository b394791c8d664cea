/* src/watchdog/watchdog.c - stall, mismatch, departure and dead-rank watchdog:
 * the slots, their publication, the thread, set-up and tear-down.
 *
 * Publication: each process has a slot describing its current blocking
 * operation (communicator, sequence number, kind, start time, phase), its
 * last completed one and its progress per communicator (wd_internal.h),
 * written by whichever thread runs the operation (the engine serialises
 * them) under a sequence lock, and read by watchdogs. In jobs of more than
 * one process the slots of the ranks of one host (the bootstrap's hosts) live
 * in one POSIX shared-memory segment: created by local rank 0 with mode 0600
 * and a random name, opened by the others, and unlinked as soon as every
 * local rank has it mapped (so nothing is left in /dev/shm, whatever happens
 * later). Without a segment the slot is private and reports show this rank's
 * own view only. Jobs across hosts also get a side channel between the
 * watchdogs (wd_net.c): what the ranks of other hosts are doing, on request,
 * and notices of lost ranks and of job ends.
 *
 * The watchdog thread (started by dt_init, joined by dt_finalize) never calls
 * a transport, and the bootstrap only to abort the job (dt_boot_abort: under
 * MPI, an _exit without MPI, boot_mpi.c). It sleeps in poll() on a wake-up pipe and on a pidfd of
 * every other local rank (kill(pid, 0) polling where pidfds are missing), and
 *  - when a local peer's process ends while its slot does not say it entered
 *    dt_finalize, prints one line naming the lost rank, tells the other hosts
 *    and aborts the job; a rank lost on another host, learnt over the side
 *    channel, is reported the same way;
 *  - while this rank is blocked in an operation, looks at what the ranks it
 *    waits for are doing (wd_view.c): one that called dt_finalize or exited
 *    without entering this operation has left the job while this rank still
 *    expects it, and waits that go round in a circle (a collective on one
 *    communicator facing one on another, or point to point facing a
 *    collective) can never end: either is reported and ends the job at once;
 *  - when this rank's current operation is older than the timeout, prints a
 *    stall report (the first rank of each host to notice prints the full
 *    report, with the state of the other hosts' ranks asked for over the
 *    side channel; the others one line) and aborts the job.
 * The abort is backed by a reaper thread that _exit()s 10 s later if it does
 * not end the process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "comm/op_kind.h"
#include "watchdog/watchdog.h"
#include "watchdog/wd_internal.h"
#include "core/error.h"
#include "dtrain/reliability.h"

/* ---- time ------------------------------------------------------------------- */

/* CLOCK_MONOTONIC_COARSE: system-wide (comparable across the processes of a
 * host), a few ns per read, resolution of a few ms: plenty for timeouts in
 * seconds, and cheap enough to stamp every call. */
uint64_t dt_wd_now(void) {
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
#endif
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double secs(uint64_t ns) { return (double)ns / 1e9; }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- slots ------------------------------------------------------------------ */

#define WD_MAGIC 0x6474776473656732ull

static wd_slot g_private_slot;
static wd_slot *g_me = &g_private_slot; /* this process's slot */
wd_seg *g_wd_seg;                        /* shared segment, NULL if none */
static size_t g_seg_bytes;
int g_wd_nslots;
static _Atomic(wd_slot *) g_exit_slot;   /* for the atexit marker */
static _Atomic uint64_t g_timeout_ns = 300ull * 1000000000ull;

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (uint64_t)(v), memory_order_relaxed)

/* the kinds whose sequence numbers count per communicator (progress) */
static int counted(int kind) { return kind != DT_COLL_SEND && kind != DT_COLL_RECV && kind != DT_OP_FINALIZE; }

void dt_wd_op_begin(uint32_t cid, int kind, uint64_t seq, int dtype, uint64_t count, int root_world,
                    int op, uint32_t nlist) {
    wd_slot *s = g_me;
    uint64_t g = LD(s->gen);
    ST(s->gen, g + 1);
    atomic_thread_fence(memory_order_release);
    ST(s->kind, kind);
    ST(s->cid, cid);
    ST(s->seq, seq);
    ST(s->dtype, dtype);
    ST(s->count, count);
    ST(s->root, (int64_t)root_world);
    ST(s->op, op);
    ST(s->nlist, nlist);
    ST(s->t_start, dt_wd_now());
    ST(s->phase, 1);
    if (counted(kind)) ST(s->prog[cid % WD_PROG], (uint64_t)cid << 40 | (seq & ((1ull << 40) - 1)));
    ST(s->in_op, 1);
    atomic_store_explicit(&s->gen, g + 2, memory_order_release);
}

void dt_wd_op_phase(int phase) {
    wd_slot *s = g_me;
    uint64_t g = LD(s->gen);
    ST(s->gen, g + 1);
    atomic_thread_fence(memory_order_release);
    ST(s->phase, phase);
    atomic_store_explicit(&s->gen, g + 2, memory_order_release);
}

void dt_wd_op_end(void) {
    wd_slot *s = g_me;
    uint64_t g = LD(s->gen);
    ST(s->gen, g + 1);
    atomic_thread_fence(memory_order_release);
    ST(s->last_kind, LD(s->kind));
    ST(s->last_cid, LD(s->cid));
    ST(s->last_seq, LD(s->seq));
    ST(s->t_end, dt_wd_now());
    ST(s->in_op, 0);
    ST(s->phase, 0);
    atomic_store_explicit(&s->gen, g + 2, memory_order_release);
}

void dt_wd_comm_created(uint32_t cid) {
    wd_slot *s = g_me;
    uint64_t g = LD(s->gen);
    ST(s->gen, g + 1);
    atomic_thread_fence(memory_order_release);
    ST(s->prog[cid % WD_PROG], (uint64_t)cid << 40);
    atomic_store_explicit(&s->gen, g + 2, memory_order_release);
}

void dt_wd_read_slot(wd_slot *s, wd_view *v, uint64_t now) {
    uint64_t t_start, t_end, hb;
    for (int tries = 0;; tries++) {
        uint64_t g1 = atomic_load_explicit(&s->gen, memory_order_acquire);
        v->state = LD(s->state);
        v->world_rank = (int)LD(s->world_rank);
        v->pid = LD(s->pid);
        hb = LD(s->heartbeat);
        v->in_op = LD(s->in_op);
        v->kind = LD(s->kind);
        v->cid = LD(s->cid);
        v->seq = LD(s->seq);
        v->dtype = LD(s->dtype);
        v->count = LD(s->count);
        v->root = (int)(int64_t)LD(s->root);
        v->op = LD(s->op);
        v->nlist = LD(s->nlist);
        v->phase = LD(s->phase);
        t_start = LD(s->t_start);
        v->last_kind = LD(s->last_kind);
        v->last_cid = LD(s->last_cid);
        v->last_seq = LD(s->last_seq);
        t_end = LD(s->t_end);
        for (int i = 0; i < WD_PROG; i++) v->prog[i] = LD(s->prog[i]);
        atomic_thread_fence(memory_order_acquire);
        uint64_t g2 = LD(s->gen);
        v->gen = g1;
        if ((g1 == g2 && !(g1 & 1)) || tries > 1000) break; /* a writer that died mid-update: take it */
    }
    v->known = v->state != ST_EMPTY;
    v->age_start = now > t_start ? now - t_start : 0;
    v->t_end_raw = t_end;
    v->age_end = t_end && now > t_end ? now - t_end : 0;
    v->age_heartbeat = hb && now > hb ? now - hb : 0;
    v->pstate = 0;
    v->gone = 0;
}

void dt_wd_set_timeout(double seconds) {
    atomic_store(&g_timeout_ns, seconds > 0 ? (uint64_t)(seconds * 1e9) : 0);
}

double dt_wd_timeout(void) { return secs(atomic_load(&g_timeout_ns)); }

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 if unreadable;
 * *state: field 3 (the state letter). */
static uint64_t proc_stat(long pid, char *state) {
    char path[64], buf[1024];
    if (state) *state = 0;
    if (pid > 0) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ') p++;
        if (field == 3 && state) *state = *p;
        if (field == 22) return strtoull(p, NULL, 10);
        while (*p && *p != ' ') p++;
    }
    return 0;
}

char dt_wd_proc_state(uint64_t pid) {
    char st = 0;
    proc_stat((long)pid, &st);
    return st;
}

/* ---- reports' helpers --------------------------------------------------------- */

int g_wd_rank, g_wd_size;
char g_wd_host[64];

static void *reaper(void *arg) {
    (void)arg;
    sleep_ms(10000);
    _exit(DT_ABORT_EXIT_CODE);
    return NULL;
}

/* ---- device transports (nccl): polled by the thread, told of an abort ---------- */

static _Atomic(dt_wd_dev_poll_fn) g_dev_poll;
static _Atomic(dt_wd_dev_abort_fn) g_dev_abort;

void dt_wd_set_device_hooks(dt_wd_dev_poll_fn poll_fn, dt_wd_dev_abort_fn abort_fn) {
    atomic_store(&g_dev_poll, poll_fn);
    atomic_store(&g_dev_abort, abort_fn);
}

/* The device transport's asynchronous errors (a peer lost, a network
 * failure): one line, then the job ends as for a lost rank. */
static void device_poll(void) {
    dt_wd_dev_poll_fn f = atomic_load(&g_dev_poll);
    char msg[512];
    if (!f || f(msg, sizeof msg) == DT_OK) return;
    dt_wd_report_device_error(msg);
}

/* Ends the job through the bootstrap, with an _exit 10 s later should that
 * not end this process. The device transport aborts its communicators first
 * (operations in flight on the GPU stop). */
void dt_wd_abort_job(int wait_ms) {
    if (wait_ms > 0) sleep_ms(wait_ms); /* give the reporting rank's abort time to end the job */
    dt_wd_dev_abort_fn ab = atomic_load(&g_dev_abort);
    if (ab) ab();
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) == 0) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_create(&t, &a, reaper, NULL);
        pthread_attr_destroy(&a);
    }
    dt_boot_abort(DT_ABORT_EXIT_CODE);
}

int dt_wd_claim_report(int dead, uint64_t *prev) {
    *prev = 0;
    if (!g_wd_seg) return 1;
    uint64_t v = ((uint64_t)(dead + 1) << 32) | ((uint64_t)g_wd_rank + 1);
    return atomic_compare_exchange_strong(&g_wd_seg->reported, prev, v);
}

/* ---- the thread ---------------------------------------------------------- */

typedef struct peer {
    int slot;   /* index in g_wd_seg->slots */
    int mode;   /* 0: no liveness check, 1: pidfd, 2: kill(pid, 0) */
    int fd;
    int done;   /* exited normally, or reported */
} peer;

static peer *g_peers;
static int g_npeers;
static pthread_t g_thread;
static int g_thread_on;
static _Atomic int g_stop;
static int g_wake[2] = {-1, -1};

void dt_wd_net_wake(void) {
    if (g_wake[1] >= 0) {
        ssize_t k = write(g_wake[1], "n", 1);
        (void)k;
    }
}

static int pid_alive(uint64_t pid) {
    return !(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static void peer_gone(peer *q, uint64_t now) {
    uint64_t st = LD(g_wd_seg->slots[q->slot].state);
    if (q->fd >= 0) { close(q->fd); q->fd = -1; }
    q->done = 1;
    if (st == ST_FINALIZING || st == ST_FINALIZED) return; /* a normal end */
    dt_wd_report_dead(q->slot, now);
}

static void *wd_main(void *arg) {
    (void)arg;
    struct pollfd *fds = malloc(sizeof *fds * (size_t)(g_npeers + 1));
    int *who = malloc(sizeof *who * (size_t)(g_npeers + 1));
    if (!fds || !who) { free(fds); free(who); return NULL; }
    while (!atomic_load(&g_stop)) {
        int nf = 0;
        fds[nf++] = (struct pollfd){.fd = g_wake[0], .events = POLLIN};
        for (int i = 0; i < g_npeers; i++)
            if (g_peers[i].mode == 1 && !g_peers[i].done) {
                fds[nf] = (struct pollfd){.fd = g_peers[i].fd, .events = POLLIN};
                who[nf++] = i;
            }
        uint64_t to = atomic_load(&g_timeout_ns);
        long ms = to ? (long)(to / 20000000ull) : 250;
        if (ms < 10) ms = 10;
        if (ms > 250) ms = 250;
        int r = poll(fds, (nfds_t)nf, (int)ms);
        if (atomic_load(&g_stop)) break;
        if (r > 0 && (fds[0].revents & POLLIN)) {
            char junk[64];
            while (read(g_wake[0], junk, sizeof junk) > 0) {}
        }
        uint64_t now = dt_wd_now();
        ST(g_me->heartbeat, now);
        for (int k = 1; r > 0 && k < nf; k++)
            if (fds[k].revents) peer_gone(&g_peers[who[k]], now);
        for (int i = 0; i < g_npeers; i++)
            if (g_peers[i].mode == 2 && !g_peers[i].done && !pid_alive(LD(g_wd_seg->slots[g_peers[i].slot].pid)))
                peer_gone(&g_peers[i], now);
        /* what the other hosts told us */
        wd_notice n;
        while (dt_wd_net_take(&n)) {
            if (n.kind == 1) dt_wd_report_remote_lost(n.subject, n.pid, n.cause, n.text, n.by, now);
            else dt_wd_report_remote_end(n.by, n.text);
        }
        device_poll();
        wd_view me;
        dt_wd_read_slot(g_me, &me, now);
        if (!me.in_op) continue;
        to = atomic_load(&g_timeout_ns);
        if (to && me.age_start > to) dt_wd_report_stall(&me, now);
        else dt_wd_analyse(&me, now);
    }
    free(fds);
    free(who);
    return NULL;
}

/* ---- set-up and tear-down ------------------------------------------------- */

static void wd_atexit(void) {
    wd_slot *s = atomic_load(&g_exit_slot);
    /* only the rank itself: a forked child (data loader...) inherits the
     * mapping and this handler */
    if (s && LD(s->pid) == (uint64_t)getpid() && LD(s->state) == ST_RUNNING) {
        ST(s->state, ST_EXITED);
        dt_wd_net_departing();
    }
}

static int pidfd_open_(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Create (local rank 0 of each host) or open the host's segment; NULL on any
 * failure. Every rank makes the same bootstrap calls, whatever fails. */
static wd_seg *segment(const dt_boot *b, char *names) {
    int lr = b->local_rank, ln = b->local_size;
    char name[64] = "";
    size_t bytes = sizeof(wd_seg) + sizeof(wd_slot) * (size_t)ln;
    int fd = -1;
    if (lr == 0) {
        for (int tries = 0; tries < 8 && fd < 0; tries++) {
            unsigned rnd = (unsigned)(dt_wd_now() ^ ((uint64_t)getpid() << 16) ^ (uint64_t)tries * 2654435761u);
            snprintf(name, sizeof name, "/dtrain.%u.%ld.%08x", (unsigned)getuid(), (long)getpid(), rnd);
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        }
        if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) {
            close(fd);
            shm_unlink(name);
            fd = -1;
        }
        if (fd < 0) name[0] = '\0';
    }
    /* every rank learns the name its host's local rank 0 made */
    if (dt_boot_allgather(name, names, sizeof name) != DT_OK) {
        if (fd >= 0) { close(fd); shm_unlink(name); }
        return NULL;
    }
    int leader = 0;
    while (b->host[leader] != b->host[b->rank]) leader++;
    memcpy(name, names + (size_t)leader * sizeof name, sizeof name);
    name[sizeof name - 1] = '\0';
    if (lr != 0 && name[0]) fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    wd_seg *seg = NULL;
    if (fd >= 0) {
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m != MAP_FAILED) seg = m;
    }
    if (seg && lr == 0) {
        ST(seg->nslots, ln);
        ST(seg->magic, WD_MAGIC);
    }
    g_seg_bytes = bytes;
    /* everyone has it mapped (or failed) after this barrier: remove the name */
    int brc = dt_boot_barrier();
    if (lr == 0 && name[0]) shm_unlink(name);
    if (seg && (brc || LD(seg->magic) != WD_MAGIC || (int)LD(seg->nslots) != ln)) {
        munmap(seg, bytes);
        seg = NULL;
    }
    return seg;
}

int dt_wd_start(void) {
    const dt_boot *b = dt_boot_get();
    if (!b) return DT_ERR(DT_ERR_STATE, "no bootstrap is open");
    g_wd_rank = b->rank;
    g_wd_size = b->size;
    if (gethostname(g_wd_host, sizeof g_wd_host) != 0) snprintf(g_wd_host, sizeof g_wd_host, "?");
    g_wd_host[sizeof g_wd_host - 1] = '\0';
    int lr = b->local_rank, ln = b->local_size;
    char *names = malloc((size_t)b->size * 64);
    if (!names) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    wd_seg *seg = segment(b, names);
    free(names);
    wd_slot *me = seg ? &seg->slots[lr] : &g_private_slot;
    memset(&g_private_slot, 0, sizeof g_private_slot);
    ST(me->world_rank, g_wd_rank);
    ST(me->pid, getpid());
    ST(me->starttime, proc_stat(0, NULL));
    ST(me->heartbeat, dt_wd_now());
    ST(me->state, ST_RUNNING);
    /* every rank's host name and pid; the side channel between hosts */
    int rc = dt_wd_net_start();
    /* every local rank has published its pid after this */
    if (!rc) rc = dt_boot_barrier();
    if (rc) {
        dt_wd_net_stop();
        if (seg) munmap(seg, g_seg_bytes);
        memset(&g_private_slot, 0, sizeof g_private_slot);
        return rc;
    }
    g_wd_seg = seg;
    g_wd_nslots = seg ? ln : 0;
    g_me = me;
    dt_wd_views_reset();
    if (seg) {
        static int registered;
        atomic_store(&g_exit_slot, me);
        if (!registered) registered = atexit(wd_atexit) == 0;
    }
    g_npeers = 0;
    g_peers = calloc((size_t)(ln > 1 ? ln - 1 : 1), sizeof *g_peers);
    for (int i = 0; seg && g_peers && i < ln; i++) {
        if (i == lr || LD(seg->slots[i].state) != ST_RUNNING) continue;
        peer *q = &g_peers[g_npeers++];
        q->slot = i;
        q->fd = -1;
        long pid = (long)LD(seg->slots[i].pid);
        uint64_t st = LD(seg->slots[i].starttime);
        /* the same process in our pid namespace? (containers may differ) */
        if (!st || proc_stat(pid, NULL) != st) { q->mode = 0; continue; }
        q->fd = pidfd_open_((pid_t)pid);
        q->mode = q->fd >= 0 ? 1 : 2;
    }
    if (pipe(g_wake) != 0) { g_wake[0] = g_wake[1] = -1; return DT_OK; } /* no watchdog, no harm */
    fcntl(g_wake[0], F_SETFL, O_NONBLOCK);
    fcntl(g_wake[1], F_SETFL, O_NONBLOCK);
    fcntl(g_wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(g_wake[1], F_SETFD, FD_CLOEXEC);
    atomic_store(&g_stop, 0);
    /* the threads must not take signals meant for the application */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g_thread_on = pthread_create(&g_thread, NULL, wd_main, NULL) == 0;
    dt_wd_net_run();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return DT_OK;
}

void dt_wd_finalizing(void) {
    if (g_wd_seg) ST(g_me->state, ST_FINALIZING);
    dt_wd_net_finalizing();
}

void dt_wd_stop(void) {
    if (g_thread_on) {
        atomic_store(&g_stop, 1);
        ssize_t k = write(g_wake[1], "x", 1);
        (void)k;
        pthread_join(g_thread, NULL);
        g_thread_on = 0;
    }
    if (g_wd_seg) ST(g_me->state, ST_FINALIZED);
    dt_wd_net_stop();
    for (int i = 0; i < 2; i++)
        if (g_wake[i] >= 0) { close(g_wake[i]); g_wake[i] = -1; }
    for (int i = 0; i < g_npeers; i++)
        if (g_peers[i].fd >= 0) close(g_peers[i].fd);
    free(g_peers);
    g_peers = NULL;
    g_npeers = 0;
    if (g_wd_seg) {
        atomic_store(&g_exit_slot, NULL);
        munmap(g_wd_seg, g_seg_bytes);
        g_wd_seg = NULL;
        g_wd_nslots = 0;
    }
    g_me = &g_private_slot;
    memset(&g_private_slot, 0, sizeof g_private_slot);
}
