/* src/io/fileio.h - internal: small POSIX file helpers shared by the
 * safetensors reader/writer and the checkpoint store. All return 0 on success
 * or -1 with errno set (callers turn that into DT_ERR messages). */
#ifndef DT_IO_FILEIO_H
#define DT_IO_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* 1 on a little-endian host. */
int dtio_little_endian(void);
/* malloc'd concatenation of a and b; NULL on allocation failure. */
char *dtio_cat(const char *a, const char *b);
/* malloc'd "dir/name". */
char *dtio_join(const char *dir, const char *name);
int dtio_write_all(int fd, const void *buf, size_t n);
int dtio_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);
/* Reads up to n bytes at off; returns the count read (< n only at end of
 * file) or -1. */
long long dtio_pread_all(int fd, void *buf, size_t n, uint64_t off);
/* fsync the directory containing path (or path itself if is_dir). */
int dtio_fsync_dir_of(const char *path, int is_dir);
/* 1 if path exists (any type), 0 if not, -1 on other errors. */
int dtio_exists(const char *path);
/* Reads a whole regular file of at most max bytes into a malloc'd buffer
 * (NUL-terminated). Returns 0, -1 (errno; EISDIR for anything but a regular
 * file, which is never waited on) or -2 (larger than max). */
int dtio_read_file(const char *path, size_t max, char **out, size_t *len);
/* Little-endian helpers. */
void dtio_put_u32(unsigned char *p, uint32_t v);
void dtio_put_u64(unsigned char *p, uint64_t v);
uint32_t dtio_get_u32(const unsigned char *p);
uint64_t dtio_get_u64(const unsigned char *p);

#endif
