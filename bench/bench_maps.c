/* bench_maps.c — augur-bench-maps: the runtime's u64map (open addressing, one thread)
 * against Concurrency Kit's ck_ht (direct 64-bit keys, single writer), on the placer's use:
 * records keyed by (table, actor), looked up once per message entry. Prints key=value
 * lines; the ratio is what to compare across machines.
 */
#include <ck_ht.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

#include "runtime/u64map.h"

static void *ht_malloc(size_t n)
{
  return malloc(n);
}
static void *ht_realloc(void *p, size_t old, size_t n, bool defer)
{
  (void)old, (void)defer;
  return realloc(p, n);
}
static void ht_free(void *p, size_t n, bool defer)
{
  (void)n, (void)defer;
  free(p);
}
static struct ck_malloc allocator = {ht_malloc, ht_realloc, ht_free};

static uint64_t splitmix(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
  size_t n = 50000, lookups = 20000000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: augur-bench-maps [--keys N] [--lookups M]\n"
             "  N records keyed like the placer's (table << 48 | actor) + 1, then M lookups of\n"
             "  random present keys, in u64map and in ck_ht; medians of 5 rounds.\n");
      return 0;
    } else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--lookups") && i + 1 < argc) {
      lookups = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "augur-bench-maps: unknown or incomplete flag '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (n == 0 || lookups == 0) {
    fprintf(stderr, "augur-bench-maps: --keys and --lookups must be positive\n");
    return 2;
  }
  uint64_t *keys = malloc(n * sizeof(*keys));
  void **vals = malloc(n * sizeof(*vals));
  for (size_t i = 0; i < n; i++) keys[i] = ((uint64_t)(i % 3) << 48 | i) + 1, vals[i] = &keys[i];
  double tu[5], tc[5];
  uint64_t sum_u = 0, sum_c = 0;
  for (int round = 0; round < 5; round++) {
    u64map_t m;
    u64map_init(&m, 6);
    for (size_t i = 0; i < n; i++) u64map_put(&m, keys[i], vals[i]);
    ck_ht_t h;
    ck_ht_init(&h, CK_HT_MODE_DIRECT, NULL, &allocator, 64, 1);
    for (size_t i = 0; i < n; i++) {
      ck_ht_entry_t e;
      ck_ht_hash_t hv;
      ck_ht_hash_direct(&hv, &h, (uintptr_t)keys[i]);
      ck_ht_entry_set_direct(&e, hv, (uintptr_t)keys[i], (uintptr_t)vals[i]);
      ck_ht_put_spmc(&h, hv, &e);
    }
    /* the same random sequence of present keys for both */
    uint64_t seed = 7 + (uint64_t)round, t0 = au_now_ns();
    for (size_t i = 0; i < lookups; i++)
      sum_u += (uintptr_t)u64map_get(&m, keys[splitmix(&seed) % n]) & 0xff;
    uint64_t t1 = au_now_ns();
    seed = 7 + (uint64_t)round;
    for (size_t i = 0; i < lookups; i++) {
      ck_ht_entry_t e;
      ck_ht_hash_t hv;
      uint64_t k = keys[splitmix(&seed) % n];
      ck_ht_hash_direct(&hv, &h, (uintptr_t)k);
      ck_ht_entry_key_set_direct(&e, (uintptr_t)k);
      if (ck_ht_get_spmc(&h, hv, &e)) sum_c += ck_ht_entry_value_direct(&e) & 0xff;
    }
    uint64_t t2 = au_now_ns();
    tu[round] = (double)(t1 - t0) / (double)lookups;
    tc[round] = (double)(t2 - t1) / (double)lookups;
    u64map_destroy(&m);
    ck_ht_destroy(&h);
  }
  qsort(tu, 5, sizeof(double), cmp);
  qsort(tc, 5, sizeof(double), cmp);
  printf("keys=%zu lookups=%zu u64map_ns_per_get=%.2f ck_ht_ns_per_get=%.2f "
         "ck_ht_over_u64map=%.3f same_answers=%d\n",
         n, lookups, tu[2], tc[2], tc[2] / tu[2], sum_u == sum_c);
  free(keys);
  free(vals);
  return sum_u == sum_c ? 0 : 1;
}
