/* kernel.h — the arithmetic of matrix factorization's SGD steps, in one loop per vector
 * instruction set (AVX-512, AVX2 + FMA, SSE2, plain C), chosen at run time: one binary
 * built on any x86-64 machine runs the widest vectors the CPU it runs on has. Shared by
 * augur-mf's workers and the serial baseline of bench/augur-bench-mf.
 *
 * The model: prediction = mean + p·q (+ p[k] + q[k] with biases), p a row factor, q a
 * column factor, each `dim` values (k, or k + 1 with biases). The loss of a rating r is
 * (r - prediction)^2 / 2 + reg/2 (|p|^2 + |q|^2), so with err = r - prediction the
 * gradients are g_p = reg p - err q and g_q = reg q - err p (bias: reg b - err), both
 * taken before either row changes.
 *
 * Optimizers, for p (always) and for q (when the loop updates q itself):
 *   SGD:     row -= lr * g
 *   ADAGRAD: one accumulator per row, at row[dim] (LIBMF's): row -= lr / sqrt(G) * g,
 *            then G += mean over the row of g^2.
 *
 * The invariant: every ISA computes the same arithmetic in the same order of ratings;
 * only the order of the additions inside a dot product or a sum of squares differs, so
 * results agree to float rounding (tests/demos/test_mf_kernel.c checks it).
 */
#ifndef AUGUR_DEMOS_MF_KERNEL_H
#define AUGUR_DEMOS_MF_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <augur.h>

typedef enum mf_isa {
  MF_ISA_SCALAR = 0, /* plain C: every machine */
  MF_ISA_SSE2,       /* 4 floats: every x86-64 */
  MF_ISA_AVX2,       /* 8 floats, fused multiply-add */
  MF_ISA_AVX512,     /* 16 floats, masked tails (AVX-512 F) */
  MF_ISA_COUNT
} mf_isa_t;

/* "scalar" "sse2" "avx2" "avx512" <-> mf_isa_t (0 or -1). */
int mf_isa_parse(const char *name, mf_isa_t *out);
const char *mf_isa_name(mf_isa_t isa);
/* 1 if this build has the ISA's loop and this CPU runs it. */
int mf_isa_supported(mf_isa_t isa);
/* The widest supported ISA. */
mf_isa_t mf_isa_best(void);
/* The ISA to use: AUGUR_MF_ISA from the environment if set (0, or -1 with a message in err
 * when it names an unknown ISA or one this CPU lacks), else mf_isa_best(). */
int mf_isa_from_env(mf_isa_t *out, char *err, size_t errlen);

typedef enum mf_optim { MF_SGD = 0, MF_ADAGRAD = 1 } mf_optim_t;

/* How the loop changes q. */
typedef enum mf_qmode {
  MF_Q_GRAD = 0, /* q is a view's row: the loop hands the gradient g_q to au_view_update,
                    and the table's optimizer (AU_OPTIM_SGD / _ADAGRAD_ROW) descends */
  MF_Q_INPLACE,  /* q is plain memory of this thread (the serial baseline): the loop
                    applies `optim` to it as to p, accumulator at q[dim] */
} mf_qmode_t;

/* One rating of a block: its row relative to the block's first row, its column as an index
 * into the block's distinct columns (the view's rows), its value. 8 bytes. */
typedef struct mf_cell {
  uint16_t row, col;
  float value;
} mf_cell_t;

typedef struct mf_kargs {
  float *P;           /* the block's first row */
  size_t pstride;     /* floats from one row of P to the next */
  void *const *Q;     /* Q[c]: the row of the block's c-th column (a view's rows) */
  const au_view_t *v; /* for MF_Q_GRAD: the view whose rows Q are */
  uint32_t k;         /* factor length */
  int biases;         /* p[k], q[k] are biases */
  float mean, lr, reg;
  mf_optim_t optim; /* p's optimizer (and q's with MF_Q_INPLACE) */
  mf_qmode_t qmode;
} mf_kargs_t;

/* Runs the SGD step of each cell in order, in the given ISA's loop (which must be
 * supported), prefetching the rows of the cells ahead. Returns the sum of squared errors,
 * each measured before its step. */
double mf_kernel_run(mf_isa_t isa, const mf_kargs_t *a, const mf_cell_t *cells, size_t n);

/* Sum of squared errors of the cells' predictions, no updates. */
double mf_kernel_eval(mf_isa_t isa, const mf_kargs_t *a, const mf_cell_t *cells, size_t n);

#endif
