/* conn.h — connections of the cluster mesh (conn.c), on the I/O thread: dialing and
 * accepting, the handshake, reading and decoding frames, and each connection's queue of
 * frames to write, written with one write per connection per loop iteration. What a
 * connection brings goes up through the handlers its owner registered (conn_handlers_t),
 * so conn.c calls nothing of the network above it.
 *
 * The invariant: each connection has exactly one writer (the I/O thread) and frames are
 * appended to its queue, stamped with consecutive sequence numbers, in the order they were
 * queued; so per-sender FIFO holds end to end.
 */
#ifndef AUGUR_RUNTIME_CONN_H
#define AUGUR_RUNTIME_CONN_H

#include <stdint.h>
#include <uv.h>

#include "augur.h"
#include "runtime/handshake.h"
#include "runtime/pool.h"
#include "runtime/wire.h"

typedef struct net net_t;
typedef struct conn conn_t;

/* Frame types on the wire (runtime/wire.h carries them). */
enum {
  FT_HELLO = 1,     /* handshake (handshake.c) */
  FT_AUTH = 2,      /* handshake (handshake.c) */
  FT_CTRL = 3,      /* control plane: extra[0] = control kind */
  FT_DATA = 4,      /* to a port: extra[0] = message type, extra[1] = source port */
  FT_HEARTBEAT = 5, /* nothing to say, still alive */
  FT_BYE = 6,       /* this node sends nothing more */
};

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
  uint8_t counted; /* its length is counted in the peer's queue (data.c) */
  uint64_t extra[4];
} frame_meta_t;

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

/* What the owner of the connections does with what they bring; on the I/O thread. */
typedef struct conn_handlers {
  /* the handshake is done: c->peer is known, c is net->conns[c->peer] */
  void (*up)(net_t *net, conn_t *c);
  /* a frame of type FT_DATA, FT_CTRL or FT_BYE after the handshake, from c->peer (the
   * source rank is checked, heartbeats are consumed here) */
  void (*frame)(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n);
  /* every frame of one read has been handed to `frame` (also when c failed meanwhile) */
  void (*read_done)(net_t *net, conn_t *c);
  /* frames counted against peer's queue (frame_meta.counted) have been written */
  void (*written)(net_t *net, int peer, size_t bytes);
  /* a connection that was up failed before its peer said BYE */
  void (*lost)(net_t *net, int peer, const char *why);
  /* a connection this node dialed to `peer` failed before it was up */
  void (*dial_failed)(net_t *net, int peer, const char *why);
  /* a connection from node `peer` (as its HELLO said) was refused in the handshake */
  void (*refused)(net_t *net, int peer, const char *why);
  /* a connection is gone (closed and freed) */
  void (*closed)(net_t *net);
} conn_handlers_t;

/* A pooled frame with len payload bytes, its meta zeroed but for len. */
au_msg_t *frame_alloc(au_runtime_t *rt, pool_cache_t *cache, size_t len);
/* Stamps m with the connection's next sequence number, writes its wire header in front of
 * the payload and queues it (c takes m). */
void conn_queue(conn_t *c, au_msg_t *m);
/* Starts a write of the queued frames unless one is in flight. */
void conn_write(conn_t *c);
/* Queues a frame of its own (a control frame, a heartbeat, BYE) and writes. */
void conn_queue_ctrl(conn_t *c, int ftype, const uint64_t *extra, int nextra, const void *data,
                     size_t len);
/* A control frame of `kind` (FT_CTRL, extra[0]) with up to three more extras, to node
 * `to` if it is connected. */
void conn_ctrl(net_t *net, int to, int kind, const uint64_t *extra, int nextra, const void *data,
               size_t len);
void conn_close(conn_t *c);
/* Closes c for `why`: the handlers hear of it (lost, dial_failed) or it is logged. */
void conn_fail(conn_t *c, const char *why);
/* Dials `peer` at addr; the handshake follows. 0 or AU_ENOMEM. */
int conn_dial(net_t *net, int peer, const struct sockaddr *addr);
/* Listens on ss; net->listen_name then says host:port. With lo > 0 on the first port of
 * lo..hi that it can take (AU_PORTS; ss's port is ignored). 0, or AU_EPROTO (AU_EINVAL:
 * no port of the range free) with err. */
int conn_listen(net_t *net, const struct sockaddr_storage *ss, int lo, int hi, char *err,
                size_t errlen);
/* One write per connection with queued frames (after a batch of commands). */
void conn_flush_all(net_t *net);
/* Closes every connection and the listener. */
void conn_close_all(net_t *net);

#endif
