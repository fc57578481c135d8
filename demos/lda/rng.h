/* rng.h — the pseudo-random numbers of augur-lda: xoshiro256** seeded by splitmix64.
 * Everything random in the demo (generated corpora, initial topics, the sampler) draws
 * from a stream like this, a pure function of its seed; never rand().
 */
#ifndef AUGUR_DEMOS_LDA_RNG_H
#define AUGUR_DEMOS_LDA_RNG_H

#include <stdint.h>

typedef struct lda_rng {
  uint64_t s[4];
} lda_rng_t;

static inline uint64_t lda_splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A stream for (seed, stream): different streams of one seed are independent. */
static inline void lda_rng_seed(lda_rng_t *r, uint64_t seed, uint64_t stream)
{
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
  for (int i = 0; i < 4; i++) r->s[i] = lda_splitmix64(&x);
}

static inline uint64_t lda_rng_next(lda_rng_t *r)
{
  uint64_t *s = r->s;
  uint64_t x = s[1] * 5, out = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return out;
}

/* Uniform in [0, n) from the top 32 bits (Lemire's multiply; the bias is below 2^-32 * n). */
static inline uint32_t lda_rng_below(lda_rng_t *r, uint32_t n)
{
  return (uint32_t)(((lda_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [0, 1) with 24 bits: every value a float can hold exactly. */
static inline float lda_rng_float(lda_rng_t *r)
{
  return (float)(uint32_t)(lda_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [0, 1) with 53 bits. */
static inline double lda_rng_double(lda_rng_t *r)
{
  return (double)(lda_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
