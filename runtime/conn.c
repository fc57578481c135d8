/* conn.c — connections of the cluster mesh on the I/O thread: dialing and accepting,
 * the handshake, reading and decoding frames, and writing queued frames with one write
 * per connection per loop iteration. What a connection brings after its handshake goes
 * to the handlers its owner registered (conn.h): the data plane (data.c), membership
 * (member.c) and termination (term.c) sit above this file, never below it.
 *
 * The invariant: each connection has exactly one writer (the I/O thread) and frames are
 * appended to its queue, stamped with consecutive sequence numbers, in the order their
 * senders posted them; so per-sender FIFO holds end to end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/addr.h"
#include "runtime/cluster.h"
#include "runtime/conn.h"
#include "runtime/rt.h"

#define MAX_WRITE_FRAMES 1024 /* IOV_MAX on Linux */

typedef struct write_req {
  uv_write_t req;
  conn_t *c;
  au_msg_t *msgs; /* the frames being written, chained through au__next */
  size_t bytes;   /* counted against the peer's queue */
  unsigned n;
  uv_buf_t bufs[MAX_WRITE_FRAMES];
} write_req_t;

static void conn_send_raw(conn_t *c, const uint8_t *bytes, size_t n);
static int conn_handshake_begin(conn_t *c, uint8_t *out, size_t cap);
static int conn_handshake_frame(conn_t *c, const wire_hdr_t *h, const uint8_t *payload,
                                size_t plen);

static const uint8_t *known_types(void)
{
  static uint8_t mask[32];
  static const int types[] = {FT_HELLO, FT_AUTH, FT_CTRL, FT_DATA, FT_HEARTBEAT, FT_BYE};
  if (!mask[0])
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
      mask[types[i] / 8] |= (uint8_t)(1u << (types[i] % 8));
  return mask;
}

/* --- frames out ------------------------------------------------------------------- */

au_msg_t *frame_alloc(au_runtime_t *rt, pool_cache_t *cache, size_t len)
{
  au_msg_t *m = pool_alloc(&rt->pool, cache, FRAME_RESERVE + len);
  if (!m) return NULL;
  frame_meta_t *fm = frame_meta(m);
  memset(fm, 0, sizeof(*fm));
  fm->len = (uint32_t)len;
  return m;
}

static void queue_append(conn_t *c, au_msg_t *m)
{
  m->au__next = NULL;
  if (c->q_tail)
    c->q_tail->au__next = m;
  else
    c->q_head = m;
  c->q_tail = m;
  c->q_n++;
}

/* I/O thread: stamps the frame with the connection's next sequence number, writes its
 * header just in front of the payload, and queues it. */
void conn_queue(conn_t *c, au_msg_t *m)
{
  frame_meta_t *fm = frame_meta(m);
  wire_hdr_t h = {.type = fm->ftype,
                  .src = (uint32_t)c->net->rank,
                  .dst = fm->port,
                  .seq = c->tx_seq++,
                  .extra = {fm->extra[0], fm->extra[1], fm->extra[2], fm->extra[3]},
                  .nextra = fm->nextra};
  uint8_t hdr[WIRE_HEADER_MAX];
  int n = wire_put_header(hdr, sizeof(hdr), &h, fm->len);
  /* n > 0 always: every field fits by construction */
  fm->hdr_len = (uint32_t)n;
  memcpy(frame_payload(m) - n, hdr, (size_t)n);
  queue_append(c, m);
}

void conn_queue_ctrl(conn_t *c, int ftype, const uint64_t *extra, int nextra, const void *data,
                     size_t len)
{
  net_t *net = c->net;
  au_msg_t *m = frame_alloc(net->rt, net->cache, len);
  if (!m) {
    net->handlers->lost(net, c->peer, "out of memory queueing a control frame");
    return;
  }
  frame_meta_t *fm = frame_meta(m);
  fm->ftype = (uint8_t)ftype;
  fm->nextra = (uint8_t)nextra;
  for (int i = 0; i < nextra; i++) fm->extra[i] = extra[i];
  if (len) memcpy(frame_payload(m), data, len);
  /* control frames are not counted against the peer's queue: they are few and tiny */
  conn_queue(c, m);
  conn_write(c);
}

void conn_ctrl(net_t *net, int to, int kind, const uint64_t *extra, int nextra, const void *data,
               size_t len)
{
  conn_t *c = net->conns[to];
  if (!c) return;
  uint64_t x[4] = {(uint64_t)kind, 0, 0, 0};
  for (int i = 0; i < nextra && i < 3; i++) x[i + 1] = extra[i];
  conn_queue_ctrl(c, FT_CTRL, x, nextra + 1, data, len);
}

static void write_done(uv_write_t *req, int status);
static void conn_free_msgs(net_t *net, au_msg_t *m);

void conn_write(conn_t *c)
{
  if (c->writing || !c->q_head || c->state == C_CLOSING) return;
  write_req_t *w = malloc(sizeof(*w));
  if (!w) {
    conn_fail(c, "out of memory writing");
    return;
  }
  w->c = c;
  w->msgs = c->q_head;
  w->n = 0;
  w->bytes = 0;
  au_msg_t *m = c->q_head, *last = NULL;
  while (m && w->n < MAX_WRITE_FRAMES) {
    frame_meta_t *fm = frame_meta(m);
    w->bufs[w->n++] = uv_buf_init((char *)frame_payload(m) - fm->hdr_len, fm->hdr_len + fm->len);
    if (fm->counted) w->bytes += fm->len;
    last = m;
    m = m->au__next;
  }
  last->au__next = NULL;
  c->q_head = m;
  if (!m) c->q_tail = NULL;
  c->q_n -= w->n;
  c->writing = 1;
  c->last_tx = au_now_ns();
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->n, write_done);
  if (rc != 0) {
    c->writing = 0;
    conn_free_msgs(c->net, w->msgs);
    free(w);
    conn_fail(c, uv_strerror(rc));
  }
}

static void write_done(uv_write_t *req, int status)
{
  write_req_t *w = (write_req_t *)req;
  conn_t *c = w->c;
  net_t *net = c->net;
  conn_free_msgs(net, w->msgs);
  if (w->bytes && c->peer >= 0) net->handlers->written(net, c->peer, w->bytes);
  free(w);
  c->writing = 0;
  if (status < 0) {
    if (status != UV_ECANCELED) conn_fail(c, uv_strerror(status));
    return;
  }
  if (c->closing_after_write && !c->q_head) {
    conn_close(c);
    return;
  }
  conn_write(c);
}

static void conn_free_msgs(net_t *net, au_msg_t *m)
{
  while (m) {
    au_msg_t *next = m->au__next;
    pool_free(&net->rt->pool, net->cache, m);
    m = next;
  }
}

void conn_flush_all(net_t *net)
{
  for (int i = 0; i < net->nodes; i++)
    if (net->conns[i]) conn_write(net->conns[i]);
}

/* --- frames in -------------------------------------------------------------------- */

static int on_frame(void *arg, const wire_hdr_t *h, const uint8_t *payload, size_t plen)
{
  conn_t *c = arg;
  net_t *net = c->net;
  if (c->state == C_HANDSHAKE) return conn_handshake_frame(c, h, payload, plen);
  if (h->src != (uint32_t)c->peer) {
    conn_fail(c, "frame names another source rank than the handshake did");
    return -1;
  }
  switch (h->type) {
  case FT_DATA:
  case FT_CTRL:
  case FT_BYE:
    net->handlers->frame(net, c, h, payload, plen);
    break;
  case FT_HEARTBEAT:
    break;
  default:
    conn_fail(c, "handshake frame after the handshake");
    return -1;
  }
  return c->state == C_CLOSING ? -1 : 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)suggested;
  conn_t *c = h->data;
  *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  conn_t *c = s->data;
  if (nread == 0) return;
  if (nread < 0) {
    char why[96];
    if (nread == UV_EOF && c->dec.len)
      snprintf(why, sizeof(why), "connection closed in the middle of a frame (%zu bytes of it)",
               c->dec.len);
    else
      snprintf(why, sizeof(why), "%s",
               nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
    conn_fail(c, why);
    return;
  }
  c->last_rx = au_now_ns();
  char why[160];
  int rc = wire_decoder_feed(&c->dec, (const uint8_t *)buf->base, (size_t)nread, on_frame, c, why,
                             sizeof(why));
  net_t *net = c->net;
  net->handlers->read_done(net, c);
  if (rc < 0 && c->state != C_CLOSING) conn_fail(c, why);
}

/* --- connection lifecycle ----------------------------------------------------------- */

static conn_t *conn_new(net_t *net, int outgoing, int expect_peer)
{
  conn_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->net = net;
  c->peer = -1;
  c->outgoing = outgoing;
  c->expect = expect_peer;
  c->state = C_HANDSHAKE;
  c->tx_seq = 0;
  if (wire_decoder_init(&c->dec, WIRE_MAX_FRAME, known_types(), 0) != 0) {
    free(c);
    return NULL;
  }
  uv_tcp_init(&net->rt->io.loop, &c->tcp);
  c->tcp.data = c;
  uv_tcp_nodelay(&c->tcp, 1);
  c->last_rx = c->last_tx = au_now_ns();
  c->next_all = net->all;
  net->all = c;
  return c;
}

static void conn_closed(uv_handle_t *h)
{
  conn_t *c = h->data;
  net_t *net = c->net;
  conn_t **pp = &net->all;
  while (*pp && *pp != c) pp = &(*pp)->next_all;
  if (*pp) *pp = c->next_all;
  conn_free_msgs(net, c->q_head);
  wire_decoder_free(&c->dec);
  free(c);
  net->handlers->closed(net);
}

void conn_close(conn_t *c)
{
  if (c->state == C_CLOSING) return;
  net_t *net = c->net;
  if (c->peer >= 0 && net->conns[c->peer] == c) net->conns[c->peer] = NULL;
  c->state = C_CLOSING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

void conn_fail(conn_t *c, const char *why)
{
  if (c->state == C_CLOSING) return;
  net_t *net = c->net;
  int peer = c->peer, was_up = c->state == C_UP;
  conn_close(c);
  if (was_up && !c->bye_rx) {
    char reason[256];
    snprintf(reason, sizeof(reason), "%s (%s)", why, c->name);
    net->handlers->lost(net, peer, reason);
  } else if (c->outgoing && !was_up) {
    net->handlers->dial_failed(net, c->expect, why);
  } else if (!was_up) {
    net_log(net, AU_LOG_WARN, "closed connection from %s: %s", c->name, why);
  }
}

static void conn_set_name(conn_t *c)
{
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char host[46] = "?"; /* INET6_ADDRSTRLEN: with ":65535" it fits c->name */
  uint16_t port = 0;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof(host));
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof(host));
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
  }
  snprintf(c->name, sizeof(c->name), "%s:%u", host, (unsigned)port);
}

static void conn_start(conn_t *c)
{
  conn_set_name(c);

  uint8_t buf[WIRE_HEADER_MAX + 256];
  int n = conn_handshake_begin(c, buf, sizeof(buf));
  if (n < 0) {
    conn_fail(c, "could not build the handshake");
    return;
  }
  conn_send_raw(c, buf, (size_t)n);
  uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/* Handshake bytes are written as a frame of their own, outside the sequence. */
static void conn_send_raw(conn_t *c, const uint8_t *bytes, size_t n)
{
  au_msg_t *m = frame_alloc(c->net->rt, c->net->cache, n);
  if (!m) {
    conn_fail(c, "out of memory");
    return;
  }
  frame_meta_t *fm = frame_meta(m);
  /* raw: a whole frame already, so no header of ours in front of it */
  memcpy(frame_payload(m), bytes, n);
  fm->hdr_len = 0;
  queue_append(c, m);
  conn_write(c);
}

static void on_accept(uv_stream_t *server, int status)
{
  net_t *net = server->data;
  if (status < 0) {
    net_log(net, AU_LOG_WARN, "accept failed: %s", uv_strerror(status));
    return;
  }
  conn_t *c = conn_new(net, 0, -1);
  if (!c) {
    net_log(net, AU_LOG_ERROR, "out of memory accepting a connection");
    return;
  }
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  conn_start(c);
}

static void on_connect(uv_connect_t *req, int status)
{
  conn_t *c = req->data;
  free(req);
  if (status < 0) {
    conn_fail(c, uv_strerror(status));
    return;
  }
  conn_start(c);
}

int conn_dial(net_t *net, int peer, const struct sockaddr *addr)
{
  conn_t *c = conn_new(net, 1, peer);
  if (!c) return AU_ENOMEM;
  snprintf(c->name, sizeof(c->name), "node %d", peer);
  uv_connect_t *req = malloc(sizeof(*req));
  if (!req) {
    conn_close(c);
    return AU_ENOMEM;
  }
  req->data = c;
  int rc = uv_tcp_connect(req, &c->tcp, addr, on_connect);
  if (rc != 0) {
    free(req);
    conn_fail(c, uv_strerror(rc));
  }
  return 0;
}

/* A socket bound to and listening on the first port of lo..hi that it can take, or -1.
 * Bound and listening before the next port is tried: a port probed free and bound after
 * was taken meanwhile by another node on this host with the same range (1 run in 6 of 8
 * local nodes) */
static int listen_range(const struct sockaddr_storage *ss, int lo, int hi)
{
  struct sockaddr_storage a = *ss;
  for (int p = lo; p <= hi; p++) {
    int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1; /* as libuv's bind: a port in TIME_WAIT is free */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    addr_set_port(&a, p);
    if (bind(fd, (const struct sockaddr *)&a, addr_len(&a)) == 0 && listen(fd, 128) == 0) return fd;
    close(fd);
  }
  return -1;
}

int conn_listen(net_t *net, const struct sockaddr_storage *ss, int lo, int hi, char *err,
                size_t errlen)
{
  int fd = -1;
  if (lo > 0 && (fd = listen_range(ss, lo, hi)) < 0) {
    struct sockaddr_storage a = *ss;
    char name[80];
    addr_set_port(&a, 0);
    addr_name(&a, name, sizeof(name));
    snprintf(err, errlen, "AU_PORTS=%d-%d: no free port on %s", lo, hi, name);
    return AU_EINVAL;
  }
  uv_tcp_init(&net->rt->io.loop, &net->listener);
  net->listener.data = net;
  net->listening = 1;
  int rc = fd >= 0 ? uv_tcp_open(&net->listener, fd)
                   : uv_tcp_bind(&net->listener, (const struct sockaddr *)ss, 0);
  if (rc != 0 && fd >= 0) close(fd); /* (not the handle's yet) */
  if (rc == 0) rc = uv_listen((uv_stream_t *)&net->listener, 128, on_accept);
  if (rc != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", net->listen_name, uv_strerror(rc));
    return AU_EPROTO;
  }
  struct sockaddr_storage at;
  int len = sizeof(at);
  uv_tcp_getsockname(&net->listener, (struct sockaddr *)&at, &len);
  addr_name(&at, net->listen_name, sizeof(net->listen_name)); /* what the peers dial */
  return 0;
}

void conn_close_all(net_t *net)
{
  for (conn_t *c = net->all; c; c = c->next_all)
    if (c->state != C_CLOSING) conn_close(c);
  if (net->listening && !uv_is_closing((uv_handle_t *)&net->listener))
    uv_close((uv_handle_t *)&net->listener, NULL);
}

/* --- the handshake ---------------------------------------------------------------- */

static int conn_handshake_begin(conn_t *c, uint8_t *out, size_t cap)
{
  net_t *net = c->net;
  const char *secret = net->opts.secret;
  if (hs_init(&c->hs, (uint32_t)net->rank, (uint32_t)net->nodes, net->opts.cluster, secret,
              strlen(secret), c->expect) != 0)
    return -1;
  return hs_hello_frame(&c->hs, out, cap);
}

static int conn_handshake_frame(conn_t *c, const wire_hdr_t *h, const uint8_t *payload, size_t plen)
{
  net_t *net = c->net;
  uint8_t out[HS_FRAME_MAX];
  size_t out_len = 0;
  char reason[HS_REASON_MAX];
  int rc =
      hs_on_frame(&c->hs, h, payload, plen, out, sizeof(out), &out_len, reason, sizeof(reason));
  if (out_len) conn_send_raw(c, out, out_len);
  if (rc == HS_MORE) return 0;
  if (rc == HS_FAIL) {
    char why[HS_REASON_MAX + 32];
    snprintf(why, sizeof(why), "refused: %s", reason);
    if (!c->outgoing && c->hs.peer_rank < (uint32_t)net->nodes && net->handlers->refused)
      net->handlers->refused(net, (int)c->hs.peer_rank, reason);
    conn_fail(c, why);
    return -1;
  }
  int peer = (int)c->hs.peer_rank;
  c->tx_seq = c->hs.tx_seq;
  hs_clear(&c->hs);
  /* who may connect to whom: rank r dials every rank below it, so an accepted connection
   * must come from a higher rank, once */
  if (!c->outgoing && (peer <= net->rank || net->conns[peer])) {
    char why[96];
    snprintf(why, sizeof(why), "refused: node %d is already connected or must be dialled", peer);
    conn_fail(c, why);
    return -1;
  }
  c->peer = peer;
  c->state = C_UP;
  snprintf(c->name + strlen(c->name), sizeof(c->name) - strlen(c->name), " (node %d)", peer);
  net->conns[peer] = c;
  net->handlers->up(net, c);
  return 0;
}
