/* relocation.c — moving parameter actors between nodes (placer.h).
 *
 * A node that wants an actor here asks its owner (PS_MOVE_REQ, forwarded through the home
 * node when it went elsewhere). The owner marks it handing-off, waits out a grace period
 * (grace.c), ships the values (PS_MOVE_DATA) and tells every other node (PS_OWNER; the
 * home node must know, the others save a hop). Rows requested or pushed meanwhile are
 * held and sent on after the values, on the same connection, so they arrive after them.
 *
 * An actor that arrived stays for its hold; one that is taken away within a few holds of
 * arriving is contended: its hold doubles (to 2 ms: RELOC_HOLD_EXP_MAX), and one left
 * alone for long halves it again. The hold travels with the actor and its owner news, and every
 * node marks a contended actor, for good (t->contended): a step that lacks its rows fetches them
 * and asks for the actor only by the way (PS_HINT), instead of waiting for it to move (PS_WANT). So
 * nodes that want the same actors at once all make progress, at worst at the speed of the classic
 * parameter server, and a contended actor settles down instead of bouncing.
 *
 * The invariants: exactly one node holds an actor as owner or is handing it off; no
 * update is lost (a push reaches the values wherever they are, once); a node keeps an
 * actor that arrived for its hold before it lets it go again, and serves what was held
 * for it first (no ping-pong without progress); a message chasing an actor goes through
 * the home node, which knows the owner.
 */
#include <stdio.h>
#include <stdlib.h>

#include "actors/idle.h"
#include "actors/placer.h"

/* A contended actor's rows are fetched, not waited for (worker.c). */
static void set_contended(const au_table_t *t, uint64_t actor, uint8_t hold_exp)
{
  if (t->contended) atomic_store_explicit(&t->contended[actor], hold_exp > 0, memory_order_relaxed);
}

/* --- one key of a forwarded request or push --------------------------------------- */

/* Counts and traces the forward of a one-key request or push. */
static void count_forward(struct placer *p, const psm_rows_t *one, int to)
{
  counter_add(&p->reloc.forwards, 1);
  au__trace(p->node->rt, TRACE_FORWARD, (uint64_t)one->t->id,
            table_actor_of(one->t, psm_rows_key(one, 0)), (uint64_t)to, 1);
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
  if (st == PA_HANDING_OFF || r->reloc.requested) {
    rec_hold(p, r, m, type, one, len);
    return;
  }
  int to = rec_forward_to(p->node, r);
  psm_rows_t m1;
  psm_rows_entry_t e;
  size_t off = 0;
  if (!out || psm_rows_decode(p->node, type, one, len, &m1, NULL) != 0 ||
      !psm_rows_next(&m1, &off, &e) || psm_rows_add_entry(&out[to], &m1, &e) != 0) {
    forward_one(p, type, one, len, to); /* alone: no batch, or no room in it */
    return;
  }
  count_forward(p, &m1, to);
}

/* --- moves -------------------------------------------------------------------------- */

void relocation_ask(struct placer *p, rec_t *r, uint32_t hops)
{
  au_node_t *n = p->node;
  r->reloc.requested = 1;
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(
      msg, PS_MOVE_REQ,
      &(psm_actor_msg_t){.t = r->t, .actor = r->actor, .node = (uint32_t)n->rank, .hops = hops});
  au_send_to(n->rt, (uint32_t)rec_next_hop(n, r), PS_PLACER_PORT, PS_MOVE_REQ, msg, len);
}

int relocation_hand_off(struct placer *p, rec_t *r, int to)
{
  r->reloc.handing_off = 1;
  r->reloc.to = to;
  idle_pending(p->node, 1); /* until relocation_ship */
  /* seq_cst: ordered before ck_epoch_call (grace.c) */
  atomic_store(&pa_of(r)->state, PA_HANDING_OFF);
  grace_begin(p, r, PL_GRACE);
  return 1;
}

void relocation_ship(struct placer *p, rec_t *r)
{
  au_node_t *n = p->node;
  au_table_t *t = r->t;
  param_actor_t *pa = pa_of(r);
  const int to = r->reloc.to;
  uint16_t version = (uint16_t)(pa->version + 1);
  /* contended: taken away within four holds of arriving; left alone: 32 holds */
  const uint64_t dwell = au_now_ns() - r->reloc.arrived_ns, hold = reloc_hold_ns(r);
  uint8_t exp = r->reloc.hold_exp;
  if (r->reloc.contended_now) /* counted when a request came during the hold */
    r->reloc.contended_now = 0;
  else if (r->reloc.arrived_ns && dwell < 4 * hold && exp < RELOC_HOLD_EXP_MAX)
    exp++;
  else if (dwell > 32 * hold && exp > 0)
    exp--;
  au__trace(n->rt, TRACE_RELOC_START, (uint64_t)t->id, r->actor, (uint64_t)to,
            au__trace_flow((uint64_t)t->id, r->actor, version));
  /* an id table's buckets go as one blob (ids.c); no worker writes now */
  void *blob = t->ids ? ids_actor_pack(t->ids, pa->values) : NULL;
  const void *values = t->ids ? blob : pa->values;
  const int rc = values ? values_send(n->rt, &p->wire, (uint32_t)to, PS_MOVE_DATA, t, r->actor,
                                      version, exp, values, t->ids ? NULL : pa->values)
                        : AU_ENOMEM;
  free(blob);
  if (rc != 0) {
    au__log(AU_LOG_ERROR, n->rank, "cannot ship actor %llu: %s", (unsigned long long)r->actor,
            au_strerror(rc));
    return;
  }
  if (t->ids)
    ids_actor_free(t->ids, r->actor, pa->values);
  else
    table_values_give(t, r->actor, pa->values, 1); /* zeroed as it was sent */
  pa->values = NULL;
  pa->owner = (uint32_t)to;
  pa->version = version;
  set_contended(t, r->actor, exp);
  r->reloc.hold_exp = exp;
  atomic_store(&pa->state, PA_REMOTE);
  counter_add(&p->reloc.moves_out, 1);
  r->reloc.handing_off = 0;
  /* the news to every other node: the home must know, the others save a forward */
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(
      msg, PS_OWNER,
      &(psm_actor_msg_t){
          .t = t, .actor = r->actor, .node = (uint32_t)to, .version = version, .hold_exp = exp});
  for (int node = 0; node < n->nodes; node++)
    if (node != n->rank && node != to)
      au_send_to(n->rt, (uint32_t)node, PS_PLACER_PORT, PS_OWNER, msg, len);
  /* what waited for the move goes on to the new owner, after the values */
  held_t *h = rec_take_held(r);
  while (h) {
    held_t *next = h->next;
    if (h->type == PS_MOVE_REQ || h->type == PS_CLAIM)
      au_send_to(n->rt, (uint32_t)to, PS_PLACER_PORT, h->type, h->data, h->len);
    else
      forward_one(p, h->type, h->data, h->len, to);
    rec_unheld(p, h);
    h = next;
  }
  idle_pending(p->node, -1); /* the hand-off is over */
}

/* The actor stays here a while yet: 2 if it arrived less than its hold ago, 1 if this
 * node's own workers used it less than a hold ago (their views mark it, table_mark). */
static int staying(rec_t *r, uint64_t now)
{
  if (atomic_exchange_explicit(&pa_of(r)->dirty, 0, memory_order_acquire)) r->reloc.used_ns = now;
  const uint64_t hold = reloc_hold_ns(r);
  return now - r->reloc.arrived_ns < hold ? 2 : now - r->reloc.used_ns < hold;
}

/* Wanted elsewhere, and held here: contended (once per hold), and told so to the node
 * that asked, whose workers fetch the rows then rather than wait. */
static void contended(struct placer *p, rec_t *r, uint32_t asker);

/* Tells node `to`, which asked for r and may wait for it, that r is contended: its
 * workers fetch the rows instead (relocation_on_owner). */
static void tell_contended(struct placer *p, rec_t *r, uint32_t to)
{
  uint8_t msg[PSM_ACTOR_MAX];
  size_t len = psm_actor_encode(msg, PS_OWNER,
                                &(psm_actor_msg_t){.t = r->t,
                                                   .actor = r->actor,
                                                   .node = (uint32_t)p->node->rank,
                                                   .version = pa_of(r)->version,
                                                   .hold_exp = r->reloc.hold_exp});
  au_send_to(p->node->rt, to, PS_PLACER_PORT, PS_OWNER, msg, len);
}

static void contended(struct placer *p, rec_t *r, uint32_t asker)
{
  if (!r->reloc.contended_now && r->reloc.hold_exp < RELOC_HOLD_EXP_MAX) {
    r->reloc.hold_exp++;
    r->reloc.contended_now = 1;
  }
  set_contended(r->t, r->actor, r->reloc.hold_exp);
  tell_contended(p, r, asker);
}

/* The tick must look at r once its hold is over. */
static void hold_move(struct placer *p, rec_t *r, const au_msg_t *m)
{
  rec_hold(p, r, m, PS_MOVE_REQ, m->data, m->len);
  p->reloc.holds = 1;
  placer_arm_tick(p);
}

void relocation_on_move_req(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_actor_msg_t q;
  psm_why_t why;
  if (psm_actor_decode(n, PS_MOVE_REQ, m->data, m->len, &q, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed move request from node %u: %s", m->from_node,
            why.text);
    return;
  }
  rec_t *r = rec_get(p, q.t, q.actor);
  if (!r) return;
  uint8_t st = atomic_load(&pa_of(r)->state);
  if (st == PA_OWNER) {
    if ((int)q.node == n->rank) return; /* already here */
    const uint64_t now = au_now_ns();
    const int stay = staying(r, now);
    if (stay) {
      /* wanted elsewhere during its hold: contended. In use here: it goes once the use is
       * over, or is called contended after four holds of it (relocation_tick) */
      if (stay == 2) contended(p, r, q.node);
      if (!r->held) r->reloc.held_ns = now;
      hold_move(p, r, m); /* the tick lets it go later */
      return;
    }
    relocation_hand_off(p, r, (int)q.node);
  } else if (st == PA_HANDING_OFF) {
    rec_hold(p, r, m, PS_MOVE_REQ, m->data, m->len); /* shipped on to the new owner */
  } else {
    /* Not here, and not leaving: toward the owner, even when this node waits for the
     * actor itself. Holding it here instead deadlocked: a request that came back to its
     * own node (or to the home, which alone knows the owner) waited for an actor that
     * nobody had been asked for (4 nodes, relocate). The home node knows the owner. */
    q.hops++;
    if (q.hops > 4u * (uint32_t)n->nodes)
      au__log(AU_LOG_WARN, n->rank, "move request for actor %llu still chasing it after %u hops",
              (unsigned long long)q.actor, q.hops);
    uint8_t fwd[PSM_ACTOR_MAX];
    size_t len = psm_actor_encode(fwd, PS_MOVE_REQ, &q);
    const int hop = rec_next_hop(n, r);
    counter_add(&p->reloc.forwards, 1);
    au__trace(n->rt, TRACE_FORWARD, (uint64_t)q.t->id, q.actor, (uint64_t)hop, q.hops);
    au_send_to(n->rt, (uint32_t)hop, PS_PLACER_PORT, PS_MOVE_REQ, fwd, len);
  }
}

/* An id table's actor arriving: its buckets here, from the blob; NULL (logged) when the
 * blob is bad or memory short. */
static void *move_ids_in(au_node_t *n, const psm_values_t *v)
{
  void *blob = malloc(table_actor_bytes(v->t));
  char why[200] = "out of memory";
  void *values = NULL;
  if (blob) {
    psm_values_copy(v, blob, 0);
    values = ids_actor_unpack(v->t->ids, v->actor, blob, why, sizeof(why));
  }
  free(blob);
  if (!values)
    au__log(AU_LOG_ERROR, n->rank, "cannot take actor %llu: %s", (unsigned long long)v->actor, why);
  return values;
}

rec_t *relocation_on_move_data(struct placer *p, const au_msg_t *m)
{
  au_node_t *n = p->node;
  psm_values_t v;
  psm_why_t why;
  if (psm_values_decode(n, m->data, m->len, &v, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed actor data from node %u: %s", m->from_node, why.text);
    return NULL;
  }
  au_table_t *t = v.t;
  rec_t *r = rec_get(p, t, v.actor);
  param_actor_t *pa = &t->actors[v.actor];
  if (t->ids && pa->values) { /* a bad frame: this node holds it, or is handing it off */
    au__log(AU_LOG_WARN, n->rank, "actor data from node %u for actor %llu, which is here",
            m->from_node, (unsigned long long)v.actor);
    return NULL;
  }
  int zero = 0;
  void *values = !r ? NULL : t->ids ? move_ids_in(n, &v) : table_values_take(t, v.actor, &zero);
  if (!values) {
    if (!r || !t->ids) /* (move_ids_in says why) */
      au__log(AU_LOG_ERROR, n->rank, "out of memory receiving actor %llu",
              (unsigned long long)v.actor);
    return NULL;
  }
  if (!t->ids) psm_values_copy(&v, values, zero);
  pa->values = values;
  pa->owner = (uint32_t)n->rank;
  pa->version = (uint16_t)v.version;
  atomic_store_explicit(&pa->state, PA_OWNER, memory_order_release);
  counter_add(&p->reloc.moves_in, 1);
  au__trace(n->rt, TRACE_RELOC_END, (uint64_t)t->id, v.actor, (uint64_t)n->rank,
            au__trace_flow((uint64_t)t->id, v.actor, (uint16_t)v.version));
  r->reloc.requested = 0;
  r->reloc.arrived_ns = au_now_ns();
  r->reloc.hold_exp = v.hold_exp <= RELOC_HOLD_EXP_MAX ? v.hold_exp : RELOC_HOLD_EXP_MAX;
  set_contended(t, v.actor, r->reloc.hold_exp);
  return r;
}

void relocation_release(struct placer *p, rec_t *r)
{
  held_t *h = rec_take_held(r);
  while (h) {
    held_t *next = h->next;
    if (h->type == PS_MOVE_REQ) {
      au_msg_t fake = {.from_node = h->from_node, .from_port = h->from_port, .len = h->len};
      rec_hold(p, r, &fake, h->type, h->data, h->len);
      p->reloc.holds = 1;
      placer_arm_tick(p);
    } else {
      serve_one(p, h->type, h->data, h->len);
    }
    rec_unheld(p, h);
    h = next;
  }
}

rec_t *relocation_on_owner(struct placer *p, const au_msg_t *m)
{
  psm_actor_msg_t o;
  if (psm_actor_decode(p->node, PS_OWNER, m->data, m->len, &o, NULL) != 0) return NULL;
  param_actor_t *pa = &o.t->actors[o.actor];
  set_contended(o.t, o.actor, o.hold_exp);
  /* newer news only (serial-number order: the version wraps); news of a contended actor
   * from its owner may come with the version this node knows */
  if ((int16_t)(o.version - pa->version) < 0) return NULL;
  if (atomic_load(&pa->state) != PA_REMOTE) return NULL; /* it is here: this node knows best */
  if (o.version != pa->version) {
    pa->owner = o.node;
    pa->version = o.version;
  }
  /* contended: workers that wait for it here fetch its rows instead (placer.c) */
  if (!o.hold_exp || !o.t->contended) return NULL;
  rec_t *r = rec_get(p, o.t, o.actor);
  return r && r->nwaiters ? r : NULL;
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

void relocation_on_forward(struct placer *p, const au_msg_t *m)
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

void relocation_tick(struct placer *p)
{
  if (!p->reloc.holds) return;
  p->reloc.holds = 0;
  u64map_t *map = &p->recs;
  for (size_t i = 0; i <= map->mask; i++) {
    rec_t *r = map->slot[i].key ? map->slot[i].val : NULL;
    if (!r || !r->held) continue;
    uint8_t st = atomic_load(&pa_of(r)->state);
    if (st != PA_OWNER || r->reloc.handing_off) continue;
    /* the first move request wins, the others follow it */
    held_t *h = r->held;
    while (h && h->type != PS_MOVE_REQ) h = h->next;
    if (!h) continue;
    psm_actor_msg_t q;
    if (psm_actor_decode(p->node, PS_MOVE_REQ, h->data, h->len, &q, NULL) != 0) continue;
    const uint64_t now = au_now_ns();
    if (staying(r, now)) {
      p->reloc.holds = 1; /* look again */
      if (now - r->reloc.held_ns > 4 * reloc_hold_ns(r) && !r->reloc.contended_now)
        contended(p, r, q.node); /* used here all along: the asker fetches meanwhile */
      continue;
    }
    held_t **pp = &r->held;
    while (*pp != h) pp = &(*pp)->next;
    *pp = h->next;
    if (r->held_tail == &h->next) r->held_tail = pp;
    relocation_hand_off(p, r, (int)q.node);
    rec_unheld(p, h); /* after the hand-off counts */
  }
}
