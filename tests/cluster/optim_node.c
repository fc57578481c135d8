/* optim_node.c — one node of the optimizer-state cluster test (test_cluster.sh optim):
 *
 *   optim_node turns|shared PLACE OPTIM OUT
 *
 * A float32 table whose rows carry optimizer state (OPTIM: adagrad, adagrad-row, sgd),
 * exact kernel, placed by PLACE (classic, relocate, replicate, ...). The cluster's nodes
 * play three "parties" between them (party q runs on node q % nodes, so one node plays all
 * three alone), one worker each, UPDATES updates per key and phase:
 *
 *   turns: two phases (two collective au_node_run calls); in phase p party q updates the
 *     keys of the actors a with a % 3 == (q + p) % 3, so every actor has one updater per
 *     phase and another in the next: rows move mid-run with relocation and must carry
 *     their state exactly.
 *     The script compares the rows (hex bits) with a one-node run's: equal to the bit.
 *   shared: one phase in which every party updates every key at once: with replication
 *     every node keeps a replica and the owner merges their deltas; with relocation the
 *     actors are contended and fetched. Checked here, on the owner: the accumulators hold every
 * party's squared gradients (AdaGrad's state adds up), and each value moved by between
 * lr*g/sqrt(final G) and lr*g/sqrt(first G) per update (SGD: by exactly lr*g). Prints
 * bound_errors=N.
 *
 * Gradients are positive multiples of 1/8 that depend on (phase, party, update, key,
 * value): their squares sum exactly in float32. Every node writes the rows it owns
 * (values, then slots, as %.9g: exact for float32; one line per key) to OUT.RANK.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <augur.h>

enum { KEYS = 48, DIM = 11, UPDATES = 30, PARTIES = 3 };
#define GROUP 2
#define LR    0.1f
#define G0    0.5f

typedef struct party {
  au_table_t *t;
  int q, phase, u, shared;
} party_t;

static float grad(int phase, int q, int u, au_key_t k, uint32_t j)
{
  return (float)(1 + (phase * 5 + q * 3 + u + (int)k * 7 + (int)j) % 4) * 0.125f;
}

static int uses(const party_t *p, au_key_t k)
{
  /* by actor (keys k and k ^ 1 share one): one updater per actor and phase */
  return p->shared || (int)(k / GROUP % 3) == (p->q + p->phase) % 3;
}

/* One update of every key the party uses per step, through a view. */
static int step(au_worker_t *w, void *arg)
{
  party_t *p = arg;
  if (p->u == UPDATES) return AU_PAUSE;
  au_key_t keys[KEYS];
  size_t n = 0;
  for (au_key_t k = 0; k < KEYS; k++)
    if (uses(p, k)) keys[n++] = k;
  /* intents for the phase (idempotent: the re-run after AU_WAIT repeats it) */
  if (p->u == 0) {
    au_clock_t now = au_worker_clock(w);
    int rc = au_worker_intent(w, p->t, keys, n, now, now + UPDATES);
    if (rc != 0) return rc;
  }
  au_view_t v;
  int rc = au_view_acquire(w, p->t, keys, n, &v);
  if (rc == AU_EAGAIN) return AU_WAIT;
  if (rc != 0) return rc;
  for (size_t i = 0; i < n; i++) {
    float g[DIM];
    for (uint32_t j = 0; j < DIM; j++) g[j] = grad(p->phase, p->q, p->u, keys[i], j);
    au_view_update(&v, i, g);
  }
  au_view_release(w, &v);
  p->u++;
  au_worker_advance(w);
  return AU_CONTINUE;
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  au_place_t place;
  au_optim_t optim;
  if (argc < 5 || argc > 6 ||
      (strcmp(argv[1], "turns") && strcmp(argv[1], "shared") && strcmp(argv[1], "restore")) ||
      (!strcmp(argv[1], "restore") && argc != 6) || au_place_parse(argv[2], &place) != 0 ||
      au_optim_parse(argv[3], &optim) != 0 || optim == AU_OPTIM_NONE) {
    fprintf(stderr, "usage: optim_node turns|shared classic|relocate|replicate|hot|adaptive "
                    "sgd|adagrad|adagrad-row OUT [CHECKPOINT_DIR]\n"
                    "       optim_node restore PLACE OPTIM OUT CHECKPOINT_DIR\n");
    return 2;
  }
  const int shared = !strcmp(argv[1], "shared"), restore = !strcmp(argv[1], "restore");
  const char *ckpt = argc == 6 ? argv[5] : NULL;
  au_node_t *node;
  if (au_node_create(&(au_node_opts_t){.threads = 2}, &node) != 0) return 1;
  const int rank = au_node_rank(node), nodes = au_node_nodes(node);
  au_table_t *t;
  int rc = au_table_create(node,
                           &(au_table_opts_t){.keys = KEYS,
                                              .dim = DIM,
                                              .type = AU_F32,
                                              .init = AU_INIT_NORMAL,
                                              .init_b = 0.1,
                                              .seed = 5,
                                              .kernel = AU_KERNEL_ADD,
                                              .group = GROUP,
                                              .place = place,
                                              .optim = optim,
                                              .lr = LR,
                                              .optim_init = G0,
                                              .row_align = 16,
                                              .name = "optim"},
                           &t);
  if (rc != 0) {
    fprintf(stderr, "optim_node: table: %s\n", au_strerror(rc));
    return 1;
  }
  party_t parties[PARTIES];
  int mine = 0;
  for (int q = 0; q < PARTIES; q++) {
    if (q % nodes != rank || restore) continue;
    parties[mine] = (party_t){.t = t, .q = q, .shared = shared};
    if ((rc = au_worker_spawn(node, &(au_worker_opts_t){step, &parties[mine]}, NULL)) != 0)
      return 1;
    mine++;
  }
  /* the first values of every row: each node reads those it owns, the sum tells all */
  static double first[KEYS][DIM];
  for (au_key_t k = 0; k < KEYS; k++) {
    float row[DIM];
    if (au_table_owns(t, k) == 1 && au_table_read(t, &k, 1, row) == 0)
      for (uint32_t j = 0; j < DIM; j++) first[k][j] = row[j];
  }
  if ((rc = au_allreduce_sum(au_node_runtime(node), &first[0][0], KEYS * DIM)) != 0) return 1;
  char err[512] = "";
  uint64_t clock = 0;
  if (restore) { /* no run: the rows as the checkpoint has them */
    if ((rc = au_restore(node, ckpt, &clock, err, sizeof(err))) != 0) {
      fprintf(stderr, "optim_node: rank %d: %s (%s)\n", rank, err, au_strerror(rc));
      return 1;
    }
    printf("rank=%d restored clock=%llu\n", rank, (unsigned long long)clock);
  }
  for (int phase = 0; !restore && phase < (shared ? 1 : 2) && rc == 0; phase++) {
    for (int i = 0; i < mine; i++) parties[i].phase = phase, parties[i].u = 0;
    rc = au_node_run(node);
    /* turns with a checkpoint directory: a full checkpoint after the first phase, an
     * incremental one (on top of it) after the second */
    if (rc == 0 && ckpt && !shared && phase == 0 &&
        (rc = au_checkpoint(node, ckpt, 1, 1, err, sizeof(err))) != 0) {
      fprintf(stderr, "optim_node: rank %d: %s (%s)\n", rank, err, au_strerror(rc));
      return 1;
    }
  }
  if (rc != 0) {
    fprintf(stderr, "optim_node: rank %d: run: %s\n", rank, au_strerror(rc));
    return 1;
  }
  if (!restore && ckpt && (rc = au_checkpoint(node, ckpt, 2, 0, err, sizeof(err))) != 0) {
    fprintf(stderr, "optim_node: rank %d: %s (%s)\n", rank, err, au_strerror(rc));
    return 1;
  }
  int bound_errors = 0;
  for (au_key_t k = 0; shared && k < KEYS; k++) {
    float row[DIM], slots[DIM];
    if (au_table_owns(t, k) != 1 || au_table_read(t, &k, 1, row) != 0 ||
        au_table_read_slots(t, &k, 1, slots) != 0)
      continue;
    double ms = 0; /* the mean squared gradient summed over every update (AdaGrad per row) */
    for (int q = 0; q < PARTIES; q++)
      for (int u = 0; u < UPDATES; u++)
        for (uint32_t j = 0; j < DIM; j++)
          ms += (double)grad(0, q, u, k, j) * grad(0, q, u, k, j) / DIM;
    for (uint32_t j = 0; j < DIM; j++) {
      double sum = 0, sq = 0;
      for (int q = 0; q < PARTIES; q++)
        for (int u = 0; u < UPDATES; u++)
          sum += grad(0, q, u, k, j), sq += (double)grad(0, q, u, k, j) * grad(0, q, u, k, j);
      double moved = first[k][j] - row[j], lo, hi;
      if (optim == AU_OPTIM_SGD) {
        lo = hi = LR * sum;
      } else {
        double G = optim == AU_OPTIM_ADAGRAD ? slots[j] : slots[0];
        double want = G0 + (optim == AU_OPTIM_ADAGRAD ? sq : ms);
        /* per value the squares of multiples of 1/8 add up exactly */
        if (optim == AU_OPTIM_ADAGRAD ? G != want : fabs(G - want) > 1e-5 * want) {
          printf("rank=%d key=%" PRIu64 " j=%u accumulator %.9g, want %.9g\n", rank, k, j, G, want);
          bound_errors++;
        }
        lo = LR * sum / sqrt(want);
        hi = LR * sum / sqrt(G0);
      }
      if (moved < lo - 1e-5 || moved > hi + 1e-5) {
        printf("rank=%d key=%" PRIu64 " j=%u moved %.9g, not in [%.9g, %.9g]\n", rank, k, j, moved,
               lo, hi);
        bound_errors++;
      }
    }
  }
  char path[512];
  snprintf(path, sizeof(path), "%s.%d", argv[4], rank);
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  const uint32_t ns = au_table_slots(t);
  int owned = 0;
  for (au_key_t k = 0; k < KEYS; k++) {
    if (au_table_owns(t, k) != 1) continue;
    float row[DIM], slots[DIM];
    if (au_table_read(t, &k, 1, row) != 0 || au_table_read_slots(t, &k, 1, slots) != 0) {
      fprintf(stderr, "optim_node: rank %d: key %" PRIu64 " owned but not readable\n", rank, k);
      return 1;
    }
    fprintf(f, "%" PRIu64, k);
    for (uint32_t j = 0; j < DIM; j++) fprintf(f, " %.9g", (double)row[j]);
    fprintf(f, " |");
    for (uint32_t j = 0; j < ns; j++) fprintf(f, " %.9g", (double)slots[j]);
    fputc('\n', f);
    owned++;
  }
  fclose(f);
  au_node_stats_t st;
  au_node_stats(node, &st);
  printf("rank=%d owned=%d moves_in=%" PRIu64 " replicas_made=%" PRIu64 " bound_errors=%d %s\n",
         rank, owned, st.moves_in, st.replicas_made, bound_errors, bound_errors ? "FAILED" : "ok");
  au_node_destroy(node);
  return bound_errors ? 1 : 0;
}
