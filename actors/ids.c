/* ids.c — id tables: rows keyed by arbitrary 64-bit ids that appear at run time.
 *
 * An id hashes into one of a fixed number of buckets of B slots (the budget fixes how
 * many; a bucket's memory is allocated when it is first used). A bucket block is
 *
 *   digest[B] | cdigest[B] | count[B] (u8 each; digest 0 = free) | id[B] | cid[B] (u64) |
 *   uses[B] | last[B] (u32) | B rows of row_bytes, aligned to the rows' alignment
 *
 * so a lookup compares B one-byte digests, eight at a time, and the id only where a
 * digest matches (HierarchicalKV's layout). Slot i holds a row (digest, id, uses, last,
 * row) and, independently, an admission candidate (cdigest, cid, count): an id without a
 * row that was pushed `count` times since it became one, exactly. An id becomes a
 * candidate on its second push: its first only passes a doorkeeper (a Bloom filter, so
 * that ids seen once do not flood the candidates). The admit-th count makes a row. A full candidate
 * area makes room CLOCK-wise: a hand sweeps the slots, takes the first candidate with count 1 and
 * takes one off each count it passes, so the only error is forgetting (an id counted fewer times
 * than it was seen, never more): an id pushed fewer than `admit` times never gets a row. A full
 * bucket makes room for a row by dropping one not used for ttl clocks, else the LFU or LRU victim
 * of its current window of slots (IDS_WINDOW).
 * A spin lock per bucket serializes what touches the bucket, so updates are exact without atomics.
 *
 * On a cluster the ids hash into the cluster's buckets, the same on every node (every node
 * gives the same options: au_ids_create checks); `abuckets` consecutive buckets are one
 * parameter actor, actor a's home is node a mod nodes, and a node holds the buckets of
 * its home actors, packed, as a dense table holds its home actors' rows; an actor's
 * param_actor_t (t->fmt.actors) points at its `abuckets` buckets wherever they are. Other
 * nodes' workers reach them by the classic fetch and push (remote.c, au_worker_ids_pull),
 * and under AU_PLACE_RELOCATE an actor moves to the node whose workers use it
 * (relocation.c), its buckets flattened into one blob (ids_actor_pack, ids_actor_unpack).
 *
 * The invariant: a slot's row belongs to the id in its id[] entry exactly while its
 * digest is nonzero, and a row is only read or written under its bucket's lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "actors/ps.h"
#include "runtime/log.h"

/* Slot metadata a push's look-ahead (foresee) reads without the bucket's lock is
 * written with this, under the lock: a relaxed store, a plain one on x86. */
#define SET(lv, v) __atomic_store_n(&(lv), (v), __ATOMIC_RELAXED)

#define ONES  0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* What a push reads ahead without the lock (block, evicted: prefetch()) and first under
 * it come first: they share the struct's first cache line, the one prefetched. */
typedef struct bucket {
  pthread_spinlock_t lock;
  uint32_t rows;     /* slots holding a row */
  uint32_t cands;    /* slots holding a candidate */
  uint32_t hand;     /* the candidates' CLOCK hand */
  char *block;       /* NULL until the bucket is first used */
  uint64_t evicted;  /* rows evicted (it places the eviction window) */
  uint8_t changed;   /* written since a replica snapshot last looked (ids_actor_changes) */
  uint32_t door_n;   /* pushes that reached the doorkeeper here (it clears this bucket's words) */
  uint64_t dirty[4]; /* ... and the slots whose rows were written since (B <= 256) */
  char *spare;       /* where its block goes then */
  uint64_t admitted, expired, rejected, misses, forgotten;
} bucket_t;

struct au_ids {
  struct au_ids *next;
  uint32_t index;       /* creation order on the node, from 0 */
  au_table_t fmt;       /* the rows' layout, kernel and optimizer (not one of the node's) */
  au_table_opts_t init; /* the initializer's options (name not kept) */
  uint32_t B;           /* rows per bucket */
  uint32_t window;      /* slots an eviction looks at: min(B, IDS_WINDOW), a power of two */
  uint32_t admit, ttl;
  au_evict_t evict;
  uint64_t nbuckets; /* held here */
  bucket_t *buckets;
  /* the cluster's: buckets (= nbuckets on one node), buckets per parameter actor */
  uint32_t nodes, rank;
  uint64_t gbuckets, abuckets;
  char *blocks;           /* nbuckets blocks of block_bytes, one mapping: bucket i's is the i-th */
  _Atomic uint64_t *door; /* the doorkeeper's bits (NULL: none) */
  uint64_t door_bits;     /* 8 a slot */
  size_t off_cdig, off_count, off_ids, off_cids, off_uses, off_last, off_rows, block_bytes;
  _Atomic size_t memory;
};

static uint64_t mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static size_t round_up(size_t x, size_t a)
{
  return (x + a - 1) / a * a;
}

/* ---- buckets -------------------------------------------------------------------------- */

static uint8_t *digests(char *blk)
{
  return (uint8_t *)blk;
}
static uint8_t *cdigests(const au_ids_t *t, char *blk)
{
  return (uint8_t *)(blk + t->off_cdig);
}
static uint8_t *counts_of(const au_ids_t *t, char *blk)
{
  return (uint8_t *)(blk + t->off_count);
}
static uint64_t *ids_of(const au_ids_t *t, char *blk)
{
  return (uint64_t *)(blk + t->off_ids);
}
static uint64_t *cids_of(const au_ids_t *t, char *blk)
{
  return (uint64_t *)(blk + t->off_cids);
}
static uint32_t *uses_of(const au_ids_t *t, char *blk)
{
  return (uint32_t *)(blk + t->off_uses);
}
static uint32_t *last_of(const au_ids_t *t, char *blk)
{
  return (uint32_t *)(blk + t->off_last);
}
static char *row_of(const au_ids_t *t, char *blk, uint32_t slot)
{
  return blk + t->off_rows + (size_t)slot * t->fmt.row_bytes;
}

/* The slot of id among B digests d and ids, or -1: eight digests per word, the id where
 * one matches. The byte-equality test may also flag the byte above a true match; the
 * digest is compared again before the id, since a free slot keeps the id it last held
 * (until 2026-12-07 a free slot whose old id was looked up, above a row of digest 1, was
 * taken for that id's row: the bucket's counts then ran behind its slots, and a later
 * scan for a free slot wrote past the bucket). */
static int find_slot(const au_ids_t *t, const uint8_t *d, const uint64_t *ids, uint64_t id,
                     uint8_t dg)
{
  for (uint32_t i = 0; i < t->B; i += 8) {
    uint64_t w;
    memcpy(&w, d + i, sizeof(w));
    uint64_t x = w ^ (ONES * dg);
    uint64_t m = (x - ONES) & ~x & HIGHS;
    while (m) {
      uint32_t s = i + (uint32_t)(__builtin_ctzll(m) >> 3);
      if (d[s] == dg && ids[s] == id) return (int)s;
      m &= m - 1;
    }
  }
  return -1;
}

/* Clocks since `last` at `clock`, in serial-number order (they wrap at 2^32): 0 when the
 * caller's clock is behind the row's last use, as another worker's or node's may be by a
 * few clocks (or a bad frame's by any), so that a row just used never looks old. */
static uint32_t age(uint64_t clock, uint32_t last)
{
  const int32_t d = (int32_t)((uint32_t)clock - last);
  return d > 0 ? (uint32_t)d : 0;
}

/* A use at `clock`: the row's last use is the later of the two. */
static void touch(uint32_t *last, uint64_t clock)
{
  if ((int32_t)((uint32_t)clock - *last) > 0) SET(*last, (uint32_t)clock);
}

static int expired(const au_ids_t *t, char *blk, uint32_t slot, uint64_t clock)
{
  return t->ttl && age(clock, last_of(t, blk)[slot]) >= t->ttl;
}

/* Frees the slot (its bucket's lock held). */
static void drop_slot(bucket_t *b, uint32_t slot)
{
  SET(digests(b->block)[slot], 0);
  b->rows--;
}

/* The slots one eviction looks at: the rule's victim is the best of a window of this
 * many consecutive slots, and the window moves on by as many with each eviction of the
 * bucket, so that a row faces eviction once every B / IDS_WINDOW of them. Scanning all
 * 64 slots' uses and last read 8 cold cache lines an eviction; the window reads 2
 * (docs/tables.md, "Eviction"). */
#define IDS_WINDOW 16

/* Buckets per parameter actor on a cluster: 16 of 64 rows of 256 bytes are 270 KB. */
#define IDS_ACTOR 16

/* The first slot of the bucket's eviction window (read without the lock too). */
static uint32_t window_from(const au_ids_t *t, const bucket_t *b)
{
  return (uint32_t)(__atomic_load_n(&b->evicted, __ATOMIC_RELAXED) * t->window) & (t->B - 1);
}

/* The slot a new row takes in a full bucket: the first one unused for ttl clocks, else
 * the eviction rule's victim in the bucket's current window (ties to the lower slot). */
static uint32_t victim(au_ids_t *t, bucket_t *b, uint64_t clock, int *was_expired)
{
  uint32_t *uses = uses_of(t, b->block), *last = last_of(t, b->block);
  for (uint32_t s = 0; t->ttl && s < t->B; s++)
    if (expired(t, b->block, s, clock)) {
      *was_expired = 1;
      return s;
    }
  *was_expired = 0;
  /* the smallest key wins, the lower slot on ties: LFU (uses, then the older: a larger
     age is a smaller ~age), LRU (the older, then uses) */
  const uint32_t w = t->window, from = window_from(t, b);
  uint32_t best = from, lfu = t->evict == AU_EVICT_LFU;
  uint64_t best_key = UINT64_MAX;
  for (uint32_t s = from; s < from + w; s++) {
    uint32_t young = ~age(clock, last[s]);
    uint64_t key = lfu ? (uint64_t)uses[s] << 32 | young : (uint64_t)young << 32 | uses[s];
    if (key < best_key) {
      best_key = key;
      best = s;
    }
  }
  return best;
}

/* Makes a row for id in its bucket (lock held), initialized, with `uses` uses so far;
 * returns its slot, or -1 when out of memory. */
static int make_row(au_ids_t *t, bucket_t *b, uint64_t id, uint8_t dg, uint64_t clock,
                    uint32_t uses)
{
  uint32_t s;
  if (b->rows < t->B) {
    uint8_t *d = digests(b->block);
    for (s = 0; d[s]; s++) {
    }
  } else {
    int was;
    s = victim(t, b, clock, &was);
    if (was)
      b->expired++;
    else
      __atomic_store_n(&b->evicted, b->evicted + 1, __ATOMIC_RELAXED); /* prefetch() reads it */
    b->rows--;
  }
  /* the slot's row and id are cold (a victim's, unused for a while): start their
     lines' loads for writing now, together, rather than one after another as the
     stores below reach them */
  char *row = row_of(t, b->block, s);
  for (uint32_t at = 0; at < t->fmt.row_bytes; at += 64) __builtin_prefetch(row + at, 1, 3);
  __builtin_prefetch(&ids_of(t, b->block)[s], 1, 3);
  SET(digests(b->block)[s], dg);
  ids_of(t, b->block)[s] = id;
  SET(uses_of(t, b->block)[s], uses);
  SET(last_of(t, b->block)[s], (uint32_t)clock);
  /* table_init_row leaves zero-initialized values as they are: the slot may hold a
     victim's */
  if (t->init.init == AU_INIT_ZERO) memset(row, 0, (size_t)t->fmt.dim * 4);
  table_init_row(&t->fmt, &t->init, id, row);
  b->dirty[s >> 6] |= 1ULL << (s & 63);
  b->rows++;
  b->admitted++;
  return (int)s;
}

/* The bucket's block is in use from now on (lock held): its place in the mapping, zero
 * already (a fresh mapping, and blocks are never given back). */
static void ensure_block(au_ids_t *t, bucket_t *b)
{
  if (b->block) return;
  char *blk = b->spare;
  __atomic_store_n(&b->block, blk, __ATOMIC_RELAXED); /* prefetch() reads it unlocked */
  atomic_fetch_add_explicit(&t->memory, t->block_bytes, memory_order_relaxed);
}

/* Bucket g's share of the doorkeeper's words: B / 8 of them (a Bloom filter of 8 bits a
 * slot of its own). On a cluster g counts the cluster's buckets, a node's door its own. */
static _Atomic uint64_t *door_share(const au_ids_t *t, uint64_t g)
{
  return &t->door[(t->nodes == 1 ? g : g % t->nbuckets) * (t->B / 8)];
}

/* The doorkeeper's word for an id of door hash h in bucket g. */
static _Atomic uint64_t *door_word(const au_ids_t *t, uint64_t g, uint64_t h)
{
  return door_share(t, g) + (((h & 0xffffffffULL) * (t->B / 8)) >> 32);
}

static uint64_t door_hash(uint64_t id)
{
  return mix64(id ^ 0x9e3779b97f4a7c15ULL);
}

/* The doorkeeper (TinyLFU's): 1 if the id probably passed the door since its word was
 * last cleared, else 0; either way it has passed now. Two bits per id, in one 64-bit word
 * of its bucket's share (a blocked Bloom filter: one atomic or; two buckets never share a
 * word, but a thread of another node's server may hold a bucket that maps to the same
 * share), each word cleared every B calls of its bucket (about 5% false passes). */
static int door_pass(au_ids_t *t, bucket_t *b, uint64_t g, uint64_t id)
{
  const uint64_t h = door_hash(id);
  const uint64_t bits = 1ULL << ((h >> 32) & 63) | 1ULL << ((h >> 38) & 63);
  int passed =
      (atomic_fetch_or_explicit(door_word(t, g, h), bits, memory_order_relaxed) & bits) == bits;
  /* one of the bucket's words cleared every 8 of its calls, the words in turn: each is
     cleared once every B calls, as clearing them all at once then would. The calls are
     counted per bucket under its lock: a counter for the whole table, written by every
     push of every thread, cost more in its cache line's moves from core to core than the
     rest of a push stopped at the door (docs/benchmarks.md, augur-bench-ids). */
  if (++b->door_n % 8 == 0)
    atomic_store_explicit(door_share(t, g) + b->door_n / 8 % (t->B / 8), 0, memory_order_relaxed);
  return passed;
}

/* Counts a push of id, which has no row (lock held); returns the pushes counted so far,
 * this one included (0: stopped at the door, not counted), and frees the candidate's
 * slot when they reach admit. */
static uint32_t count_push(au_ids_t *t, bucket_t *b, uint64_t g, uint64_t id, uint8_t dg)
{
  uint8_t *cd = cdigests(t, b->block), *cnt = counts_of(t, b->block);
  uint64_t *cid = cids_of(t, b->block);
  int c = find_slot(t, cd, cid, id, dg);
  if (c >= 0) {
    uint32_t seen = (uint32_t)cnt[c] + 1;
    if (seen < t->admit) {
      SET(cnt[c], (uint8_t)seen);
      return seen;
    }
    SET(cd[c], 0);
    SET(cnt[c], 0);
    b->cands--;
    return seen;
  }
  if (t->door && !door_pass(t, b, g, id)) return 0;
  uint32_t s;
  if (b->cands < t->B) {
    for (s = 0; cd[s]; s++) {
    }
    b->cands++;
  } else {
    /* CLOCK: the first count of 1 from the hand on; each count passed loses one */
    for (;;) {
      s = b->hand;
      b->hand = (b->hand + 1) & (t->B - 1);
      if (cnt[s] <= 1) break;
      SET(cnt[s], (uint8_t)(cnt[s] - 1));
    }
    b->forgotten++;
  }
  SET(cd[s], dg);
  cid[s] = id;
  SET(cnt[s], 1);
  return 1;
}

typedef struct where {
  bucket_t *b;
  uint64_t g; /* its index among the cluster's */
  uint8_t dg;
} where_t;

static uint64_t id_hash(uint64_t id)
{
  return mix64(id ^ 0x2545f4914f6cdd1dULL);
}

/* The id's bucket among the cluster's. */
static uint64_t cluster_bucket(const au_ids_t *t, uint64_t h)
{
  return ((h >> 32) * t->gbuckets) >> 32;
}

uint64_t ids_actor_of(const au_ids_t *t, uint64_t id)
{
  return cluster_bucket(t, id_hash(id)) / t->abuckets;
}

int ids_owns(const au_ids_t *t, uint64_t id)
{
  return t->nodes == 1 || atomic_load_explicit(&t->fmt.actors[ids_actor_of(t, id)].state,
                                               memory_order_acquire) == PA_OWNER;
}

int au_ids_owner(const au_ids_t *t, uint64_t id)
{
  if (!t) return AU_EINVAL;
  if (t->nodes == 1) return 0;
  return (int)atomic_load_explicit(&t->fmt.actors[ids_actor_of(t, id)].owner, memory_order_relaxed);
}

/* The id's bucket here (callers look first that this node holds it, ids_owns; a server
 * that looked when its message began may go on while the actor is handed off: its buckets
 * stay until the grace period is over, grace.c). */
static where_t locate(au_ids_t *t, uint64_t id)
{
  uint64_t h = id_hash(id), g = cluster_bucket(t, h);
  bucket_t *b = t->nodes == 1 ? &t->buckets[g]
                              : (bucket_t *)t->fmt.actors[g / t->abuckets].values + g % t->abuckets;
  uint8_t dg = (uint8_t)h;
  where_t w = {b, g, dg ? dg : 1};
  return w;
}

/* 0, or AU_EAGAIN when another node holds one of the ids (nothing done then). */
static int all_here(const au_ids_t *t, const uint64_t *ids, size_t n)
{
  for (size_t i = 0; t->nodes > 1 && i < n; i++)
    if (!ids_owns(t, ids[i])) return AU_EAGAIN;
  return 0;
}

/* The id's live slot in its bucket (lock held), or -1; a row past its ttl is dropped. */
static int lookup(au_ids_t *t, where_t *w, uint64_t id, uint64_t clock, int use)
{
  bucket_t *b = w->b;
  if (!b->block) return -1;
  int s = find_slot(t, digests(b->block), ids_of(t, b->block), id, w->dg);
  if (s < 0) return -1;
  if (use && expired(t, b->block, (uint32_t)s, clock)) {
    drop_slot(b, (uint32_t)s);
    b->expired++;
    b->changed = 1; /* (a replica drops it too) */
    return -1;
  }
  if (use) {
    b->changed = 1;
    uint32_t *u = &uses_of(t, b->block)[s];
    if (*u != UINT32_MAX) SET(*u, *u + 1);
    touch(&last_of(t, b->block)[s], clock);
  }
  return s;
}

typedef uint64_t __attribute__((may_alias)) word_t;

/* Starts loading the lines of slot s's row (for writing: an eviction's victim), and
 * of its id, uses and clock. */
static void prefetch_slot(const au_ids_t *t, char *blk, uint32_t s, int write)
{
  const char *row = row_of(t, blk, s);
  for (uint32_t at = 0; at < t->fmt.row_bytes; at += 64)
    write ? __builtin_prefetch(row + at, 1, 3) : __builtin_prefetch(row + at, 0, 3);
  __builtin_prefetch(&ids_of(t, blk)[s], 1, 3);
  __builtin_prefetch(&uses_of(t, blk)[s], 1, 3);
  __builtin_prefetch(&last_of(t, blk)[s], 1, 3);
}

/* Whether a push of an id with digest dg (no row) will probably make one, read without the lock: a
 * candidate under its digest (the id not compared: a guess) counted to admit - 1. With
 * admission most pushes of a stream of many ids make no row, and loading the slot a row
 * would take (four lines and more, for writing) for each of them cost more than the push
 * itself. */
static int admits(const au_ids_t *t, char *blk, uint8_t dg)
{
  const uint8_t *cd = cdigests(t, blk), *cnt = counts_of(t, blk);
  for (uint32_t i = 0; i < t->B; i += 8) {
    uint64_t w = __atomic_load_n((const word_t *)(cd + i), __ATOMIC_RELAXED);
    uint64_t x = w ^ (ONES * dg), m = (x - ONES) & ~x & HIGHS;
    for (; m; m &= m - 1) {
      uint32_t s = i + (uint32_t)(__builtin_ctzll(m) >> 3);
      if (__atomic_load_n(&cnt[s], __ATOMIC_RELAXED) + 1u >= t->admit) return 1;
    }
  }
  return 0;
}

/* Guesses, without the lock, the slot a push of an id with digest dg will take in its
 * bucket (whose digests and eviction window are loaded by now): the row whose digest
 * matches, else the first free slot, else the eviction window's victim by the rule
 * (ttl aside), and starts loading it. A guess another push makes wrong, or that a digest
 * shared with another id misleads, costs a load for nothing. */
static void foresee(const au_ids_t *t, const bucket_t *b, uint8_t dg)
{
  char *blk = __atomic_load_n(&b->block, __ATOMIC_RELAXED);
  if (!blk) return;
  const uint8_t *d = digests(blk);
  uint32_t free_slot = UINT32_MAX;
  for (uint32_t i = 0; i < t->B; i += 8) {
    uint64_t w = __atomic_load_n((const word_t *)(d + i), __ATOMIC_RELAXED);
    uint64_t x = w ^ (ONES * dg), m = (x - ONES) & ~x & HIGHS;
    if (m) {
      prefetch_slot(t, blk, i + (uint32_t)(__builtin_ctzll(m) >> 3), 0);
      return;
    }
    uint64_t z = (w - ONES) & ~w & HIGHS;
    if (z && free_slot == UINT32_MAX) free_slot = i + (uint32_t)(__builtin_ctzll(z) >> 3);
  }
  if (t->admit > 1 && !admits(t, blk, dg)) return;
  if (free_slot != UINT32_MAX) {
    prefetch_slot(t, blk, free_slot, 1);
    return;
  }
  const uint32_t *uses = uses_of(t, blk), *last = last_of(t, blk), from = window_from(t, b);
  const uint32_t lfu = t->evict == AU_EVICT_LFU;
  uint32_t best = from;
  uint64_t best_key = UINT64_MAX;
  for (uint32_t s = from; s < from + t->window; s++) {
    /* the clock for the age's complement: the same order while no row's clock is ahead
       of the push's */
    uint32_t u = __atomic_load_n(&uses[s], __ATOMIC_RELAXED),
             l = __atomic_load_n(&last[s], __ATOMIC_RELAXED);
    uint64_t key = lfu ? (uint64_t)u << 32 | l : (uint64_t)l << 32 | u;
    if (key < best_key) best_key = key, best = s;
  }
  prefetch_slot(t, blk, best, 1);
}

/* Starts loading what the pushes ahead will look at: 2 PREFETCH ids ahead their
 * buckets, PREFETCH ahead their blocks' digests and eviction windows, PREFETCH / 2
 * ahead the slot each will take (foresee). The block pointer, the eviction count and
 * the slots' metadata are read without the lock, atomically, and written so under it: a
 * block not yet there is simply not prefetched, a window that moves meanwhile was
 * loaded for nothing. With 10^8 distinct ids nearly every push evicts: the window and
 * the victim's row were cold misses each. */
enum { PREFETCH = 8 };
static void prefetch(au_ids_t *t, const uint64_t *ids, size_t n, size_t i)
{
  if (i + 2 * PREFETCH < n) __builtin_prefetch(locate(t, ids[i + 2 * PREFETCH]).b);
  if (i + PREFETCH < n) {
    const where_t w = locate(t, ids[i + PREFETCH]);
    bucket_t *b = w.b;
    char *blk = __atomic_load_n(&b->block, __ATOMIC_RELAXED);
    if (blk) {
      const uint32_t from = window_from(t, b);
      for (uint32_t at = 0; at < t->B; at += 64) __builtin_prefetch(blk + at);
      for (uint32_t at = 0; t->admit > 1 && at < 2 * t->B; at += 64)
        __builtin_prefetch(blk + t->off_cdig + at);
      __builtin_prefetch(uses_of(t, blk) + from);
      __builtin_prefetch(last_of(t, blk) + from);
      if (t->door) __builtin_prefetch(door_word(t, w.g, door_hash(ids[i + PREFETCH])));
    }
  }
  if (i + PREFETCH / 2 < n) {
    where_t w = locate(t, ids[i + PREFETCH / 2]);
    foresee(t, w.b, w.dg);
  }
}

/* One push of an id held here: counted, admitted, applied. */
static void push_one(au_ids_t *t, uint64_t id, const void *u, uint64_t clock)
{
  where_t w = locate(t, id);
  pthread_spin_lock(&w.b->lock);
  w.b->changed = 1;
  int s = lookup(t, &w, id, clock, 1);
  if (s < 0) {
    ensure_block(t, w.b);
    uint32_t seen = t->admit > 1 ? count_push(t, w.b, w.g, id, w.dg) : 1;
    if (seen < t->admit) {
      w.b->rejected++;
      pthread_spin_unlock(&w.b->lock);
      return;
    }
    s = make_row(t, w.b, id, w.dg, clock, seen);
  }
  table_apply(&t->fmt, row_of(t, w.b->block, (uint32_t)s), u);
  w.b->dirty[s >> 6] |= 1ULL << (s & 63);
  pthread_spin_unlock(&w.b->lock);
}

int au_ids_push(au_ids_t *t, const uint64_t *ids, size_t n, const void *updates, uint64_t clock)
{
  if (!t || (n && (!ids || !updates))) return AU_EINVAL;
  int rc = all_here(t, ids, n);
  if (rc != 0) return rc;
  const char *u = updates;
  for (size_t i = 0; i < n; i++, u += t->fmt.update_bytes) {
    prefetch(t, ids, n, i);
    push_one(t, ids[i], u, clock);
  }
  return 0;
}

void ids_serve_push(au_ids_t *t, uint64_t id, const void *update, uint64_t clock)
{
  push_one(t, id, update, clock);
}

/* Copies `words` 32-bit words from `from` words of an id's row (held here) into o, or of
 * the initializer's (made in scratch, row_bytes) when it has none. */
static void copy_one(au_ids_t *t, uint64_t id, char *o, uint64_t clock, int use, uint32_t from,
                     uint32_t words, char *scratch)
{
  where_t w = locate(t, id);
  pthread_spin_lock(&w.b->lock);
  int s = lookup(t, &w, id, clock, use);
  if (s >= 0) {
    memcpy(o, row_of(t, w.b->block, (uint32_t)s) + (size_t)from * 4, (size_t)words * 4);
    pthread_spin_unlock(&w.b->lock);
    return;
  }
  if (use) w.b->misses++;
  pthread_spin_unlock(&w.b->lock);
  memset(scratch, 0, t->fmt.row_bytes);
  table_init_row(&t->fmt, &t->init, id, scratch);
  if (o != scratch + (size_t)from * 4) memcpy(o, scratch + (size_t)from * 4, (size_t)words * 4);
}

/* copy_one for each id (all held here). */
static int copy_out(au_ids_t *t, const uint64_t *ids, size_t n, void *out, uint64_t clock, int use,
                    uint32_t from, uint32_t words)
{
  if (!t || (n && (!ids || !out))) return AU_EINVAL;
  int rc = all_here(t, ids, n);
  if (rc != 0) return rc;
  char *scratch = malloc(t->fmt.row_bytes), *o = out;
  if (!scratch) return AU_ENOMEM;
  for (size_t i = 0; i < n; i++, o += (size_t)words * 4)
    copy_one(t, ids[i], o, clock, use, from, words, scratch);
  free(scratch);
  return 0;
}

void ids_serve_pull(au_ids_t *t, uint64_t id, uint64_t clock, void *row)
{
  /* row is row_bytes long: the initializer's row is made in place, and the padding zero */
  copy_one(t, id, row, clock, 1, 0, t->fmt.width, row);
  memset((char *)row + (size_t)t->fmt.width * 4, 0, t->fmt.row_bytes - (size_t)t->fmt.width * 4);
}

void ids_pull_here(au_ids_t *t, uint64_t id, uint64_t clock, void *out, void *scratch)
{
  copy_one(t, id, out, clock, 1, 0, t->fmt.dim, scratch);
}

int au_ids_pull(au_ids_t *t, const uint64_t *ids, size_t n, void *out, uint64_t clock)
{
  return copy_out(t, ids, n, out, clock, 1, 0, t ? t->fmt.dim : 0);
}

int au_ids_read(au_ids_t *t, const uint64_t *ids, size_t n, void *out)
{
  return copy_out(t, ids, n, out, 0, 0, 0, t ? t->fmt.dim : 0);
}

int au_ids_read_slots(au_ids_t *t, const uint64_t *ids, size_t n, float *out)
{
  return copy_out(t, ids, n, out, 0, 0, t ? t->fmt.dim : 0, t ? t->fmt.nslots : 0);
}

int au_ids_contains(au_ids_t *t, uint64_t id)
{
  if (!t || !ids_owns(t, id)) return 0;
  where_t w = locate(t, id);
  pthread_spin_lock(&w.b->lock);
  int s = lookup(t, &w, id, 0, 0);
  pthread_spin_unlock(&w.b->lock);
  return s >= 0;
}

/* The buckets held here, an actor's at a time: the a-th group of *nb buckets, or NULL when
 * another node holds it; groups() of them (one on one node). */
static uint64_t groups(const au_ids_t *t)
{
  return t->nodes == 1 ? 1 : t->fmt.nactors;
}

static bucket_t *group_at(const au_ids_t *t, uint64_t a, uint64_t *nb)
{
  if (t->nodes == 1) {
    *nb = t->nbuckets;
    return t->buckets;
  }
  param_actor_t *pa = &t->fmt.actors[a];
  *nb = t->abuckets;
  return atomic_load_explicit(&pa->state, memory_order_acquire) == PA_OWNER ? pa->values : NULL;
}

typedef int (*bucket_fn)(au_ids_t *t, bucket_t *b, void *arg);

/* fn for every bucket held here, each under its lock; stops at fn's first nonzero, which
 * it returns. */
static int each_bucket(au_ids_t *t, bucket_fn fn, void *arg)
{
  for (uint64_t a = 0; a < groups(t); a++) {
    uint64_t nb;
    bucket_t *bs = group_at(t, a, &nb);
    for (uint64_t i = 0; bs && i < nb; i++) {
      pthread_spin_lock(&bs[i].lock);
      int rc = fn(t, &bs[i], arg);
      pthread_spin_unlock(&bs[i].lock);
      if (rc) return rc;
    }
  }
  return 0;
}

typedef struct each_arg {
  au_ids_each_fn fn;
  ids_row_fn row_fn;
  void *arg;
} each_arg_t;

static int foreach_bucket(au_ids_t *t, bucket_t *b, void *arg)
{
  each_arg_t *e = arg;
  int rc = 0;
  for (uint32_t s = 0; b->block && s < t->B && rc == 0; s++)
    if (digests(b->block)[s]) rc = e->fn(e->arg, ids_of(t, b->block)[s], row_of(t, b->block, s));
  return rc;
}

int au_ids_foreach(au_ids_t *t, au_ids_each_fn fn, void *arg)
{
  if (!t || !fn) return AU_EINVAL;
  each_arg_t e = {.fn = fn, .arg = arg};
  return each_bucket(t, foreach_bucket, &e);
}

static int stats_bucket(au_ids_t *t, bucket_t *b, void *arg)
{
  au_ids_stats_t *out = arg;
  out->rows += b->rows;
  out->buckets++;
  out->capacity += t->B;
  out->buckets_used += b->block != NULL;
  out->admitted += b->admitted;
  out->evicted += b->evicted;
  out->expired += b->expired;
  out->rejected += b->rejected;
  out->misses += b->misses;
  out->forgotten += b->forgotten;
  out->candidates += b->cands;
  return 0;
}

void au_ids_stats(au_ids_t *t, au_ids_stats_t *out)
{
  if (!out) return;
  memset(out, 0, sizeof(*out));
  if (!t) return;
  each_bucket(t, stats_bucket, out);
  out->memory = atomic_load_explicit(&t->memory, memory_order_relaxed);
  out->row_bytes = (size_t)t->fmt.width * 4;
}

uint32_t au_ids_dim(const au_ids_t *t)
{
  return t ? t->fmt.dim : 0;
}

uint32_t au_ids_slots(const au_ids_t *t)
{
  return t ? t->fmt.nslots : 0;
}

/* ---- moving actors (relocation.c) ----------------------------------------------------
 * An actor's blob: for each of its abuckets buckets, a head of HEAD_BYTES (u32 block used,
 * rows, candidates, CLOCK hand; u64 admitted, evicted, expired, rejected, misses,
 * forgotten), then block_bytes of block (zero when unused): a fixed length, so that the
 * wire's sparse form drops the unused blocks. */

#define HEAD_BYTES 64

static void *map_blocks(size_t bytes);
static void unmap_blocks(void *p, size_t bytes);

size_t ids_actor_bytes(const au_ids_t *t)
{
  return (size_t)t->abuckets * (HEAD_BYTES + t->block_bytes);
}

static int is_home(const au_ids_t *t, uint64_t actor)
{
  return actor % t->nodes == t->rank;
}

/* Bucket b's head as the blob has it (its lock held). */
static void pack_head(const bucket_t *b, char head[HEAD_BYTES])
{
  const uint32_t h[4] = {b->block != NULL, b->rows, b->cands, b->hand};
  const uint64_t c[6] = {b->admitted, b->evicted, b->expired, b->rejected, b->misses, b->forgotten};
  memset(head, 0, HEAD_BYTES);
  memcpy(head, h, sizeof(h));
  memcpy(head + sizeof(h), c, sizeof(c));
}

/* The actor's buckets into blob (ids_actor_bytes), each under its lock (a replica's
 * snapshot is taken while workers push), each bucket marked unchanged since. */
void ids_actor_snapshot(au_ids_t *t, void *values, void *blob)
{
  bucket_t *bs = values;
  char *o = blob;
  for (uint64_t i = 0; i < t->abuckets; i++, o += HEAD_BYTES + t->block_bytes) {
    bucket_t *b = &bs[i];
    pthread_spin_lock(&b->lock);
    pack_head(b, o);
    if (b->block)
      memcpy(o + HEAD_BYTES, b->block, t->block_bytes);
    else
      memset(o + HEAD_BYTES, 0, t->block_bytes);
    b->changed = 0;
    memset(b->dirty, 0, sizeof(b->dirty));
    pthread_spin_unlock(&b->lock);
  }
}

void *ids_actor_pack(au_ids_t *t, void *values)
{
  char *blob = malloc(ids_actor_bytes(t));
  if (blob) ids_actor_snapshot(t, values, blob);
  return blob;
}

void *ids_home_buckets(au_ids_t *t, uint64_t actor)
{
  return is_home(t, actor) ? &t->buckets[actor / t->nodes * t->abuckets] : NULL;
}

/* A group of buckets for an actor arriving here: its home slot, else one of its own
 * (locks ready, blocks not yet in use); NULL when out of memory. */
static bucket_t *group_alloc(au_ids_t *t, uint64_t actor)
{
  if (is_home(t, actor)) return &t->buckets[actor / t->nodes * t->abuckets];
  bucket_t *bs = calloc(t->abuckets, sizeof(bucket_t));
  char *blocks = bs ? map_blocks(t->abuckets * t->block_bytes) : NULL;
  if (!blocks) {
    free(bs);
    return NULL;
  }
  for (uint64_t i = 0; i < t->abuckets; i++) {
    pthread_spin_init(&bs[i].lock, PTHREAD_PROCESS_PRIVATE);
    bs[i].spare = blocks + i * t->block_bytes;
  }
  atomic_fetch_add_explicit(&t->memory, t->abuckets * sizeof(bucket_t), memory_order_relaxed);
  return bs;
}

void ids_actor_free(au_ids_t *t, uint64_t actor, void *values)
{
  bucket_t *bs = values;
  size_t used = 0;
  for (uint64_t i = 0; i < t->abuckets; i++) used += bs[i].block != NULL;
  if (is_home(t, actor)) return; /* the home slot stays, its memory still in use */
  atomic_fetch_sub_explicit(&t->memory, used * t->block_bytes + t->abuckets * sizeof(bucket_t),
                            memory_order_relaxed);
  unmap_blocks(bs[0].spare, t->abuckets * t->block_bytes);
  for (uint64_t i = 0; i < t->abuckets; i++) pthread_spin_destroy(&bs[i].lock);
  free(bs);
}

/* Slots of B one-byte digests that are not 0. */
static uint32_t live(const uint8_t *d, uint32_t B)
{
  uint32_t n = 0;
  for (uint32_t s = 0; s < B; s++) n += d[s] != 0;
  return n;
}

/* The first slot among B digests d and the ids at `ids` (read unaligned) whose id is not
 * one of bucket g with that digest, or that holds an id an earlier slot holds; B if none. */
static uint32_t bad_slot(const au_ids_t *t, const uint8_t *d, const uint8_t *ids, uint64_t g)
{
  for (uint32_t s = 0; s < t->B; s++) {
    if (!d[s]) continue;
    uint64_t id, h;
    memcpy(&id, ids + 8 * (size_t)s, 8);
    h = id_hash(id);
    if (d[s] != ((uint8_t)h ? (uint8_t)h : 1) || cluster_bucket(t, h) != g) return s;
    for (uint32_t r = 0; r < s; r++)
      if (d[r] == d[s] && memcmp(ids + 8 * (size_t)r, &id, 8) == 0) return s;
  }
  return t->B;
}

/* 0 if every bucket's head in the blob agrees with its block, and each live row and
 * candidate is an id of its bucket with its digest, once; else -1 with why. A bad peer's
 * blob would otherwise plant ids of other actors or duplicates, or break the counts that
 * the scans for a free slot rely on. */
static int check_blob(const au_ids_t *t, uint64_t actor, const char *blob, char *why,
                      size_t why_len)
{
  const char *in = blob;
  for (uint64_t i = 0; i < t->abuckets; i++, in += HEAD_BYTES + t->block_bytes) {
    uint32_t h[4];
    memcpy(h, in, sizeof(h));
    const uint8_t *blk = (const uint8_t *)in + HEAD_BYTES;
    const int used = h[0] == 1;
    if (h[0] > 1 || h[3] >= t->B || h[1] != (used ? live(blk, t->B) : 0) ||
        h[2] != (used ? live(blk + t->off_cdig, t->B) : 0)) {
      snprintf(why, why_len,
               "bucket %llu of id table %u's actor %llu: its head (block %u, %u rows, %u "
               "candidates, hand %u) does not match its block",
               (unsigned long long)i, t->index, (unsigned long long)actor, h[0], h[1], h[2], h[3]);
      return -1;
    }
    const uint64_t g = actor * t->abuckets + i;
    if (!used) {
      for (size_t j = 0; j < t->block_bytes; j++)
        if (blk[j]) {
          snprintf(why, why_len,
                   "bucket %llu of id table %u's actor %llu: a block not in use that is not "
                   "empty (byte %zu)",
                   (unsigned long long)i, t->index, (unsigned long long)actor, j);
          return -1;
        }
      continue;
    }
    const uint32_t rs = bad_slot(t, blk, blk + t->off_ids, g),
                   cs = bad_slot(t, blk + t->off_cdig, blk + t->off_cids, g);
    if (rs < t->B || cs < t->B) {
      snprintf(why, why_len,
               "bucket %llu of id table %u's actor %llu: %s slot %u holds an id of another "
               "bucket, under another digest, or twice",
               (unsigned long long)i, t->index, (unsigned long long)actor,
               rs < t->B ? "row" : "candidate", rs < t->B ? rs : cs);
      return -1;
    }
  }
  return 0;
}

void *ids_actor_unpack(au_ids_t *t, uint64_t actor, const void *blob, char *why, size_t why_len)
{
  if (check_blob(t, actor, blob, why, why_len) != 0) return NULL;
  const char *in;
  bucket_t *bs = group_alloc(t, actor);
  if (!bs) {
    snprintf(why, why_len, "out of memory for id table %u's actor %llu", t->index,
             (unsigned long long)actor);
    return NULL;
  }
  in = blob;
  for (uint64_t i = 0; i < t->abuckets; i++, in += HEAD_BYTES + t->block_bytes) {
    bucket_t *b = &bs[i];
    uint32_t h[4];
    uint64_t c[6];
    memcpy(h, in, sizeof(h));
    memcpy(c, in + sizeof(h), sizeof(c));
    if (h[0]) {
      ensure_block(t, b);
      memcpy(b->block, in + HEAD_BYTES, t->block_bytes);
    } else if (b->block) { /* a home block used before: nothing in it now */
      memset(b->block, 0, t->block_bytes);
    }
    b->rows = h[1], b->cands = h[2], b->hand = h[3];
    b->admitted = c[0], b->evicted = c[1], b->expired = c[2], b->rejected = c[3];
    b->misses = c[4], b->forgotten = c[5];
  }
  return bs;
}

/* ---- replicas (replication.c) --------------------------------------------------------
 * A replica of an id table's actor is the owner's blob as last sent (ids_actor_pack's
 * layout), read in place: a lookup finds the id's bucket block in it and scans its
 * digests as the owner does. Only the owner admits, evicts and applies pushes (the
 * replica's node sends them there), so the replica changes only by the owner's fresh
 * words, written under the replica's lock that reads take too. */

typedef struct ids_rep {
  pthread_spinlock_t lock;
  char pad[64 - sizeof(pthread_spinlock_t)];
  char blob[]; /* 64-byte aligned, as blocks are (their ids are read as u64) */
} ids_rep_t;
_Static_assert(sizeof(ids_rep_t) == 64, "a replica's blob starts a cache line in");

void *ids_replica_new(au_ids_t *t)
{
  ids_rep_t *r = aligned_alloc(64, round_up(sizeof(*r) + ids_actor_bytes(t), 64));
  if (!r) return NULL;
  pthread_spin_init(&r->lock, PTHREAD_PROCESS_PRIVATE);
  atomic_fetch_add_explicit(&t->memory, sizeof(*r) + ids_actor_bytes(t), memory_order_relaxed);
  return r;
}

void *ids_replica_blob(void *rep)
{
  return ((ids_rep_t *)rep)->blob;
}

int ids_replica_check(const au_ids_t *t, uint64_t actor, void *rep, char *why, size_t why_len)
{
  return check_blob(t, actor, ((ids_rep_t *)rep)->blob, why, why_len);
}

void ids_replica_lock(void *rep)
{
  pthread_spin_lock(&((ids_rep_t *)rep)->lock);
}

void ids_replica_unlock(void *rep)
{
  pthread_spin_unlock(&((ids_rep_t *)rep)->lock);
}

void ids_replica_free(au_ids_t *t, void *rep)
{
  if (!rep) return;
  pthread_spin_destroy(&((ids_rep_t *)rep)->lock);
  free(rep);
  atomic_fetch_sub_explicit(&t->memory, sizeof(ids_rep_t) + ids_actor_bytes(t),
                            memory_order_relaxed);
}

void ids_pull_replica(au_ids_t *t, uint64_t id, uint64_t clock, void *out, void *scratch)
{
  const uint64_t h = id_hash(id), g = cluster_bucket(t, h);
  ids_rep_t *r = t->fmt.actors[g / t->abuckets].values;
  char *blk = r->blob + (g % t->abuckets) * (HEAD_BYTES + t->block_bytes) + HEAD_BYTES;
  const uint8_t dg = (uint8_t)h ? (uint8_t)h : 1;
  pthread_spin_lock(&r->lock);
  int s = find_slot(t, digests(blk), ids_of(t, blk), id, dg);
  if (s >= 0 && !expired(t, blk, (uint32_t)s, clock)) {
    memcpy(out, row_of(t, blk, (uint32_t)s), (size_t)t->fmt.dim * 4);
    pthread_spin_unlock(&r->lock);
    return;
  }
  pthread_spin_unlock(&r->lock);
  /* no row (or one past its ttl, which the owner drops at its next use): the initializer's
     values, as the owner's pull gives them */
  memset(scratch, 0, t->fmt.row_bytes);
  table_init_row(&t->fmt, &t->init, id, scratch);
  memcpy(out, scratch, (size_t)t->fmt.dim * 4);
}

/* The words of [from, from + n) in `now` that differ from base: indices (offset by
 * `at`) and values into changed and vals, base updated; returns how many. */
static uint32_t diff_words(const char *now, char *base, size_t n, uint32_t at, uint32_t *changed,
                           uint32_t *vals)
{
  uint32_t k = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t x, b;
    memcpy(&x, now + i * 4, 4);
    memcpy(&b, base + i * 4, 4);
    if (x == b) continue;
    changed[k] = at + (uint32_t)i;
    vals[k++] = x;
    memcpy(base + i * 4, &x, 4);
  }
  return k;
}

uint32_t ids_actor_changes(au_ids_t *t, void *values, void *base, uint32_t *changed, uint32_t *vals)
{
  bucket_t *bs = values;
  char *o = base;
  uint32_t k = 0, at = 0;
  const uint32_t stride = (uint32_t)((HEAD_BYTES + t->block_bytes) / 4);
  /* a row's values only: a replica's reads give values, and its node's pushes go to the
     owner, so its optimizer slots are never read (they stay as the replica came) */
  const size_t row_words = t->fmt.dim;
  for (uint64_t i = 0; i < t->abuckets; i++, o += HEAD_BYTES + t->block_bytes, at += stride) {
    bucket_t *b = &bs[i];
    pthread_spin_lock(&b->lock);
    if (!b->changed) {
      pthread_spin_unlock(&b->lock);
      continue;
    }
    char head[HEAD_BYTES];
    pack_head(b, head);
    k += diff_words(head, o, HEAD_BYTES / 4, at, changed + k, vals + k);
    /* the slots' digests, ids, counts, uses and clocks, then the rows written since (a
       row changes only so: its values by pushes, made, or put back), in ascending order */
    const uint32_t rows_at = at + (uint32_t)((HEAD_BYTES + t->off_rows) / 4);
    char *ob = o + HEAD_BYTES;
    if (b->block) {
      k += diff_words(b->block, ob, t->off_rows / 4, at + HEAD_BYTES / 4, changed + k, vals + k);
      for (uint32_t s = 0; s < t->B; s++) {
        if (!(b->dirty[s >> 6] >> (s & 63) & 1)) continue;
        const size_t off = (size_t)s * t->fmt.row_bytes;
        k += diff_words(b->block + t->off_rows + off, ob + t->off_rows + off, row_words,
                        rows_at + (uint32_t)(off / 4), changed + k, vals + k);
      }
    }
    b->changed = 0;
    memset(b->dirty, 0, sizeof(b->dirty));
    pthread_spin_unlock(&b->lock);
  }
  return k;
}

/* ---- checkpoints (checkpoint.c) ------------------------------------------------------ */

au_ids_t *ids_at(au_node_t *n, uint32_t i)
{
  au_ids_t *t = n->ids;
  while (t && t->index != i) t = t->next;
  return t;
}

const au_table_t *ids_format(const au_ids_t *t)
{
  return &t->fmt;
}

au_table_t *ids_table(au_ids_t *t)
{
  return &t->fmt;
}

uint64_t ids_rows(au_ids_t *t)
{
  au_ids_stats_t st;
  au_ids_stats(t, &st);
  return st.rows;
}

static int row_bucket(au_ids_t *t, bucket_t *b, void *arg)
{
  each_arg_t *e = arg;
  int rc = 0;
  for (uint32_t s = 0; b->block && s < t->B && rc == 0; s++)
    if (digests(b->block)[s])
      rc = e->row_fn(e->arg, ids_of(t, b->block)[s], uses_of(t, b->block)[s],
                     last_of(t, b->block)[s], row_of(t, b->block, s));
  return rc;
}

int ids_each_row(au_ids_t *t, ids_row_fn fn, void *arg)
{
  each_arg_t e = {.row_fn = fn, .arg = arg};
  return each_bucket(t, row_bucket, &e);
}

static int clear_bucket(au_ids_t *t, bucket_t *b, void *arg)
{
  (void)arg;
  if (b->block) {
    memset(digests(b->block), 0, t->B);
    memset(cdigests(t, b->block), 0, t->B);
    memset(counts_of(t, b->block), 0, t->B);
  }
  b->rows = b->cands = b->hand = 0;
  b->changed = 1;
  return 0;
}

void ids_clear(au_ids_t *t)
{
  each_bucket(t, clear_bucket, NULL);
  if (t->door)
    for (uint64_t w = 0; w < t->door_bits / 64; w++)
      atomic_store_explicit(&t->door[w], 0, memory_order_relaxed);
}

int ids_put_row(au_ids_t *t, uint64_t id, uint32_t uses, uint32_t last, const void *row)
{
  if (!ids_owns(t, id)) return 0; /* another node's, on a cluster */
  where_t w = locate(t, id);
  bucket_t *b = w.b;
  pthread_spin_lock(&b->lock);
  ensure_block(t, b);
  int s = find_slot(t, digests(b->block), ids_of(t, b->block), id, w.dg), gave = s >= 0;
  if (s < 0) {
    if (b->rows < t->B) {
      for (s = 0; digests(b->block)[s]; s++) {
      }
    } else {
      /* ages against the newest row's clock, this one's included */
      uint32_t now = last;
      for (uint32_t x = 0; x < t->B; x++) touch(&now, last_of(t, b->block)[x]);
      int was;
      s = (int)victim(t, b, now, &was);
      __atomic_store_n(&b->evicted, b->evicted + 1, __ATOMIC_RELAXED);
      b->rows--;
      gave = 1;
    }
    b->rows++;
  }
  SET(digests(b->block)[s], w.dg);
  ids_of(t, b->block)[s] = id;
  SET(uses_of(t, b->block)[s], uses);
  SET(last_of(t, b->block)[s], last);
  memcpy(row_of(t, b->block, (uint32_t)s), row, (size_t)t->fmt.width * 4);
  b->changed = 1;
  b->dirty[s >> 6] |= 1ULL << (s & 63);
  pthread_spin_unlock(&b->lock);
  return gave;
}

/* ---- creation ------------------------------------------------------------------------- */

/* The buckets' blocks, one zero mapping advised as transparent huge pages, so that rows
 * spread over hundreds of MB do not cost a page walk each (docs/architecture.md, "Huge
 * pages"). NULL when out of memory. */
static void *map_blocks(size_t bytes)
{
  /* committed at once (not MAP_NORESERVE): a budget the system cannot hold fails here,
     with AU_ENOMEM, instead of killing the process when its pages are first touched */
  void *p =
      mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
  /* where transparent huge pages are "madvise" (Debian's default); a kernel without them
     says EINVAL and the pages stay small */
  if (bytes >= (2u << 20)) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static void unmap_blocks(void *p, size_t bytes)
{
  if (p) munmap(p, bytes ? bytes : 1);
}

static void ids_free(au_ids_t *t)
{
  for (uint64_t a = 0; t->fmt.actors && a < t->fmt.nactors; a++) /* groups that came here */
    if (t->fmt.actors[a].values && !is_home(t, a)) ids_actor_free(t, a, t->fmt.actors[a].values);
  free(t->fmt.actors);
  free((void *)t->fmt.contended);
  for (uint64_t i = 0; t->buckets && i < t->nbuckets; i++)
    pthread_spin_destroy(&t->buckets[i].lock);
  unmap_blocks(t->blocks, t->nbuckets * t->block_bytes);
  free(t->buckets);
  free((void *)t->door);
  free(t);
}

void ids_free_all(au_node_t *n)
{
  while (n->ids) {
    au_ids_t *next = n->ids->next;
    ids_free(n->ids);
    n->ids = next;
  }
  free(n->ids_by_id);
  n->ids_by_id = NULL;
  n->nids = 0;
}

static int bad(au_node_t *node, const au_ids_opts_t *o, const char *why)
{
  au__log(AU_LOG_ERROR, node->rank, "id table %s: %s", o->row.name ? o->row.name : "ids", why);
  return AU_EINVAL;
}

/* The table and its layout from the options, nothing mapped yet: 0, AU_EINVAL (logged)
 * or AU_ENOMEM. */
static int ids_new(au_node_t *node, const au_ids_opts_t *opts, au_ids_t **out)
{
  au_table_opts_t row = opts->row;
  const int place = row.place;
  if (place < AU_PLACE_CLASSIC || place > AU_PLACE_ADAPTIVE)
    return bad(node, opts, "unknown placement (row.place)");
  if (node->nodes > 1 && place != AU_PLACE_CLASSIC && node_bounded(node))
    return bad(node, opts,
               "an id table placed other than classic needs the async consistency model "
               "(docs/tables.md, \"Id tables\")");
  row.keys = 1;
  row.group = 0;
  row.place = AU_PLACE_CLASSIC;
  if (table_check_opts(&row) != 0) return bad(node, opts, "the row options are not valid");
  uint32_t B = opts->bucket ? opts->bucket : 64;
  if (B < 8 || B > 256 || (B & (B - 1)))
    return bad(node, opts, "bucket must be a power of two 8..256");
  if (opts->evict != AU_EVICT_LFU && opts->evict != AU_EVICT_LRU)
    return bad(node, opts, "unknown eviction rule");
  if (opts->ttl >= (1ULL << 31)) return bad(node, opts, "ttl must be below 2^31 clocks");
  if (opts->admit > 255) return bad(node, opts, "admit must be at most 255 pushes");

  au_ids_t *t = calloc(1, sizeof(*t));
  if (!t) return AU_ENOMEM;
  t->init = row;
  t->init.name = NULL;
  t->index = node->ids ? node->ids->index + 1 : 0;
  au_table_t *f = &t->fmt;
  f->node = node;
  f->id = (int)(IDS_TID + t->index);
  f->ids = t;
  f->keys = UINT64_MAX;
  snprintf(f->name, sizeof(f->name), "%s", row.name ? row.name : "ids");
  f->dim = row.dim;
  f->type = row.type;
  f->optim = row.optim;
  f->lr = row.lr;
  f->optim_init = row.optim_init > 0 ? row.optim_init : 1.0f;
  f->nslots = row.optim == AU_OPTIM_ADAGRAD ? row.dim : row.optim == AU_OPTIM_ADAGRAD_ROW;
  f->width = row.dim + f->nslots;
  f->row_align = row.row_align > 4 ? row.row_align : 4;
  f->row_bytes = round_up((size_t)f->width * 4, f->row_align);
  f->update_bytes = (size_t)row.dim * 4;
  /* the bucket's lock makes an update exclusive: the plain kernels are exact under it */
  f->kernel =
      row.kernel == AU_KERNEL_CUSTOM ? row.kernel_fn : kernel_for(row.type, AU_KERNEL_HOGWILD);
  f->kernel_arg = row.kernel_arg;
  f->hogwild = 1;

  t->B = B;
  t->window = B < IDS_WINDOW ? B : IDS_WINDOW;
  t->admit = opts->admit > 1 ? opts->admit : 1;
  t->ttl = (uint32_t)opts->ttl;
  t->evict = opts->evict;
  t->off_cdig = B;
  t->off_count = 2 * (size_t)B;
  t->off_ids = round_up(3 * (size_t)B, 8);
  t->off_cids = t->off_ids + (size_t)B * 8;
  t->off_uses = t->off_cids + (size_t)B * 8;
  t->off_last = t->off_uses + (size_t)B * 4;
  size_t a = f->row_align > 64 ? f->row_align : 64;
  t->off_rows = round_up(t->off_last + (size_t)B * 4, a);
  t->block_bytes = round_up(t->off_rows + (size_t)B * f->row_bytes, a);

  /* the doorkeeper: 8 bits (a byte) a row of capacity */
  int door = t->admit > 1 && !opts->no_door;
  size_t per_bucket = t->block_bytes + sizeof(bucket_t) + (door ? B : 0), fixed = sizeof(*t);
  if (opts->budget < fixed + per_bucket) {
    free(t);
    return bad(node, opts, "the budget does not hold one bucket");
  }
  t->nbuckets = (opts->budget - fixed) / per_bucket;
  if (t->nbuckets > UINT32_MAX) t->nbuckets = UINT32_MAX;
  if (door && t->nbuckets * B > (1ULL << 29)) t->nbuckets = (1ULL << 29) / B; /* bits < 2^32 */
  t->nodes = (uint32_t)node->nodes;
  t->rank = (uint32_t)node->rank;
  t->abuckets = t->nbuckets;
  if (t->nodes > 1) {
    /* whole parameter actors of IDS_ACTOR buckets (fewer if the budget holds fewer),
       and the cluster's buckets below 2^32 */
    t->abuckets = t->nbuckets < IDS_ACTOR ? t->nbuckets : IDS_ACTOR;
    uint64_t most = UINT32_MAX / t->nodes;
    t->nbuckets = (t->nbuckets < most ? t->nbuckets : most) / t->abuckets * t->abuckets;
  }
  t->gbuckets = t->nbuckets * t->nodes;
  if (t->nodes > 1) {
    f->nactors = t->gbuckets / t->abuckets;
    f->place = place;
    /* hot: a count of parameter actors, as for dense tables */
    const uint64_t hot = row.hot ? row.hot : (f->nactors + 99) / 100;
    f->hot_actors = hot < f->nactors ? hot : f->nactors;
    f->actor_bytes = ids_actor_bytes(t);
  }
  if (door) {
    t->door_bits = t->nbuckets * B * 8;
  }
  *out = t;
  return 0;
}

/* The options every node must give alike, as numbers (the ones the layout and rules come
 * from; a node that failed says so in the first). */
enum { AGREE_FIELDS = 20 };
static const char *const agree_names[AGREE_FIELDS] = {"",          "budget (buckets)",
                                                      "bucket",    "dim",
                                                      "type",      "optimizer",
                                                      "row_align", "admit",
                                                      "evict",     "ttl",
                                                      "no_door",   "init",
                                                      "init_a",    "init_b",
                                                      "seed",      "seed",
                                                      "lr",        "optim_init",
                                                      "kernel",    "place"};

static void agree_fields(const au_ids_opts_t *o, const au_ids_t *t, int rc, double *v)
{
  const au_table_opts_t *r = &o->row;
  const double f[AGREE_FIELDS] = {rc ? -1 : 1,
                                  t ? (double)t->gbuckets : 0,
                                  o->bucket,
                                  r->dim,
                                  r->type,
                                  r->optim,
                                  r->row_align,
                                  o->admit > 1 ? o->admit : 1,
                                  o->evict,
                                  (double)o->ttl,
                                  o->no_door != 0,
                                  r->init,
                                  r->init_a,
                                  r->init_b,
                                  (double)(r->seed & 0xffffffffu),
                                  (double)(r->seed >> 32),
                                  r->lr,
                                  t ? t->fmt.optim_init : r->optim_init, /* (0 means 1.0) */
                                  r->kernel,
                                  r->place};
  memcpy(v, f, sizeof(f));
}

/* Collective: every node's options against node 0's. 0, or AU_EINVAL (logged, the same on
 * every node) / the allreduce's error. */
static int agree(au_node_t *node, const au_ids_opts_t *o, const au_ids_t *t, int rc)
{
  const int N = node->nodes;
  double *v = calloc((size_t)N * AGREE_FIELDS, sizeof(double));
  if (!v) return AU_ENOMEM; /* (the others wait in the allreduce: as for any lost node) */
  agree_fields(o, t, rc, v + (size_t)node->rank * AGREE_FIELDS);
  int ar = au_allreduce_sum(node->rt, v, (size_t)N * AGREE_FIELDS);
  for (int r = 0; ar == 0 && r < N; r++)
    for (int j = 0; j < AGREE_FIELDS; j++) {
      const double mine = v[(size_t)r * AGREE_FIELDS + j], first = v[j];
      if (j == 0 ? mine > 0 : mine == first) continue;
      char why[160];
      snprintf(why, sizeof(why),
               "node %d gives other %s than node 0: every node must give the same", r,
               agree_names[j]);
      if (j == 0)
        snprintf(why, sizeof(why), "node %d refused the options or had no memory for the table", r);
      free(v);
      return bad(node, o, why);
    }
  free(v);
  return ar;
}

int au_ids_create(au_node_t *node, const au_ids_opts_t *opts, au_ids_t **out)
{
  if (!node || !opts || !out) return AU_EINVAL;
  au_ids_t *t = NULL;
  int rc = ids_new(node, opts, &t);
  au_table_t **by_id = NULL;
  if (rc == 0) { /* before the nodes agree: a node that cannot allocate refuses */
    t->buckets = calloc(t->nbuckets, sizeof(bucket_t));
    /* every block's address space at once, in huge pages where the kernel has them: a
       bucket's memory comes when it is first touched (ensure_block counts it then) */
    t->blocks = map_blocks(t->nbuckets * t->block_bytes);
    if (t->door_bits) t->door = calloc(t->door_bits / 64, sizeof(uint64_t));
    by_id = realloc(node->ids_by_id, (size_t)(node->nids + 1) * sizeof(*by_id));
    if (by_id) node->ids_by_id = by_id;
    au_table_t *f = &t->fmt;
    if (f->nactors) f->actors = calloc(f->nactors, sizeof(param_actor_t));
    if (f->place == AU_PLACE_RELOCATE && f->nactors) f->contended = calloc(f->nactors, 1);
    if (!t->buckets || !t->blocks || (t->door_bits && !t->door) || !by_id ||
        (f->nactors && !f->actors) ||
        (f->place == AU_PLACE_RELOCATE && f->nactors && !f->contended))
      rc = AU_ENOMEM;
    if (rc)
      au__log(AU_LOG_ERROR, node->rank, "id table %s: no memory for %llu buckets of %zu bytes",
              opts->row.name ? opts->row.name : "ids", (unsigned long long)t->nbuckets,
              t->block_bytes);
  }
  if (node->nodes > 1) { /* collective: every node's verdict and options */
    int c = agree(node, opts, t, rc);
    if (rc == 0) rc = c;
  }
  if (rc != 0) {
    if (t) {
      unmap_blocks(t->blocks, t->nbuckets * t->block_bytes);
      free(t->buckets);
      free((void *)t->door);
      free(t->fmt.actors);
      free((void *)t->fmt.contended);
      free(t);
    }
    return rc;
  }
  for (uint64_t i = 0; i < t->nbuckets; i++) {
    pthread_spin_init(&t->buckets[i].lock, PTHREAD_PROCESS_PRIVATE);
    t->buckets[i].spare = t->blocks + i * t->block_bytes;
  }
  /* actor a starts on node a mod nodes, its buckets the home's packed slot a / nodes */
  for (uint64_t a = 0; a < t->fmt.nactors; a++) {
    param_actor_t *pa = &t->fmt.actors[a];
    pa->owner = (uint32_t)(a % t->nodes);
    pa->values = is_home(t, a) ? &t->buckets[a / t->nodes * t->abuckets] : NULL;
    atomic_init(&pa->state, is_home(t, a) ? PA_OWNER : PA_REMOTE);
  }
  atomic_init(&t->memory, sizeof(*t) + t->nbuckets * sizeof(bucket_t) + t->door_bits / 8);
  node->ids_by_id[node->nids++] = &t->fmt;
  t->next = node->ids;
  node->ids = t;
  *out = t;
  return 0;
}
