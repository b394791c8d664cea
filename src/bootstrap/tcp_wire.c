/* src/bootstrap/tcp_wire.c - sockets and frames of the tcp bootstrap. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "bootstrap/tcp_wire.h"

/* ---- time, bytes ------------------------------------------------------------- */

long long dt_tcp_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* deadline for a wait of t seconds from now (-1: none) */
long long dt_tcp_deadline_in(double t) { return t > 0 ? dt_tcp_now_ms() + (long long)ceil(t * 1000) : -1; }

int dt_tcp_remaining(long long deadline) {
    if (deadline < 0) return -1;
    long long r = deadline - dt_tcp_now_ms();
    return r <= 0 ? 0 : r > 1000000000 ? 1000000000 : (int)r;
}

void dt_tcp_put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
void dt_tcp_put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
uint32_t dt_tcp_get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
uint64_t dt_tcp_get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- sockets ------------------------------------------------------------------ */

void dt_tcp_tune(int fd) {
    int one = 1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Wait for `ev` on fd: 1 ready, 0 timed out, -errno. */
int dt_tcp_wait_fd(int fd, short ev, long long deadline) {
    for (;;) {
        struct pollfd q = {.fd = fd, .events = ev};
        int r = poll(&q, 1, dt_tcp_remaining(deadline));
        if (r > 0) return 1;
        if (r == 0) return 0;
        if (errno != EINTR) return -errno;
    }
}

/* 0, or -errno (-ETIMEDOUT when the deadline passed). */
int dt_tcp_send_all(int fd, const void *buf, size_t n, long long deadline) {
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) { p += k; n -= (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = dt_tcp_wait_fd(fd, POLLOUT, deadline);
            if (w == 0) return -ETIMEDOUT;
            if (w < 0) return w;
            continue;
        }
        return k < 0 ? -errno : -EPIPE;
    }
    return 0;
}

/* 0, -EPIPE at end of stream, -ETIMEDOUT, or -errno. */
int dt_tcp_recv_all(int fd, void *buf, size_t n, long long deadline) {
    char *p = buf;
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k > 0) { p += k; n -= (size_t)k; continue; }
        if (k == 0) return -EPIPE;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = dt_tcp_wait_fd(fd, POLLIN, deadline);
            if (w == 0) return -ETIMEDOUT;
            if (w < 0) return w;
            continue;
        }
        return -errno;
    }
    return 0;
}

int dt_tcp_send_frame(pthread_mutex_t *mu, int fd, uint32_t from, uint32_t type, uint32_t aux, const void *a,
                      size_t na, long long deadline) {
    unsigned char h[DT_TCP_HDR_BYTES];
    dt_tcp_put32(h, DT_TCP_MAGIC);
    dt_tcp_put32(h + 4, DT_TCP_VERSION | type << 16);
    dt_tcp_put32(h + 8, from);
    dt_tcp_put32(h + 12, aux);
    dt_tcp_put64(h + 16, (uint64_t)na);
    pthread_mutex_lock(mu);
    int rc = dt_tcp_send_all(fd, h, sizeof h, deadline);
    if (!rc && na) rc = dt_tcp_send_all(fd, a, na, deadline);
    pthread_mutex_unlock(mu);
    return rc;
}

/* Header of the next frame: 0, -EPROTO (not this protocol: *f->type 0) or
 * -EPROTONOSUPPORT (another version: f->aux holds it), or recv_all's error. */
int dt_tcp_recv_header(int fd, dt_tcp_frame *f, long long deadline) {
    unsigned char h[DT_TCP_HDR_BYTES];
    int rc = dt_tcp_recv_all(fd, h, sizeof h, deadline);
    if (rc) return rc;
    memset(f, 0, sizeof *f);
    if (dt_tcp_get32(h) != DT_TCP_MAGIC) return -EPROTO;
    uint32_t tv = dt_tcp_get32(h + 4);
    if ((tv & 0xffff) != DT_TCP_VERSION) { f->aux = tv & 0xffff; return -EPROTONOSUPPORT; }
    f->type = tv >> 16;
    f->rank = dt_tcp_get32(h + 8);
    f->aux = dt_tcp_get32(h + 12);
    f->len = dt_tcp_get64(h + 16);
    return 0;
}

const char *dt_tcp_why(int rc, char *buf, size_t cap) {
    if (rc == -EPIPE) snprintf(buf, cap, "the connection was closed (the process at the other end ended?)");
    else if (rc == -ETIMEDOUT) snprintf(buf, cap, "timed out");
    else snprintf(buf, cap, "%s", strerror(-rc));
    return buf;
}

int dt_tcp_listen(int port, int backlog) {
    int fd = socket(AF_INET6, SOCK_STREAM, 0), one = 1, zero = 0;
    int rc;
    if (fd >= 0) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof a6);
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)port);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        rc = bind(fd, (struct sockaddr *)&a6, sizeof a6);
        if (rc != 0 && errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (rc != 0) { close(fd); fd = -1; }
    }
    if (fd < 0) { /* no IPv6 here */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        struct sockaddr_in a4;
        memset(&a4, 0, sizeof a4);
        a4.sin_family = AF_INET;
        a4.sin_addr.s_addr = htonl(INADDR_ANY);
        a4.sin_port = htons((uint16_t)port);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&a4, sizeof a4) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
    }
    if (listen(fd, backlog) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    dt_tcp_tune(fd);
    return fd;
}

