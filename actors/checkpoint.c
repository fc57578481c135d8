/* checkpoint.c — au_checkpoint and au_restore (augur.h; docs/checkpoints.md).
 *
 * Between runs every parameter actor has exactly one owner and no update is in flight (a
 * run ends only when every node is idle, nothing is in transit and every replica has
 * synced), so the owners' rows are the cut. Each node writes the actors it owns, values
 * and optimizer slots (a row's `width` words), into DIR/ckpt-CLOCK/part-RANK.bin; rank 0
 * then writes the manifest (sizes, checksums, the tables' shapes) and last DIR/LATEST,
 * each under a temporary name renamed into place (after an fsync), so that a crash at any
 * point leaves the previous checkpoint whole and named by LATEST.
 *
 * A restore reads every part (DIR must be where every node can read it: one host, or a
 * shared file system) and copies each actor into the node that owns it now, so the node
 * count and the placement may differ from the writer's.
 *
 * A part file, little-endian: "AUGURCK1", u32 rank, nodes, tables; per table u32 name
 * length, the name, u64 keys, u32 dim, width, group, type, u64 records; per record (a
 * run of keys) u64 first key and count, then their rows, width u32 words each; last a u64 checksum
 * of all the bytes before it (FNV-1a in four lanes of 8-byte words, sum_add). Format 2
 * puts the id tables (ids.c) before the checksum: u32 count; per id table u32 name length,
 * the name, u32 dim, width, type, u64 rows; per row u64 id, u32 uses, u32 last clock, then
 * its width words. Id tables are written whole in every checkpoint, incremental or not,
 * and restored from the newest of a chain only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/ps.h"

#define MAGIC "AUGURCK1"
#define FORMAT                                                                                     \
  3 /* 2: id tables after the tables; 3: the manifest ends with its sum= (1, 2 still read) */
#define FNV_INIT 0xcbf29ce484222325ULL

#define FNV_PRIME 0x100000001b3ULL

/* The checksum: FNV-1a in four lanes, lane i over the 8-byte little-endian words i, i + 4,
 * ... of each 32-byte block, the last 0-31 bytes one by one into lane 0, and the four
 * lanes' values FNV-1a'd together (four independent multiply chains: a byte loop took
 * 1.3 s of a 10^7 x 16 table's 3 s checkpoint). A stream: `buf` holds a block not yet
 * complete. */
typedef struct sum {
  uint64_t h[4];
  unsigned char buf[32];
  unsigned n; /* bytes in buf */
} sum_t;

static void sum_init(sum_t *s)
{
  *s = (sum_t){.h = {FNV_INIT, FNV_INIT ^ 1, FNV_INIT ^ 2, FNV_INIT ^ 3}};
}

static inline void sum_block(sum_t *s, const unsigned char *b)
{
  uint64_t w[4];
  memcpy(w, b, 32);
  for (int i = 0; i < 4; i++) s->h[i] = (s->h[i] ^ w[i]) * FNV_PRIME;
}

static void sum_add(sum_t *s, const unsigned char *b, size_t n)
{
  size_t i = 0;
  if (s->n) { /* complete the block begun */
    while (i < n && s->n < 32) s->buf[s->n++] = b[i++];
    if (s->n < 32) return;
    sum_block(s, s->buf);
    s->n = 0;
  }
  for (; i + 32 <= n; i += 32) sum_block(s, b + i);
  while (i < n) s->buf[s->n++] = b[i++];
}

static uint64_t sum_end(sum_t *s)
{
  for (unsigned i = 0; i < s->n; i++) s->h[0] = (s->h[0] ^ s->buf[i]) * FNV_PRIME;
  uint64_t h = FNV_INIT;
  for (int i = 0; i < 4; i++) h = (h ^ s->h[i]) * FNV_PRIME;
  return h;
}

typedef struct wbuf {
  FILE *f;
  sum_t sum;
  uint64_t bytes;
  int failed; /* a write() past stdio failed */
} wbuf_t;

#define PIECE (1u << 20) /* large pieces go to write() a MiB at a time, each summed first */

static void put(wbuf_t *w, const void *p, size_t n)
{
  const unsigned char *b = p;
  w->bytes += n;
  if (n < PIECE) {
    sum_add(&w->sum, b, n);
    fwrite(b, 1, n, w->f);
    return;
  }
  /* past stdio, a MiB at a time, summed while it is in the cache: the table's bytes are
   * read from memory once (a 640 MB piece through fwrite went out as one write) */
  if (fflush(w->f) != 0) w->failed = 1;
  for (size_t at = 0; at < n && !w->failed;) {
    size_t k = n - at < PIECE ? n - at : PIECE;
    sum_add(&w->sum, b + at, k);
    for (size_t done = 0; done < k;) {
      ssize_t r = write(fileno(w->f), b + at + done, k - done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        w->failed = 1;
        break;
      }
      done += (size_t)r;
    }
    at += k;
  }
}

static void put32(wbuf_t *w, uint32_t v)
{
  put(w, &v, 4);
}
static void put64(wbuf_t *w, uint64_t v)
{
  put(w, &v, 8);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* The longest checkpoint directory: its files' paths (DIR/ckpt-CLOCK/part-RANK.bin.tmp,
 * at most 60 bytes more) then fit the 4096-byte buffers they are made in; a longer one
 * would be cut short, and written beside what it named. */
#define CKPT_DIR_MAX 4000

static int dir_too_long(const char *what, const char *dir, char *err, size_t errlen)
{
  const size_t len = strlen(dir);
  if (len <= CKPT_DIR_MAX) return 0;
  set_err(err, errlen, "%s: the directory's path is %zu bytes long, at most %d", what, len,
          CKPT_DIR_MAX);
  return 1;
}

static int mkdir_one(const char *path)
{
  struct stat st;
  return mkdir(path, 0777) == 0 || (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
             ? 0
             : -1;
}

/* fsyncs the directory that holds path: a rename, or a directory made, lasts through a
 * power loss only then (ext4's ordering mostly hides it; XFS and NFS do not promise it).
 * 0 or -1. */
static int sync_dir_of(const char *path)
{
  char d[4200];
  snprintf(d, sizeof(d), "%s", path);
  char *slash = strrchr(d, '/');
  if (!slash)
    snprintf(d, sizeof(d), ".");
  else if (slash == d)
    d[1] = 0;
  else
    *slash = 0;
  int fd = open(d, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* fsyncs and renames tmp to path, and fsyncs the directory: the parts and the manifest
 * in ckpt-N/ are on the disk before the manifest, and LATEST (with ckpt-N's entry in DIR)
 * last. */
static int commit(FILE *f, const char *tmp, const char *path)
{
  int bad = fflush(f) != 0 || ferror(f);
  bad |= fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    remove(tmp);
    return -1;
  }
  return sync_dir_of(path);
}

static uint64_t actor_rows(const au_table_t *t, uint64_t a)
{
  uint64_t first = a << t->group_shift, left = t->keys - first;
  return left < t->group ? left : t->group;
}

/* What this node's last checkpoint into `dir` held: per table and key a checksum of the
 * row it wrote (0: not this node's then), so that the next one, if incremental, writes
 * only the rows whose values differ or that it did not own (8 bytes a key, on every
 * node: rows, not actors, so that 1% of the keys changed is about 1% of a full one). */
struct ckpt {
  char dir[4096], base[64]; /* where, and the checkpoint's name ("ckpt-CLOCK") */
  uint64_t clock;           /* its clock */
  uint64_t **hash;          /* ntables arrays of keys */
  int ntables;
};

void checkpoint_free(au_node_t *n)
{
  struct ckpt *c = n->ckpt;
  if (!c) return;
  for (int i = 0; i < c->ntables; i++) free(c->hash[i]);
  free(c->hash);
  free(c);
  n->ckpt = NULL;
}

/* murmur3's 64-bit finalizer. */
static inline uint64_t fmix64(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

/* A row's checksum, never 0, to see whether it changed: each 64-bit word w_j mixed alone,
 * lo ^ hi of the 128-bit product (w_j ^ k_j) * M with a pseudo-random k_j for each word
 * (wyhash's mum), the mixes summed (independent multiplies: FNV-1a over the words, a
 * chain, took 0.3 s of a 10^7-row checkpoint), then mixed again; 64 bits. The mix must
 * not be linear: until 2026-12-07 the words were summed times their constants, and the
 * changes of two words that both moved only their top bit (two floats' signs, 2^63 each)
 * cancelled, so the incremental checkpoint left out a row that changed; and folded to 31
 * bits any changed row was missed once in 2^31. With constants that do not look random
 * (one for every word, or an arithmetic progression) LDA's moves (-1 in one count, +1 in
 * others) cancelled too. */
enum { ROW_K = 2048 }; /* words (8 bytes) of a row whose constant is in a table */
static uint64_t row_k[ROW_K];
#define ROW_M 0xa0761d6478bd642fULL

/* Word j's constant: every word its own (a period would let moves j words apart cancel). */
static inline uint64_t row_mult(uint32_t j)
{
  return fmix64(0x9e3779b97f4a7c15ULL * ((uint64_t)j + 1));
}

/* Fills row_k (once: it is the same for every table). The main thread's: checkpoints are
 * between runs. */
static void row_mults(void)
{
  if (row_k[1]) return;
  for (uint32_t j = 0; j < ROW_K; j++) row_k[j] = row_mult(j);
}

static inline uint64_t row_mum(uint64_t w, uint64_t k)
{
  const unsigned __int128 p = (unsigned __int128)(w ^ k) * ROW_M;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static uint64_t row_hash(const char *row, uint32_t width)
{
  uint64_t h = width;
  const uint32_t words = width / 2, tabled = words < ROW_K ? words : ROW_K;
  uint32_t j = 0;
  for (; j < tabled; j++) {
    uint64_t w;
    memcpy(&w, row + 8 * (size_t)j, 8);
    h += row_mum(w, row_k[j]);
  }
  for (; j < words; j++) { /* rows wider than 4096 values: computed */
    uint64_t w;
    memcpy(&w, row + 8 * (size_t)j, 8);
    h += row_mum(w, row_mult(j));
  }
  if (width & 1) {
    uint32_t w;
    memcpy(&w, row + 4 * (size_t)(width - 1), 4);
    h += row_mum(w, j < ROW_K ? row_k[j] : row_mult(j));
  }
  h = fmix64(h);
  return h ? h : 1;
}

/* The checksums of rows [x, y) of one actor's storage (they lie one after the other). */
static void row_hashes(const au_table_t *t, const char *v, uint64_t x, uint64_t y, uint64_t *h)
{
  for (uint64_t k = x; k < y; k++) h[k] = row_hash(v + (k - x) * t->row_bytes, t->width);
}

static const char *key_row(const au_table_t *t, au_key_t k)
{
  return (const char *)t->actors[k >> t->group_shift].values +
         (size_t)(k & (t->group - 1)) * t->row_bytes;
}

/* The checksums of every owned row of every table into next[] (0 for the others). */
typedef struct hash_job {
  au_node_t *n;
  uint64_t **next;
} hash_job_t;

static void *hash_tables(void *arg)
{
  const hash_job_t *j = arg;
  for (int i = 0; i < j->n->ntables; i++) {
    const au_table_t *t = j->n->table_by_id[i];
    memset(j->next[i], 0, t->keys * sizeof(uint64_t));
    for (uint64_t a = 0; a < t->nactors; a++)
      if (atomic_load(&t->actors[a].state) == PA_OWNER)
        row_hashes(t, t->actors[a].values, a << t->group_shift,
                   (a << t->group_shift) + actor_rows(t, a), j->next[i]);
  }
  return NULL;
}

static uint32_t ids_count(au_node_t *n)
{
  uint32_t k = 0;
  while (ids_at(n, k)) k++;
  return k;
}

typedef struct id_out {
  wbuf_t *w;
  uint64_t rows, written;
  uint32_t width;
} id_out_t;

static int put_id_row(void *arg, uint64_t id, uint32_t uses, uint32_t last, const void *row)
{
  id_out_t *o = arg;
  if (o->written == o->rows) return 1; /* more than counted: something pushed meanwhile */
  put64(o->w, id), put32(o->w, uses), put32(o->w, last);
  put(o->w, row, (size_t)o->width * 4);
  o->written++;
  return 0;
}

/* The id tables' section of a part: every resident row of each (0, or -1 with errno). */
static int write_ids(au_node_t *n, wbuf_t *w)
{
  const uint32_t k = ids_count(n);
  put32(w, k);
  for (uint32_t i = 0; i < k; i++) {
    au_ids_t *t = ids_at(n, i);
    const au_table_t *f = ids_format(t);
    const uint32_t len = (uint32_t)strlen(f->name);
    put32(w, len);
    put(w, f->name, len);
    put32(w, f->dim), put32(w, f->width), put32(w, (uint32_t)f->type);
    id_out_t o = {w, ids_rows(t), 0, f->width};
    put64(w, o.rows);
    if (ids_each_row(t, put_id_row, &o) != 0 || o.written != o.rows) {
      errno = EBUSY; /* pushed while it was written: checkpoints are between pushes */
      return -1;
    }
  }
  return 0;
}

/* This node's part: every table's owned actors. An incremental one needs the rows'
 * checksums first, to know what changed; a full one has a thread of its own compute them
 * (for the next one) while it writes: the pass took 0.15-0.2 s of a 10^7 x 16 table's
 * checkpoint, whose writing takes 0.2 s on tmpfs (docs/benchmarks.md). Both read the
 * tables only, and checkpoints are between runs. */
static int write_part(au_node_t *n, const char *path, uint64_t **prev, uint64_t **next,
                      uint64_t *bytes, uint64_t *fnv)
{
  char tmp[4400];
  if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) return -1;
  wbuf_t w = {.f = fopen(tmp, "wb")};
  if (!w.f) return -1;
  row_mults();
  hash_job_t job = {n, next};
  pthread_t hasher;
  int threaded = 0;
  if (prev)
    hash_tables(&job);
  else
    threaded = pthread_create(&hasher, NULL, hash_tables, &job) == 0;
  if (!prev && !threaded) hash_tables(&job); /* no thread: here, first */
  sum_init(&w.sum);
  setvbuf(w.f, NULL, _IOFBF, 1 << 22);
  put(&w, MAGIC, 8);
  put32(&w, (uint32_t)n->rank), put32(&w, (uint32_t)n->nodes), put32(&w, (uint32_t)n->ntables);
  for (int i = 0; i < n->ntables; i++) {
    au_table_t *t = n->table_by_id[i];
    const size_t rb = (size_t)t->width * 4;
    const int flat = t->row_bytes == rb;
    /* which rows go in: every owned one, or (incremental) those that changed since (whose
     * checksums hash_tables has computed before) */
    const uint64_t *h = next[i];
#define OWNED(k)  (atomic_load(&t->actors[(k) >> t->group_shift].state) == PA_OWNER)
#define WRITES(k) (prev ? h[k] && prev[i][k] != h[k] : OWNED(k))
    /* records: runs of keys (first, count) and their rows, a piece at a time where the
     * rows lie one after the other (an actor's; home actors packed in the storage) */
    uint64_t records = 0;
    for (uint64_t k = 0; k < t->keys;) {
      if (!WRITES(k)) {
        k++;
        continue;
      }
      uint64_t e = k + 1;
      while (e < t->keys && WRITES(e)) e++;
      records++;
      k = e;
    }
    const uint32_t len = (uint32_t)strlen(t->name);
    put32(&w, len);
    put(&w, t->name, len);
    put64(&w, t->keys);
    put32(&w, t->dim), put32(&w, t->width), put32(&w, t->group), put32(&w, (uint32_t)t->type);
    put64(&w, records);
    for (uint64_t k = 0; k < t->keys;) {
      if (!WRITES(k)) {
        k++;
        continue;
      }
      uint64_t e = k + 1;
      while (e < t->keys && WRITES(e)) e++;
      put64(&w, k), put64(&w, e - k);
      for (uint64_t x = k; x < e;) {
        /* a piece: from x to the end of its actor's keys in the run, and on into the
         * next actors while their rows follow in memory */
        const char *v = key_row(t, x);
        uint64_t y = ((x >> t->group_shift) + 1) << t->group_shift;
        if (y > e) y = e;
        if (!flat) y = x + 1;
        while (flat && y < e && key_row(t, y) == v + (y - x) * rb) {
          y = ((y >> t->group_shift) + 1) << t->group_shift;
          if (y > e) y = e;
        }
        put(&w, v, (size_t)(y - x) * rb);
        x = y;
      }
      k = e;
    }
#undef WRITES
#undef OWNED
  }
  int busy = write_ids(n, &w) != 0;
  if (threaded) pthread_join(hasher, NULL);
  const uint64_t sum = sum_end(&w.sum);
  fwrite(&sum, 8, 1, w.f);
  w.bytes += 8;
  *bytes = w.bytes, *fnv = sum;
  if (w.failed || busy) {
    const int e = busy ? EBUSY : errno;
    fclose(w.f);
    remove(tmp);
    errno = e;
    return -1;
  }
  return commit(w.f, tmp, path);
}

/* Every node's (ok, bytes, fnv as two 32-bit halves) through the allreduce. */
static int gather_parts(au_node_t *n, int ok, uint64_t bytes, uint64_t fnv, double *v)
{
  const size_t N = (size_t)n->nodes;
  memset(v, 0, 4 * N * sizeof(double));
  v[4 * (size_t)n->rank] = ok;
  v[4 * (size_t)n->rank + 1] = (double)bytes;
  v[4 * (size_t)n->rank + 2] = (double)(fnv >> 32);
  v[4 * (size_t)n->rank + 3] = (double)(fnv & 0xffffffffu);
  return au_allreduce_sum(n->rt, v, 4 * N);
}

/* FNV-1a of n more bytes on h: the manifest's own checksum (its last line, sum=). */
static uint64_t text_fnv_more(uint64_t h, const char *p, size_t n)
{
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * FNV_PRIME;
  return h;
}

static uint64_t text_fnv(const char *p, size_t n)
{
  return text_fnv_more(FNV_INIT, p, n);
}

/* Every node's k values, through one allreduce: (*all)[r * k + j] is node r's value j
 * (whole numbers below 2^53, exact in the sums), in `stack` (room for 64 nodes' k values)
 * or, on a larger cluster, allocated (free it when *all != stack). 0, AU_ENOMEM (*all
 * NULL; the others then wait in the allreduce), or the allreduce's error. */
static int gather_each(au_node_t *n, const double *mine, int k, double *stack, double **all)
{
  const size_t vals = (size_t)n->nodes * (size_t)k;
  *all = n->nodes <= 64 ? stack : malloc(vals * sizeof(double));
  if (!*all) return AU_ENOMEM;
  memset(*all, 0, vals * sizeof(double));
  memcpy(*all + (size_t)n->rank * (size_t)k, mine, (size_t)k * sizeof(double));
  return au_allreduce_sum(n->rt, *all, (int)vals);
}

int au_checkpoint(au_node_t *n, const char *dir, uint64_t clock, int full, char *err, size_t errlen)
{
  if (!n || !dir) return AU_EINVAL;
  char sub[4096], path[4200], tmp[4400];
  const int toolong = strlen(dir) > CKPT_DIR_MAX; /* refused after the others hear */
  snprintf(sub, sizeof(sub), "%s/ckpt-%llu", dir, (unsigned long long)clock);
  snprintf(path, sizeof(path), "%s/part-%d.bin", sub, n->rank);
  /* incremental: on top of this node's last checkpoint into the same directory, which
   * every node wrote with it (the same calls on every node) */
  struct ckpt *c = n->ckpt;
  /* checkpoints into one directory go forward: one at the clock of the last would be
     written over it, an incremental one its own base */
  const int behind = c && c->ntables && !strcmp(c->dir, dir) && clock <= c->clock;
  const int can_incr = !full && c && c->ntables == n->ntables && !strcmp(c->dir, dir);
  /* every node the same clock and kind, told before anything is written: until 2026-12-07
     nodes that differed wrote parts of two checkpoints under one manifest (a full
     manifest over a node's incremental part: half the model restored as it began), or one
     node refused while the others waited for it */
  double mine[4] = {(double)(clock >> 32), (double)(clock & 0xffffffffu), full != 0, 0};
  mine[3] = toolong ? 3 : behind ? 2 : can_incr ? 1 : 0;
  double each[4 * 64], *got;
  int arc = gather_each(n, mine, 4, each, &got);
  if (!got) return arc;
  int incr = arc == 0, late = -1, other = -1, longer = -1;
  for (int r = 0; arc == 0 && r < n->nodes; r++) {
    const double *v = got + 4 * r;
    if (v[0] != mine[0] || v[1] != mine[1] || v[2] != mine[2]) other = other < 0 ? r : other;
    if (v[3] == 2) late = late < 0 ? r : late;
    if (v[3] == 3) longer = longer < 0 ? r : longer;
    incr = incr && v[3] == 1;
  }
  const double *o = other >= 0 ? got + 4 * other : NULL;
  const uint64_t oclock = o ? (uint64_t)o[0] << 32 | (uint64_t)o[1] : 0;
  const int ofull = o ? o[2] != 0 : 0;
  if (got != each) free(got);
  if (arc != 0) {
    set_err(err, errlen, "checkpoint: %s: agreeing with the other nodes: %s", dir,
            au_strerror(arc));
    return arc;
  }
  if (toolong || longer >= 0) {
    if (toolong)
      dir_too_long("checkpoint", dir, err, errlen);
    else
      set_err(err, errlen, "checkpoint: node %d's directory path is more than %d bytes long",
              longer, CKPT_DIR_MAX);
    return AU_EINVAL;
  }
  if (o) {
    set_err(err, errlen,
            "checkpoint: node %d asks for clock %llu (%s), this node for %llu (%s): every "
            "node must make the same checkpoint",
            other, (unsigned long long)oclock, ofull ? "full" : "incremental",
            (unsigned long long)clock, full ? "full" : "incremental");
    return AU_EINVAL;
  }
  if (behind) {
    set_err(err, errlen,
            "checkpoint: clock %llu is not after this node's last checkpoint in %s (%s): "
            "checkpoints go forward",
            (unsigned long long)clock, dir, c->base);
    return AU_EINVAL;
  }
  if (late >= 0) {
    set_err(err, errlen,
            "checkpoint: clock %llu is not after node %d's last checkpoint in %s: "
            "checkpoints go forward",
            (unsigned long long)clock, late, dir);
    return AU_EINVAL;
  }
  /* incremental where every node can be (one that could not, a new process, makes it
     a full one everywhere) */
  uint64_t **next = calloc((size_t)n->ntables + 1, sizeof(uint64_t *));
  uint64_t bytes = 0, fnv = 0;
  int ok = next != NULL;
  for (int i = 0; ok && i < n->ntables; i++)
    ok = (next[i] = malloc((n->table_by_id[i]->keys + 1) * sizeof(uint64_t))) != NULL;
  ok = ok && mkdir_one(dir) == 0 && mkdir_one(sub) == 0 &&
       write_part(n, path, incr ? c->hash : NULL, next, &bytes, &fnv) == 0;
  if (!ok) set_err(err, errlen, "checkpoint: %s: %s", path, strerror(errno));
  double *v = calloc(4 * (size_t)n->nodes + 1, sizeof(double));
  if (!v) {
    for (int i = 0; next && i < n->ntables; i++) free(next[i]);
    free(next);
    return AU_ENOMEM; /* (the others then wait in the allreduce) */
  }
  int rc = gather_parts(n, ok, bytes, fnv, v);
  int all = rc == 0;
  for (int r = 0; all && r < n->nodes; r++) all = v[4 * r] > 0;
  /* rank 0: the manifest, then LATEST; the others learn how it went */
  double done = 0;
  if (rc == 0 && n->rank == 0 && all) {
    snprintf(path, sizeof(path), "%s/manifest.txt", sub);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    /* its lines in memory first, then the file: them and sum=, their bytes' FNV-1a */
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    if (f) {
      fprintf(f,
              "# augur checkpoint (docs/checkpoints.md)\nformat=%d\nnodes=%d\nclock=%llu\n"
              "tables=%d\n",
              FORMAT, n->nodes, (unsigned long long)clock, n->ntables);
      /* an incremental one holds what changed since its base: a restore applies the base
       * (and its own base, ...) first */
      if (incr) fprintf(f, "base=%s\n", c->base);
      for (int i = 0; i < n->ntables; i++) {
        const au_table_t *t = n->table_by_id[i];
        fprintf(f, "table=%d name=%s keys=%llu dim=%u width=%u type=%d\n", i, t->name,
                (unsigned long long)t->keys, t->dim, t->width, (int)t->type);
      }
      fprintf(f, "ids=%u\n", ids_count(n));
      for (uint32_t i = 0; ids_at(n, i); i++) {
        const au_table_t *t = ids_format(ids_at(n, i));
        fprintf(f, "idtable=%u name=%s dim=%u width=%u type=%d\n", i, t->name, t->dim, t->width,
                (int)t->type);
      }
      for (int r = 0; r < n->nodes; r++)
        fprintf(f, "part=%d bytes=%.0f fnv=%016llx\n", r, v[4 * r + 1],
                (unsigned long long)((uint64_t)v[4 * r + 2] << 32 | (uint64_t)v[4 * r + 3]));
      f = fclose(f) == 0 && text ? fopen(tmp, "w") : NULL;
    }
    if (f) {
      fwrite(text, 1, text_len, f);
      fprintf(f, "sum=%016llx\n", (unsigned long long)text_fnv(text, text_len));
    }
    free(text);
    int good = f && commit(f, tmp, path) == 0;
    if (good) {
      snprintf(path, sizeof(path), "%s/LATEST", dir);
      snprintf(tmp, sizeof(tmp), "%s.tmp", path);
      f = fopen(tmp, "w");
      if (f) fprintf(f, "ckpt-%llu\n", (unsigned long long)clock);
      good = f && commit(f, tmp, path) == 0;
    }
    if (!good) set_err(err, errlen, "checkpoint: %s: %s", path, strerror(errno));
    done = good;
  }
  memset(v, 0, (4 * (size_t)n->nodes + 1) * sizeof(double));
  v[0] = done;
  if (rc == 0) rc = au_allreduce_sum(n->rt, v, 1);
  if (rc == 0 && v[0] <= 0) {
    if (ok && !(n->rank == 0 && all)) set_err(err, errlen, "checkpoint: another node failed");
    rc = AU_EIO;
  }
  free(v);
  /* done: what it holds is the next one's base (a failed one leaves the last as it was) */
  if (rc == 0 && !c && (c = n->ckpt = calloc(1, sizeof(*c))))
    c->hash = calloc((size_t)n->ntables + 1, sizeof(uint64_t *));
  if (rc == 0 && c && c->hash && (c->ntables == n->ntables || c->ntables == 0)) {
    for (int i = 0; i < c->ntables; i++) free(c->hash[i]);
    for (int i = 0; i < n->ntables; i++) c->hash[i] = next[i], next[i] = NULL;
    c->ntables = n->ntables;
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    snprintf(c->base, sizeof(c->base), "ckpt-%llu", (unsigned long long)clock);
    c->clock = clock;
  } else if (rc == 0) {
    checkpoint_free(n); /* the tables changed, or no memory: the next one is full */
  }
  for (int i = 0; next && i < n->ntables; i++) free(next[i]);
  free(next);
  return rc;
}

/* ---- pruning ---------------------------------------------------------------------------- */

typedef struct ck_entry {
  uint64_t clock;
  int full;      /* a manifest without base= */
  int keep;      /* on LATEST's chain */
  uint64_t base; /* an incremental one's base (its clock), with has_base */
  int has_base;
} ck_entry_t;

static int cmp_entry(const void *a, const void *b)
{
  const ck_entry_t *x = a, *y = b;
  return x->clock < y->clock ? 1 : x->clock > y->clock ? -1 : 0; /* newest first */
}

/* "ckpt-" and a clock in plain decimal (no sign, no leading zero): the clock; -1 for any
 * other name, so that a name prune rebuilds is the name it read. */
static int ckpt_clock(const char *name, uint64_t *clock)
{
  if (strncmp(name, "ckpt-", 5) || !name[5] || strlen(name + 5) > 19) return -1;
  if (name[5] == '0' && name[6]) return -1;
  uint64_t c = 0;
  for (const char *p = name + 5; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    c = c * 10 + (uint64_t)(*p - '0');
  }
  *clock = c;
  return 0;
}

static ck_entry_t *entry_of(ck_entry_t *v, size_t n, uint64_t clock)
{
  for (size_t i = 0; i < n; i++)
    if (v[i].clock == clock) return &v[i];
  return NULL;
}

/* Removes the files of directory DIR/NAME and then it; only what is in it, never through
 * a symbolic link (the directory is opened with O_NOFOLLOW, its entries unlinked by name
 * in it: a link goes, not what it names). A subdirectory in it is left, and so is it. */
static int remove_ckpt_dir(int dfd, const char *name, const char *dir, char *err, size_t errlen)
{
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) return 0; /* (another node may have been first) */
  DIR *s = fd >= 0 ? fdopendir(fd) : NULL;
  if (!s) {
    set_err(err, errlen, "checkpoint prune: %s/%s: %s", dir, name, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(s))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (unlinkat(dirfd(s), e->d_name, 0) != 0 && errno != ENOENT && errno != EISDIR) {
      set_err(err, errlen, "checkpoint prune: %s/%s/%s: %s", dir, name, e->d_name, strerror(errno));
      rc = -1;
      break;
    }
  }
  closedir(s);
  if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT && errno != ENOTEMPTY &&
      errno != EEXIST) {
    set_err(err, errlen, "checkpoint prune: %s/%s: %s", dir, name, strerror(errno));
    rc = -1;
  }
  return rc;
}

int au_checkpoint_prune(const char *dir, int keep, int *removed, char *err, size_t errlen)
{
  if (removed) *removed = 0;
  if (!dir || keep < 0) return AU_EINVAL;
  if (dir_too_long("checkpoint prune", dir, err, errlen)) return AU_EINVAL;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    int e = errno;
    if (dfd >= 0) close(dfd);
    set_err(err, errlen, "checkpoint prune: %s: %s", dir, strerror(e));
    return e == ENOENT || e == ENOTDIR ? AU_EINVAL : AU_EIO;
  }
  if (keep == 0) {
    closedir(d);
    return 0;
  }
  ck_entry_t *v = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  char line[256];
  while (rc == 0 && (e = readdir(d))) {
    uint64_t clock;
    struct stat st;
    if (ckpt_clock(e->d_name, &clock) != 0) continue;
    /* only real directories: a file or a link of that name is not a checkpoint */
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (n == cap) {
      ck_entry_t *bigger = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
      if (!bigger) {
        rc = AU_ENOMEM;
        break;
      }
      v = bigger;
    }
    ck_entry_t c = {.clock = clock};
    char m[300];
    snprintf(m, sizeof(m), "%s/manifest.txt", e->d_name);
    int mfd = openat(dfd, m, O_RDONLY | O_NOFOLLOW);
    FILE *f = mfd >= 0 ? fdopen(mfd, "r") : NULL;
    if (!f && mfd >= 0) close(mfd);
    c.full = f != NULL;
    while (f && fgets(line, sizeof(line), f)) {
      unsigned long long b;
      if (!strncmp(line, "base=", 5)) {
        c.full = 0;
        if (sscanf(line, "base=ckpt-%llu", &b) == 1) c.base = b, c.has_base = 1;
      }
    }
    if (f) fclose(f);
    v[n++] = c;
  }
  /* what LATEST names, and its chain down to its full one, stay whatever their clocks
   * (a new run into a DIR that holds an older run's checkpoints of higher clocks) */
  FILE *lf = NULL;
  int lfd = openat(dfd, "LATEST", O_RDONLY | O_NOFOLLOW);
  if (lfd >= 0 && !(lf = fdopen(lfd, "r"))) close(lfd);
  unsigned long long latest;
  if (rc == 0 && lf && fscanf(lf, "ckpt-%llu", &latest) == 1) {
    ck_entry_t *c = entry_of(v, n, latest);
    for (size_t hops = 0; c && !c->keep && hops <= n; hops++) {
      c->keep = 1;
      c = c->has_base ? entry_of(v, n, c->base) : NULL;
    }
  }
  if (lf) fclose(lf);
  if (rc) {
    closedir(d);
    free(v);
    set_err(err, errlen, "checkpoint prune: %s: out of memory", dir);
    return rc;
  }
  qsort(v, n, sizeof(*v), cmp_entry);
  /* the keep-th newest full one: everything older goes, but LATEST's chain */
  uint64_t oldest = 0;
  int fulls = 0;
  for (size_t i = 0; i < n && fulls < keep; i++)
    if (v[i].full && ++fulls == keep) oldest = v[i].clock;
  for (size_t i = 0; i < n && fulls == keep && rc == 0; i++) {
    if (v[i].clock >= oldest || v[i].keep) continue;
    char name[32];
    snprintf(name, sizeof(name), "ckpt-%llu", (unsigned long long)v[i].clock);
    if (remove_ckpt_dir(dfd, name, dir, err, errlen) != 0)
      rc = AU_EIO;
    else if (removed)
      (*removed)++;
  }
  closedir(d);
  free(v);
  return rc;
}

/* ---- restore ----------------------------------------------------------------------------- */

typedef struct manifest {
  int format, nodes, tables, ids; /* ids: id tables (0 before format 2) */
  uint64_t clock;
  uint64_t *bytes, *fnv; /* per part */
  char base[64];         /* an incremental one's base checkpoint; "" for a full one */
} manifest_t;

/* DIR's LATEST names the checkpoint (or DIR is one: it holds manifest.txt). */
static int find_checkpoint(const char *dir, char *sub, size_t cap)
{
  char path[4200], name[256];
  snprintf(path, sizeof(path), "%s/manifest.txt", dir);
  if (access(path, R_OK) == 0) return snprintf(sub, cap, "%s", dir) < (int)cap ? 0 : -1;
  snprintf(path, sizeof(path), "%s/LATEST", dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int got = fscanf(f, "%255s", name) == 1 && !strchr(name, '/');
  fclose(f);
  return got && snprintf(sub, cap, "%s/%s", dir, name) < (int)cap ? 0 : -1;
}

int au_checkpoint_find(const char *dir, char *path, size_t cap, int *nodes)
{
  if (!dir || !path || !nodes) return AU_EIO;
  if (strlen(dir) > CKPT_DIR_MAX) return AU_EINVAL;
  if (find_checkpoint(dir, path, cap) != 0) return AU_EIO;
  char mpath[4200], line[256];
  snprintf(mpath, sizeof(mpath), "%s/manifest.txt", path);
  FILE *f = fopen(mpath, "r");
  *nodes = 0;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "nodes=%d", nodes) == 1) break;
  if (f) fclose(f);
  return *nodes >= 1 ? 0 : AU_EIO;
}

static int read_manifest(au_node_t *n, const char *sub, manifest_t *m, char *err, size_t errlen)
{
  char path[4200], line[512];
  snprintf(path, sizeof(path), "%s/manifest.txt", sub);
  FILE *f = fopen(path, "r");
  if (!f) {
    set_err(err, errlen, "restore: %s: %s", path, strerror(errno));
    return AU_EIO;
  }
  int format = -1, rc = 0, tlines = 0, ilines = 0; /* table= and idtable= lines */
  *m = (manifest_t){.nodes = -1, .tables = -1};
  const int nids = (int)ids_count(n);
  uint64_t fnv = FNV_INIT; /* of the lines before sum= */
  int summed = 0, after_sum = 0;
  while (!rc && fgets(line, sizeof(line), f)) {
    int i, dummy;
    unsigned long long keys, a, b;
    unsigned dim, width;
    char name[64];
    if (summed) after_sum = 1;
    if (sscanf(line, "sum=%llx", &a) == 1) {
      if (a != fnv) {
        set_err(err, errlen, "restore: %s: its lines do not match their checksum (sum=)", path);
        rc = AU_EIO;
      }
      summed = 1;
      continue;
    }
    fnv = text_fnv_more(fnv, line, strlen(line));
    if (line[0] == '#') continue;
    if (sscanf(line, "format=%d", &format) == 1) continue;
    if (sscanf(line, "nodes=%d", &m->nodes) == 1) {
      if (m->bytes) { /* (a second nodes= line) */
        set_err(err, errlen, "restore: %s: nodes= twice", path);
        rc = AU_EIO;
        continue;
      }
      if (m->nodes < 1 || m->nodes > 65536) {
        set_err(err, errlen, "restore: %s: nodes=%d, expected 1..65536", path, m->nodes);
        rc = AU_EIO;
      }
      m->bytes = rc ? NULL : calloc((size_t)m->nodes, sizeof(uint64_t));
      m->fnv = rc ? NULL : calloc((size_t)m->nodes, sizeof(uint64_t));
      if (!rc && (!m->bytes || !m->fnv)) rc = AU_ENOMEM;
      continue;
    }
    if (sscanf(line, "clock=%llu", &a) == 1) {
      m->clock = a;
      continue;
    }
    if (sscanf(line, "tables=%d", &m->tables) == 1) continue;
    if (sscanf(line, "ids=%d", &m->ids) == 1) continue;
    if (sscanf(line, "idtable=%d name=%63s dim=%u width=%u type=%d", &i, name, &dim, &width,
               &dummy) == 5) {
      au_ids_t *x = i >= 0 && i < nids ? ids_at(n, (uint32_t)i) : NULL;
      const au_table_t *t = x ? ids_format(x) : NULL;
      if (!t || strcmp(t->name, name) || t->dim != dim || t->width != width ||
          (int)t->type != dummy) {
        set_err(err, errlen,
                "restore: %s: id table %d is '%s' of dim %u (%u words a row with the "
                "optimizer's), this node's %s",
                path, i, name, dim, width,
                t ? "differs (create the same id tables first)" : "is missing");
        rc = AU_EINVAL;
      }
      ilines++;
      continue;
    }
    if (sscanf(line, "base=%63s", m->base) == 1) {
      if (strchr(m->base, '/') || strncmp(m->base, "ckpt-", 5)) {
        set_err(err, errlen, "restore: %s: base=%s, expected ckpt-CLOCK", path, m->base);
        rc = AU_EIO;
      }
      continue;
    }
    if (sscanf(line, "table=%d name=%63s keys=%llu dim=%u width=%u type=%d", &i, name, &keys, &dim,
               &width, &dummy) == 6) {
      const au_table_t *t = i >= 0 && i < n->ntables ? n->table_by_id[i] : NULL;
      if (!t || strcmp(t->name, name) || t->keys != keys || t->dim != dim || t->width != width ||
          (int)t->type != dummy) {
        set_err(err, errlen,
                "restore: %s: table %d is '%s' of %llu keys x %u (%u words a row with the "
                "optimizer's), this node's %s",
                path, i, name, keys, dim, width,
                t ? "differs (create the same tables first)" : "is missing");
        rc = AU_EINVAL;
      }
      tlines++;
      continue;
    }
    if (sscanf(line, "part=%d bytes=%llu fnv=%llx", &i, &a, &b) == 3 && m->bytes && i >= 0 &&
        i < m->nodes) {
      m->bytes[i] = a, m->fnv[i] = b;
      continue;
    }
    set_err(err, errlen, "restore: %s: cannot read '%.60s'", path, line);
    rc = AU_EIO;
  }
  fclose(f);
  if (!rc && (after_sum || (!summed && format >= 3))) {
    set_err(err, errlen, "restore: %s: %s", path,
            after_sum ? "lines after its checksum (sum=)" : "no checksum line (sum=)");
    rc = AU_EIO;
  }
  /* the clock its directory is named by (a manifest's clock edited, or its directory) */
  const char *leaf = strrchr(sub, '/');
  leaf = leaf ? leaf + 1 : sub;
  unsigned long long named;
  char extra;
  if (!rc && sscanf(leaf, "ckpt-%llu%c", &named, &extra) == 1 && named != m->clock) {
    set_err(err, errlen, "restore: %s: clock=%llu, but its directory is %s", path,
            (unsigned long long)m->clock, leaf);
    rc = AU_EIO;
  }
  if (!rc && (format < 1 || format > FORMAT || m->nodes < 1 || m->tables != n->ntables)) {
    set_err(err, errlen, "restore: %s: expected format=1..%d, nodes and tables=%d (this node's)",
            path, FORMAT, n->ntables);
    rc = AU_EINVAL;
  }
  if (!rc && (tlines != n->ntables || ilines != nids)) {
    set_err(err, errlen, "restore: %s: %d table= and %d idtable= lines, for %d and %d tables", path,
            tlines, ilines, n->ntables, nids);
    rc = AU_EIO;
  }
  if (!rc && (m->ids != nids || (format < 2 && nids))) {
    set_err(err, errlen, "restore: %s: %d id tables, this node has %d (create the same first)",
            path, m->ids, nids);
    rc = AU_EINVAL;
  }
  m->format = format;
  return rc;
}

typedef struct rbuf {
  const unsigned char *p;
  size_t len, at;
} rbuf_t;

static int take(rbuf_t *r, void *out, size_t n)
{
  if (r->len - r->at < n) return -1;
  memcpy(out, r->p + r->at, n);
  r->at += n;
  return 0;
}

/* A part's id tables (format 2): checked (apply 0), or their rows put in (apply 1; the
 * newest checkpoint of a chain only: each holds them whole), the tables emptied first by
 * part 0. *gave counts rows that gave way in a full bucket, or replaced a copy of their
 * id (a smaller budget, or fewer nodes than wrote it). 0, or AU_EIO (malformed: why says
 * what). */
static int restore_ids(au_node_t *n, rbuf_t *in, int r, int apply, uint64_t *gave, const char **why)
{
  uint32_t k;
  if (take(in, &k, 4) || k != ids_count(n)) {
    *why = "its count of id tables is not this node's";
    return AU_EIO;
  }
  for (uint32_t i = 0; i < k; i++) {
    au_ids_t *t = ids_at(n, i);
    const au_table_t *f = ids_format(t);
    uint32_t len, dim, width, type;
    uint64_t rows;
    char name[64];
    if (take(in, &len, 4) || len >= sizeof(name) || take(in, name, len) || take(in, &dim, 4) ||
        take(in, &width, 4) || take(in, &type, 4) || take(in, &rows, 8)) {
      *why = "an id table's head is cut short";
      return AU_EIO;
    }
    name[len] = '\0';
    const size_t rec = 16 + (size_t)f->width * 4;
    if (strcmp(name, f->name) || dim != f->dim || width != f->width || type != (uint32_t)f->type) {
      *why = "an id table's name, dim, width or type is not this node's";
      return AU_EIO;
    }
    if (rows > (in->len - in->at) / rec) {
      *why = "an id table holds more rows than the part has bytes";
      return AU_EIO;
    }
    if (apply && r == 0) ids_clear(t);
    for (uint64_t j = 0; apply && j < rows; j++) {
      const unsigned char *p = in->p + in->at + j * rec;
      uint64_t id;
      uint32_t uses, last;
      memcpy(&id, p, 8), memcpy(&uses, p + 8, 4), memcpy(&last, p + 12, 4);
      *gave += ids_put_row(t, id, uses, last, p + 16) > 0;
    }
    in->at += rows * rec;
  }
  return 0;
}

/* Part r: checked against the manifest (apply 0: nothing changes), or its owned-here
 * actors copied in (apply 1, after every part of the chain passed the check on every
 * node), and its id tables' rows if apply_ids. */
static int restore_part(au_node_t *n, const char *sub, int r, const manifest_t *m,
                        au_restore_map_fn map, void *arg, int apply, int apply_ids, uint64_t *gave,
                        unsigned char *buf, char *err, size_t errlen)
{
  char path[4200];
  snprintf(path, sizeof(path), "%s/part-%d.bin", sub, r);
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "restore: %s: %s", path, strerror(errno));
    return AU_EIO;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size != m->bytes[r]) {
    set_err(err, errlen, "restore: %s: %lld bytes, the manifest says %llu", path,
            (long long)st.st_size, (unsigned long long)m->bytes[r]);
    fclose(f);
    return AU_EIO;
  }
  int rc = 0;
  if (fread(buf, 1, m->bytes[r], f) != m->bytes[r] || fgetc(f) != EOF) rc = AU_EIO;
  fclose(f);
  uint64_t fnv = FNV_INIT, stored = 0;
  if (!rc) {
    if (m->bytes[r] >= 8) {
      sum_t sm;
      sum_init(&sm);
      sum_add(&sm, buf, m->bytes[r] - 8);
      fnv = sum_end(&sm);
      memcpy(&stored, buf + m->bytes[r] - 8, 8);
    }
    if (m->bytes[r] < 8 + 20 || stored != fnv || fnv != m->fnv[r]) rc = AU_EIO;
  }
  if (rc == AU_EIO) {
    set_err(err, errlen, "restore: %s: not the part the manifest names (size or checksum)", path);
    return rc;
  }
  rbuf_t in = {buf, (size_t)m->bytes[r] - 8, 0};
  char magic[8];
  uint32_t rank, nodes, ntables;
  const char *why = NULL;
  if (take(&in, magic, 8) || memcmp(magic, MAGIC, 8) || take(&in, &rank, 4) ||
      take(&in, &nodes, 4) || take(&in, &ntables, 4))
    why = "not an augur checkpoint part";
  else if (rank != (uint32_t)r || nodes != (uint32_t)m->nodes)
    why = "its rank or node count is not the manifest's";
  else if (ntables != (uint32_t)n->ntables)
    why = "its count of tables is not this node's";
  for (uint32_t i = 0; !why && i < ntables; i++) {
    au_table_t *t = n->table_by_id[i];
    uint32_t len, dim, width, group, type;
    uint64_t keys, records;
    char name[64];
    if (take(&in, &len, 4) || len >= sizeof(name) || take(&in, name, len) || take(&in, &keys, 8) ||
        take(&in, &dim, 4) || take(&in, &width, 4) || take(&in, &group, 4) || take(&in, &type, 4) ||
        take(&in, &records, 8)) {
      why = "a table's head is cut short";
      break;
    }
    name[len] = '\0';
    if (strcmp(name, t->name) || keys != t->keys || dim != t->dim || width != t->width ||
        type != (uint32_t)t->type || group == 0 || (group & (group - 1))) {
      why = "a table's name, keys, dim, width, type or group is not this node's";
      break;
    }
    for (uint64_t k = 0; !why && k < records; k++) {
      uint64_t first, count;
      if (take(&in, &first, 8) || take(&in, &count, 8) || first > keys || count > keys - first ||
          (in.len - in.at) / ((size_t)width * 4) < count) {
        why = "a run of rows lies outside its table or past the part's end";
        break;
      }
      for (uint64_t j = 0; apply && j < count; j++) {
        const au_key_t key = map ? map(arg, t, first + j) : first + j;
        if (key < t->keys && au_table_owns(t, key) == 1) {
          memcpy(table_row(t, key), in.p + in.at + j * width * 4, (size_t)width * 4);
          table_mark(t, key);
        }
      }
      in.at += count * width * 4;
    }
  }
  if (!why && m->format >= 2) rc = restore_ids(n, &in, r, apply && apply_ids, gave, &why);
  if (!rc && !why && in.at != in.len) why = "bytes after its last table";
  if (why) {
    set_err(err, errlen, "restore: %s: malformed: %s", path, why);
    rc = AU_EIO;
  }
  return rc;
}

/* Collective: rc, or on a node where all went well AU_EIO with "another node could not
 * WHAT DIR TAIL" in err when another node failed, or the allreduce's error: every node the
 * same answer. */
static int all_nodes(au_node_t *n, int rc, const char *what, const char *dir, const char *tail,
                     char *err, size_t errlen)
{
  double v = rc ? 1 : 0;
  int ar = au_allreduce_sum(n->rt, &v, 1);
  if (!rc && ar) rc = ar;
  if (!rc && v > 0) {
    set_err(err, errlen, "restore: another node could not %s %s%s", what, dir, tail);
    rc = AU_EIO;
  }
  return rc;
}

int au_restore(au_node_t *n, const char *dir, uint64_t *clock, char *err, size_t errlen)
{
  return au_restore_map(n, dir, NULL, NULL, clock, err, errlen);
}

int au_restore_map(au_node_t *n, const char *dir, au_restore_map_fn map, void *arg, uint64_t *clock,
                   char *err, size_t errlen)
{
  if (!n || !dir) return AU_EINVAL;
  char sub[4096];
  /* refused after the others hear (all_nodes, below), as every refusal of a restore */
  int rc = dir_too_long("restore", dir, err, errlen) ? AU_EINVAL : 0;
  /* DIR/ckpt-3/ as DIR/ckpt-3: its base lies beside it, not in it */
  char trimmed[4096];
  snprintf(trimmed, sizeof(trimmed), "%s", dir);
  for (size_t l = strlen(trimmed); l > 1 && trimmed[l - 1] == '/'; l--) trimmed[l - 1] = '\0';
  dir = trimmed;
  if (!rc && find_checkpoint(dir, sub, sizeof(sub)) != 0) {
    set_err(err, errlen, "restore: %s: no checkpoint (no LATEST, no manifest.txt)", dir);
    rc = AU_EIO;
  }
  /* the chain: this checkpoint, its base, that one's base ... down to a full one; applied
   * from the full one up, so that each actor ends as the latest that wrote it */
  enum { CHAIN_MAX = 100000 };
  char(*subs)[4096] = NULL;
  manifest_t *ms = NULL;
  int len = 0;
  while (!rc) {
    if (len % 16 == 0) {
      void *a = realloc(subs, (size_t)(len + 16) * sizeof(*subs));
      void *b = a ? realloc(ms, (size_t)(len + 16) * sizeof(*ms)) : NULL;
      if (a) subs = a;
      if (b) ms = b;
      if (!a || !b) {
        rc = AU_ENOMEM;
        break;
      }
    }
    snprintf(subs[len], sizeof(subs[len]), "%s", sub);
    ms[len] = (manifest_t){0};
    rc = read_manifest(n, sub, &ms[len], err, errlen);
    len++;
    if (!rc && len > 1 && ms[len - 1].clock >= ms[len - 2].clock) { /* also a chain that loops */
      set_err(err, errlen, "restore: %s: its base %s is not of an earlier clock (%llu, %llu)",
              subs[len - 2], ms[len - 2].base, (unsigned long long)ms[len - 1].clock,
              (unsigned long long)ms[len - 2].clock);
      rc = AU_EIO;
    }
    if (rc || !ms[len - 1].base[0]) break;
    if (len == CHAIN_MAX) {
      set_err(err, errlen, "restore: %s: a chain of more than %d checkpoints", dir, CHAIN_MAX);
      rc = AU_EIO;
      break;
    }
    /* the base lies beside it */
    const char *slash = strrchr(sub, '/');
    const int at = slash ? (int)(slash - sub) : 0;
    char next[4096];
    snprintf(next, sizeof(next), "%.*s%s%s", at, sub, slash ? "/" : "", ms[len - 1].base);
    snprintf(sub, sizeof(sub), "%s", next);
  }
  /* every part of the chain checked, on every node, before any table changes: a refused
     restore leaves the node's data as it was */
  uint64_t gave = 0, most = 1;
  for (int c = 0; !rc && c < len; c++)
    for (int r = 0; r < ms[c].nodes; r++) most = ms[c].bytes[r] > most ? ms[c].bytes[r] : most;
  /* one buffer for every part, both passes: the apply pass allocates nothing */
  unsigned char *buf = rc ? NULL : malloc(most);
  if (!rc && !buf) {
    set_err(err, errlen, "restore: %s: no memory to read a part of %llu bytes", dir,
            (unsigned long long)most);
    rc = AU_ENOMEM;
  }
  for (int c = len - 1; !rc && c >= 0; c--)
    for (int r = 0; !rc && r < ms[c].nodes; r++)
      rc = restore_part(n, subs[c], r, &ms[c], map, arg, 0, 0, &gave, buf, err, errlen);
  /* every node the same checkpoint: each reads its own LATEST (a directory copied to
     each node may be a checkpoint behind on one), and until 2026-12-07 each restored its
     own and all said they had: a model of two clocks */
  uint64_t fp = 1469598103934665603ULL; /* FNV-1a over the chain's clocks and parts */
  for (int c = 0; !rc && c < len; c++) {
    fp = (fp ^ ms[c].clock) * 1099511628211ULL;
    for (int r = 0; r < ms[c].nodes; r++) fp = (fp ^ ms[c].fnv[r]) * 1099511628211ULL;
  }
  const uint64_t at = rc == 0 && len ? ms[0].clock : 0;
  const double mine[6] = {rc == 0, (double)(at >> 32), (double)(at & 0xffffffffu),
                          len,     (double)(fp >> 32), (double)(fp & 0xffffffffu)};
  double each[6 * 64], *got;
  int arc = gather_each(n, mine, 6, each, &got);
  for (int r = 0; !rc && !arc && r < n->nodes; r++) {
    const double *v = got + 6 * r;
    if (!v[0] || !memcmp(v, mine, sizeof(mine))) continue; /* (a node that failed says so) */
    set_err(err, errlen,
            "restore: %s: node %d found the checkpoint of clock %llu, this node of clock %llu%s: "
            "every node must restore the same one (nothing restored)",
            dir, r, (unsigned long long)((uint64_t)v[1] << 32 | (uint64_t)v[2]),
            (unsigned long long)at, v[1] == mine[1] && v[2] == mine[2] ? " (another chain)" : "");
    rc = AU_EIO;
  }
  if (got && got != each) free(got);
  if (!rc && arc) {
    set_err(err, errlen, "restore: %s: agreeing with the other nodes: %s", dir, au_strerror(arc));
    rc = arc;
  }
  rc = all_nodes(n, rc, "use", dir, " (nothing restored)", err, errlen);
  /* then applied from the full one up, so that each actor ends as the latest that wrote
     it. The files are read again (not kept twice in memory), each checked again before
     any of its rows is copied: only a part changed on disk between the two passes can
     fail now, and then the tables hold the parts before it (said) */
  const int checked = rc == 0;
  for (int c = len - 1; !rc && c >= 0; c--)
    for (int r = 0; !rc && r < ms[c].nodes; r++)
      rc = restore_part(n, subs[c], r, &ms[c], map, arg, 1, c == 0, &gave, buf, err, errlen);
  free(buf);
  if (rc && checked && err && errlen) {
    const size_t l = strlen(err);
    if (l < errlen)
      snprintf(err + l, errlen - l,
               " (it changed after the check: the tables are partly "
               "restored; restore again)");
  }
  if (!rc && gave)
    au__log(AU_LOG_WARN, n->rank,
            "restore: %s: %llu id-table rows did not fit this node's buckets and gave way by "
            "the eviction rule (a smaller budget, or fewer nodes, than wrote it)",
            dir, (unsigned long long)gave);
  rc = all_nodes(n, rc, "restore", dir, "", err, errlen);
  if (!rc && clock && len) *clock = ms[0].clock;
  for (int c = 0; c < len; c++) free(ms[c].bytes), free(ms[c].fnv);
  free(ms);
  free(subs);
  return rc;
}
