/* psmsg.h — the parameter server's protocol: every message between workers, servers and
 * placers, defined once. Each message type has an encoder and a validating decoder; a
 * decoder checks every length, count, table, actor, key and node against this node
 * before the caller sees anything, and says what was wrong otherwise. Nothing else in
 * actors/ packs or unpacks message bytes.
 *
 * The invariant: a decoded message is safe to act on: every table pointer is one of this
 * node's tables, every actor and key is inside it, every node rank is in the cluster,
 * and every variable part (keys, rows, values, entries) lies inside the message.
 *
 * All integers are little-endian as the machine stores them (the cluster is one
 * architecture: the handshake checks it); multi-byte fields are read with memcpy, as a
 * message's payload is only 16-byte aligned.
 */
#ifndef AUGUR_ACTORS_PSMSG_H
#define AUGUR_ACTORS_PSMSG_H

#include <stdint.h>
#include <string.h>

#include "actors/ps.h"

/* Message types (au_msg_t.type). Layouts: psmsg.c, next to each encoder. */
enum {
  PS_REQ = 0x50530001, /* worker -> server: rows by key */
  PS_ROWS,             /* server -> worker: the request's keys, then the rows */
  PS_PUSH,             /* worker -> server: updates by key */
  PS_ERR,              /* server -> worker: a reason, as text */
  PS_WANT,             /* worker -> its placer: actors it wants here */
  PS_ARRIVED,          /* placer -> worker: an actor it wanted is here (empty) */
  PS_MOVE_REQ,         /* placer -> placer: move an actor to `to` */
  PS_MOVE_DATA,        /* placer -> placer: a moved actor's rows */
  PS_OWNER,            /* placer -> every other placer: an actor's new owner */
  PS_FWD_REQ,          /* server -> its placer: a request's keys whose actors are not here */
  PS_FWD_PUSH,         /* server -> its placer: the same for a push */
  PS_REP_REQ,          /* placer -> owner's placer: a replica for node `node` */
  PS_REP_DATA,         /* owner's placer -> placer: a replica's rows */
  PS_SYNC,             /* replica -> owner: deltas of actors */
  PS_FRESH,            /* owner -> replica: owners' rows of actors */
  PS_INTENT,           /* worker -> its placer: the actors of an intent, as times */
  PS_CLAIM,            /* placer -> owner's placer: claims */
  PS_REP_DROP,         /* owner -> replica's placer: drop the replica */
  PS_REP_GONE,         /* replica -> owner: dropped; its last delta went before */
  PS_HINT,             /* worker -> its placer: actors it would like here (it fetches them
                          meanwhile; PS_WANT's layout) */
  PS_BAR_ARRIVE,       /* barrier -> node 0's barrier: this node's workers arrived */
  PS_BAR_DONE,         /* barrier -> node 0's barrier: this node's workers are all done */
  PS_BAR_GO,           /* node 0's barrier -> every barrier: everyone arrived */
  PS_BAR_FENCE,        /* worker -> server -> its barrier: this worker's pushes are in */
  PS_BAR_APPLIED,      /* barrier -> node 0's barrier: every push to this node is in */
  PS_BAR_OPEN,         /* node 0's barrier -> every barrier: every push is in everywhere */
  PS_CLK_FLUSH,        /* placer -> every placer: this node's workers finished a clock, its
                          replicas' deltas went before (AU_SSP/AU_BSP, consistency.c) */
  PS_CLK_FRESH,        /* placer -> every placer: the updates up to a clock are in here, the
                          fresh values of its actors went before */
};

/* Why a decoder refused a message, for the log. */
typedef struct psm_why {
  char text[160];
} psm_why_t;

/* The one checked lookup: table `tid` of this node and, below it, actor `actor`. NULL
 * (with why) if there is no such table or the actor is outside it. */
au_table_t *psm_table(const au_node_t *n, uint32_t tid, psm_why_t *why);
au_table_t *psm_actor(const au_node_t *n, uint32_t tid, uint64_t actor, psm_why_t *why);

/* --- the one batch builder -------------------------------------------------------------
 * A batch message is a fixed head holding a u32 count at `count_at`, then entries. The
 * first entry puts the head; every entry adds one to the count. Returns where the entry
 * goes (entry_len bytes), or NULL when out of memory (the batch is unchanged). */
uint8_t *psm_batch_add(obuf_t *b, const void *head, size_t head_len, size_t count_at,
                       size_t entry_len);
uint32_t psm_batch_count(const obuf_t *b, size_t count_at);

/* --- rows by key: PS_REQ, PS_FWD_REQ, PS_ROWS, PS_PUSH, PS_FWD_PUSH --------------------- */

typedef struct psm_rows {
  au_table_t *t;
  uint32_t n; /* keys */
  uint32_t reply_node;
  au_port_t reply_port; /* the worker that asked (or pushed) */
  int push;             /* entries carry an update (t->update_bytes) after each key */
  int sparse;           /* a push's entries in the sparse form (psmsg.c): of varying length */
  const uint8_t *entries;
  size_t entries_len;  /* bytes of all n entries */
  size_t each;         /* bytes per entry: 8, or 8 + update_bytes; 0 when sparse */
  const uint8_t *rows; /* PS_ROWS: n rows after the keys (of t->row_bytes, or sparse) */
  size_t rows_len;
  uint64_t clock; /* an id table's (t->ids): the sender's clock, else 0 */
} psm_rows_t;

/* One entry of a rows message, as psm_rows_next finds it. */
typedef struct psm_rows_entry {
  uint64_t key;
  const uint8_t *at; /* the entry's bytes, len of them */
  size_t len;
  const uint8_t *update; /* a push's whole update (unaligned), or NULL: */
  const uint8_t *pairs;  /* npairs (u32 word index, u32 word) of its nonzero words */
  uint32_t npairs;
} psm_rows_entry_t;

/* Checks a message of one of the five types: its table, count, length, keys. */
int psm_rows_decode(const au_node_t *n, uint32_t type, const uint8_t *p, size_t len,
                    psm_rows_t *out, psm_why_t *why);
/* Entry by entry, in order, from *off = 0: 1 and the entry at *off (which moves past it),
 * or 0 after the last. Every message kind; the only way through a push's entries. */
int psm_rows_next(const psm_rows_t *m, size_t *off, psm_rows_entry_t *e);
/* The key of entry i of a message whose entries are all alike (not a sparse push; entry 0
 * of any message). */
static inline uint64_t psm_rows_key(const psm_rows_t *m, uint32_t i)
{
  uint64_t k;
  memcpy(&k, m->entries + (size_t)i * m->each, sizeof(k)); /* entries are `each` apart */
  return k;
}
/* A push entry's update, whole, into dst (t->update_bytes, for the kernel). */
void psm_rows_update_copy(const psm_rows_t *m, const psm_rows_entry_t *e, void *dst);
/* Where the answer to a rows message goes, if its head says so (1) and names a node. */
int psm_rows_reply(const au_node_t *n, const uint8_t *p, size_t len, uint32_t *node,
                   au_port_t *port);
/* Adds a key (a request) or a key and its update (a push, update != NULL) to the batch
 * for table t, whose answer goes to (reply_node, reply_port); an id table's batch carries
 * the clock of its first entry. 0 or AU_ENOMEM. */
int psm_rows_add(obuf_t *b, const au_table_t *t, uint32_t reply_node, au_port_t reply_port,
                 uint64_t key, const void *update, uint64_t clock);
/* Adds entry e of m to b (a batch of m's kind with m's head): splits and forwards. */
int psm_rows_add_entry(obuf_t *b, const psm_rows_t *m, const psm_rows_entry_t *e);
/* The number of keys in a rows batch b. */
uint32_t psm_rows_count(const obuf_t *b);
/* A PS_ROWS answer to request m: its length, and (into out, that long) the head and keys;
 * returns where the n rows go. */
size_t psm_rows_answer_len(const psm_rows_t *m);
uint8_t *psm_rows_answer(uint8_t *out, const psm_rows_t *m);
/* The sparse answer, for tables whose rows are 64 words or more (psm_rows_answer_sparse):
 * begin puts the head and keys into b, then each row in key order goes in by
 * psm_rows_answer_row (its nonzero words as pairs, or whole where they are no shorter;
 * `row` a private copy). 0 or AU_ENOMEM. */
int psm_rows_answer_sparse(const psm_rows_t *m);
int psm_rows_answer_begin(obuf_t *b, const psm_rows_t *m);
int psm_rows_answer_row(obuf_t *b, const au_table_t *t, const void *row);
/* The next row of a PS_ROWS answer, from *off = 0, whole into dst (t->row_bytes), or
 * passed over (dst NULL). */
void psm_rows_row_next(const psm_rows_t *m, size_t *off, void *dst);

/* --- an actor's rows: PS_MOVE_DATA, PS_REP_DATA ---------------------------------------- */

typedef struct psm_values {
  au_table_t *t;
  uint64_t actor;
  uint16_t version;      /* PS_MOVE_DATA: the moves so far (wraps); PS_REP_DATA: 0 */
  uint8_t hold_exp;      /* PS_MOVE_DATA: its hold is PLACE_HOLD_NS << hold_exp */
  const uint8_t *values; /* group * row_bytes, or npairs (index, word) pairs */
  int sparse;
  uint32_t npairs;
} psm_values_t;

int psm_values_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_values_t *out,
                      psm_why_t *why);
/* The rows of a decoded message into dst (group * row_bytes); zero: dst is all zero
 * already, so that a sparse form writes only its pairs. */
void psm_values_copy(const psm_values_t *v, void *dst, int zero);
/* The dense form's length. */
size_t psm_values_len(const au_table_t *t);
/* The sparse form in one pass, into out (psm_values_len + 8 bytes): its length when it is
 * shorter than the dense form, else 0 (out then holds nothing of use). */
size_t psm_values_write_sparse(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                               uint8_t hold_exp, const void *values);
/* Zeroes in values the words that the sparse form msg (psm_values_write_sparse's) names:
 * after it, values that it held whole are all zero. */
void psm_values_zero_sparse(const uint8_t *msg, void *values);
/* The dense form, into out (psm_values_len bytes). */
void psm_values_write(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                      uint8_t hold_exp, const void *values);
/* Writes the dense form's head into out (psm_values_len bytes); returns where the rows go. */
uint8_t *psm_values_encode(uint8_t *out, const au_table_t *t, uint64_t actor, uint16_t version,
                           uint8_t hold_exp);

/* --- one actor: PS_MOVE_REQ, PS_OWNER, PS_REP_REQ, PS_REP_DROP, PS_REP_GONE -------------- */

typedef struct psm_actor_msg {
  au_table_t *t;
  uint64_t actor;
  uint32_t node;    /* MOVE_REQ: where it goes; OWNER: the new owner; REP_REQ: who wants
                       the replica; DROP/GONE: 0 */
  uint32_t hops;    /* MOVE_REQ: forwards so far */
  uint16_t version; /* OWNER: the moves so far */
  uint8_t hold_exp; /* OWNER: the actor's hold exponent (relocation.c) */
} psm_actor_msg_t;

#define PSM_ACTOR_MAX 24 /* bytes of the longest of these messages */
/* Encodes a message of `type` into out; returns its length. */
size_t psm_actor_encode(uint8_t out[PSM_ACTOR_MAX], uint32_t type, const psm_actor_msg_t *m);
int psm_actor_decode(const au_node_t *n, uint32_t type, const uint8_t *p, size_t len,
                     psm_actor_msg_t *out, psm_why_t *why);

/* --- PS_WANT, PS_HINT: a worker's actors of one table -------------------------------------- */

typedef struct psm_want {
  au_table_t *t;
  uint32_t n;
  const uint8_t *actors; /* u64 each, every one inside t */
} psm_want_t;

int psm_want_add(obuf_t *b, const au_table_t *t, uint64_t actor);
int psm_want_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_want_t *out,
                    psm_why_t *why);
/* The i-th u64 of an array inside a message (unaligned). */
static inline uint64_t psm_u64_at(const uint8_t *p, uint32_t i)
{
  uint64_t v;
  memcpy(&v, p + (size_t)i * 8, 8);
  return v;
}
static inline uint64_t psm_want_actor(const psm_want_t *m, uint32_t i)
{
  return psm_u64_at(m->actors, i);
}

/* --- PS_INTENT: an intent's actors, with times from now -------------------------------- */

typedef struct psm_intent {
  au_table_t *t;
  uint32_t n;
  uint64_t from_ns, until_ns; /* from now */
  uint32_t worker;            /* a worker of this node */
  float tick_ns;              /* its clock's ns per tick */
  uint64_t start_clock, end_clock;
  const uint8_t *actors; /* u64 each */
} psm_intent_t;

/* Adds an actor to an intent batch whose head is *h (t, times, worker, clocks). */
int psm_intent_add(obuf_t *b, const psm_intent_t *h, uint64_t actor);
int psm_intent_decode(const au_node_t *n, const uint8_t *p, size_t len, psm_intent_t *out,
                      psm_why_t *why);
static inline uint64_t psm_intent_actor(const psm_intent_t *m, uint32_t i)
{
  return psm_u64_at(m->actors, i);
}

/* --- PS_CLAIM: claims for actors, batched per owner ------------------------------------ */

/* Claim flags. A release ends the node's claim now. */
enum { PSM_CLAIM_HOT = 1, PSM_CLAIM_RELEASE = 2 };

typedef struct psm_claim {
  au_table_t *t;
  uint64_t actor;
  uint32_t node; /* who claims */
  uint16_t hops; /* forwards so far */
  uint8_t flags;
  uint64_t from_ns, until_ns; /* from now */
} psm_claim_t;

int psm_claim_add(obuf_t *b, const psm_claim_t *c);
/* Checks the whole batch; then psm_claim_at reads entry i. */
int psm_claims_decode(const au_node_t *n, const uint8_t *p, size_t len, uint32_t *count,
                      psm_why_t *why);
void psm_claim_at(const au_node_t *n, const uint8_t *p, uint32_t i, psm_claim_t *out);

/* --- PS_SYNC, PS_FRESH: actors' rows (deltas or values), batched per node ---------------
 * An entry carries, for the words (32-bit values) of an actor's rows that changed, what
 * each carries: its delta (PS_SYNC) or its new value (PS_FRESH). Either all the words of
 * the group's rows (dense), or (index, word) pairs for the changed ones (sparse), which
 * ever is smaller. */

typedef struct psm_entry {
  au_table_t *t;
  uint64_t actor;
  uint32_t npairs;      /* 0: dense */
  const uint8_t *words; /* dense: group * row_bytes; sparse: npairs x (u32 index, u32 word) */
} psm_entry_t;

/* Adds an entry for (t, actor): the words changed[0..nchanged) (ascending indices into the
 * group's rows) carry vals[0..nchanged); a dense entry carries all[] (every word: values)
 * or, with all NULL, 0 for the others (deltas). Sparse only when `sparse` allows (kernels
 * that add word by word) and the pairs are smaller. 0 or AU_ENOMEM. */
int psm_entry_add(obuf_t *b, const au_table_t *t, uint64_t actor, const uint32_t *changed,
                  const uint32_t *vals, uint32_t nchanged, const uint32_t *all, int sparse);
static inline uint32_t psm_entry_index(const psm_entry_t *e, uint32_t i)
{
  uint32_t v;
  memcpy(&v, e->words + (size_t)i * 8, 4);
  return v;
}
static inline uint32_t psm_entry_word(const psm_entry_t *e, uint32_t i)
{
  uint32_t v;
  memcpy(&v, e->words + (size_t)i * 8 + 4, 4);
  return v;
}

/* Walks a batch: psm_entries_begin checks the head, then each psm_entry_next checks and
 * returns the next entry (1), the end (0), or a malformed entry (-1, with why). */
typedef struct psm_entries {
  const uint8_t *p;
  size_t len, off;
  uint32_t left;
} psm_entries_t;
int psm_entries_begin(const uint8_t *p, size_t len, psm_entries_t *it, psm_why_t *why);
int psm_entry_next(const au_node_t *n, psm_entries_t *it, psm_entry_t *out, psm_why_t *why);

/* --- barriers: PS_BAR_ARRIVE, _DONE, _GO, _FENCE, _APPLIED, _OPEN ------------------------ */

typedef struct psm_bar {
  uint64_t gen;   /* the barrier's generation */
  uint32_t count; /* ARRIVE: this node's workers that arrived; GO: all nodes' */
} psm_bar_t;

#define PSM_BAR_LEN 16
size_t psm_bar_encode(uint8_t out[PSM_BAR_LEN], const psm_bar_t *m);
int psm_bar_decode(const uint8_t *p, size_t len, psm_bar_t *out, psm_why_t *why);

/* --- clocks: PS_CLK_FLUSH, PS_CLK_FRESH ------------------------------------------------- */

typedef struct psm_clk {
  uint64_t run;    /* the run (au_node_run calls so far on the sender) */
  int64_t clock;   /* FLUSH: every worker of the sender finished it; FRESH: every update up
                      to it is in the sender's actors */
  uint64_t pushes; /* FLUSH: push messages the sender's workers sent the receiver so far */
} psm_clk_t;

#define PSM_CLK_LEN 24
size_t psm_clk_encode(uint8_t out[PSM_CLK_LEN], const psm_clk_t *m);
int psm_clk_decode(const uint8_t *p, size_t len, psm_clk_t *out, psm_why_t *why);

/* --- the placer's messages to itself: a u64 key ------------------------------------------ */

size_t psm_key_encode(uint8_t out[8], uint64_t key);
int psm_key_decode(const uint8_t *p, size_t len, uint64_t *key);

#endif
