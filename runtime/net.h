/* net.h — the cluster transport as the rest of the runtime sees it: a full TCP mesh
 * between the nodes of a cluster, run on the runtime's I/O thread (libuv), built by
 * au_runtime_join (cluster.c). Its modules (conn, member, term, data) are below cluster.c
 * and above the I/O thread; runtime.c calls these three, route.c the data plane (data.h).
 *
 * The invariant: frames between two nodes travel on exactly one connection, written
 * by the I/O thread in the order senders queued them, so messages from one actor to
 * another arrive in the order they were sent; and a node leaves only after every peer
 * said BYE, so nothing in flight is lost by a clean shutdown.
 */
#ifndef AUGUR_RUNTIME_NET_H
#define AUGUR_RUNTIME_NET_H

#include "augur.h"

typedef struct net net_t;

/* Main thread: says BYE to every peer, waits (bounded) for theirs. */
void net_leave(au_runtime_t *rt);
/* Once the I/O thread has stopped: frees the network. */
void net_free(au_runtime_t *rt);
/* Any thread: 0 while the cluster is whole (or there is none), else why it broke. */
int net_error(au_runtime_t *rt);

#endif
