/* ids_node.c — one node of the id-table cluster test (test_cluster.sh ids):
 *
 *   ids_node run [CKPT_DIR]      push, check every id from every node, checkpoint
 *   ids_node restore CKPT_DIR N  restore what N nodes wrote, check every id again
 *
 * Two id tables, the same on every node (au_ids_create is collective):
 *   exact: int32 rows of DIM, admitted on the first push. Every worker of every node
 *     pushes clock-stamped deltas to ids of a fixed set of IDS random 64-bit ids, a step
 *     at a time, most of them held by other nodes. Then every worker pulls every id
 *     (au_worker_ids_pull, fetching what others hold) and compares it with the serial
 *     sum, which every node computes alone: "same id, same row on every node".
 *   admit: float32 rows, admitted on the 3rd push (no doorkeeper). Id j is pushed
 *     j % 6 times in all, from nodes and workers in turn: the cluster's rows, rejected
 *     updates and forgotten candidates, summed over the nodes, must be the serial
 *     model's (#{j % 6 >= 3}, sum of min(j % 6, 2), 0).
 * Every node also checks that all nodes name the same owner for every id, that it holds
 * exactly the exact table's ids it owns, and that au_ids_push refuses another node's id
 * from outside a worker. Prints one line per node ending in "ok" when every check held.
 * With IDS_NODE_PLACE=relocate both tables are placed relocate, and each push step first
 * pulls the ids it pushes to (their actors move to the node that pulls them, and between
 * the nodes that want them at once): the sums and the admission counters must still be
 * the serial ones, every pushed id held by exactly one node (the one it names as owner),
 * and actors must have moved.
 * With IDS_NODE_PLACE=replicate, adaptive or hot both tables are placed so, each push
 * step pulls its ids first as under relocate, and (adaptive, hot) announces the next
 * step's ids with au_worker_ids_intent: replicas must have been made (and, under
 * replicate, read: rows pulled from them count local), and every check above must hold,
 * the pulls of phase 1 reading this node's replicas, which must equal the owners' rows
 * once the run is over.
 * IDS_NODE_STEPS=N (4..1000, default 20) pushes in N steps instead (a restore must be
 * given the N its run had): the sanitizer builds' relocate run takes fewer.
 * With IDS_NODE_ODD=1 node 1 gives the exact table another budget, with
 * IDS_NODE_ODD=optim_init another optim_init: creation must fail.
 * With IDS_NODE_NOMEM=1 node 1's address space is too small for the exact table's buckets:
 * creation must fail on every node, not only there (the others would wait for it later),
 * and every node says so before any exits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <augur.h>

enum { IDS = 3000, DIM = 4, WORKERS = 2, PER_STEP = 90, CHUNK = 64 };

static int steps = 20; /* IDS_NODE_STEPS */

static uint64_t id_of(int j)
{
  uint64_t z = (uint64_t)j * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 31)) * 0xd6e8feb86659fd93ULL;
  return z ^ (z >> 29);
}

/* The q-th id that worker (rank, w) pushes at step s, and its delta. */
static int pushed(int rank, int w, int s, int q)
{
  return (s * 37 + rank * 211 + w * 101 + q * 31) % IDS;
}

static void delta(int rank, int w, int s, int q, int32_t d[DIM])
{
  d[0] = 1;
  d[1] = rank + 1;
  d[2] = s;
  d[3] = (w * 7 + q) % 13 - 6;
}

static int nodes, rank, pulls_first, intents; /* pulls_first: any placement but classic */
static au_ids_t *exact, *admit;
static int32_t (*want)[DIM]; /* the serial sums */
static int errors;

typedef struct job {
  int w, s, c;
  int phase; /* 0 push, 1 pull */
  int told;  /* the step whose ids were announced (at the step before it) */
  int mismatches;
} job_t;

static int step(au_worker_t *wk, void *arg)
{
  job_t *j = arg;
  if (j->phase == 0) {
    if (j->s == steps) return AU_DONE;
    uint64_t ids[PER_STEP];
    int32_t d[PER_STEP][DIM];
    for (int q = 0; q < PER_STEP; q++) {
      ids[q] = id_of(pushed(rank, j->w, j->s, q));
      delta(rank, j->w, j->s, q, d[q]);
    }
    /* the admission table: id k gets its pushes from the (node, worker, step) that the
       count picks, k % 6 of them */
    uint64_t aid[IDS / 6 * 5];
    float ad[IDS / 6 * 5][DIM];
    int na = 0;
    for (int k = 0; k < IDS; k++)
      for (int c = 0; c < k % 6; c++)
        if ((k + c) % (nodes * WORKERS) == rank * WORKERS + j->w && (k * 3 + c) % steps == j->s) {
          aid[na] = id_of(k);
          for (int x = 0; x < DIM; x++) ad[na][x] = 1;
          na++;
        }
    int rc;
    if (intents && j->s + 1 < steps && j->told != j->s + 1) { /* once, not per re-run */
      /* the next step's ids, from the next clock on: for 1,000 clocks, so that adaptive
         placement finds them worth claiming (one 16-byte row of an actor for one clock it
         would fetch, as it should) */
      uint64_t next[PER_STEP];
      for (int q = 0; q < PER_STEP; q++) next[q] = id_of(pushed(rank, j->w, j->s + 1, q));
      if ((rc = au_worker_ids_intent(wk, exact, next, PER_STEP, j->s + 1, j->s + 1001)) != 0)
        return rc;
      j->told = j->s + 1;
    }
    if (pulls_first) { /* the ids' actors come here (or are fetched when contended), all of
                       them before any push: a step that waits is run again */
      int32_t got[PER_STEP][DIM];
      float agot[IDS / 6 * 5][DIM]; /* (pulls are not pushes: they count for nothing) */
      if ((rc = au_worker_ids_pull(wk, exact, ids, PER_STEP, got)) == AU_EAGAIN ||
          (rc == 0 && (rc = au_worker_ids_pull(wk, admit, aid, (size_t)na, agot)) == AU_EAGAIN))
        return AU_WAIT;
      if (rc != 0) return rc;
    }
    if ((rc = au_worker_ids_push(wk, exact, ids, PER_STEP, d)) != 0 ||
        (rc = au_worker_ids_push(wk, admit, aid, (size_t)na, ad)) != 0)
      return rc;
    j->s++;
    au_worker_advance(wk);
    return AU_CONTINUE;
  }
  /* phase 1: the worker's share of the ids, CHUNK at a time */
  int from = j->c * CHUNK * WORKERS + j->w * CHUNK;
  if (from >= IDS) return AU_DONE;
  int n = IDS - from < CHUNK ? IDS - from : CHUNK;
  uint64_t ids[CHUNK];
  int32_t got[CHUNK][DIM];
  for (int i = 0; i < n; i++) ids[i] = id_of(from + i);
  int rc = au_worker_ids_pull(wk, exact, ids, (size_t)n, got);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  for (int i = 0; i < n; i++)
    if (memcmp(got[i], want[from + i], sizeof(got[i])) != 0) {
      if (j->mismatches++ < 5)
        printf("rank=%d id %d: %d %d %d %d, want %d %d %d %d\n", rank, from + i, got[i][0],
               got[i][1], got[i][2], got[i][3], want[from + i][0], want[from + i][1],
               want[from + i][2], want[from + i][3]);
    }
  j->c++;
  return AU_CONTINUE;
}

static int check(int ok, const char *what)
{
  if (!ok) {
    printf("rank=%d FAIL %s\n", rank, what);
    errors++;
  }
  return ok;
}

static void serial_sums(int writers)
{
  memset(want, 0, sizeof(*want) * IDS);
  for (int r = 0; r < writers; r++)
    for (int w = 0; w < WORKERS; w++)
      for (int s = 0; s < steps; s++)
        for (int q = 0; q < PER_STEP; q++) {
          int32_t d[DIM];
          delta(r, w, s, q, d);
          int k = pushed(r, w, s, q);
          for (int x = 0; x < DIM; x++) want[k][x] += d[x];
        }
}

static int run_workers(au_node_t *node, int phase, job_t *jobs)
{
  for (int w = 0; w < WORKERS; w++) {
    jobs[w] = (job_t){.w = w, .phase = phase};
    int rc = au_worker_spawn(node, &(au_worker_opts_t){step, &jobs[w]}, NULL);
    if (rc != 0) return rc;
  }
  return au_node_run(node);
}

int main(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") ||
      (strcmp(argv[1], "run") && (strcmp(argv[1], "restore") || argc < 4))) {
    fprintf(stderr, "usage: ids_node run [CKPT_DIR] | ids_node restore CKPT_DIR NODES\n");
    return 2;
  }
  const int restoring = !strcmp(argv[1], "restore");
  const char *ns = getenv("IDS_NODE_STEPS");
  if (ns) {
    char *end;
    long v = strtol(ns, &end, 10);
    if (end == ns || *end || v < 4 || v > 1000) {
      fprintf(stderr, "ids_node: IDS_NODE_STEPS=%s: want a number of steps from 4 to 1000\n", ns);
      return 2;
    }
    steps = (int)v;
  }
  au_node_t *node;
  int rc = au_node_create(&(au_node_opts_t){.threads = 2}, &node);
  if (rc != 0) return 1;
  nodes = au_node_nodes(node);
  rank = au_node_rank(node);
  const char *place = getenv("IDS_NODE_PLACE");
  au_place_t pl = AU_PLACE_CLASSIC;
  if (place && nodes > 1 && au_place_parse(place, &pl) != 0) {
    fprintf(stderr, "ids_node: IDS_NODE_PLACE=%s: not a placement\n", place);
    return 2;
  }
  pulls_first = pl != AU_PLACE_CLASSIC;
  intents = pl == AU_PLACE_ADAPTIVE || pl == AU_PLACE_HOT;
  au_ids_opts_t eo = {.row = {.dim = DIM, .type = AU_I32, .name = "exact", .place = pl},
                      .budget = 4 << 20};
  /* IDS_NODE_ODD=1: node 1 gives another budget (the test that creation refuses it) */
  /* (IDS_NODE_ODD=optim_init: another optimizer start instead) */
  const char *odd = rank == 1 ? getenv("IDS_NODE_ODD") : NULL;
  if (odd && !strcmp(odd, "optim_init"))
    eo.row.optim_init = 0.5f;
  else if (odd)
    eo.budget = 8 << 20;
  au_ids_opts_t ao = {.row = {.dim = DIM, .type = AU_F32, .name = "admit", .place = pl},
                      .budget = 4 << 20,
                      .admit = 3,
                      .no_door = 1};
  /* IDS_NODE_NOMEM=1: node 1 may map 1 MB more than it has (the table wants 4) */
  struct rlimit was;
  const int nomem = rank == 1 && getenv("IDS_NODE_NOMEM") && getrlimit(RLIMIT_AS, &was) == 0;
  if (nomem) {
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%llu", &pages) != 1) return 1;
    fclose(f);
    struct rlimit tight = {pages * 4096 + (1 << 20), was.rlim_max};
    if (setrlimit(RLIMIT_AS, &tight) != 0) return 1;
  }
  rc = au_ids_create(node, &eo, &exact);
  if (nomem) setrlimit(RLIMIT_AS, &was);
  if (rc == 0) rc = au_ids_create(node, &ao, &admit);
  if (rc != 0) {
    fprintf(stderr, "ids_node: rank %d: au_ids_create: %s\n", rank, au_strerror(rc));
    double one = 1; /* every node has said so before any exits */
    au_allreduce_sum(au_node_runtime(node), &one, 1);
    return 1;
  }
  want = calloc(IDS, sizeof(*want));
  if (!want) return 1;

  /* every node names the same owner for every id: a checksum of the owners, summed */
  uint64_t h = 1469598103934665603ULL;
  int mine = 0;
  for (int j = 0; j < IDS; j++) {
    int o = au_ids_owner(exact, id_of(j));
    check(o >= 0 && o < nodes, "owner is a node");
    mine += o == rank;
    h = (h ^ (uint64_t)o) * 1099511628211ULL;
  }
  double v[3] = {(double)(h & 0xffffff), (double)(h >> 40), mine};
  if ((rc = au_allreduce_sum(au_node_runtime(node), v, 3)) != 0) return 1;
  check(v[0] == nodes * (double)(h & 0xffffff) && v[1] == nodes * (double)(h >> 40),
        "every node names the same owners");
  check(v[2] == IDS, "every id has one owner");

  char err[512];
  job_t jobs[WORKERS];
  int writers = nodes;
  if (restoring) {
    writers = atoi(argv[3]);
    uint64_t clock;
    if ((rc = au_restore(node, argv[2], &clock, err, sizeof(err))) != 0) {
      fprintf(stderr, "ids_node: rank %d: %s (%s)\n", rank, err, au_strerror(rc));
      return 1;
    }
  } else {
    /* from outside a worker: another node's id is refused, and nothing is done */
    int32_t d[DIM] = {1, 1, 1, 1};
    for (int j = 0; j < IDS && nodes > 1; j++) {
      uint64_t id = id_of(j);
      if (au_ids_owner(exact, id) == rank) continue;
      check(au_ids_push(exact, &id, 1, d, 0) == AU_EAGAIN, "au_ids_push of another node's id");
      au_ids_stats_t st; /* nothing done: no row made here, no update counted */
      au_ids_stats(exact, &st);
      check(st.rows == 0 && st.admitted == 0 && st.rejected == 0,
            "a refused push of another node's id changes nothing");
      break;
    }
    if ((rc = run_workers(node, 0, jobs)) != 0) {
      fprintf(stderr, "ids_node: rank %d: push run: %s\n", rank, au_strerror(rc));
      return 1;
    }
  }
  serial_sums(writers);

  /* this node holds exactly its own pushed ids of the exact table (want[j][0]: pushes) */
  int owned = 0, held = 0, others = 0;
  for (int j = 0; j < IDS; j++) {
    const int here = au_ids_contains(exact, id_of(j));
    if (au_ids_owner(exact, id_of(j)) != rank || !want[j][0]) {
      others += here;
      continue;
    }
    owned++;
    held += here;
  }
  check(others == 0, "no row of an id another node owns or nobody pushed");
  au_ids_stats_t es, as;
  au_ids_stats(exact, &es);
  au_ids_stats(admit, &as);
  check(held == owned && es.rows == (uint64_t)owned, "holds its own ids, no others");
  /* ... and every pushed id is held by one node, wherever its actor went */
  int pushed_ids = 0;
  for (int j = 0; j < IDS; j++) pushed_ids += want[j][0] != 0;
  double hv = held;
  if ((rc = au_allreduce_sum(au_node_runtime(node), &hv, 1)) != 0) return 1;
  check(hv == pushed_ids, "every pushed id is held by exactly one node");
  au_node_stats_t st0;
  au_node_stats(node, &st0);

  if ((rc = run_workers(node, 1, jobs)) != 0) {
    fprintf(stderr, "ids_node: rank %d: pull run: %s\n", rank, au_strerror(rc));
    return 1;
  }
  int mismatches = 0;
  for (int w = 0; w < WORKERS; w++) mismatches += jobs[w].mismatches;
  check(mismatches == 0, "every id pulled equals the serial sum");

  /* the admission rule, summed over the cluster, against its serial model */
  uint64_t rows = 0, rejected = 0;
  for (int k = 0; k < IDS; k++) {
    rows += k % 6 >= 3;
    rejected += (uint64_t)(k % 6 < 2 ? k % 6 : 2);
  }
  double a[4] = {(double)as.rows, (double)as.rejected, (double)as.forgotten, mismatches};
  if ((rc = au_allreduce_sum(au_node_runtime(node), a, 4)) != 0) return 1;
  if (!restoring) {
    check(a[0] == (double)rows, "admit: the cluster's rows are the serial model's");
    check(a[1] == (double)rejected, "admit: rejected updates as the serial model's");
    check(a[2] == 0, "admit: no candidate forgotten");
  }
  au_node_stats_t st;
  au_node_stats(node, &st);
  /* replicate: the pulls read replicas here, not only this node's own ids (each worker
     pulls every id: 2 x `mine` of them are this node's, wherever their actors went) */
  int mine_now = 0;
  for (int j = 0; j < IDS; j++) mine_now += au_ids_owner(exact, id_of(j)) == rank;
  if (!restoring && pl == AU_PLACE_REPLICATE)
    check(st.rows_local - st0.rows_local > (uint64_t)(WORKERS * mine_now),
          "replicate: pulls read replicas here");
  if (!restoring && (pl == AU_PLACE_REPLICATE || pl == AU_PLACE_ADAPTIVE || pl == AU_PLACE_HOT)) {
    double r[2] = {(double)st0.replicas_made, (double)st0.intents};
    if ((rc = au_allreduce_sum(au_node_runtime(node), r, 2)) != 0) return 1;
    check(r[0] > 0, "replicas were made while the nodes pushed");
    check(!intents || r[1] > 0, "intents were sent");
  }
  if (!restoring && argc > 2 &&
      (rc = au_checkpoint(node, argv[2], (uint64_t)steps, 1, err, sizeof(err))) != 0) {
    fprintf(stderr, "ids_node: rank %d: %s (%s)\n", rank, err, au_strerror(rc));
    return 1;
  }
  printf("rank=%d nodes=%d owned=%d rows=%" PRIu64 " admit_rows=%.0f/%" PRIu64
         " rejected=%.0f/%" PRIu64 " rows_remote=%" PRIu64 " bytes_fetch=%" PRIu64
         " bytes_push=%" PRIu64 " moves_in=%" PRIu64 " moves_out=%" PRIu64 " push_moves_in=%" PRIu64
         " replicas_made=%" PRIu64 " replicas=%" PRIu64 " bytes_replica=%" PRIu64
         " mismatches_all=%.0f errors=%d %s\n",
         rank, nodes, owned, es.rows, a[0], rows, a[1], rejected, st.rows_remote, st.bytes_fetch,
         st.bytes_push, st.moves_in, st.moves_out, st0.moves_in, st.replicas_made, st.replicas,
         st.bytes_replica, a[3], errors, errors ? "FAIL" : "ok");
  free(want);
  au_node_destroy(node);
  return errors ? 1 : 0;
}
