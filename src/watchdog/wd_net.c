/* src/watchdog/wd_net.c - the watchdogs' side channel between hosts.
 *
 * A host's shared segment shows what its own ranks are doing; a rank on
 * another host sees none of it. So, in jobs that span hosts, every rank also
 * listens on a TCP port of its own (any interface, a port the kernel picks)
 * and publishes, through the bootstrap's allgather at dt_init, its addresses
 * (up to four: IPv4 first, loopback last), its port, pid and host name, with
 * the job's nonce (rank 0's random number: every request carries it and the
 * target's rank, so a stray connection to a reused address is refused).
 * A responder thread per rank answers, from its host's segment:
 *   QUERY   the state of every rank of this host (their slots, their
 *           /proc state: 'T' for a stopped process), asked for by a watchdog
 *           that needs it (a stall report, a wait for a rank of another
 *           host); any rank of a host can answer for all of them, so the
 *           querying side asks up to three at once and takes the first reply
 *           (one of them may be the stopped one);
 *   NOTICE  a rank was lost (died or exited without dt_finalize), or a rank
 *           ends the job: handed to the watchdog's thread, which reports it
 *           and ends this rank too, at once (not after its own timeout).
 * A rank alone on its host has no host-mate to see it die, so the first
 * ranks of the hosts also keep a ring of connections (each to the next
 * host's first rank): a connection that closes without a goodbye (FIN when
 * the rank enters dt_finalize, BYE when it leaves after it, DEPART when it
 * exits without it) means the rank is lost. Frames: bootstrap/tcp_wire.h.
 * Nothing here runs on the data path. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp_wire.h"
#include "watchdog/wd_internal.h"
#include "core/error.h"

enum { W_QUERY = 16, W_REPLY = 17, W_NOTICE = 18, W_RING = 19, W_FIN = 20, W_BYE = 21, W_DEPART = 22 };

#define NADDR 4
#define HOST_BYTES 64
/* ident: nonce u64, pid u32, port u16, naddr u8, pad u8, NADDR x (family u8,
 * pad[3], address[16]), host[64] */
#define IDENT_BYTES (16 + NADDR * 20 + HOST_BYTES)
/* a reply's record per slot: REC_WORDS little-endian u64 */
#define REC_WORDS (23 + WD_PROG)
#define MAX_TEXT 480

typedef struct endpoint {
    uint32_t pid;
    uint16_t port;
    int naddr;
    struct { int fam; unsigned char a[16]; } addr[NADDR];
    char host[HOST_BYTES];
} endpoint;

static endpoint *g_ep;          /* [size] */
static int *g_host_idx;         /* [size] copy of the bootstrap's host map */
const int *g_wd_host_of;
int g_wd_nhosts;
static uint64_t g_nonce;        /* the job's: rank 0's */
static int g_on;                /* jobs across hosts: the channel is up */
static int g_listen = -1;
static pthread_mutex_t g_send_mu = PTHREAD_MUTEX_INITIALIZER; /* frames on the ring */
static pthread_mutex_t g_ring_mu = PTHREAD_MUTEX_INITIALIZER; /* the ring's fds */
static pthread_mutex_t g_req_mu = PTHREAD_MUTEX_INITIALIZER;  /* requests (the watchdog's thread) */
typedef struct ring { int fd, rank, fin, bye, depart; } ring;
static ring g_ring[2];          /* 0: to the next host's first rank, 1: from the previous one */
static pthread_t g_resp;
static int g_resp_on;
static volatile sig_atomic_t g_resp_stop;
static int g_rwake[2] = {-1, -1};

static pthread_mutex_t g_inbox_mu = PTHREAD_MUTEX_INITIALIZER;
static wd_notice g_inbox[16];
static int g_inbox_n;
static char *g_lost_seen;       /* [size]: a loss already passed to the thread */

const char *dt_wd_host_name(int w) {
    return g_ep && w >= 0 && w < g_wd_size && g_ep[w].host[0] ? g_ep[w].host : "?";
}

uint64_t dt_wd_pid_of(int w) { return g_ep && w >= 0 && w < g_wd_size ? g_ep[w].pid : 0; }

int dt_wd_net_on(void) { return g_on; }

/* ---- start-up ---------------------------------------------------------------- */

static uint64_t random64(void) {
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &r, sizeof r) != (ssize_t)sizeof r) r = 0;
        close(fd);
    }
    if (!r) r = dt_wd_now() ^ ((uint64_t)getpid() << 32);
    return r | 1;
}

/* This host's addresses: IPv4 (not loopback), global IPv6, then loopback. */
static int my_addrs(endpoint *e) {
    struct ifaddrs *ifa = NULL;
    e->naddr = 0;
    if (getifaddrs(&ifa) != 0) return 0;
    for (int pass = 0; pass < 3; pass++)
        for (struct ifaddrs *i = ifa; i && e->naddr < NADDR; i = i->ifa_next) {
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
            int lo = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (i->ifa_addr->sa_family == AF_INET && ((pass == 0 && !lo) || (pass == 2 && lo))) {
                e->addr[e->naddr].fam = AF_INET;
                memcpy(e->addr[e->naddr++].a, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
            } else if (i->ifa_addr->sa_family == AF_INET6 && pass == 1 && !lo) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
                if (IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_LOOPBACK(a)) continue;
                e->addr[e->naddr].fam = AF_INET6;
                memcpy(e->addr[e->naddr++].a, a, 16);
            }
        }
    freeifaddrs(ifa);
    return e->naddr;
}

static void put_ident(unsigned char *p, uint64_t nonce, const endpoint *e) {
    memset(p, 0, IDENT_BYTES);
    dt_tcp_put64(p, nonce);
    dt_tcp_put32(p + 8, e->pid);
    p[12] = (unsigned char)(e->port & 0xff);
    p[13] = (unsigned char)(e->port >> 8);
    p[14] = (unsigned char)e->naddr;
    for (int i = 0; i < e->naddr; i++) {
        p[16 + 20 * i] = e->addr[i].fam == AF_INET6 ? 6 : 4;
        memcpy(p + 16 + 20 * i + 4, e->addr[i].a, 16);
    }
    memcpy(p + 16 + 20 * NADDR, e->host, HOST_BYTES);
}

static uint64_t get_ident(const unsigned char *p, endpoint *e) {
    memset(e, 0, sizeof *e);
    e->pid = dt_tcp_get32(p + 8);
    e->port = (uint16_t)(p[12] | p[13] << 8);
    e->naddr = p[14] <= NADDR ? p[14] : 0;
    for (int i = 0; i < e->naddr; i++) {
        e->addr[i].fam = p[16 + 20 * i] == 6 ? AF_INET6 : AF_INET;
        memcpy(e->addr[i].a, p + 16 + 20 * i + 4, 16);
    }
    memcpy(e->host, p + 16 + 20 * NADDR, HOST_BYTES);
    e->host[HOST_BYTES - 1] = '\0';
    return dt_tcp_get64(p);
}

/* A non-blocking connection attempt to rank w's address i: the fd (connected
 * or in progress), -1 on an immediate failure. */
static int start_connect(int w, int i) {
    const endpoint *e = &g_ep[w];
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    if (e->addr[i].fam == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(e->port);
        memcpy(&a->sin6_addr, e->addr[i].a, 16);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(e->port);
        memcpy(&a->sin_addr, e->addr[i].a, 4);
        len = sizeof *a;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    dt_tcp_tune(fd);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* 1 connected, 0 still in progress, -1 failed */
static int connect_done(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    return err == 0 ? 1 : -1;
}

/* A frame to rank w: nonce first in the payload, w in aux. */
static int send_req(pthread_mutex_t *mu, int fd, int w, uint32_t type, const unsigned char *body, size_t n,
                    long long deadline) {
    unsigned char buf[8 + 1024];
    if (n > sizeof buf - 8) return -EMSGSIZE;
    dt_tcp_put64(buf, g_nonce);
    if (n) memcpy(buf + 8, body, n);
    return dt_tcp_send_frame(mu, fd, (uint32_t)g_wd_rank, type, (uint32_t)w, buf, 8 + n, deadline);
}

/* Blocking connection to rank w (any of its addresses) within deadline. */
static int connect_to(int w, long long deadline) {
    for (int i = 0; i < g_ep[w].naddr; i++) {
        int fd = start_connect(w, i);
        if (fd < 0) continue;
        long long dl = dt_tcp_now_ms() + 1000;
        if (deadline >= 0 && dl > deadline) dl = deadline;
        if (dt_tcp_wait_fd(fd, POLLOUT, dl) == 1 && connect_done(fd) == 1) return fd;
        close(fd);
    }
    return -1;
}

int dt_wd_net_start(void) {
    const dt_boot *b = dt_boot_get();
    int n = b->size;
    g_on = 0;
    g_nonce = 0;
    free(g_ep);
    free(g_host_idx);
    free(g_lost_seen);
    g_ep = calloc((size_t)n, sizeof *g_ep);
    g_host_idx = malloc(sizeof *g_host_idx * (size_t)n);
    g_lost_seen = calloc((size_t)n, 1);
    unsigned char *all = malloc((size_t)n * IDENT_BYTES), mine[IDENT_BYTES];
    if (!g_ep || !g_host_idx || !g_lost_seen || !all) {
        free(all);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for the watchdog's table of %d ranks", n);
    }
    memcpy(g_host_idx, b->host, sizeof *g_host_idx * (size_t)n);
    g_wd_host_of = g_host_idx;
    g_wd_nhosts = b->nhosts;
    endpoint me;
    memset(&me, 0, sizeof me);
    me.pid = (uint32_t)getpid();
    memcpy(me.host, g_wd_host, HOST_BYTES);
    me.host[HOST_BYTES - 1] = '\0';
    if (b->nhosts > 1 && my_addrs(&me) > 0) {
        g_listen = dt_tcp_listen(0, 128);
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (g_listen >= 0 && getsockname(g_listen, (struct sockaddr *)&ss, &len) == 0)
            me.port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
        if (!me.port && g_listen >= 0) { close(g_listen); g_listen = -1; }
    }
    put_ident(mine, b->rank == 0 ? random64() : 0, &me);
    int rc = dt_boot_allgather(mine, all, IDENT_BYTES);
    if (rc) { free(all); return rc; }
    for (int r = 0; r < n; r++) {
        uint64_t nonce = get_ident(all + (size_t)r * IDENT_BYTES, &g_ep[r]);
        if (r == 0) g_nonce = nonce;
    }
    free(all);
    for (int i = 0; i < 2; i++) g_ring[i] = (ring){.fd = -1, .rank = -1};
    if (g_listen < 0 || !g_nonce) return DT_OK;
    g_on = 1;
    /* the ring of the hosts' first ranks: connect to the next host's */
    if (b->local_rank == 0) {
        int next_host = (b->host[b->rank] + 1) % b->nhosts, to = 0;
        while (b->host[to] != next_host) to++;
        if (g_ep[to].port) {
            long long dl = dt_tcp_now_ms() + 5000;
            int fd = connect_to(to, dl);
            if (fd >= 0 && send_req(&g_send_mu, fd, to, W_RING, NULL, 0, dl) == 0) g_ring[0] = (ring){.fd = fd, .rank = to};
            else if (fd >= 0) close(fd);
        }
    }
    return DT_OK;
}

/* ---- the responder ---------------------------------------------------------- */

static void inbox_put(const wd_notice *n) {
    pthread_mutex_lock(&g_inbox_mu);
    int dup = n->kind == 1 && n->subject >= 0 && n->subject < g_wd_size && g_lost_seen[n->subject];
    if (!dup && g_inbox_n < (int)(sizeof g_inbox / sizeof g_inbox[0])) {
        g_inbox[g_inbox_n++] = *n;
        if (n->kind == 1 && n->subject >= 0 && n->subject < g_wd_size) g_lost_seen[n->subject] = 1;
    }
    pthread_mutex_unlock(&g_inbox_mu);
    dt_wd_net_wake();
}

int dt_wd_net_take(wd_notice *n) {
    int got = 0;
    pthread_mutex_lock(&g_inbox_mu);
    if (g_inbox_n > 0) {
        *n = g_inbox[0];
        memmove(g_inbox, g_inbox + 1, sizeof *g_inbox * (size_t)--g_inbox_n);
        got = 1;
    }
    pthread_mutex_unlock(&g_inbox_mu);
    return got;
}

static void put_rec(unsigned char *p, const wd_view *v) {
    uint64_t w[REC_WORDS] = {(uint64_t)v->world_rank, v->pid, v->state, v->in_op, v->kind, v->cid, v->seq,
                             v->dtype, v->count, (uint64_t)(int64_t)v->root, v->op, v->nlist, v->phase,
                             v->age_start, v->age_end, v->age_heartbeat, v->last_kind, v->last_cid,
                             v->last_seq, (uint64_t)(unsigned char)v->pstate, v->t_end_raw != 0, v->gen,
                             (uint64_t)v->gone};
    memcpy(w + 23, v->prog, sizeof v->prog);
    for (int i = 0; i < REC_WORDS; i++) dt_tcp_put64(p + 8 * i, w[i]);
}

static void get_rec(const unsigned char *p, wd_view *v) {
    uint64_t w[REC_WORDS];
    for (int i = 0; i < REC_WORDS; i++) w[i] = dt_tcp_get64(p + 8 * i);
    memset(v, 0, sizeof *v);
    v->world_rank = (int)w[0];
    v->pid = w[1];
    v->state = w[2];
    v->in_op = w[3];
    v->kind = w[4];
    v->cid = w[5];
    v->seq = w[6];
    v->dtype = w[7];
    v->count = w[8];
    v->root = (int)(int64_t)w[9];
    v->op = w[10];
    v->nlist = w[11];
    v->phase = w[12];
    v->age_start = w[13];
    v->age_end = w[14];
    v->age_heartbeat = w[15];
    v->last_kind = w[16];
    v->last_cid = w[17];
    v->last_seq = w[18];
    v->pstate = (char)w[19];
    v->t_end_raw = w[20];
    v->gen = w[21];
    v->gone = (int)w[22];
    memcpy(v->prog, w + 23, sizeof v->prog);
    v->known = v->state != ST_EMPTY;
}

/* QUERY: every slot of this host. */
static void answer_query(int fd, int from) {
    int n = g_wd_seg ? g_wd_nslots : 0;
    size_t bytes = 8 + 4 + (size_t)n * REC_WORDS * 8;
    unsigned char *b = calloc(1, bytes);
    if (!b) return;
    dt_tcp_put64(b, g_nonce);
    dt_tcp_put32(b + 8, (uint32_t)n);
    uint64_t now = dt_wd_now();
    for (int i = 0; i < n; i++) {
        wd_view v;
        dt_wd_read_slot(&g_wd_seg->slots[i], &v, now);
        if (v.known) {
            v.pstate = dt_wd_proc_state(v.pid);
            v.gone = kill((pid_t)v.pid, 0) != 0 && errno == ESRCH;
        }
        put_rec(b + 12 + (size_t)i * REC_WORDS * 8, &v);
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    dt_tcp_send_frame(&mu, fd, (uint32_t)g_wd_rank, W_REPLY, (uint32_t)from, b, bytes, dt_tcp_now_ms() + 1000);
    free(b);
}

/* NOTICE body: kind u32, subject i32, pid u64, cause u32, text */
static void take_notice(const unsigned char *b, size_t n, int from) {
    if (n < 20) return;
    wd_notice x;
    memset(&x, 0, sizeof x);
    x.kind = (int)dt_tcp_get32(b);
    x.subject = (int)dt_tcp_get32(b + 4);
    x.pid = dt_tcp_get64(b + 8);
    x.cause = (int)dt_tcp_get32(b + 16);
    x.by = from;
    size_t t = n - 20 < sizeof x.text - 1 ? n - 20 : sizeof x.text - 1;
    memcpy(x.text, b + 20, t);
    x.text[t] = '\0';
    if ((x.kind == 1 || x.kind == 2) && from >= 0 && from < g_wd_size) inbox_put(&x);
}

/* One request on a new connection; returns 1 if fd became a ring peer. */
static int serve(int fd) {
    dt_tcp_frame f;
    long long dl = dt_tcp_now_ms() + 1000;
    unsigned char body[8 + 1024];
    if (dt_tcp_recv_header(fd, &f, dl) != 0 || f.len < 8 || f.len > sizeof body || f.aux != (uint32_t)g_wd_rank ||
        (int)f.rank < 0 || (int)f.rank >= g_wd_size || dt_tcp_recv_all(fd, body, (size_t)f.len, dl) != 0 ||
        dt_tcp_get64(body) != g_nonce)
        return 0;
    if (f.type == W_QUERY) answer_query(fd, (int)f.rank);
    else if (f.type == W_NOTICE) take_notice(body + 8, (size_t)f.len - 8, (int)f.rank);
    else if (f.type == W_RING) {
        pthread_mutex_lock(&g_ring_mu);
        int ok = g_ring[1].fd < 0;
        if (ok) g_ring[1] = (ring){.fd = fd, .rank = (int)f.rank};
        pthread_mutex_unlock(&g_ring_mu);
        return ok;
    }
    return 0;
}

/* A ring peer's frames; at the end of its stream, a loss unless it said
 * goodbye. */
static void ring_event(int i) {
    ring *r = &g_ring[i];
    for (;;) {
        dt_tcp_frame f;
        unsigned char body[8 + 1024];
        int rc = dt_tcp_recv_header(r->fd, &f, dt_tcp_now_ms() + 200);
        if (rc == -ETIMEDOUT) return; /* nothing whole yet */
        if (rc == 0 && f.len <= sizeof body && dt_tcp_recv_all(r->fd, body, (size_t)f.len, dt_tcp_now_ms() + 200) == 0) {
            if (f.type == W_FIN) r->fin = 1;
            else if (f.type == W_BYE) r->bye = 1;
            else if (f.type == W_DEPART) r->depart = 1;
            struct pollfd q = {.fd = r->fd, .events = POLLIN};
            if (poll(&q, 1, 0) > 0) continue;
            return;
        }
        /* end of stream or garbage: the peer is gone */
        int w = r->rank, lost = !r->fin && !r->bye;
        pthread_mutex_lock(&g_ring_mu);
        close(r->fd);
        r->fd = -1;
        pthread_mutex_unlock(&g_ring_mu);
        if (lost && w >= 0) {
            wd_notice x;
            memset(&x, 0, sizeof x);
            x.kind = 1;
            x.subject = w;
            x.pid = g_ep[w].pid;
            x.cause = r->depart ? WD_LOST_EXITED : WD_LOST_LINK;
            x.by = g_wd_rank;
            inbox_put(&x);
        }
        return;
    }
}

static void *responder(void *arg) {
    (void)arg;
    enum { MAXC = 32 };
    int cl[MAXC], ncl = 0;
    long long cdl[MAXC];
    while (!g_resp_stop) {
        struct pollfd q[3 + MAXC];
        int nq = 0, ri[2] = {-1, -1};
        q[nq++] = (struct pollfd){.fd = g_rwake[0], .events = POLLIN};
        q[nq++] = (struct pollfd){.fd = g_listen, .events = POLLIN};
        for (int i = 0; i < 2; i++)
            if (g_ring[i].fd >= 0) { ri[i] = nq; q[nq++] = (struct pollfd){.fd = g_ring[i].fd, .events = POLLIN}; }
        int c0 = nq;
        for (int i = 0; i < ncl; i++) q[nq++] = (struct pollfd){.fd = cl[i], .events = POLLIN};
        int k = poll(q, (nfds_t)nq, 250);
        if (g_resp_stop) break;
        if (k < 0) continue;
        if (q[0].revents) {
            char junk[16];
            while (read(g_rwake[0], junk, sizeof junk) > 0) {}
        }
        for (int i = 0; i < 2; i++)
            if (ri[i] >= 0 && q[ri[i]].revents) ring_event(i);
        long long now = dt_tcp_now_ms();
        for (int i = ncl - 1; i >= 0; i--) {
            if (!q[c0 + i].revents && now < cdl[i]) continue;
            if (!q[c0 + i].revents || !serve(cl[i])) close(cl[i]);
            cl[i] = cl[--ncl];
            cdl[i] = cdl[ncl];
        }
        while (q[1].revents & POLLIN) {
            int fd = accept(g_listen, NULL, NULL);
            if (fd < 0) break;
            dt_tcp_tune(fd);
            if (ncl == MAXC) { close(fd); continue; }
            cl[ncl] = fd;
            cdl[ncl++] = now + 2000;
        }
    }
    for (int i = 0; i < ncl; i++) close(cl[i]);
    return NULL;
}

void dt_wd_net_run(void) {
    if (!g_on || g_resp_on) return;
    if (pipe(g_rwake) != 0) { g_rwake[0] = g_rwake[1] = -1; return; }
    for (int i = 0; i < 2; i++) fcntl(g_rwake[i], F_SETFL, O_NONBLOCK), fcntl(g_rwake[i], F_SETFD, FD_CLOEXEC);
    g_resp_stop = 0;
    g_resp_on = pthread_create(&g_resp, NULL, responder, NULL) == 0;
}

/* ---- the ring's goodbyes ------------------------------------------------------- */

static void ring_say(uint32_t type) {
    pthread_mutex_lock(&g_ring_mu);
    for (int i = 0; i < 2; i++)
        if (g_ring[i].fd >= 0) send_req(&g_send_mu, g_ring[i].fd, g_ring[i].rank, type, NULL, 0, dt_tcp_now_ms() + 200);
    pthread_mutex_unlock(&g_ring_mu);
}

void dt_wd_net_finalizing(void) { if (g_on) ring_say(W_FIN); }

void dt_wd_net_departing(void) {
    /* atexit, on the exiting thread: no lock wait (the responder may hold
     * one for a moment), a best effort */
    if (!g_on || pthread_mutex_trylock(&g_ring_mu) != 0) return;
    for (int i = 0; i < 2; i++)
        if (g_ring[i].fd >= 0) {
            unsigned char h[DT_TCP_HDR_BYTES + 8];
            dt_tcp_put32(h, DT_TCP_MAGIC);
            dt_tcp_put32(h + 4, DT_TCP_VERSION | (uint32_t)W_DEPART << 16);
            dt_tcp_put32(h + 8, (uint32_t)g_wd_rank);
            dt_tcp_put32(h + 12, (uint32_t)g_ring[i].rank);
            dt_tcp_put64(h + 16, 8);
            dt_tcp_put64(h + DT_TCP_HDR_BYTES, g_nonce);
            ssize_t k = send(g_ring[i].fd, h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)k;
        }
    pthread_mutex_unlock(&g_ring_mu);
}

void dt_wd_net_stop(void) {
    if (g_on) ring_say(W_BYE);
    if (g_resp_on) {
        g_resp_stop = 1;
        ssize_t k = write(g_rwake[1], "x", 1);
        (void)k;
        pthread_join(g_resp, NULL);
        g_resp_on = 0;
    }
    for (int i = 0; i < 2; i++) {
        if (g_rwake[i] >= 0) close(g_rwake[i]);
        g_rwake[i] = -1;
    }
    pthread_mutex_lock(&g_ring_mu);
    for (int i = 0; i < 2; i++) {
        if (g_ring[i].fd >= 0) close(g_ring[i].fd);
        g_ring[i] = (ring){.fd = -1, .rank = -1};
    }
    pthread_mutex_unlock(&g_ring_mu);
    if (g_listen >= 0) close(g_listen);
    g_listen = -1;
    g_on = 0;
    g_inbox_n = 0;
}

/* ---- requests from this rank --------------------------------------------------- */

/* Connections to `targets` in parallel: each gets `type` with `body`; for a
 * QUERY, the first reply of each host is parsed into views. Returns the
 * number of hosts that answered (QUERY) or of ranks reached. */
typedef struct conn { int fd, w, addr, state, qi; } conn; /* state 0 connecting, 1 sent, 2 done, -1 failed */

static int requests(const int *targets, int nt, uint32_t type, const unsigned char *body, size_t nbody,
                    wd_view *views, long long deadline) {
    conn *c = calloc((size_t)(nt > 0 ? nt : 1), sizeof *c);
    struct pollfd *q = malloc(sizeof *q * (size_t)(nt > 0 ? nt : 1));
    char *host_done = calloc((size_t)(g_wd_nhosts > 0 ? g_wd_nhosts : 1), 1);
    int got = 0;
    if (!c || !q || !host_done) goto out;
    for (int i = 0; i < nt; i++) {
        c[i] = (conn){.fd = -1, .w = targets[i], .addr = 0, .state = -1};
        for (; c[i].addr < g_ep[c[i].w].naddr && c[i].fd < 0; c[i].addr++) c[i].fd = start_connect(c[i].w, c[i].addr);
        c[i].addr--;
        c[i].state = c[i].fd >= 0 ? 0 : -1;
    }
    for (;;) {
        int nq = 0;
        for (int i = 0; i < nt; i++) {
            c[i].qi = -1;
            if (c[i].state < 0 || c[i].state == 2) continue;
            if (views && host_done[g_host_idx[c[i].w]]) continue;
            c[i].qi = nq;
            q[nq++] = (struct pollfd){.fd = c[i].fd, .events = c[i].state == 0 ? POLLOUT : POLLIN};
        }
        if (!nq) break;
        int left = dt_tcp_remaining(deadline);
        if (left == 0) break;
        int k = poll(q, (nfds_t)nq, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        for (int i = 0; i < nt; i++) {
            if (c[i].qi < 0 || !q[c[i].qi].revents) continue;
            if (views && host_done[g_host_idx[c[i].w]]) continue; /* answered meanwhile */
            if (c[i].state == 0) {
                if (connect_done(c[i].fd) == 1 &&
                    send_req(&g_req_mu, c[i].fd, c[i].w, type, body, nbody, dt_tcp_now_ms() + 500) == 0) {
                    if (views) c[i].state = 1;
                    else { c[i].state = 2; got++; }
                    continue;
                }
                /* the next address of this rank, if any */
                close(c[i].fd);
                c[i].fd = -1;
                for (c[i].addr++; c[i].addr < g_ep[c[i].w].naddr && c[i].fd < 0; c[i].addr++)
                    c[i].fd = start_connect(c[i].w, c[i].addr);
                c[i].addr--;
                c[i].state = c[i].fd >= 0 ? 0 : -1;
                continue;
            }
            /* a reply */
            dt_tcp_frame f;
            long long dl = dt_tcp_now_ms() + 500;
            if (deadline >= 0 && dl > deadline) dl = deadline;
            unsigned char *b = NULL;
            int ok = dt_tcp_recv_header(c[i].fd, &f, dl) == 0 && f.type == W_REPLY && f.len >= 12 &&
                     f.len <= 12 + (uint64_t)g_wd_size * REC_WORDS * 8 && (b = malloc((size_t)f.len)) &&
                     dt_tcp_recv_all(c[i].fd, b, (size_t)f.len, dl) == 0 && dt_tcp_get64(b) == g_nonce;
            uint32_t n = ok ? dt_tcp_get32(b + 8) : 0;
            if (ok && 12 + (uint64_t)n * REC_WORDS * 8 == f.len) {
                for (uint32_t s = 0; s < n; s++) {
                    wd_view v;
                    get_rec(b + 12 + (size_t)s * REC_WORDS * 8, &v);
                    if (v.known && v.world_rank >= 0 && v.world_rank < g_wd_size &&
                        g_host_idx[v.world_rank] == g_host_idx[c[i].w])
                        views[v.world_rank] = v;
                }
                host_done[g_host_idx[c[i].w]] = 1;
                got++;
            }
            free(b);
            c[i].state = 2;
        }
    }
out:
    for (int i = 0; c && i < nt; i++)
        if (c[i].fd >= 0) close(c[i].fd);
    free(c);
    free(q);
    free(host_done);
    return got;
}

int dt_wd_net_query(wd_view *views, const char *want, long long deadline_ms) {
    if (!g_on) return 0;
    int *t = malloc(sizeof *t * (size_t)g_wd_size), nt = 0;
    if (!t) return 0;
    int me = g_host_idx[g_wd_rank];
    /* up to three ranks per host, not ones known to be gone */
    for (int h = 0; h < g_wd_nhosts; h++) {
        if (h == me || (want && !want[h])) continue;
        int k = 0;
        for (int w = 0; w < g_wd_size && k < 3; w++)
            if (g_host_idx[w] == h && g_ep[w].port && !g_lost_seen[w]) { t[nt++] = w; k++; }
    }
    int got = requests(t, nt, W_QUERY, NULL, 0, views, deadline_ms);
    free(t);
    return got;
}

static void notify(int kind, int subject, uint64_t pid, int cause, const char *text) {
    if (!g_on) return;
    unsigned char body[20 + MAX_TEXT];
    size_t tl = text ? strlen(text) : 0;
    if (tl > MAX_TEXT) tl = MAX_TEXT;
    dt_tcp_put32(body, (uint32_t)kind);
    dt_tcp_put32(body + 4, (uint32_t)subject);
    dt_tcp_put64(body + 8, pid);
    dt_tcp_put32(body + 16, (uint32_t)cause);
    if (tl) memcpy(body + 20, text, tl);
    /* every rank but this one and the subject; this host's ranks only when
     * the subject is elsewhere (they see their host-mates themselves) */
    int *t = malloc(sizeof *t * (size_t)g_wd_size), nt = 0;
    if (!t) return;
    int me = g_host_idx[g_wd_rank], local = subject >= 0 && g_host_idx[subject] == me;
    for (int w = 0; w < g_wd_size; w++) {
        if (w == g_wd_rank || w == subject || !g_ep[w].port || g_lost_seen[w]) continue;
        if (g_host_idx[w] == me && (local || kind == 2)) continue;
        t[nt++] = w;
    }
    long long dl = dt_tcp_now_ms() + 1500;
    for (int i = 0; i < nt; i += 256) requests(t + i, nt - i < 256 ? nt - i : 256, W_NOTICE, body, 20 + tl, NULL, dl);
    free(t);
}

void dt_wd_net_notify_lost(int lost, uint64_t pid, int cause, const char *what) {
    if (lost >= 0 && lost < g_wd_size && g_lost_seen) {
        pthread_mutex_lock(&g_inbox_mu);
        g_lost_seen[lost] = 1;
        pthread_mutex_unlock(&g_inbox_mu);
    }
    notify(1, lost, pid, cause, what);
}

void dt_wd_net_notify_end(const char *text) { notify(2, -1, 0, 0, text); }
