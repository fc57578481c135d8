/* net.h — the cluster transport and control plane: a full TCP mesh between the nodes
 * of a cluster, run on the runtime's I/O thread (libuv).
 *
 * The invariant: frames between two nodes travel on exactly one connection, written
 * by the I/O thread in the order senders queued them, so messages from one actor to
 * another arrive in the order they were sent; and a node leaves only after every peer
 * said BYE, so nothing in flight is lost by a clean shutdown.
 */
#ifndef AUGUR_RUNTIME_NET_H
#define AUGUR_RUNTIME_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "augur.h"
#include "runtime/io.h"

typedef struct net net_t;
typedef struct conn conn_t;

/* The network's commands for the I/O thread (runtime/io.h). */
enum {
  NET_CMD_START = IO_CMD_EXT,
  NET_CMD_SEND,
  NET_CMD_IDLE,
  NET_CMD_REDUCE,
  NET_CMD_LEAVE,
};

/* Frame types on the wire (runtime/wire.h carries them). */
enum {
  FT_HELLO = 1,     /* handshake (handshake.c) */
  FT_AUTH = 2,      /* handshake (handshake.c) */
  FT_CTRL = 3,      /* control plane: extra[0] = control kind */
  FT_DATA = 4,      /* to a port: extra[0] = message type, extra[1] = source port */
  FT_HEARTBEAT = 5, /* nothing to say, still alive */
  FT_BYE = 6,       /* this node sends nothing more */
};

/* Control kinds (FT_CTRL extra[0]). */
enum {
  CTRL_JOIN = 1, /* rank -> 0: my listen address (payload "host:port") */
  CTRL_PEERS,    /* 0 -> all: every rank's listen address, '\n'-separated */
  CTRL_READY,    /* rank -> 0: my mesh is complete */
  CTRL_GO,       /* 0 -> all: everyone is ready: the bootstrap barrier is over */
  CTRL_STATUS,   /* rank -> 0: extra = run, round, idle; payload = sent, processed */
  CTRL_POLL,     /* 0 -> all: extra = run, round: report your status */
  CTRL_RUN_DONE, /* 0 -> all: extra = run: every node idle, nothing in flight */
  CTRL_REDUCE,   /* rank -> 0: extra = seq, n; payload = n doubles */
  CTRL_REDUCED,  /* 0 -> all: extra = seq, n; payload = n sums */
};

/* Default per-peer outgoing queue limit (bytes): above it senders are asked to wait;
 * they are woken below a quarter of it (au_cluster_opts_t.queue_bytes). */
#define NET_OUT_HIGH (16u << 20)

/* Main thread: joins the cluster described by o, blocking until every node is
 * connected to every other (a barrier) or an error or timeout. 0, or a negative AU_E*
 * with a message in err. */
int net_join(au_runtime_t *rt, const au_cluster_opts_t *o, char *err, size_t errlen);
/* Main thread: says BYE to every peer, waits (bounded) for theirs, closes. */
void net_leave(au_runtime_t *rt);
void net_free(au_runtime_t *rt);

/* Any thread: queues a message for (node, port). Never drops and never blocks; use
 * net_link_wait for backpressure. 0 or AU_ENOMEM / AU_ENODE. */
int net_send(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, au_port_t from_port,
             const void *data, size_t len);
/* Any thread: net_send in two halves, so that the caller writes the payload into the
 * frame itself (au_send_to_start). NULL with *rc set on
 * error. */
au_msg_t *net_send_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type,
                         au_port_t from_port, size_t len, int *rc);
void net_send_finish(au_runtime_t *rt, au_msg_t *m);
/* Where the payload of a frame from net_send_start goes (16-byte aligned). */
void *net_frame_payload(au_msg_t *m);
/* Any thread: 1 if the queue to node is over the limit, in which case `who` gets a
 * message of `type` once it drains below a quarter of it; 0 if the sender may go on. */
int net_link_wait(au_runtime_t *rt, uint32_t node, au_actor_t *who, uint32_t type);

/* Any thread: 0 while the cluster is whole (or there is none), else why it broke. */
int net_error(au_runtime_t *rt);
/* Main thread, collective: element-wise sum over all nodes, in rank order. */
int net_allreduce(au_runtime_t *rt, double *v, int n);

#endif
