/* placement.c — moving parameter actors between nodes (relocation). One placer actor per
 * node does all of it, so the bookkeeping of an actor in motion needs no lock.
 *
 * A worker that lacks rows of a relocating table tells its placer which actors it wants
 * (PS_WANT) and waits. The placer asks the actor's owner to move it here (PS_MOVE_REQ,
 * forwarded through the home node when it went elsewhere). The owner marks it
 * handing-off, waits until every local worker that might hold a view of it has finished
 * its step (a grace period over the workers' step epochs), ships the values (PS_MOVE_DATA)
 * and tells every other node (PS_OWNER; the home node must know, the others save a hop). Rows
 * requested or pushed meanwhile are queued and sent on after the values, on the same connection, so
 * they arrive after them.
 *
 * The invariants: exactly one node holds an actor as owner or is handing it off; no
 * update is lost (a push reaches the values wherever they are, once); a node keeps an
 * actor that arrived for at least HOLD_NS before it lets it go again, so that the workers
 * that waited for it get to use it (no ping-pong without progress).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/placement.h"
#include "actors/psmsg.h"
#include "runtime/rt.h"
#include "runtime/trace.h"

#define HOLD_NS (1000 * 1000ull) /* a moved actor stays at least this long */

static uint64_t rec_key(int table, uint64_t actor)
{
  return ((uint64_t)table << 48 | actor) + 1; /* nonzero, for the map */
}

rec_t *rec_get(struct placer *p, au_table_t *t, uint64_t actor)
{
  uint64_t k = rec_key(t->id, actor);
  rec_t *r = u64map_get(&p->recs, k);
  if (r) return r;
  r = calloc(1, sizeof(*r));
  if (!r || u64map_put(&p->recs, k, r) != 0) {
    free(r);
    return NULL;
  }
  r->t = t;
  r->actor = actor;
  r->to = -1;
  r->held_tail = &r->held;
  return r;
}

static int home_of(const au_node_t *n, uint64_t actor)
{
  return (int)(actor % (uint64_t)n->nodes);
}

static void hold(struct placer *p, rec_t *r, const au_msg_t *m, uint32_t type, const void *data,
                 uint32_t len)
{
  held_t *h = malloc(sizeof(*h) + len);
  if (!h) {
    fprintf(stderr, "augur: out of memory holding a message for a moving actor\n");
    return;
  }
  h->next = NULL;
  h->type = type;
  h->from_node = m ? m->from_node : 0;
  h->from_port = m ? m->from_port : AU_NO_PORT;
  h->len = len;
  memcpy(h->data, data, len);
  *r->held_tail = h;
  r->held_tail = &h->next;
  placer_pending(p, 1);
}

void placement_hold(struct placer *p, rec_t *r, uint32_t type, const void *data, uint32_t len)
{
  hold(p, r, NULL, type, data, len);
}

/* --- one key of a forwarded request or push --------------------------------------- */

/* Counts and traces the forward of a one-key request or push. */
static void count_forward(struct placer *p, const psm_rows_t *one, int to)
{
  counter_add(&p->forwards, 1);
  trace_emit(p->node->rt, TRACE_FORWARD, (uint64_t)one->t->id,
             psm_rows_key(one, 0) >> one->t->group_shift, (uint64_t)to, 1);
}

/* A one-key PS_REQ / PS_PUSH payload, alone, to the server of node `to`. */
static void forward_one(struct placer *p, uint32_t type, const uint8_t *one, uint32_t len, int to)
{
  psm_rows_t m;
  if (psm_rows_decode(p->node, type, one, len, &m, NULL) != 0 || m.n != 1) return;
  count_forward(p, &m, to);
  au_send_to(p->node->rt, (uint32_t)to, PS_SERVER_PORT(0), type, one, len);
}

/* A one-key request or push for an actor that is here now: serve it as a server would. */
static void serve_one(struct placer *p, uint32_t type, const uint8_t *one, uint32_t len)
{
  remote_serve_local(p->node, type, one, len, &p->scratch);
}

/* Where a message for an actor that is not here should go next. */
int placement_next_hop(const au_node_t *n, const rec_t *r)
{
  int home = home_of(n, r->actor);
  return n->rank == home ? (int)pa_of(r)->owner : home;
}

/* Where a request or push for an actor that is not here goes on to: the owner as this
 * node knows it. Following those links ends at the owner: a node points at a newer
 * owner than the one that sent to it (versions only grow: ship, on_owner). The home
 * when this node has no better idea. */
static int forward_to(const au_node_t *n, const rec_t *r)
{
  int to = (int)pa_of(r)->owner;
  return to == n->rank ? placement_next_hop(n, r) : to;
}

/* A one-key request or push for r: served, held while r moves, or forwarded; with
 * `out`, forwarded keys are batched per node (the caller sends them), else sent alone. */
static void route_one(struct placer *p, rec_t *r, const au_msg_t *m, uint32_t type,
                      const uint8_t *one, uint32_t len, obuf_t *out)
{
  uint8_t st = atomic_load_explicit(&pa_of(r)->state, memory_order_acquire);
  if (st == PA_OWNER) {
    serve_one(p, type, one, len);
    return;
  }
  if (st == PA_HANDING_OFF || r->requested) {
    hold(p, r, m, type, one, len);
    return;
  }
  int to = forward_to(p->node, r);
  psm_rows_t m1;
  if (!out || psm_rows_decode(p->node, type, one, len, &m1, NULL) != 0 ||
      psm_rows_add_entry(&out[to], &m1, 0) != 0) {
    forward_one(p, type, one, len, to); /* alone: no batch, or no room in it */
    return;
  }
  count_forward(p, &m1, to);
}

/* --- moves -------------------------------------------------------------------------- */

static void ask_to_move_here(struct placer *p, rec_t *r, uint32_t hops)
{
  au_node_t *n = p->node;
  r->requested = 1;
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(
      msg, PS_MOVE_REQ,
      &(psm_actor_msg_t){.t = r->t, .actor = r->actor, .node = (uint32_t)n->rank, .hops = hops});
  au_send_to(n->rt, (uint32_t)placement_next_hop(n, r), PS_PLACER_PORT, PS_MOVE_REQ, msg, len);
}

void notify_waiters(struct placer *p, rec_t *r)
{
  for (int i = 0; i < r->nwaiters; i++)
    au_send(p->node->workers[r->waiters[i]]->actor, PS_ARRIVED, NULL, 0);
  r->nwaiters = 0;
}

uint64_t placement_rec_key(const rec_t *r)
{
  return rec_key(r->t->id, r->actor);
}

int placement_grace_begin(struct placer *p, rec_t *r, uint32_t kind)
{
  au_node_t *n = p->node;
  /* everyone who may touch the values without asking: workers (views, pushes) and
   * servers (answers, pushes from other nodes) */
  free(r->snap);
  r->snap = malloc(((size_t)n->nworkers + (size_t)n->nservers + 1) * sizeof(uint64_t));
  if (!r->snap) return AU_ENOMEM;
  for (int i = 0; i < n->nworkers; i++) r->snap[i] = atomic_load(&n->workers[i]->epoch);
  for (int i = 0; i < n->nservers; i++) r->snap[n->nworkers + i] = remote_server_epoch(n, i);
  uint64_t k = placement_rec_key(r);
  au_send(p->actor, kind, &k, sizeof(k));
  return 0;
}

rec_t *placement_grace_poll(struct placer *p, const au_msg_t *m)
{
  uint64_t k;
  if (m->len != sizeof(k)) return NULL;
  memcpy(&k, m->data, sizeof(k));
  rec_t *r = u64map_get(&p->recs, k);
  if (!r || !r->snap) return NULL;
  if (placement_grace_over(p, r)) return r;
  au_send(p->actor, m->type, &k, sizeof(k)); /* look again after the others */
  return NULL;
}

int placement_grace_over(struct placer *p, rec_t *r)
{
  au_node_t *n = p->node;
  for (int i = 0; i < n->nworkers; i++)
    if ((r->snap[i] & 1) && atomic_load(&n->workers[i]->epoch) == r->snap[i]) return 0;
  for (int i = 0; i < n->nservers; i++) {
    uint64_t s = r->snap[n->nworkers + i];
    if ((s & 1) && remote_server_epoch(n, i) == s) return 0;
  }
  return 1;
}

void placement_hand_off(struct placer *p, rec_t *r, int to)
{
  r->handing_off = 1;
  r->to = to;
  placer_pending(p, 1); /* until ship() */
  /* seq_cst: ordered before the epoch reads of the grace period; a worker's step start
   * (a seq_cst increment) is followed by its state load, so either it sees HANDING_OFF
   * or the snapshot sees it inside its step */
  atomic_store(&pa_of(r)->state, PA_HANDING_OFF);
  if (placement_grace_begin(p, r, PL_GRACE) != 0) {
    fprintf(stderr, "augur: out of memory handing off an actor\n");
    atomic_store(&pa_of(r)->state, PA_OWNER);
    r->handing_off = 0;
    placer_pending(p, -1);
  }
}

static void ship(struct placer *p, rec_t *r)
{
  au_node_t *n = p->node;
  au_table_t *t = r->t;
  param_actor_t *pa = pa_of(r);
  size_t bytes = (size_t)t->group * t->row_bytes;
  uint16_t version = (uint16_t)(pa->version + 1);
  trace_emit(n->rt, TRACE_RELOC_START, (uint64_t)t->id, r->actor, (uint64_t)r->to,
             trace_flow_id((uint64_t)t->id, r->actor, version));
  au_outbuf_t ob;
  uint8_t *out = au_send_to_start(n->rt, (uint32_t)r->to, PS_PLACER_PORT, PS_MOVE_DATA,
                                  psm_values_len(t), &ob);
  if (!out) {
    fprintf(stderr, "augur[rank %d]: cannot ship actor %llu: %s\n", n->rank,
            (unsigned long long)r->actor, au_strerror(ob.rc));
    return;
  }
  memcpy(psm_values_encode(out, t, r->actor, version), pa->values, bytes);
  au_send_to_finish(&ob);
  table_values_free(t, r->actor, pa->values);
  pa->values = NULL;
  pa->owner = (uint32_t)r->to;
  pa->version = version;
  atomic_store(&pa->state, PA_REMOTE);
  counter_add(&p->moves_out, 1);
  r->handing_off = 0;
  /* the news to every other node: the home must know, the others save a forward */
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(
      msg, PS_OWNER,
      &(psm_actor_msg_t){.t = t, .actor = r->actor, .node = (uint32_t)r->to, .version = version});
  for (int node = 0; node < n->nodes; node++)
    if (node != n->rank && node != r->to)
      au_send_to(n->rt, (uint32_t)node, PS_PLACER_PORT, PS_OWNER, msg, len);
  /* what waited for the move goes on to the new owner, after the values */
  held_t *h = r->held;
  r->held = NULL;
  r->held_tail = &r->held;
  while (h) {
    held_t *next = h->next;
    if (h->type == PS_MOVE_REQ || h->type == PS_CLAIM)
      au_send_to(n->rt, (uint32_t)r->to, PS_PLACER_PORT, h->type, h->data, h->len);
    else
      forward_one(p, h->type, h->data, h->len, r->to);
    free(h);
    placer_pending(p, -1);
    h = next;
  }
  /* local workers want it back: ask (the new owner holds it a while first) */
  if (r->nwaiters) ask_to_move_here(p, r, 0);
  placer_pending(p, -1); /* the hand-off is over */
}

static void on_move_req(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_actor_msg_t q;
  psm_why_t why;
  if (psm_actor_decode(n, PS_MOVE_REQ, m->data, m->len, &q, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed move request from node %u: %s\n", n->rank,
            m->from_node, why.text);
    return;
  }
  rec_t *r = rec_get(p, q.t, q.actor);
  if (!r) return;
  param_actor_t *pa = pa_of(r);
  uint8_t st = atomic_load(&pa->state);
  if (st == PA_OWNER) {
    if ((int)q.node == n->rank) return; /* already here */
    if (au_now_ns() - r->arrived_ns < HOLD_NS) {
      hold(p, r, m, PS_MOVE_REQ, m->data, m->len); /* PL_TICK lets it go later */
      if (!p->timer_armed) {
        au_timer_id_t id;
        p->timer_armed = au_timer_start(n->rt, p->actor, PL_TICK, 1, 0, &id) == 0;
      }
      return;
    }
    placement_hand_off(p, r, (int)q.node);
  } else if (st == PA_HANDING_OFF) {
    hold(p, r, m, PS_MOVE_REQ, m->data, m->len); /* ship() sends it on to the new owner */
  } else {
    /* Not here, and not leaving: toward the owner, even when this node waits for the
     * actor itself. Holding it here instead deadlocked: a request that came back to its
     * own node (or to the home, which alone knows the owner) waited for an actor that
     * nobody had been asked for (4 nodes, relocate). The home node knows the owner. */
    q.hops++;
    if (q.hops > 4u * (uint32_t)n->nodes)
      fprintf(stderr,
              "augur[rank %d]: move request for actor %llu still chasing it after %u hops\n",
              n->rank, (unsigned long long)q.actor, q.hops);
    uint8_t fwd[PSM_ACTOR_MAX];
    size_t len = psm_actor_encode(fwd, PS_MOVE_REQ, &q);
    counter_add(&p->forwards, 1);
    trace_emit(n->rt, TRACE_FORWARD, (uint64_t)q.t->id, q.actor, (uint64_t)placement_next_hop(n, r),
               q.hops);
    au_send_to(n->rt, (uint32_t)placement_next_hop(n, r), PS_PLACER_PORT, PS_MOVE_REQ, fwd, len);
  }
}

static void on_move_data(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_values_t v;
  psm_why_t why;
  if (psm_values_decode(n, m->data, m->len, &v, &why) != 0) {
    fprintf(stderr, "augur[rank %d]: malformed actor data from node %u: %s\n", n->rank,
            m->from_node, why.text);
    return;
  }
  au_table_t *t = v.t;
  const uint64_t actor = v.actor;
  const uint32_t tid = (uint32_t)t->id, ver = v.version;
  const size_t bytes = (size_t)t->group * t->row_bytes;
  rec_t *r = rec_get(p, t, actor);
  param_actor_t *pa = &t->actors[actor];
  void *values = table_values_alloc(t, actor);
  if (!r || !values) {
    fprintf(stderr, "augur[rank %d]: out of memory receiving actor %llu\n", n->rank,
            (unsigned long long)actor);
    return;
  }
  memcpy(values, v.values, bytes);
  pa->values = values;
  pa->owner = (uint32_t)n->rank;
  pa->version = (uint16_t)ver;
  atomic_store_explicit(&pa->state, PA_OWNER, memory_order_release);
  counter_add(&p->moves_in, 1);
  trace_emit(n->rt, TRACE_RELOC_END, tid, actor, (uint64_t)n->rank,
             trace_flow_id(tid, actor, (uint16_t)ver));
  r->requested = 0;
  r->arrived_ns = au_now_ns();
  intent_arrived(p, r);
  notify_waiters(p, r);
  /* requests and pushes that waited for it: serve them now; move requests wait out the
   * hold */
  held_t *h = r->held;
  r->held = NULL;
  r->held_tail = &r->held;
  while (h) {
    held_t *next = h->next;
    au_msg_t fake = {.from_node = h->from_node, .from_port = h->from_port};
    if (h->type == PS_MOVE_REQ)
      hold(p, r, &fake, h->type, h->data, h->len);
    else
      serve_one(p, h->type, h->data, h->len);
    free(h);
    placer_pending(p, -1);
    h = next;
  }
  if (r->held && !p->timer_armed) {
    au_timer_id_t id;
    p->timer_armed = au_timer_start(n->rt, p->actor, PL_TICK, 1, 0, &id) == 0;
  }
}

static void on_owner(struct placer *p, const au_msg_t *m)
{
  psm_actor_msg_t o;
  if (psm_actor_decode(p->node, PS_OWNER, m->data, m->len, &o, NULL) != 0) return;
  param_actor_t *pa = &o.t->actors[o.actor];
  /* newer news only (serial-number order: the version wraps) */
  if ((int16_t)(o.version - pa->version) <= 0) return;
  if (atomic_load(&pa->state) != PA_REMOTE) return; /* it is here: this node knows best */
  pa->owner = o.node;
  pa->version = o.version;
}

int add_waiter(rec_t *r, int worker)
{
  for (int j = 0; j < r->nwaiters; j++)
    if (r->waiters[j] == worker) return 0;
  if (r->nwaiters == r->capwaiters) {
    int cap = r->capwaiters ? 2 * r->capwaiters : 4;
    int *w = realloc(r->waiters, (size_t)cap * sizeof(int));
    if (!w) return AU_ENOMEM;
    r->waiters = w;
    r->capwaiters = cap;
  }
  r->waiters[r->nwaiters++] = worker;
  return 0;
}

/* A local worker wants these actors here. */
static void on_want(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_want_t want;
  int wid = (int)m->from_port - (int)PS_WORKER_PORT(0);
  if (wid < 0 || wid >= n->nworkers || psm_want_decode(n, m->data, m->len, &want, NULL) != 0)
    return;
  au_table_t *t = want.t;
  int arrived = 0;
  for (uint32_t i = 0; i < want.n; i++) {
    uint64_t actor = psm_want_actor(&want, i);
    uint8_t st = atomic_load(&t->actors[actor].state);
    if (st == PA_OWNER || st == PA_REPLICA) {
      arrived = 1; /* came in while the worker asked */
      continue;
    }
    rec_t *r = rec_get(p, t, actor);
    if (!r) continue;
    if (add_waiter(r, wid) != 0) continue;
    if (t->place == AU_PLACE_REPLICATE)
      replica_want(p, r);
    else if (!r->requested && !r->handing_off)
      ask_to_move_here(p, r, 0);
  }
  if (arrived) au_send(n->workers[wid]->actor, PS_ARRIVED, NULL, 0);
}

typedef struct fwd_ctx {
  struct placer *p;
  obuf_t *out; /* by node: the keys going on there, one message each */
} fwd_ctx_t;

static void route_one_cb(void *arg, au_table_t *t, uint64_t actor, const au_msg_t *m, uint32_t type,
                         const uint8_t *one, uint32_t len)
{
  fwd_ctx_t *c = arg;
  rec_t *r = rec_get(c->p, t, actor);
  if (r) route_one(c->p, r, m, type, one, len, c->out);
}

/* Requests and pushes a server found for actors not here: served, held or sent on, the
 * keys going to one node in one message (a step's keys of a moved actor are many). */
static void on_forward(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  uint32_t type = m->type == PS_FWD_REQ ? PS_REQ : PS_PUSH;
  fwd_ctx_t c = {p, calloc((size_t)n->nodes, sizeof(obuf_t))};
  remote_split(n, m, type, route_one_cb, &c);
  for (int node = 0; c.out && node < n->nodes; node++) {
    if (c.out[node].len)
      au_send_to(n->rt, (uint32_t)node, PS_SERVER_PORT(0), type, c.out[node].p, c.out[node].len);
    free(c.out[node].p);
  }
  free(c.out);
}

static void on_tick(struct placer *p)
{
  p->timer_armed = 0;
  int again = 0;
  u64map_t *map = &p->recs;
  for (size_t i = 0; i <= map->mask; i++) {
    rec_t *r = map->slot[i].key ? map->slot[i].val : NULL;
    if (!r || !r->held) continue;
    uint8_t st = atomic_load(&pa_of(r)->state);
    if (st != PA_OWNER || r->handing_off) continue;
    if (au_now_ns() - r->arrived_ns < HOLD_NS) {
      again = 1;
      continue;
    }
    /* the hold is over: the first move request wins, the others follow it */
    held_t *h = r->held;
    while (h && h->type != PS_MOVE_REQ) h = h->next;
    if (!h) continue;
    psm_actor_msg_t q;
    if (psm_actor_decode(p->node, PS_MOVE_REQ, h->data, h->len, &q, NULL) != 0) continue;
    const uint32_t requester = q.node;
    held_t **pp = &r->held;
    while (*pp != h) pp = &(*pp)->next;
    *pp = h->next;
    if (r->held_tail == &h->next) r->held_tail = pp;
    free(h);
    placement_hand_off(p, r, (int)requester);
    placer_pending(p, -1); /* after the hand-off counts */
  }
  if (again) {
    au_timer_id_t id;
    p->timer_armed = au_timer_start(p->node->rt, p->actor, PL_TICK, 1, 0, &id) == 0;
  }
}

static void placer_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  struct placer *p = *(struct placer **)state;
  switch (m->type) {
  case PS_WANT:
    on_want(p, m);
    break;
  case PS_MOVE_REQ:
    on_move_req(p, m);
    break;
  case PS_MOVE_DATA:
    on_move_data(p, m);
    break;
  case PS_OWNER:
    on_owner(p, m);
    break;
  case PS_FWD_REQ:
  case PS_FWD_PUSH:
    on_forward(p, m);
    break;
  case PL_TICK:
    on_tick(p);
    break;
  case PS_REP_REQ:
  case PS_REP_DATA:
  case PS_SYNC:
  case PS_FRESH:
  case PL_SYNC:
    replica_handle(p, m);
    break;
  case PS_INTENT:
  case PS_CLAIM:
  case PS_REP_DROP:
  case PS_REP_GONE:
  case PL_DROP_GRACE:
    intent_handle(p, m);
    break;
  case PL_GRACE: {
    rec_t *r = placement_grace_poll(p, m);
    if (r && r->handing_off) ship(p, r);
    break;
  }
  default:
    break;
  }
}

int placement_start(au_node_t *n)
{
  struct placer *p = calloc(1, sizeof(*p));
  if (!p || u64map_init(&p->recs, 6) != 0) {
    free(p);
    return AU_ENOMEM;
  }
  p->node = n;
  action_latency_init(&p->lat, 1000 * 1000); /* a first guess: 1 ms, until measured */
  int rc = au_actor_spawn(n->rt, &p->actor, placer_behaviour, sizeof(p));
  if (rc == 0) rc = au_port_register(n->rt, PS_PLACER_PORT, p->actor);
  if (rc != 0) {
    u64map_destroy(&p->recs);
    free(p);
    return rc;
  }
  *(struct placer **)au_actor_state(p->actor) = p;
  n->placer = p;
  return 0;
}

void placement_stats(const au_node_t *n, au_node_stats_t *st)
{
  struct placer *p = n->placer;
  if (!p) return;
  st->moves_in += counter_get(&p->moves_in);
  st->moves_out += counter_get(&p->moves_out);
  st->forwards += counter_get(&p->forwards);
  st->syncs += counter_get(&p->syncs);
  st->claims += counter_get(&p->claims_sent);
  st->releases += counter_get(&p->releases);
  st->replicas_made += counter_get(&p->replicas_made);
  st->replicas_dropped += counter_get(&p->replicas_dropped);
  long long held = atomic_load(&p->replicas_held);
  st->replicas += held > 0 ? (uint64_t)held : 0;
}

void placement_free(au_node_t *n)
{
  struct placer *p = n->placer;
  if (!p) return;
  for (size_t i = 0; i <= p->recs.mask; i++) {
    rec_t *r = p->recs.slot[i].key ? p->recs.slot[i].val : NULL;
    if (!r) continue;
    while (r->held) {
      held_t *h = r->held;
      r->held = h->next;
      free(h);
    }
    free(r->snap);
    free(r->waiters);
    replica_free(r);
    intent_free(r);
    free(r);
  }
  u64map_destroy(&p->recs);
  free(p->scratch.p);
  free(p);
  n->placer = NULL;
}
