/* shard.h — reading a ratings file on a cluster, each node its share (shard.c).
 *
 * Every node parses one part of the file's bytes (mf_load_part), sends each rating to the
 * node that owns its row (by a hash of the row's id) and keeps its own; the column ids are
 * gathered from every node and numbered in sorted order, the same on every node; a node
 * numbers its own rows g = k * nodes + rank, k in the sorted order of their ids, so that
 * row g lives on node g % nodes as augur-mf expects. Held-out ratings come from --test
 * (read the same way) or from a split by a hash of (row id, column id, seed), so that it
 * does not depend on how the file was cut.
 */
#ifndef AUGUR_MF_SHARD_H
#define AUGUR_MF_SHARD_H

#include <augur.h>

#include "data.h"

typedef struct mf_shard_in {
  const char *train, *test; /* paths; test may be NULL (then test_ratio splits) */
  mf_format_t format;
  double test_ratio;
  uint64_t seed;
} mf_shard_in_t;

typedef struct mf_shard_out {
  mf_ratings_t train, test;       /* this node's rows, dense indices */
  mf_idmap_t rows, cols;          /* ids[] of the dense indices (rows: this node's only) */
  uint32_t nrows, ncols;          /* over the cluster */
  size_t test_skipped;            /* held-out ratings of rows or columns not in training */
  size_t train_total, test_total; /* over the cluster */
} mf_shard_out_t;

/* Collective: every node of the cluster calls it. 0, or an exit status (2: a file is
 * bad, 1: anything else) with a one-line message in err; on failure out holds nothing. */
int mf_shard_load(au_node_t *node, const mf_shard_in_t *in, mf_shard_out_t *out, char *err,
                  size_t errlen);
void mf_shard_free(mf_shard_out_t *out);

#endif
