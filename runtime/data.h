/* data.h — the data plane (data.c): data frames to ports on other nodes, out and in, and
 * the per-peer queue accounting behind au_link_wait's backpressure; netdelay.c's added
 * link delay (testing only) sits on its way out.
 *
 * The invariant: a data frame counts in its peer's queue (out_bytes) from the moment
 * data_send_finish queues it until it has been written, so a sender asking au_link_wait
 * sees every byte it queued and not yet written; every waiter is woken once the queue
 * drains below a quarter of the limit.
 */
#ifndef AUGUR_RUNTIME_DATA_H
#define AUGUR_RUNTIME_DATA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "augur.h"
#include "runtime/conn.h"
#include "runtime/ext.h"

/* Default per-peer outgoing queue limit (bytes): above it senders are asked to wait;
 * they are woken below a quarter of it (au_cluster_opts_t.queue_bytes). 4 MiB, with the
 * kernel's socket buffers behind it, keeps a link busy; 16 MiB (until 2026-12-01) only
 * kept more frames in flight than the caches hold: augur-bench-net's 4 KiB phase ran at
 * 0.78 of raw TCP with 16 MiB and 0.87 with 4 MiB (medians of five alternated runs). */
#define NET_OUT_HIGH (4u << 20)

typedef struct waiter {
  au_actor_t *who;
  uint32_t type;
  struct waiter *next;
} waiter_t;

typedef struct netdelay netdelay_t;

typedef struct data_plane {
  /* bytes queued per peer (any thread adds, the I/O thread subtracts) */
  atomic_size_t *out_bytes;
  pthread_mutex_t wait_mu;  /* guards waiters and the low-water check */
  waiter_t **waiters;       /* by peer */
  atomic_ullong sent;       /* data frames this node has queued, ever */
  atomic_ullong sent_bytes; /* their payload bytes */
  /* the same by message type: slot type % AU__BYTES_TYPES counts the first type that came
   * to it (type_of), any other type of that slot goes to sent_other */
  atomic_ullong sent_by[AU__BYTES_TYPES];
  atomic_uint type_of[AU__BYTES_TYPES]; /* 0: no type yet */
  atomic_ullong sent_other;
  netdelay_t *delay; /* AU_NET_DELAY_US, or NULL */
  /* I/O thread: data frames of the current read for one actor, delivered together at the
   * end of the read or when a frame for another actor comes (data_flush) */
  au_actor_t *run_to;
  au_msg_t *run_first, *run_last;
} data_t;

/* Main thread, on joining: the queues, and the delay if AU_NET_DELAY_US asks for one
 * (AU_EINVAL or AU_ENOMEM with a message in err). data_free frees what is left. */
int data_init(net_t *net, char *err, size_t errlen);
void data_free(net_t *net);
/* Main thread, leaving: frames still in the delay go out now (before BYE). */
void data_stop_delay(net_t *net);

/* Any thread: a frame of len payload bytes for (node, port), to fill at data_payload and
 * send with data_send_finish, which never blocks and never drops (au_link_wait is the
 * backpressure). NULL with *rc = AU_EINVAL, AU_ENODE or AU_ENOMEM. */
au_msg_t *data_send_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type,
                          au_port_t from_port, size_t len, int *rc);
void data_send_finish(au_runtime_t *rt, au_msg_t *m);
/* Where the payload of a frame from data_send_start goes (16-byte aligned). */
void *data_payload(au_msg_t *m);

/* I/O thread: NET_CMD_SEND (takes m); an incoming FT_DATA frame; counted bytes written
 * (conn_handlers_t.written). */
void data_on_send(net_t *net, au_msg_t *m);
void data_deliver(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n);
void data_written(net_t *net, int peer, size_t bytes);
/* I/O thread, at the end of a read (conn_handlers_t.read_done): delivers what
 * data_deliver gathered. */
void data_flush(net_t *net, conn_t *c);

/* netdelay.c: an added one-way delay on data frames (AU_NET_DELAY_US, testing only) */
int netdelay_start(au_runtime_t *rt, uint64_t delay_ns, uint64_t jitter_ns, netdelay_t **out);
/* I/O thread (NET_CMD_START): its timer onto the loop. */
void netdelay_attach(netdelay_t *d, uv_loop_t *loop);
/* Any thread: m (a NET_CMD_SEND) onto its connection once the delay has passed. 0, or
 * AU_ENOMEM or AU_EINVAL (after netdelay_stop): then the caller posts m itself. */
int netdelay_push(netdelay_t *d, au_msg_t *m);
/* Main thread, leaving: what waits goes out at once (NET_CMD_DELAY_STOP, before any
 * command posted after this), and frames pushed later are refused. */
void netdelay_stop(netdelay_t *d);
/* I/O thread: NET_CMD_DELAY_STOP. */
void netdelay_on_stop(netdelay_t *d);
/* After the I/O thread has ended. */
void netdelay_free(netdelay_t *d);

#endif
