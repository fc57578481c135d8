/* placer.h — the placer: one actor per node that moves and copies parameter actors
 * (docs/architecture.md, "The parameter server"). placer.c is the actor; relocation.c,
 * replication.c and claims.c are the techniques beneath it, which never call each other:
 * each owns its part of the per-actor record (rec_t.reloc, .repl, .claims) and of the
 * placer's state, and reports what it did by its return value. records.c keeps the
 * record map and each record's held messages.
 *
 * The invariant: only the placer's actor touches these records and its state (one actor:
 * no locks); other threads read only the atomics said to be for them.
 */
#ifndef AUGUR_ACTORS_PLACER_H
#define AUGUR_ACTORS_PLACER_H

#include "actors/ps.h"
#include "actors/psmsg.h"
#include "runtime/ext.h"

/* A message waiting for an actor to arrive or to finish leaving (records.c). */
typedef struct held {
  struct held *next;
  uint32_t type, from_node, len;
  au_port_t from_port;
  uint8_t data[];
} held_t;

/* --- each technique's part of a record ------------------------------------------------- */

typedef struct reloc_rec {
  int requested;         /* a move here is under way */
  int handing_off;       /* leaving: waiting for the grace period */
  int to;                /* where it goes */
  uint64_t arrived_ns;   /* when it last arrived (a moved actor stays a while) */
  uint8_t hold_exp;      /* it stays PLACE_HOLD_NS << hold_exp: longer when it was taken
                            away soon after it came, shorter when it was left alone */
  uint8_t contended_now; /* wanted elsewhere during this hold: hold_exp counted it */
  uint64_t used_ns;      /* when this node's workers last used it (relocation.c) */
  uint64_t held_ns;      /* since when a move request waits for it here */
} reloc_rec_t;

typedef struct repl_rec {
  int requested;         /* a replica here is under way */
  void *base;            /* a replica: the owner's values as last synced; the owner: its
                            values as last sent to the replicas */
  nodeset_t *replicas;   /* the owner: nodes holding a replica (NULL: none yet) */
  nodeset_t *dropping;   /* the owner: replicas told to go and not yet gone */
  uint8_t dropping_here; /* this node's replica leaves after a grace period */
  /* on the lists the tick walks: next, and the pointer that points here (O(1) removal) */
  struct rec *next_replica, **pprev_replica, *next_owned, **pprev_owned;
} repl_rec_t;

typedef struct claims_rec {
  uint32_t hits;           /* this node's intents naming it (AU_PLACE_HOT) */
  uint64_t wake_ns;        /* when the tick looks at it next (0: not scheduled; claims.c) */
  uint64_t retry_ns;       /* the owner looks again then (a move waiting out a hold) */
  uint64_t looked_ns;      /* when the tick last looked (claims.c) */
  uint64_t last_intent_ns; /* this node's latest intent naming it */
  float gap_ns;            /* the usual gap between those intents */
  uint64_t told_until;     /* end of the claim its owner has heard of from this node */
  uint64_t last_end_ns;    /* end of the latest intent naming it (estimated time) */
  uint64_t end_clock;      /* ... its end clock, of worker end_worker */
  int end_worker;
  float tick_ns;                /* that worker's clock speed then */
  float idle_ticks;             /* the usual gap in its clock between two uses */
  uint64_t due_from, due_until; /* a claim to send once due_from is near (0: none) */
  /* the owner: time in this period of use with one claimant and with several, since it
   * last looked (at seen_ns); shared: the last period had more of several */
  uint64_t alone_ns, together_ns, seen_ns;
  uint8_t shared;
  uint8_t hot; /* the owner: the latest claims counted it hot (kept while none is active) */
  /* when the last period ended, the pauses between periods (a running estimate), and
   * until when the replicas of a shared actor with such a rhythm stay through one */
  uint64_t period_end_ns, pause_ns, keep_until;
  uint64_t asked_ns; /* when a claim that may bring it here went out */
  claim_t *claims;   /* the owner: the nodes' claims */
  int nclaims, capclaims;
} claims_rec_t;

/* An actor the placer is busy with. */
typedef struct rec {
  au_table_t *t;
  uint64_t actor;
  ck_epoch_entry_t grace;   /* its grace period, deferred on the placer's epoch record */
  uint8_t graced;           /* ... is over (grace.c) */
  int nwaiters, capwaiters; /* local workers that want it here */
  int *waiters;
  held_t *held, **held_tail; /* messages waiting for it to arrive or leave */
  reloc_rec_t reloc;
  repl_rec_t repl;
  claims_rec_t claims;
} rec_t;

/* --- each technique's part of the placer's state ---------------------------------------- */

typedef struct reloc_state {
  int holds; /* records hold move requests until their hold is over (the tick looks) */
  atomic_ullong moves_in, moves_out, forwards;
} reloc_state_t;

typedef struct repl_state {
  rec_t *replicas, *owned; /* replicas held here; owned actors that have replicas */
  int drops_here;          /* replicas here waiting out their grace period to leave */
  atomic_ullong syncs, replicas_made, replicas_dropped;
  atomic_llong replicas_held;
} repl_state_t;

/* A record's next look, in the tick's heap (earliest first); an entry whose time is not
 * the record's wake_ns any more is stale and skipped. */
typedef struct wake {
  uint64_t at;
  rec_t *r;
} wake_t;

typedef struct claims_state {
  wake_t *heap; /* actors with claims, claims due, or claims to follow, by when */
  size_t nheap, capheap;
  size_t live;          /* records scheduled (the other entries are stale) */
  action_latency_t lat; /* claim sent -> actor or replica here */
  uint64_t intent_keys; /* since the hot thresholds were last computed */
  uint64_t intended;    /* actors named by an intent of this node so far */
  atomic_ullong claims_sent, releases;
} claims_state_t;

/* AU_SSP / AU_BSP (consistency.c): what this node heard in a run, per node. */
typedef struct clk_slot {
  uint64_t run;           /* the run it is for (0: none yet) */
  int64_t *flush_clock;   /* the node's latest PS_CLK_FLUSH: its workers finished this */
  uint64_t *flush_pushes; /* ... after sending this node so many push messages */
  int64_t *ok;            /* the latest flush whose pushes are all applied here */
  int64_t *fresh;         /* the node's latest PS_CLK_FRESH */
} clk_slot_t;

typedef struct clk_state {
  uint64_t run;                     /* the run being served (0 before the first) */
  int64_t flushed_self, fresh_self; /* what this node said in it */
  clk_slot_t slot[2];               /* by run & 1: the next run's news may come early */
} clk_state_t;

struct placer {
  au_node_t *node;
  au_actor_t *actor;
  ck_epoch_record_t ck;  /* defers the ends of grace periods (grace.c) */
  u64map_t recs;         /* (table, actor) -> rec_t (records.c) */
  obuf_t scratch;        /* an aligned copy of one update, for pushes it applies itself */
  obuf_t wire;           /* an actor's sparse form being built (values_send) */
  int tick_armed;        /* the one periodic tick runs (placer_arm_tick) */
  uint64_t sync_next_ns; /* the tick syncs replicas again from then on (placer.c) */
  rec_t **decide;        /* owned actors to decide for after this message (claims) */
  nodeset_t *claimants, *give, *drop, *work; /* decide()'s, sized to the cluster */
  int ndecide, capdecide;
  reloc_state_t reloc;
  repl_state_t repl;
  claims_state_t claims;
  clk_state_t clk;
};

static inline param_actor_t *pa_of(const rec_t *r)
{
  return &r->t->actors[r->actor];
}

/* A module has work for the tick: starts it, every sync_ms, if it is not running. Once
 * it runs, changes to replicated values must be shipped before the node is idle. */
static inline void placer_arm_tick(struct placer *p)
{
  if (p->tick_armed) return;
  au_timer_id_t id;
  const uint64_t ms = (uint64_t)p->node->sync_ms;
  p->tick_armed = au_timer_start(p->node->rt, p->actor, PL_TICK, ms, ms, &id) == 0;
  atomic_store(&p->node->idle.ticking, p->tick_armed);
}

/* --- records.c: the record map and held messages ------------------------------------------- */

/* The record of (t, actor), made on first use; NULL when out of memory. */
rec_t *rec_get(struct placer *p, au_table_t *t, uint64_t actor);
/* The record a u64 key names (rec_key), or NULL. */
rec_t *rec_find(struct placer *p, uint64_t key);
uint64_t rec_key(const rec_t *r);
/* Keeps a message for the record (from node/port of m, or none); the node is not idle
 * while messages are held. */
void rec_hold(struct placer *p, rec_t *r, const au_msg_t *m, uint32_t type, const void *data,
              uint32_t len);
/* Takes the record's held messages (the caller frees each and calls rec_unheld). */
held_t *rec_take_held(rec_t *r);
void rec_unheld(struct placer *p, held_t *h);
/* Adds a local worker to those waiting for the actor (once). 0 or AU_ENOMEM. */
int rec_add_waiter(rec_t *r, int worker);
void rec_free(rec_t *r);
/* The owner decides for r once the message being handled is done (placer.c). */
void rec_to_decide(struct placer *p, rec_t *r);

/* The next hop of a message for an actor that is not here: from the home node (which
 * knows) to the owner, from elsewhere to the home. */
static inline int rec_next_hop(const au_node_t *n, const rec_t *r)
{
  int home = (int)(r->actor % (uint64_t)n->nodes);
  return n->rank == home ? (int)atomic_load_explicit(&pa_of(r)->owner, memory_order_relaxed) : home;
}

/* Where a message for an actor that is not here goes on to: the owner as this node knows
 * it. Following those links ends at the owner: a node points at a newer owner than the one
 * that sent to it (versions only grow). The next hop when this node has no better idea. */
static inline int rec_forward_to(const au_node_t *n, const rec_t *r)
{
  int to = (int)atomic_load_explicit(&pa_of(r)->owner, memory_order_relaxed);
  return to == n->rank ? rec_next_hop(n, r) : to;
}

/* --- grace.c: grace periods over the local workers' and servers' sections --------------- */

/* A worker's, a server's or the placer's epoch record joins the node's epoch. */
void grace_register(au_node_t *n, ck_epoch_record_t *rec);
/* A worker's step or a server's message: values may be touched in between. */
void grace_enter(ck_epoch_record_t *rec);
void grace_leave(au_node_t *n, ck_epoch_record_t *rec);
/* After marking r: waits for everyone who was in a section then (workers: views, pushes;
 * servers: answers, pushes from other nodes) to leave it, and sends the placer `kind`
 * (PL_GRACE, PL_DROP_GRACE) to look. */
void grace_begin(struct placer *p, rec_t *r, uint32_t kind);
/* A grace-poll message: its record once the grace period is over; else NULL (and the
 * message goes round again, after the others). */
rec_t *grace_poll(struct placer *p, const au_msg_t *m);

/* --- relocation.c ------------------------------------------------------------------------ */

/* A contended actor stays at most two holds (2 ms). Up to 128 ms (7) until 2026-12-01:
 * contended actors then sat far from the nodes that used them while those fetched their
 * rows; with 2 ms, augur-mf --mode relocate on 3 nodes (default order) took 0.07-0.21 s
 * per epoch instead of 0.35-0.53, and on 4 nodes --stagger at 200 us 0.084 instead of
 * 0.44, with a fifth of the bytes (docs/benchmarks.md). */
#define RELOC_HOLD_EXP_MAX 1

/* How long an actor that arrived stays before it moves again. */
static inline uint64_t reloc_hold_ns(const rec_t *r)
{
  return PLACE_HOLD_NS << r->reloc.hold_exp;
}

/* Asks the owner to move the actor here (hops: forwards so far). */
void relocation_ask(struct placer *p, rec_t *r, uint32_t hops);
/* Starts handing an owned actor off to node `to`: 1 once it is handing off (its grace
 * period begun), 0 if it cannot (out of memory: it stays). */
int relocation_hand_off(struct placer *p, rec_t *r, int to);
/* The grace period of a hand-off is over: ships the values, the news and what was held. */
void relocation_ship(struct placer *p, rec_t *r);
/* PS_MOVE_REQ */
void relocation_on_move_req(struct placer *p, const au_msg_t *m);
/* PS_MOVE_DATA: the actor is here now; its record (the caller tells whom it concerns,
 * then calls relocation_release), or NULL. */
rec_t *relocation_on_move_data(struct placer *p, const au_msg_t *m);
/* Serves what waited for the actor to arrive; move requests wait out the hold. */
void relocation_release(struct placer *p, rec_t *r);
/* PS_OWNER: news of an actor's owner, or from its owner that it is contended; then, if
 * local workers wait for it, its record (the caller tells them to fetch its rows). */
rec_t *relocation_on_owner(struct placer *p, const au_msg_t *m);
/* PS_FWD_REQ, PS_FWD_PUSH */
void relocation_on_forward(struct placer *p, const au_msg_t *m);
/* The tick: moves whose hold is over go. */
void relocation_tick(struct placer *p);

/* --- replication.c ----------------------------------------------------------------------- */

/* Asks the owner for a replica here. */
void replication_want(struct placer *p, rec_t *r);
/* The owner sends node `to` a replica. 0 or an AU_* error. */
int replication_give(struct placer *p, rec_t *r, uint32_t to);
/* The owner tells the replicas on `nodes` to go. */
void replication_drop(struct placer *p, rec_t *r, const nodeset_t *nodes);
/* PS_REP_REQ */
void replication_on_req(struct placer *p, const au_msg_t *m);
/* PS_REP_DATA: the replica is here now; its record, or NULL. */
rec_t *replication_on_data(struct placer *p, const au_msg_t *m);
/* PS_SYNC (fresh = 0), PS_FRESH (1) */
void replication_on_entries(struct placer *p, const au_msg_t *m, int fresh);
/* PS_REP_DROP: this node's replica starts leaving (1), or there is none (0; the owner is
 * told), or the message is bad (-1). *out: the record. */
int replication_on_drop(struct placer *p, const au_msg_t *m, rec_t **out);
/* The grace period of a replica leaving is over: its last delta, then the news. */
void replication_finish_drop(struct placer *p, rec_t *r);
/* PS_REP_GONE at the owner: the replica is gone; its record, or NULL. */
rec_t *replication_on_gone(struct placer *p, const au_msg_t *m);
/* The tick: ships what changed. 1 if it sent anything. */
int replication_tick(struct placer *p);
void replication_free(rec_t *r);

/* --- claims.c ----------------------------------------------------------------------------- */

/* PS_INTENT, PS_CLAIM: records owned here whose claims changed go on p->decide. */
void claims_on_intent(struct placer *p, const au_msg_t *m);
void claims_on_claim(struct placer *p, const au_msg_t *m);
/* The tick: the records whose time has come (a claim due, a claim to renew or release as
 * the clock goes, an owner's claim lapsing, a keep or a hold over) are looked at and go
 * on p->decide. Only while the node's workers run. */
void claims_tick(struct placer *p);
/* The owner wants to look at r again at `at` (a move waiting out its hold). */
void claims_retry_at(struct placer *p, rec_t *r, uint64_t at);
/* What place_decide reads of the record's claims at the owner, after dropping lapsed
 * claims and accounting the period of use; the claimants go into claimants_out. */
void claims_inputs(rec_t *r, uint64_t now, place_input_t *in, nodeset_t *claimants_out);
/* The owner hands the actor off: its claims go with it, as one PS_CLAIM message to hold
 * for the new owner (into out; empty when none). */
void claims_pass(rec_t *r, uint64_t now, obuf_t *out);
/* The actor or a replica arrived here: the new owner counts its own claim; a claim's
 * latency is a sample. */
void claims_arrived(struct placer *p, rec_t *r);
/* This node's replica is leaving: a later intent claims it afresh. */
void claims_forget(rec_t *r);
void claims_free(rec_t *r);

/* --- placer.c ----------------------------------------------------------------------------- */

int placer_start(au_node_t *node);
void placer_free(au_node_t *node);
/* Adds the placer's counters (moves, forwards, syncs, claims, replicas) to st. */
void placer_stats(const au_node_t *node, au_node_stats_t *st);

/* --- ship.c ------------------------------------------------------------------------------- */

/* An actor's rows (values, not changing meanwhile) to node `to`'s placer as a PS_MOVE_DATA
 * or PS_REP_DATA message, in the shorter form, with one pass over them: the sparse form is
 * built in wire (the placer's buffer, kept between calls) and sent when it is shorter,
 * else the dense form is written in place. clear (values, or NULL): once sent, the block
 * is zeroed, by the pairs where sparse. 0 or au_send_to's error (then clear is as it was). */
int values_send(au_runtime_t *rt, obuf_t *wire, uint32_t to, uint32_t type, const au_table_t *t,
                uint64_t actor, uint16_t version, uint8_t hold_exp, const void *values,
                void *clear);

/* --- consistency.c: the bound of AU_SSP / AU_BSP ------------------------------------------ */

/* A PL_CLK_* message, a PS_CLK_* message from another node, or a replica gone: the bound
 * may move. */
void clk_on_message(struct placer *p, const au_msg_t *m);
void clk_update(struct placer *p);

#endif
