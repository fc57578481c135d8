/* netdelay.c — an added one-way delay on the data frames a node sends, for testing and
 * benchmarks only (AU_NET_DELAY_US; docs/cluster.md, "Simulated latency").
 *
 * These machines' kernels lack tc netem, and libuv's timers count milliseconds, so a
 * frame waits here instead: data_send_finish hands it to one delay thread, which keeps a
 * FIFO (every frame waits equally long, so FIFO order is due order, up to the moments
 * between a sender reading the clock and taking the lock), sleeps until the head is due
 * and then posts every frame due by then to the I/O thread, in one batch, as if it had
 * just been sent. AU_NET_DELAY_US=D:J adds up to J microseconds at random per frame (a
 * frame still never leaves before the one ahead of it). Per-sender FIFO order is kept; control
 * frames (joining, end-of-run polls, heartbeats) are not delayed. A delayed frame counts as sent
 * from the start, so a run does not end while frames wait here.
 */
#include <errno.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

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
  uint64_t rng, last_due;       /* under mu: the jitter's xorshift; the last frame's due time */
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  delayed_t *head, **tail;
  int stop;
};

static void sleep_until(uint64_t due_ns)
{
  struct timespec ts = {.tv_sec = (time_t)(due_ns / 1000000000ull),
                        .tv_nsec = (long)(due_ns % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static void *delay_main(void *arg)
{
  netdelay_t *d = arg;
  /* wake-ups at the due time, not up to the default 50 us (or the container's) later */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  pthread_mutex_lock(&d->mu);
  for (;;) {
    while (!d->head && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
    if (!d->head) break; /* stopping, nothing left */
    uint64_t due = d->head->due_ns;
    int stopping = d->stop;
    if (!stopping && due > au_now_ns()) {
      pthread_mutex_unlock(&d->mu);
      sleep_until(due);
      pthread_mutex_lock(&d->mu);
    }
    /* everything due by now goes in one batch, taken under one lock (stopping: all) */
    uint64_t now = au_now_ns();
    delayed_t *batch = d->head, **cut = &d->head;
    while (*cut && (stopping || (*cut)->due_ns <= now)) cut = &(*cut)->next;
    d->head = *cut;
    *cut = NULL;
    if (!d->head) d->tail = &d->head;
    pthread_mutex_unlock(&d->mu);
    while (batch) {
      delayed_t *next = batch->next;
      io_post_msg(d->rt, batch->m);
      free(batch);
      batch = next;
    }
    pthread_mutex_lock(&d->mu);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

int netdelay_start(au_runtime_t *rt, uint64_t delay_ns, uint64_t jitter_ns, netdelay_t **out)
{
  netdelay_t *d = calloc(1, sizeof(*d));
  if (!d) return AU_ENOMEM;
  d->rt = rt;
  d->delay_ns = delay_ns;
  d->jitter_ns = jitter_ns;
  d->rng = au_now_ns() | 1;
  d->tail = &d->head;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  if (pthread_create(&d->tid, NULL, delay_main, d) != 0) {
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return AU_ENOMEM;
  }
  *out = d;
  return 0;
}

int netdelay_push(netdelay_t *d, au_msg_t *m)
{
  delayed_t *e = malloc(sizeof(*e));
  if (!e) return AU_ENOMEM;
  /* CLOCK_MONOTONIC, as au_now_ns and sleep_until */
  e->due_ns = au_now_ns() + d->delay_ns;
  e->m = m;
  e->next = NULL;
  pthread_mutex_lock(&d->mu);
  if (d->jitter_ns) {
    /* a random extra wait, but never before the frame ahead: FIFO is due order */
    d->rng ^= d->rng << 13, d->rng ^= d->rng >> 7, d->rng ^= d->rng << 17;
    e->due_ns += d->rng % d->jitter_ns;
    if (e->due_ns < d->last_due) e->due_ns = d->last_due;
    d->last_due = e->due_ns;
  }
  int was_empty = d->head == NULL;
  *d->tail = e;
  d->tail = &e->next;
  if (was_empty) pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  return 0;
}

void netdelay_stop(netdelay_t *d)
{
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->tid, NULL);
  pthread_cond_destroy(&d->cv);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
