/* src/comm/watchdog.c - stall and dead-rank watchdog.
 *
 * Publication: each process has a slot describing its current blocking
 * operation (communicator, sequence number, kind, start time) and its last
 * completed one, written by whichever thread runs the operation (the engine
 * serialises them) under a sequence lock, and read by watchdogs. In jobs of
 * more than one process the slots of the ranks of one host (the bootstrap's
 * hosts) live in one POSIX shared-memory segment: created by local rank 0
 * with mode 0600 and a random name, opened by the others, and unlinked as soon
 * as every local rank has it mapped (so nothing is left in /dev/shm, whatever
 * happens later). Without a segment the slot is private and reports show this
 * rank's own view only.
 *
 * The watchdog thread (started by dt_init, joined by dt_finalize) never calls
 * a transport, and the bootstrap only to abort the job (dt_boot_abort: under
 * MPI, MPI_Abort). It sleeps in poll() on a wake-up pipe and on a pidfd of
 * every other local rank (kill(pid, 0) polling where pidfds are missing), and
 *  - when a local peer's process ends while its slot does not say it entered
 *    dt_finalize, prints one line naming the lost rank and aborts the job;
 *  - when this rank's current operation is older than the timeout, prints a
 *    stall report (the first rank of the host to notice prints the full
 *    report, the others one line) and aborts the job.
 * The abort is backed by a reaper thread that _exit()s 10 s later if it does
 * not end the process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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
#include "comm/registry.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "dtrain/reliability.h"

/* ---- time ------------------------------------------------------------------- */

/* CLOCK_MONOTONIC_COARSE: system-wide (comparable across the processes of a
 * host), a few ns per read, resolution of a few ms: plenty for timeouts in
 * seconds, and cheap enough to stamp every call. */
static uint64_t mono_ns(void) {
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

enum { ST_EMPTY = 0, ST_RUNNING = 1, ST_FINALIZING = 2, ST_FINALIZED = 3, ST_EXITED = 4 };

typedef struct wd_slot {
    _Atomic uint64_t gen; /* sequence lock of the op fields: odd while written */
    _Atomic uint64_t state, world_rank, pid, starttime, heartbeat;
    _Atomic uint64_t in_op, kind, cid, seq, dtype, count, root, op, nlist, t_start;
    _Atomic uint64_t last_kind, last_cid, last_seq, t_end;
    uint64_t pad[4];
} wd_slot;

typedef struct wd_seg {
    /* reported: 0, or (dead world rank + 1) << 32 | (reporting world rank + 1)
     * of the first report of this host (dead rank 0 for a stall) */
    _Atomic uint64_t magic, nslots, reported;
    uint64_t pad[5];
    wd_slot slots[];
} wd_seg;

#define WD_MAGIC 0x6474776473656731ull

typedef struct snap {
    uint64_t state, world_rank, pid, heartbeat;
    uint64_t in_op, kind, cid, seq, dtype, count, op, nlist, t_start;
    uint64_t last_kind, last_cid, last_seq, t_end;
    int root;
} snap;

static wd_slot g_private_slot;
static wd_slot *g_me = &g_private_slot; /* this process's slot */
static wd_seg *g_seg;                    /* shared segment, NULL if none */
static size_t g_seg_bytes;
static int g_nslots, g_my_local;
static _Atomic(wd_slot *) g_exit_slot;   /* for the atexit marker */
static _Atomic uint64_t g_timeout_ns = 300ull * 1000000000ull;

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (uint64_t)(v), memory_order_relaxed)

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
    ST(s->t_start, mono_ns());
    ST(s->in_op, 1);
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
    ST(s->t_end, mono_ns());
    ST(s->in_op, 0);
    atomic_store_explicit(&s->gen, g + 2, memory_order_release);
}

static void read_slot(wd_slot *s, snap *o) {
    for (int tries = 0;; tries++) {
        uint64_t g1 = atomic_load_explicit(&s->gen, memory_order_acquire);
        o->state = LD(s->state);
        o->world_rank = LD(s->world_rank);
        o->pid = LD(s->pid);
        o->heartbeat = LD(s->heartbeat);
        o->in_op = LD(s->in_op);
        o->kind = LD(s->kind);
        o->cid = LD(s->cid);
        o->seq = LD(s->seq);
        o->dtype = LD(s->dtype);
        o->count = LD(s->count);
        o->root = (int)(int64_t)LD(s->root);
        o->op = LD(s->op);
        o->nlist = LD(s->nlist);
        o->t_start = LD(s->t_start);
        o->last_kind = LD(s->last_kind);
        o->last_cid = LD(s->last_cid);
        o->last_seq = LD(s->last_seq);
        o->t_end = LD(s->t_end);
        atomic_thread_fence(memory_order_acquire);
        uint64_t g2 = LD(s->gen);
        if ((g1 == g2 && !(g1 & 1)) || tries > 1000) return; /* a writer that died mid-update: take it */
    }
}

void dt_wd_set_timeout(double seconds) {
    atomic_store(&g_timeout_ns, seconds > 0 ? (uint64_t)(seconds * 1e9) : 0);
}

double dt_wd_timeout(void) { return secs(atomic_load(&g_timeout_ns)); }

/* ---- the thread ---------------------------------------------------------- */

typedef struct peer {
    int slot;   /* index in g_seg->slots */
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
static int g_world_rank, g_world_size;
static char g_host[64];

static void describe_snap(char *buf, size_t cap, const snap *s, int current) {
    if (current)
        dt_op_describe(buf, cap, (int)s->kind, (int)s->dtype, s->count, (int)s->op, s->root, s->seq,
                       (uint32_t)s->cid, (uint32_t)s->nlist, 0);
    else /* last completed: kind, seq and communicator only */
        snprintf(buf, cap, "%s #%llu", dt_op_kind_name((int)s->last_kind), (unsigned long long)s->last_seq);
}

/* a growing text buffer for reports */
typedef struct rbuf { char *p; size_t n, cap; } rbuf;

static void rb_add(rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rb_add(rbuf *b, const char *fmt, ...) {
    if (b->n + 1 >= b->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n = b->n + (size_t)k < b->cap ? b->n + (size_t)k : b->cap - 1;
}

static void rb_write(rbuf *b) {
    size_t off = 0;
    while (off < b->n) {
        ssize_t k = write(2, b->p + off, b->n - off);
        if (k <= 0) { if (k < 0 && errno == EINTR) continue; break; }
        off += (size_t)k;
    }
}

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

static void abort_job(int wait_ms);

/* The device transport's asynchronous errors (a peer lost, a network
 * failure): one line, then the job ends as for a lost rank. */
static void device_poll(void) {
    dt_wd_dev_poll_fn f = atomic_load(&g_dev_poll);
    char msg[512];
    if (!f || f(msg, sizeof msg) == DT_OK) return;
    char line[768];
    int k = snprintf(line, sizeof line, "dtrain: rank %d (host %s): %s. Aborting the job (exit code %d)\n",
                     g_world_rank, g_host, msg, DT_ABORT_EXIT_CODE);
    rbuf b = {line, k > 0 ? (size_t)k < sizeof line ? (size_t)k : sizeof line - 1 : 0, sizeof line};
    rb_write(&b);
    abort_job(0);
}

/* Ends the job through the bootstrap, with an _exit 10 s later should that
 * not end this process. The device transport aborts its communicators first
 * (operations in flight on the GPU stop). */
static void abort_job(int wait_ms) {
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

/* 1 for the first rank of this host to report (all ranks without a segment);
 * dead: the world rank reported lost, -1 for a stall. *prev receives the
 * earlier claim when there is one. */
static int claim_report(int dead, uint64_t *prev) {
    *prev = 0;
    if (!g_seg) return 1;
    uint64_t v = ((uint64_t)(dead + 1) << 32) | ((uint64_t)g_world_rank + 1);
    return atomic_compare_exchange_strong(&g_seg->reported, prev, v);
}

static int pid_alive(uint64_t pid) {
    return !(kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* local slot of world rank w, or -1 */
static int slot_of(int w) {
    for (int i = 0; g_seg && i < g_nslots; i++) {
        wd_slot *s = &g_seg->slots[i];
        if (LD(s->state) != ST_EMPTY && (int)LD(s->world_rank) == w) return i;
    }
    return -1;
}

/* 1 if peer p has arrived at my operation m */
static int arrived(const snap *m, const snap *p) {
    if (m->kind == DT_OP_FINALIZE) return p->state == ST_FINALIZING || p->state == ST_FINALIZED;
    if (!p->in_op || p->state != ST_RUNNING) return 0;
    if (m->kind == DT_COLL_SEND || m->kind == DT_COLL_RECV)
        return p->cid == m->cid && p->kind == (m->kind == DT_COLL_SEND ? DT_COLL_RECV : DT_COLL_SEND) &&
               p->root == (int)m->world_rank;
    return p->kind == m->kind && p->cid == m->cid && p->seq == m->seq;
}

static void append_ranks(rbuf *b, const int *r, int n) {
    for (int i = 0; i < n; i++) rb_add(b, "%s%d", i ? "," : "", r[i]);
}

static void report_stall(const snap *me, uint64_t now) {
    char what[256], tmp[256];
    uint64_t prev;
    int first = claim_report(-1, &prev);
    rbuf b = {malloc(32768), 0, 32768};
    char line[512];
    if (!b.p) { b.p = line; b.cap = sizeof line; }
    describe_snap(what, sizeof what, me, 1);
    double waited = secs(now - me->t_start), to = dt_wd_timeout();
    if (!first) {
        rb_add(&b, "dtrain: STALL on rank %d (host %s): %s has not completed after %.1f s (timeout %g s); "
                   "see the stall report printed by rank %d of this host\n",
               g_world_rank, g_host, what, waited, to, (int)(prev & 0xffffffffu) - 1);
        rb_write(&b);
        if (b.p != line) free(b.p);
        abort_job(2000);
        return;
    }
    rb_add(&b, "dtrain: STALL on rank %d (host %s): %s has not completed after %.1f s "
               "(timeout %g s; DTRAIN_TIMEOUT / dt_set_timeout)\n", g_world_rank, g_host, what, waited, to);
    /* the group of the operation */
    int *mem = malloc(sizeof(int) * (size_t)(g_world_size > 2 ? g_world_size : 2));
    int n = 0;
    if (mem) {
        if (me->kind == DT_COLL_SEND || me->kind == DT_COLL_RECV) {
            mem[n++] = (int)me->world_rank;
            mem[n++] = me->root;
        } else if (me->kind >= 64) {
            for (int i = 0; i < g_world_size; i++) mem[n++] = i;
        } else {
            n = dt_reg_members((uint32_t)me->cid, mem, g_world_size);
        }
    }
    int *arr = malloc(sizeof(int) * (size_t)(n + 1)), *far = malloc(sizeof(int) * (size_t)(n + 1));
    int na = 0, nfar = 0, nnot = 0;
    rbuf nb = {malloc(24576), 0, 24576};
    for (int i = 0; arr && far && nb.p && i < n; i++) {
        int w = mem[i];
        if (w == (int)me->world_rank) { arr[na++] = w; continue; }
        int si = slot_of(w);
        if (si < 0) { far[nfar++] = w; continue; }
        snap p;
        read_slot(&g_seg->slots[si], &p);
        if (arrived(me, &p)) { arr[na++] = w; continue; }
        nnot++;
        rb_add(&nb, "dtrain:   not arrived: rank %d (pid %llu): ", w, (unsigned long long)p.pid);
        if (p.state == ST_EXITED) rb_add(&nb, "exited without calling dt_finalize");
        else if ((p.state == ST_RUNNING || p.state == ST_FINALIZING) && !pid_alive(p.pid))
            rb_add(&nb, "dead (its process is gone)");
        else if (p.state == ST_FINALIZING) rb_add(&nb, "in dt_finalize");
        else if (p.state == ST_FINALIZED) rb_add(&nb, "finalized");
        else if (p.in_op) {
            describe_snap(tmp, sizeof tmp, &p, 1);
            rb_add(&nb, "waiting in %s for %.1f s", tmp, secs(now - p.t_start));
        } else if (p.t_end) {
            describe_snap(tmp, sizeof tmp, &p, 0);
            char cn[96];
            rb_add(&nb, "not in a dtrain call for %.1f s; its last call was %s on %s", secs(now - p.t_end), tmp,
                   dt_reg_name((uint32_t)p.last_cid, cn, sizeof cn));
        } else {
            rb_add(&nb, "has made no dtrain call yet");
        }
        if (p.heartbeat && now > p.heartbeat && now - p.heartbeat > 5000000000ull && pid_alive(p.pid))
            rb_add(&nb, " (its watchdog has not run for %.1f s: process stopped or starved?)", secs(now - p.heartbeat));
        rb_add(&nb, "\n");
    }
    if (arr && far && nb.p) {
        rb_add(&b, "dtrain:   arrived (%d of %d): ", na, n);
        append_ranks(&b, arr, na);
        rb_add(&b, "\n");
        if (nb.n) rb_add(&b, "%s", nb.p);
        if (nfar) {
            rb_add(&b, "dtrain:   %s: ", g_seg ? "on other hosts (state not visible from here)"
                                               : "state not visible (no shared-memory segment on this host)");
            append_ranks(&b, far, nfar);
            rb_add(&b, "\n");
        }
        if (!nnot && !nfar && n > 0)
            rb_add(&b, "dtrain:   every rank of the group has arrived: the transport itself is stuck\n");
        if (n == 0) rb_add(&b, "dtrain:   (members of the communicator unknown)\n");
    }
    rb_add(&b, "dtrain: ranks that have not arrived skipped this call, are stuck elsewhere or died; "
               "aborting the job (exit code %d)\n", DT_ABORT_EXIT_CODE);
    rb_write(&b);
    free(mem);
    free(arr);
    free(far);
    free(nb.p);
    if (b.p != line) free(b.p);
    abort_job(0);
}

static void report_dead(int si, uint64_t now) {
    snap p, me;
    read_slot(&g_seg->slots[si], &p);
    read_slot(g_me, &me);
    uint64_t prev;
    int first = claim_report((int)p.world_rank, &prev);
    if (!first && (prev >> 32) != p.world_rank + 1) {
        /* another rank of this host is already ending the job (a stall, or
         * another lost rank): this death is most likely that abort at work */
        abort_job(2000);
        return;
    }
    char what[256], line[768];
    if (me.in_op) {
        describe_snap(what, sizeof what, &me, 1);
        snprintf(line, sizeof line, "this rank was waiting in %.200s for %.1f s", what, secs(now - me.t_start));
    } else {
        snprintf(line, sizeof line, "this rank was not in a dtrain call");
    }
    char msg[1024];
    int k = snprintf(msg, sizeof msg, "dtrain: rank %d: lost rank %d (pid %llu, host %s): the process %s; %s. "
                     "Aborting the job (exit code %d)\n", g_world_rank, (int)p.world_rank,
                     (unsigned long long)p.pid, g_host,
                     p.state == ST_EXITED ? "exited without calling dt_finalize"
                                          : "died (killed by a signal or crashed) before dt_finalize",
                     line, DT_ABORT_EXIT_CODE);
    rbuf b = {msg, k > 0 ? (size_t)k < sizeof msg ? (size_t)k : sizeof msg - 1 : 0, sizeof msg};
    rb_write(&b);
    abort_job(first ? 0 : 5000);
}

static void peer_gone(peer *q, uint64_t now) {
    uint64_t st = LD(g_seg->slots[q->slot].state);
    if (q->fd >= 0) { close(q->fd); q->fd = -1; }
    q->done = 1;
    if (st == ST_FINALIZING || st == ST_FINALIZED) return; /* a normal end */
    report_dead(q->slot, now);
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
        uint64_t now = mono_ns();
        ST(g_me->heartbeat, now);
        for (int k = 1; r > 0 && k < nf; k++)
            if (fds[k].revents) peer_gone(&g_peers[who[k]], now);
        for (int i = 0; i < g_npeers; i++)
            if (g_peers[i].mode == 2 && !g_peers[i].done && !pid_alive(LD(g_seg->slots[g_peers[i].slot].pid)))
                peer_gone(&g_peers[i], now);
        device_poll();
        snap me;
        read_slot(g_me, &me);
        to = atomic_load(&g_timeout_ns);
        if (to && me.in_op && now > me.t_start && now - me.t_start > to) report_stall(&me, now);
    }
    free(fds);
    free(who);
    return NULL;
}

/* ---- set-up and tear-down ------------------------------------------------- */

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 if unreadable. */
static uint64_t proc_starttime(long pid) {
    char path[64], buf[1024];
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
        if (field == 22) return strtoull(p, NULL, 10);
        while (*p && *p != ' ') p++;
    }
    return 0;
}

static void wd_atexit(void) {
    wd_slot *s = atomic_load(&g_exit_slot);
    /* only the rank itself: a forked child (data loader...) inherits the
     * mapping and this handler */
    if (s && LD(s->pid) == (uint64_t)getpid() && LD(s->state) == ST_RUNNING) ST(s->state, ST_EXITED);
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
            unsigned rnd = (unsigned)(mono_ns() ^ ((uint64_t)getpid() << 16) ^ (uint64_t)tries * 2654435761u);
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
    g_world_rank = b->rank;
    g_world_size = b->size;
    if (gethostname(g_host, sizeof g_host) != 0) snprintf(g_host, sizeof g_host, "?");
    g_host[sizeof g_host - 1] = '\0';
    int lr = b->local_rank, ln = b->local_size;
    char *names = malloc((size_t)b->size * 64);
    if (!names) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    wd_seg *seg = segment(b, names);
    free(names);
    wd_slot *me = seg ? &seg->slots[lr] : &g_private_slot;
    memset(&g_private_slot, 0, sizeof g_private_slot);
    ST(me->world_rank, g_world_rank);
    ST(me->pid, getpid());
    ST(me->starttime, proc_starttime(0));
    ST(me->heartbeat, mono_ns());
    ST(me->state, ST_RUNNING);
    /* every local rank has published its pid after this */
    int rc = dt_boot_barrier();
    if (rc) {
        if (seg) munmap(seg, g_seg_bytes);
        memset(&g_private_slot, 0, sizeof g_private_slot);
        return rc;
    }
    g_seg = seg;
    g_nslots = seg ? ln : 0;
    g_my_local = lr;
    g_me = me;
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
        if (!st || proc_starttime(pid) != st) { q->mode = 0; continue; }
        q->fd = pidfd_open_((pid_t)pid);
        q->mode = q->fd >= 0 ? 1 : 2;
    }
    if (pipe(g_wake) != 0) { g_wake[0] = g_wake[1] = -1; return DT_OK; } /* no watchdog, no harm */
    fcntl(g_wake[0], F_SETFL, O_NONBLOCK);
    fcntl(g_wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(g_wake[1], F_SETFD, FD_CLOEXEC);
    atomic_store(&g_stop, 0);
    /* the thread must not take signals meant for the application */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g_thread_on = pthread_create(&g_thread, NULL, wd_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return DT_OK;
}

void dt_wd_finalizing(void) {
    if (g_seg) ST(g_me->state, ST_FINALIZING);
}

void dt_wd_stop(void) {
    if (g_thread_on) {
        atomic_store(&g_stop, 1);
        ssize_t k = write(g_wake[1], "x", 1);
        (void)k;
        pthread_join(g_thread, NULL);
        g_thread_on = 0;
    }
    for (int i = 0; i < 2; i++)
        if (g_wake[i] >= 0) { close(g_wake[i]); g_wake[i] = -1; }
    for (int i = 0; i < g_npeers; i++)
        if (g_peers[i].fd >= 0) close(g_peers[i].fd);
    free(g_peers);
    g_peers = NULL;
    g_npeers = 0;
    if (g_seg) {
        ST(g_me->state, ST_FINALIZED);
        atomic_store(&g_exit_slot, NULL);
        munmap(g_seg, g_seg_bytes);
        g_seg = NULL;
    }
    g_me = &g_private_slot;
    memset(&g_private_slot, 0, sizeof g_private_slot);
}
