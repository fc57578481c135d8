/* remote.c — the classic parameter server across nodes (see remote.h): requests for
 * rows held elsewhere, batched per owner node and table within a step; replies that
 * fill the step's row cache; pushes of deltas to owners at the end of the step; and
 * the server actors that answer them on the owning node.
 */
#include "actors/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/barrier.h"
#include "actors/idle.h"
#include "actors/placer.h"
#include "actors/ps.h"
#include "actors/psmsg.h"

/* --- output buffers ----------------------------------------------------------------- */

/* Tables and id tables: the buffers of one node. */
static int buf_tables(const au_node_t *n)
{
  return n->ntables + n->nids;
}

/* The buffer for (node, table): requests or pushes to that node, built by psmsg. Dense
 * tables first, then id tables. */
static obuf_t *buf_for(au_worker_t *w, obuf_t **which, int node, const au_table_t *t)
{
  wremote_t *r = &w->remote;
  au_node_t *n = w->node;
  int need = n->nodes * buf_tables(n);
  if (r->nbufs < need) {
    obuf_t *req = calloc((size_t)need, sizeof(obuf_t));
    obuf_t *push = calloc((size_t)need, sizeof(obuf_t));
    if (!req || !push) {
      free(req);
      free(push);
      return NULL;
    }
    /* the buffers are empty between steps, so growing simply starts over */
    for (int i = 0; i < r->nbufs; i++) free(r->req[i].p), free(r->push[i].p);
    free(r->req);
    free(r->push);
    r->req = req;
    r->push = push;
    r->nbufs = need;
  }
  const int tid = t->ids ? n->ntables + (int)((uint32_t)t->id - IDS_TID) : t->id;
  return &(*which)[node * buf_tables(n) + tid];
}

/* --- the step's row cache ----------------------------------------------------------- */

static size_t slot_hash(int table, uint64_t key)
{
  uint64_t h = key * 0x9e3779b97f4a7c15ULL ^ (uint64_t)table * 0xc2b2ae3d27d4eb4fULL;
  return (size_t)(h ^ (h >> 29));
}

static int cache_grow(wremote_t *r)
{
  size_t cap = r->slots ? (r->mask + 1) * 2 : 256;
  struct rslot *s = malloc(cap * sizeof(*s));
  if (!s) return AU_ENOMEM;
  for (size_t i = 0; i < cap; i++) s[i].table = -1;
  for (size_t i = 0; r->slots && i <= r->mask; i++) {
    if (r->slots[i].table < 0) continue;
    size_t j = slot_hash(r->slots[i].table, r->slots[i].key) & (cap - 1);
    while (s[j].table >= 0) j = (j + 1) & (cap - 1);
    s[j] = r->slots[i];
  }
  free(r->slots);
  r->slots = s;
  r->mask = cap - 1;
  return 0;
}

static struct rslot *cache_find(wremote_t *r, int table, uint64_t key);

/* The slot of (table, key), added (not ready, with room for the row) if absent. One that
 * is there is found without allocating anything (NULL only when adding fails). */
static struct rslot *cache_slot(wremote_t *r, const au_table_t *t, uint64_t key, int *added)
{
  *added = 0;
  struct rslot *there = cache_find(r, t->id, key);
  if (there) return there;
  if ((!r->slots || (r->count + 1) * 2 > r->mask + 1) && cache_grow(r) != 0) return NULL;
  size_t i = slot_hash(t->id, key) & r->mask;
  while (r->slots[i].table >= 0) i = (i + 1) & r->mask;
  if (r->arena_len + t->row_bytes > r->arena_cap) {
    size_t cap = r->arena_cap ? r->arena_cap : 64 * 1024;
    while (cap < r->arena_len + t->row_bytes) cap *= 2;
    uint8_t *a = realloc(r->arena, cap);
    if (!a) return NULL;
    r->arena = a;
    r->arena_cap = cap;
  }
  struct rslot *s = &r->slots[i];
  s->table = t->id;
  s->key = key;
  s->ready = 0;
  s->off = r->arena_len;
  r->arena_len += t->row_bytes;
  r->count++;
  *added = 1;
  return s;
}

static struct rslot *cache_find(wremote_t *r, int table, uint64_t key)
{
  if (!r->slots) return NULL;
  size_t i = slot_hash(table, key) & r->mask;
  while (r->slots[i].table >= 0) {
    if (r->slots[i].table == table && r->slots[i].key == key) return &r->slots[i];
    i = (i + 1) & r->mask;
  }
  return NULL;
}

static int owner_of(const au_table_t *t, au_key_t key)
{
  return (int)atomic_load_explicit(&t->actors[table_actor_of(t, key)].owner, memory_order_relaxed);
}

void *remote_row(au_worker_t *w, au_table_t *t, au_key_t key, int *requested)
{
  wremote_t *r = &w->remote;
  int added;
  struct rslot *s = cache_slot(r, t, key, &added);
  *requested = 0;
  if (!s) {
    r->failed = AU_ENOMEM;
    return NULL;
  }
  if (s->ready) return r->arena + s->off;
  if (added) {
    /* answers come back to this worker */
    obuf_t *b = buf_for(w, &r->req, owner_of(t, key), t);
    if (!b || psm_rows_add(b, t, (uint32_t)w->node->rank, PS_WORKER_PORT(w->id), key, NULL,
                           (uint64_t)w->clock) != 0) {
      r->failed = AU_ENOMEM;
      return NULL;
    }
    *requested = 1;
  }
  return NULL;
}

int remote_send_requests(au_worker_t *w)
{
  wremote_t *r = &w->remote;
  au_node_t *n = w->node;
  au_runtime_t *rt = n->rt;
  int sent = 0;
  for (int i = 0; i < r->nbufs; i++) {
    obuf_t *b = &r->req[i];
    if (b->len == 0) continue;
    int node = i / buf_tables(n);
    uint32_t keys = psm_rows_count(b);
    int rc =
        au_send_to(rt, (uint32_t)node, PS_SERVER_PORT(w->id % n->nservers), PS_REQ, b->p, b->len);
    b->len = 0;
    if (rc != 0) return rc;
    r->pending += (int)keys; /* answers may come in parts, from where the actors went */
    au__trace(rt, TRACE_REMOTE_ACCESS, (uint64_t)(i % buf_tables(n)), 0, (uint64_t)node, keys);
    sent++;
  }
  return sent ? AU_EAGAIN : 0;
}

int remote_push(au_worker_t *w, au_table_t *t, au_key_t key, const void *delta)
{
  obuf_t *b = buf_for(w, &w->remote.push, owner_of(t, key), t);
  if (!b) return AU_ENOMEM;
  return psm_rows_add(b, t, (uint32_t)w->node->rank, PS_WORKER_PORT(w->id), key, delta,
                      (uint64_t)w->clock);
}

void remote_step_done(au_worker_t *w, int waiting)
{
  wremote_t *r = &w->remote;
  au_node_t *n = w->node;
  for (int i = 0; i < r->nbufs; i++) {
    obuf_t *b = &r->push[i];
    if (b->len == 0) continue;
    int to = i / buf_tables(n);
    /* to this node's own server too (its actor was moving away): a local message, which
     * the end-of-run detection counts like a frame */
    int rc =
        au_send_to(n->rt, (uint32_t)to, PS_SERVER_PORT(w->id % n->nservers), PS_PUSH, b->p, b->len);
    if (rc == 0) clk_push_sent(n, (uint32_t)to); /* the bound counts them (consistency.c) */
    if (rc != 0 && !r->failed) r->failed = rc;
    b->len = 0;
  }
  if (waiting) return;
  /* the step is over: forget its rows (most steps fetched none: no sweep of the table) */
  if (r->slots && r->count)
    for (size_t i = 0; i <= r->mask; i++) r->slots[i].table = -1;
  r->count = 0;
  r->arena_len = 0;
}

int remote_on_reply(au_worker_t *w, const au_msg_t *m)
{
  wremote_t *r = &w->remote;
  if (m->type == PS_ERR) {
    au__log(AU_LOG_ERROR, -1, "worker %d: node %u answered: %.*s", w->id, m->from_node, (int)m->len,
            (const char *)m->data);
    r->failed = AU_EPROTO;
    r->pending = 0; /* the step fails; what else comes for it is ignored */
    return 1;
  }
  psm_rows_t rows;
  psm_why_t why;
  if (psm_rows_decode(w->node, PS_ROWS, m->data, m->len, &rows, &why) != 0) {
    au__log(AU_LOG_WARN, -1, "worker %d: malformed rows from node %u: %s", w->id, m->from_node,
            why.text);
    r->failed = AU_EPROTO;
    r->pending = 0;
    return 1;
  }
  au_table_t *t = rows.t;
  r->pending = r->pending > (int)rows.n ? r->pending - (int)rows.n : 0;
  size_t off = 0;
  for (uint32_t i = 0; i < rows.n; i++) {
    struct rslot *s = cache_find(r, t->id, psm_rows_key(&rows, i));
    if (!s) { /* not asked for in this step: ignore */
      psm_rows_row_next(&rows, &off, NULL);
      continue;
    }
    psm_rows_row_next(&rows, &off, r->arena + s->off);
    s->ready = 1;
  }
  return r->pending == 0;
}

void remote_free(au_worker_t *w)
{
  wremote_t *r = &w->remote;
  for (int i = 0; i < r->nbufs; i++) free(r->req[i].p), free(r->push[i].p);
  free(r->req);
  free(r->push);
  free(r->slots);
  free(r->arena);
  memset(r, 0, sizeof(*r));
}

/* --- servers ------------------------------------------------------------------------ */

typedef struct server {
  au_node_t *node;
  obuf_t delta;         /* an aligned copy of one pushed delta */
  obuf_t local, other;  /* a message split into the keys here and the others */
  ck_epoch_record_t ck; /* a section per message: hand-offs wait for it (grace.c) */
} server_t;

/* Logs a bad request and tells the worker that sent it, whose step then fails with
 * AU_EPROTO: the one the request names when its head says, else the sender. */
static void bad_request(au_node_t *n, const au_msg_t *m, const char *why)
{
  au__log(AU_LOG_WARN, n->rank, "request from node %u: %s", m->from_node, why);
  uint32_t node = m->from_node;
  au_port_t port = m->from_port;
  psm_rows_reply(n, m->data, m->len, &node, &port);
  au_send_to(n->rt, node, port, PS_ERR, why, strlen(why));
}

/* Answers a request of a table of wide rows: each row read into `scratch`, then written
 * sparse into the answer where that is shorter (a topic model's rows are mostly zero). */
static void answer_sparse(au_node_t *n, const psm_rows_t *m, obuf_t *scratch)
{
  au_table_t *t = m->t;
  obuf_t b = {0};
  int rc = psm_rows_answer_begin(&b, m);
  scratch->len = 0;
  if (rc == 0) rc = obuf_reserve(scratch, t->row_bytes);
  for (uint32_t i = 0; rc == 0 && i < m->n; i++) {
    const void *row = table_row_held(t, psm_rows_key(m, i));
    if (row)
      kernel_copy_row(scratch->p, row, t->width);
    else
      memset(scratch->p, 0, t->row_bytes);
    rc = psm_rows_answer_row(&b, t, scratch->p);
  }
  if (rc == 0) rc = au_send_to(n->rt, m->reply_node, m->reply_port, PS_ROWS, b.p, b.len);
  if (rc != 0)
    au__log(AU_LOG_ERROR, n->rank, "cannot answer node %u: %s", m->reply_node, au_strerror(rc));
  free(b.p);
}

/* Answers a request whose keys are all here, into the outgoing frame. */
static void answer(au_node_t *n, const psm_rows_t *m, obuf_t *scratch)
{
  au_table_t *t = m->t;
  if (psm_rows_answer_sparse(m)) { /* never an id table's */
    answer_sparse(n, m, scratch);
    return;
  }
  au_outbuf_t ob;
  uint8_t *out =
      au_send_to_start(n->rt, m->reply_node, m->reply_port, PS_ROWS, psm_rows_answer_len(m), &ob);
  if (!out) {
    au__log(AU_LOG_ERROR, n->rank, "cannot answer node %u: %s", m->reply_node, au_strerror(ob.rc));
    return;
  }
  uint8_t *rows = psm_rows_answer(out, m);
  for (uint32_t i = 0; t->ids && i < m->n; i++)
    ids_serve_pull(t->ids, psm_rows_key(m, i), m->clock, rows + (size_t)i * t->row_bytes);
  for (uint32_t i = 0; !t->ids && i < m->n; i++) {
    const void *row = table_row_held(t, psm_rows_key(m, i));
    if (row)
      kernel_copy_row(rows + (size_t)i * t->row_bytes, row, t->width);
    else
      memset(rows + (size_t)i * t->row_bytes, 0, t->row_bytes);
  }
  au_send_to_finish(&ob);
}

/* Applies a push whose keys are all here. */
static void apply(const psm_rows_t *m, obuf_t *update)
{
  au_table_t *t = m->t;
  /* replicas must hear */
  if (table_replicable(t)) idle_touched(t->node);
  update->len = 0;
  if (obuf_reserve(update, t->update_bytes) != 0) {
    au__log(AU_LOG_ERROR, -1, "out of memory applying a push; %u rows lost", m->n);
    return;
  }
  psm_rows_entry_t e;
  for (size_t off = 0; psm_rows_next(m, &off, &e);) {
    const uint64_t k = e.key;
    /* the update follows its key unaligned, or sparse: the kernel gets an aligned copy */
    psm_rows_update_copy(m, &e, update->p);
    if (t->ids) {
      ids_serve_push(t->ids, k, update->p, m->clock);
      continue;
    }
    void *row = table_row_held(t, k);
    if (!row) {
      au__log(AU_LOG_ERROR, -1, "a push to key %llu of table %d found no values; lost",
              (unsigned long long)k, t->id);
      continue;
    }
    table_apply(t, row, update->p);
    /* replicas must hear; a relocating table's mark says that this node's own workers use
     * the actor, which a push from elsewhere does not */
    if (table_replicable(t)) table_mark(t, k);
  }
}

void remote_serve_local(au_node_t *n, uint32_t type, const uint8_t *p, size_t len, obuf_t *scratch)
{
  psm_rows_t m;
  psm_why_t why;
  if (psm_rows_decode(n, type, p, len, &m, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "a held request is malformed: %s", why.text);
    return;
  }
  if (type == PS_REQ)
    answer(n, &m, scratch);
  else
    apply(&m, scratch);
}

/* 1 if this node holds the key's row (owner or replica; an id's owner). */
static int held(au_table_t *t, uint64_t k)
{
  return t->ids ? ids_owns(t->ids, k) : table_row(t, k) != NULL;
}

/* Splits a request or push into the keys held here and the others (into two messages
 * of its kind); returns how many are here. It looks again, key by key: an actor may
 * have arrived (or begun to leave) since the caller counted. */
static uint32_t split(const psm_rows_t *m, obuf_t *here, obuf_t *other)
{
  here->len = other->len = 0;
  uint32_t nh = 0;
  psm_rows_entry_t e;
  for (size_t off = 0; psm_rows_next(m, &off, &e);) {
    int is_here = held(m->t, e.key);
    if (psm_rows_add_entry(is_here ? here : other, m, &e) != 0) continue;
    nh += (uint32_t)is_here;
  }
  return nh;
}

static void serve(server_t *s, const au_msg_t *m, uint32_t type)
{
  au_node_t *n = s->node;
  psm_rows_t rows;
  psm_why_t why;
  if (psm_rows_decode(n, type, m->data, m->len, &rows, &why) != 0) {
    bad_request(n, m, why.text);
    return;
  }
  const int is_push = type == PS_PUSH;
  au_table_t *t = rows.t;
  uint32_t here = 0;
  psm_rows_entry_t e;
  for (size_t off = 0; psm_rows_next(&rows, &off, &e);) here += held(t, e.key);
  if (here == rows.n) { /* the common case: serve in place */
    if (is_push)
      apply(&rows, &s->delta);
    else
      answer(n, &rows, &s->delta);
    return;
  }
  if (t->ids && t->place == AU_PLACE_CLASSIC) {
    bad_request(n, m, "an id of an id table is not held by its owner");
    return;
  }
  if (t->place == AU_PLACE_CLASSIC) {
    bad_request(n, m, "a key of a classic table is not held by its home node");
    return;
  }
  /* some keys' actors moved (or are moving): serve the rest, the placer routes these.
   * The split's own count, not `here`: a key counted away may be here now, and its push
   * would otherwise be dropped (it goes in neither part) */
  if (split(&rows, &s->local, &s->other)) {
    psm_rows_t part;
    if (psm_rows_decode(n, type, s->local.p, s->local.len, &part, &why) == 0) {
      if (is_push)
        apply(&part, &s->delta);
      else
        answer(n, &part, &s->delta);
    }
  }
  if (s->other.len == 0) return; /* all here after all */
  /* the placer routes them (a local message: the run cannot end before it is handled) */
  if (au_send_to(n->rt, (uint32_t)n->rank, PS_PLACER_PORT, is_push ? PS_FWD_PUSH : PS_FWD_REQ,
                 s->other.p, s->other.len) != 0)
    bad_request(n, m, "out of memory handing keys to the placer");
}

void remote_split(au_node_t *n, const au_msg_t *m, uint32_t type, remote_one_fn fn, void *arg)
{
  psm_rows_t rows;
  psm_why_t why;
  if (psm_rows_decode(n, type, m->data, m->len, &rows, &why) != 0) {
    au__log(AU_LOG_WARN, n->rank, "malformed forward: %s", why.text);
    return;
  }
  if (rows.t->place == AU_PLACE_CLASSIC) { /* its actors never move: no server forwards
                                              them */
    au__log(AU_LOG_WARN, n->rank, "malformed forward from node %u: table %u is placed classic",
            m->from_node, (unsigned)rows.t->id);
    return;
  }
  obuf_t one = {0};
  psm_rows_entry_t e;
  for (size_t off = 0; psm_rows_next(&rows, &off, &e);) {
    one.len = 0;
    if (psm_rows_add_entry(&one, &rows, &e) != 0) break;
    fn(arg, rows.t, table_actor_of(rows.t, e.key), m, type, one.p, (uint32_t)one.len);
  }
  free(one.p);
}

static void server_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  server_t *s = *(server_t **)state;
  grace_enter(&s->ck); /* a hand-off that marked an actor waits for this to end */
  switch (m->type) {
  case PS_REQ:
    serve(s, m, m->type);
    break;
  case PS_PUSH:
    serve(s, m, m->type);
    clk_push_applied(s->node, m->from_node); /* after the updates: the bound counts them */
    break;
  case PS_BAR_FENCE: /* the pushes before it from that worker are applied: pass it on */
    au_send(barrier_actor(s->node), PS_BAR_FENCE, m->data, m->len);
    break;
  default:
    break;
  }
  grace_leave(s->node, &s->ck);
}

int remote_start_servers(au_node_t *n)
{
  int count = au_runtime_threads(n->rt);
  if (count > PS_MAX_SERVERS) count = PS_MAX_SERVERS;
  n->servers = calloc((size_t)count, sizeof(server_t));
  if (!n->servers) return AU_ENOMEM;
  for (int i = 0; i < count; i++) {
    server_t *s = &((server_t *)n->servers)[i];
    s->node = n;
    grace_register(n, &s->ck);
    au_actor_t *a;
    int rc = au_actor_spawn(n->rt, server_behaviour, sizeof(server_t *), &a);
    if (rc == 0) rc = au_port_register(n->rt, PS_SERVER_PORT(i), a);
    if (rc != 0) return rc;
    *(server_t **)au_actor_state(a) = s;
  }
  n->nservers = count;
  return 0;
}

void remote_free_servers(au_node_t *n)
{
  server_t *s = n->servers;
  for (int i = 0; s && i < n->nservers; i++)
    free(s[i].delta.p), free(s[i].local.p), free(s[i].other.p);
  free(s);
  n->servers = NULL;
}
