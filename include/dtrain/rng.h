/* dtrain/rng.h - small deterministic random number generator (xoshiro256**,
 * seeded through splitmix64). Same seed -> same stream on every platform. Used
 * for weight init, dropout masks and data shuffling. Not for cryptography. */
#ifndef DTRAIN_RNG_H
#define DTRAIN_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_rng { uint64_t s[4]; } dt_rng;

/* Seed the generator; any seed (0 included) is valid. */
void dt_rng_seed(dt_rng *rng, uint64_t seed);
/* Seed from several words, e.g. (seed, epoch) or (seed, rank, layer). */
void dt_rng_seed2(dt_rng *rng, uint64_t seed, uint64_t stream);
uint64_t dt_rng_u64(dt_rng *rng);
/* Uniform in [0, 1) with 24 (float) / 53 (double) random bits. */
float dt_rng_uniform(dt_rng *rng);
double dt_rng_uniform_f64(dt_rng *rng);
/* Uniform integer in [0, n); n > 0 (unbiased, by rejection). */
uint64_t dt_rng_below(dt_rng *rng, uint64_t n);
/* Standard normal (Box-Muller). */
double dt_rng_normal(dt_rng *rng);
/* Fisher-Yates shuffle of idx[0..n). */
void dt_rng_shuffle_i64(dt_rng *rng, int64_t *idx, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
