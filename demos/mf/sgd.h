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

/* Dot product with eight independent partial sums: the compiler vectorizes the inner
 * fixed-width loop without -ffast-math (it may not reorder one float sum). */
static inline float mf_dot(const float *restrict p, const float *restrict q, uint32_t k)
{
  float acc[8] = {0};
  uint32_t j = 0;
  for (; j + 8 <= k; j += 8)
    for (uint32_t l = 0; l < 8; l++) acc[l] += p[j + l] * q[j + l];
  for (; j < k; j++) acc[0] += p[j] * q[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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
