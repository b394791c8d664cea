/* src/io/tfevents.h - internal: a TensorBoard event file writer (scalars).
 *
 * The file is what TensorFlow's and PyTorch's SummaryWriter write and what
 * `tensorboard --logdir DIR` reads: TFRecord framing around serialized
 * `tensorflow.Event` protobuf messages.
 *
 *   record = u64 length (little endian) | u32 masked CRC32C of those 8 bytes
 *          | data (length bytes)        | u32 masked CRC32C of the data
 *   masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
 *             Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 *
 * The first record carries file_version "brain.Event:2" (TensorBoard skips a
 * file without it); every later one is one Event with a Summary of the
 * scalars added between dtio_tfe_begin and dtio_tfe_end.
 *
 * The encoder is hand-written (see tfevents.c for why): it emits the four
 * field types above and nothing else. */
#ifndef DT_IO_TFEVENTS_H
#define DT_IO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DTIO_TFE_BUF 8192 /* one event's encoded Summary, at most */

typedef struct dt_tfevents {
    FILE *f;           /* NULL: not open (every call a no-op) */
    char path[512];    /* DIR/events.out.tfevents.<time>.<host>.<pid>.<n> */
    int err;           /* errno of the first failed write; 0 if none */
    long long step;    /* the event being built */
    size_t len;        /* bytes of Summary in buf */
    unsigned char buf[DTIO_TFE_BUF];
} dt_tfevents;

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, continued
 * from crc (0 to start): crc32c("123456789") = 0xE3069283. */
uint32_t dtio_crc32c(uint32_t crc, const void *p, size_t n);
/* TFRecord's masked form of a CRC32C. */
uint32_t dtio_crc32c_mask(uint32_t crc);

/* Creates dir (and its missing parents) if needed, then a new event file in
 * it named events.out.tfevents.<unix seconds>.<host name>.<pid>.<n> (n: this
 * process's count of files opened), and writes the file_version record.
 * DT_OK, or DT_ERR_IO naming the path and the reason (dir not a directory,
 * no permission, ...), with nothing left open. */
int dtio_tfe_open(dt_tfevents *w, const char *dir);
/* Builds one Event at `step`: begin, any number of scalars, end (which
 * writes the record with the current wall time and flushes the file, so a
 * running TensorBoard sees it). A tag longer than 127 bytes, or more
 * scalars than DTIO_TFE_BUF holds, make the event fail with EOVERFLOW. */
void dtio_tfe_begin(dt_tfevents *w, long long step);
void dtio_tfe_scalar(dt_tfevents *w, const char *tag, double value);
/* Returns 0, or the errno of the first failure of the file's life (later
 * events are dropped once one failed). */
int dtio_tfe_end(dt_tfevents *w);
/* Flushes and closes (no-op if not open); 0 or the first errno. */
int dtio_tfe_close(dt_tfevents *w);

#endif
