/* mf.h — matrix factorization on augur: the training loop that augur-mf runs and
 * bench/augur-bench-mf measures.
 *
 * Column (item) factors are an augur table, the shared parameters; row (user) factors
 * are the node's own (rows g % nodes == rank). Each node cuts its ratings into a grid of
 * blocks (grid.h), row ranges x column ranges of whole parameter actors, and its workers
 * take the blocks one at a time through the block scheduler (blocksched.h): no two
 * blocks held at once share a row or column range, so the workers' rows and columns stay
 * in their caches and never collide. A worker walks a column block's row blocks before
 * it moves on, and announces the columns of the column block it enters and of the next
 * ones of its walk as intents for the clocks it will spend there. The arithmetic is
 * kernel.h's, in the widest vectors the CPU has.
 */
#ifndef AUGUR_DEMOS_MF_MF_H
#define AUGUR_DEMOS_MF_MF_H

#include <augur.h>

#include "data.h"
#include "model.h"
#include "grid.h"
#include "kernel.h"

typedef struct mf_opts {
  uint32_t rank;      /* factor length k */
  mf_optim_t optim;   /* MF_ADAGRAD (default) or MF_SGD, for row and column factors */
  float lr;           /* learning rate of epoch 0 */
  float decay;        /* epoch e uses lr / (1 + decay * e) */
  float reg;          /* L2 regularization */
  int biases;         /* add a row bias and a column bias */
  float init_sd;      /* initial factors ~ N(0, init_sd) */
  int workers;        /* worker actors; 0 = one per scheduler thread */
  uint32_t batch;     /* most ratings per step */
  int lookahead;      /* column blocks announced ahead of the one a worker enters */
  int stagger;        /* column blocks staggered over all workers of the cluster; -1
                         (default): on a cluster, but for classic with plain SGD, which
                         trains better in the node order (docs/mf.md, Across nodes) */
  int sharded;        /* the ratings given are this node's rows only (shard.h): the
                         column counts are summed over the cluster */
  au_kernel_t kernel; /* AU_KERNEL_HOGWILD (default) or AU_KERNEL_ADD (exact) */
  au_place_t place;   /* how the column table is placed (default AU_PLACE_ADAPTIVE) */
  uint64_t seed;
  uint64_t hot; /* AU_PLACE_HOT: this many most rated columns are hot (0: 1%) */
  int bounded;  /* the node runs under AU_SSP or AU_BSP: a worker's clock moves at the end
                   of each block it walks, and every run starts from a clock all workers
                   share (docs/mf.md, "Consistency") */
} mf_opts_t;

/* Defaults: rank 16, adagrad (below), batch 8192, lookahead 1, stagger auto, adaptive
 * placement, Hogwild, seed 1. */
void mf_opts_default(mf_opts_t *o);
/* Sets the optimizer with its defaults: adagrad lr 0.1, reg 0.05, decay 0; sgd lr 0.02,
 * reg 0.02, decay 0.1; both init_sd 0.1 (docs/mf.md says how they were chosen). */
void mf_opts_optimizer(mf_opts_t *o, mf_optim_t optim);

typedef struct mf_epoch {
  double train_rmse; /* over the epoch's updates, each measured before its step */
  double test_rmse;  /* on the test ratings after the epoch; NaN without any */
  double seconds;
  double updates_per_s;
  double local; /* share of column rows that were local when acquired */
  uint64_t updates;
  uint64_t intents;
  uint64_t moves;       /* parameter actors that moved between nodes */
  uint64_t replicas;    /* replicas held at the end of the epoch, all nodes */
  uint64_t bytes_sent;  /* bytes the nodes sent each other in the epoch */
  uint64_t bytes_by[5]; /* the same by purpose: fetch, push, move, replica, control */
  uint64_t releases;    /* claims the nodes ended once their workers were past the columns */
  double cpu_seconds;   /* CPU time the nodes' processes used in the epoch, summed */
  uint64_t waits;       /* steps in which a worker found no free block, all nodes */
  uint64_t clock_waits; /* under a consistency bound: reads that waited for it, all nodes */
  double clock_wait_s;  /* ... and the seconds they waited, summed over the workers */
} mf_epoch_t;

typedef struct mf mf_t;

/* Builds the model on node: the column table, the node's blocks, its workers. Collective
 * on a cluster: every node passes the same whole data set and keeps the rows it owns (row
 * % nodes == rank). train and test (test may be NULL) are taken: mf_create empties them,
 * giving their memory back while it builds the blocks (copy them first to keep them).
 * The vector loop is AUGUR_MF_ISA's if set (kernel.h), else the widest the CPU has.
 * 0 or a negative AU_E* / MF_E* code with a message in err. */
int mf_create(au_node_t *node, const mf_opts_t *o, uint32_t nrows, uint32_t ncols,
              mf_ratings_t *train, mf_ratings_t *test, mf_t **out, char *err, size_t errlen);
/* Runs epoch `e` (0-based) over every worker's shard, then evaluates. Collective. */
int mf_epoch(mf_t *m, int e, mf_epoch_t *out);
/* Test RMSE of the current model (NaN without test ratings). Collective. */
int mf_evaluate(mf_t *m, double *rmse);
/* Collective, between epochs: a checkpoint of everything training needs to go on after
 * `epochs` epochs (docs/checkpoints.md): the column table by au_checkpoint, and each
 * node's row factors (values and AdaGrad state, by file id) as DIR/ckpt-E/rows-RANK.bin,
 * written before the manifest and LATEST. 0 or an AU_* error with a message in err. */
int mf_checkpoint(mf_t *m, const char *dir, int epochs, const mf_idmap_t *rows,
                  const mf_idmap_t *cols, char *err, size_t errlen);
/* Collective, after mf_create: the state of DIR's latest checkpoint, on any node count
 * (rows found by file id, so the same data set and flags: rank, biases, optimizer and the
 * columns' ids are checked); *epochs gets the epochs done.
 * 0 or an AU_* error with a message in err. */
int mf_resume(mf_t *m, const char *dir, const mf_idmap_t *rows, const mf_idmap_t *cols, int *epochs,
              char *err, size_t errlen);

/* Collective: the whole model on every node (model.h), a gather through the allreduce
 * (each row from its node, each column from the owner of its parameter actor), under the
 * maps' file ids (the index where a map is empty); rows whose id is MF_NO_ID (padding of
 * a file read in parts) are left out. 0 or an AU_* error. */
int mf_model_gather(mf_t *m, const mf_idmap_t *rows, const mf_idmap_t *cols, mf_model_t *out);
void mf_free(mf_t *m);

/* What the model is made of, for the benchmark's serial baseline (which walks the same
 * blocks) and for messages. */
typedef struct mf_info {
  const mf_grid_t *grid; /* this node's training blocks */
  mf_isa_t isa;          /* the vector loop in use */
  size_t pstride;        /* floats per row factor (values, accumulator, padding) */
  size_t qstride;        /* floats per column factor row of the table */
  float mean;            /* the training ratings' mean */
  int workers;           /* on this node */
  int stagger;           /* the walking order in use (mf_opts_t's, auto resolved) */
  size_t memory;         /* bytes: blocks (train and test), row factors, this node's table */
} mf_info_t;
void mf_info(const mf_t *m, mf_info_t *out);

#endif
