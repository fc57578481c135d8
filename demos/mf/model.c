/* model.c — see model.h. */
#include "model.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .npy files are written as little-endian arrays"
#endif

#define FORMAT 1 /* model.txt's format= */

int mf_model_alloc(mf_model_t *m)
{
  const size_t r = m->nrows ? m->nrows : 1, c = m->ncols ? m->ncols : 1;
  m->row_ids = malloc(r * sizeof(uint64_t));
  m->col_ids = malloc(c * sizeof(uint64_t));
  m->P = malloc(r * (m->rank ? m->rank : 1) * sizeof(float));
  m->Q = malloc(c * (m->rank ? m->rank : 1) * sizeof(float));
  m->row_bias = m->biases ? malloc(r * sizeof(float)) : NULL;
  m->col_bias = m->biases ? malloc(c * sizeof(float)) : NULL;
  if (!m->row_ids || !m->col_ids || !m->P || !m->Q ||
      (m->biases && (!m->row_bias || !m->col_bias))) {
    mf_model_free(m);
    return MF_ENOMEM;
  }
  return 0;
}

void mf_model_free(mf_model_t *m)
{
  free(m->row_ids), free(m->col_ids), free(m->P), free(m->Q), free(m->row_bias), free(m->col_bias);
  m->row_ids = m->col_ids = NULL;
  m->P = m->Q = m->row_bias = m->col_bias = NULL;
}

float mf_model_predict(const mf_model_t *m, uint32_t r, uint32_t c)
{
  const float *p = m->P + (size_t)r * m->rank, *q = m->Q + (size_t)c * m->rank;
  float s = m->mean;
  for (uint32_t j = 0; j < m->rank; j++) s += p[j] * q[j];
  if (m->biases) s += m->row_bias[r] + m->col_bias[c];
  return s;
}

int mf_model_maps(const mf_model_t *m, mf_idmap_t *rows, mf_idmap_t *cols)
{
  *rows = (mf_idmap_t){0}, *cols = (mf_idmap_t){0};
  uint32_t at;
  for (uint32_t i = 0; i < m->nrows; i++)
    if (mf_idmap_insert(rows, m->row_ids[i], &at) != 0) goto nomem;
  for (uint32_t i = 0; i < m->ncols; i++)
    if (mf_idmap_insert(cols, m->col_ids[i], &at) != 0) goto nomem;
  return 0;
nomem:
  mf_idmap_free(rows), mf_idmap_free(cols);
  return MF_ENOMEM;
}

/* ---- writing --------------------------------------------------------------------------- */

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

/* The files of a save are written under temporary names, each flushed to the disk, and
 * renamed only once every one of them is whole (out_finish): a save that fails (a full
 * disk) leaves the previous model as it was. */
enum { OUT_MAX = 16 };
typedef struct out {
  const char *dir;
  char tmp[4096], path[4096];
  FILE *f;
  char *err;
  size_t errlen;
  int n; /* files written, waiting for their rename */
  char tmps[OUT_MAX][4096], paths[OUT_MAX][4096];
} out_t;

static int out_open(out_t *o, const char *name)
{
  snprintf(o->path, sizeof(o->path), "%s/%s", o->dir, name);
  snprintf(o->tmp, sizeof(o->tmp), "%s/.%s.tmp", o->dir, name);
  if (!(o->f = fopen(o->tmp, "wb"))) {
    set_err(o->err, o->errlen, "%s: %s", o->tmp, strerror(errno));
    return MF_EIO;
  }
  return 0;
}

static int out_close(out_t *o)
{
  int e = cli_close_synced(o->f);
  o->f = NULL;
  if (!e && o->n == OUT_MAX) e = EOVERFLOW; /* (more files than a save writes) */
  if (e) {
    set_err(o->err, o->errlen, "%s: %s", o->tmp, strerror(e));
    remove(o->tmp);
    return MF_EIO;
  }
  snprintf(o->tmps[o->n], sizeof(o->tmps[0]), "%s", o->tmp);
  snprintf(o->paths[o->n], sizeof(o->paths[0]), "%s", o->path);
  o->n++;
  return 0;
}

/* After the last file: rc 0 renames them into place, the old model.txt taken away first
 * and the new one (the last written) put last, so that a directory with a model.txt holds
 * one whole model even if this stops half-way; else every temporary file goes. */
static int out_finish(out_t *o, int rc, int biases)
{
  if (!rc) {
    char old[4200];
    snprintf(old, sizeof(old), "%s/model.txt", o->dir);
    if (remove(old) != 0 && errno != ENOENT) {
      set_err(o->err, o->errlen, "%s: %s", old, strerror(errno));
      rc = MF_EIO;
    }
    static const char *const bias_files[] = {"row_bias.txt", "col_bias.txt", "row_bias.npy",
                                             "col_bias.npy"};
    for (int i = 0; !rc && !biases && i < 4; i++) { /* an earlier save's, with biases */
      snprintf(old, sizeof(old), "%s/%s", o->dir, bias_files[i]);
      remove(old);
    }
  }
  for (int i = 0; !rc && i < o->n; i++)
    if (rename(o->tmps[i], o->paths[i]) != 0) {
      set_err(o->err, o->errlen, "%s: %s", o->paths[i], strerror(errno));
      rc = MF_EIO;
    }
  for (int i = 0; rc && i < o->n; i++) remove(o->tmps[i]);
  return rc;
}

/* A NumPy .npy (format 1.0) of n x cols values of descr ("<f4", "<u8"); cols 0: 1-D. */
static int write_npy(out_t *o, const char *name, const char *descr, const void *v, size_t n,
                     uint32_t cols, size_t width)
{
  int rc = out_open(o, name);
  if (rc) return rc;
  char dict[128];
  int len = cols ? snprintf(dict, sizeof(dict),
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %u), }", descr,
                            n, cols)
                 : snprintf(dict, sizeof(dict),
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr, n);
  /* the header, spaces and '\n' included, pads the file's start to 64 bytes */
  size_t total = 10 + (size_t)len + 1, pad = (64 - total % 64) % 64;
  uint16_t hlen = (uint16_t)((size_t)len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, o->f);
  fwrite(&hlen, 2, 1, o->f);
  fwrite(dict, 1, (size_t)len, o->f);
  for (size_t i = 0; i < pad; i++) fputc(' ', o->f);
  fputc('\n', o->f);
  fwrite(v, width, n * (cols ? cols : 1), o->f);
  return out_close(o);
}

static int write_floats(out_t *o, const char *name, const float *v, size_t n, uint32_t cols)
{
  int rc = out_open(o, name);
  if (rc) return rc;
  const uint32_t k = cols ? cols : 1;
  for (size_t i = 0; i < n; i++) {
    for (uint32_t j = 0; j < k; j++) fprintf(o->f, j ? " %.9g" : "%.9g", v[i * k + j]);
    fputc('\n', o->f);
  }
  return out_close(o);
}

static int write_ids(out_t *o, const char *name, const uint64_t *v, size_t n)
{
  int rc = out_open(o, name);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) fprintf(o->f, "%llu\n", (unsigned long long)v[i]);
  return out_close(o);
}

int mf_model_save(const mf_model_t *m, const char *dir, char *err, size_t errlen)
{
  struct stat st;
  if (mkdir(dir, 0777) != 0 && !(errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))) {
    set_err(err, errlen, "%s: %s", dir,
            errno == EEXIST ? "exists and is not a directory" : strerror(errno));
    return MF_EIO;
  }
  out_t *o = calloc(1, sizeof(out_t)); /* (128 KB of names: not on the stack) */
  if (!o) {
    set_err(err, errlen, "%s: out of memory", dir);
    return MF_ENOMEM;
  }
  *o = (out_t){.dir = dir, .err = err, .errlen = errlen};
  int rc = write_ids(o, "row_ids.txt", m->row_ids, m->nrows);
  if (!rc) rc = write_ids(o, "col_ids.txt", m->col_ids, m->ncols);
  if (!rc) rc = write_floats(o, "P.txt", m->P, m->nrows, m->rank);
  if (!rc) rc = write_floats(o, "Q.txt", m->Q, m->ncols, m->rank);
  if (!rc) rc = write_npy(o, "row_ids.npy", "<u8", m->row_ids, m->nrows, 0, 8);
  if (!rc) rc = write_npy(o, "col_ids.npy", "<u8", m->col_ids, m->ncols, 0, 8);
  if (!rc) rc = write_npy(o, "P.npy", "<f4", m->P, m->nrows, m->rank, 4);
  if (!rc) rc = write_npy(o, "Q.npy", "<f4", m->Q, m->ncols, m->rank, 4);
  if (!rc && m->biases) {
    rc = write_floats(o, "row_bias.txt", m->row_bias, m->nrows, 0);
    if (!rc) rc = write_floats(o, "col_bias.txt", m->col_bias, m->ncols, 0);
    if (!rc) rc = write_npy(o, "row_bias.npy", "<f4", m->row_bias, m->nrows, 0, 4);
    if (!rc) rc = write_npy(o, "col_bias.npy", "<f4", m->col_bias, m->ncols, 0, 4);
  }
  /* model.txt last: a directory with it is whole */
  if (!rc && !(rc = out_open(o, "model.txt"))) {
    fprintf(o->f,
            "# augur-mf model: prediction(row, col) = mean + P[row] . Q[col]%s\n"
            "# rows and columns in the order of row_ids.txt and col_ids.txt (docs/mf.md)\n"
            "format=%d\nrank=%u\nbiases=%d\nmean=%.9g\nrows=%u\ncols=%u\n",
            m->biases ? " + row_bias[row] + col_bias[col]" : "", FORMAT, m->rank, m->biases,
            m->mean, m->nrows, m->ncols);
    rc = out_close(o);
  }
  rc = out_finish(o, rc, m->biases);
  free(o);
  return rc;
}

/* ---- reading --------------------------------------------------------------------------- */

/* A .npy of n x cols (cols 0: 1-D) values of descr into v. */
static int read_npy(const char *dir, const char *name, const char *descr, void *v, size_t n,
                    uint32_t cols, size_t width, char *err, size_t errlen)
{
  char path[4096], hdr[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: %s", path, strerror(errno));
    return MF_EIO;
  }
  unsigned char pre[10];
  uint16_t hlen = 0;
  int rc = MF_EPARSE;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01\x00", 8) != 0) {
    set_err(err, errlen, "%s: expected a NumPy file of format 1.0", path);
    goto out;
  }
  memcpy(&hlen, pre + 8, 2);
  if (hlen >= sizeof(hdr) || fread(hdr, 1, hlen, f) != hlen) {
    set_err(err, errlen, "%s: a NumPy header cut short", path);
    goto out;
  }
  hdr[hlen] = '\0';
  char want_descr[32], want_shape[64];
  snprintf(want_descr, sizeof(want_descr), "'descr': '%s'", descr);
  if (cols)
    snprintf(want_shape, sizeof(want_shape), "'shape': (%zu, %u)", n, cols);
  else
    snprintf(want_shape, sizeof(want_shape), "'shape': (%zu,)", n);
  if (!strstr(hdr, want_descr) || !strstr(hdr, want_shape) ||
      !strstr(hdr, "'fortran_order': False")) {
    set_err(err, errlen, "%s: expected %s, %s (model.txt), got %s", path, want_descr, want_shape,
            hdr);
    goto out;
  }
  size_t count = n * (cols ? cols : 1);
  if (fread(v, width, count, f) != count) {
    set_err(err, errlen, "%s: expected %zu values, the file ends before", path, count);
    goto out;
  }
  rc = 0;
out:
  fclose(f);
  return rc;
}

int mf_model_load(const char *dir, mf_model_t *m, char *err, size_t errlen)
{
  memset(m, 0, sizeof(*m));
  char path[4096], line[256];
  snprintf(path, sizeof(path), "%s/model.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    set_err(err, errlen, "%s: %s (is %s a model that augur-mf --save wrote?)", path,
            strerror(errno), dir);
    return MF_EIO;
  }
  long long format = -1, rank = -1, biases = -1, rows = -1, cols = -1;
  double mean = NAN;
  int lineno = 0, rc = 0;
  while (!rc && fgets(line, sizeof(line), f)) {
    lineno++;
    if (line[0] == '#' || line[0] == '\n') continue;
    char key[32];
    double v;
    if (sscanf(line, "%31[a-z_]=%lf", key, &v) != 2) {
      set_err(err, errlen, "%s:%d: expected key=value, got '%.60s'", path, lineno, line);
      rc = MF_EPARSE;
    } else if (!strcmp(key, "format"))
      format = (long long)v;
    else if (!strcmp(key, "rank"))
      rank = (long long)v;
    else if (!strcmp(key, "biases"))
      biases = (long long)v;
    else if (!strcmp(key, "mean"))
      mean = v;
    else if (!strcmp(key, "rows"))
      rows = (long long)v;
    else if (!strcmp(key, "cols"))
      cols = (long long)v;
  }
  fclose(f);
  if (rc) return rc;
  if (format != FORMAT || rank < 1 || rank > 1024 || (biases != 0 && biases != 1) || rows < 0 ||
      rows > 0xffffffffLL || cols < 0 || cols > 0xffffffffLL || mean != mean) {
    set_err(err, errlen,
            "%s: expected format=%d and rank (1..1024), biases (0 or 1), mean, rows, cols", path,
            FORMAT);
    return MF_EPARSE;
  }
  *m = (mf_model_t){.rank = (uint32_t)rank,
                    .nrows = (uint32_t)rows,
                    .ncols = (uint32_t)cols,
                    .biases = (int)biases,
                    .mean = (float)mean};
  if (mf_model_alloc(m) != 0) {
    set_err(err, errlen, "%s: out of memory for the model", dir);
    return MF_ENOMEM;
  }
  rc = read_npy(dir, "row_ids.npy", "<u8", m->row_ids, m->nrows, 0, 8, err, errlen);
  if (!rc) rc = read_npy(dir, "col_ids.npy", "<u8", m->col_ids, m->ncols, 0, 8, err, errlen);
  if (!rc) rc = read_npy(dir, "P.npy", "<f4", m->P, m->nrows, m->rank, 4, err, errlen);
  if (!rc) rc = read_npy(dir, "Q.npy", "<f4", m->Q, m->ncols, m->rank, 4, err, errlen);
  if (!rc && m->biases)
    rc = read_npy(dir, "row_bias.npy", "<f4", m->row_bias, m->nrows, 0, 4, err, errlen);
  if (!rc && m->biases)
    rc = read_npy(dir, "col_bias.npy", "<f4", m->col_bias, m->ncols, 0, 4, err, errlen);
  if (rc) mf_model_free(m);
  return rc;
}
