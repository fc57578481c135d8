/* bench_net.c — augur-bench-net: two nodes on loopback (this process forks the second),
 * augur messages between actors against a plain libuv TCP sender and receiver moving the
 * same bytes in the same run. Prints key=value lines; ratio_vs_raw_tcp is the 4 KiB one.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <augur.h>

#define PORT_RX   1
#define PORT_DONE 2
#define T_DATA    1
#define T_GO      2
#define T_DONE    3
#define T_DRAINED 4
#define REPS      3

typedef struct phase {
  size_t bytes;
  uint64_t msgs;
} phase_t;

static const phase_t phases[] = {{16, 2000000}, {4096, 200000}};
#define NPHASES (sizeof(phases) / sizeof(phases[0]))

static int free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
    return -1;
  close(fd);
  return ntohs(sa.sin_port);
}

/* --- augur: rank 0 sends, rank 1 counts --------------------------------------------- */

typedef struct rx {
  uint64_t expect, got, bytes;
} rx_t;

static void rx_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  rx_t *r = state;
  if (m->type != T_DATA) return;
  r->got++;
  r->bytes += m->len;
  if (r->got == r->expect) {
    au_runtime_t *rt = au_actor_runtime(self);
    au_send_to(rt, 0, PORT_DONE, T_DONE, NULL, 0);
    au_runtime_stop(rt);
  }
}

typedef struct tx {
  uint64_t left;
  size_t bytes;
  uint8_t *buf;
} tx_t;

static void tx_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  tx_t *t = state;
  au_runtime_t *rt = au_actor_runtime(self);
  if (m->type == T_DONE) {
    au_runtime_stop(rt);
    return;
  }
  for (int i = 0; i < 256 && t->left; i++) {
    if (au_link_wait(self, 1, T_DRAINED)) return;
    au_send_to(rt, 1, PORT_RX, T_DATA, t->buf, t->bytes);
    t->left--;
  }
  if (t->left) au_send(self, T_GO, NULL, 0);
}

static double augur_phase(au_runtime_t *rt, au_actor_t *rx, au_actor_t *tx, const phase_t *p)
{
  int rank = au_runtime_rank(rt);
  if (rank == 1) *(rx_t *)au_actor_state(rx) = (rx_t){.expect = p->msgs};
  double sync = 0;
  au_allreduce_sum(rt, &sync, 1); /* both ready */
  uint64_t t0 = au_now_ns();
  if (rank == 0) {
    tx_t *t = au_actor_state(tx);
    t->left = p->msgs;
    t->bytes = p->bytes;
    au_send(tx, T_GO, NULL, 0);
  }
  au_runtime_run(rt);
  return (double)(au_now_ns() - t0) / 1e9;
}

/* --- plain libuv TCP ----------------------------------------------------------------- */

typedef struct raw {
  uv_loop_t loop;
  uv_tcp_t server, conn;
  uv_connect_t connect;
  uint64_t want, got;
  char rbuf[1 << 16];
  uint8_t *chunk; /* one message's source bytes */
  uint8_t *bufs[4];
  unsigned next_buf;
  size_t chunk_len, msg_len;
  uint64_t left, in_flight; /* bytes still to write; writes in flight */
  uint64_t t0, t1;
} raw_t;

static void raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
  (void)s;
  raw_t *r = h->data;
  *b = uv_buf_init(r->rbuf, sizeof(r->rbuf));
}

static void closed_cb(uv_handle_t *h)
{
  (void)h;
}

static void ack_written(uv_write_t *w, int status)
{
  (void)status;
  raw_t *r = w->data;
  free(w);
  uv_close((uv_handle_t *)&r->conn, closed_cb);
  uv_close((uv_handle_t *)&r->server, closed_cb);
}

/* receiver: count bytes, answer one byte when all arrived */
static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  (void)b;
  raw_t *r = s->data;
  if (n <= 0) return; /* 0: nothing read (EAGAIN); a second ack would close twice */
  r->got += (uint64_t)n;
  if (r->got == r->want) {
    uv_write_t *w = malloc(sizeof(*w));
    w->data = r;
    uv_buf_t ack = uv_buf_init("!", 1);
    uv_write(w, s, &ack, 1, ack_written);
  }
}

static void raw_accept(uv_stream_t *srv, int status)
{
  raw_t *r = srv->data;
  if (status < 0) return;
  uv_tcp_init(&r->loop, &r->conn);
  r->conn.data = r;
  uv_accept(srv, (uv_stream_t *)&r->conn);
  uv_read_start((uv_stream_t *)&r->conn, raw_alloc, raw_read);
}

static void raw_send_more(raw_t *r);

static void chunk_written(uv_write_t *w, int status)
{
  raw_t *r = w->data;
  free(w);
  r->in_flight--;
  if (status == 0) raw_send_more(r);
}

/* sender: the same messages, each copied from its source into 256 KiB chunks (the one
 * copy augur's au_send_to makes too), written as a careful sender would */
static void raw_send_more(raw_t *r)
{
  while (r->left && r->in_flight < 4) {
    /* four chunk buffers, reused (a write completes before its buffer comes round) */
    uv_write_t *w = malloc(sizeof(*w));
    w->data = r;
    size_t n = r->left < r->chunk_len ? r->left : r->chunk_len;
    uint8_t *chunk = r->bufs[r->next_buf++ % 4];
    for (size_t off = 0; off < n; off += r->msg_len)
      memcpy(chunk + off, r->chunk, n - off < r->msg_len ? n - off : r->msg_len);
    uv_buf_t b = uv_buf_init((char *)chunk, (unsigned)n);
    r->left -= n;
    r->in_flight++;
    uv_write(w, (uv_stream_t *)&r->conn, &b, 1, chunk_written);
  }
}

static void ack_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  (void)b;
  raw_t *r = s->data;
  if (n > 0) {
    r->t1 = au_now_ns();
    uv_close((uv_handle_t *)&r->conn, closed_cb);
  }
}

static void raw_connected(uv_connect_t *c, int status)
{
  raw_t *r = c->data;
  if (status < 0) {
    fprintf(stderr, "augur-bench-net: raw connect: %s\n", uv_strerror(status));
    exit(1);
  }
  r->t0 = au_now_ns();
  uv_read_start((uv_stream_t *)&r->conn, raw_alloc, ack_read);
  raw_send_more(r);
}

/* The receiver listens before the sender dials: the two meet at an allreduce. */
static double raw_phase(au_runtime_t *rt, int rank, int port, const phase_t *p)
{
  raw_t *r = calloc(1, sizeof(*r));
  uv_loop_init(&r->loop);
  uint64_t total = p->msgs * p->bytes;
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", port, &sa);
  double secs = 0;
  if (rank == 1) {
    r->want = total;
    uv_tcp_init(&r->loop, &r->server);
    r->server.data = r;
    uv_tcp_bind(&r->server, (struct sockaddr *)&sa, 0);
    uv_listen((uv_stream_t *)&r->server, 1, raw_accept);
    double sync = 0;
    au_allreduce_sum(rt, &sync, 1); /* listening */
    uv_run(&r->loop, UV_RUN_DEFAULT);
  } else {
    double sync = 0;
    au_allreduce_sum(rt, &sync, 1); /* the receiver listens */
    size_t per = (256 * 1024) / p->bytes;
    r->chunk_len = per * p->bytes;
    r->msg_len = p->bytes;
    r->chunk = calloc(1, p->bytes);
    for (int i = 0; i < 4; i++) r->bufs[i] = calloc(1, r->chunk_len);
    r->left = total;
    uv_tcp_init(&r->loop, &r->conn);
    r->conn.data = r;
    r->connect.data = r;
    uv_tcp_connect(&r->connect, &r->conn, (struct sockaddr *)&sa, raw_connected);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    secs = (double)(r->t1 - r->t0) / 1e9;
    free(r->chunk);
    for (int i = 0; i < 4; i++) free(r->bufs[i]);
  }
  uv_loop_close(&r->loop);
  free(r);
  return secs;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
  int only = -1; /* --only small|bulk, for profiling one phase */
  if (argc == 3 && !strcmp(argv[1], "--only")) {
    only = !strcmp(argv[2], "small") ? 0 : !strcmp(argv[2], "bulk") ? 1 : -2;
    argc = 1;
  }
  if (argc > 1 || only == -2) {
    const int help = argc == 2 && strcmp(argv[1], "--help") == 0;
    FILE *f = help ? stdout : stderr;
    if (!help)
      fprintf(stderr, "augur-bench-net: %s '%s'\n",
              only == -2 ? "--only: expected small or bulk, got" : "unknown flag",
              only == -2 ? argv[2] : argv[1]);
    fprintf(f,
            "usage: augur-bench-net [--only small|bulk]\n  Forks a second node; sends %llu "
            "messages of %zu bytes and %llu of %zu bytes\n  between two augur nodes and the "
            "same bytes over plain libuv TCP; prints medians of %d runs.\n",
            (unsigned long long)phases[0].msgs, phases[0].bytes, (unsigned long long)phases[1].msgs,
            phases[1].bytes, REPS);
    return help ? 0 : 2;
  }
  int coord = free_port(), rawport[NPHASES][REPS];
  for (size_t p = 0; p < NPHASES; p++)
    for (int k = 0; k < REPS; k++) rawport[p][k] = free_port();
  char coord_s[64];
  snprintf(coord_s, sizeof(coord_s), "127.0.0.1:%d", coord);
  pid_t child = fork();
  int rank = child == 0 ? 1 : 0;
  char rank_s[8];
  snprintf(rank_s, sizeof(rank_s), "%d", rank);
  setenv("AU_RANK", rank_s, 1);
  setenv("AU_NODES", "2", 1);
  setenv("AU_COORD", coord_s, 1);
  setenv("AU_CLUSTER", "bench-net", 1);

  au_cluster_opts_t o;
  char err[256];
  au_runtime_t *rt;
  au_cluster_opts_from_env(&o, err, sizeof(err));
  au_runtime_create(&(au_runtime_opts_t){.threads = 1}, &rt);
  if (au_runtime_join(rt, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "augur-bench-net: rank %d: %s\n", rank, err);
    return 1;
  }
  au_actor_t *rx, *tx;
  au_actor_spawn(rt, rx_behaviour, sizeof(rx_t), &rx);
  au_actor_spawn(rt, tx_behaviour, sizeof(tx_t), &tx);
  au_port_register(rt, PORT_RX, rx);
  au_port_register(rt, PORT_DONE, tx);
  ((tx_t *)au_actor_state(tx))->buf = calloc(1, 65536);

  double aug[NPHASES][REPS], raw[NPHASES][REPS];
  for (int k = 0; k < REPS; k++)
    for (size_t p = 0; p < NPHASES; p++) {
      if (only >= 0 && (int)p != only) {
        aug[p][k] = raw[p][k] = 1;
        continue;
      }
      /* alternate: augur, then raw TCP, so both see the same machine */
      aug[p][k] = augur_phase(rt, rx, tx, &phases[p]);
      double sync = 0;
      au_allreduce_sum(rt, &sync, 1);
      raw[p][k] = raw_phase(rt, rank, rawport[p][k], &phases[p]);
    }
  free(((tx_t *)au_actor_state(tx))->buf);
  au_runtime_destroy(rt);
  if (rank == 1) _exit(0);
  int status;
  waitpid(child, &status, 0);

  const char *name[NPHASES] = {"small", "bulk"};
  for (size_t p = 0; p < NPHASES; p++) {
    qsort(aug[p], REPS, sizeof(double), cmp);
    qsort(raw[p], REPS, sizeof(double), cmp);
    double a = aug[p][REPS / 2], r = raw[p][REPS / 2];
    double mb = (double)(phases[p].msgs * phases[p].bytes) / 1e6;
    printf("%s_bytes=%zu\n", name[p], phases[p].bytes);
    printf("%s_msgs_per_s=%.4g\n", name[p], (double)phases[p].msgs / a);
    printf("%s_MB_per_s=%.1f\n", name[p], mb / a);
    printf("%s_raw_tcp_MB_per_s=%.1f\n", name[p], mb / r);
    printf("%s_ratio_vs_raw_tcp=%.3f\n", name[p], r / a);
  }
  printf("ratio_vs_raw_tcp=%.3f\n", raw[1][REPS / 2] / aug[1][REPS / 2]);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
