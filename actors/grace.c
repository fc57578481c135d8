/* grace.c — grace periods (placer.h), on Concurrency Kit's epochs: a hand-off or a replica
 * drop marks the actor first, then waits until every local worker and server that was
 * inside a message when it marked has left that message, so that nobody still holds a
 * view of (or is applying an update to) the values it is about to ship or free.
 *
 * Every worker step and every server message is a ck_epoch section of its own record
 * (grace_enter, grace_leave); the placer defers "the grace period of r is over" with
 * ck_epoch_call on its record and polls (ck_epoch_poll) by sending itself a message until
 * the callback has run. The invariant: a section's begin stores its record active and
 * then fences before the step reads any actor's state, and the marker's seq_cst store of
 * the state comes before ck_epoch_call; ck_epoch runs the callback only once every record
 * that was active then has ended its section or seen a newer epoch. So either a step saw
 * the mark, or the grace period waited for it.
 */
#include <stddef.h>
#include <stdlib.h>

#include "actors/placer.h"

/* ThreadSanitizer does not see ck_pr's fences: a section's end releases and the end of a
 * grace period acquires the node's epoch, which is what ck_epoch guarantees. */
#if defined(AU__TSAN)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define TSAN_ACQUIRE(a) __tsan_acquire(a)
#define TSAN_RELEASE(a) __tsan_release(a)
#else
#define TSAN_ACQUIRE(a) ((void)(a))
#define TSAN_RELEASE(a) ((void)(a))
#endif

void grace_register(au_node_t *n, ck_epoch_record_t *rec)
{
  ck_epoch_register(&n->epoch, rec, NULL);
}

void grace_enter(ck_epoch_record_t *rec)
{
  ck_epoch_begin(rec, NULL);
}

void grace_leave(au_node_t *n, ck_epoch_record_t *rec)
{
  TSAN_RELEASE(&n->epoch);
  ck_epoch_end(rec, NULL);
}

static void over(ck_epoch_entry_t *e)
{
  rec_t *r = (rec_t *)(void *)((char *)e - offsetof(rec_t, grace));
  r->graced = 1;
}

void grace_begin(struct placer *p, rec_t *r, uint32_t kind)
{
  r->graced = 0;
  ck_epoch_call(&p->ck, &r->grace, over);
  uint8_t msg[8];
  size_t len = psm_key_encode(msg, rec_key(r));
  au_send(p->actor, kind, msg, len);
}

rec_t *grace_poll(struct placer *p, const au_msg_t *m)
{
  uint64_t k;
  if (psm_key_decode(m->data, m->len, &k) != 0) return NULL;
  rec_t *r = rec_find(p, k);
  if (!r) return NULL;
  if (!r->graced) ck_epoch_poll(&p->ck); /* runs the callbacks whose grace period is over */
  if (r->graced) {
    TSAN_ACQUIRE(&p->node->epoch);
    r->graced = 0;
    return r;
  }
  au_send(p->actor, m->type, m->data, m->len); /* look again after the others */
  return NULL;
}
