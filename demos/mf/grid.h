/* grid.h — a node's ratings cut into a grid of blocks (row ranges x column ranges), the
 * unit of augur-mf's cache-aware order and of its block scheduler (blocksched.h).
 *
 * Block b = cb * nrb + rb holds the ratings whose local row lies in row block rb and
 * whose column lies in column block cb, as 8-byte cells (kernel.h): the row relative to
 * the block's first row, the column as an index into the block's distinct columns
 * (keys[koff[b] .. koff[b + 1]), ascending), the value. Within a block the cells are
 * by row, ties in the order of the input, and each 16 consecutive rows take turns, a
 * rating each (grid.c): a row's factor is read once per block and stays in L1 while
 * its ratings come, 16 rows' updates overlap in the CPU, and the block's column
 * factors stay in cache.
 *
 * The invariant: every rating of the input that the node keeps is in exactly one cell.
 */
#ifndef AUGUR_DEMOS_MF_GRID_H
#define AUGUR_DEMOS_MF_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "kernel.h"

#define MF_GRID_MAX_SPAN 65536u /* most rows or columns one block spans (16-bit cells) */

typedef struct mf_grid {
  uint32_t nrows, ncols; /* local rows 0..nrows-1, columns 0..ncols-1 */
  uint32_t rb_rows;      /* rows per row block (the last may have fewer) */
  uint32_t cb_cols;      /* columns per column block (the last may have fewer) */
  uint32_t nrb, ncb;     /* row blocks, column blocks */
  size_t n;              /* cells */
  mf_cell_t *cells;
  size_t *start;  /* nrb * ncb + 1: block b is cells[start[b] .. start[b + 1]) */
  size_t *koff;   /* nrb * ncb + 1: block b's distinct columns are keys[koff[b] .. koff[b + 1]) */
  uint64_t *keys; /* column numbers (table keys) */
  size_t nkeys;
} mf_grid_t;

/* Which ratings of the input the grid keeps, and their local rows: a rating of row g is
 * kept when g % nodes == rank, as local row g / nodes. */
typedef struct mf_grid_opts {
  uint32_t nodes, rank;
  uint32_t nrows; /* local rows */
  uint32_t ncols;
  uint32_t rb_rows, cb_cols; /* 1..MF_GRID_MAX_SPAN */
  /* row_map[local row] and col_map[column]: where the grid puts them (permutations; NULL:
   * where they are). The grid's rows and its keys are the mapped ones. */
  const uint32_t *row_map, *col_map;
  int consume; /* empty `in` while reading it, releasing its memory as it goes */
} mf_grid_opts_t;

/* Builds g from the ratings of `in` (rows and columns must be in range). With consume,
 * `in` is left empty (freed) whatever the result. 0 or MF_ENOMEM / MF_EINVAL. */
int mf_grid_build(mf_grid_t *g, const mf_grid_opts_t *o, mf_ratings_t *in);
void mf_grid_free(mf_grid_t *g);

static inline size_t mf_grid_blocks(const mf_grid_t *g)
{
  return (size_t)g->nrb * g->ncb;
}

/* Spreads n items with count[i] ratings each over blocks of `span` consecutive places
 * (the last block may be shorter) so that the blocks hold about the same number of
 * ratings: the most rated first, each to the block with the fewest ratings that has a
 * free place; then the places within each block shuffled by seed. map[i] = its place.
 * 0 or MF_ENOMEM. */
int mf_grid_balance(const uint32_t *count, uint32_t n, uint32_t span, uint64_t seed, uint32_t *map);

/* Bytes the grid holds (cells, block starts, keys). */
size_t mf_grid_memory(const mf_grid_t *g);

#endif
