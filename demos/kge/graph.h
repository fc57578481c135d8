/* graph.h — knowledge graphs for augur-kge: triples (head, relation, tail) over entity
 * and relation names, a loader for the tab-separated files WN18 and FB15k ship, a
 * generator of WN18-like graphs with planted structure, and the set of known triples that
 * filtered ranking needs. libc and libm only; no global state.
 *
 * Names are interned: each distinct entity name gets the next dense index (0, 1, ...) in
 * the order the files first show it, and its 64-bit id is a hash of the name (kg_name_id),
 * the same on every node. Every node reads the same files in the same order, so the
 * indexes agree across a cluster too. See docs/kge.md.
 */
#ifndef AUGUR_DEMOS_KGE_GRAPH_H
#define AUGUR_DEMOS_KGE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

/* Errors: 0 or one of these; kg_strerror() names them. The loader also writes a one-line
 * message for people into err (may be NULL). */
enum {
  KG_EIO = -1,    /* a file could not be opened or read */
  KG_EPARSE = -2, /* malformed input */
  KG_ENOMEM = -3, /* allocation failed */
  KG_EINVAL = -4, /* impossible generator options */
  KG_ERANGE = -5, /* more entities or relations than a graph holds */
};
const char *kg_strerror(int err);

#define KG_MAX_ENTITIES  (1u << 24) /* entity indexes fit 24 bits (kg_pack) */
#define KG_MAX_RELATIONS (1u << 16)
#define KG_MAX_NAME      4096u /* bytes of a name */

typedef struct kg_triple {
  uint32_t h, r, t;
} kg_triple_t;

typedef struct kg_triples {
  kg_triple_t *v;
  size_t n, cap;
} kg_triples_t;

/* Interned names: index -> name and 64-bit id; name -> index through a hash table. */
typedef struct kg_names {
  uint32_t n, cap;
  char **name;    /* n strings, in arena blocks */
  uint64_t *id;   /* kg_name_id(name[i]) */
  uint32_t *slot; /* open addressing over id: index + 1, 0 empty */
  uint32_t nslot; /* a power of two */
  char **blocks;  /* the arena */
  size_t nblocks, used;
} kg_names_t;

/* The 64-bit id of a name: FNV-1a of its bytes, then a 64-bit finalizer (so that ids of
 * similar names spread over all bits). */
uint64_t kg_name_id(const char *s, size_t len);
/* The index of a name, adding it if new and add is set; -1 if absent (add 0), KG_ENOMEM,
 * KG_ERANGE (more than max names), or KG_EPARSE when two different names hash to one id
 * (the message in err names both). */
int64_t kg_names_get(kg_names_t *m, const char *s, size_t len, int add, uint32_t max, char *err,
                     size_t errlen);
/* Adds the names "<prefix><i>" for i < n (generated graphs). 0 or KG_ENOMEM. */
int kg_names_numbered(kg_names_t *m, const char *prefix, uint32_t n);
void kg_names_free(kg_names_t *m);

typedef struct kg_graph {
  kg_names_t ent, rel;
  kg_triples_t train, valid, test;
} kg_graph_t;
void kg_graph_free(kg_graph_t *g);

/* Appends a triple. 0 or KG_ENOMEM. */
int kg_triples_push(kg_triples_t *s, uint32_t h, uint32_t r, uint32_t t);
void kg_triples_free(kg_triples_t *s);

/* Reads "head<TAB>relation<TAB>tail" lines (WN18, FB15k; a trailing '\r' is dropped,
 * blank lines are skipped) into out, interning names into g. A line with another number
 * of fields, an empty name, or a control byte is an error naming FILE:LINE. With
 * add_names 0 (validation and test files), a triple with a name the training file did
 * not have is skipped and counted in *skipped (may be NULL). 0, or KG_EIO / KG_EPARSE /
 * KG_ENOMEM / KG_ERANGE with a message in err. */
int kg_load(const char *path, kg_graph_t *g, kg_triples_t *out, int add_names, size_t *skipped,
            char *err, size_t errlen);

/* The generator: a WN18-like graph. Entities fall into clusters (sizes drawn from a
 * Zipf law); each relation maps clusters to clusters by a fixed random map, and an edge
 * joins an entity to one of the target cluster's entities (popular entities more often).
 * Relations come as `pairs` inverse pairs (r, r') — every edge (a, r, b) also gives
 * (b, r', a), as hypernym and hyponym in WordNet — the first pair functional (each entity
 * one parent, a hierarchy), and `symmetric` relations whose edges go both ways. The
 * triples are deduplicated, shuffled and split into valid and test sets of the sizes
 * given and the rest for training; entity and relation names are "e<i>" and "r<i>". */
typedef struct kg_gen_opts {
  uint32_t entities;    /* default 40943, as WN18 */
  uint32_t pairs;       /* inverse pairs (default 7) */
  uint32_t symmetric;   /* symmetric relations (default 4); relations = 2 pairs + symmetric */
  uint32_t edges;       /* edges drawn per relation pair or symmetric relation, before
                           deduplication (default 6900: about WN18's 151k triples) */
  uint32_t clusters;    /* default 400 */
  uint32_t valid, test; /* held-out triples (default 5000 each) */
  uint64_t seed;
} kg_gen_opts_t;
void kg_gen_opts_default(kg_gen_opts_t *o);
/* 0 or KG_EINVAL with a message naming the impossible option. */
int kg_gen_opts_check(const kg_gen_opts_t *o, char *err, size_t errlen);
/* 0, KG_EINVAL or KG_ENOMEM; on failure g is empty. */
int kg_generate(const kg_gen_opts_t *o, kg_graph_t *g, char *err, size_t errlen);

/* A set of triples, for filtered ranking: every known (h, r, t) of train, valid and test. */
typedef struct kg_set {
  uint64_t *slot; /* kg_pack + 1, 0 empty */
  size_t mask, n;
} kg_set_t;
static inline uint64_t kg_pack(uint32_t h, uint32_t r, uint32_t t)
{
  return (uint64_t)h << 40 | (uint64_t)r << 24 | (uint64_t)t;
}
/* 0 or KG_ENOMEM. */
int kg_set_build(kg_set_t *s, const kg_triples_t *const *lists, int nlists);
int kg_set_has(const kg_set_t *s, uint32_t h, uint32_t r, uint32_t t);
void kg_set_free(kg_set_t *s);

/* Pseudo-random numbers: splitmix64, a pure function of its state. */
static inline uint64_t kg_rand(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static inline uint32_t kg_below(uint64_t *x, uint32_t n)
{
  return (uint32_t)(((kg_rand(x) >> 32) * (uint64_t)n) >> 32);
}
static inline double kg_uniform(uint64_t *x)
{
  return (double)(kg_rand(x) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
