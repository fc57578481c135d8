/* blocksched.h — the block scheduler of augur-mf (the FPSGD scheme): a node's workers
 * take the blocks of a grid (grid.h), each block once per epoch, such that no two blocks
 * held at once share a row block or a column block. Then no two workers write the same
 * row factor or column factor, and each works on rows and columns of its own, in its own
 * cache.
 *
 * A worker may hold more than one block (one it walks and ones it reserves to walk
 * next); its own blocks do not exclude each other. augur-mf's workers hold one at a time
 * and announce whole column blocks ahead instead (mf.c). Each worker takes blocks in its
 * walking order: column blocks in the order of `cols` (its sequence, e.g. starting at a
 * column block of its own), and within a column block the row blocks from `row0` on; it
 * takes the first block in that order that is free. So a worker walks a column block's
 * row blocks, then moves to the next column block, and skips what others hold.
 *
 * The invariant: between mf_sched_epoch calls every block is taken at most once, and a
 * block is taken only while no other worker holds a block in its row or column block.
 * Thread-safe (one mutex, held for a scan of the grid: once per block, not per rating).
 */
#ifndef AUGUR_DEMOS_MF_BLOCKSCHED_H
#define AUGUR_DEMOS_MF_BLOCKSCHED_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum {
  MF_SCHED_BUSY = -1, /* unvisited blocks are left, but each shares a range with another
                         worker's: try again when one is put back */
  MF_SCHED_DONE = -2, /* every block is taken this epoch */
};

typedef struct mf_sched {
  pthread_mutex_t mu;
  uint32_t nrb, ncb;
  int workers;
  uint8_t *taken;                 /* per block: 1 once taken this epoch (or empty) */
  const size_t *len;              /* per block: ratings; blocks without any count as taken */
  int32_t *row_owner, *col_owner; /* the worker holding blocks in the range, or -1 */
  uint32_t *row_held, *col_held;  /* how many blocks it holds there */
  size_t left;                    /* blocks not taken yet this epoch */
} mf_sched_t;

/* A worker's walking order: column blocks cols[0..ncb) (a permutation), and in each the
 * row blocks from row0 on, wrapping. With back, the same order reversed: cols from the
 * last, rows from row0 - 1 down, so that a backward walk starts where a forward one ends. */
typedef struct mf_walk {
  const uint32_t *cols;
  uint32_t row0;
  int back;
  int worker; /* 0..workers-1 */
} mf_walk_t;

/* nrb x ncb blocks, block b = cb * nrb + rb with len[b] ratings (len is kept, not copied).
 * 0 or -1 (out of memory). */
int mf_sched_init(mf_sched_t *s, uint32_t nrb, uint32_t ncb, const size_t *len, int workers);
void mf_sched_destroy(mf_sched_t *s);
/* Starts an epoch: every block with ratings untaken. No worker may hold a block. */
void mf_sched_epoch(mf_sched_t *s);
/* The first free block in w's order, now held by w; or MF_SCHED_BUSY / MF_SCHED_DONE. */
long mf_sched_take(mf_sched_t *s, const mf_walk_t *w);
/* Worker `worker` is done with block b: its ranges are free once it holds no other block
 * there. */
void mf_sched_put(mf_sched_t *s, int worker, uint32_t b);

#endif
