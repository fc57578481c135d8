/* mailbox.h — an actor's mailbox: an intrusive lock-free multi-producer single-consumer
 * queue of au_msg_t (Vyukov's design), whose head pointer carries an "empty" tag in its
 * low bit.
 *
 * The invariant: exactly one push returns true ("was empty") for each time the
 * consumer successfully marks the queue empty, so exactly one sender schedules the
 * actor, and an actor is in at most one run queue and on at most one thread.
 *
 * The consumer keeps the last message it popped as the queue's stub; it is freed by the
 * next pop (the behaviour that read it has returned by then) or by mailbox_destroy.
 */
#ifndef AUGUR_RUNTIME_MAILBOX_H
#define AUGUR_RUNTIME_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>

#include "augur.h"

typedef struct mailbox {
  _Alignas(64) _Atomic(uintptr_t) head; /* producers: last pushed message | empty tag */
  _Alignas(64) au_msg_t *tail;          /* consumer only: the stub */
} mailbox_t;

/* stub: a message the mailbox owns from now on. Starts empty (tag set), unscheduled. */
void mailbox_init(mailbox_t *q, au_msg_t *stub);

/* Any thread. Returns true when the queue was marked empty: the caller must schedule
 * the consumer. */
bool mailbox_push(mailbox_t *q, au_msg_t *msg);

/* Any thread: mailbox_push of first..last, already linked through au__next (last's link
 * NULL), in one exchange: they arrive in that order, with nothing between them. */
bool mailbox_push_chain(mailbox_t *q, au_msg_t *first, au_msg_t *last);

/* Consumer only. Returns the next message or NULL; *release is set to the previous stub,
 * which the caller frees (it is no longer reachable by producers). */
au_msg_t *mailbox_pop(mailbox_t *q, au_msg_t **release);

/* Consumer only. Tries to mark the queue empty. true: it is marked, the next push will
 * report it; false: a message arrived meanwhile (or a push is still linking in), and
 * the consumer must stay scheduled. */
bool mailbox_mark_empty(mailbox_t *q);

/* Consumer only, when nothing can push any more: returns the stub for freeing. */
au_msg_t *mailbox_stub(mailbox_t *q);

#endif
