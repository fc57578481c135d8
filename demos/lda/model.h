/* model.h — the inside of an lda_t, shared by lda.c (workers, training) and eval.c
 * (log-likelihood, checks, top words, saving). Not part of the demo's interface.
 *
 * The invariant: the count tables equal the counts of the workers' topic assignments
 * whenever no run is in progress. Every topic change a step makes is logged and applied
 * as -1 / +1 through the table's exact kernel in the same step.
 */
#ifndef AUGUR_DEMOS_LDA_MODEL_H
#define AUGUR_DEMOS_LDA_MODEL_H

#include "lda.h"
#include "sampler.h"
#include <stdalign.h>

#define LDA_NONE UINT32_MAX

/* A topic change of one token. */
typedef struct lda_move {
  uint16_t from, to;
} lda_move_t;

/* A token, where the word-by-word pass visits it: its topic and its document's block
 * (lda_doc_t) in the shard's arena, in 64-byte units, and how many cache lines the block
 * spans (so that it can be prefetched whole, ahead, without reading it). */
typedef struct lda_tok {
  uint32_t doc;
  uint16_t z;
  uint16_t lines;
} lda_tok_t;

/* One worker's documents and state. A sweep visits the worker's words in key order and
 * samples each word's tokens in all of the worker's documents in turn, so that the
 * word's row stays in cache and its pending change (wdelta) is exact while it is used;
 * a step covers a run of consecutive words. The tokens (their topics) are stored in
 * that order; the documents' topic counts in blocks that last from sweep to sweep. */
typedef struct shard {
  alignas(64) struct lda *m; /* each worker's shard on cache lines of its own */
  int init;                  /* this run assigns initial topics instead of sampling */
  uint32_t ndocs;
  uint8_t *dmem;         /* the documents' blocks, 64-byte aligned */
  uint32_t *doc_block;   /* ndocs: each document's block in dmem, in 64-byte units */
  uint64_t *doc_id;      /* ndocs: each document's id in the corpus (for --save) */
  uint32_t nw;           /* distinct words */
  au_key_t *keys;        /* nw, ascending: the words as table keys */
  uint32_t *tstart;      /* nw + 1: each word's tokens in tok */
  lda_tok_t *tok;        /* the tokens grouped by word */
  uint32_t max_tokens;   /* of one word */
  uint32_t nsteps;       /* steps per sweep */
  uint32_t *step_kstart; /* nsteps + 1: each step's words in keys */
  uint32_t first, pos;   /* the sweep starts at step first; steps done in this sweep */
  /* scratch of a step */
  int32_t *nt;        /* K: the totals as this worker sees them (snapshot + own changes) */
  float *inv;         /* K: 1 / (nt + V beta) */
  float vbeta;        /* V beta */
  float *smooth_inv;  /* K: inv when the smoothing table was built */
  float *w, *block;   /* K + 8, K / 8 + 2: the document bucket's weights */
  float *f;           /* K: (n_wk + beta) inv_k of the word being sampled */
  float *wq;          /* K: its word table's weights, 0 elsewhere (lda_word_build) */
  int32_t *tdelta;    /* K: the step's change of the totals */
  int32_t *wdelta;    /* K: the current word's change */
  lda_alias_t word;   /* the word bucket of the word being sampled */
  lda_alias_t smooth; /* the smoothing bucket */
  lda_move_t *mv;     /* the current word's topic changes */
  lda_build_scratch_t build;
  lda_rng_t rng;
  /* this run */
  uint64_t tokens, moved;
  int64_t based; /* under a bound: the run's first clock, once taken */
} shard_t;

struct lda {
  au_node_t *node;
  int rank, nodes;
  lda_opts_t o;
  lda_params_t p;
  uint32_t V;
  uint64_t tokens;      /* in the whole corpus */
  int checkpoints;      /* written by this process (lda_checkpoint) */
  uint64_t *word_count; /* V: tokens of each word in the whole corpus */
  au_table_t *words, *totals;
  int nshards;
  shard_t *shards;
  lda_lgamma_t lga, lgb; /* lgamma(c + alpha), lgamma(c + beta) tables */
  /* under a bound: the most steps a worker takes in a sweep, over the cluster, and the
   * clock this run starts from (sweeps so far times it) */
  int64_t run_ticks, clock_base;
};

/* Calls fn(arg, key, row) for each word row in [first, end) that this node holds (copied
 * out), in key order. 0, fn's nonzero result, or an AU_E* code. */
typedef int (*lda__row_fn)(void *arg, au_key_t key, const int32_t *row);
int lda__each_row(struct lda *m, uint64_t first, uint64_t end, lda__row_fn fn, void *arg);
/* The totals row if this node holds it: 1 and row filled, 0 if not, or an AU_E* code. */
int lda__read_totals(struct lda *m, int32_t *row);

#endif
