/* remote.c — the classic parameter server across nodes (see remote.h): requests for
 * rows held elsewhere, batched per owner node and table within a step; replies that
 * fill the step's row cache; pushes of deltas to owners at the end of the step; and
 * the server actors that answer them on the owning node.
 */
#include "actors/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/ps.h"

#define HDR 16 /* u32 table, u32 n, u32 reply node, u32 reply port (requests) */

/* --- output buffers ----------------------------------------------------------------- */

static uint32_t get_u32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static void set_u32(uint8_t *p, uint32_t v)
{
  memcpy(p, &v, sizeof(v));
}

/* The buffer for (node, table), started with its header when empty. */
static obuf_t *buf_for(au_worker_t *w, obuf_t **which, int node, const au_table_t *t)
{
  wremote_t *r = &w->remote;
  au_node_t *n = w->node;
  int need = n->nodes * n->ntables;
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
  obuf_t *b = &(*which)[node * n->ntables + t->id];
  if (b->len == 0) {
    uint8_t hdr[HDR];
    set_u32(hdr, (uint32_t)t->id);
    set_u32(hdr + 4, 0);
    set_u32(hdr + 8, (uint32_t)n->rank); /* answers come back to this worker */
    set_u32(hdr + 12, PS_WORKER_PORT(w->id));
    if (obuf_put(b, hdr, HDR) != 0) return NULL;
  }
  return b;
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

/* The slot of (table, key), added (not ready, with room for the row) if absent. */
static struct rslot *cache_slot(wremote_t *r, const au_table_t *t, uint64_t key, int *added)
{
  *added = 0;
  if ((!r->slots || (r->count + 1) * 2 > r->mask + 1) && cache_grow(r) != 0) return NULL;
  size_t i = slot_hash(t->id, key) & r->mask;
  while (r->slots[i].table >= 0) {
    if (r->slots[i].table == t->id && r->slots[i].key == key) return &r->slots[i];
    i = (i + 1) & r->mask;
  }
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
  return (int)atomic_load_explicit(&t->actors[key >> t->group_shift].owner, memory_order_relaxed);
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
    obuf_t *b = buf_for(w, &r->req, owner_of(t, key), t);
    if (!b || obuf_put(b, &key, sizeof(key)) != 0) {
      r->failed = AU_ENOMEM;
      return NULL;
    }
    set_u32(b->p + 4, get_u32(b->p + 4) + 1);
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
    int node = i / n->ntables;
    uint32_t keys = get_u32(b->p + 4);
    int rc =
        au_send_to(rt, (uint32_t)node, PS_SERVER_PORT(w->id % n->nservers), PS_REQ, b->p, b->len);
    b->len = 0;
    if (rc != 0) return rc;
    r->pending += (int)keys; /* answers may come in parts, from where the actors went */
    au__trace(rt, TRACE_REMOTE_ACCESS, get_u32(b->p), 0, (uint64_t)node, keys);
    sent++;
  }
  return sent ? AU_EAGAIN : 0;
}

int remote_push(au_worker_t *w, au_table_t *t, au_key_t key, const void *delta)
{
  obuf_t *b = buf_for(w, &w->remote.push, owner_of(t, key), t);
  if (!b || obuf_reserve(b, sizeof(key) + t->row_bytes) != 0) return AU_ENOMEM;
  /* keys and deltas interleave here; the server reads them the same way */
  obuf_put(b, &key, sizeof(key));
  obuf_put(b, delta, t->row_bytes);
  set_u32(b->p + 4, get_u32(b->p + 4) + 1);
  return 0;
}

void remote_step_done(au_worker_t *w, int waiting)
{
  wremote_t *r = &w->remote;
  au_node_t *n = w->node;
  for (int i = 0; i < r->nbufs; i++) {
    obuf_t *b = &r->push[i];
    if (b->len == 0) continue;
    int to = i / n->ntables;
    /* to this node's own server too (its actor was moving away): a local message, which
     * the end-of-run detection counts like a frame */
    int rc =
        au_send_to(n->rt, (uint32_t)to, PS_SERVER_PORT(w->id % n->nservers), PS_PUSH, b->p, b->len);
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
  au_node_t *n = w->node;
  uint32_t tid = m->len >= HDR ? get_u32(m->data) : UINT32_MAX;
  uint32_t cnt = m->len >= HDR ? get_u32(m->data + 4) : 0;
  au_table_t *t = tid < (uint32_t)n->ntables ? n->table_by_id[tid] : NULL;
  if (!t || m->len != HDR + (size_t)cnt * (sizeof(uint64_t) + t->row_bytes)) {
    au__log(AU_LOG_WARN, -1, "worker %d: malformed rows from node %u", w->id, m->from_node);
    r->failed = AU_EPROTO;
    r->pending = 0;
    return 1;
  }
  r->pending = r->pending > (int)cnt ? r->pending - (int)cnt : 0;
  const uint8_t *keys = m->data + HDR, *rows = keys + (size_t)cnt * sizeof(uint64_t);
  for (uint32_t i = 0; i < cnt; i++) {
    uint64_t k;
    memcpy(&k, keys + (size_t)i * sizeof(k), sizeof(k));
    struct rslot *s = cache_find(r, t->id, k);
    if (!s) continue; /* not asked for in this step: ignore */
    memcpy(r->arena + s->off, rows + (size_t)i * t->row_bytes, t->row_bytes);
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
  obuf_t delta;        /* an aligned copy of one pushed delta */
  obuf_t local, other; /* a message split into the keys here and the others */
  atomic_ullong epoch; /* odd while a message is handled (hand-offs wait for it) */
} server_t;

/* Where a request's answer goes: the worker that asked, wherever the request was sent
 * on from. */
static void reply_to(const uint8_t *p, uint32_t *node, au_port_t *port)
{
  *node = get_u32(p + 8);
  *port = (au_port_t)get_u32(p + 12);
}

/* Logs a bad request and tells the worker, whose step then fails with AU_EPROTO. */
static void bad_request(au_node_t *n, const au_msg_t *m, int is_req, const char *why)
{
  au__log(AU_LOG_WARN, n->rank, "request from node %u: %s", m->from_node, why);
  uint32_t node = m->from_node;
  au_port_t port = m->from_port;
  if (is_req && m->len >= HDR) reply_to(m->data, &node, &port);
  au_send_to(n->rt, node, port, PS_ERR, why, strlen(why));
}

/* Checks a request or push: its table, count and length. */
static au_table_t *check(au_node_t *n, const au_msg_t *m, int is_push, uint32_t *cnt)
{
  char why[128];
  if (m->len < HDR) {
    snprintf(why, sizeof(why), "a message of %u bytes is too short", m->len);
    bad_request(n, m, !is_push, why);
    return NULL;
  }
  uint32_t tid = get_u32(m->data);
  *cnt = get_u32(m->data + 4);
  au_table_t *t = tid < (uint32_t)n->ntables ? n->table_by_id[tid] : NULL;
  if (!t) {
    snprintf(why, sizeof(why), "no table %u (this node has %d)", tid, n->ntables);
    bad_request(n, m, !is_push, why);
    return NULL;
  }
  size_t each = sizeof(uint64_t) + (is_push ? t->row_bytes : 0);
  if (m->len != HDR + (size_t)*cnt * each) {
    snprintf(why, sizeof(why), "%u bytes do not hold %u keys of table %u", m->len, *cnt, tid);
    bad_request(n, m, !is_push, why);
    return NULL;
  }
  for (uint32_t i = 0; i < *cnt; i++) {
    uint64_t k;
    memcpy(&k, m->data + HDR + (size_t)i * each, sizeof(k));
    if (k >= t->keys) {
      snprintf(why, sizeof(why), "key %llu is outside table %u", (unsigned long long)k, tid);
      bad_request(n, m, !is_push, why);
      return NULL;
    }
  }
  return t;
}

/* Answers a request whose keys are all here, into the outgoing frame. */
static void answer(au_node_t *n, au_table_t *t, const uint8_t *p, size_t len)
{
  uint32_t cnt = get_u32(p + 4), node;
  au_port_t port;
  reply_to(p, &node, &port);
  au_outbuf_t ob;
  uint8_t *out =
      au_send_to_start(n->rt, node, port, PS_ROWS, len + (size_t)cnt * t->row_bytes, &ob);
  if (!out) {
    au__log(AU_LOG_ERROR, n->rank, "cannot answer node %u: %s", node, au_strerror(ob.rc));
    return;
  }
  memcpy(out, p, len);
  uint8_t *rows = out + len;
  for (uint32_t i = 0; i < cnt; i++) {
    uint64_t k;
    memcpy(&k, p + HDR + (size_t)i * sizeof(k), sizeof(k));
    const void *row = table_row_held(t, k);
    if (row)
      kernel_copy_row(rows + (size_t)i * t->row_bytes, row, t->dim);
    else
      memset(rows + (size_t)i * t->row_bytes, 0, t->row_bytes);
  }
  au_send_to_finish(&ob);
}

/* Applies a push whose keys are all here. */
static void apply(au_table_t *t, const uint8_t *p, obuf_t *delta)
{
  /* replicas must hear */
  if (table_replicable(t)) placement_touched(t->node);
  uint32_t cnt = get_u32(p + 4);
  delta->len = 0;
  if (obuf_reserve(delta, t->row_bytes) != 0) {
    au__log(AU_LOG_ERROR, -1, "out of memory applying a push; %u rows lost", cnt);
    return;
  }
  p += HDR;
  for (uint32_t i = 0; i < cnt; i++, p += sizeof(uint64_t) + t->row_bytes) {
    uint64_t k;
    memcpy(&k, p, sizeof(k));
    /* the delta follows its key unaligned: the kernel gets an aligned copy */
    memcpy(delta->p, p + sizeof(k), t->row_bytes);
    void *row = table_row_held(t, k);
    if (!row) {
      au__log(AU_LOG_ERROR, -1, "a push to key %llu of table %d found no values; lost",
              (unsigned long long)k, t->id);
      continue;
    }
    t->kernel(row, delta->p, t->dim, t->kernel_arg);
    table_mark(t, k);
  }
}

void remote_serve_local(au_node_t *n, uint32_t type, const uint8_t *p, size_t len, obuf_t *scratch)
{
  au_table_t *t = n->table_by_id[get_u32(p)];
  if (type == PS_REQ)
    answer(n, t, p, len);
  else
    apply(t, p, scratch);
}

/* Splits a request or push into the keys held here and the others, headers copied;
 * returns how many are here. It looks again, key by key: an actor may have arrived (or
 * begun to leave) since the caller counted. */
static uint32_t split(au_table_t *t, const au_msg_t *m, size_t each, obuf_t *here, obuf_t *other)
{
  here->len = other->len = 0;
  obuf_put(here, m->data, HDR);
  obuf_put(other, m->data, HDR);
  uint32_t cnt = get_u32(m->data + 4), nh = 0, no = 0;
  for (uint32_t i = 0; i < cnt; i++) {
    const uint8_t *kp = m->data + HDR + (size_t)i * each;
    uint64_t k;
    memcpy(&k, kp, sizeof(k));
    if (table_row(t, k))
      obuf_put(here, kp, each), nh++;
    else
      obuf_put(other, kp, each), no++;
  }
  set_u32(here->p + 4, nh);
  set_u32(other->p + 4, no);
  return nh;
}

static void serve(server_t *s, const au_msg_t *m, int is_push)
{
  au_node_t *n = s->node;
  uint32_t cnt;
  au_table_t *t = check(n, m, is_push, &cnt);
  if (!t) return;
  size_t each = sizeof(uint64_t) + (is_push ? t->row_bytes : 0);
  uint32_t here = 0;
  for (uint32_t i = 0; i < cnt; i++) {
    uint64_t k;
    memcpy(&k, m->data + HDR + (size_t)i * each, sizeof(k));
    here += table_row(t, k) != NULL;
  }
  if (here == cnt) { /* the common case: serve in place */
    if (is_push)
      apply(t, m->data, &s->delta);
    else
      answer(n, t, m->data, m->len);
    return;
  }
  if (t->place == AU_PLACE_CLASSIC) {
    bad_request(n, m, !is_push, "a key of a classic table is not held by its home node");
    return;
  }
  /* some keys' actors moved (or are moving): serve the rest, the placer routes these */
  if (obuf_reserve(&s->local, m->len) != 0 || obuf_reserve(&s->other, m->len) != 0) {
    bad_request(n, m, !is_push, "out of memory splitting a request");
    return;
  }
  /* the split's own count, not `here`: a key counted away may be here now, and its
   * push would otherwise be dropped (it goes in neither part) */
  if (split(t, m, each, &s->local, &s->other)) {
    if (is_push)
      apply(t, s->local.p, &s->delta);
    else
      answer(n, t, s->local.p, s->local.len);
  }
  if (get_u32(s->other.p + 4) == 0) return; /* all here after all */
  /* the placer routes them (a local message: the run cannot end before it is handled) */
  if (au_send_to(n->rt, (uint32_t)n->rank, PS_PLACER_PORT, is_push ? PS_FWD_PUSH : PS_FWD_REQ,
                 s->other.p, s->other.len) != 0)
    bad_request(n, m, !is_push, "out of memory handing keys to the placer");
}

void remote_split(au_node_t *n, const au_msg_t *m, uint32_t type, remote_one_fn fn, void *arg)
{
  int is_push = type == PS_PUSH;
  uint32_t cnt;
  au_table_t *t = check(n, m, is_push, &cnt);
  if (!t) return;
  size_t each = sizeof(uint64_t) + (is_push ? t->row_bytes : 0);
  uint8_t one[HDR + sizeof(uint64_t) + 4096];
  uint8_t *buf = HDR + each <= sizeof(one) ? one : malloc(HDR + each);
  if (!buf) return;
  memcpy(buf, m->data, HDR);
  set_u32(buf + 4, 1);
  for (uint32_t i = 0; i < cnt; i++) {
    const uint8_t *kp = m->data + HDR + (size_t)i * each;
    uint64_t k;
    memcpy(&k, kp, sizeof(k));
    memcpy(buf + HDR, kp, each);
    fn(arg, t, k >> t->group_shift, m, type, buf, (uint32_t)(HDR + each));
  }
  if (buf != one) free(buf);
}

static void server_behaviour(au_actor_t *self, void *state, au_msg_t *m)
{
  (void)self;
  server_t *s = *(server_t **)state;
  /* seq_cst: a hand-off reads this after marking its actor (placement.c) */
  atomic_fetch_add(&s->epoch, 1);
  switch (m->type) {
  case PS_REQ:
    serve(s, m, 0);
    break;
  case PS_PUSH:
    serve(s, m, 1);
    break;
  default:
    break;
  }
  atomic_fetch_add(&s->epoch, 1);
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
    atomic_init(&s->epoch, 0);
    au_actor_t *a;
    int rc = au_actor_spawn(n->rt, &a, server_behaviour, sizeof(server_t *));
    if (rc == 0) rc = au_port_register(n->rt, PS_SERVER_PORT(i), a);
    if (rc != 0) return rc;
    *(server_t **)au_actor_state(a) = s;
  }
  n->nservers = count;
  return 0;
}

uint64_t remote_server_epoch(const au_node_t *n, int i)
{
  return atomic_load(&((server_t *)n->servers)[i].epoch);
}

void remote_free_servers(au_node_t *n)
{
  server_t *s = n->servers;
  for (int i = 0; s && i < n->nservers; i++)
    free(s[i].delta.p), free(s[i].local.p), free(s[i].other.p);
  free(s);
  n->servers = NULL;
}
