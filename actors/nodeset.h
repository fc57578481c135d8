/* nodeset.h — sets of node ranks (replica holders, claimants, nodes told to drop), as
 * Concurrency Kit bitmaps sized to the cluster, so that placement works for every node of
 * a cluster of any size (augur run allows 1024). A NULL set is empty. Only the placer's
 * actor touches them; ck_bitmap's atomic bit operations are more than it needs.
 */
#ifndef AUGUR_ACTORS_NODESET_H
#define AUGUR_ACTORS_NODESET_H

#include <ck_bitmap.h>
#include <stdlib.h>

typedef struct ck_bitmap nodeset_t;

/* A set for ranks 0..nodes-1, empty; NULL when out of memory. free() frees it. */
static inline nodeset_t *nodeset_new(int nodes)
{
  nodeset_t *s = malloc(ck_bitmap_size((unsigned)nodes));
  if (s) ck_bitmap_init(s, (unsigned)nodes, false);
  return s;
}

static inline int nodeset_has(const nodeset_t *s, int node)
{
  return s && node >= 0 && (unsigned)node < ck_bitmap_bits(s) && ck_bitmap_test(s, (unsigned)node);
}

static inline void nodeset_add(nodeset_t *s, int node)
{
  if (node >= 0 && (unsigned)node < ck_bitmap_bits(s)) ck_bitmap_set(s, (unsigned)node);
}

static inline void nodeset_del(nodeset_t *s, int node)
{
  if (s && node >= 0 && (unsigned)node < ck_bitmap_bits(s)) ck_bitmap_reset(s, (unsigned)node);
}

static inline int nodeset_empty(const nodeset_t *s)
{
  return !s || ck_bitmap_empty(s, ck_bitmap_bits(s));
}

static inline unsigned nodeset_count(const nodeset_t *s)
{
  return s ? ck_bitmap_count(s, ck_bitmap_bits(s)) : 0;
}

static inline void nodeset_clear(nodeset_t *s)
{
  ck_bitmap_clear(s);
}

/* dst |= src; dst &= src; dst &= ~src (a NULL src is empty). */
static inline void nodeset_union(nodeset_t *dst, const nodeset_t *src)
{
  if (src) ck_bitmap_union(dst, src);
}

static inline void nodeset_and(nodeset_t *dst, const nodeset_t *src)
{
  if (src)
    ck_bitmap_intersection(dst, src);
  else
    ck_bitmap_clear(dst);
}

static inline void nodeset_minus(nodeset_t *dst, const nodeset_t *src)
{
  if (src) ck_bitmap_intersection_negate(dst, src);
}

/* For each node in s: `for (int node = -1; (node = nodeset_next(s, node)) >= 0;)`. */
static inline int nodeset_next(const nodeset_t *s, int after)
{
  if (!s) return -1;
  for (unsigned n = (unsigned)(after + 1); n < ck_bitmap_bits(s); n++)
    if (ck_bitmap_test(s, n)) return (int)n;
  return -1;
}

#endif
