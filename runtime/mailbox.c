/* mailbox.c — intrusive MPSC mailbox with an empty tag (see mailbox.h). */
#include "runtime/mailbox.h"

#define EMPTY_TAG ((uintptr_t)1)

static inline _Atomic(au_msg_t *) *link_of(au_msg_t *m)
{
  return (_Atomic(au_msg_t *) *)&m->au__next;
}

void mailbox_init(mailbox_t *q, au_msg_t *stub)
{
  atomic_init(link_of(stub), NULL);
  atomic_init(&q->head, (uintptr_t)stub | EMPTY_TAG);
  q->tail = stub;
}

bool mailbox_push(mailbox_t *q, au_msg_t *msg)
{
  /* relaxed: published by the release store into prev's link below. */
  atomic_store_explicit(link_of(msg), NULL, memory_order_relaxed);
  /* acq_rel: acquire so that we see the consumer's mark-empty (and the stub it left);
   * release so that a later producer that links after us is ordered after our msg. */
  uintptr_t prev = atomic_exchange_explicit(&q->head, (uintptr_t)msg, memory_order_acq_rel);
  au_msg_t *p = (au_msg_t *)(prev & ~EMPTY_TAG);
  /* release: the consumer that acquires the link sees the message's contents. */
  atomic_store_explicit(link_of(p), msg, memory_order_release);
  return (prev & EMPTY_TAG) != 0;
}

bool mailbox_push_chain(mailbox_t *q, au_msg_t *first, au_msg_t *last)
{
  /* relaxed: the links inside the chain are published by the release store below, as
   * a single message's contents are */
  atomic_store_explicit(link_of(last), NULL, memory_order_relaxed);
  /* acq_rel, release: as in mailbox_push, with last standing for the message */
  uintptr_t prev = atomic_exchange_explicit(&q->head, (uintptr_t)last, memory_order_acq_rel);
  au_msg_t *p = (au_msg_t *)(prev & ~EMPTY_TAG);
  atomic_store_explicit(link_of(p), first, memory_order_release);
  return (prev & EMPTY_TAG) != 0;
}

au_msg_t *mailbox_pop(mailbox_t *q, au_msg_t **release)
{
  au_msg_t *tail = q->tail;
  /* acquire: pairs with the producer's release store of the link. */
  au_msg_t *next = atomic_load_explicit(link_of(tail), memory_order_acquire);
  if (!next) {
    *release = NULL;
    return NULL;
  }
  q->tail = next;
  *release = tail;
  return next;
}

bool mailbox_mark_empty(mailbox_t *q)
{
  au_msg_t *tail = q->tail;
  uintptr_t expect = (uintptr_t)tail;
  /* Only when head == tail (nothing pushed past the stub) may the tag be set. release:
   * the producer whose exchange reads the tag, and then schedules us on another
   * thread, sees everything this turn did to the actor's state. */
  return atomic_compare_exchange_strong_explicit(&q->head, &expect, (uintptr_t)tail | EMPTY_TAG,
                                                 memory_order_release, memory_order_relaxed);
}

au_msg_t *mailbox_stub(mailbox_t *q)
{
  return q->tail;
}
