/* mf.h — SGD matrix factorization on augur: the training loop that augur-mf runs and
 * bench/augur-bench-mf measures.
 *
 * Column (item) factors are an augur table, the shared parameters; rows (users) are
 * partitioned over the workers (row % workers), whose row factors stay in the worker.
 * Each worker walks its ratings in a cache-aware order (blocks of rows x columns, each
 * worker starting at a different column block) and announces the columns of each block
 * `lookahead` blocks ahead as an intent for the clocks that walk it.
 */
#ifndef AUGUR_DEMOS_MF_MF_H
#define AUGUR_DEMOS_MF_MF_H

#include <augur.h>

#include "data.h"

typedef struct mf_opts {
  uint32_t rank;      /* factor length k */
  float lr;           /* learning rate of epoch 0 */
  float decay;        /* epoch e uses lr / (1 + decay * e) */
  float reg;          /* L2 regularization */
  int biases;         /* add a row bias and a column bias */
  float init_sd;      /* initial factors ~ N(0, init_sd) */
  int workers;        /* worker actors; 0 = one per scheduler thread */
  uint32_t batch;     /* ratings per step */
  int lookahead;      /* intents name each block of columns this many blocks ahead */
  int stagger;        /* column blocks staggered over all workers of the cluster */
  au_kernel_t kernel; /* AU_KERNEL_HOGWILD (default) or AU_KERNEL_ADD (exact) */
  au_place_t place;   /* how the column table is placed (default AU_PLACE_ADAPTIVE) */
  uint64_t seed;
  uint64_t hot; /* AU_PLACE_HOT: hot keys (0: the library's default) */
} mf_opts_t;

void mf_opts_default(mf_opts_t *o);

typedef struct mf_epoch {
  double train_rmse; /* over the epoch's updates, each measured before its step */
  double test_rmse;  /* on the test ratings after the epoch; NaN without any */
  double seconds;
  double updates_per_s;
  double local; /* share of column rows that were local when acquired */
  uint64_t updates;
  uint64_t intents;
  uint64_t moves;      /* parameter actors that moved between nodes */
  uint64_t replicas;   /* replicas held at the end of the epoch, all nodes */
  uint64_t bytes_sent; /* bytes the nodes sent each other in the epoch */
  uint64_t releases;   /* claims the nodes ended once their workers were past the columns */
  double cpu_seconds;  /* CPU time the nodes' processes used in the epoch, summed */
} mf_epoch_t;

typedef struct mf mf_t;

/* Builds the model on node: the column table, one worker per shard. Collective on a
 * cluster: every node passes the same whole data set and keeps the rows it owns (row %
 * nodes == rank). train and test (may be NULL) are copied and may be freed afterwards.
 * 0 or a negative AU_E* / MF_E* code with a message in err. */
int mf_create(au_node_t *node, const mf_opts_t *o, uint32_t nrows, uint32_t ncols,
              const mf_ratings_t *train, const mf_ratings_t *test, mf_t **out, char *err,
              size_t errlen);
/* Runs epoch `e` (0-based) over every worker's shard, then evaluates. Collective. */
int mf_epoch(mf_t *m, int e, mf_epoch_t *out);
/* Test RMSE of the current model (NaN without test ratings). Collective. */
int mf_evaluate(mf_t *m, double *rmse);
/* Writes this node's factors as text: header lines, then `row ID v...` for its rows and
 * `col ID v...` for the columns it holds, with the external ids of the maps. On one
 * node that is the whole model. 0 or MF_EIO with a message in err. */
int mf_save(mf_t *m, const char *path, const mf_idmap_t *rows, const mf_idmap_t *cols, char *err,
            size_t errlen);
void mf_free(mf_t *m);

/* The cache-aware walking order: ratings grouped into blocks of rows x columns whose
 * factors (dim floats each) fit in about 256 KiB, column blocks outermost, starting at
 * column block start * (blocks / of) so that `of` workers start apart; stable within a
 * block. With align > 0 the column blocks are whole multiples of `align` columns (the
 * table's group: no parameter actor is shared by two blocks), at least `of` of them
 * when ncols >= of x align, so that `of` workers start in different blocks and walk them
 * in step (--stagger; every node runs the same number of workers). With starts, also
 * the first rating of each block that has ratings, then r->n (*nstarts blocks; the
 * caller frees it). Used for each worker's shard, and by the benchmark's serial
 * baseline. 0 or MF_ENOMEM. */
int mf_block_order(mf_ratings_t *r, uint32_t nrows, uint32_t ncols, uint32_t dim, int start, int of,
                   uint32_t align, size_t **starts, size_t *nstarts);

#endif
