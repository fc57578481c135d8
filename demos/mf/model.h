/* model.h — an augur-mf model as it leaves the run: one directory that numpy, a script or
 * `augur-mf predict` / `augur-mf recommend` read (docs/mf.md, "The saved model").
 *
 *   model.txt                 key=value lines: format, rank, biases, mean, rows, cols
 *   row_ids.txt, col_ids.txt  the file's ids, one per line, in the matrices' order
 *   P.txt, Q.txt              one row (column) factor per line, rank numbers
 *   row_bias.txt, col_bias.txt  with --biases, one number per line
 *   *.npy                     the same as NumPy arrays: P, Q float32 (n, rank), biases
 *                             float32 (n,), ids uint64 (n,)
 *
 * prediction(row, col) = mean + P[row] . Q[col] (+ row_bias[row] + col_bias[col]).
 * Every file is written under a temporary name and renamed, so a crash leaves no half
 * file. libc only.
 */
#ifndef AUGUR_DEMOS_MF_MODEL_H
#define AUGUR_DEMOS_MF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

typedef struct mf_model {
  uint32_t rank, nrows, ncols;
  int biases;
  float mean;
  uint64_t *row_ids, *col_ids; /* nrows, ncols */
  float *P, *Q;                /* nrows x rank, ncols x rank, row-major */
  float *row_bias, *col_bias;  /* NULL without biases */
} mf_model_t;

/* Allocates the arrays for the sizes in m (rank, nrows, ncols, biases). 0 or MF_ENOMEM. */
int mf_model_alloc(mf_model_t *m);
void mf_model_free(mf_model_t *m);

/* Writes m into dir (created if missing). 0, or MF_EIO / MF_ENOMEM with a message. */
int mf_model_save(const mf_model_t *m, const char *dir, char *err, size_t errlen);
/* Reads a model written by mf_model_save (its .npy files and model.txt). 0, or MF_EIO /
 * MF_EPARSE / MF_ENOMEM with a message naming the file. */
int mf_model_load(const char *dir, mf_model_t *m, char *err, size_t errlen);

/* The prediction for row index r and column index c. */
float mf_model_predict(const mf_model_t *m, uint32_t r, uint32_t c);

/* Id maps of the model's rows and columns (index i is the i-th id). 0 or MF_ENOMEM. */
int mf_model_maps(const mf_model_t *m, mf_idmap_t *rows, mf_idmap_t *cols);

#endif
