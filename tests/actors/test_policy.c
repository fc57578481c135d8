/* test_policy.c — placement decisions for every mode, clock-rate estimates that ignore
 * pauses, and action timing that leaves a margin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "actors/placer.h"
#include "actors/policy.h"

#define MS    1000000ull
#define NODES 200 /* node sets sized past 64: placement takes every node of a cluster */

/* Node sets from bits (node b + 64 * hi for bit b of word hi), and back, for the asserts. */
static nodeset_t *sets[64];
static int nsets;
static nodeset_t *set2(uint64_t lo, uint64_t hi)
{
  nodeset_t *s = sets[nsets++ % 64];
  if (!s) s = sets[(nsets - 1) % 64] = nodeset_new(NODES);
  nodeset_clear(s);
  for (int b = 0; b < 64; b++) {
    if (lo >> b & 1) nodeset_add(s, b);
    if (hi >> b & 1) nodeset_add(s, 64 + b);
  }
  return s;
}
static nodeset_t *set(uint64_t lo)
{
  return set2(lo, 0);
}
static uint64_t bits(const nodeset_t *s, int hi)
{
  uint64_t b = 0;
  for (int n = -1; (n = nodeset_next(s, n)) >= 0;)
    if (n / 64 == hi) b |= 1ull << (n % 64);
  return b;
}

static nodeset_t *out; /* place_decide's nodes */

static place_action_t decide(place_mode_t m, int owner, const claim_t *c, int n, int hot,
                             uint64_t replicas)
{
  return place_decide(m, owner, c, n, hot, set(replicas), 0, 100 * MS, out);
}

static void test_modes(void **state)
{
  (void)state;
  out = nodeset_new(NODES);
  /* owner 0; node 1 needs it now, node 2 at the same time, node 3 later */
  claim_t both[] = {{.node = 1, .from_ns = 90 * MS, .until_ns = 200 * MS},
                    {.node = 2, .from_ns = 150 * MS, .until_ns = 300 * MS},
                    {.node = 3, .from_ns = 400 * MS, .until_ns = 500 * MS}};
  place_action_t a = decide(PLACE_CLASSIC, 0, both, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_LEAVE);

  a = decide(PLACE_REPLICATE, 0, both, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), (1u << 1) | (1u << 2) | (1u << 3));

  a = decide(PLACE_RELOCATE, 0, both, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 1); /* the one that needs it first */

  /* hot: a hot actor gets a replica on every claimant; the others are placed as
   * adaptive places them (below: replicas for the two that overlap, not for node 3) */
  a = decide(PLACE_HOT, 0, both, 3, 1, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), (1u << 1) | (1u << 2) | (1u << 3));
  a = decide(PLACE_HOT, 0, both, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), (1u << 1) | (1u << 2));
  claim_t lone[] = {{.node = 2, .from_ns = 90 * MS, .until_ns = 200 * MS}};
  a = decide(PLACE_HOT, 0, lone, 1, 0, 0);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 2);
  a = decide(PLACE_HOT, 0, NULL, 0, 1, 1u << 2); /* unclaimed: a hot one keeps its replicas */
  assert_int_equal(a.kind, PLACE_LEAVE);
  a = decide(PLACE_HOT, 0, NULL, 0, 0, 1u << 2);
  assert_int_equal(a.kind, PLACE_DROP);

  /* adaptive: nodes 1 and 2 overlap -> replicas for both, not for node 3 (later) */
  a = decide(PLACE_ADAPTIVE, 0, both, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), (1u << 1) | (1u << 2));

  /* adaptive: one node -> move there, whatever its window */
  claim_t one[] = {{.node = 2, .from_ns = 150 * MS, .until_ns = 300 * MS},
                   {.node = 2, .from_ns = 400 * MS, .until_ns = 500 * MS}};
  a = decide(PLACE_ADAPTIVE, 0, one, 2, 0, 0);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 2);

  /* adaptive: back to back, no overlap -> move to the first, not replicate */
  claim_t seq[] = {{.node = 3, .from_ns = 300 * MS, .until_ns = 400 * MS},
                   {.node = 1, .from_ns = 100 * MS, .until_ns = 200 * MS}};
  a = decide(PLACE_ADAPTIVE, 0, seq, 2, 0, 0);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 1);

  /* the owner needs it with someone else: the other gets a replica, the owner keeps it */
  claim_t mine[] = {{.node = 0, .from_ns = 90 * MS, .until_ns = 200 * MS},
                    {.node = 2, .from_ns = 100 * MS, .until_ns = 200 * MS}};
  a = decide(PLACE_ADAPTIVE, 0, mine, 2, 0, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), 1u << 2);

  /* only the owner, or nobody: leave, or drop replicas no one needs */
  a = decide(PLACE_ADAPTIVE, 0, mine, 1, 0, 1u << 2);
  assert_int_equal(a.kind, PLACE_DROP);
  a = decide(PLACE_ADAPTIVE, 0, NULL, 0, 0, 0);
  assert_int_equal(a.kind, PLACE_LEAVE);
  a = decide(PLACE_ADAPTIVE, 0, NULL, 0, 0, 1u << 2);
  assert_int_equal(a.kind, PLACE_DROP);

  /* one claimant that already holds a replica keeps it (no drop, then move); one that
   * holds none, while another node does, gets the actor */
  a = decide(PLACE_ADAPTIVE, 0, one, 2, 0, 1u << 2);
  assert_int_equal(a.kind, PLACE_LEAVE);
  a = decide(PLACE_ADAPTIVE, 0, one, 2, 0, 1u << 3);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 2);

  /* an actor shared in its last period of use: a lone claimant gets a replica and the
   * actor stays with its owner (it is not pulled to whichever node comes first) */
  a = place_decide(PLACE_ADAPTIVE, 0, seq, 2, 0, NULL, 1, 100 * MS, out);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), 1u << 1);
  a = place_decide(PLACE_ADAPTIVE, 1, seq, 2, 0, NULL, 1, 100 * MS, out); /* the claimant owns it */
  assert_int_equal(a.kind, PLACE_LEAVE);

  /* expired claims are absent */
  claim_t old[] = {{.node = 1, .from_ns = 10 * MS, .until_ns = 50 * MS}};
  a = decide(PLACE_ADAPTIVE, 0, old, 1, 0, 1u << 1);
  assert_int_equal(a.kind, PLACE_DROP);
  a = decide(PLACE_RELOCATE, 0, old, 1, 0, 0);
  assert_int_equal(a.kind, PLACE_LEAVE);

  /* nodes past 64 take part like the others */
  claim_t far[] = {{.node = 70, .from_ns = 90 * MS, .until_ns = 200 * MS},
                   {.node = 199, .from_ns = 90 * MS, .until_ns = 200 * MS},
                   {.node = 3, .from_ns = 90 * MS, .until_ns = 200 * MS}};
  a = decide(PLACE_ADAPTIVE, 0, far, 3, 0, 0);
  assert_int_equal(a.kind, PLACE_REPLICAS);
  assert_int_equal(bits(out, 0), 1u << 3);
  assert_int_equal(bits(out, 1), 1ull << 6);
  assert_int_equal(bits(out, 3), 1ull << 7);
  a = decide(PLACE_ADAPTIVE, 0, far, 1, 0, 0);
  assert_int_equal(a.kind, PLACE_MOVE);
  assert_int_equal(a.node, 70);
  free(out);
}

/* place_plan: the decision carried out under the rules around it. */
static void test_plan(void **state)
{
  (void)state;
  place_plan_t p = {
      .give = nodeset_new(NODES), .drop = nodeset_new(NODES), .work = nodeset_new(NODES)};
  claim_t one[] = {{.node = 2, .from_ns = 90 * MS, .until_ns = 200 * MS}};
  place_input_t in = {.mode = PLACE_ADAPTIVE,
                      .owner = 0,
                      .claims = one,
                      .nclaims = 1,
                      .claimants = set(1u << 2),
                      .now_ns = 100 * MS};
  /* a lone claimant: the actor moves there */
  place_plan(&in, &p);
  assert_int_equal(p.move_to, 2);
  assert_true(nodeset_empty(p.give) && nodeset_empty(p.drop));
  /* ... under a consistency bound (pinned) it gets a replica instead, also when it holds
   * other replicas (they stay), and one it holds already is not given again */
  in.pinned = 1;
  place_plan(&in, &p);
  assert_int_equal(p.move_to, -1);
  assert_int_equal(bits(p.give, 0), 1u << 2);
  assert_int_equal(bits(p.drop, 0), 0);
  in.replicas = set(1u << 2);
  place_plan(&in, &p);
  assert_int_equal(p.move_to, -1);
  assert_int_equal(bits(p.give, 0) | bits(p.drop, 0), 0);
  in.replicas = NULL;
  in.pinned = 0;
  /* ... but not while it waits out its hold after arriving: look again when it ends */
  in.arrived_ns = 99 * MS + 500 * 1000;
  place_plan(&in, &p);
  assert_int_equal(p.move_to, -1);
  assert_int_equal(p.retry_ns, in.arrived_ns + PLACE_HOLD_NS);
  in.arrived_ns = 0;
  /* ... and an actor with replicas drops them first (those not told already) */
  in.replicas = set((1u << 1) | (1u << 3));
  in.dropping = set(1u << 3);
  place_plan(&in, &p);
  assert_int_equal(p.move_to, -1);
  assert_int_equal(bits(p.drop, 0), 1u << 1);
  /* a replica whose node no longer claims it goes, unless a keep holds it */
  claim_t two[] = {{.node = 1, .from_ns = 90 * MS, .until_ns = 200 * MS},
                   {.node = 2, .from_ns = 90 * MS, .until_ns = 200 * MS}};
  in.claims = two;
  in.nclaims = 2;
  in.claimants = set((1u << 1) | (1u << 2));
  in.replicas = set((1u << 1) | (1u << 3));
  in.dropping = set(0);
  place_plan(&in, &p);
  assert_int_equal(bits(p.give, 0), 1u << 2); /* node 1 has one already */
  assert_int_equal(bits(p.drop, 0), 1u << 3);
  in.keep_until = 150 * MS;
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), 0);
  /* nobody claims it: the replicas go once the keep is over */
  in.nclaims = 0;
  in.claimants = set(0);
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), 0);
  in.now_ns = 160 * MS;
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), (1u << 1) | (1u << 3));
  /* replicate never drops, and never gives the owner a replica */
  in.mode = PLACE_REPLICATE;
  in.claims = two;
  in.nclaims = 2;
  in.claimants = set((1u << 0) | (1u << 2));
  two[0].node = 0;
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), 0);
  assert_int_equal(bits(p.give, 0), 1u << 2);
  /* hot: a replica whose node no longer claims the actor stays if the actor is hot, and
   * goes as in adaptive if it is not */
  in.mode = PLACE_HOT;
  in.claims = one;
  in.nclaims = 1;
  in.claimants = set(1u << 2);
  in.replicas = set((1u << 1) | (1u << 2));
  in.keep_until = 0;
  in.hot = 1;
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), 0);
  assert_int_equal(p.move_to, -1);
  in.hot = 0;
  place_plan(&in, &p);
  assert_int_equal(bits(p.drop, 0), 1u << 1);
  free(p.give), free(p.drop), free(p.work);
}

/* claims_inputs: an actor is hot if an active claim says so; while none is active, what
 * the last claims said (a hot actor keeps its replicas through the pauses in its use) */
static void test_hot_mark(void **state)
{
  (void)state;
  claim_t cl[2] = {{.node = 1, .from_ns = 0, .until_ns = 200 * MS, .hot = 1}};
  rec_t r = {0};
  r.claims.claims = cl;
  r.claims.nclaims = r.claims.capclaims = 1;
  nodeset_t *who = nodeset_new(NODES);
  place_input_t in = {0};
  claims_inputs(&r, 100 * MS, &in, who);
  assert_int_equal(in.hot, 1);
  assert_int_equal(bits(who, 0), 1u << 1);
  claims_inputs(&r, 300 * MS, &in, who); /* lapsed: none active, still hot */
  assert_int_equal(r.claims.nclaims, 0);
  assert_int_equal(in.hot, 1);
  assert_int_equal(bits(who, 0), 0);
  cl[0] = (claim_t){.node = 2, .from_ns = 300 * MS, .until_ns = 400 * MS, .hot = 0};
  r.claims.nclaims = 1;
  claims_inputs(&r, 350 * MS, &in, who); /* a claim that does not count it hot */
  assert_int_equal(in.hot, 0);
  claims_inputs(&r, 500 * MS, &in, who);
  assert_int_equal(in.hot, 0);
  cl[0] = (claim_t){.node = 2, .from_ns = 500 * MS, .until_ns = 600 * MS, .hot = 0};
  cl[1] = (claim_t){.node = 3, .from_ns = 500 * MS, .until_ns = 700 * MS, .hot = 1};
  r.claims.nclaims = r.claims.capclaims = 2;
  claims_inputs(&r, 550 * MS, &in, who); /* any claimant that counts it hot */
  assert_int_equal(in.hot, 1);
  free(who);
}

static void test_mode_names(void **state)
{
  (void)state;
  const char *names[] = {"classic", "replicate", "relocate", "hot", "adaptive"};
  for (int i = 0; i < 5; i++) {
    place_mode_t m;
    assert_int_equal(place_mode_parse(names[i], &m), 0);
    assert_string_equal(place_mode_name(m), names[i]);
  }
  place_mode_t m;
  assert_int_equal(place_mode_parse("sometimes", &m), AU_EINVAL);
  assert_int_equal(place_mode_parse(NULL, &m), AU_EINVAL);
}

static void test_clock_rate_and_timing(void **state)
{
  (void)state;
  clock_rate_t r = {0};
  assert_int_equal(clock_rate_eta(&r, 0, 10), 0); /* nothing known: act at once */
  uint64_t t = 1000 * MS;
  for (au_clock_t c = 0; c < 50; c++, t += 2 * MS) clock_rate_tick(&r, c, t);
  assert_true(r.ns_per_tick > 1.99 * MS && r.ns_per_tick < 2.01 * MS);
  /* a pause between runs is not a sample */
  clock_rate_tick(&r, 50, t + 5000 * MS);
  assert_true(r.ns_per_tick < 2.01 * MS);
  /* the clock slows down: the estimate follows */
  t += 5000 * MS;
  for (au_clock_t c = 51; c < 100; c++) clock_rate_tick(&r, c, t += 4 * MS);
  assert_true(r.ns_per_tick > 3.9 * MS && r.ns_per_tick < 4.1 * MS);
  uint64_t eta = clock_rate_eta(&r, 100, 110);
  assert_true(eta > 39 * MS && eta < 41 * MS);
  assert_int_equal(clock_rate_eta(&r, 110, 100), 0);

  action_latency_t l;
  action_latency_init(&l, 1 * MS);
  assert_int_equal(action_delay(&l, 10 * MS), 8 * MS); /* margin: latency + 4 x dev (1/4) */
  action_latency_observe(&l, 3 * MS);                  /* first sample replaces the guess */
  assert_int_equal(action_delay(&l, 10 * MS), 4 * MS);
  assert_int_equal(action_delay(&l, 5 * MS), 0); /* too close: act now */
  for (int i = 0; i < 40; i++) action_latency_observe(&l, 1 * MS);
  assert_true(l.ns < 1.01 * MS);
  assert_true(action_margin(&l) < 1.05 * MS); /* steady: the deviation fades */
  for (int i = 0; i < 40; i++) action_latency_observe(&l, i % 2 ? 1 * MS : 3 * MS);
  assert_true(action_margin(&l) > 5 * MS); /* 1 or 3 ms: mean 2, deviation 1 */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_modes),
      cmocka_unit_test(test_plan),
      cmocka_unit_test(test_hot_mark),
      cmocka_unit_test(test_mode_names),
      cmocka_unit_test(test_clock_rate_and_timing),
  };
  return cmocka_run_group_tests_name("policy", tests, NULL, NULL);
}
