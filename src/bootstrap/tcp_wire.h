/* src/bootstrap/tcp_wire.h - internal: the sockets and frames of the tcp
 * bootstrap (tcp.c): non-blocking sockets whose every wait is a poll() with
 * a deadline, and frames of a 24-byte little-endian header (magic, version,
 * type, sender rank, aux, payload length) and a payload. */
#ifndef DT_BOOTSTRAP_TCP_WIRE_H
#define DT_BOOTSTRAP_TCP_WIRE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define DT_TCP_MAGIC 0x74627464u /* "dtbt" */
#define DT_TCP_VERSION 1u
#define DT_TCP_HDR_BYTES 24

typedef struct dt_tcp_frame {
    uint32_t type, rank, aux;
    uint64_t len;
} dt_tcp_frame;

/* Monotonic milliseconds; the deadline t seconds from now (-1: t <= 0, no
 * limit); milliseconds left until a deadline (0: passed, -1: no limit). */
long long dt_tcp_now_ms(void);
long long dt_tcp_deadline_in(double t);
int dt_tcp_remaining(long long deadline);

void dt_tcp_put32(unsigned char *p, uint32_t v);
void dt_tcp_put64(unsigned char *p, uint64_t v);
uint32_t dt_tcp_get32(const unsigned char *p);
uint64_t dt_tcp_get64(const unsigned char *p);

/* Non-blocking, close-on-exec, no Nagle. */
void dt_tcp_tune(int fd);
/* A socket listening on `port` of every interface (IPv6 and IPv4 where the
 * host has IPv6, else IPv4); -1 with errno on failure. */
int dt_tcp_listen(int port, int backlog);
/* Wait for `ev` on fd: 1 ready, 0 deadline passed, -errno. */
int dt_tcp_wait_fd(int fd, short ev, long long deadline);
/* 0, or -errno: -EPIPE the other end closed, -ETIMEDOUT the deadline passed. */
int dt_tcp_send_all(int fd, const void *buf, size_t n, long long deadline);
int dt_tcp_recv_all(int fd, void *buf, size_t n, long long deadline);
/* One frame of `na` payload bytes, whole, under mu (one sender at a time). */
int dt_tcp_send_frame(pthread_mutex_t *mu, int fd, uint32_t from, uint32_t type, uint32_t aux, const void *a,
                      size_t na, long long deadline);
/* The header of the next frame: 0, -EPROTO (not this protocol), or
 * -EPROTONOSUPPORT (another version, in f->aux), or recv_all's error. */
int dt_tcp_recv_header(int fd, dt_tcp_frame *f, long long deadline);
/* Words for a negative result of the functions above. */
const char *dt_tcp_why(int rc, char *buf, size_t cap);

#endif
