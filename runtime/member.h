/* member.h — membership of the cluster (member.c), on the I/O thread unless said
 * otherwise: the join barrier (JOIN, PEERS, READY, GO), redials, heartbeats and dead
 * peers, leaving (BYE), and the cluster's health (member_fail).
 *
 * The invariant: the barrier ends on a node only once every node is connected to every
 * other, and a node leaves only after every peer said BYE, so a clean shutdown loses
 * nothing in flight.
 */
#ifndef AUGUR_RUNTIME_MEMBER_H
#define AUGUR_RUNTIME_MEMBER_H

#include <stdint.h>
#include <uv.h>

#include "runtime/conn.h"

enum { NET_JOINING, NET_UP, NET_LEAVING, NET_LEFT };

typedef struct member {
  int state;            /* NET_*; written by the I/O thread, under net->mu for the main thread */
  uint64_t deadline_ns; /* joining must be over by then */
  /* joining (rank 0 collects addresses and readiness; the others learn the peers) */
  char (*addrs)[300];
  int *joined, *ready;
  int njoined, nready, peers_known;
  uint64_t *redial_at; /* by rank: when to dial again after a refused connect, or 0 */
  char (*why)[120];    /* by rank: why the last dial failed ("" if none did) */
  uv_timer_t timer;    /* heartbeats, dead peers, join deadline, redials */
  int timer_on;
} member_t;

/* Allocates the per-node arrays (AU_ENOMEM) / frees them. Main thread, on joining. */
int member_init(net_t *net);
void member_free(net_t *net);
/* Main thread: starts joining on the I/O thread and waits until the barrier is over, an
 * error, or the deadline. 0, or the error with a message in err. */
int member_join(net_t *net, char *err, size_t errlen);

/* Main thread: leaves (NET_CMD_LEAVE) and waits, bounded, until every peer said BYE and
 * every connection is closed. */
void member_leave_wait(net_t *net);

/* Commands: NET_CMD_START (listen, dial rank 0, start the timer), NET_CMD_LEAVE (BYE). */
void member_start(net_t *net);
void member_leave(net_t *net);
/* On quitting: closes the timer. */
void member_close(net_t *net);

/* From the connections (conn_handlers_t) and the control frames JOIN..GO. */
void member_on_up(net_t *net, conn_t *c);
void member_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n);
void member_on_bye(net_t *net, conn_t *c);
void member_on_closed(net_t *net);
void member_on_dial_failed(net_t *net, int peer, const char *why);
/* A connection from `peer` was refused here in the handshake: why, for the join timeout. */
void member_on_refused(net_t *net, int peer, const char *why);
/* Node `peer` is gone: the cluster is broken (logged), unless this node is leaving. */
void member_lost(net_t *net, int peer, const char *why);

/* The cluster is broken (or joining failed): records error and msg, wakes the main
 * thread, stops the runtime. With net->mu not held. */
void member_fail(net_t *net, int error, const char *msg);
/* Main thread, with net->mu held: waits on net->cv until done(net, arg) or an error. 0,
 * the error, or AU_ETIMEDOUT when timeout_ms (> 0) passed. */
int member_wait(net_t *net, int (*done)(net_t *, uint64_t), uint64_t arg, int timeout_ms);

#endif
