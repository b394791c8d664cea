/* src/transport/settings.c - the runtime settings of the data path: parsed
 * from the environment, agreed over the job, in effect. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/error.h"
#include "transport/settings.h"

/* Default piggy-back limit: allreduces up to this many bytes carry their
 * fingerprint with the data (measured crossover, see reliability.h). */
#define DT_INLINE_MAX_DEFAULT ((size_t)64 << 10)
#define DT_INLINE_MAX_LIMIT ((size_t)64 << 20)
#define DT_SHM_MIN_DEFAULT ((size_t)16 << 10)
#define DT_SHM_CHUNK_DEFAULT ((size_t)1 << 20)
#define DT_SHM_STREAM_DEFAULT ((size_t)16 << 20)
#define DT_TWO_LEVEL_MIN_DEFAULT ((size_t)64 << 10)

static dt_settings g_s = {.check = 1, .inline_max = DT_INLINE_MAX_DEFAULT, .shm_on = 1,
                          .shm_min = DT_SHM_MIN_DEFAULT, .shm_chunk = DT_SHM_CHUNK_DEFAULT,
                          .shm_stream = DT_SHM_STREAM_DEFAULT, .two_level = DT_TWO_LEVEL_AUTO,
                          .two_level_min = DT_TWO_LEVEL_MIN_DEFAULT};

int dt_rel_check_on(void) { return g_s.check; }
size_t dt_rel_inline_max(void) { return g_s.inline_max; }
int dt_shm_on(void) { return g_s.shm_on; }
size_t dt_shm_min(void) { return g_s.shm_min; }
size_t dt_shm_chunk(void) { return g_s.shm_chunk; }
size_t dt_shm_stream(void) { return g_s.shm_stream; }
int dt_two_level_mode(void) { return g_s.two_level; }
size_t dt_two_level_min(void) { return g_s.two_level_min; }
void dt_rel_set_for_testing(int check, size_t inline_max) {
    g_s.check = check;
    g_s.inline_max = inline_max;
}

void dt_settings_apply(const dt_settings *s) { g_s = *s; }

int dt_settings_read(dt_settings *s) {
    int rc, found;
    if ((rc = dt_env_bool("DTRAIN_CHECK_COLLECTIVES", 1, &s->check))) return rc;
    double x = (double)DT_INLINE_MAX_DEFAULT;
    if ((rc = dt_env_number("DTRAIN_CHECK_INLINE_MAX", 0, (double)DT_INLINE_MAX_LIMIT, &x, &found))) return rc;
    s->inline_max = (size_t)x;
    if ((rc = dt_env_bool("DTRAIN_SHM_ALLREDUCE", 1, &s->shm_on))) return rc;
    x = (double)DT_SHM_MIN_DEFAULT;
    if ((rc = dt_env_number("DTRAIN_SHM_MIN_BYTES", 0, 1e15, &x, &found))) return rc;
    s->shm_min = (size_t)x;
    x = (double)DT_SHM_CHUNK_DEFAULT;
    if ((rc = dt_env_number("DTRAIN_SHM_CHUNK_BYTES", 4096, (double)((size_t)1 << 30), &x, &found))) return rc;
    s->shm_chunk = ((size_t)x + 63) & ~(size_t)63; /* whole cache lines */
    x = (double)DT_SHM_STREAM_DEFAULT;
    if ((rc = dt_env_number("DTRAIN_SHM_STREAM_BYTES", 0, 1e15, &x, &found))) return rc;
    s->shm_stream = (size_t)x;
    /* DTRAIN_TWO_LEVEL: auto, or a boolean */
    const char *tl = getenv("DTRAIN_TWO_LEVEL");
    s->two_level = DT_TWO_LEVEL_AUTO;
    if (tl && *tl && strcasecmp(tl, "auto") != 0) {
        int on = 0;
        if ((rc = dt_env_bool("DTRAIN_TWO_LEVEL", 0, &on)))
            return DT_ERR(DT_ERR_INVALID, "DTRAIN_TWO_LEVEL='%s' is not auto, 1 or 0 (true/false, yes/no, on/off)", tl);
        s->two_level = on ? DT_TWO_LEVEL_ON : DT_TWO_LEVEL_OFF;
    }
    x = (double)DT_TWO_LEVEL_MIN_DEFAULT;
    if ((rc = dt_env_number("DTRAIN_TWO_LEVEL_MIN_BYTES", 0, 1e15, &x, &found))) return rc;
    s->two_level_min = (size_t)x;
    return DT_OK;
}

int dt_settings_agree(dt_settings *s) {
    const dt_boot *b = dt_boot_get();
    if (!b) return DT_ERR(DT_ERR_STATE, "no bootstrap is open");
    if (b->size == 1) return DT_OK;
    enum { N = 7 };
    uint64_t mine[N] = {(uint64_t)(s->check != 0), s->inline_max, (uint64_t)(s->shm_on != 0), s->shm_min, s->shm_chunk,
                        (uint64_t)s->two_level, s->two_level_min};
    uint64_t *all = malloc(sizeof *all * N * (size_t)b->size);
    if (!all) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = dt_boot_allgather(mine, all, sizeof mine);
    if (rc) { free(all); return rc; }
    for (int r = 0; r < b->size; r++) {
        const uint64_t *v = all + (size_t)r * N;
        s->check |= (int)v[0];
        if (v[1] < s->inline_max) s->inline_max = (size_t)v[1];
        s->shm_on &= (int)v[2];
        if (v[3] > s->shm_min) s->shm_min = (size_t)v[3];
        if (v[4] > s->shm_chunk) s->shm_chunk = (size_t)v[4];
        if ((int)v[5] < s->two_level) s->two_level = (int)v[5];
        if (v[6] > s->two_level_min) s->two_level_min = (size_t)v[6];
    }
    free(all);
    return DT_OK;
}
