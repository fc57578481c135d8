/* netdelay.c — an added one-way delay on the data frames a node sends, for testing and
 * benchmarks only (AU_NET_DELAY_US; docs/cluster.md, "Simulated latency").
 *
 * These machines' kernels lack tc netem, and libuv's timers count milliseconds, so a
 * frame waits here instead: data_send_finish hands it to netdelay_push, which keeps a
 * FIFO (every frame waits equally long, so FIFO order is due order, up to the moments
 * between a sender reading the clock and taking the lock), and a timerfd on the I/O
 * thread's loop fires when the head is due: the I/O thread then queues every frame due by
 * then on its connection, in one batch, as if it had just been sent. The sender that finds
 * the FIFO empty arms the timer (a syscall, no wake-up); until 2026-12-07 a thread of its
 * own slept until the head was due and posted the batch to the I/O thread, two wake-ups a
 * batch where now there is one (docs/cluster.md has the figures). AU_NET_DELAY_US=D:J adds
 * up to J microseconds at random per frame (a frame still never leaves before the one
 * ahead of it). Per-sender FIFO order is kept; control frames (joining, end-of-run polls,
 * heartbeats) are not delayed. A delayed frame counts as sent from the start, so a run
 * does not end while frames wait here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cluster.h"
#include "runtime/data.h"
#include "runtime/io.h"

typedef struct delayed {
  struct delayed *next;
  au_msg_t *m;
  uint64_t due_ns;
} delayed_t;

struct netdelay {
  au_runtime_t *rt;
  uint64_t delay_ns, jitter_ns; /* each frame waits delay_ns + [0, jitter_ns) */
  int tfd;                      /* the timerfd, armed for the head's due time while any wait */
  uv_poll_t poll;               /* the I/O thread's: tfd readable */
  int polling;                  /* the I/O thread's: poll started, not yet closed */
  pthread_mutex_t mu;           /* guards what follows */
  uint64_t rng, last_due;       /* the jitter's xorshift; the last frame's due time */
  delayed_t *head, **tail;
  int stopped; /* netdelay_stop came: frames go straight to the I/O thread */
};

/* Under mu: the timer to fire at the head's due time (CLOCK_MONOTONIC, as au_now_ns). */
static void arm(netdelay_t *d)
{
  const uint64_t due = d->head->due_ns;
  struct itimerspec its = {.it_value = {.tv_sec = (time_t)(due / 1000000000ull),
                                        .tv_nsec = (long)(due % 1000000000ull)}};
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  timerfd_settime(d->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Under mu: the frames due by now (all when `all`), cut off the FIFO; the timer re-armed
 * for those still waiting. */
static delayed_t *take_due(netdelay_t *d, int all)
{
  const uint64_t now = au_now_ns();
  delayed_t *batch = d->head, **cut = &d->head;
  while (*cut && (all || (*cut)->due_ns <= now)) cut = &(*cut)->next;
  d->head = *cut;
  *cut = NULL;
  if (!d->head)
    d->tail = &d->head;
  else
    arm(d);
  return batch;
}

/* I/O thread: every frame of batch onto its connection, then one write per connection. */
static void send_batch(netdelay_t *d, delayed_t *batch)
{
  net_t *net = d->rt->net;
  while (batch) {
    delayed_t *next = batch->next;
    data_on_send(net, batch->m);
    free(batch);
    batch = next;
  }
  conn_flush_all(net);
}

static void on_due(uv_poll_t *h, int status, int events)
{
  (void)status, (void)events;
  netdelay_t *d = h->data;
  uint64_t fired;
  while (read(d->tfd, &fired, sizeof(fired)) < 0 && errno == EINTR) {
  }
  pthread_mutex_lock(&d->mu);
  delayed_t *batch = take_due(d, 0);
  pthread_mutex_unlock(&d->mu);
  send_batch(d, batch);
}

int netdelay_start(au_runtime_t *rt, uint64_t delay_ns, uint64_t jitter_ns, netdelay_t **out)
{
  netdelay_t *d = calloc(1, sizeof(*d));
  if (!d) return AU_ENOMEM;
  d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (d->tfd < 0) {
    free(d);
    return AU_ENOMEM;
  }
  d->rt = rt;
  d->delay_ns = delay_ns;
  d->jitter_ns = jitter_ns;
  d->rng = au_now_ns() | 1;
  d->tail = &d->head;
  pthread_mutex_init(&d->mu, NULL);
  *out = d;
  return 0;
}

void netdelay_attach(netdelay_t *d, uv_loop_t *loop)
{
  if (!d || d->polling) return;
  if (uv_poll_init(loop, &d->poll, d->tfd) != 0) return; /* then frames wait for the stop */
  d->poll.data = d;
  d->polling = uv_poll_start(&d->poll, UV_READABLE, on_due) == 0;
}

int netdelay_push(netdelay_t *d, au_msg_t *m)
{
  delayed_t *e = malloc(sizeof(*e));
  if (!e) return AU_ENOMEM;
  e->due_ns = au_now_ns() + d->delay_ns;
  e->m = m;
  e->next = NULL;
  pthread_mutex_lock(&d->mu);
  if (d->stopped) { /* the caller posts it itself, after the frames the stop sent */
    pthread_mutex_unlock(&d->mu);
    free(e);
    return AU_EINVAL;
  }
  if (d->jitter_ns) {
    /* a random extra wait, but never before the frame ahead: FIFO is due order */
    d->rng ^= d->rng << 13, d->rng ^= d->rng >> 7, d->rng ^= d->rng << 17;
    e->due_ns += d->rng % d->jitter_ns;
    if (e->due_ns < d->last_due) e->due_ns = d->last_due;
    d->last_due = e->due_ns;
  }
  const int was_empty = d->head == NULL;
  *d->tail = e;
  d->tail = &e->next;
  if (was_empty) arm(d);
  pthread_mutex_unlock(&d->mu);
  return 0;
}

void netdelay_stop(netdelay_t *d)
{
  if (!d) return;
  /* the I/O thread sends what waits (NET_CMD_DELAY_STOP): commands run in order, so the
   * frames go before the BYE that leaving posts next; posted under the lock, so that a
   * frame refused from now on, which its sender then posts itself, comes after them */
  pthread_mutex_lock(&d->mu);
  d->stopped = 1;
  if (io_post(d->rt, NET_CMD_DELAY_STOP, NULL, 0) != 0)
    for (delayed_t *e = take_due(d, 1), *next; e; e = next) {
      next = e->next; /* short of memory for a command: each frame as a command of its own */
      io_post_msg(d->rt, e->m);
      free(e);
    }
  pthread_mutex_unlock(&d->mu);
}

void netdelay_on_stop(netdelay_t *d)
{
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  delayed_t *batch = take_due(d, 1);
  pthread_mutex_unlock(&d->mu);
  send_batch(d, batch);
  if (d->polling) {
    uv_poll_stop(&d->poll);
    uv_close((uv_handle_t *)&d->poll, NULL);
    d->polling = 0;
  }
}

void netdelay_free(netdelay_t *d)
{
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  delayed_t *left = take_due(d, 1); /* none after a stop; a failed join may leave some */
  pthread_mutex_unlock(&d->mu);
  while (left) {
    delayed_t *next = left->next;
    pool_free(&d->rt->pool, NULL, left->m);
    free(left);
    left = next;
  }
  close(d->tfd);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
