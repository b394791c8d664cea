/* src/bootstrap/tcp.c - the bootstrap of jobs started without MPI (torchrun,
 * srun): rank, size and rank 0's address from the environment
 * (launch_env.c), a small TCP exchange through rank 0.
 *
 * Rendezvous: rank 0 listens on the port (every interface), the others
 * connect to rank 0's address, retrying with a growing pause until rank 0
 * is up, and send a HELLO (world size, rank, host key, the launcher's local
 * rank, pid, host name, job key). Rank 0 checks them as they come: a world
 * size or job of its own (else the whole job fails, with one message on every
 * rank that joined), no rank twice; a connection that does not speak this
 * protocol is dropped and the wait goes on. Once every rank has joined, rank 0
 * stops listening and sends everyone the table of all ranks (WELCOME). Every
 * wait is bounded by DTRAIN_BOOTSTRAP_TIMEOUT (seconds, default 300, 0 = no
 * limit) and blocks in poll(): no busy loop.
 *
 * Afterwards the connections stay open and carry the bootstrap's few
 * collectives: an allgather is a gather of DATA frames at rank 0 (whichever
 * comes first), then the concatenation sent back to every rank; a barrier is
 * an allgather of nothing. Each carries a sequence number and its size, so
 * ranks that made different calls get an error naming them instead of
 * exchanging garbage. A rank whose process ends closes its connection: the
 * others' next exchange fails naming it.
 *
 * Abort: the aborting process sends ABORT to rank 0 (rank 0: to everyone)
 * without waiting, then exits. Peers inside a bootstrap call fail naming it;
 * peers elsewhere are ended by their launcher (torchrun ends every worker
 * when one fails; srun does with --kill-on-bad-exit=1) or by their own
 * watchdog's timeout.
 *
 * Frames and sockets: tcp_wire.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp_wire.h"
#include "core/error.h"

#define HOST_BYTES 64
enum { T_HELLO = 1, T_WELCOME = 2, T_DATA = 3, T_ERROR = 4, T_ABORT = 5 };
/* HELLO: size u32, local i32, hostkey u64, pid u32, pad u32, jobkey u64, host[64] */
#define HELLO_BYTES (32 + HOST_BYTES)
/* WELCOME, per rank: hostkey u64, local i32, pid u32, host[64] */
#define ENTRY_BYTES (16 + HOST_BYTES)
#define TIMEOUT_DEFAULT 300.0

typedef struct peer {
    int fd;
    uint64_t key;          /* host key */
    int local;             /* the launcher's local rank, -1 none */
    unsigned pid;
    char host[HOST_BYTES];
} peer;

typedef struct tcp_impl {
    int rank, size;
    peer *p;               /* [size]: rank 0 holds a connection to every rank; the others p[0].fd */
    uint32_t seq;          /* bootstrap collectives so far */
    double timeout_s;      /* 0: no limit */
    pthread_mutex_t send_mu; /* one frame at a time (dt_boot_abort may come from another thread) */
    char addr[300];        /* "host:port" of rank 0, for messages */
    int broken;            /* a failed exchange left the connections out of step: its status */
    char broken_msg[1024];
} tcp_impl;

/* The state of the last closed bootstrap: the watchdog's thread may still
 * abort through it until dt_finalize stops the thread, so it is freed by the
 * next open (or stays, reachable, until the process ends). */
static tcp_impl *g_retired;

static int send_frame(tcp_impl *t, int fd, uint32_t type, uint32_t aux, const void *a, size_t na, long long deadline) {
    return dt_tcp_send_frame(&t->send_mu, fd, (uint32_t)t->rank, type, aux, a, na, deadline);
}

/* The rest of an ERROR frame -> this rank's error (status in aux). */
static int peer_error(const char *fn, int fd, const dt_tcp_frame *f, long long deadline, const char *from) {
    char msg[900] = "";
    size_t n = f->len < sizeof msg - 1 ? (size_t)f->len : sizeof msg - 1;
    if (dt_tcp_recv_all(fd, msg, n, deadline) == 0) msg[n] = '\0';
    int st = -(int)f->aux;
    if (st >= 0 || st < DT_ERR_INTERNAL) st = DT_ERR_BACKEND;
    return dt_error(st, fn, "%s%s", from, msg);
}

static double timeout_setting(int *rc) {
    const char *v = getenv("DTRAIN_BOOTSTRAP_TIMEOUT");
    *rc = DT_OK;
    if (!v || !*v) return TIMEOUT_DEFAULT;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < 0 || x > 1e9) {
        *rc = dt_error(DT_ERR_INVALID, "dt_init", "DTRAIN_BOOTSTRAP_TIMEOUT='%s' is not a number of seconds in [0, 1e9]", v);
        return 0;
    }
    return x;
}

/* Close every connection without losing what is in flight: a socket closed
 * with unread data sends a reset, which can make the other end drop a frame
 * it has not read yet (an ERROR). So: end our side (FIN after what we sent),
 * read what still comes until the other end closes too, or linger_ms. */
static void close_all(tcp_impl *t, int linger_ms) {
    int n = 0;
    struct pollfd *q = t->p ? malloc(sizeof *q * (size_t)t->size) : NULL;
    for (int r = 0; t->p && r < t->size; r++)
        if (t->p[r].fd >= 0) {
            shutdown(t->p[r].fd, SHUT_WR);
            if (q) q[n++] = (struct pollfd){.fd = t->p[r].fd, .events = POLLIN};
        }
    long long dl = dt_tcp_now_ms() + linger_ms;
    for (int open = n; q && open > 0;) {
        int k = poll(q, (nfds_t)n, dt_tcp_remaining(dl));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        for (int i = 0; i < n; i++) {
            if (q[i].fd < 0 || !q[i].revents) continue;
            char junk[4096];
            ssize_t got = recv(q[i].fd, junk, sizeof junk, 0);
            if (got > 0 || (got < 0 && (errno == EINTR || errno == EAGAIN))) continue;
            q[i].fd = -1; /* end of stream or error: done with it */
            open--;
        }
    }
    free(q);
    /* under the send lock: an abort on another thread sends on none of them */
    pthread_mutex_lock(&t->send_mu);
    for (int r = 0; t->p && r < t->size; r++)
        if (t->p[r].fd >= 0) { close(t->p[r].fd); t->p[r].fd = -1; }
    pthread_mutex_unlock(&t->send_mu);
}

static void free_impl(tcp_impl *t, int linger_ms) {
    if (!t) return;
    close_all(t, linger_ms);
    pthread_mutex_destroy(&t->send_mu);
    free(t->p);
    free(t);
}

/* Rank 0: tell every connected rank (and `extra`, a connection not yet
 * counted) that the job fails, with this rank's recorded message. */
static int fail_all(tcp_impl *t, int status, int extra) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    const char *m = strstr(msg, ": ") ? strstr(msg, ": ") + 2 : msg;
    long long dl = dt_tcp_now_ms() + 2000;
    for (int r = 1; r < t->size; r++)
        if (t->p[r].fd >= 0) send_frame(t, t->p[r].fd, T_ERROR, (uint32_t)-status, m, strlen(m), dl);
    if (extra >= 0) send_frame(t, extra, T_ERROR, (uint32_t)-status, m, strlen(m), dl);
    return status;
}

/* ---- rendezvous ------------------------------------------------------------------ */

static uint64_t job_key(void) {
    const char *a = getenv("TORCHELASTIC_RUN_ID"), *b = getenv("SLURM_JOB_ID"), *c = getenv("SLURM_STEP_ID");
    if (!a && !b) return 0;
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {a ? a : "", "/", b ? b : "", "/", c ? c : ""};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        for (const char *s = parts[i]; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h | 1;
}

static void my_hello(const dt_launch_env *e, uint64_t hostkey, unsigned char *h) {
    char host[HOST_BYTES] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[HOST_BYTES - 1] = '\0';
    memset(h, 0, HELLO_BYTES);
    dt_tcp_put32(h, (uint32_t)e->size);
    dt_tcp_put32(h + 4, (uint32_t)e->local_rank);
    dt_tcp_put64(h + 8, hostkey);
    dt_tcp_put32(h + 16, (uint32_t)getpid());
    dt_tcp_put64(h + 24, job_key());
    memcpy(h + 32, host, HOST_BYTES);
}

/* Rank 0 reads the HELLO of a new connection: 1 a rank joined, 0 the
 * connection was dropped (not ours, or another job's), <0 the job fails. */
static int take_hello(tcp_impl *t, int fd, const unsigned char *mine, long long deadline) {
    dt_tcp_frame f;
    unsigned char h[HELLO_BYTES];
    long long dl = dt_tcp_now_ms() + 5000; /* a silent stray connection delays us at most 5 s */
    if (deadline >= 0 && deadline < dl) dl = deadline;
    int rc = dt_tcp_recv_header(fd, &f, dl);
    if (rc == -EPROTONOSUPPORT) {
        dt_error(DT_ERR_MISMATCH, "dt_init", "a process at %s speaks bootstrap protocol version %u, this rank 0 "
                 "version %u: every rank must run the same dtrain", t->addr, (unsigned)f.aux, DT_TCP_VERSION);
        fail_all(t, DT_ERR_MISMATCH, fd);
        return DT_ERR_MISMATCH;
    }
    if (rc || f.type != T_HELLO || f.len != HELLO_BYTES || dt_tcp_recv_all(fd, h, sizeof h, dl) != 0) return 0;
    int r = (int)f.rank, size = (int)dt_tcp_get32(h);
    char host[HOST_BYTES];
    memcpy(host, h + 32, HOST_BYTES);
    host[HOST_BYTES - 1] = '\0';
    unsigned pid = dt_tcp_get32(h + 16);
    uint64_t job = dt_tcp_get64(h + 24), myjob = dt_tcp_get64(mine + 24);
    if (job && myjob && job != myjob) {
        char m[512];
        snprintf(m, sizeof m, "rank 0 at %s belongs to another job (a different TORCHELASTIC_RUN_ID / SLURM_JOB_ID): "
                 "use another MASTER_PORT", t->addr);
        send_frame(t, fd, T_ERROR, (uint32_t)-DT_ERR_MISMATCH, m, strlen(m), dt_tcp_now_ms() + 2000);
        return 0;
    }
    if (size != t->size) {
        dt_error(DT_ERR_MISMATCH, "dt_init", "world size mismatch: rank 0 (host %.64s) was started with a world of %d, "
                 "rank %d (host %s, pid %u) with a world of %d: start every rank with the same WORLD_SIZE / SLURM_NTASKS",
                 (const char *)mine + 32, t->size, r, host, pid, size);
        return fail_all(t, DT_ERR_MISMATCH, fd);
    }
    if (r <= 0 || r >= t->size || t->p[r].fd >= 0) {
        if (r > 0 && r < t->size)
            dt_error(DT_ERR_MISMATCH, "dt_init", "two processes were started as rank %d (host %s, pid %u and host %s, "
                     "pid %u): every rank must be started once", r, t->p[r].host, t->p[r].pid, host, pid);
        else
            dt_error(DT_ERR_MISMATCH, "dt_init", "two processes were started as rank 0 (this one and host %s, pid %u): "
                     "every rank must be started once", host, pid);
        return fail_all(t, DT_ERR_MISMATCH, fd);
    }
    t->p[r].fd = fd;
    t->p[r].key = dt_tcp_get64(h + 8);
    t->p[r].local = (int)dt_tcp_get32(h + 4);
    t->p[r].pid = pid;
    memcpy(t->p[r].host, host, HOST_BYTES);
    return 1;
}

static int root_rendezvous(tcp_impl *t, const dt_launch_env *e, const unsigned char *mine) {
    int lfd = dt_tcp_listen(e->port, t->size < 4096 ? t->size : 4096);
    if (lfd < 0)
        return dt_error(DT_ERR_BACKEND, "dt_init", "rank 0 cannot listen on TCP port %d (%s): %s (is another job, or an earlier "
                      "run, using it? pick another port)", e->port, e->port_var, strerror(errno));
    long long deadline = dt_tcp_deadline_in(t->timeout_s);
    int need = t->size - 1, npend = 0, cap = 16;
    int *pend = malloc(sizeof *pend * (size_t)cap);
    struct pollfd *q = NULL;
    int rc = pend ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
    while (!rc && need > 0) {
        struct pollfd *nq = realloc(q, sizeof *q * (size_t)(npend + 1));
        if (!nq) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); break; }
        q = nq;
        q[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < npend; i++) q[i + 1] = (struct pollfd){.fd = pend[i], .events = POLLIN};
        int n = poll(q, (nfds_t)(npend + 1), dt_tcp_remaining(deadline));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = DT_ERR(DT_ERR_BACKEND, "poll: %s", strerror(errno)); break; }
        if (n == 0) {
            char miss[256];
            size_t k = 0;
            int shown = 0;
            for (int r = 1; r < t->size && k < sizeof miss - 16; r++)
                if (t->p[r].fd < 0) k += (size_t)snprintf(miss + k, sizeof miss - k, "%s%d", shown++ ? "," : "", r);
            if (k >= sizeof miss - 16) snprintf(miss + k, sizeof miss - k, ",...");
            dt_error(DT_ERR_TIMEOUT, "dt_init", "rank 0: %d of %d ranks did not join within %g s (DTRAIN_BOOTSTRAP_TIMEOUT): "
                     "rank%s %s; were they started, and can they reach %s (%s, %s)?", need, t->size, t->timeout_s,
                     need > 1 ? "s" : "", miss, t->addr, e->addr_var, e->port_var);
            rc = fail_all(t, DT_ERR_TIMEOUT, -1);
            break;
        }
        for (int i = npend - 1; i >= 0 && !rc; i--) {
            if (!q[i + 1].revents) continue;
            int fd = pend[i];
            pend[i] = pend[--npend];
            int got = take_hello(t, fd, mine, deadline);
            if (got < 0) { close(fd); rc = got; }
            else if (got == 0) close(fd);
            else need--;
        }
        while (!rc && (q[0].revents & POLLIN)) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0) break;
            dt_tcp_tune(fd);
            if (npend == cap) {
                int *np = realloc(pend, sizeof *pend * (size_t)(cap *= 2));
                if (!np) { close(fd); rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); break; }
                pend = np;
            }
            pend[npend++] = fd;
        }
    }
    for (int i = 0; i < npend; i++) close(pend[i]);
    free(pend);
    free(q);
    close(lfd);
    if (rc) return rc;
    /* everyone is here: the table */
    size_t tb = (size_t)t->size * ENTRY_BYTES;
    unsigned char *tab = calloc(1, tb);
    if (!tab) return fail_all(t, DT_ERR(DT_ERR_NOMEM, "out of memory"), -1);
    for (int r = 0; r < t->size; r++) {
        unsigned char *x = tab + (size_t)r * ENTRY_BYTES;
        dt_tcp_put64(x, t->p[r].key);
        dt_tcp_put32(x + 8, (uint32_t)t->p[r].local);
        dt_tcp_put32(x + 12, t->p[r].pid);
        memcpy(x + 16, t->p[r].host, HOST_BYTES);
    }
    long long dl = dt_tcp_deadline_in(t->timeout_s);
    for (int r = 1; r < t->size && !rc; r++) {
        int s = send_frame(t, t->p[r].fd, T_WELCOME, 0, tab, tb, dl);
        char w[128];
        if (s) rc = dt_error(DT_ERR_BACKEND, "dt_init", "rank 0: sending the rank table to rank %d (host %s) failed: %s", r,
                           t->p[r].host, dt_tcp_why(s, w, sizeof w));
    }
    free(tab);
    return rc;
}

static int connect_to_root(tcp_impl *t, const dt_launch_env *e, long long deadline) {
    char port[16], last[400] = "no attempt";
    snprintf(port, sizeof port, "%d", e->port);
    long pause = 20;
    for (;;) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(e->addr, port, &hints, &res);
        if (g != 0) snprintf(last, sizeof last, "cannot resolve '%s': %s", e->addr, gai_strerror(g));
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) { snprintf(last, sizeof last, "socket: %s", strerror(errno)); continue; }
            dt_tcp_tune(fd);
            int c = connect(fd, a->ai_addr, a->ai_addrlen);
            if (c != 0 && errno == EINPROGRESS) {
                long long dl = deadline;
                long long soon = dt_tcp_now_ms() + 2000;
                if (dl < 0 || dl > soon) dl = soon;
                int w = dt_tcp_wait_fd(fd, POLLOUT, dl);
                int err = 0;
                socklen_t len = sizeof err;
                if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) c = 0;
                else errno = w == 0 ? ETIMEDOUT : err ? err : ECONNREFUSED;
            }
            if (c == 0) { freeaddrinfo(res); return fd; }
            snprintf(last, sizeof last, "%s", strerror(errno));
            close(fd);
        }
        if (res) freeaddrinfo(res);
        int left = dt_tcp_remaining(deadline);
        if (left == 0) break;
        long nap = left >= 0 && left < pause ? left : pause;
        struct timespec ts = {nap / 1000, (nap % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        if (pause < 1000) pause *= 2;
    }
    dt_error(DT_ERR_TIMEOUT, "dt_init", "rank %d could not connect to rank 0 at %s within %g s (DTRAIN_BOOTSTRAP_TIMEOUT; "
             "last error: %s): is rank 0 running, are %s and %s right, can this host reach it?", t->rank,
             t->addr, t->timeout_s, last, e->addr_var, e->port_var);
    return -1;
}

static int join(tcp_impl *t, const dt_launch_env *e, const unsigned char *mine) {
    long long deadline = dt_tcp_deadline_in(t->timeout_s);
    int fd = connect_to_root(t, e, deadline);
    if (fd < 0) return DT_ERR_TIMEOUT;
    t->p[0].fd = fd;
    char w[128];
    int s = send_frame(t, fd, T_HELLO, 0, mine, HELLO_BYTES, deadline);
    if (s) return dt_error(DT_ERR_BACKEND, "dt_init", "rank %d: sending its HELLO to rank 0 at %s failed: %s", t->rank, t->addr,
                         dt_tcp_why(s, w, sizeof w));
    /* rank 0 waits for the others as long as we do: a little longer, so
     * that its message naming who is missing reaches us first */
    long long dl = deadline < 0 ? -1 : deadline + 5000;
    dt_tcp_frame f;
    s = dt_tcp_recv_header(fd, &f, dl);
    if (s == -EPROTO || s == -EPROTONOSUPPORT)
        return dt_error(DT_ERR_MISMATCH, "dt_init", "rank %d: the process at %s is not a dtrain rank 0 of this version", t->rank, t->addr);
    if (s) return dt_error(s == -ETIMEDOUT ? DT_ERR_TIMEOUT : DT_ERR_BACKEND, "dt_init", "rank %d: waiting for rank 0 "
                           "at %s to complete the rendezvous: %s", t->rank, t->addr, dt_tcp_why(s, w, sizeof w));
    if (f.type == T_ERROR) return peer_error("dt_init", fd, &f, dl, "rank 0 ended the rendezvous: ");
    size_t tb = (size_t)t->size * ENTRY_BYTES;
    if (f.type != T_WELCOME || f.len != tb)
        return dt_error(DT_ERR_BACKEND, "dt_init", "rank %d: unexpected reply from rank 0 at %s (frame type %u, %llu bytes)", t->rank,
                      t->addr, (unsigned)f.type, (unsigned long long)f.len);
    unsigned char *tab = malloc(tb);
    if (!tab) return DT_ERR(DT_ERR_NOMEM, "out of memory for the rank table");
    s = dt_tcp_recv_all(fd, tab, tb, dl);
    if (s) { free(tab); return dt_error(DT_ERR_BACKEND, "dt_init", "rank %d: reading the rank table: %s", t->rank, dt_tcp_why(s, w, sizeof w)); }
    for (int r = 0; r < t->size; r++) {
        const unsigned char *x = tab + (size_t)r * ENTRY_BYTES;
        t->p[r].key = dt_tcp_get64(x);
        t->p[r].local = (int)dt_tcp_get32(x + 8);
        t->p[r].pid = dt_tcp_get32(x + 12);
        memcpy(t->p[r].host, x + 16, HOST_BYTES);
        t->p[r].host[HOST_BYTES - 1] = '\0';
    }
    free(tab);
    return DT_OK;
}

/* The launcher's local ranks must be the ones the host keys give (the ranks
 * of a host numbered by rank): every rank checks the same table. */
static int check_locals(tcp_impl *t, uint64_t *keys) {
    int *host = malloc(sizeof *host * (size_t)t->size);
    if (!host) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < t->size; r++) keys[r] = t->p[r].key;
    dt_boot_host_map(keys, t->size, host);
    int rc = DT_OK;
    for (int r = 0; r < t->size && !rc; r++) {
        if (t->p[r].local < 0) continue;
        int lr = 0, ln = 0;
        for (int q = 0; q < t->size; q++)
            if (host[q] == host[r]) { lr += q < r; ln++; }
        if (t->p[r].local != lr)
            rc = dt_error(DT_ERR_MISMATCH, "dt_init", "rank %d (host %s) was started as local rank %d, but it is local rank "
                          "%d of the %d ranks on its host: the launcher's nodes and the hosts differ (two launcher nodes "
                          "on one machine? give each its own DTRAIN_HOSTID)", r, t->p[r].host, t->p[r].local, lr, ln);
    }
    free(host);
    return rc;
}

/* ---- the bootstrap's operations ----------------------------------------------------- */

static int tcp_detect(void) {
    dt_launcher k = dt_launch_detect(NULL);
    return k == DT_LAUNCH_TORCHRUN || k == DT_LAUNCH_SLURM;
}

static int tcp_open(dt_boot *b) {
    free_impl(g_retired, 0);
    g_retired = NULL;
    dt_launch_env e;
    int rc = dt_launch_env_read(&e);
    if (rc) return rc;
    double to = timeout_setting(&rc);
    if (rc) return rc;
    tcp_impl *t = calloc(1, sizeof *t);
    uint64_t *keys = calloc((size_t)e.size, sizeof *keys);
    if (t) t->p = calloc((size_t)e.size, sizeof *t->p);
    if (!t || !keys || !t->p) {
        if (t) free(t->p);
        free(t);
        free(keys);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for a world of %d", e.size);
    }
    pthread_mutex_init(&t->send_mu, NULL);
    t->rank = e.rank;
    t->size = e.size;
    t->timeout_s = to;
    for (int r = 0; r < t->size; r++) { t->p[r].fd = -1; t->p[r].local = -1; }
    snprintf(t->addr, sizeof t->addr, strchr(e.addr, ':') ? "[%s]:%d" : "%s:%d", e.addr, e.port);
    unsigned char mine[HELLO_BYTES];
    uint64_t key = dt_launch_hostkey();
    my_hello(&e, key, mine);
    t->p[t->rank].key = key;
    t->p[t->rank].local = e.local_rank;
    memcpy(t->p[t->rank].host, mine + 32, HOST_BYTES);
    t->p[t->rank].pid = (unsigned)getpid();
    if (t->size > 1) {
        rc = t->rank == 0 ? root_rendezvous(t, &e, mine) : join(t, &e, mine);
    }
    if (!rc) rc = check_locals(t, keys);
    if (rc) { free_impl(t, 2000); free(keys); return rc; }
    b->rank = t->rank;
    b->size = t->size;
    b->hostkey = keys;
    b->impl = t;
    return DT_OK;
}

/* The job's bootstrap failed (a rank left, or ranks made different calls):
 * the connections are out of step, so every later call gets this message. */
static int broken(tcp_impl *t, int status) {
    if (!t->broken) {
        t->broken = status;
        snprintf(t->broken_msg, sizeof t->broken_msg, "%s", dt_last_error());
    }
    return status;
}

/* Rank 0's part of allgather #seq: every rank's DATA, in whatever order
 * they come, then the concatenation back to all. */
static int root_gather(tcp_impl *t, uint32_t seq, void *all, size_t bytes, long long dl) {
    int n = t->size, need = n - 1, rc = DT_OK;
    char *got = calloc((size_t)n, 1), w[128];
    struct pollfd *q = malloc(sizeof *q * (size_t)n);
    int *who = malloc(sizeof *who * (size_t)n);
    if (!got || !q || !who) { free(got); free(q); free(who); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    while (need > 0 && !rc) {
        int nq = 0;
        for (int r = 1; r < n; r++)
            if (!got[r]) { q[nq] = (struct pollfd){.fd = t->p[r].fd, .events = POLLIN}; who[nq++] = r; }
        int k = poll(q, (nfds_t)nq, dt_tcp_remaining(dl));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) { rc = DT_ERR(DT_ERR_BACKEND, "poll: %s", strerror(errno)); break; }
        if (k == 0) {
            char miss[256];
            size_t m = 0;
            for (int i = 0; i < nq && m < sizeof miss - 16; i++)
                m += (size_t)snprintf(miss + m, sizeof miss - m, "%s%d", i ? "," : "", who[i]);
            rc = dt_error(DT_ERR_TIMEOUT, "dt_boot", "bootstrap exchange #%u: rank%s %s did not take part within %g s "
                          "(DTRAIN_BOOTSTRAP_TIMEOUT)", (unsigned)seq, nq > 1 ? "s" : "", miss, t->timeout_s);
            break;
        }
        for (int i = 0; i < nq && !rc; i++) {
            if (!q[i].revents) continue;
            int r = who[i], fd = t->p[r].fd;
            dt_tcp_frame f;
            int s = dt_tcp_recv_header(fd, &f, dl);
            if (s)
                rc = dt_error(DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u: rank %d (host %s, pid %u): %s", (unsigned)seq,
                              r, t->p[r].host, t->p[r].pid, dt_tcp_why(s, w, sizeof w));
            else if (f.type == T_ABORT)
                rc = dt_error(DT_ERR_BACKEND, "dt_boot", "rank %d (host %s, pid %u) aborted the job (exit code %u)", r,
                              t->p[r].host, t->p[r].pid, (unsigned)f.aux);
            else if (f.type != T_DATA || f.aux != seq || f.len != bytes)
                rc = dt_error(DT_ERR_MISMATCH, "dt_boot", "bootstrap exchange #%u: rank %d passed %llu bytes in its exchange "
                              "#%u, rank 0 %zu bytes: the ranks made different calls (e.g. creating different "
                              "communicators)", (unsigned)seq, r, (unsigned long long)f.len, (unsigned)f.aux, bytes);
            else if ((s = dt_tcp_recv_all(fd, (char *)all + (size_t)r * bytes, bytes, dl)) != 0)
                rc = dt_error(DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u: reading rank %d's data: %s", (unsigned)seq,
                              r, dt_tcp_why(s, w, sizeof w));
            else { got[r] = 1; need--; }
        }
    }
    free(got);
    free(q);
    free(who);
    if (rc) return fail_all(t, rc, -1);
    for (int r = 1; r < n && !rc; r++) {
        int s = send_frame(t, t->p[r].fd, T_DATA, seq, all, (size_t)n * bytes, dl);
        if (s) {
            dt_error(DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u: sending to rank %d (host %s): %s", (unsigned)seq, r,
                     t->p[r].host, dt_tcp_why(s, w, sizeof w));
            rc = fail_all(t, DT_ERR_BACKEND, -1);
        }
    }
    return rc;
}

static int tcp_allgather(dt_boot *b, const void *mine, void *all, size_t bytes) {
    tcp_impl *t = b->impl;
    if (t->broken) return dt_error(DT_ERR_STATE, "dt_boot", "the bootstrap failed earlier: %s", t->broken_msg);
    uint32_t seq = ++t->seq;
    size_t total = (size_t)t->size * bytes;
    if (bytes && bytes > SIZE_MAX / (size_t)t->size)
        return DT_ERR(DT_ERR_INVALID, "%zu bytes per rank overflow", bytes);
    if (bytes) memmove((char *)all + (size_t)t->rank * bytes, mine, bytes);
    if (t->size == 1) return DT_OK;
    long long dl = dt_tcp_deadline_in(t->timeout_s);
    if (t->rank == 0) {
        int rc = root_gather(t, seq, all, bytes, dl);
        return rc ? broken(t, rc) : DT_OK;
    }
    char w[128];
    int fd = t->p[0].fd, sent = send_frame(t, fd, T_DATA, seq, mine, bytes, dl);
    /* a failed send: rank 0 may have told us why before it closed */
    dt_tcp_frame f;
    int s = dt_tcp_recv_header(fd, &f, sent ? dt_tcp_now_ms() + 1000 : dl);
    if (s && sent) s = sent;
    if (s)
        return broken(t, dt_error(s == -ETIMEDOUT ? DT_ERR_TIMEOUT : DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u "
                                  "with rank 0 at %s: %s", (unsigned)seq, t->addr, dt_tcp_why(s, w, sizeof w)));
    if (f.type == T_ERROR) return broken(t, peer_error("dt_boot", fd, &f, dl, "rank 0: "));
    if (f.type == T_ABORT)
        return broken(t, dt_error(DT_ERR_BACKEND, "dt_boot", "rank 0 aborted the job (exit code %u)", (unsigned)f.aux));
    if (f.type != T_DATA || f.aux != seq || f.len != total)
        return broken(t, dt_error(DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u: unexpected frame from rank 0 (type %u, "
                                  "#%u, %llu bytes)", (unsigned)seq, (unsigned)f.type, (unsigned)f.aux,
                                  (unsigned long long)f.len));
    if ((s = dt_tcp_recv_all(fd, all, total, dl)) != 0)
        return broken(t, dt_error(DT_ERR_BACKEND, "dt_boot", "bootstrap exchange #%u: reading from rank 0: %s",
                                  (unsigned)seq, dt_tcp_why(s, w, sizeof w)));
    return DT_OK;
}

static int tcp_barrier(dt_boot *b) {
    char none = 0;
    return tcp_allgather(b, &none, &none, 0);
}

static void tcp_abort(dt_boot *b, int code) {
    tcp_impl *t = b->impl;
    if (t && pthread_mutex_trylock(&t->send_mu) == 0) {
        unsigned char h[DT_TCP_HDR_BYTES];
        dt_tcp_put32(h, DT_TCP_MAGIC);
        dt_tcp_put32(h + 4, DT_TCP_VERSION | (uint32_t)T_ABORT << 16);
        dt_tcp_put32(h + 8, (uint32_t)t->rank);
        dt_tcp_put32(h + 12, (uint32_t)code);
        dt_tcp_put64(h + 16, 0);
        for (int r = 0; r < t->size; r++)
            if (t->p[r].fd >= 0) {
                ssize_t k = send(t->p[r].fd, h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void)k;
            }
    }
    _exit(code);
}

static int tcp_close(dt_boot *b, int clean) {
    tcp_impl *t = b->impl;
    int rc = DT_OK;
    /* leave together, as MPI_Finalize does: no rank sees another's exit as
     * a lost connection while it still needs it */
    if (clean && t && !t->broken && t->size > 1) rc = tcp_barrier(b);
    if (t) close_all(t, 2000);
    g_retired = t;
    return rc;
}

const dt_boot_ops dt_boot_tcp = {
    .name = "tcp",
    .detect = tcp_detect,
    .open = tcp_open,
    .allgather = tcp_allgather,
    .barrier = tcp_barrier,
    .abort = tcp_abort,
    .close = tcp_close,
};
