/* shard.h — augur-lda reading a corpus file on a cluster, each node its share of the
 * documents (docs/lda.md, "Reading a corpus on a cluster").
 *
 * A node parses only the lines that start in its share of the file's bytes. Plain text:
 * every line is a document, so the node's documents are its lines; the nodes exchange
 * their words (in order of first appearance) and counts, and each numbers the words that
 * occur --min-count times in the whole file in order of first appearance, as one node
 * reading the file whole does. UCI: every node reads the header; a document is the part's
 * in which its first entry starts; word ids are the file's. A UCI file whose documents'
 * entries are not together (ids falling) cannot be cut so: then every node reads it whole.
 */
#ifndef AUGUR_DEMOS_LDA_SHARD_H
#define AUGUR_DEMOS_LDA_SHARD_H

#include "augur.h"
#include "corpus.h"

typedef struct lda_shard {
  uint64_t docs, tokens; /* over the cluster */
  uint64_t first_doc;    /* the corpus's id of this node's first document */
  int whole;             /* 1: nothing read: the file is to be read whole (UCI unsorted) */
} lda_shard_t;

/* Collective. 0 with c holding this node's documents over the cluster's vocabulary (text:
 * with its words), or with out->whole set and c empty; else an LDA_* error with a message in
 * err on every node (on the others: "another node could not read its part of PATH"). */
int lda_shard_load(au_node_t *node, const char *path, int uci, uint32_t min_count, lda_corpus_t *c,
                   lda_shard_t *out, char *err, size_t errlen);

#endif
