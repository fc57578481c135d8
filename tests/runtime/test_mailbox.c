/* test_mailbox.c — MPSC mailbox: N producers x 10^6 messages into one consumer, no loss,
 * no duplicate, FIFO per producer; and the "was empty" hand-over: exactly one push per
 * successful mark-empty reports it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/mailbox.h"

enum { NPROD = 4, PER_PROD = 1000000 };

typedef struct {
  uint32_t producer;
  uint32_t seq;
} body_t;

/* Messages come from malloc here: the pool has its own test. */
static au_msg_t *new_msg(uint32_t producer, uint32_t seq)
{
  au_msg_t *m = malloc(sizeof(au_msg_t) + sizeof(body_t));
  m->len = sizeof(body_t);
  body_t b = {producer, seq};
  memcpy(m->data, &b, sizeof(b));
  return m;
}

typedef struct {
  mailbox_t q;
  atomic_long wakeups; /* pushes that found the mailbox empty */
  uint32_t id;
} shared_t;

typedef struct {
  shared_t *sh;
  uint32_t id;
} prod_arg_t;

static void *producer(void *arg)
{
  prod_arg_t *p = arg;
  for (uint32_t i = 0; i < PER_PROD; i++)
    if (mailbox_push(&p->sh->q, new_msg(p->id, i))) atomic_fetch_add(&p->sh->wakeups, 1);
  return NULL;
}

static void test_mpsc_no_loss_fifo(void **state)
{
  (void)state;
  shared_t sh;
  mailbox_init(&sh.q, new_msg(0, 0));
  atomic_init(&sh.wakeups, 0);
  pthread_t th[NPROD];
  prod_arg_t args[NPROD];
  for (uint32_t i = 0; i < NPROD; i++) {
    args[i] = (prod_arg_t){&sh, i};
    pthread_create(&th[i], NULL, producer, &args[i]);
  }
  uint32_t next[NPROD] = {0};
  long got = 0, out_of_order = 0, marks = 0;
  while (got < (long)NPROD * PER_PROD) {
    au_msg_t *rel;
    au_msg_t *m = mailbox_pop(&sh.q, &rel);
    free(rel);
    if (!m) {
      /* Like a scheduler: mark empty, and count how often it succeeded. */
      if (mailbox_mark_empty(&sh.q)) marks++;
      continue;
    }
    body_t b;
    memcpy(&b, m->data, sizeof(b));
    assert_true(b.producer < NPROD);
    if (b.seq != next[b.producer]) out_of_order++;
    next[b.producer] = b.seq + 1;
    got++;
  }
  for (int i = 0; i < NPROD; i++) pthread_join(th[i], NULL);
  au_msg_t *rel;
  assert_null(mailbox_pop(&sh.q, &rel));
  assert_int_equal(out_of_order, 0);
  for (int i = 0; i < NPROD; i++) assert_int_equal(next[i], PER_PROD);
  /* The first push finds the initial empty tag; every later report pairs with a mark. */
  assert_int_equal(atomic_load(&sh.wakeups), marks + 1);
  free(mailbox_stub(&sh.q));
}

static void test_empty_tag_handover(void **state)
{
  (void)state;
  mailbox_t q;
  mailbox_init(&q, new_msg(0, 0));
  au_msg_t *rel;
  assert_true(mailbox_push(&q, new_msg(0, 1)));  /* starts empty: schedule */
  assert_false(mailbox_push(&q, new_msg(0, 2))); /* already scheduled */
  assert_false(mailbox_mark_empty(&q));          /* not empty: cannot mark */
  au_msg_t *m = mailbox_pop(&q, &rel);
  free(rel);
  assert_non_null(m);
  m = mailbox_pop(&q, &rel);
  free(rel);
  assert_non_null(m);
  assert_null(mailbox_pop(&q, &rel));
  assert_true(mailbox_mark_empty(&q));
  assert_true(mailbox_push(&q, new_msg(0, 3))); /* empty again: schedule again */
  m = mailbox_pop(&q, &rel);
  free(rel);
  assert_non_null(m);
  free(mailbox_stub(&q));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_tag_handover),
      cmocka_unit_test(test_mpsc_no_loss_fifo),
  };
  return cmocka_run_group_tests_name("mailbox", tests, NULL, NULL);
}
