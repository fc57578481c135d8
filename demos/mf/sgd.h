/* sgd.h — the arithmetic of one SGD step of matrix factorization, shared by augur-mf
 * and the serial baseline in bench/augur-bench-mf, so that the benchmark compares the
 * frameworks around the same arithmetic.
 *
 * The model: prediction = mean + p·q (+ p[k] + q[k] with biases), where p is a row
 * (user) factor and q a column (item) factor of length k (k+1 with biases).
 */
#ifndef AUGUR_DEMOS_MF_SGD_H
#define AUGUR_DEMOS_MF_SGD_H

#include <stdint.h>
#include <string.h>

/* Dot product in two 4-wide vectors (GCC/Clang vector extensions: SSE or NEON). Written out because
 * the auto-vectorizer, left alone with a float reduction, either keeps it scalar (it may not
 * reorder the sum without -ffast-math) or, given eight partial sums, sometimes interleaves them
 * with shuffles: measured 1.7x slower inside augur-mf's step than in a plain loop, from the same
 * source. */
typedef float mf_v4 __attribute__((vector_size(16)));

static inline float mf_dot(const float *restrict p, const float *restrict q, uint32_t k)
{
  mf_v4 a0 = {0}, a1 = {0};
  uint32_t j = 0;
  for (; j + 8 <= k; j += 8) {
    mf_v4 p0, p1, q0, q1;
    memcpy(&p0, p + j, sizeof(p0)); /* unaligned loads, no aliasing games */
    memcpy(&p1, p + j + 4, sizeof(p1));
    memcpy(&q0, q + j, sizeof(q0));
    memcpy(&q1, q + j + 4, sizeof(q1));
    a0 += p0 * q0;
    a1 += p1 * q1;
  }
  mf_v4 a = a0 + a1;
  float sum = (a[0] + a[2]) + (a[1] + a[3]);
  for (; j < k; j++) sum += p[j] * q[j];
  return sum;
}

/* The model's prediction for a row factor p and column factor q. */
static inline float mf_predict(const float *p, const float *q, uint32_t k, int biases, float mean)
{
  float pred = mean + mf_dot(p, q, k);
  return biases ? pred + p[k] + q[k] : pred;
}

/* One step on rating r: updates p in place and writes q's delta into dq (the caller
 * applies it through the table's kernel). Returns the error before the step. */
static inline float mf_sgd(float *restrict p, const float *restrict q, float *restrict dq,
                           uint32_t k, int biases, float mean, float r, float lr, float reg)
{
  float pred = mean + mf_dot(p, q, k);
  if (biases) pred += p[k] + q[k];
  float err = r - pred;
  for (uint32_t j = 0; j < k; j++) {
    float pj = p[j], qj = q[j];
    p[j] = pj + lr * (err * qj - reg * pj);
    dq[j] = lr * (err * pj - reg * qj);
  }
  if (biases) {
    p[k] += lr * (err - reg * p[k]);
    dq[k] = lr * (err - reg * q[k]);
  }
  return err;
}

#endif
