/* grace.c — grace periods (placer.h): a hand-off or a replica drop marks the actor first,
 * then waits until every local worker and server that was inside a message when it
 * marked has left that message, so that nobody still holds a view of (or is applying an
 * update to) the values it is about to ship or free.
 *
 * The invariant: each worker's and server's epoch is odd exactly while it handles a
 * message, and is incremented with seq_cst before it loads an actor's state; the marker
 * stores the state with seq_cst before it reads the epochs. So either the other side saw
 * the mark, or the snapshot saw it inside its message.
 */
#include <stdlib.h>

#include "actors/placer.h"
#include "actors/remote.h"

static int over(const au_node_t *n, const uint64_t *snap)
{
  for (int i = 0; i < n->nworkers; i++)
    if ((snap[i] & 1) && atomic_load(&n->workers[i]->epoch) == snap[i]) return 0;
  for (int i = 0; i < n->nservers; i++) {
    uint64_t s = snap[n->nworkers + i];
    if ((s & 1) && remote_server_epoch(n, i) == s) return 0;
  }
  return 1;
}

int grace_begin(struct placer *p, rec_t *r, uint32_t kind)
{
  au_node_t *n = p->node;
  free(r->snap);
  r->snap = malloc(((size_t)n->nworkers + (size_t)n->nservers + 1) * sizeof(uint64_t));
  if (!r->snap) return AU_ENOMEM;
  for (int i = 0; i < n->nworkers; i++) r->snap[i] = atomic_load(&n->workers[i]->epoch);
  for (int i = 0; i < n->nservers; i++) r->snap[n->nworkers + i] = remote_server_epoch(n, i);
  uint8_t msg[8];
  size_t len = psm_key_encode(msg, rec_key(r));
  au_send(p->actor, kind, msg, len);
  return 0;
}

rec_t *grace_poll(struct placer *p, const au_msg_t *m)
{
  uint64_t k;
  if (psm_key_decode(m->data, m->len, &k) != 0) return NULL;
  rec_t *r = rec_find(p, k);
  if (!r || !r->snap) return NULL;
  if (over(p->node, r->snap)) return r;
  au_send(p->actor, m->type, m->data, m->len); /* look again after the others */
  return NULL;
}
