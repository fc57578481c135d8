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
  atomic_long pending;     /* held messages, hand-offs under way, forwards on their way
                              here from the servers: the node is not idle while > 0 */
  atomic_int touched;      /* a replicated actor owned here changed since the last tick */
  atomic_ullong syncs;
};

enum { PL_GRACE = 0x50534c01, PL_TICK, PL_SYNC };

rec_t *rec_get(struct placer *p, au_table_t *t, uint64_t actor);
/* Work the placer has taken on (+1) or finished (-1); the node's idleness follows. */
void placer_pending(struct placer *p, long d);
/* Tells the waiting local workers that the actor is here. */
void notify_waiters(struct placer *p, rec_t *r);
/* Adds a local worker to those waiting for the actor (once). 0 or AU_ENOMEM. */
int add_waiter(rec_t *r, int worker);

/* replica.c */
/* A worker wants a replica of the actor here. */
void replica_want(struct placer *p, rec_t *r);
/* PS_REP_REQ, PS_REP_DATA, PS_SYNC, PS_FRESH, PL_SYNC */
void replica_handle(struct placer *p, const au_msg_t *m);
void replica_free(rec_t *r);

#endif
