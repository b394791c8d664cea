/* src/transport/settings.h - internal: the runtime settings of the data path
 * (coll.h, reliability.h): read from the environment by dt_init, agreed over
 * the job (the ranks must take the same path through every call), then read
 * by the transports and the collective layer. */
#ifndef DT_TRANSPORT_SETTINGS_H
#define DT_TRANSPORT_SETTINGS_H

#include <stddef.h>

typedef struct dt_settings {
    int check;          /* DTRAIN_CHECK_COLLECTIVES */
    size_t inline_max;  /* DTRAIN_CHECK_INLINE_MAX */
    int shm_on;         /* DTRAIN_SHM_ALLREDUCE */
    size_t shm_min;     /* DTRAIN_SHM_MIN_BYTES */
    size_t shm_chunk;   /* DTRAIN_SHM_CHUNK_BYTES (whole cache lines) */
    size_t shm_stream;  /* DTRAIN_SHM_STREAM_BYTES */
    int two_level;      /* DTRAIN_TWO_LEVEL: DT_TWO_LEVEL_OFF / _ON / _AUTO */
    size_t two_level_min; /* DTRAIN_TWO_LEVEL_MIN_BYTES */
} dt_settings;

/* DTRAIN_TWO_LEVEL, ordered so that the agreed value is the smallest. */
enum { DT_TWO_LEVEL_OFF = 0, DT_TWO_LEVEL_AUTO = 1, DT_TWO_LEVEL_ON = 2 };

/* The defaults, overridden by the environment; DT_ERR_INVALID naming a
 * malformed variable. */
int dt_settings_read(dt_settings *s);
/* Agree over the open bootstrap's job: the check stays on if any rank wants
 * it (a split decision would deadlock), the smallest inline limit, the
 * shared-memory allreduce only if every rank allows it, from the largest
 * threshold and chunk; two-level collectives off if any rank says off, else
 * auto if any says auto, from the largest threshold. shm_stream stays this
 * rank's own (results do not depend on it). Collective. */
int dt_settings_agree(dt_settings *s);
/* Make s the settings in effect (dt_init). */
void dt_settings_apply(const dt_settings *s);

/* Reliability (dtrain/reliability.h): dt_rel_*.
 * 1 if collectives are fingerprint-checked (DTRAIN_CHECK_COLLECTIVES). */
int dt_rel_check_on(void);
/* Largest allreduce (bytes) whose check travels with the data. */
size_t dt_rel_inline_max(void);
/* Benchmarks and tests only: switch the check / set the inline limit at run
 * time. Every rank must make the same call at the same point (between
 * collectives), or checked and unchecked calls will meet and hang. */
void dt_rel_set_for_testing(int check, size_t inline_max);
/* The shared-memory allreduce (dtrain/coll.h, docs/shared-memory.md): dt_shm_*.
 * On/off, the smallest call (bytes) it takes, the
 * bytes of each per-rank buffer (larger calls run in chunks of it). */
int dt_shm_on(void);
size_t dt_shm_min(void);
size_t dt_shm_chunk(void);
/* Out-of-place shared-memory allreduces of at least this many bytes write
 * their outputs with streaming stores. */
size_t dt_shm_stream(void);
/* Two-level collectives for groups spanning hosts (coll.h): the agreed
 * DTRAIN_TWO_LEVEL (DT_TWO_LEVEL_*) and, under auto, the smallest call
 * (bytes) that takes them. */
int dt_two_level_mode(void);
size_t dt_two_level_min(void);

#endif
