/* barrier.h — au_worker_barrier across the cluster (barrier.c). worker.c and barrier.c are one
 * unit, the one pair of mutual callers in actors/: a barrier kicks the workers it
 * releases, and workers arrive, leave and fence.
 */
#ifndef AUGUR_ACTORS_BARRIER_H
#define AUGUR_ACTORS_BARRIER_H

#include "actors/ps.h"

#define PS_BARRIER_PORT ((au_port_t)(AU_PORT_RESERVED + 0x2001))

/* The node's barrier actor, before the node joins a cluster; its cluster state after. */
int barrier_start(au_node_t *n);
int barrier_join(au_node_t *n);
void barrier_free(au_node_t *n);
/* A worker finished for good (after the live count went down). */
void barrier_left(au_node_t *n);
/* A run starts (au_node_run): a node without live workers says it is done. */
void barrier_run(au_node_t *n);
/* At the end of the step in which the worker arrived, after its pushes: its fence to the
 * server of every other node it pushes to. */
void barrier_fence(au_worker_t *w);
/* Where a server passes fences on. */
static inline au_actor_t *barrier_actor(const au_node_t *n)
{
  return n->barrier_actor;
}

#endif
