/* src/core/rng.c - xoshiro256** seeded by splitmix64 (public-domain algorithms
 * by Blackman and Vigna; written from their published description). */
#include <math.h>
#include "dtrain/rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void dt_rng_seed(dt_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

void dt_rng_seed2(dt_rng *rng, uint64_t seed, uint64_t stream) {
    uint64_t x = seed;
    uint64_t mixed = splitmix64(&x) ^ (stream * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
    dt_rng_seed(rng, mixed);
}

uint64_t dt_rng_u64(dt_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float dt_rng_uniform(dt_rng *rng) { return (float)(dt_rng_u64(rng) >> 40) * (1.0f / 16777216.0f); }

double dt_rng_uniform_f64(dt_rng *rng) {
    return (double)(dt_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t dt_rng_below(dt_rng *rng, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = dt_rng_u64(rng); while (r >= limit);
    return r % n;
}

double dt_rng_normal(dt_rng *rng) {
    double u1 = dt_rng_uniform_f64(rng), u2 = dt_rng_uniform_f64(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void dt_rng_shuffle_i64(dt_rng *rng, int64_t *idx, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dt_rng_below(rng, (uint64_t)i + 1);
        int64_t t = idx[i]; idx[i] = idx[j]; idx[j] = t;
    }
}
