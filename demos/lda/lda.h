/* lda.h — collapsed Gibbs sampling for latent Dirichlet allocation on augur: the training
 * loop that augur-lda runs and bench/augur-bench-lda measures.
 *
 * Word-topic counts are an augur table (keys = vocabulary, dim = K, int32, exact adds);
 * the topic totals are a second table of one hot key. Documents are dealt to nodes (doc
 * % nodes) and to the workers of a node; their topic assignments and document-topic
 * counts stay in the worker. A sweep of a worker visits its words in key order; a step
 * samples every token of a run of them (sampler.h: AliasLDA) against a view of their rows
 * and the totals, applies its count changes through the table's exact kernel, and
 * announces the words of the step `lookahead` steps ahead as an intent.
 *
 * Every function taking an lda_t is collective on a cluster: every node calls it, in the
 * same order, with the same arguments.
 */
#ifndef AUGUR_DEMOS_LDA_LDA_H
#define AUGUR_DEMOS_LDA_LDA_H

#include <augur.h>

#include "corpus.h"

typedef struct lda_opts {
  uint32_t topics;    /* K, at most 65535 */
  double alpha, beta; /* symmetric Dirichlet priors of theta_d and phi_k */
  int workers;        /* worker actors per node; 0 = one per scheduler thread */
  uint32_t batch;     /* tokens per step (whole words; at least one word) */
  int lookahead;      /* intents name the words this many steps ahead */
  int mh_steps;       /* Metropolis-Hastings steps per token */
  uint64_t seed;
  au_place_t place;  /* both count tables across nodes (default AU_PLACE_ADAPTIVE) */
  int sharded;       /* the corpus given is this node's documents only (shard.h), over the
                        cluster's vocabulary: word and token counts are summed over it */
  uint64_t doc_base; /* sharded: the corpus's id of this node's first document */
  int bounded;       /* the node runs under AU_SSP or AU_BSP: every sweep starts from a
                        clock all workers share (docs/lda.md, "Consistency") */
} lda_opts_t;

/* topics 20, alpha 0.1, beta 0.01, workers 0, batch 65536, lookahead 2, mh_steps 1,
 * seed 1, place adaptive. */
void lda_opts_default(lda_opts_t *o);

typedef struct lda_iter {
  double seconds;      /* wall time of the sweep (no evaluation) */
  double tokens_per_s; /* tokens sampled on all nodes / seconds */
  double moved;        /* share of tokens whose topic changed */
  double local;        /* share of word rows that were on this node when acquired */
  double cpu_seconds;  /* CPU time the nodes' processes used in the sweep, summed */
  uint64_t tokens, intents;
  uint64_t bytes_sent;  /* bytes the nodes sent each other in the sweep */
  uint64_t bytes_by[5]; /* the same by purpose: fetch, push, move, replica, control */
  uint64_t clock_waits; /* under a consistency bound: reads that waited for it, all nodes */
  double clock_wait_s;  /* ... and the seconds they waited, summed over the workers */
} lda_iter_t;

typedef struct lda lda_t;

/* Builds the model on node: the two tables, one worker per share of documents, and the
 * random initial topics, whose counts it adds to the tables (one collective run of the
 * workers). Every node passes the same whole corpus and keeps documents d % nodes ==
 * rank. The corpus is copied and may be freed afterwards. 0 or a negative AU_E* code with
 * a message in err: AU_EINVAL for bad options or a model larger than this machine's
 * memory (W x K int32 counts and the tokens' state; on any node: all stop), which is
 * bad input rather than a failure. */
int lda_create(au_node_t *node, const lda_opts_t *o, const lda_corpus_t *c, lda_t **out, char *err,
               size_t errlen);
/* One sweep over every token. */
int lda_iterate(lda_t *m, lda_iter_t *out);
/* Griffiths & Steyvers' joint log p(w, z) of the current state, over all nodes, divided
 * by the number of tokens. */
int lda_llh(lda_t *m, double *per_token);

/* Invariants of the count tables against the workers' topic assignments, over all nodes. */
typedef struct lda_check {
  uint64_t negative; /* word-topic or total counts below 0 */
  uint64_t row_sums; /* words whose row does not sum to the word's token count */
  uint64_t totals;   /* topics whose total differs from the column sum of the rows */
  uint64_t recount;  /* word-topic counts that differ from a recount of the assignments */
  uint64_t docs;     /* documents whose topic counts differ from a recount of theirs */
  uint64_t tokens;   /* sum of the totals row (should be the corpus's token count) */
} lda_check_t;
/* 0 (even when invariants fail: see out) or an error. */
int lda_check(lda_t *m, lda_check_t *out);
int lda_check_ok(const lda_check_t *c, uint64_t tokens);

/* The n words with the most tokens in each topic, over all nodes: words[k * n + i] and
 * counts[k * n + i] for rank i of topic k (count 0 and word UINT32_MAX where the topic
 * has fewer words); totals[k] = tokens in topic k. Same result on every node. */
int lda_top_words(lda_t *m, uint32_t n, uint32_t *words, int64_t *counts, int64_t *totals);

/* Writes this node's share of the model into the folder dir (created if missing), with
 * suffix "" alone or ".<rank>" on a cluster: word_topic.txt<suffix> (one line per word
 * row held here: "id word topic:count ..."), totals.txt<suffix> where the totals row is
 * held ("topic count" lines), and vocab.txt on rank 0 (one word per line). 0 or -1 with
 * a message in err. */
int lda_save(lda_t *m, const char *dir, const lda_corpus_t *c, char *err, size_t errlen);

/* Collective, between sweeps: a checkpoint after `sweeps` sweeps (docs/lda.md): the count
 * tables by au_checkpoint and every token's topic by (document id, word). 0 or an AU_*
 * error with a message in err. */
int lda_checkpoint(lda_t *m, const char *dir, int sweeps, char *err, size_t errlen);
/* Collective, after lda_create: the state of DIR's latest checkpoint, on any node count
 * (the same corpus and flags); *sweeps gets the sweeps done. 0 or an AU_* error with a
 * message in err (AU_EINVAL: another corpus). */
int lda_resume(lda_t *m, const char *dir, int *sweeps, char *err, size_t errlen);

au_table_t *lda_word_table(lda_t *m);
au_table_t *lda_totals_table(lda_t *m);
int lda_workers(const lda_t *m);
void lda_free(lda_t *m);

#endif
