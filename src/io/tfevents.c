/* src/io/tfevents.c - TensorBoard event files (see tfevents.h).
 *
 * Why a hand-written encoder and not libprotobuf-c: an event of scalars needs
 * four protobuf field types (a double, a varint, length-delimited strings and
 * messages, a float), about forty lines here, while libprotobuf-c needs a
 * .proto compiled by protoc-c at build time, two more build dependencies
 * (libprotobuf-c-dev, protobuf-c-compiler) for every build, the build without
 * MPI and the GPU machine (which has no package registry: its libraries are
 * carried as .debs), and generated code for messages of which we write three
 * fields. The format is frozen (TensorBoard reads files of 2016), and the
 * tests read every file back with an independent reader (and TensorBoard's
 * own in bench/tensorboard_check.sh). CRC32C is computed bit by bit: records
 * are tens of bytes, so a table buys nothing. */
#include "io/tfevents.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/error.h"
#include "io/fileio.h"

uint32_t dtio_crc32c(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t dtio_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protobuf wire format: the few pieces an Event of scalars needs -------- */
typedef struct pb {
    unsigned char *p;
    size_t n, cap;
    int over; /* did not fit */
} pb;

static void pb_bytes(pb *b, const void *src, size_t n) {
    if (b->over || n > b->cap - b->n) {
        b->over = 1;
        return;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_bytes(b, t, n);
}

/* field key: (number << 3) | wire type (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit) */
static void pb_key(pb *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)(field << 3 | wire)); }

static void pb_len_delim(pb *b, unsigned field, const void *data, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    pb_bytes(b, data, n);
}

static void pb_double(pb *b, unsigned field, double v) {
    uint64_t u;
    unsigned char t[8];
    memcpy(&u, &v, 8);
    dtio_put_u64(t, u);
    pb_key(b, field, 1);
    pb_bytes(b, t, 8);
}

static void pb_float(pb *b, unsigned field, float v) {
    uint32_t u;
    unsigned char t[4];
    memcpy(&u, &v, 4);
    dtio_put_u32(t, u);
    pb_key(b, field, 5);
    pb_bytes(b, t, 4);
}

/* ---- TFRecord framing ----------------------------------------------------- */
static int write_record(dt_tfevents *w, const unsigned char *data, size_t n) {
    unsigned char head[12], tail[4];
    dtio_put_u64(head, (uint64_t)n);
    dtio_put_u32(head + 8, dtio_crc32c_mask(dtio_crc32c(0, head, 8)));
    dtio_put_u32(tail, dtio_crc32c_mask(dtio_crc32c(0, data, n)));
    errno = 0;
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(data, 1, n, w->f) != n || fwrite(tail, 1, 4, w->f) != 4 ||
        fflush(w->f) != 0)
        return errno ? errno : EIO;
    return 0;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An Event: wall_time, step, then either file_version or the summary. */
static int write_event(dt_tfevents *w, long long step, const char *version, const unsigned char *summary, size_t slen) {
    unsigned char ev[DTIO_TFE_BUF + 64];
    pb b = {ev, 0, sizeof ev, 0};
    pb_double(&b, 1, wall_now());
    if (step) {
        pb_key(&b, 2, 0);
        pb_varint(&b, (uint64_t)step); /* int64: two's complement, as protobuf does */
    }
    if (version) pb_len_delim(&b, 3, version, strlen(version));
    if (summary) pb_len_delim(&b, 5, summary, slen);
    if (b.over) return EOVERFLOW;
    return write_record(w, ev, b.n);
}

/* ---- the file ------------------------------------------------------------- */
/* mkdir -p: every missing component of dir, each checked to be a directory. */
static int make_dirs(const char *dir) {
    char p[512];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return errno;
        if (stat(p, &st) != 0) return errno;
        if (!S_ISDIR(st.st_mode)) return ENOTDIR;
        p[i] = c;
    }
    return 0;
}

int dtio_tfe_open(dt_tfevents *w, const char *dir) {
    static int files_opened; /* <n>: SummaryWriter's per-process count */
    memset(w, 0, sizeof *w);
    int e = make_dirs(dir);
    if (e) return DT_ERR(DT_ERR_IO, "cannot create the TensorBoard directory '%s': %s", dir, strerror(e));
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%ld.%d", dir, (long long)time(NULL),
                     host, (long)getpid(), files_opened);
    if (n < 0 || (size_t)n >= sizeof w->path)
        return DT_ERR(DT_ERR_IO, "TensorBoard directory '%s': the event file's path is too long", dir);
    w->f = fopen(w->path, "wbx");
    if (!w->f) return DT_ERR(DT_ERR_IO, "cannot create the TensorBoard event file '%s': %s", w->path, strerror(errno));
    files_opened++;
    if ((e = write_event(w, 0, "brain.Event:2", NULL, 0)) != 0) {
        fclose(w->f);
        w->f = NULL;
        unlink(w->path);
        return DT_ERR(DT_ERR_IO, "writing the TensorBoard event file '%s' failed: %s", w->path, strerror(e));
    }
    return DT_OK;
}

void dtio_tfe_begin(dt_tfevents *w, long long step) {
    w->step = step;
    w->len = 0;
}

void dtio_tfe_scalar(dt_tfevents *w, const char *tag, double value) {
    if (!w->f || w->err || w->len > sizeof w->buf) return;
    unsigned char v[160];
    pb val = {v, 0, sizeof v, 0};
    size_t tl = strlen(tag);
    if (tl > 127) val.over = 1;
    pb_len_delim(&val, 1, tag, tl);
    pb_float(&val, 2, (float)value);
    pb s = {w->buf, w->len, sizeof w->buf, val.over};
    pb_len_delim(&s, 1, v, val.n); /* Summary.value */
    w->len = s.over ? sizeof w->buf + 1 : s.n;
}

int dtio_tfe_end(dt_tfevents *w) {
    if (!w->f || w->err) return w->err;
    if (w->len > sizeof w->buf) w->err = EOVERFLOW;
    else if (w->len) w->err = write_event(w, w->step, NULL, w->buf, w->len);
    w->len = 0;
    return w->err;
}

int dtio_tfe_close(dt_tfevents *w) {
    if (!w->f) return w->err;
    errno = 0;
    if ((fflush(w->f) != 0 || ferror(w->f)) && !w->err) w->err = errno ? errno : EIO;
    errno = 0;
    if (fclose(w->f) != 0 && !w->err) w->err = errno ? errno : EIO;
    w->f = NULL;
    return w->err;
}
