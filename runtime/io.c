/* io.c — the I/O thread: one libuv loop owned by the runtime. Other threads hand it
 * commands through an MPSC mailbox plus one uv_async_t; it runs timers that deliver
 * messages to actors (and, in a later issue, the network transport).
 *
 * The invariant: every armed timer is counted in rt->io_pending from the moment
 * au_timer_start returns until the I/O thread disarms it, so the scheduler never
 * declares quiescence while a timer can still deliver a message.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt.h"

enum { CMD_TIMER_START = 1, CMD_TIMER_STOP, CMD_QUIT };

typedef struct cmd {
  au_timer_id_t id;
  au_actor_t *to;
  uint32_t type;
  uint64_t timeout_ms, repeat_ms;
} cmd_t;

typedef struct io_timer {
  uv_timer_t handle;
  au_runtime_t *rt;
  au_timer_id_t id;
  au_actor_t *to;
  uint32_t type;
} io_timer_t;

uint64_t au_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pending_done(au_runtime_t *rt)
{
  /* seq_cst: pairs with park()'s read; a parked runtime re-checks for quiescence. */
  if (atomic_fetch_sub(&rt->io_pending, 1) == 1) sched_poke(rt);
}

static void timer_closed(uv_handle_t *h)
{
  free(h->data);
}

static void timer_disarm(io_timer_t *t)
{
  u64map_del(&t->rt->io.timers, t->id);
  uv_timer_stop(&t->handle);
  uv_close((uv_handle_t *)&t->handle, timer_closed);
  pending_done(t->rt);
}

static void timer_fired(uv_timer_t *h)
{
  io_timer_t *t = h->data;
  /* An empty message never fails to allocate from a pool short of memory exhaustion;
   * if it does, the tick is lost rather than the I/O thread. */
  (void)au_send(t->to, t->type, NULL, 0);
  if (uv_timer_get_repeat(h) == 0) timer_disarm(t);
}

static void timer_start(au_runtime_t *rt, const cmd_t *c)
{
  io_timer_t *t = calloc(1, sizeof(*t));
  if (!t || u64map_put(&rt->io.timers, c->id, t) != 0) {
    free(t);
    fprintf(stderr, "augur: out of memory arming timer %llu; it will not fire\n",
            (unsigned long long)c->id);
    pending_done(rt);
    return;
  }
  t->rt = rt;
  t->id = c->id;
  t->to = c->to;
  t->type = c->type;
  uv_timer_init(&rt->io.loop, &t->handle);
  t->handle.data = t;
  uv_timer_start(&t->handle, timer_fired, c->timeout_ms, c->repeat_ms);
}

static void close_any(uv_handle_t *h, void *arg)
{
  (void)arg;
  if (uv_is_closing(h)) return;
  if (h->type == UV_TIMER) {
    io_timer_t *t = h->data;
    u64map_del(&t->rt->io.timers, t->id);
    atomic_fetch_sub(&t->rt->io_pending, 1);
    uv_close(h, timer_closed);
  } else {
    uv_close(h, NULL);
  }
}

static void handle_cmd(au_runtime_t *rt, au_msg_t *m)
{
  cmd_t c;
  memcpy(&c, m->data, sizeof(c));
  switch (m->type) {
  case CMD_TIMER_START:
    timer_start(rt, &c);
    break;
  case CMD_TIMER_STOP: {
    io_timer_t *t = u64map_get(&rt->io.timers, c.id);
    if (t) timer_disarm(t);
    break;
  }
  case CMD_QUIT:
    uv_walk(&rt->io.loop, close_any, NULL);
    break;
  }
}

static void async_cb(uv_async_t *h)
{
  au_runtime_t *rt = h->data;
  pool_cache_t *cache = &rt->pool.caches[rt->nthreads];
  for (;;) {
    au_msg_t *m, *rel;
    while ((m = mailbox_pop(&rt->io.cmdq, &rel)) != NULL) {
      if (rel) pool_free(&rt->pool, cache, rel);
      handle_cmd(rt, m);
    }
    /* A failed mark means a push is linking in: drain again rather than miss it. */
    if (mailbox_mark_empty(&rt->io.cmdq)) break;
  }
}

static void *io_main(void *arg)
{
  au_runtime_t *rt = arg;
  rt_ctx_t ctx = {
      .rt = rt, .sched = NULL, .cache = &rt->pool.caches[rt->nthreads], .list = rt->nthreads};
  rt_tls = &ctx;
  pthread_setname_np(pthread_self(), "au-io");
  uv_run(&rt->io.loop, UV_RUN_DEFAULT);
  rt_tls = NULL;
  return NULL;
}

/* Any thread: queues a command for the I/O thread and wakes it if its queue was empty. */
static int post(au_runtime_t *rt, int type, const cmd_t *c)
{
  au_msg_t *m = pool_alloc(&rt->pool, rt_cache(rt), sizeof(*c));
  if (!m) return AU_ENOMEM;
  m->type = (uint32_t)type;
  memcpy(m->data, c, sizeof(*c));
  if (mailbox_push(&rt->io.cmdq, m)) uv_async_send(&rt->io.async);
  return 0;
}

int io_start(au_runtime_t *rt)
{
  io_t *io = &rt->io;
  int rc = u64map_init(&io->timers, 6);
  if (rc != 0) return rc;
  au_msg_t *stub = pool_alloc(&rt->pool, NULL, 0);
  if (!stub) goto fail_map;
  mailbox_init(&io->cmdq, stub);
  atomic_init(&io->next_id, 1);
  if (uv_loop_init(&io->loop) != 0) goto fail_stub;
  if (uv_async_init(&io->loop, &io->async, async_cb) != 0) goto fail_loop;
  io->async.data = rt;
  if (pthread_create(&io->tid, NULL, io_main, rt) != 0) goto fail_async;
  return 0;

fail_async:
  uv_close((uv_handle_t *)&io->async, NULL);
  uv_run(&io->loop, UV_RUN_DEFAULT);
fail_loop:
  uv_loop_close(&io->loop);
fail_stub:
  pool_free(&rt->pool, NULL, stub);
fail_map:
  u64map_destroy(&io->timers);
  return AU_ENOMEM;
}

void io_stop(au_runtime_t *rt)
{
  io_t *io = &rt->io;
  cmd_t c = {0};
  while (post(rt, CMD_QUIT, &c) != 0) sched_yield();
  pthread_join(io->tid, NULL);
  uv_loop_close(&io->loop);
  /* The I/O thread is gone: free what is left in its queue. */
  au_msg_t *m, *rel;
  while ((m = mailbox_pop(&io->cmdq, &rel)) != NULL) pool_free(&rt->pool, NULL, rel);
  pool_free(&rt->pool, NULL, mailbox_stub(&io->cmdq));
  u64map_destroy(&io->timers);
}

int au_timer_start(au_runtime_t *rt, au_actor_t *to, uint32_t type, uint64_t timeout_ms,
                   uint64_t repeat_ms, au_timer_id_t *id)
{
  if (!rt || !to || to->rt != rt) return AU_EINVAL;
  cmd_t c = {.to = to, .type = type, .timeout_ms = timeout_ms, .repeat_ms = repeat_ms};
  c.id = atomic_fetch_add_explicit(&rt->io.next_id, 1, memory_order_relaxed);
  /* Counted before the command is queued, so that quiescence cannot slip in between. */
  atomic_fetch_add(&rt->io_pending, 1);
  int rc = post(rt, CMD_TIMER_START, &c);
  if (rc != 0) {
    pending_done(rt);
    return rc;
  }
  if (id) *id = c.id;
  return 0;
}

int au_timer_stop(au_runtime_t *rt, au_timer_id_t id)
{
  if (!rt || id == 0) return AU_EINVAL;
  cmd_t c = {.id = id};
  return post(rt, CMD_TIMER_STOP, &c);
}
