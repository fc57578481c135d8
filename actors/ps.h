/* ps.h — the parameter server's internal state on one node: tables made of parameter
 * actors, and worker actors. Shared by every file of actors/.
 *
 * The invariant: a row's values are reachable through its parameter actor only while
 * the actor's state says this node holds them (owner or replica); the placer
 * (placer.h: relocation.c, replication.c) changes state before it moves or drops values, and
 * waits until no view pins the actor.
 */
#ifndef AUGUR_ACTORS_PS_H
#define AUGUR_ACTORS_PS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <ck_epoch.h>

#include "actors/idle.h"
#include "actors/obuf.h"
#include "actors/policy.h"
#include "actors/remote.h"
#include "augur.h"
#include "runtime/ext.h"

/* The parameter server's trace events (docs/tracing.md), registered with the runtime by
 * au_node_create (node.c). What a, b, c, d mean, as the JSON "args" name them ("-": not
 * written): `table` is the table's id (creation order, the same on every node), `actor`
 * the parameter actor's index in its table, nodes are ranks. A relocation's flow id is
 * au__trace_flow(table, actor, move count), which both owners know. */
enum ps_trace_kind {
  TRACE_INTENT = AU__TRACE_USER, /* table, actor, node (of the worker), worker */
  TRACE_RELOC_START,             /* table, actor, to (new owner), flow: the old owner lets go */
  TRACE_RELOC_END,               /* table, actor, to (new owner), flow: the new owner has it */
  TRACE_REPLICA_CREATE,          /* table, actor, owner (primary's node), bytes */
  TRACE_REPLICA_SYNC,            /* table, actor, owner, rows (changed rows received) */
  TRACE_REPLICA_DROP,            /* table, actor, owner, - */
  TRACE_REMOTE_ACCESS,           /* table, actor, node (fetched from), rows: a batch of rows */
  TRACE_FORWARD,                 /* table, actor, to (node it goes on to), hops */
  TRACE_PS_END
};

/* Where a parameter actor's values are, as seen from this node. */
enum pa_state {
  PA_REMOTE = 0,      /* held by another node (the owner field says which) */
  PA_OWNER = 1,       /* this node owns the values */
  PA_REPLICA = 2,     /* this node holds a replica; the owner is elsewhere */
  PA_HANDING_OFF = 3, /* owner, shipping the values to a new owner: no new local access */
};

/* A parameter actor: `group` consecutive keys of one table, the unit of placement.
 * Kept to 16 bytes so that tables of small rows stay within 1.2x of their raw values. */
typedef struct param_actor {
  void *values;           /* group * dim values, or NULL when not held here */
  _Atomic uint8_t state;  /* enum pa_state */
  _Atomic uint8_t dirty;  /* written since the replica tick last looked (replication.c) */
  uint16_t version;       /* moves so far (wraps): orders ownership news at the home node */
  _Atomic uint32_t owner; /* node rank of the owner, as far as this node knows (the
                             placer writes it while workers read it) */
} param_actor_t;

typedef void (*kernel_fn_t)(void *row, const void *delta, uint32_t dim, void *arg);

struct au_table {
  au_node_t *node;
  int id;
  char name[32];
  uint64_t keys;
  uint32_t dim;
  au_type_t type;
  uint32_t group, group_shift; /* group = 1 << group_shift */
  /* A row: dim values, then `nslots` optimizer floats (`width` 32-bit words in all, what
   * copies and replica deltas carry), padded to row_bytes (a multiple of row_align). */
  uint32_t nslots, width, row_align;
  size_t row_bytes;
  size_t update_bytes; /* one update (a delta or a gradient): dim values */
  uint64_t nactors;
  param_actor_t *actors;
  void *storage;      /* the values of all actors owned here, one allocation */
  kernel_fn_t kernel; /* adds a delta of `width` words (pushes, replica deltas); with an
                         optimizer, the plain add of the table's kernel kind */
  void *kernel_arg;
  int hogwild; /* AU_KERNEL_HOGWILD: updates may lose a racing update */
  au_optim_t optim;
  float lr, optim_init;
  int place; /* au_place_t */
  /* AU_PLACE_RELOCATE: per actor, nonzero while it is contended (taken away soon after it
   * arrived, relocation.c): steps fetch its rows instead of waiting for it to move. The
   * placer writes, workers read (relaxed: a stale answer only picks the other road) */
  _Atomic uint8_t *contended;
  uint64_t slots; /* home-owned actors packed in storage (id / nodes) */
  /* AU_PLACE_HOT: the actors the application named hot (au_table_hot; 1 each); without
   * them how many actors are hot, and the border of the hot set by this node's intent
   * counts: more than hot_min intents, or hot_min and an index up to hot_last (ties go
   * to the lower index; the placer recomputes both; claims.c) */
  _Atomic uint8_t *hot_set;
  _Atomic int hot_named; /* ... when it holds the application's set (else counting) */
  uint64_t hot_actors;
  uint32_t hot_min;
  uint64_t hot_last;
  /* an id table's row format (ids.c): its id table, else NULL. Its keys are any 64-bit
   * ids, its messages carry the sender's clock, and it has no parameter actors of its own
   * on the wire (nactors 0) */
  struct au_ids *ids;
  size_t actor_bytes; /* an id table's actor as it moves (ids_actor_bytes; else 0) */
  /* Blocks for actors that arrive (table_values_take): the placer's alone. Home slots
   * known to be all zero (a bit each, for actors away), and a list of zeroed blocks of
   * actors that left (linked through their first word, which is 0 again when taken) */
  uint8_t *home_zero;
  void *zero_blocks;
  uint64_t nzero_blocks;
  struct au_table *next;
};

/* An actor's bytes as they move: group rows, or an id table's blob (ids.c). */
static inline size_t table_actor_bytes(const au_table_t *t)
{
  return t->actor_bytes ? t->actor_bytes : (size_t)t->group * t->row_bytes;
}

/* Row-pointer storage for the views of one step (see worker.c). */
typedef struct rows_chunk {
  struct rows_chunk *next;
  size_t cap, used;
  void *slot[];
} rows_chunk_t;

enum worker_state { W_READY, W_RUNNING, W_WAITING, W_PAUSED, W_DONE };

struct au_worker {
  au_node_t *node;
  au_actor_t *actor;
  int id;
  au_step_fn step;
  void *arg;
  int state; /* enum worker_state: touched only by the worker's actor and
                by au_node_run while nothing runs */
  au_clock_t clock;
  atomic_ullong seen_clock; /* the clock, for the placer (renews and releases claims) */
  clock_rate_t rate;        /* how fast the clock runs (intents become times, worker.c) */
  obuf_t intent_buf;        /* an intent's message to the placer, built here */
  uint64_t *seen;           /* ... and intent_send's scratch, seen_cap slots of each part */
  size_t seen_cap;
  uint32_t *named;      /* au_worker_ids_pull's ids per actor (relocate), 0 between pulls */
  size_t named_cap;     /* ... its entries */
  atomic_int kicked;    /* a step message is on its way (worker_kick) */
  uint64_t barrier_gen; /* generation of the barrier this worker waits at, or 0 */
  uint64_t fence_gen;   /* ... whose fence it sends after this step's pushes (barrier.c) */
  int views;            /* views held in the running step: must be 0 when it returns */
  rows_chunk_t *rows;   /* views' row pointers, reset after every step */
  wremote_t remote;     /* rows fetched from other nodes, pushes to them */
  int wants;            /* asked the placer for actors to move here; it kicks back */
  /* a Concurrency Kit epoch section around every step: a node handing off an actor or
   * dropping a replica waits until every worker that was in a step has left it
   * (grace.c) */
  ck_epoch_record_t ck;
  /* AU_SSP / AU_BSP (consistency.c): the last clock this worker finished, published at the
   * end of each step after its writes and pushes (INT64_MAX while it is not in the run:
   * paused or done); the clock the bound waits for (GATE_NONE: not waiting), which the
   * placer takes when it kicks; the step said AU_EAGAIN for the bound; since when */
  _Atomic int64_t done_clock, gate_need;
  int gate_wait;
  uint64_t gate_t0;
  /* written by the worker's actor only (runtime/counter.h), read by au_node_stats */
  atomic_ullong steps, rows_local, rows_remote, intents, intent_keys, reads_waited, wait_ns,
      intent_sparse;
};

struct au_node {
  au_runtime_t *rt;
  int rank, nodes;
  int sync_ms; /* replica sync period (au_node_opts_t) */
  au_table_t *tables;
  struct au_ids *ids;       /* id tables (ids.c), newest first */
  au_table_t **table_by_id; /* tables in creation order: ids agree across nodes */
  int ntables;
  au_table_t **ids_by_id; /* id tables' row formats in creation order (ids.c) */
  int nids;
  void *servers; /* server_t[nservers] (remote.c) */
  int nservers;
  struct placer *placer; /* moves parameter actors (placer.c) */
  au_actor_t *placer_actor;
  ck_epoch_t epoch;  /* the workers', servers' and placer's sections (grace.c) */
  node_idle_t idle;  /* work outside any mailbox (idle.c) */
  atomic_int active; /* workers ready, running or waiting in this run */
  au_worker_t **workers;
  int nworkers, cap_workers;
  /* barrier: workers that arrived in the current generation */
  pthread_mutex_t barrier_mu;
  int barrier_arrived;
  uint64_t barrier_gen;
  struct barrier *barrier; /* across the cluster (barrier.c) */
  struct ckpt *ckpt;       /* what the last checkpoint held, for the next (checkpoint.c) */
  au_actor_t *barrier_actor;
  atomic_int error; /* first negative step result */
  atomic_int live;  /* workers not done */
  /* the consistency model (au_node_opts_t; consistency.c): AU_ASYNC, or a bound of
   * `staleness` clocks (AU_BSP: 0); the runs so far (au_node_run); the clock up to which
   * every update of every worker is visible here in this run (workers read it) */
  int consistency, staleness;
  _Atomic uint64_t run;
  _Atomic int64_t visible;
  atomic_int clk_news;      /* a PL_CLK_NEWS is on its way to the placer */
  atomic_int clk_push_wait; /* the placer waits for pushes to be applied: servers say */
  /* push messages this node's workers sent to each node, and its servers applied from
   * each node, since the start (nodes entries each, NULL on one node) */
  atomic_ullong *pushes_sent, *pushes_applied;
};

/* table.c */
void table_free(au_table_t *t);
/* 0 or AU_EINVAL: the options describe a valid table. */
int table_check_opts(const au_table_opts_t *o);
/* A key's (or an id's) first values and optimizer slots into row. */
void table_init_row(const au_table_t *t, const au_table_opts_t *o, au_key_t key, void *row);
/* Storage for an actor's values arriving here: its packed slot on its home node, else a
 * block that an actor left, else a fresh one. *zero says whether it is all zero already
 * (else psm_values_copy writes every byte). NULL when out of memory. The placer's alone. */
void *table_values_take(au_table_t *t, uint64_t actor, int *zero);
/* Gives back what table_values_take returned (a home slot stays with the table); zero:
 * the caller cleared it, so that the next actor to arrive need not. */
void table_values_give(au_table_t *t, uint64_t actor, void *values, int zero);

/* Row address of key k, or NULL if its actor's values are not on this node. */
static inline void *table_row(au_table_t *t, au_key_t k)
{
  param_actor_t *pa = &t->actors[k >> t->group_shift];
  uint8_t st = atomic_load_explicit(&pa->state, memory_order_acquire);
  if (st != PA_OWNER && st != PA_REPLICA) return NULL;
  return (char *)pa->values + (size_t)(k & (t->group - 1)) * t->row_bytes;
}

/* The row of a key whose actor a server found held here when it began its message: the
 * values stay until the server's message is over even if a hand-off has marked the actor
 * since (the grace period, grace.c), and the update goes with them. NULL if the
 * values are gone (a caller that did not look first). */
static inline void *table_row_held(au_table_t *t, au_key_t k)
{
  char *v = t->actors[k >> t->group_shift].values;
  return v ? v + (size_t)(k & (t->group - 1)) * t->row_bytes : NULL;
}

/* A table whose actors can have replicas (replicate, hot, adaptive). */
static inline int table_replicable(const au_table_t *t)
{
  return t->place != AU_PLACE_CLASSIC && t->place != AU_PLACE_RELOCATE;
}

/* Marks an actor's values written, after the writes: the replica tick ships (or sends
 * fresh) only what is marked, and relocation does not move an actor that is in use where
 * it is. Only tables that can have replicas or move keep the mark. */
static inline int table_marks(const au_table_t *t)
{
  return table_replicable(t) || t->place == AU_PLACE_RELOCATE;
}

static inline void table_mark(au_table_t *t, au_key_t k)
{
  if (!table_marks(t)) return;
  atomic_store_explicit(&t->actors[k >> t->group_shift].dirty, 1, memory_order_release);
}

/* ids.c */
/* An id table's messages name it as table IDS_TID + its creation index (dense tables'
 * ids are below). */
#define IDS_TID 0x40000000u
void ids_free_all(au_node_t *n);
/* 1 if this node holds the id's rows (its owner), else 0. */
int ids_owns(const au_ids_t *t, uint64_t id);
/* The parameter actor an id's bucket is part of (on a cluster). */
uint64_t ids_actor_of(const au_ids_t *t, uint64_t id);
/* Moving an actor (relocation.c): its blob of ids_actor_bytes (malloc'd; NULL when out of
 * memory) from its buckets, and back into buckets here (its home slot, else new ones;
 * NULL with why when the blob is not one of this table's or out of memory); the buckets of
 * an actor that left (a home slot stays). */
size_t ids_actor_bytes(const au_ids_t *t);
void *ids_actor_pack(au_ids_t *t, void *values);
void *ids_actor_unpack(au_ids_t *t, uint64_t actor, const void *blob, char *why, size_t why_len);
void ids_actor_free(au_ids_t *t, uint64_t actor, void *values);
/* The buckets of an actor whose home is here, in its home slot (on one node, actor 0 is
 * all the table's buckets; tests pack and unpack them). */
void *ids_home_buckets(au_ids_t *t, uint64_t actor);
/* Replicas (replication.c). The owner: a snapshot of its actor into a blob of
 * ids_actor_bytes, each bucket under its lock; the words that changed since (buckets
 * written since the last look: indices into the blob's words and their values, the
 * blob updated to them; returns how many, at most ids_actor_bytes / 4). A replica: the
 * owner's blob (ids_replica_new, then the blob filled from PS_REP_DATA and checked:
 * 0, or -1 with why), written under its lock by fresh words, read by workers
 * (ids_pull_replica: an id's dim values, the initializer's when it has no row, with
 * scratch of row_bytes), freed after the grace period of its drop. */
void ids_actor_snapshot(au_ids_t *t, void *values, void *blob);
uint32_t ids_actor_changes(au_ids_t *t, void *values, void *base, uint32_t *changed,
                           uint32_t *vals);
void *ids_replica_new(au_ids_t *t);
void *ids_replica_blob(void *rep);
int ids_replica_check(const au_ids_t *t, uint64_t actor, void *rep, char *why, size_t why_len);
void ids_replica_lock(void *rep);
void ids_replica_unlock(void *rep);
void ids_replica_free(au_ids_t *t, void *rep);
void ids_pull_replica(au_ids_t *t, uint64_t id, uint64_t clock, void *out, void *scratch);

/* The actor of key k: an id's, or the group's. */
static inline uint64_t table_actor_of(const au_table_t *t, au_key_t k)
{
  return t->ids ? ids_actor_of(t->ids, k) : k >> t->group_shift;
}
/* For the servers (remote.c), on the owner: an id's row whole, values and slots (the
 * initializer's when it has none), as a pull at `clock` reads it; an update pushed at
 * `clock`, as au_ids_push applies it. */
void ids_serve_pull(au_ids_t *t, uint64_t id, uint64_t clock, void *row);
void ids_serve_push(au_ids_t *t, uint64_t id, const void *update, uint64_t clock);
/* For workers (worker.c): an id's dim values, as au_ids_pull reads them, with scratch of
 * row_bytes. */
void ids_pull_here(au_ids_t *t, uint64_t id, uint64_t clock, void *out, void *scratch);
/* The row format, as messages name it. */
au_table_t *ids_table(au_ids_t *t);
/* For checkpoints (between runs, nothing pushing): the node's id tables in creation
 * order (ids_at NULL past the last), a table's row layout and resident rows, each row
 * with its uses and last clock (fn's nonzero stops it and is returned), emptying a
 * table (rows and candidates; counters kept) and putting a row back (a full bucket drops
 * its eviction rule's victim, counted as evicted; ids_put_row returns 1 when a row gave
 * way so, or the id's row was there already and is replaced, else 0). */
au_ids_t *ids_at(au_node_t *n, uint32_t i);
const au_table_t *ids_format(const au_ids_t *t);
uint64_t ids_rows(au_ids_t *t);
typedef int (*ids_row_fn)(void *arg, uint64_t id, uint32_t uses, uint32_t last, const void *row);
int ids_each_row(au_ids_t *t, ids_row_fn fn, void *arg);
void ids_clear(au_ids_t *t);
int ids_put_row(au_ids_t *t, uint64_t id, uint32_t uses, uint32_t last, const void *row);

/* checkpoint.c */
void checkpoint_free(au_node_t *n);

/* kernel.c */
kernel_fn_t kernel_for(au_type_t type, au_kernel_t kernel);
/* Applies one update (t->update_bytes: a delta, or a gradient through the optimizer) to a
 * row held here, as the table's kernel kind does (exact or Hogwild). */
void table_apply(const au_table_t *t, void *row, const void *update);
void kernel_add_f32(void *row, const void *delta, uint32_t dim, void *arg);
void kernel_add_i32(void *row, const void *delta, uint32_t dim, void *arg);
void kernel_hogwild_f32(void *row, const void *delta, uint32_t dim, void *arg);
void kernel_hogwild_i32(void *row, const void *delta, uint32_t dim, void *arg);
/* Copies one row with relaxed atomic loads (safe against concurrent kernels). */
void kernel_copy_row(void *dst, const void *row, uint32_t dim);

/* The placer's own messages (placer.h). PL_TICK is the one periodic tick; PL_GRACE and
 * PL_DROP_GRACE poll a grace period (a u64 record key, psm_key_encode); PL_CLK_RUN (a run
 * starts) and PL_CLK_NEWS (a worker finished a clock, a server applied pushes) are
 * consistency.c's. PS_CLK_OPEN: the placer tells a worker waiting for the bound that it
 * may read. */
enum { PL_TICK = 0x50534c01, PL_GRACE, PL_DROP_GRACE, PL_CLK_RUN, PL_CLK_NEWS, PS_CLK_OPEN };

/* consistency.c (AU_SSP / AU_BSP); the workers' and servers' side is here and in worker.c,
 * so that the bound calls into neither */
#define GATE_NONE INT64_MIN
static inline int node_bounded(const au_node_t *n)
{
  return n->consistency != AU_ASYNC;
}
/* au_node_run starts a run: resets the bound and tells the placer (before the kicks). */
void clk_run_start(au_node_t *n);
int clk_join(au_node_t *n);
void clk_free(au_node_t *n);
/* Tells the placer that something the bound depends on changed (once in flight). */
static inline void clk_nudge(au_node_t *n)
{
  if (!atomic_exchange(&n->clk_news, 1)) au_send(n->placer_actor, PL_CLK_NEWS, NULL, 0);
}
/* A push message went to `node`. */
static inline void clk_push_sent(au_node_t *n, uint32_t node)
{
  if (n->pushes_sent) atomic_fetch_add_explicit(&n->pushes_sent[node], 1, memory_order_relaxed);
}
/* A server applied a push message from `node` (after its updates). */
static inline void clk_push_applied(au_node_t *n, uint32_t node)
{
  if (!n->pushes_applied || node >= (uint32_t)n->nodes) return;
  atomic_fetch_add(&n->pushes_applied[node],
                   1); /* seq_cst: a Dekker pair with the placer's clk_push_wait */
  if (atomic_load(&n->clk_push_wait)) clk_nudge(n);
}

/* worker.c */
/* Frees what the worker allocated (not the worker: it is its actor's state). */
void worker_release_memory(au_worker_t *w);
/* Sends the worker its next step message. */
int worker_kick(au_worker_t *w);

#endif
