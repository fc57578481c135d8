/* cluster.h — internal state of the cluster transport (net.c: connections and frames)
 * and its control protocol (cluster.c: joining, runs, reductions, leaving). Everything
 * here belongs to the I/O thread unless a field says otherwise.
 */
#ifndef AUGUR_RUNTIME_CLUSTER_H
#define AUGUR_RUNTIME_CLUSTER_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <uv.h>

#include "augur.h"
#include "runtime/handshake.h"
#include "runtime/log.h"
#include "runtime/net.h"
#include "runtime/pool.h"
#include "runtime/wire.h"

/* An outgoing frame is a pooled message: this header, room for the wire header, then
 * the payload; the wire header is written right in front of the payload, so header and
 * payload go out as one buffer. */
typedef struct frame_meta {
  uint32_t len;     /* payload bytes */
  uint32_t hdr_len; /* wire header bytes in front of the payload */
  uint32_t node;    /* destination rank */
  uint16_t port;    /* destination port */
  uint8_t ftype;    /* FT_* */
  uint8_t nextra;
  uint8_t counted; /* its length is counted in the peer's out_bytes */
  uint64_t extra[4];
} frame_meta_t;

/* netdelay.c: an added one-way delay on data frames (AU_NET_DELAY_US, testing only) */
typedef struct netdelay netdelay_t;
int netdelay_start(au_runtime_t *rt, uint64_t delay_ns, netdelay_t **out);
/* Any thread: posts m to the I/O thread once the delay has passed. 0 or AU_ENOMEM. */
int netdelay_push(netdelay_t *d, au_msg_t *m);
/* Posts what is left at once and ends the thread. */
void netdelay_stop(netdelay_t *d);

static inline frame_meta_t *frame_meta(au_msg_t *m)
{
  return (frame_meta_t *)(void *)m->data;
}

/* Room in front of the payload, rounded so that the payload stays 16-byte aligned. */
#define FRAME_RESERVE ((sizeof(frame_meta_t) + WIRE_HEADER_MAX + 15) & ~(size_t)15)

static inline uint8_t *frame_payload(au_msg_t *m)
{
  return m->data + FRAME_RESERVE;
}

enum { C_HANDSHAKE, C_UP, C_CLOSING };

struct conn {
  uv_tcp_t tcp; /* tcp.data = this */
  net_t *net;
  int peer;   /* rank, once the handshake named it; -1 before */
  int expect; /* the rank we dialed, or -1 for an accepted connection */
  int outgoing;
  int state;  /* C_* */
  int bye_rx; /* the peer said BYE: its end of the connection is no loss */
  int closing_after_write;
  int writing; /* a uv_write is in flight */
  hs_t hs;
  wire_decoder_t dec;
  uint64_t tx_seq;
  au_msg_t *q_head, *q_tail; /* frames to write, chained through au__next */
  unsigned q_n;
  uint64_t last_rx, last_tx; /* au_now_ns of the last bytes in / write out */
  char name[64];             /* peer address, for messages */
  conn_t *next_all;          /* every connection of this node */
  char rbuf[256 * 1024];
};

enum { NET_JOINING, NET_UP, NET_LEAVING, NET_LEFT };

typedef struct node_status {
  uint64_t run, round;
  int idle;
  uint64_t sent, processed;
} node_status_t;

typedef struct waiter {
  au_actor_t *who;
  uint32_t type;
  struct waiter *next;
} waiter_t;

struct net {
  au_runtime_t *rt;
  pool_cache_t *cache; /* the I/O thread's pool cache */
  au_cluster_opts_t opts;
  int rank, nodes;
  conn_t **conns; /* by rank: the connection that is up */
  conn_t *all;
  uv_tcp_t listener;
  int listening;
  char listen_name[300];
  uv_timer_t timer; /* heartbeats, dead peers, join deadline, polls */
  int timer_on;
  uint64_t deadline_ns; /* joining must be over by then */

  /* joining (rank 0 collects addresses and readiness; the others learn the peers) */
  char (*addrs)[300];
  int *joined, *ready;
  int njoined, nready, peers_known;
  uint64_t *redial_at; /* by rank: when to dial again after a refused connect, or 0 */

  /* queues: bytes queued per peer (any thread adds, the I/O thread subtracts) */
  atomic_size_t *out_bytes;
  pthread_mutex_t wait_mu; /* guards waiters and the low-water check */
  waiter_t **waiters;
  atomic_ullong sent;       /* data frames this node has queued, ever */
  atomic_ullong sent_bytes; /* their payload bytes */
  netdelay_t *delay;        /* AU_NET_DELAY_US, or NULL */

  /* what the main thread waits for (mu/cv); written by the I/O thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state;         /* NET_* */
  int error;         /* 0 or AU_E*: the cluster is broken */
  atomic_int broken; /* error != 0, readable without mu (senders check it) */
  char error_msg[320];
  uint64_t run;      /* main: the run in progress or last finished */
  uint64_t run_done; /* I/O: the last run rank 0 declared done */
  uint64_t reduce_seq, reduced_seq;
  double *reduced; /* result of reduced_seq */
  int reduced_n;

  atomic_int idle; /* this node's workers are idle in the current run */

  /* rank 0: termination and reductions */
  node_status_t *status;
  uint64_t poll_round;
  int polls_out; /* replies still expected for poll_round */
  uint64_t last_sent, last_processed;
  int last_balanced; /* the previous complete poll was idle and balanced */
  uint64_t acc_seq;
  double *acc; /* contributions of acc_seq, by rank */
  int *acc_have, acc_count, acc_n;
};

/* net.c */
/* A message about this node of the cluster (runtime/log.h), at an AU_LOG_* level. */
#define net_log(net, level, ...) au__log((level), (net)->rank, __VA_ARGS__)
au_msg_t *frame_alloc(au_runtime_t *rt, pool_cache_t *cache, size_t len);
void conn_queue(conn_t *c, au_msg_t *m);
/* Starts a write of the queued frames unless one is in flight. */
void conn_write(conn_t *c);
void conn_queue_ctrl(conn_t *c, int ftype, const uint64_t *extra, int nextra, const void *data,
                     size_t len);
void conn_send_raw(conn_t *c, const uint8_t *bytes, size_t n);
void conn_free_msgs(net_t *net, au_msg_t *m);
void conn_close(conn_t *c);
void conn_fail(conn_t *c, const char *why);
int net_dial(net_t *net, int peer, const struct sockaddr *addr);
int net_listen(net_t *net, const struct sockaddr *addr, char *err, size_t errlen);
/* handshake glue (net.c) */
int conn_handshake_begin(conn_t *c, uint8_t *out, size_t cap);
int conn_handshake_frame(conn_t *c, const wire_hdr_t *h, const uint8_t *payload, size_t plen);

/* What the network adds to the I/O thread (installed by net_join, runtime/io.h):
 * net_handle_cmd (cluster.c) takes the NET_CMD_* commands, net_flush (net.c) writes each
 * connection's queue after a batch, net_close_all (net.c) closes every connection and
 * handle of the network when the thread quits. */
void net_handle_cmd(au_runtime_t *rt, au_msg_t *m);
void net_flush(au_runtime_t *rt);
void net_close_all(au_runtime_t *rt);

/* cluster.c */
void cluster_on_conn_up(net_t *net, conn_t *c);
void cluster_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n);
void cluster_on_bye(net_t *net, conn_t *c);
void cluster_on_closed(net_t *net);
void cluster_on_dial_failed(net_t *net, int peer, const char *why);
/* The cluster is broken: record why, wake the main thread, stop the runtime. */
void net_lost(net_t *net, int peer, const char *why);
void net_unqueue_bytes(net_t *net, int peer, size_t bytes);

#endif
