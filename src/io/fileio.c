/* src/io/fileio.c - POSIX file helpers of the storage layer (safetensors, checkpoints). */
#include "io/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dtio_little_endian(void) {
    const uint16_t x = 1;
    unsigned char b;
    memcpy(&b, &x, 1);
    return b == 1;
}

char *dtio_cat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

char *dtio_join(const char *dir, const char *name) {
    size_t la = strlen(dir), lb = strlen(name);
    char *s = malloc(la + lb + 2);
    if (!s) return NULL;
    memcpy(s, dir, la);
    s[la] = '/';
    memcpy(s + la + 1, name, lb + 1);
    return s;
}

int dtio_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) { errno = EIO; return -1; }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int dtio_pwrite_all(int fd, const void *buf, size_t n, uint64_t off) {
    const char *p = buf;
    while (n) {
        if (off > (uint64_t)INT64_MAX) { errno = EFBIG; return -1; }
        ssize_t k = pwrite(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) { errno = EIO; return -1; }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

long long dtio_pread_all(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        if (off > (uint64_t)INT64_MAX) { errno = EFBIG; return -1; }
        ssize_t k = pread(fd, p + got, n - got > (1u << 30) ? (1u << 30) : n - got, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) break;
        got += (size_t)k;
        off += (uint64_t)k;
    }
    return (long long)got;
}

int dtio_fsync_dir_of(const char *path, int is_dir) {
    char *d;
    if (is_dir) {
        d = dtio_cat(path, "");
    } else {
        const char *slash = strrchr(path, '/');
        if (!slash) d = dtio_cat(".", "");
        else if (slash == path) d = dtio_cat("/", "");
        else {
            d = malloc((size_t)(slash - path) + 1);
            if (d) { memcpy(d, path, (size_t)(slash - path)); d[slash - path] = '\0'; }
        }
    }
    if (!d) { errno = ENOMEM; return -1; }
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(d);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    /* Some file systems refuse fsync on directories; that is not an error. */
    if (rc && (errno == EINVAL || errno == EROFS || errno == EBADF)) rc = 0;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int dtio_exists(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return 1;
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

int dtio_read_file(const char *path, size_t max, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) { int e = errno; close(fd); errno = e; return -1; }
    if (!S_ISREG(st.st_mode)) { close(fd); errno = EISDIR; return -1; }
    if ((uint64_t)st.st_size > max) { close(fd); return -2; }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) { close(fd); errno = ENOMEM; return -1; }
    long long got = dtio_pread_all(fd, buf, n, 0);
    int e = errno;
    close(fd);
    if (got < 0) { free(buf); errno = e; return -1; }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return 0;
}

void dtio_put_u32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}
void dtio_put_u64(unsigned char *p, uint64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
}
uint32_t dtio_get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int k = 3; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}
uint64_t dtio_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}
