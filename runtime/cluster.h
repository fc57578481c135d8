/* cluster.h — the state of a node's network, shared by its modules: connections and
 * frames (conn.c), membership (member.c), termination and reductions (term.c), the data
 * plane (data.c), and cluster.c, which builds it on joining and wires them together.
 * Each module owns its part of the struct (member_t, term_t, data_t, and the fields
 * marked below); everything belongs to the I/O thread unless a field says otherwise.
 */
#ifndef AUGUR_RUNTIME_CLUSTER_H
#define AUGUR_RUNTIME_CLUSTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "augur.h"
#include "runtime/conn.h"
#include "runtime/data.h"
#include "runtime/io.h"
#include "runtime/log.h"
#include "runtime/member.h"
#include "runtime/net.h"
#include "runtime/pool.h"
#include "runtime/term.h"

/* The network's commands for the I/O thread (runtime/io.h). */
enum {
  NET_CMD_START = IO_CMD_EXT, /* member.c */
  NET_CMD_SEND,               /* data.c */
  NET_CMD_IDLE,               /* term.c */
  NET_CMD_REDUCE,             /* term.c */
  NET_CMD_LEAVE,              /* member.c */
  NET_CMD_DELAY_STOP,         /* netdelay.c */
};

/* Control kinds (FT_CTRL extra[0]). */
enum {
  CTRL_JOIN = 1, /* rank -> 0: my listen address (payload "host:port"); member.c */
  CTRL_PEERS,    /* 0 -> all: every rank's listen address, '\n'-separated */
  CTRL_READY,    /* rank -> 0: my mesh is complete */
  CTRL_GO,       /* 0 -> all: everyone is ready: the bootstrap barrier is over */
  CTRL_STATUS,   /* rank -> 0: extra = run, round, idle; payload = sent, processed; term.c */
  CTRL_POLL,     /* 0 -> all: extra = run, round: report your status */
  CTRL_RUN_DONE, /* 0 -> all: extra = run: every node idle, nothing in flight */
  CTRL_REDUCE,   /* rank -> 0: extra = seq, n; payload = n doubles */
  CTRL_REDUCED,  /* 0 -> all: extra = seq, n; payload = n sums */
};

struct net {
  au_runtime_t *rt;
  pool_cache_t *cache; /* the I/O thread's pool cache */
  au_cluster_opts_t opts;
  int rank, nodes;
  const conn_handlers_t *handlers; /* cluster.c's */

  /* connections (conn.c) */
  conn_t **conns; /* by rank: the connection that is up */
  conn_t *all;
  uv_tcp_t listener;
  int listening;
  char listen_name[300];

  /* what the main thread waits for (mu/cv; member_wait); written by the I/O thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int error;         /* 0 or AU_E*: the cluster is broken (member_fail) */
  atomic_int broken; /* error != 0, readable without mu (senders check it) */
  char error_msg[320];

  member_t member;
  term_t term;
  data_t data;
};

/* Wakes the main thread's member_wait; with mu held. */
static inline void net_wake_main(net_t *net)
{
  pthread_cond_broadcast(&net->cv);
}

/* A message about this node of the cluster (runtime/log.h), at an AU_LOG_* level. */
#define net_log(net, level, ...) au__log((level), (net)->rank, __VA_ARGS__)

#endif
