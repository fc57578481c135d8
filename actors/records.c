/* records.c — the placer's records (placer.h): the map from (table, actor) to the record
 * of an actor the placer is busy with, and the messages a record holds while its actor
 * moves. Only the placer's actor calls these.
 */
#include <stdio.h>
#include <stdlib.h>

#include "actors/idle.h"
#include "actors/placer.h"

/* Dense tables' ids in the top 16 bits, id tables' (IDS_TID + i) as 0x8000 + i. */
static uint64_t key_of(int table, uint64_t actor)
{
  const uint64_t tid =
      (uint32_t)table >= IDS_TID ? 0x8000u | ((uint32_t)table - IDS_TID) : (uint64_t)table;
  return (tid << 48 | actor) + 1; /* nonzero, for the map */
}

uint64_t rec_key(const rec_t *r)
{
  return key_of(r->t->id, r->actor);
}

rec_t *rec_find(struct placer *p, uint64_t key)
{
  return u64map_get(&p->recs, key);
}

rec_t *rec_get(struct placer *p, au_table_t *t, uint64_t actor)
{
  uint64_t k = key_of(t->id, actor);
  rec_t *r = u64map_get(&p->recs, k);
  if (r) return r;
  r = calloc(1, sizeof(*r));
  if (!r || u64map_put(&p->recs, k, r) != 0) {
    free(r);
    return NULL;
  }
  r->t = t;
  r->actor = actor;
  r->reloc.to = -1;
  r->held_tail = &r->held;
  return r;
}

void rec_hold(struct placer *p, rec_t *r, const au_msg_t *m, uint32_t type, const void *data,
              uint32_t len)
{
  held_t *h = malloc(sizeof(*h) + len);
  if (!h) {
    au__log(AU_LOG_ERROR, -1, "out of memory holding a message for a moving actor");
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
  idle_pending(p->node, 1);
}

held_t *rec_take_held(rec_t *r)
{
  held_t *h = r->held;
  r->held = NULL;
  r->held_tail = &r->held;
  return h;
}

void rec_unheld(struct placer *p, held_t *h)
{
  free(h);
  idle_pending(p->node, -1);
}

int rec_add_waiter(rec_t *r, int worker)
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

void rec_free(rec_t *r)
{
  while (r->held) {
    held_t *h = r->held;
    r->held = h->next;
    free(h);
  }
  free(r->waiters);
  free(r);
}

void rec_to_decide(struct placer *p, rec_t *r)
{
  if (p->ndecide == p->capdecide) {
    int cap = p->capdecide ? 2 * p->capdecide : 64;
    rec_t **d = realloc(p->decide, (size_t)cap * sizeof(*d));
    if (!d) return; /* the next tick decides */
    p->decide = d;
    p->capdecide = cap;
  }
  p->decide[p->ndecide++] = r;
}
