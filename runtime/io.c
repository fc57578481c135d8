/* io.c — the I/O thread: one libuv loop owned by the runtime. Other threads hand it
 * commands through an MPSC mailbox plus one uv_async_t; it runs timers that deliver
 * messages to actors, and whatever its extension (the cluster transport, io_extend)
 * registered: commands, a hook after each batch of them, and one on quitting.
 *
 * The invariant: every armed timer is counted in rt->io_pending from the moment
 * au_timer_start returns until the I/O thread disarms it, so the scheduler never
 * declares quiescence while a timer can still deliver a message.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/io.h"

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
    au__log(AU_LOG_ERROR, rt_log_rank(rt), "out of memory arming timer %llu; it will not fire",
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

/* acquire: pairs with io_extend's release, so the extension's state is built */
static const io_ext_t *ext_of(au_runtime_t *rt)
{
  return atomic_load_explicit(&rt->io.ext, memory_order_acquire);
}

int io_extend(au_runtime_t *rt, const io_ext_t *ext)
{
  const io_ext_t *none = NULL;
  /* release: the I/O thread that finds it (ext_of) sees what was set up before */
  if (atomic_compare_exchange_strong_explicit(&rt->io.ext, &none, ext, memory_order_release,
                                              memory_order_relaxed))
    return 0;
  return none == ext ? 0 : AU_EBUSY; /* the same one again (a second join): fine */
}

static void handle_cmd(au_runtime_t *rt, au_msg_t *m, pool_cache_t *cache)
{
  const io_ext_t *ext = ext_of(rt);
  if (m->type >= IO_CMD_EXT) {
    if (ext)
      ext->on_cmd(rt, m); /* takes m */
    else
      pool_free(&rt->pool, cache, m);
    return;
  }
  cmd_t c;
  memcpy(&c, m->data, sizeof(c));
  switch (m->type) {
  case IO_CMD_TIMER_START:
    timer_start(rt, &c);
    break;
  case IO_CMD_TIMER_STOP: {
    io_timer_t *t = u64map_get(&rt->io.timers, c.id);
    if (t) timer_disarm(t);
    break;
  }
  case IO_CMD_QUIT:
    if (ext) ext->on_quit(rt);
    uv_walk(&rt->io.loop, close_any, NULL);
    break;
  }
  pool_free(&rt->pool, cache, m);
}

static au_msg_t *cmd_pop(io_t *io)
{
  /* au__next is the first field of au_msg_t: a message is its own queue node */
  return (au_msg_t *)(void *)injectq_pop(&io->cmdq);
}

static void async_cb(uv_async_t *h)
{
  au_runtime_t *rt = h->data;
  pool_cache_t *cache = &rt->pool.caches[rt->nthreads];
  /* Only the push that finds the queue empty wakes this thread (io_post_msg), so drain
   * until the count says empty; a pop that comes back NULL while the count says more is
   * a push half linked in, done within nanoseconds. */
  while (injectq_count(&rt->io.cmdq) > 0) {
    injectq_node_t *nodes[64];
    size_t n = injectq_pop_many(&rt->io.cmdq, nodes, 64);
    if (!n) sched_yield();
    for (size_t i = 0; i < n; i++) handle_cmd(rt, (au_msg_t *)(void *)nodes[i], cache);
  }
  /* e.g. one write per connection for everything this round queued */
  const io_ext_t *ext = ext_of(rt);
  if (ext) ext->after_batch(rt);
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

void io_post_msg(au_runtime_t *rt, au_msg_t *m)
{
  /* only the first command into an empty queue costs a wake-up (an eventfd write) */
  if (injectq_push(&rt->io.cmdq, (injectq_node_t *)(void *)m) == 0) uv_async_send(&rt->io.async);
}

int io_post(au_runtime_t *rt, uint32_t type, const void *data, size_t len)
{
  au_msg_t *m = pool_alloc(&rt->pool, rt_cache(rt), len);
  if (!m) return AU_ENOMEM;
  m->type = type;
  if (len) memcpy(m->data, data, len);
  io_post_msg(rt, m);
  return 0;
}

int io_start(au_runtime_t *rt)
{
  io_t *io = &rt->io;
  int rc = u64map_init(&io->timers, 6);
  if (rc != 0) return rc;
  injectq_init(&io->cmdq);
  atomic_init(&io->next_id, 1);
  atomic_init(&io->ext, NULL);
  if (uv_loop_init(&io->loop) != 0) goto fail_map;
  if (uv_async_init(&io->loop, &io->async, async_cb) != 0) goto fail_loop;
  io->async.data = rt;
  if (pthread_create(&io->tid, NULL, io_main, rt) != 0) goto fail_async;
  return 0;

fail_async:
  uv_close((uv_handle_t *)&io->async, NULL);
  uv_run(&io->loop, UV_RUN_DEFAULT);
fail_loop:
  uv_loop_close(&io->loop);
fail_map:
  u64map_destroy(&io->timers);
  return AU_ENOMEM;
}

void io_stop(au_runtime_t *rt)
{
  io_t *io = &rt->io;
  cmd_t c = {0};
  while (io_post(rt, IO_CMD_QUIT, &c, sizeof(c)) != 0) sched_yield();
  pthread_join(io->tid, NULL);
  uv_loop_close(&io->loop);
  /* The I/O thread is gone: free what is left in its queue. */
  au_msg_t *m;
  while ((m = cmd_pop(io)) != NULL) pool_free(&rt->pool, NULL, m);
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
  int rc = io_post(rt, IO_CMD_TIMER_START, &c, sizeof(c));
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
  return io_post(rt, IO_CMD_TIMER_STOP, &c, sizeof(c));
}
