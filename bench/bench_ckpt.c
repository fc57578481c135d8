/* bench_ckpt.c — augur-bench-ckpt: au_checkpoint of one float table (default 10^7 keys x
 * 16) on one node, against writing the same number of bytes from memory (a buffer as
 * large as the table) with one write() loop and an fsync into the same directory; the
 * two alternate, --runs times each (default 3). Prints key=value lines
 * and the ratio (issue 16's mark: <= 2). docs/benchmarks.md has figures.
 *
 *   augur-bench-ckpt [--keys N] [--dim D] [--runs R] [--dir DIR]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <augur.h>

static double now_s(void)
{
  return (double)au_now_ns() / 1e9;
}

/* A worker that adds 1 to every `stride`-th key once. */
typedef struct touch {
  au_table_t *t;
  uint64_t keys, stride, at;
  uint32_t dim;
} touch_t;

static int touch_step(au_worker_t *w, void *arg)
{
  touch_t *p = arg;
  if (p->at >= p->keys) return AU_DONE;
  enum { BATCH = 1024 };
  static float ones[BATCH * 64];
  au_key_t k[BATCH];
  uint64_t n = 0;
  for (; n < BATCH && p->at < p->keys; p->at += p->stride) k[n++] = p->at;
  for (size_t i = 0; i < (size_t)n * p->dim && i < sizeof(ones) / sizeof(ones[0]); i++) ones[i] = 1;
  int rc = au_worker_push(w, p->t, k, n, ones);
  return rc ? rc : AU_CONTINUE;
}

static long long file_size(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Removes DIR/ckpt-* and DIR/LATEST (no fork: the process holds the table and buf). */
static void remove_checkpoints(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[4400], q[8800];
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "ckpt-", 5)) {
      snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
      DIR *s = opendir(p);
      struct dirent *f;
      while (s && (f = readdir(s)))
        if (f->d_name[0] != '.') snprintf(q, sizeof(q), "%s/%s", p, f->d_name), unlink(q);
      if (s) closedir(s);
      rmdir(p);
    }
  if (d) closedir(d);
  snprintf(p, sizeof(p), "%s/LATEST", dir);
  unlink(p);
}

/* Lets the disk and the page cache settle before a measurement: sync, and where this
 * process may (root), drop the clean page cache, so that each write starts alike. */
static void settle(void)
{
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd >= 0) {
    if (write(fd, "1", 1) != 1) { /* not allowed: measured without */
    }
    close(fd);
  }
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* bytes from buf (as many as the table holds, in memory as the table's are: not in a
 * cache) in one write() loop of 1 MiB pieces, then fsync */
static double raw_write(const char *path, size_t bytes, const char *buf)
{
  double t0 = now_s();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  for (size_t at = 0; at < bytes;) {
    size_t n = bytes - at < (1u << 20) ? bytes - at : (1u << 20);
    ssize_t w = write(fd, buf + at, n);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    at += (size_t)w;
  }
  if (fsync(fd) != 0 || close(fd) != 0) return -1;
  return now_s() - t0;
}

int main(int argc, char **argv)
{
  unsigned long long keys = 10000000ULL, dim = 16, runs = 3;
  const char *dir = "/tmp/augur-bench-ckpt";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--keys") && i + 1 < argc)
      keys = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--dim") && i + 1 < argc)
      dim = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else {
      fprintf(stderr, "usage: augur-bench-ckpt [--keys N] [--dim D] [--runs R] [--dir DIR]\n");
      return !strcmp(argv[i], "--help") ? 0 : 2;
    }
  }
  if (keys < 1 || dim < 1 || dim > 4096 || runs < 1 || runs > 100) {
    fprintf(stderr, "augur-bench-ckpt: --keys, --dim (1..4096), --runs (1..100)\n");
    return 2;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "augur-bench-ckpt: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  au_node_t *node;
  au_table_t *t;
  if (au_node_create(&(au_node_opts_t){.threads = 1}, &node) != 0 ||
      au_table_create(node,
                      &(au_table_opts_t){.keys = keys,
                                         .dim = (uint32_t)dim,
                                         .type = AU_F32,
                                         .init = AU_INIT_NORMAL,
                                         .init_b = 0.1,
                                         .name = "bench"},
                      &t) != 0) {
    fprintf(stderr, "augur-bench-ckpt: cannot make the table (out of memory?)\n");
    return 1;
  }
  const size_t bytes = (size_t)keys * dim * 4;
  char *buf = malloc(bytes), path[4200], err[512];
  if (!buf) return 1;
  memset(buf, 0x5a, bytes);
  snprintf(path, sizeof(path), "%s/raw.bin", dir);
  double *raw = calloc(runs, sizeof(double)), *ck = calloc(runs, sizeof(double));
  printf("bench=ckpt keys=%llu dim=%llu bytes=%zu runs=%llu dir=%s\n", keys, dim, bytes, runs, dir);
  /* one of the two per run, in turn, each after the last run's file is removed: on this
   * VM a 640 MB write right after another one (and its fsync) often waits in write()
   * 1-2 s where 0.2 s is usual, whichever of the two goes second; after a removal it
   * does not (docs/benchmarks.md) */
  unsigned long long nraw = 0, nck = 0;
  for (unsigned long long r = 0; r < 2 * runs; r++) {
    remove_checkpoints(dir);
    unlink(path);
    settle();
    if (r % 2 == 0) {
      if ((raw[nraw] = raw_write(path, bytes, buf)) < 0) {
        fprintf(stderr, "augur-bench-ckpt: %s: %s\n", path, strerror(errno));
        return 1;
      }
      printf("run=%llu raw_write_s=%.3f\n", r + 1, raw[nraw++]);
    } else {
      double t0 = now_s();
      if (au_checkpoint(node, dir, r + 1, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "augur-bench-ckpt: %s\n", err);
        return 1;
      }
      ck[nck] = now_s() - t0;
      printf("run=%llu checkpoint_s=%.3f\n", r + 1, ck[nck++]);
    }
    fflush(stdout);
  }
  unlink(path);
  qsort(raw, runs, sizeof(double), cmp);
  qsort(ck, runs, sizeof(double), cmp);
  double mr = raw[runs / 2], mc = ck[runs / 2];
  printf("raw_write_s=%.3f checkpoint_s=%.3f raw_MB_per_s=%.0f checkpoint_MB_per_s=%.0f "
         "ratio_vs_raw_write=%.3f  # target <= 2 (medians)\n",
         mr, mc, (double)bytes / mr / 1e6, (double)bytes / mc / 1e6, mc / mr);
  /* incremental: 1% of the keys changed since the last (full) checkpoint */
  touch_t tp = {.t = t, .keys = keys, .stride = 100, .dim = (uint32_t)dim};
  if (dim <= 64 && au_worker_spawn(node, &(au_worker_opts_t){touch_step, &tp}, NULL) == 0 &&
      au_node_run(node) == 0) {
    double t0 = now_s();
    if (au_checkpoint(node, dir, 2 * runs + 1, 0, err, sizeof(err)) != 0) {
      fprintf(stderr, "augur-bench-ckpt: %s\n", err);
      return 1;
    }
    double ts = now_s() - t0;
    char full[4300], incr[4300];
    snprintf(full, sizeof(full), "%s/ckpt-%llu/part-0.bin", dir, 2 * runs); /* the last run's */
    snprintf(incr, sizeof(incr), "%s/ckpt-%llu/part-0.bin", dir, 2 * runs + 1);
    long long fb = file_size(full), ib = file_size(incr);
    printf("changed_keys=%llu full_bytes=%lld incremental_bytes=%lld incremental_s=%.3f "
           "incremental_over_full=%.4f  # target <= 0.03\n",
           (unsigned long long)((keys + 99) / 100), fb, ib, ts,
           fb > 0 ? (double)ib / (double)fb : -1);
  }
  remove_checkpoints(dir);
  free(raw), free(ck), free(buf);
  au_node_destroy(node);
  return 0;
}
