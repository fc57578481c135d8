/* worker.c — worker actors: a user's step function run as an actor, the worker's clock,
 * intents, views, pull/push (the barrier is barrier.c's).
 *
 * The invariant: a worker has at most one step message outstanding. AU_CONTINUE sends
 * the next one itself; AU_WAIT sends none, and whatever the step waits for (a barrier's
 * release, later: values arriving) sends exactly one; AU_PAUSE and AU_DONE send none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/barrier.h"
#include "actors/idle.h"
#include "actors/placer.h"
#include "actors/ps.h"
#include "actors/psmsg.h"

enum { MSG_STEP = 1 };

int worker_kick(au_worker_t *w)
{
  /* one step message in flight at most: a worker woken twice (a row and an arrival, a
   * barrier) must not run two steps for one wait, nor leave its run twice */
  if (atomic_exchange(&w->kicked, 1)) return 0;
  int rc = au_send(w->actor, MSG_STEP, NULL, 0);
  if (rc != 0) atomic_store(&w->kicked, 0);
  return rc;
}

static void finish(au_worker_t *w, int rc)
{
  au_node_t *n = w->node;
  if (rc < 0) {
    int none = 0;
    atomic_compare_exchange_strong(&n->error, &none, rc);
  }
  w->state = W_DONE;
  atomic_fetch_sub(&n->live, 1);
  barrier_left(n);
}

/* n row pointers for a view, valid until the step returns. Chunks are kept from step to
 * step, so a worker in its steady state does not allocate. */
static void **rows_alloc(au_worker_t *w, size_t n)
{
  rows_chunk_t *c = w->rows;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 1024 ? n : 1024;
    if (c && cap < 2 * c->cap) cap = 2 * c->cap;
    rows_chunk_t *nc = malloc(sizeof(*nc) + cap * sizeof(void *));
    if (!nc) return NULL;
    nc->cap = cap;
    nc->used = 0;
    nc->next = c;
    w->rows = c = nc;
  }
  void **r = &c->slot[c->used];
  c->used += n;
  return r;
}

/* After a step: keep the newest (largest) chunk for the next one, free the rest. */
static void rows_reset(au_worker_t *w)
{
  rows_chunk_t *c = w->rows;
  if (!c) return;
  c->used = 0;
  rows_chunk_t *old = c->next;
  c->next = NULL;
  while (old) {
    rows_chunk_t *next = old->next;
    free(old);
    old = next;
  }
}

void worker_release_memory(au_worker_t *w)
{
  rows_reset(w);
  free(w->rows);
  w->rows = NULL;
  free(w->intent_buf.p);
  w->intent_buf = (obuf_t){0};
  free(w->seen);
  w->seen = NULL;
  w->seen_cap = 0;
  free(w->named);
  w->named = NULL;
  w->named_cap = 0;
  remote_free(w);
}

/* The worker's run is over (paused, done or failed): the node may be idle now. */
static void leave_run(au_worker_t *w)
{
  idle_worker_left(w->node);
}

/* After a step (its writes, marks and pushes done): publishes the clock the worker
 * finished, for the bound (consistency.c). */
static void clk_step_done(au_worker_t *w, int in_run)
{
  const int64_t done = in_run ? w->clock - 1 : INT64_MAX;
  if (done == atomic_load_explicit(&w->done_clock, memory_order_relaxed)) return;
  /* release: the writes, marks and pushes of the steps before come first */
  atomic_store_explicit(&w->done_clock, done, memory_order_release);
  clk_nudge(w->node);
}

/* The consistency bound's side in the worker (consistency.c has the placer's). */
int au_worker_sync(au_worker_t *w)
{
  if (!w) return AU_EINVAL;
  au_node_t *n = w->node;
  if (!node_bounded(n)) return 0;
  /* a read earlier in this step waits already: so does this one. Taking the wait back
   * here (below) would leave the step waiting with no kick to come: the placer kicks only
   * a worker whose wait it took itself */
  if (w->gate_wait) return AU_EAGAIN;
  const int64_t need = w->clock - n->staleness - 1;
  if (atomic_load_explicit(&n->visible, memory_order_acquire) < need) {
    atomic_store(&w->gate_need, need);
    /* the placer may have raised it meanwhile: take the wait back, unless it took it
     * first (then its kick is on the way) */
    int64_t mine = need;
    if (atomic_load(&n->visible) < need ||
        !atomic_compare_exchange_strong(&w->gate_need, &mine, GATE_NONE)) {
      if (!w->gate_t0) {
        w->gate_t0 = au_now_ns();
        counter_add(&w->reads_waited, 1);
      }
      w->gate_wait = 1;
      return AU_EAGAIN;
    }
  }
  if (w->gate_t0) {
    counter_add(&w->wait_ns, au_now_ns() - w->gate_t0);
    w->gate_t0 = 0;
  }
  return 0;
}

void au_worker_advance_to(au_worker_t *w, au_clock_t clock)
{
  if (!w || clock <= w->clock) return;
  w->clock = clock;
  if (w->node->nodes == 1) return;
  /* a jump, not work done: the rate's next sample starts here */
  w->rate.last_clock = clock;
  w->rate.last_ns = au_now_ns();
  atomic_store_explicit(&w->seen_clock, (uint64_t)clock, memory_order_relaxed);
}

static void worker_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  au_worker_t *w = state;
  if (w->state == W_DONE) return;
  if (m->type == PS_ROWS || m->type == PS_ERR || m->type == PS_ARRIVED || m->type == PS_CLK_OPEN) {
    /* what a waiting step waited for: re-run it once nothing else is outstanding (the
     * bound's opening: the placer took the wait, consistency.c) */
    if (m->type == PS_ARRIVED)
      w->wants = 0;
    else if (m->type != PS_CLK_OPEN)
      remote_on_reply(w, m);
    if (w->state == W_WAITING && !w->remote.pending && !w->wants && !w->remote.link_wait)
      worker_kick(w);
    return;
  }
  if (m->type != MSG_STEP) return;
  atomic_store(&w->kicked, 0);
  int rc;
  if (w->remote.failed) {
    rc = w->remote.failed;
  } else {
    w->state = W_RUNNING;
    w->remote.link_wait = 0;
    w->gate_wait = 0;
    counter_add(&w->steps, 1);
    /* a section: a hand-off that marked an actor waits for it to end (grace.c) */
    grace_enter(&w->ck);
    rc = w->step(w, w->arg);
    grace_leave(w->node, &w->ck);
    au__long_turn(); /* user code ran: let queued network messages in next */
    rows_reset(w);
    if (w->views != 0) {
      au__log(AU_LOG_ERROR, -1,
              "worker %d: step returned holding %d view(s) without au_view_release", w->id,
              w->views);
      w->views = 0;
      rc = AU_EINVAL;
    }
    if (w->remote.failed && rc >= 0) rc = w->remote.failed;
    remote_step_done(w, rc == AU_WAIT);
    if (w->fence_gen) barrier_fence(w); /* after the pushes */
    if (rc == AU_WAIT && !w->remote.pending && !w->remote.link_wait && !w->barrier_gen &&
        !w->wants && !w->gate_wait) {
      au__log(AU_LOG_ERROR, -1,
              "worker %d: step returned AU_WAIT, but it waits for nothing (no call "
              "said AU_EAGAIN)",
              w->id);
      rc = AU_EDEADLK;
    }
  }
  /* after the step's writes and pushes: the clock it finished (consistency.c) */
  if (node_bounded(w->node)) clk_step_done(w, rc == AU_CONTINUE || rc == AU_WAIT);
  switch (rc) {
  case AU_CONTINUE:
    w->state = W_READY;
    if (worker_kick(w) != 0) {
      finish(w, AU_ENOMEM);
      leave_run(w);
    }
    break;
  case AU_WAIT:
    w->state = W_WAITING;
    break;
  case AU_PAUSE:
    w->state = W_PAUSED;
    leave_run(w);
    break;
  case AU_DONE:
    finish(w, 0);
    leave_run(w);
    break;
  default:
    /* step results are 1..4: 0 is a call's success passed on by mistake, not a result */
    if (rc >= 0) {
      au__log(AU_LOG_ERROR, -1,
              "worker %d: step returned %d, not a step result (AU_CONTINUE, AU_WAIT, AU_PAUSE, "
              "AU_DONE) nor an error",
              w->id, rc);
      rc = AU_EINVAL;
    }
    finish(w, rc);
    leave_run(w);
    break;
  }
}

int au_worker_spawn(au_node_t *n, const au_worker_opts_t *opts, au_worker_t **out)
{
  if (!n || !opts || !opts->step) return AU_EINVAL;
  if (n->nworkers == n->cap_workers) {
    int cap = n->cap_workers ? 2 * n->cap_workers : 16;
    au_worker_t **ws = realloc(n->workers, (size_t)cap * sizeof(*ws));
    if (!ws) return AU_ENOMEM;
    n->workers = ws;
    n->cap_workers = cap;
  }
  if (n->nworkers >= PS_MAX_WORKERS) return AU_EINVAL;
  au_actor_t *a;
  int rc = au_actor_spawn(n->rt, worker_behaviour, sizeof(au_worker_t), &a);
  if (rc == 0) rc = au_port_register(n->rt, PS_WORKER_PORT(n->nworkers), a);
  if (rc != 0) return rc;
  au_worker_t *w = au_actor_state(a);
  w->node = n;
  w->actor = a;
  w->id = n->nworkers;
  w->step = opts->step;
  w->arg = opts->arg;
  w->state = W_READY;
  grace_register(n, &w->ck);
  atomic_init(&w->kicked, 0);
  atomic_init(&w->done_clock, INT64_MAX);
  atomic_init(&w->gate_need, GATE_NONE);
  n->workers[n->nworkers++] = w;
  atomic_fetch_add(&n->live, 1);
  if (out) *out = w;
  return 0;
}

int au_worker_id(const au_worker_t *w)
{
  return w->id;
}

au_node_t *au_worker_node(const au_worker_t *w)
{
  return w->node;
}

au_clock_t au_worker_clock(const au_worker_t *w)
{
  return w->clock;
}

void au_worker_advance(au_worker_t *w)
{
  w->clock++;
  if (w->node->nodes == 1) return;
  clock_rate_tick(&w->rate, w->clock, au_now_ns());
  atomic_store_explicit(&w->seen_clock, (uint64_t)w->clock, memory_order_relaxed);
}

static int check_keys(const au_table_t *t, const au_key_t *keys, size_t n)
{
  if (n && !keys) return AU_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (keys[i] >= t->keys) return AU_ERANGE;
  return 0;
}

/* Whether an intent naming `keys` distinct rows of an actor over `clocks` clocks is worth
 * the placer's attention. In adaptive placement, a claim moves or replicates the actor;
 * that costs about as much as fetching CLAIM_MIN_BYTES of rows (messages, the owner's
 * grace period, syncs while a replica stays), so a claim that names fewer bytes of rows
 * than that, or than the whole actor, is left out and its rows fetched: an embedding
 * batch's one row of a two-row entity actor (docs/kge.md, 4 nodes), not an LDA slice's
 * 26-30 words of 32 (docs/cluster.md, "Claims"). */
#define CLAIM_MIN_BYTES 8192
/* An id table's actor holds a thousand rows or more (16 buckets of 64 slots), most of which
 * an intent does not name: a claim of it must name a quarter of its bytes. With the dense
 * rule, augur-kge --entity-table ids on 4 nodes at 200 us claimed every actor for its 14
 * entities a batch (22 KB of a 1.7 MB actor) and ran 9.8 s an epoch against classic's 2.1,
 * shipping 4.7-6.6 GB of refreshes an epoch (docs/kge.md). */
#define CLAIM_IDS_SHARE 4
static int worth_claiming(const au_table_t *t, uint32_t keys, au_clock_t clocks)
{
  if (t->place != AU_PLACE_ADAPTIVE) return 1;
  const uint64_t actor = table_actor_bytes(t); /* (an id table's: its buckets) */
  uint64_t need = actor < CLAIM_MIN_BYTES ? actor : CLAIM_MIN_BYTES;
  if (t->ids)
    need = actor / CLAIM_IDS_SHARE > CLAIM_MIN_BYTES ? actor / CLAIM_IDS_SHARE : CLAIM_MIN_BYTES;
  const uint64_t per_clock = (uint64_t)keys * t->row_bytes; /* (no overflow: < 2^54) */
  /* per_clock * clocks >= need, without the product (clocks may be huge) */
  return per_clock >= need || (uint64_t)clocks >= (need + per_clock - 1) / per_clock;
}

static size_t slot_of(const uint64_t *set, size_t mask, uint64_t x)
{
  size_t h = (size_t)((x * 0x9e3779b97f4a7c15ull) >> 32) & mask;
  while (set[h] != UINT64_MAX && set[h] != x) h = (h + 1) & mask;
  return h;
}

/* Passes an intent on a table placed by intents (AU_PLACE_HOT/_ADAPTIVE) to the node's
 * placer, with clocks turned into times by the worker's clock rate, each actor once (and
 * in adaptive placement only those worth claiming). */
static int intent_send(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                       au_clock_t start, au_clock_t end)
{
  au_node_t *node = w->node;
  obuf_t *b = &w->intent_buf;
  b->len = 0;
  /* hash sets of the actors and keys seen (a batch names an actor many times; the placer
   * should look each up once), with each actor's distinct keys, in the worker's scratch */
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (!w->seen || w->seen_cap < cap) {
    free(w->seen);
    w->seen = malloc(cap * (3 * sizeof(uint64_t) + sizeof(uint32_t)));
    if (!w->seen) {
      w->seen_cap = 0;
      return AU_ENOMEM;
    }
    w->seen_cap = cap;
  }
  const size_t mask = cap - 1;
  /* the allocation: actors, keys, the actors' slots in the order first named (seen_cap
   * each), then each actor's count of distinct keys */
  const size_t stride = w->seen_cap;
  uint64_t *seen = w->seen, *seen_keys = seen + stride, *order = seen + 2 * stride;
  uint32_t *count = (uint32_t *)(seen + 3 * stride);
  memset(seen, 0xff, cap * 8); /* UINT64_MAX: empty (no actor id or key is that large) */
  /* (an id of UINT64_MAX goes uncounted: it is the sets' empty mark) */
  const int by_keys = t->place == AU_PLACE_ADAPTIVE && (t->group > 1 || t->ids);
  if (by_keys) memset(seen_keys, 0xff, cap * 8);
  size_t nactors = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t actor = table_actor_of(t, keys[i]);
    if (by_keys) {
      size_t k = slot_of(seen_keys, mask, keys[i]);
      if (seen_keys[k] == keys[i]) continue; /* the key is counted already */
      seen_keys[k] = keys[i];
    }
    size_t h = slot_of(seen, mask, actor);
    if (seen[h] == actor) {
      count[h]++;
      continue;
    }
    seen[h] = actor;
    count[h] = 1;
    order[nactors++] = h;
  }
  const psm_intent_t head = {.t = t,
                             .from_ns = clock_rate_eta(&w->rate, w->clock, start),
                             .until_ns = clock_rate_eta(&w->rate, w->clock, end),
                             .worker = (uint32_t)w->id,
                             .tick_ns = (float)w->rate.ns_per_tick,
                             .start_clock = (uint64_t)start,
                             .end_clock = (uint64_t)end};
  for (size_t i = 0; i < nactors; i++) {
    const uint64_t actor = seen[order[i]];
    if (!worth_claiming(t, count[order[i]], end - start)) {
      counter_add(&w->intent_sparse, 1);
      continue;
    }
    if (au_trace_enabled(node->rt))
      au__trace(node->rt, TRACE_INTENT, (uint64_t)t->id, actor, (uint64_t)node->rank,
                (uint64_t)w->id);
    if (psm_intent_add(b, &head, actor) != 0) return AU_ENOMEM;
  }
  if (!b->len) return 0;
  return au_send_to(node->rt, (uint32_t)node->rank, PS_PLACER_PORT, PS_INTENT, b->p, b->len);
}

/* An intent whose keys (or ids) were checked: counted, and passed on where the table is
 * placed by intents. */
static int intent_pass(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                       au_clock_t start, au_clock_t end)
{
  counter_add(&w->intents, 1);
  counter_add(&w->intent_keys, n);
  /* tables placed by intents hear of it (and trace each actor it names); the others
   * only count it (and trace the first key's actor) */
  if (w->node->nodes > 1 && (t->place == AU_PLACE_HOT || t->place == AU_PLACE_ADAPTIVE))
    return intent_send(w, t, keys, n, start, end);
  if (au_trace_enabled(w->node->rt) && n)
    au__trace(w->node->rt, TRACE_INTENT, (uint64_t)t->id, table_actor_of(t, keys[0]),
              (uint64_t)w->node->rank, (uint64_t)w->id);
  return 0;
}

int au_worker_intent(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                     au_clock_t start, au_clock_t end)
{
  if (!w || !t || start >= end) return AU_EINVAL;
  int rc = check_keys(t, keys, n);
  return rc != 0 ? rc : intent_pass(w, t, keys, n, start, end);
}

int au_worker_ids_intent(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n,
                         au_clock_t start, au_clock_t end)
{
  if (!w || !t || start >= end || (n && !ids)) return AU_EINVAL;
  return intent_pass(w, ids_table(t), ids, n, start, end);
}

/* The step found rows it lacks: ask their owners, unless a link is congested. */
static int fetch_missing(au_worker_t *w)
{
  au_node_t *n = w->node;
  wremote_t *r = &w->remote;
  for (int node = 0; node < n->nodes; node++) {
    if (node == n->rank) continue;
    if (au_link_wait(w->actor, (uint32_t)node, MSG_STEP)) {
      /* drop this step's requests: the wake-up re-runs the step, which asks again */
      r->link_wait = 1;
      remote_step_done(w, 0);
      for (int i = 0; i < r->nbufs; i++) r->req[i].len = 0;
      return AU_EAGAIN;
    }
  }
  int rc = remote_send_requests(w);
  return rc == 0 ? AU_EAGAIN : rc; /* requests in flight (or already): wait */
}

/* Actors of a relocating table that this step lacks: one PS_WANT per step and table. */
typedef struct wants {
  au_table_t *t;
  obuf_t buf; /* the PS_WANT message (psmsg.c) */
  uint64_t last;
  uint32_t n;
  size_t rows; /* rows of the step waiting for these actors */
} wants_t;

static int want(wants_t *ws, au_table_t *t, uint64_t actor)
{
  if (ws->n && ws->last == actor) return 0; /* runs of one actor are common */
  if (psm_want_add(&ws->buf, t, actor) != 0) return AU_ENOMEM;
  ws->n++;
  ws->last = actor;
  return 0;
}

/* Sends the step's wants to the placer: the worker then waits for PS_ARRIVED (PS_WANT), or
 * fetches the rows meanwhile (PS_HINT). */
static int send_wants(au_worker_t *w, wants_t *ws, uint32_t type)
{
  au_node_t *n = w->node;
  int rc = au_send_to(n->rt, (uint32_t)n->rank, PS_PLACER_PORT, type, ws->buf.p, ws->buf.len);
  free(ws->buf.p);
  ws->buf = (obuf_t){0};
  ws->n = 0;
  if (rc != 0 || type == PS_HINT) return rc;
  w->wants = 1;
  return AU_EAGAIN;
}

/* Row of key k for this step: local, fetched earlier in the step, or NULL (requested,
 * or wanted here). *remote says which. A replicated table's actors are copied here and a
 * relocating table's moved here (ws: the step waits); a contended one's rows are fetched
 * and the actor hinted at (hs), so nodes that need the same actors at once still make
 * progress (relocation.c). */
static void *step_row(au_worker_t *w, au_table_t *t, au_key_t k, int *remote, wants_t *ws,
                      wants_t *hs)
{
  void *row = table_row(t, k);
  *remote = 0;
  if (row || w->node->nodes == 1) return row;
  if (t->place == AU_PLACE_RELOCATE || t->place == AU_PLACE_REPLICATE) {
    const int fetch = t->contended && atomic_load_explicit(&t->contended[k >> t->group_shift],
                                                           memory_order_relaxed);
    wants_t *to = fetch ? hs : ws;
    to->t = t;
    if (want(to, t, k >> t->group_shift) != 0) w->remote.failed = AU_ENOMEM;
    if (!fetch) {
      ws->rows++;
      return NULL;
    }
  }
  int requested;
  row = remote_row(w, t, k, &requested);
  *remote = row != NULL;
  return row;
}

/* The step lacks `missing` rows: ask for them, the way the table places them. A row that
 * has to move here counts as a remote access (a fetched one counts when it is used). */
static int lacking(au_worker_t *w, wants_t *ws, wants_t *hs, size_t missing)
{
  if (w->node->nodes == 1) return AU_EAGAIN;
  if (hs->n) send_wants(w, hs, PS_HINT);
  const size_t waiting = ws->rows;
  if (ws->n) {
    counter_add(&w->rows_remote, waiting);
    int rc = send_wants(w, ws, PS_WANT);
    if (rc != AU_EAGAIN || waiting == missing) return rc; /* nothing to fetch */
  }
  return fetch_missing(w);
}

int au_view_acquire(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n, au_view_t *v)
{
  if (!w || !t || !v || (n && !keys)) return AU_EINVAL;
  if (node_bounded(w->node)) {
    int rc = au_worker_sync(w);
    if (rc != 0) return rc;
  }
  void **rows = rows_alloc(w, n ? n : 1);
  if (!rows) return AU_ENOMEM;
  uint8_t *remote = NULL;
  size_t missing = 0, nremote = 0, i = 0;
  /* Fast path, once per key per step: every row here, the table's fields in locals (the
   * stores to rows[] cannot alias them, but the atomic state load stops the compiler
   * from proving it). The first key that is not local goes on in the loop below. */
  const uint64_t nkeys = t->keys, mask = t->group - 1;
  const uint32_t shift = t->group_shift;
  const size_t row_bytes = t->row_bytes;
  param_actor_t *const actors = t->actors;
  for (; i < n; i++) {
    au_key_t k = keys[i];
    if (k >= nkeys) return AU_ERANGE;
    param_actor_t *pa = &actors[k >> shift];
    uint8_t st = atomic_load_explicit(&pa->state, memory_order_acquire);
    if (st != PA_OWNER && st != PA_REPLICA) break;
    rows[i] = (char *)pa->values + (size_t)(k & mask) * row_bytes;
  }
  wants_t ws = {0}, hs = {0};
  for (; i < n; i++) {
    if (keys[i] >= t->keys) {
      free(ws.buf.p), free(hs.buf.p);
      return AU_ERANGE;
    }
    int is_remote;
    rows[i] = step_row(w, t, keys[i], &is_remote, &ws, &hs);
    if (w->remote.failed) {
      free(ws.buf.p), free(hs.buf.p);
      return w->remote.failed;
    }
    if (!rows[i]) {
      missing++;
      continue;
    }
    if (is_remote) {
      if (!remote) {
        remote = (uint8_t *)(void *)rows_alloc(w, n / sizeof(void *) + 1);
        if (!remote) return AU_ENOMEM;
        memset(remote, 0, n);
      }
      remote[i] = 1;
      nremote++;
    }
  }
  if (missing) return lacking(w, &ws, &hs, missing);
  if (hs.n) send_wants(w, &hs, PS_HINT); /* rows fetched earlier in the step: hinted again */
  *v = (au_view_t){.rows = rows,
                   .n = n,
                   .dim = t->dim,
                   .au__inline = t->hogwild && t->type == AU_F32 ? 1 + (int)t->optim : 0,
                   .au__lr = t->lr,
                   .au__kernel = t->optim == AU_OPTIM_NONE ? t->kernel : NULL,
                   .au__kernel_arg = t->kernel_arg,
                   .au__remote = remote,
                   .au__keys = keys,
                   .au__worker = w,
                   .au__table = t};
  w->views++;
  counter_add(&w->rows_local, n - nremote);
  if (nremote) counter_add(&w->rows_remote, nremote);
  return 0;
}

void au__view_update_remote(const au_view_t *v, size_t i, const void *update)
{
  au_table_t *t = v->au__table;
  /* the step's copy sees its own updates (through its copy of the optimizer's state);
   * the owner gets the update after the step and applies it to its own */
  table_apply(t, v->rows[i], update);
  au_worker_t *w = v->au__worker;
  int rc = remote_push(w, t, v->au__keys[i], update);
  if (rc != 0 && !w->remote.failed) w->remote.failed = rc;
}

void au__view_update_optim(const au_view_t *v, size_t i, const void *update)
{
  table_apply(v->au__table, v->rows[i], update);
}

void au_view_release(au_worker_t *w, au_view_t *v)
{
  au_table_t *t = v->au__table;
  if (t) {
    w->views--;
    /* the view's local rows may have been written: mark them for the replica tick (after
     * the writes; a row fetched from elsewhere went back as a push) */
    if (w->node->nodes > 1 && table_marks(t)) {
      uint64_t last = UINT64_MAX; /* once per run of keys of one actor */
      for (size_t i = 0; i < v->n; i++) {
        uint64_t actor = v->au__keys[i] >> t->group_shift;
        if (actor == last || (v->au__remote && v->au__remote[i])) continue;
        table_mark(t, v->au__keys[i]);
        last = actor;
      }
    }
  }
  v->au__table = NULL;
}

int au_worker_pull(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n, void *out)
{
  if (!w || !t || (n && !out)) return AU_EINVAL;
  int rc = check_keys(t, keys, n);
  if (rc != 0) return rc;
  if (node_bounded(w->node) && (rc = au_worker_sync(w)) != 0) return rc;
  size_t missing = 0, nremote = 0;
  wants_t ws = {0}, hs = {0};
  for (size_t i = 0; i < n; i++) {
    int is_remote;
    void *row = step_row(w, t, keys[i], &is_remote, &ws, &hs);
    if (w->remote.failed) {
      free(ws.buf.p), free(hs.buf.p);
      return w->remote.failed;
    }
    if (!row) {
      missing++;
      continue;
    }
    nremote += (size_t)is_remote;
    if (!missing) kernel_copy_row((char *)out + i * t->update_bytes, row, t->dim);
  }
  if (missing) return lacking(w, &ws, &hs, missing);
  if (hs.n) send_wants(w, &hs, PS_HINT);
  counter_add(&w->rows_local, n - nremote);
  if (nremote) counter_add(&w->rows_remote, nremote);
  return 0;
}

int au_worker_push(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                   const void *deltas)
{
  if (!w || !t || (n && !deltas)) return AU_EINVAL;
  int rc = check_keys(t, keys, n);
  if (rc != 0) return rc;
  size_t nremote = 0;
  for (size_t i = 0; i < n; i++) {
    const void *d = (const char *)deltas + i * t->update_bytes;
    void *row = table_row(t, keys[i]);
    if (row) {
      table_apply(t, row, d);
      table_mark(t, keys[i]);
    } else {
      /* held by another node: the delta goes there after the step */
      if ((rc = remote_push(w, t, keys[i], d)) != 0) return rc;
      nremote++;
    }
  }
  counter_add(&w->rows_local, n - nremote);
  if (nremote) counter_add(&w->rows_remote, nremote);
  return 0;
}

/* Marks the actor of an id held here used by this node's workers (after the use), as
 * table_mark does a dense table's: a relocating id table's actor in use stays
 * (relocation.c, staying). */
static void ids_mark(au_table_t *f, uint64_t id, uint64_t *last)
{
  if (!table_marks(f)) return;
  uint64_t actor = table_actor_of(f, id);
  if (actor == *last) return;
  atomic_store_explicit(&f->actors[actor].dirty, 1, memory_order_release);
  *last = actor;
}

/* A contended relocating id table's actor is hinted at (asked to move here by the way,
 * relocation.c) only if the step names at least an eighth of its bytes: a move ships the
 * whole actor. With every contended actor hinted, augur-kge --entity-table ids --mode
 * relocate on 4 nodes at 200 us, whose batches name about 14 entities (22 KB) of each of
 * the 84 actors of 1.7 MB, moved every actor every few ms, saturated both cores with
 * copies and finished no epoch in 200 s (docs/kge.md). */
#define HINT_IDS_SHARE 8

/* Counts the ids of a pull per actor in w->named (relocate: hint_worth reads them); 0,
 * or AU_ENOMEM. named_clear sets them back to 0. */
static int named_count(au_worker_t *w, const au_table_t *f, const uint64_t *ids, size_t n)
{
  if (w->named_cap < f->nactors) {
    uint32_t *c = realloc(w->named, f->nactors * sizeof(*c));
    if (!c) return AU_ENOMEM;
    memset(c + w->named_cap, 0, (f->nactors - w->named_cap) * sizeof(*c));
    w->named = c;
    w->named_cap = f->nactors;
  }
  for (size_t i = 0; i < n; i++) w->named[table_actor_of(f, ids[i])]++;
  return 0;
}

static void named_clear(au_worker_t *w, const au_table_t *f, const uint64_t *ids, size_t n)
{
  for (size_t i = 0; i < n; i++) w->named[table_actor_of(f, ids[i])] = 0;
}

static int hint_worth(const au_worker_t *w, const au_table_t *f, uint64_t actor)
{
  return (uint64_t)w->named[actor] * f->row_bytes * HINT_IDS_SHARE >= table_actor_bytes(f);
}

int au_worker_ids_pull(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n, void *out)
{
  if (!w || !t || (n && (!ids || !out))) return AU_EINVAL;
  int rc;
  if (node_bounded(w->node) && (rc = au_worker_sync(w)) != 0) return rc;
  au_table_t *f = ids_table(t);
  size_t missing = 0, nremote = 0;
  wants_t ws = {0}, hs = {0};
  /* which ids are another node's (1), or read from a replica here (2), decided once: an
   * actor that leaves during the step keeps its buckets here, and a replica that is
   * dropped its blob, until the step is over (grace.c) */
  uint8_t *away =
      w->node->nodes > 1 ? (uint8_t *)(void *)rows_alloc(w, n / sizeof(void *) + 1) : NULL;
  if (w->node->nodes > 1 && !away) return AU_ENOMEM;
  const int relocating = away && f->place == AU_PLACE_RELOCATE && f->contended;
  if (relocating && named_count(w, f, ids, n) != 0) return AU_ENOMEM;
  /* first what other nodes hold, so that a step re-run for them counts its uses here once:
   * fetched, or (relocate) their actors asked to move here and waited for, unless they are
   * contended (fetched then, and hinted at) */
  for (size_t i = 0; away && i < n; i++) {
    const uint64_t actor = table_actor_of(f, ids[i]);
    const uint8_t st = atomic_load_explicit(&f->actors[actor].state, memory_order_acquire);
    away[i] = st == PA_OWNER ? 0 : st == PA_REPLICA ? 2 : 1;
    if (away[i] != 1) continue;
    if (f->place == AU_PLACE_RELOCATE || f->place == AU_PLACE_REPLICATE) {
      /* moved or copied here, and waited for (a contended relocating actor is fetched) */
      const int fetch =
          f->contended && atomic_load_explicit(&f->contended[actor], memory_order_relaxed);
      wants_t *to = fetch ? &hs : &ws;
      to->t = f;
      if ((!fetch || !relocating || hint_worth(w, f, actor)) && want(to, f, actor) != 0)
        w->remote.failed = AU_ENOMEM;
      if (!fetch) {
        ws.rows++;
        missing++;
        nremote++;
        continue;
      }
    }
    int requested;
    if (!w->remote.failed && !remote_row(w, f, ids[i], &requested)) missing++;
    if (w->remote.failed) {
      free(ws.buf.p), free(hs.buf.p);
      if (relocating) named_clear(w, f, ids, n);
      return w->remote.failed;
    }
    nremote++;
  }
  if (relocating) named_clear(w, f, ids, n);
  if (missing) return lacking(w, &ws, &hs, missing);
  if (hs.n) send_wants(w, &hs, PS_HINT);
  void *scratch = rows_alloc(w, f->row_bytes / sizeof(void *) + 1);
  if (!scratch) return AU_ENOMEM;
  uint64_t last = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    char *o = (char *)out + i * f->update_bytes;
    int requested;
    if (away && away[i] == 1) {
      const void *row = remote_row(w, f, ids[i], &requested); /* there, and ready */
      if (!row) return w->remote.failed ? w->remote.failed : AU_ENOMEM;
      memcpy(o, row, f->update_bytes);
    } else if (away && away[i] == 2) {
      ids_pull_replica(t, ids[i], (uint64_t)w->clock, o, scratch);
    } else {
      ids_pull_here(t, ids[i], (uint64_t)w->clock, o, scratch);
      ids_mark(f, ids[i], &last);
    }
  }
  counter_add(&w->rows_local, n - nremote);
  if (nremote) counter_add(&w->rows_remote, nremote);
  return 0;
}

int au_worker_ids_push(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n,
                       const void *updates)
{
  if (!w || !t || (n && (!ids || !updates))) return AU_EINVAL;
  au_table_t *f = ids_table(t);
  size_t nremote = 0;
  uint64_t last = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    const void *u = (const char *)updates + i * f->update_bytes;
    if (ids_owns(t, ids[i])) {
      ids_serve_push(t, ids[i], u, (uint64_t)w->clock);
      ids_mark(f, ids[i], &last);
      continue;
    }
    /* the owner applies it, after the step */
    int rc = remote_push(w, f, ids[i], u);
    if (rc != 0) return rc;
    nremote++;
  }
  counter_add(&w->rows_local, n - nremote);
  if (nremote) counter_add(&w->rows_remote, nremote);
  return 0;
}

void au_node_stats(const au_node_t *n, au_node_stats_t *out)
{
  *out = (au_node_stats_t){0};
  for (int i = 0; i < n->nworkers; i++) {
    au_worker_t *w = n->workers[i];
    out->steps += counter_get(&w->steps);
    out->rows_local += counter_get(&w->rows_local);
    out->rows_remote += counter_get(&w->rows_remote);
    out->intents += counter_get(&w->intents);
    out->intent_keys += counter_get(&w->intent_keys);
    out->intent_sparse += counter_get(&w->intent_sparse);
    out->reads_waited += counter_get(&w->reads_waited);
    out->wait_ns += counter_get(&w->wait_ns);
  }
  placer_stats(n, out);
  out->bytes_sent = au__bytes_sent(n->rt);
  /* by kind: every message type of the protocol is one of these */
  static const struct {
    uint32_t type;
    int kind; /* 0 fetch, 1 push, 2 move, 3 replica, 4 control */
  } kinds[] = {{PS_REQ, 0},         {PS_ROWS, 0},      {PS_ERR, 0},       {PS_FWD_REQ, 0},
               {PS_PUSH, 1},        {PS_FWD_PUSH, 1},  {PS_WANT, 2},      {PS_ARRIVED, 2},
               {PS_MOVE_REQ, 2},    {PS_MOVE_DATA, 2}, {PS_OWNER, 2},     {PS_REP_REQ, 3},
               {PS_REP_DATA, 3},    {PS_SYNC, 3},      {PS_FRESH, 3},     {PS_REP_DROP, 3},
               {PS_REP_GONE, 3},    {PS_INTENT, 4},    {PS_CLAIM, 4},     {PS_HINT, 4},
               {PS_BAR_ARRIVE, 4},  {PS_BAR_DONE, 4},  {PS_BAR_GO, 4},    {PS_BAR_FENCE, 4},
               {PS_BAR_APPLIED, 4}, {PS_BAR_OPEN, 4},  {PS_CLK_FLUSH, 4}, {PS_CLK_FRESH, 4}};
  _Static_assert(PS_CLK_FRESH - PS_REQ < AU__BYTES_TYPES, "one byte counter per message type");
  uint64_t *by[5] = {&out->bytes_fetch, &out->bytes_push, &out->bytes_move, &out->bytes_replica,
                     &out->bytes_control};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    *by[kinds[i].kind] += au__bytes_sent_type(n->rt, kinds[i].type);
}
