/* graph.c — see graph.h. */
#include "graph.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kg_strerror(int err)
{
  switch (err) {
  case 0:
    return "success";
  case KG_EIO:
    return "cannot read the file";
  case KG_EPARSE:
    return "malformed input";
  case KG_ENOMEM:
    return "out of memory";
  case KG_EINVAL:
    return "invalid argument";
  case KG_ERANGE:
    return "too many entities or relations";
  default:
    return "unknown error";
  }
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

/* A line as people see it in a message: at most 60 bytes, tabs as \t, other control
 * bytes as '?'. */
static const char *shown(char *buf, size_t cap, const char *s, size_t len)
{
  size_t n = len < 60 ? len : 60, j = 0;
  for (size_t i = 0; i < n && j + 2 < cap; i++)
    if (s[i] == '\t')
      buf[j++] = '\\', buf[j++] = 't';
    else
      buf[j++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
  if (len > n && j + 4 < cap) memcpy(&buf[j], "...", 3), j += 3;
  buf[j] = 0;
  return buf;
}

/* ---- names ----------------------------------------------------------------------------- */

uint64_t kg_name_id(const char *s, size_t len)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
  h ^= h >> 33; /* murmur3's finalizer */
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

#define ARENA_BLOCK (1u << 20)

/* Names are at most KG_MAX_NAME bytes (the loader says so), so one always fits a block. */
static char *arena_copy(kg_names_t *m, const char *s, size_t len)
{
  if (m->nblocks == 0 || m->used + len + 1 > ARENA_BLOCK) {
    char *b = malloc(ARENA_BLOCK),
         **nb = b ? realloc(m->blocks, (m->nblocks + 1) * sizeof(char *)) : NULL;
    if (!nb) return free(b), NULL;
    m->blocks = nb;
    nb[m->nblocks++] = b;
    m->used = 0;
  }
  char *p = m->blocks[m->nblocks - 1] + m->used;
  memcpy(p, s, len);
  p[len] = 0;
  m->used += len + 1;
  return p;
}

static int names_grow(kg_names_t *m)
{
  uint32_t ns = m->nslot ? m->nslot * 2 : 1024;
  uint32_t *slot = calloc(ns, sizeof(uint32_t));
  if (!slot) return KG_ENOMEM;
  for (uint32_t i = 0; i < m->n; i++) {
    uint32_t s = (uint32_t)m->id[i] & (ns - 1);
    while (slot[s]) s = (s + 1) & (ns - 1);
    slot[s] = i + 1;
  }
  free(m->slot);
  m->slot = slot;
  m->nslot = ns;
  return 0;
}

int64_t kg_names_get(kg_names_t *m, const char *s, size_t len, int add, uint32_t max, char *err,
                     size_t errlen)
{
  const uint64_t id = kg_name_id(s, len);
  if (m->nslot) {
    for (uint32_t k = (uint32_t)id & (m->nslot - 1);; k = (k + 1) & (m->nslot - 1)) {
      const uint32_t i = m->slot[k];
      if (!i) break;
      if (m->id[i - 1] != id) continue;
      if (strlen(m->name[i - 1]) == len && !memcmp(m->name[i - 1], s, len)) return i - 1;
      char a[80];
      set_err(err, errlen, "names '%s' and '%s' have the same 64-bit id %016llx",
              shown(a, sizeof(a), s, len), m->name[i - 1], (unsigned long long)id);
      return KG_EPARSE;
    }
  }
  if (!add) return -1;
  if (m->n >= max) return KG_ERANGE;
  if (((uint64_t)m->n + 1) * 2 > m->nslot && names_grow(m) != 0) return KG_ENOMEM;
  if (len > KG_MAX_NAME) return KG_EPARSE;
  if (m->n == m->cap) {
    const uint32_t cap = m->cap ? m->cap * 2 : 64;
    char **nn = realloc(m->name, cap * sizeof(char *));
    if (nn) m->name = nn;
    uint64_t *ni = nn ? realloc(m->id, cap * sizeof(uint64_t)) : NULL;
    if (!ni) return KG_ENOMEM;
    m->id = ni;
    m->cap = cap;
  }
  char *copy = arena_copy(m, s, len);
  if (!copy) return KG_ENOMEM;
  const uint32_t i = m->n++;
  m->name[i] = copy;
  m->id[i] = id;
  uint32_t k = (uint32_t)id & (m->nslot - 1);
  while (m->slot[k]) k = (k + 1) & (m->nslot - 1);
  m->slot[k] = i + 1;
  return i;
}

int kg_names_numbered(kg_names_t *m, const char *prefix, uint32_t n)
{
  char buf[64];
  for (uint32_t i = 0; i < n; i++) {
    int len = snprintf(buf, sizeof(buf), "%s%u", prefix, i);
    if (kg_names_get(m, buf, (size_t)len, 1, UINT32_MAX, NULL, 0) != (int64_t)i) return KG_ENOMEM;
  }
  return 0;
}

void kg_names_free(kg_names_t *m)
{
  for (size_t i = 0; i < m->nblocks; i++) free(m->blocks[i]);
  free(m->blocks);
  free(m->name);
  free(m->id);
  free(m->slot);
  *m = (kg_names_t){0};
}

/* ---- triples --------------------------------------------------------------------------- */

int kg_triples_push(kg_triples_t *s, uint32_t h, uint32_t r, uint32_t t)
{
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    kg_triple_t *v = realloc(s->v, cap * sizeof(*v));
    if (!v) return KG_ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (kg_triple_t){h, r, t};
  return 0;
}

void kg_triples_free(kg_triples_t *s)
{
  free(s->v);
  *s = (kg_triples_t){0};
}

void kg_graph_free(kg_graph_t *g)
{
  kg_names_free(&g->ent);
  kg_names_free(&g->rel);
  kg_triples_free(&g->train);
  kg_triples_free(&g->valid);
  kg_triples_free(&g->test);
}

/* ---- the loader ------------------------------------------------------------------------ */

static int parse_line(const char *path, size_t lineno, char *line, size_t len, kg_graph_t *g,
                      kg_triples_t *out, int add, size_t *skipped, char *err, size_t errlen)
{
  const char *f[3];
  size_t fl[3];
  int nf = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && line[i] != '\t') {
      if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) goto bad;
      continue;
    }
    if (nf == 3) goto bad;
    f[nf] = line + start, fl[nf] = i - start;
    if (fl[nf] == 0) goto bad;
    if (fl[nf] > KG_MAX_NAME) {
      set_err(err, errlen, "%s:%zu: a name of %zu bytes (at most %u)", path, lineno, fl[nf],
              KG_MAX_NAME);
      return KG_EPARSE;
    }
    nf++;
    start = i + 1;
  }
  if (nf != 3) goto bad;
  int64_t idx[3];
  for (int k = 0; k < 3; k++) {
    kg_names_t *m = k == 1 ? &g->rel : &g->ent;
    const uint32_t max = k == 1 ? KG_MAX_RELATIONS : KG_MAX_ENTITIES;
    char e2[256];
    idx[k] = kg_names_get(m, f[k], fl[k], add, max, e2, sizeof(e2));
    if (idx[k] == KG_ERANGE) {
      set_err(err, errlen, "%s:%zu: more than %u %s", path, lineno, max,
              k == 1 ? "relations" : "entities");
      return KG_ERANGE;
    }
    if (idx[k] == KG_EPARSE) {
      set_err(err, errlen, "%s:%zu: %s", path, lineno, e2);
      return KG_EPARSE;
    }
    if (idx[k] == KG_ENOMEM) {
      set_err(err, errlen, "%s:%zu: out of memory", path, lineno);
      return KG_ENOMEM;
    }
  }
  if (idx[0] < 0 || idx[1] < 0 || idx[2] < 0) { /* a name training did not have */
    if (skipped) ++*skipped;
    return 0;
  }
  if (kg_triples_push(out, (uint32_t)idx[0], (uint32_t)idx[1], (uint32_t)idx[2]) != 0) {
    set_err(err, errlen, "%s:%zu: out of memory", path, lineno);
    return KG_ENOMEM;
  }
  return 0;
bad:;
  char buf[80];
  set_err(err, errlen, "%s:%zu: expected 'head<TAB>relation<TAB>tail', got '%s'", path, lineno,
          shown(buf, sizeof(buf), line, len));
  return KG_EPARSE;
}

int kg_load(const char *path, kg_graph_t *g, kg_triples_t *out, int add_names, size_t *skipped,
            char *err, size_t errlen)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: %s", path, strerror(errno));
    return KG_EIO;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t got;
  int rc = 0;
  while (rc == 0 && (got = getline(&line, &cap, f)) >= 0) {
    size_t len = (size_t)got;
    lineno++;
    if (len && line[len - 1] == '\n') len--;
    if (len && line[len - 1] == '\r') len--;
    char *text = line;
    if (lineno == 1 && len >= 3 && !memcmp(line, "\xef\xbb\xbf", 3)) /* a UTF-8 BOM */
      text += 3, len -= 3;
    if (len == 0) continue;
    if (memchr(text, 0, len)) {
      set_err(err, errlen, "%s:%zu: a NUL byte in the line", path, lineno);
      rc = KG_EPARSE;
      break;
    }
    rc = parse_line(path, lineno, text, len, g, out, add_names, skipped, err, errlen);
  }
  if (rc == 0 && ferror(f)) {
    set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
    rc = KG_EIO;
  }
  free(line);
  fclose(f);
  return rc;
}

/* ---- the generator --------------------------------------------------------------------- */

void kg_gen_opts_default(kg_gen_opts_t *o)
{
  *o = (kg_gen_opts_t){.entities = 40943,
                       .pairs = 7,
                       .symmetric = 4,
                       .edges = 6900,
                       .clusters = 400,
                       .valid = 5000,
                       .test = 5000,
                       .seed = 1};
}

int kg_gen_opts_check(const kg_gen_opts_t *o, char *err, size_t errlen)
{
  if (o->entities < 2 || o->entities > KG_MAX_ENTITIES) {
    set_err(err, errlen, "--entities must be in [2, %u]", KG_MAX_ENTITIES);
    return KG_EINVAL;
  }
  if (o->pairs + o->symmetric == 0 || 2 * (uint64_t)o->pairs + o->symmetric > KG_MAX_RELATIONS) {
    set_err(err, errlen, "2 x --pairs + --symmetric must be in [1, %u]", KG_MAX_RELATIONS);
    return KG_EINVAL;
  }
  if (o->clusters < 1 || o->clusters > o->entities) {
    set_err(err, errlen, "--clusters must be in [1, --entities]");
    return KG_EINVAL;
  }
  if (o->pairs && o->edges > o->entities) {
    set_err(err, errlen,
            "--edges must be at most --entities (the first pair gives each of "
            "--edges entities one parent)");
    return KG_EINVAL;
  }
  const uint64_t most = 2 * (uint64_t)o->edges * (o->pairs + o->symmetric);
  if ((uint64_t)o->valid + o->test >= most / 2) {
    set_err(err, errlen, "--valid + --test must be below half of the %llu triples drawn",
            (unsigned long long)most);
    return KG_EINVAL;
  }
  return 0;
}

static int cmp_u64(const void *a, const void *b)
{
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* An entity of cluster c, the first ones (the popular) more often: density ~ 1/sqrt. */
static uint32_t pick(uint64_t *x, const uint32_t *members, const uint32_t *start, uint32_t c)
{
  const uint32_t size = start[c + 1] - start[c];
  const double u = kg_uniform(x);
  uint32_t i = (uint32_t)(u * u * size);
  return members[start[c] + (i < size ? i : size - 1)];
}

int kg_generate(const kg_gen_opts_t *o, kg_graph_t *g, char *err, size_t errlen)
{
  *g = (kg_graph_t){0};
  int rc = kg_gen_opts_check(o, err, errlen);
  if (rc) return rc;
  const uint32_t E = o->entities, C = o->clusters, R = 2 * o->pairs + o->symmetric;
  uint64_t x = o->seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL;
  uint32_t *cl = malloc(E * sizeof(uint32_t)), *members = malloc(E * sizeof(uint32_t));
  uint32_t *start = calloc(C + 1, sizeof(uint32_t)),
           *map = malloc((size_t)C * R * sizeof(uint32_t));
  uint32_t *perm = malloc(E * sizeof(uint32_t));
  double *cdf = malloc(C * sizeof(double));
  const size_t most = 2 * (size_t)o->edges * (o->pairs + o->symmetric);
  uint64_t *keys = malloc((most ? most : 1) * sizeof(uint64_t));
  rc = KG_ENOMEM;
  if (!cl || !members || !start || !map || !perm || !cdf || !keys) goto out;
  /* clusters: sizes by Zipf's law, every cluster at least one entity */
  double sum = 0;
  for (uint32_t c = 0; c < C; c++) cdf[c] = sum += 1.0 / (c + 1);
  for (uint32_t e = 0; e < E; e++) {
    if (e < C) {
      cl[e] = e;
    } else {
      const double u = kg_uniform(&x) * sum;
      uint32_t lo = 0, hi = C - 1;
      while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cdf[mid] <= u)
          lo = mid + 1;
        else
          hi = mid;
      }
      cl[e] = lo;
    }
    start[cl[e] + 1]++;
  }
  for (uint32_t c = 0; c < C; c++) start[c + 1] += start[c];
  for (uint32_t e = 0; e < E; e++) perm[e] = e;
  for (uint32_t e = E; e > 1; e--) { /* a random order: popular entities not by index */
    uint32_t j = kg_below(&x, e), t = perm[e - 1];
    perm[e - 1] = perm[j], perm[j] = t;
  }
  {
    uint32_t *fill = calloc(C, sizeof(uint32_t));
    if (!fill) goto out;
    for (uint32_t i = 0; i < E; i++) {
      const uint32_t e = perm[i];
      members[start[cl[e]] + fill[cl[e]]++] = e;
    }
    free(fill);
  }
  /* each relation's map of clusters: random for the pairs, an involution (clusters
   * matched two by two) for the symmetric ones */
  for (uint32_t r = 0; r < R; r++) {
    uint32_t *m = &map[(size_t)r * C];
    if (r < 2 * o->pairs) {
      for (uint32_t c = 0; c < C; c++) m[c] = kg_below(&x, C);
    } else {
      for (uint32_t c = 0; c < C; c++) m[c] = c;
      for (uint32_t c = C; c > 1; c--) {
        uint32_t j = kg_below(&x, c), t = m[c - 1];
        m[c - 1] = m[j], m[j] = t;
      }
      /* m is a random order; match its neighbours: m[2i] <-> m[2i+1] */
      uint32_t *inv = malloc(C * sizeof(uint32_t));
      if (!inv) goto out;
      for (uint32_t i = 0; i < C; i++) inv[i] = m[i];
      for (uint32_t i = 0; i + 1 < C; i += 2) m[inv[i]] = inv[i + 1], m[inv[i + 1]] = inv[i];
      if (C % 2) m[inv[C - 1]] = inv[C - 1];
      free(inv);
    }
  }
  size_t nk = 0;
  for (uint32_t p = 0; p < o->pairs + o->symmetric; p++) {
    const int sym = p >= o->pairs;
    const uint32_t r = sym ? 2 * o->pairs + (p - o->pairs) : 2 * p, ri = sym ? r : r + 1;
    const uint32_t *m = &map[(size_t)r * C];
    for (uint32_t k = 0; k < o->edges; k++) {
      /* the first pair gives distinct entities one parent each; the others draw sources
       * as they draw targets */
      const uint32_t a = p == 0 ? perm[k] : pick(&x, members, start, cl[perm[kg_below(&x, E)]]);
      const uint32_t b = pick(&x, members, start, m[cl[a]]);
      if (a == b) continue;
      keys[nk++] = kg_pack(a, r, b);
      keys[nk++] = kg_pack(b, ri, a);
    }
  }
  qsort(keys, nk, sizeof(uint64_t), cmp_u64);
  size_t u = 0;
  for (size_t i = 0; i < nk; i++)
    if (u == 0 || keys[i] != keys[u - 1]) keys[u++] = keys[i];
  for (size_t i = u; i > 1; i--) {
    size_t j = (size_t)(kg_uniform(&x) * (double)i), t;
    if (j >= i) j = i - 1;
    t = keys[i - 1], keys[i - 1] = keys[j], keys[j] = t;
  }
  if ((size_t)o->valid + o->test >= u) {
    set_err(err, errlen, "only %zu distinct triples for --valid + --test = %u", u,
            o->valid + o->test);
    rc = KG_EINVAL;
    goto out;
  }
  if (kg_names_numbered(&g->ent, "e", E) || kg_names_numbered(&g->rel, "r", R)) goto out;
  for (size_t i = 0; i < u; i++) {
    kg_triples_t *s = i < o->valid                     ? &g->valid
                      : i < (size_t)o->valid + o->test ? &g->test
                                                       : &g->train;
    const uint64_t k = keys[i];
    if (kg_triples_push(s, (uint32_t)(k >> 40), (uint32_t)(k >> 24) & 0xffff,
                        (uint32_t)k & 0xffffff))
      goto out;
  }
  rc = 0;
out:
  if (rc == KG_ENOMEM) set_err(err, errlen, "generating the graph: out of memory");
  if (rc) kg_graph_free(g);
  free(cl), free(members), free(start), free(map), free(perm), free(cdf), free(keys);
  return rc;
}

/* ---- the set of known triples ---------------------------------------------------------- */

static size_t set_hash(uint64_t k, size_t mask)
{
  k ^= k >> 31;
  k *= 0x7fb5d329728ea185ULL;
  k ^= k >> 27;
  return (size_t)k & mask;
}

int kg_set_build(kg_set_t *s, const kg_triples_t *const *lists, int nlists)
{
  size_t n = 0;
  for (int i = 0; i < nlists; i++) n += lists[i]->n;
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  *s = (kg_set_t){.slot = calloc(cap, sizeof(uint64_t)), .mask = cap - 1};
  if (!s->slot) return KG_ENOMEM;
  for (int i = 0; i < nlists; i++)
    for (size_t j = 0; j < lists[i]->n; j++) {
      const kg_triple_t *t = &lists[i]->v[j];
      const uint64_t k = kg_pack(t->h, t->r, t->t) + 1;
      size_t p = set_hash(k, s->mask);
      while (s->slot[p] && s->slot[p] != k) p = (p + 1) & s->mask;
      if (!s->slot[p]) s->slot[p] = k, s->n++;
    }
  return 0;
}

int kg_set_has(const kg_set_t *s, uint32_t h, uint32_t r, uint32_t t)
{
  const uint64_t k = kg_pack(h, r, t) + 1;
  for (size_t p = set_hash(k, s->mask);; p = (p + 1) & s->mask) {
    if (s->slot[p] == k) return 1;
    if (!s->slot[p]) return 0;
  }
}

void kg_set_free(kg_set_t *s)
{
  free(s->slot);
  *s = (kg_set_t){0};
}
