/* kge.h — knowledge-graph embeddings on augur: ComplEx and DistMult trained with
 * negative sampling and AdaGrad, the loop that augur-kge runs.
 *
 * Entity and relation embeddings are two augur tables whose rows carry AdaGrad's
 * accumulators (AU_OPTIM_ADAGRAD). Each node trains on its share of the training triples
 * (triple i with i % nodes == rank), its workers on theirs. A step is a batch of triples:
 * its positives and `negatives` entities drawn uniformly, shared by the batch as
 * candidates for both the head and the tail; the loss is the cross-entropy of each
 * positive against them (a sampled softmax), plus an N3 penalty on the positives'
 * embeddings. A worker draws its batches `lookahead` steps ahead, negatives included, and
 * announces their entities as intents for the clock it will use them at (one clock per
 * batch). See docs/kge.md.
 */
#ifndef AUGUR_DEMOS_KGE_KGE_H
#define AUGUR_DEMOS_KGE_KGE_H

#include <augur.h>

#include "graph.h"

typedef enum kge_model { KGE_COMPLEX = 0, KGE_DISTMULT = 1 } kge_model_t;

/* "complex" or "distmult" -> model (0 or -1). */
int kge_model_parse(const char *name, kge_model_t *out);
const char *kge_model_name(kge_model_t m);

typedef struct kge_opts {
  kge_model_t model;
  uint32_t rank;      /* ComplEx: complex numbers per embedding (2 rank floats); DistMult:
                         floats */
  float lr;           /* AdaGrad's learning rate */
  float reg;          /* N3 weight */
  float init_sd;      /* initial values ~ N(0, init_sd) */
  uint32_t batch;     /* positive triples per step */
  uint32_t negatives; /* uniform negatives per step, shared by its triples */
  int lookahead;      /* batches drawn and announced ahead */
  int workers;        /* 0: one per scheduler thread */
  au_place_t place;
  uint64_t hot; /* AU_PLACE_HOT: hot parameter actors per table, by the intents (0: 1%) */
  uint64_t seed;
  int id_entities; /* 1: the entities are rows of an id table keyed by their names' 64-bit
                      ids (au_ids_t, placed classic; no entity intents), sized to hold
                      every entity; 0: a dense table of the names' indexes */
} kge_opts_t;
/* ComplEx rank 100, lr 0.1, reg 0.01, init_sd 0.001, batch 512, 256 negatives,
 * lookahead 4, adaptive placement, seed 1. */
void kge_opts_default(kge_opts_t *o);

/* Floats per embedding of the model. */
static inline uint32_t kge_dim(kge_model_t m, uint32_t rank)
{
  return m == KGE_COMPLEX ? 2 * rank : rank;
}

/* The score of (h, r, t), rows of kge_dim floats (ComplEx: real parts, then imaginary):
 * ComplEx Re(sum h r conj(t)), DistMult sum h r t. */
float kge_score(kge_model_t m, uint32_t rank, const float *h, const float *r, const float *t);

/* Filtered ranks of one triple among all entities: the tail's rank among (h, r, e) and the
 * head's among (e, r, t), each 1 + the entities that score strictly higher and are not
 * known triples (known: every triple of train, valid and test, the rank's own excepted).
 * ent: nent rows of kge_dim floats, rel likewise; scratch: nent floats. */
void kge_ranks(kge_model_t m, uint32_t rank, const float *ent, uint32_t nent, const float *rel,
               const kg_set_t *known, const kg_triple_t *tr, float *scratch, uint64_t *tail_rank,
               uint64_t *head_rank);

typedef struct kge_epoch {
  double loss; /* mean cross-entropy per positive and side, over the epoch */
  double seconds;
  double triples_per_s;
  double local; /* share of rows that were on the node when acquired */
  uint64_t triples, intents, moves, replicas;
  uint64_t bytes_sent;
  uint64_t bytes_by[5]; /* fetch, push, move, replica, control */
  double cpu_seconds;
  /* with id_entities: entity rows held (the cluster's), and rows evicted so far (0 when
     the table holds every entity, as it is sized to) */
  uint64_t entity_rows, entity_evicted;
} kge_epoch_t;

typedef struct kge_eval {
  double mrr, hits1, hits3, hits10; /* filtered, over both sides of each triple */
  uint64_t ranks;                   /* 2 per triple */
  double seconds;
} kge_eval_t;

typedef struct kge kge_t;

/* Builds the tables and workers on node. Collective on a cluster: every node passes the
 * same graph. The graph is not taken (it must outlive the model). 0 or an AU_E* code with
 * a message in err. */
int kge_create(au_node_t *node, const kge_opts_t *o, const kg_graph_t *g, kge_t **out, char *err,
               size_t errlen);
/* Epoch e (0-based) over every worker's triples. Collective. */
int kge_epoch(kge_t *m, int e, kge_epoch_t *out);
/* Filtered MRR and Hits@1/3/10 of triples[0..n) (e.g. the first n of valid), the ranks
 * shared out over the nodes and `threads` threads each. Collective. */
int kge_evaluate(kge_t *m, const kg_triples_t *triples, size_t n, int threads, kge_eval_t *out);
/* Collective: every node gets the whole model, nent x dim and nrel x dim floats, each row
 * from its owner. 0 or an AU_* error. */
int kge_gather(kge_t *m, float **ent, float **rel);
/* Writes DIR/entities.tsv and DIR/relations.tsv: a name, then its dim values, tab
 * separated. 0 or -1 with a message in err. */
int kge_save(const kg_graph_t *g, uint32_t dim, const float *ent, const float *rel, const char *dir,
             char *err, size_t errlen);
int kge_workers(const kge_t *m);
size_t kge_memory(const kge_t *m);
void kge_free(kge_t *m);

#endif
