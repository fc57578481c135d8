/* bench_ids.c — augur-bench-ids: pushes of zipf-distributed 64-bit ids into an id table
 * under a memory budget (issue 18's benchmark). Two streams of the same length and skew
 * alternate, --runs times each (default 3): "many" draws from 2^28 ranks and holds about
 * 10^8 distinct ids, "few" draws from 2^20 ranks and holds about 10^6. Each run makes a
 * fresh node and table (dim 32, AdaGrad: 256-byte rows) and pushes its stream from
 * --threads threads (default 2) in batches of 256 ids; the streams are drawn before the
 * clock starts. Prints key=value lines per run and the medians, the ratio of updates/s
 * (issue 18's mark: many/few >= 0.8), memory over the resident rows' raw bytes (<= 1.3),
 * whether the budget held, and how many rows belong to ids pushed fewer than --admit times
 * (must be 0). docs/benchmarks.md has figures.
 *
 *   augur-bench-ids [--pushes N] [--budget MB] [--admit K] [--skew S] [--threads T]
 *                   [--runs R] [--stream many|few|both]
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

enum { DIM = 32, BATCH = 256, MAX_THREADS = 16 };
static const uint64_t ID_MUL = 0x9e3779b97f4a7c15ULL; /* odd: rank -> id is a bijection */

static uint64_t rng(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

typedef struct stream {
  const char *name;
  uint64_t ranks; /* the universe: ranks 0..ranks-1 */
  uint64_t *ids;  /* pushes of them, as ids */
  uint8_t *count; /* pushes per rank, saturating at 255 */
  uint64_t distinct;
} stream_t;

typedef struct gen {
  stream_t *st;
  size_t from, to;
  double skew;
} gen_t;

/* Zipf(skew) ranks by continuous inversion, 1..ranks, as 0-based ranks times ID_MUL. */
static void *draw(void *arg)
{
  gen_t *g = arg;
  double e = 1 - g->skew, top = pow((double)g->st->ranks, e) - 1;
  uint64_t s = 0x5eed0000ULL + g->from;
  for (size_t i = g->from; i < g->to; i++) {
    double u = (double)(rng(&s) >> 11) * 0x1.0p-53;
    uint64_t r = (uint64_t)pow(1 + u * top, 1 / e);
    if (r < 1) r = 1;
    if (r > g->st->ranks) r = g->st->ranks;
    g->st->ids[i] = (r - 1) * ID_MUL;
  }
  return NULL;
}

static uint64_t inverse_mul(void)
{
  uint64_t x = ID_MUL; /* Newton: each step doubles the correct low bits */
  for (int i = 0; i < 6; i++) x *= 2 - ID_MUL * x;
  return x;
}

static int make_stream(stream_t *st, size_t n, double skew, int threads)
{
  st->ids = malloc(n * sizeof(uint64_t));
  st->count = calloc(st->ranks, 1);
  if (!st->ids || !st->count) return -1;
  pthread_t th[MAX_THREADS];
  gen_t g[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    g[i] =
        (gen_t){st, n * (size_t)i / (size_t)threads, n * (size_t)(i + 1) / (size_t)threads, skew};
    pthread_create(&th[i], NULL, draw, &g[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  uint64_t inv = inverse_mul();
  for (size_t i = 0; i < n; i++) {
    uint8_t *c = &st->count[st->ids[i] * inv];
    st->distinct += *c == 0;
    if (*c < 255) (*c)++;
  }
  return 0;
}

typedef struct job {
  au_ids_t *t;
  const uint64_t *ids;
  size_t from, to;
  int rc;
} job_t;

static float grad[BATCH * DIM];

static void *pusher(void *arg)
{
  job_t *j = arg;
  for (size_t i = j->from; i < j->to && !j->rc; i += BATCH) {
    size_t n = j->to - i < BATCH ? j->to - i : BATCH;
    j->rc = au_ids_push(j->t, j->ids + i, n, grad, i / BATCH);
  }
  return NULL;
}

typedef struct check {
  const uint8_t *count;
  uint64_t inv, admit, below;
} check_t;

static int below_threshold(void *arg, uint64_t id, const void *values)
{
  (void)values;
  check_t *c = arg;
  c->below += c->count[id * c->inv] < c->admit;
  return 0;
}

typedef struct result {
  double updates_s, pushes_s, mem_ratio;
  uint64_t below, over_budget;
} result_t;

static int run(const stream_t *st, size_t n, size_t budget, uint32_t admit, int threads,
               result_t *res)
{
  au_node_t *node;
  if (au_node_create(&(au_node_opts_t){.threads = 1}, &node) != 0) return -1;
  au_ids_opts_t o = {.row = {.dim = DIM,
                             .type = AU_F32,
                             .init = AU_INIT_UNIFORM,
                             .init_a = -0.01f,
                             .init_b = 0.01f,
                             .optim = AU_OPTIM_ADAGRAD,
                             .lr = 0.05f},
                     .budget = budget,
                     .admit = admit};
  au_ids_t *t;
  if (au_ids_create(node, &o, &t) != 0) return -1;
  pthread_t th[MAX_THREADS];
  job_t jobs[MAX_THREADS];
  uint64_t t0 = au_now_ns();
  for (int i = 0; i < threads; i++) {
    /* each thread's share starts on a batch boundary */
    size_t from = n / BATCH * (size_t)i / (size_t)threads * BATCH;
    size_t to = i + 1 == threads ? n : n / BATCH * (size_t)(i + 1) / (size_t)threads * BATCH;
    jobs[i] = (job_t){t, st->ids, from, to, 0};
    pthread_create(&th[i], NULL, pusher, &jobs[i]);
  }
  int rc = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    rc |= jobs[i].rc;
  }
  double secs = (double)(au_now_ns() - t0) / 1e9;
  au_ids_stats_t s;
  au_ids_stats(t, &s);
  check_t c = {st->count, inverse_mul(), admit > 1 ? admit : 1, 0};
  au_ids_foreach(t, below_threshold, &c);
  res->pushes_s = (double)n / secs;
  res->updates_s = (double)(n - s.rejected) / secs;
  res->mem_ratio = (double)s.memory / ((double)s.rows * (double)s.row_bytes);
  res->below = c.below;
  res->over_budget = s.memory > budget;
  printf("stream=%s distinct=%llu pushes=%zu secs=%.2f pushes_per_s=%.4g updates_per_s=%.4g "
         "rows=%llu capacity=%llu admitted=%llu evicted=%llu rejected=%llu forgotten=%llu "
         "memory=%zu budget=%zu memory_over_row_bytes=%.3f rows_below_admit=%llu rc=%d\n",
         st->name, (unsigned long long)st->distinct, n, secs, res->pushes_s, res->updates_s,
         (unsigned long long)s.rows, (unsigned long long)s.capacity, (unsigned long long)s.admitted,
         (unsigned long long)s.evicted, (unsigned long long)s.rejected,
         (unsigned long long)s.forgotten, s.memory, budget, res->mem_ratio,
         (unsigned long long)c.below, rc);
  fflush(stdout);
  au_node_destroy(node);
  return rc;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof(double), cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int usage(FILE *f)
{
  fprintf(f, "usage: augur-bench-ids [--pushes N] [--budget MB] [--admit K] [--skew S]\n"
             "                       [--threads T] [--runs R] [--stream many|few|both]\n"
             "  --pushes N   ids per stream (default 200000000)\n"
             "  --budget MB  the table's memory budget (default 256)\n"
             "  --admit K    pushes that make an id a row (default 3)\n"
             "  --skew S     zipf exponent, 0 < S < 1 (default 0.7)\n"
             "  --threads T  pushing threads, 1..16 (default 2)\n"
             "  --runs R     runs of each stream, alternating (default 3)\n"
             "  --stream S   many, few or both (default both; one stream prints no ratio)\n");
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
  size_t pushes = 200000000, budget_mb = 256;
  unsigned admit = 3, runs = 3;
  int threads = 2;
  double skew = 0.7;
  int only = -1; /* a stream's index, or -1: both */
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) return usage(stdout);
    if (!v) return usage(stderr);
    i++;
    if (!strcmp(a, "--stream")) {
      if (!strcmp(v, "many") || !strcmp(v, "few") || !strcmp(v, "both")) {
        only = !strcmp(v, "many") ? 0 : !strcmp(v, "few") ? 1 : -1;
        continue;
      }
      fprintf(stderr, "augur-bench-ids: --stream wants many, few or both, not '%s'\n", v);
      return 2;
    }
    if (!strcmp(a, "--pushes"))
      pushes = strtoull(v, &end, 10);
    else if (!strcmp(a, "--budget"))
      budget_mb = strtoull(v, &end, 10);
    else if (!strcmp(a, "--admit"))
      admit = (unsigned)strtoul(v, &end, 10);
    else if (!strcmp(a, "--skew"))
      skew = strtod(v, &end);
    else if (!strcmp(a, "--threads"))
      threads = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--runs"))
      runs = (unsigned)strtoul(v, &end, 10);
    else
      return usage(stderr);
    if (!end || *end) {
      fprintf(stderr, "augur-bench-ids: %s wants a number, not '%s'\n", a, v);
      return 2;
    }
  }
  if (!pushes || !budget_mb || admit > 255 || !(skew > 0 && skew < 1) || threads < 1 ||
      threads > MAX_THREADS || runs < 1 || runs > 99) {
    fprintf(stderr, "augur-bench-ids: a value is out of range (--help)\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof(grad) / sizeof(grad[0]); i++)
    grad[i] = (float)((int)(i % 13) - 6) * 0.01f;
  stream_t streams[2] = {{.name = "many", .ranks = 1ULL << 28},
                         {.name = "few", .ranks = 1ULL << 20}};
  for (int k = 0; k < 2; k++)
    if ((only < 0 || only == k) && make_stream(&streams[k], pushes, skew, threads) != 0) {
      fprintf(stderr, "augur-bench-ids: out of memory for the streams\n");
      return 1;
    }
  printf("pushes=%zu budget=%zu admit=%u skew=%.2f threads=%d dim=%d optim=adagrad "
         "distinct_many=%llu distinct_few=%llu\n",
         pushes, budget_mb << 20, admit, skew, threads, DIM,
         (unsigned long long)streams[0].distinct, (unsigned long long)streams[1].distinct);
  double ups[2][99], pps[2][99], mem[2][99];
  uint64_t below = 0, over = 0;
  for (unsigned r = 0; r < runs; r++)
    for (int k = 0; k < 2; k++) {
      if (only >= 0 && only != k) continue;
      result_t res;
      if (run(&streams[k], pushes, budget_mb << 20, admit, threads, &res) != 0) {
        fprintf(stderr, "augur-bench-ids: a run failed\n");
        return 1;
      }
      ups[k][r] = res.updates_s;
      pps[k][r] = res.pushes_s;
      mem[k][r] = res.mem_ratio;
      below += res.below;
      over += res.over_budget;
    }
  if (only >= 0) {
    printf("median_pushes_per_s_%s=%.4g median_memory_over_row_bytes_%s=%.3f rows_below_admit=%llu "
           "runs_over_budget=%llu\n",
           streams[only].name, median(pps[only], (int)runs), streams[only].name,
           median(mem[only], (int)runs), (unsigned long long)below, (unsigned long long)over);
    free(streams[only].ids);
    free(streams[only].count);
    return 0;
  }
  double um = median(ups[0], (int)runs), uf = median(ups[1], (int)runs);
  double pm = median(pps[0], (int)runs), pf = median(pps[1], (int)runs);
  printf("median_updates_per_s_many=%.4g median_updates_per_s_few=%.4g "
         "updates_ratio_many_over_few=%.3f\n",
         um, uf, um / uf);
  printf("median_pushes_per_s_many=%.4g median_pushes_per_s_few=%.4g "
         "pushes_ratio_many_over_few=%.3f\n",
         pm, pf, pm / pf);
  printf("median_memory_over_row_bytes_many=%.3f median_memory_over_row_bytes_few=%.3f "
         "rows_below_admit=%llu runs_over_budget=%llu\n",
         median(mem[0], (int)runs), median(mem[1], (int)runs), (unsigned long long)below,
         (unsigned long long)over);
  for (int k = 0; k < 2; k++) {
    free(streams[k].ids);
    free(streams[k].count);
  }
  return 0;
}
