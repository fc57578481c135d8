/* placement.h — the placer actor's state, shared by placement.c (relocation) and
 * replica.c (replication). One placer per node owns all of it: no locks.
 */
#ifndef AUGUR_ACTORS_PLACEMENT_H
#define AUGUR_ACTORS_PLACEMENT_H

#include "actors/ps.h"
#include "runtime/u64map.h"

/* A message waiting for an actor to arrive or to finish leaving. */
typedef struct held {
  struct held *next;
  uint32_t type, from_node, len;
  au_port_t from_port;
  uint8_t data[];
} held_t;

/* An actor this placer is busy with. */
typedef struct rec {
  au_table_t *t;
  uint64_t actor;
  int requested;       /* a move or a replica here is under way */
  int handing_off;     /* leaving: waiting for the grace period */
  int to;              /* where it goes */
  uint64_t arrived_ns; /* when it last arrived (HOLD_NS) */
  uint64_t *snap;      /* workers' and servers' epochs when the hand-off began */
  int nwaiters, capwaiters;
  int *waiters; /* local workers that want it */
  held_t *held, **held_tail;
  /* replication (replica.c) */
  void *base;        /* a replica: the owner's values as last synced; the owner: its
                        values as last sent to the replicas */
  uint64_t replicas; /* the owner: nodes holding a replica (bit r = node r) */
  struct rec *next_replica, *next_owned; /* lists the tick walks */
  /* intents (intent.c) */
  uint32_t hits;           /* this node's intents naming it (AU_PLACE_HOT) */
  uint8_t dropping_here;   /* this node's replica leaves after a grace period */
  uint8_t listed;          /* on the placer's `claimed` list */
  uint64_t last_intent_ns; /* this node's latest intent naming it */
  float gap_ns;            /* the usual gap between those intents (intent.c) */
  uint64_t told_until;     /* end of the claim its owner has heard of from this node */
  uint64_t last_end_ns;    /* end of the latest intent naming it (estimated time) */
  uint64_t end_clock;      /* ... its end clock, of worker end_worker */
  int end_worker;
  float tick_ns;                /* that worker's clock speed then */
  float idle_ticks;             /* the usual gap in its clock between two uses (intent.c) */
  uint64_t due_from, due_until; /* a claim to send once due_from is near (0: none) */
  /* the owner: time in this period of use with one claimant and with several, since
   * decide() last looked (at seen_ns); shared: the last period had more of several */
  uint64_t alone_ns, together_ns, seen_ns;
  uint8_t shared;
  /* when the last period ended, the pauses between periods (a running estimate), and
   * until when the replicas of a shared actor with such a rhythm stay through one */
  uint64_t period_end_ns, pause_ns, keep_until;
  uint64_t asked_ns; /* when a claim that may bring it here went out */
  claim_t *claims;   /* the owner: the nodes' claims */
  int nclaims, capclaims;
  uint64_t dropping; /* the owner: replicas told to go and not yet gone (bits) */
  struct rec *next_claimed;
} rec_t;

struct placer {
  au_node_t *node;
  au_actor_t *actor;
  u64map_t recs;  /* (table, actor) -> rec_t */
  obuf_t scratch; /* for pushes it applies itself */
  int timer_armed;
  atomic_ullong moves_in, moves_out, forwards;
  /* replication */
  rec_t *replicas, *owned; /* replicas held here; owned actors that have replicas */
  atomic_int sync_armed;   /* the sync timer runs (read by the servers) */
  atomic_int busy;         /* sent syncs in the last tick: the node is not idle */
  atomic_long pending;     /* held messages, hand-offs and replica drops under way: work
                              in no mailbox, so the node is not idle while > 0 (messages
                              in flight are counted by the runtime) */
  atomic_int touched;      /* a replicated actor owned here changed since the last tick */
  atomic_ullong syncs;
  /* intents (intent.c) */
  rec_t *claimed;       /* actors with claims, claims due, or replicas to watch */
  action_latency_t lat; /* claim sent -> actor or replica here */
  uint64_t intent_keys; /* since the hot thresholds were last computed */
  atomic_ullong claims_sent, releases, replicas_made, replicas_dropped;
  atomic_llong replicas_held;
};

enum { PL_GRACE = 0x50534c01, PL_TICK, PL_SYNC, PL_DROP_GRACE };

rec_t *rec_get(struct placer *p, au_table_t *t, uint64_t actor);

static inline param_actor_t *pa_of(const rec_t *r)
{
  return &r->t->actors[r->actor];
}
/* Work the placer has taken on (+1) or finished (-1); the node's idleness follows. */
void placer_pending(struct placer *p, long d);
/* Tells the waiting local workers that the actor is here. */
void notify_waiters(struct placer *p, rec_t *r);
/* Adds a local worker to those waiting for the actor (once). 0 or AU_ENOMEM. */
int add_waiter(rec_t *r, int worker);

/* Starts handing an owned actor off to node `to` (placement.c). */
void placement_hand_off(struct placer *p, rec_t *r, int to);
/* Takes a snapshot of the local workers' and servers' epochs into r->snap and sends the
 * placer `kind` (PL_GRACE...) to look at it. 0 or AU_ENOMEM. */
int placement_grace_begin(struct placer *p, rec_t *r, uint32_t kind);
/* Every worker and server that was in a message at the snapshot has left it. */
int placement_grace_over(struct placer *p, rec_t *r);
/* A PL_GRACE-kind message: the actor's record if its grace period is over, else NULL
 * (and, while it lasts, the message goes round again, after the others). */
rec_t *placement_grace_poll(struct placer *p, const au_msg_t *m);
/* Keeps a message for an actor that is handing off: ship() sends it on to the new owner
 * after the values (a claim, PS_CLAIM, as it is). */
void placement_hold(struct placer *p, rec_t *r, uint32_t type, const void *data, uint32_t len);
/* The owner if it is here, else where a message for it goes next. */
int placement_next_hop(const au_node_t *n, const rec_t *r);
uint64_t placement_rec_key(const rec_t *r);

/* intent.c */
/* PS_INTENT, PS_CLAIM, PS_REP_GONE, PL_DROP_GRACE */
void intent_handle(struct placer *p, const au_msg_t *m);

/* The replica tick: sends the claims that came due, decides again for claimed actors. */
void intent_tick(struct placer *p);
/* An actor or a replica this node asked for by a claim has arrived. */
void intent_arrived(struct placer *p, rec_t *r);
/* The owner was told to drop its replica on this node (PS_REP_DROP). */
void intent_drop_here(struct placer *p, const au_msg_t *m);
void intent_free(rec_t *r);

/* replica.c */
/* Starts the sync tick if it is not running. */
void replica_arm(struct placer *p);
/* The owner sends node `to` a replica. 0 or an AU_* error. */
int replica_give(struct placer *p, rec_t *r, uint32_t to);
/* Takes a replica off the list the tick walks (it is leaving). */
void replica_unlist(struct placer *p, rec_t *r);
/* The owner's replica on `node` is gone: forget it, and the base once none is left. */
void replica_gone(struct placer *p, rec_t *r, int node);
/* out = a - b, value by value; whether anything differs. */
int replica_diff(const au_table_t *t, const uint8_t *a, const uint8_t *b, uint8_t *out);
/* A worker wants a replica of the actor here. */
void replica_want(struct placer *p, rec_t *r);
/* PS_REP_REQ, PS_REP_DATA, PS_SYNC, PS_FRESH, PL_SYNC */
void replica_handle(struct placer *p, const au_msg_t *m);
void replica_free(rec_t *r);

#endif
