/* idle.h — whether a node has work outside any mailbox, for the end-of-run detection
 * (net_set_idle): workers in their run, held messages, hand-offs and replica drops under
 * way, replica syncs sent in the last tick, replicated values changed since it. Workers,
 * servers and the placer's modules report here; nothing here calls them.
 *
 * The invariant: the node says "idle" only when no worker is active and none of the
 * counts below is non-zero; each report that may end that state says "busy" first.
 */
#ifndef AUGUR_ACTORS_IDLE_H
#define AUGUR_ACTORS_IDLE_H

#include <stdatomic.h>

typedef struct au_node au_node_t;

typedef struct node_idle {
  atomic_long pending; /* held messages, hand-offs and replica drops under way: work in no
                          mailbox (messages in flight are counted by the runtime) */
  atomic_int busy;     /* the placer sent syncs in its last tick */
  atomic_int touched;  /* a replicated actor owned here changed since the last tick */
  atomic_int ticking;  /* the placer's tick runs (someone will ship what is touched) */
} node_idle_t;

/* Work taken on (+1) or finished (-1). */
void idle_pending(au_node_t *n, long d);
/* A server, a worker or the placer changed values that replicas must hear of. */
void idle_touched(au_node_t *n);
/* The tick ran: whether it sent anything, and takes the touched mark for the next. */
void idle_tick(au_node_t *n, int sent);
/* The placer has work to finish: the node is not idle. */
int idle_busy(const au_node_t *n);
/* A worker's run is over (paused, done or failed): the node may be idle now. */
void idle_worker_left(au_node_t *n);

#endif
