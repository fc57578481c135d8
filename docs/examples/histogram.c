/* histogram.c — the example of docs/workers.md: worker actors that count values into a
 * shared int32 table, wait at a barrier, then check the totals.
 *
 * Build against an installed augur:
 *   cc histogram.c $(pkg-config --cflags --libs augur) -o histogram
 * or with CMake: find_package(augur) and target_link_libraries(... augur::augur).
 */
#include <augur.h>
#include <stdio.h>
#include <stdlib.h>

#define BINS    64
#define VALUES  100000
#define BATCH   1000
#define WORKERS 4

typedef struct shard {
  au_table_t *hist; /* BINS keys, one int32 each */
  uint32_t seed;
  size_t done; /* values counted so far */
  int checked;
  long total; /* what the last check saw */
} shard_t;

static uint32_t next(uint32_t *s) /* xorshift32: each worker's own data */
{
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

static int step(au_worker_t *w, void *arg)
{
  shard_t *s = arg;
  if (s->done == VALUES) {
    /* Everyone's pushes are visible once every worker has passed the barrier. A step
     * that gets AU_EAGAIN returns AU_WAIT and is re-run from the top when the last
     * worker arrives, so what comes before must be safe to repeat (it is here). */
    int rc = au_worker_barrier(w);
    if (rc == AU_EAGAIN) return AU_WAIT;
    if (rc != 0) return rc;
    au_key_t keys[BINS];
    int32_t counts[BINS];
    for (int b = 0; b < BINS; b++) keys[b] = (au_key_t)b;
    if ((rc = au_worker_pull(w, s->hist, keys, BINS, counts)) == AU_EAGAIN) return AU_WAIT;
    if (rc != 0) return rc;
    for (int b = 0; b < BINS; b++) s->total += counts[b];
    s->checked = 1;
    return AU_DONE;
  }

  /* One batch per step: count locally, then push the deltas through the table's kernel
   * (exact int32 adds, so concurrent pushes from other workers sum exactly). */
  au_key_t keys[BINS];
  int32_t delta[BINS] = {0};
  for (int i = 0; i < BATCH; i++) delta[next(&s->seed) % BINS]++;
  for (int b = 0; b < BINS; b++) keys[b] = (au_key_t)b;
  /* Say ahead which keys the next batch will touch: here, all of them, next clock. */
  au_clock_t now = au_worker_clock(w);
  au_worker_intent(w, s->hist, keys, BINS, now + 1, now + 2);
  int rc = au_worker_push(w, s->hist, keys, BINS, delta);
  if (rc != 0) return rc;
  s->done += BATCH;
  au_worker_advance(w);
  return AU_CONTINUE; /* other actors run, then the next step */
}

int main(void)
{
  au_node_t *node;
  int rc = au_node_create(NULL, &node); /* one scheduler thread per core */
  if (rc != 0) {
    fprintf(stderr, "histogram: %s\n", au_strerror(rc));
    return 1;
  }
  au_table_t *hist;
  rc = au_table_create(
      node,
      &(au_table_opts_t){
          .keys = BINS, .dim = 1, .type = AU_I32, .kernel = AU_KERNEL_ADD, .name = "hist"},
      &hist);
  if (rc != 0) {
    fprintf(stderr, "histogram: table: %s\n", au_strerror(rc));
    return 1;
  }
  shard_t shards[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    shards[i] = (shard_t){.hist = hist, .seed = 2463534242u + (uint32_t)i};
    au_worker_spawn(node, &(au_worker_opts_t){.step = step, .arg = &shards[i]}, NULL);
  }
  rc = au_node_run(node); /* until every worker is done */
  int ok = rc == 0;
  /* on a cluster (augur run -n N) every node's workers count into the same table */
  const long want = (long)VALUES * WORKERS * au_node_nodes(node);
  for (int i = 0; i < WORKERS; i++) {
    printf("node %d worker %d saw total=%ld of %ld\n", au_node_rank(node), i, shards[i].total,
           want);
    ok = ok && shards[i].checked && shards[i].total == want;
  }
  au_node_destroy(node);
  if (rc != 0) fprintf(stderr, "histogram: %s\n", au_strerror(rc));
  printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
