/* grid.c — see grid.h. A counting sort into blocks (the input read from its end, so that
 * with `consume` its memory can be given back as the cells fill), then per block: its
 * distinct columns, and its cells by row, 16 rows taking turns.
 */
#include "grid.h"

#include <stdlib.h>
#include <string.h>

/* With consume, the input shrinks every this many ratings read (12 MB). */
#define SHRINK_EVERY ((size_t)1 << 20)

void mf_grid_free(mf_grid_t *g)
{
  free(g->cells);
  free(g->start);
  free(g->koff);
  free(g->keys);
  memset(g, 0, sizeof(*g));
}

size_t mf_grid_memory(const mf_grid_t *g)
{
  return g->n * sizeof(mf_cell_t) + 2 * (mf_grid_blocks(g) + 1) * sizeof(size_t) +
         g->nkeys * sizeof(uint64_t);
}

/* Block b's distinct columns appended to g->keys (ascending), its cells' columns turned
 * into indices of that list. idx has cb_cols entries, all UINT32_MAX on entry and exit. */
static int block_keys(mf_grid_t *g, size_t b, uint32_t *idx, size_t *cap)
{
  const uint32_t cb = (uint32_t)(b / g->nrb), c0 = cb * g->cb_cols;
  const uint32_t width = c0 + g->cb_cols <= g->ncols ? g->cb_cols : g->ncols - c0;
  mf_cell_t *c = g->cells + g->start[b], *end = g->cells + g->start[b + 1];
  uint32_t distinct = 0;
  for (mf_cell_t *x = c; x < end; x++)
    if (idx[x->col] == UINT32_MAX) idx[x->col] = 0, distinct++;
  if (g->nkeys + distinct > *cap) {
    size_t ncap = *cap * 2 > g->nkeys + distinct ? *cap * 2 : g->nkeys + distinct;
    uint64_t *k = realloc(g->keys, ncap * sizeof(uint64_t));
    if (!k) return MF_ENOMEM;
    g->keys = k;
    *cap = ncap;
  }
  g->koff[b] = g->nkeys;
  uint32_t i = 0;
  for (uint32_t off = 0; off < width && i < distinct; off++)
    if (idx[off] != UINT32_MAX) {
      idx[off] = i++;
      g->keys[g->nkeys++] = (uint64_t)c0 + off;
    }
  for (mf_cell_t *x = c; x < end; x++) x->col = (uint16_t)idx[x->col];
  for (uint32_t j = 0; j < distinct; j++) idx[g->keys[g->koff[b] + j] - c0] = UINT32_MAX;
  return 0;
}

/* Each ROW_INTERLEAVE consecutive rows of a block take turns, a rating each. Sorted by row
 * alone, every rating of a row waited for the one before (its update of the row is the
 * next one's input: a dot product, its reduction, the update, in a chain); in turns, the
 * CPU overlaps the chains of 16 rows, whose factors still sit in L1. augur-mf, one thread,
 * default data, rank 16, sgd: 7.4e7 updates/s sorted by row, 8.9e7 with 2 rows in turns,
 * 1.0e8 with 4, 1.1e8 with 8, 1.2e8 with 16, 1.3e8 with 32; the realistic shape (bench-mf,
 * 2 threads): 7.6e7 sorted, 8.8e7 with 8, 8.7e7 with 16, 9.0e7 with 32, 8.6e7 with 64. */
#define ROW_INTERLEAVE 16

/* Block b's cells by row, stably (counting sort through tmp), the runs of each
 * ROW_INTERLEAVE rows interleaved. count has rb_rows + 1 entries. */
static void block_sort(mf_grid_t *g, size_t b, mf_cell_t *tmp, uint32_t *count)
{
  mf_cell_t *c = g->cells + g->start[b];
  const size_t n = g->start[b + 1] - g->start[b];
  if (n < 2) return;
  memset(count, 0, ((size_t)g->rb_rows + 1) * sizeof(uint32_t));
  for (size_t i = 0; i < n; i++) count[c[i].row + 1]++;
  for (uint32_t r = 0; r < g->rb_rows; r++) count[r + 1] += count[r];
  for (size_t i = 0; i < n; i++) tmp[count[c[i].row]++] = c[i];
  /* count[r] is now where row r's run ends in tmp (and row r + 1's begins): the runs of
   * each ROW_INTERLEAVE rows go out in turns */
  size_t o = 0, at[ROW_INTERLEAVE], end[ROW_INTERLEAVE];
  uint32_t r = 0;
  while (r < g->rb_rows) {
    int m = 0;
    for (; r < g->rb_rows && m < ROW_INTERLEAVE; r++) {
      const size_t s = r ? count[r - 1] : 0;
      if (s < count[r]) at[m] = s, end[m] = count[r], m++;
    }
    for (int left = m; left > 0;)
      for (int i = 0; i < m; i++)
        if (at[i] < end[i]) {
          c[o++] = tmp[at[i]++];
          if (at[i] == end[i]) left--;
        }
  }
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int mf_grid_balance(const uint32_t *count, uint32_t n, uint32_t span, uint64_t seed, uint32_t *map)
{
  if (n == 0) return 0;
  const uint32_t nb = (n + span - 1) / span;
  uint64_t *order = malloc((size_t)n * sizeof(uint64_t)); /* most rated first, then by index */
  uint32_t *used = calloc(nb, sizeof(uint32_t)), *inv = malloc((size_t)n * sizeof(uint32_t));
  uint64_t *load = calloc(nb, sizeof(uint64_t));
  if (!order || !used || !load || !inv) {
    free(order), free(used), free(load), free(inv);
    return MF_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) order[i] = (uint64_t)(UINT32_MAX - count[i]) << 32 | i;
  qsort(order, n, sizeof(uint64_t), cmp_u64);
  for (uint32_t o = 0; o < n; o++) {
    const uint32_t i = (uint32_t)order[o];
    uint32_t best = UINT32_MAX;
    for (uint32_t b = 0; b < nb; b++) {
      const uint32_t places = b + 1 < nb ? span : n - (nb - 1) * span;
      if (used[b] < places && (best == UINT32_MAX || load[b] < load[best])) best = b;
    }
    map[i] = best * span + used[best]++;
    load[best] += count[i];
  }
  /* within a block, the places shuffled: not the most rated first in every block */
  mf_rng_t rng;
  mf_rng_seed(&rng, seed);
  for (uint32_t i = 0; i < n; i++) inv[map[i]] = i;
  for (uint32_t b = 0; b < nb; b++) {
    uint32_t *x = inv + (size_t)b * span, m = used[b];
    for (uint32_t j = m; j > 1; j--) {
      uint32_t r = (uint32_t)(mf_rng_next(&rng) % j), t = x[j - 1];
      x[j - 1] = x[r], x[r] = t;
    }
  }
  for (uint32_t p = 0; p < n; p++) map[inv[p]] = p;
  free(order), free(used), free(load), free(inv);
  return 0;
}

int mf_grid_build(mf_grid_t *g, const mf_grid_opts_t *o, mf_ratings_t *in)
{
  memset(g, 0, sizeof(*g));
  int rc = MF_EINVAL;
  if (o->nodes == 0 || o->rank >= o->nodes || o->rb_rows == 0 || o->cb_cols == 0 ||
      o->rb_rows > MF_GRID_MAX_SPAN || o->cb_cols > MF_GRID_MAX_SPAN || o->ncols == 0)
    goto fail;
  g->nrows = o->nrows;
  g->ncols = o->ncols;
  g->rb_rows = o->rb_rows;
  g->cb_cols = o->cb_cols;
  g->nrb = o->nrows ? (o->nrows + o->rb_rows - 1) / o->rb_rows : 1;
  g->ncb = (o->ncols + o->cb_cols - 1) / o->cb_cols;
  const size_t nb = mf_grid_blocks(g);
  const uint32_t nodes = o->nodes, rank = o->rank, rbr = o->rb_rows, cbc = o->cb_cols;
  rc = MF_ENOMEM;
  g->start = calloc(nb + 1, sizeof(size_t));
  g->koff = calloc(nb + 1, sizeof(size_t));
  if (!g->start || !g->koff) goto fail;
  const uint32_t *rmap = o->row_map, *cmap = o->col_map;
#define LROW(row)        (rmap ? rmap[(row) / nodes] : (row) / nodes)
#define LCOL(col)        (cmap ? cmap[col] : (col))
#define BLOCK_OF(l, col) ((size_t)((col) / cbc) * g->nrb + (l) / rbr)
  for (size_t i = 0; i < in->n; i++) {
    const mf_rating_t *x = &in->r[i];
    if (x->row % nodes != rank) continue;
    g->start[BLOCK_OF(LROW(x->row), LCOL(x->col)) + 1]++;
  }
  for (size_t b = 0; b < nb; b++) g->start[b + 1] += g->start[b];
  g->n = g->start[nb];
  g->cells = malloc((g->n ? g->n : 1) * sizeof(mf_cell_t));
  size_t *pos = malloc(nb * sizeof(size_t));
  if (!g->cells || !pos) {
    free(pos);
    goto fail;
  }
  /* from the end, each block filled from its end: the input's order within a block */
  for (size_t b = 0; b < nb; b++) pos[b] = g->start[b + 1];
  for (size_t i = in->n; i-- > 0;) {
    const mf_rating_t x = in->r[i];
    if (x.row % nodes == rank) {
      const uint32_t l = LROW(x.row), c = LCOL(x.col);
      g->cells[--pos[BLOCK_OF(l, c)]] =
          (mf_cell_t){(uint16_t)(l % rbr), (uint16_t)(c % cbc), x.value};
    }
    if (o->consume && i % SHRINK_EVERY == 0 && i > 0) {
      /* give the read tail back: a shrinking realloc keeps the prefix */
      mf_rating_t *r = realloc(in->r, i * sizeof(mf_rating_t));
      if (r) in->r = r, in->n = in->cap = i;
    }
  }
#undef BLOCK_OF
#undef LROW
#undef LCOL
  free(pos);
  if (o->consume) mf_ratings_free(in);

  size_t maxn = 0, cap = 1024;
  for (size_t b = 0; b < nb; b++)
    if (g->start[b + 1] - g->start[b] > maxn) maxn = g->start[b + 1] - g->start[b];
  uint32_t *idx = malloc((size_t)cbc * sizeof(uint32_t));
  uint32_t *count = malloc(((size_t)rbr + 1) * sizeof(uint32_t));
  mf_cell_t *tmp = malloc((maxn ? maxn : 1) * sizeof(mf_cell_t));
  g->keys = malloc(cap * sizeof(uint64_t));
  rc = idx && count && tmp && g->keys ? 0 : MF_ENOMEM;
  if (idx) memset(idx, 0xff, (size_t)cbc * sizeof(uint32_t));
  for (size_t b = 0; rc == 0 && b < nb; b++) {
    rc = block_keys(g, b, idx, &cap);
    if (rc == 0) block_sort(g, b, tmp, count);
  }
  g->koff[nb] = g->nkeys;
  free(idx);
  free(count);
  free(tmp);
  if (rc == 0) return 0;

fail:
  if (o->consume) mf_ratings_free(in);
  mf_grid_free(g);
  return rc;
}
