/* report.c — `augur report`: runs' output and traces into one HTML page (report.h).
 *
 * Input. A run is a text file of what a program printed (directly, or through `augur
 * run`, whose "[R] " prefixes are understood: rank 0's lines are the cluster's). Its
 * `epoch=N ...` or `iteration=N ...` lines are the points of its curves; a `model ...`
 * line names its mode and node count. A file whose first byte that is not white space is
 * '{' or '[' is a trace (docs/tracing.md); the files of one cluster (PATH.0, PATH.1, ...)
 * form one timeline.
 *
 * Output. Plain HTML with inline SVG drawn here (no script, no style sheet or font from
 * elsewhere), so that the page opens offline and in any browser. Every chart is an
 * <svg class="chart"> with one <polyline class="series"> per run, the bytes an <svg
 * class="bytes"> of <rect class="bar">, each timeline an <svg class="timeline"> of <rect
 * class="own"> (owner) and <rect class="replica"> bands; the page's test looks for them.
 */
#include "tools/report.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tracejson.h"

#define PROG     "augur report"
#define MAX_RUNS 64
#define MAX_TOP  64

/* --- runs ------------------------------------------------------------------------------ */

enum {
  M_TRAIN_RMSE,
  M_TEST_RMSE,
  M_LLH,
  M_SECONDS,
  M_LOCAL,
  M_BYTES, /* bytes_sent */
  M_FETCH, /* then by purpose, in au_node_stats_t's order */
  M_PUSH,
  M_MOVE,
  M_REPLICA,
  M_CONTROL,
  NMETRICS
};

static const char *const metric_key[NMETRICS] = {
    "train_rmse",  "test_rmse",  "llh_per_token", "seconds",       "local",        "bytes_sent",
    "bytes_fetch", "bytes_push", "bytes_move",    "bytes_replica", "bytes_control"};

typedef struct point {
  double x;
  double v[NMETRICS];
  unsigned have; /* bit m: v[m] was printed */
} point_t;

typedef struct run {
  const char *file;
  char label[160];
  char mode[32];
  char xname[16]; /* "epoch" or "iteration" */
  long nodes;
  point_t *pts; /* in x order */
  size_t n, cap;
} run_t;

/* The value of a number, all of it, or -1. */
static int parse_num(const char *s, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno == ERANGE || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

/* Adds (or, for an x seen before — a restarted run's redone epoch — replaces) a point. */
static int run_put(run_t *r, const point_t *p)
{
  size_t i = r->n;
  while (i > 0 && r->pts[i - 1].x > p->x) i--;
  if (i > 0 && r->pts[i - 1].x == p->x) {
    r->pts[i - 1] = *p;
    return 0;
  }
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    point_t *bigger = realloc(r->pts, cap * sizeof(*bigger));
    if (!bigger) return -1;
    r->pts = bigger, r->cap = cap;
  }
  memmove(&r->pts[i + 1], &r->pts[i], (r->n - i) * sizeof(*r->pts));
  r->pts[i] = *p;
  r->n++;
  return 0;
}

/* Reads one run's output. 0, 1 (cannot read: said) or 2 (malformed: said). */
static int read_run(run_t *r, FILE *f)
{
  char *line = NULL;
  size_t cap = 0;
  long lineno = 0;
  int rc = 0;
  while (rc == 0 && getline(&line, &cap, f) >= 0) {
    lineno++;
    line[strcspn(line, "\r\n")] = '\0';
    char *s = line;
    if (*s == '[') { /* augur run's "[R] ": rank 0 speaks for the cluster */
      char *end;
      long rank = strtol(s + 1, &end, 10);
      if (end == s + 1 || *end != ']') continue;
      if (rank != 0) continue;
      s = end + 1 + (end[1] == ' ');
    }
    if (!strncmp(s, "model ", 6)) {
      const char *m = strstr(s, " mode="), *n = strstr(s, " nodes=");
      if (m) snprintf(r->mode, sizeof(r->mode), "%.*s", (int)strcspn(m + 6, " "), m + 6);
      if (n) r->nodes = strtol(n + 7, NULL, 10);
      continue;
    }
    int is_epoch = !strncmp(s, "epoch=", 6), is_iter = !strncmp(s, "iteration=", 10);
    if (!is_epoch && !is_iter) continue; /* other output: topics, data, checkpoints */
    point_t p = {0};
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t", &save); tok && rc == 0;
         tok = strtok_r(NULL, " \t", &save)) {
      char *eq = strchr(tok, '=');
      if (!eq) continue;
      *eq = '\0';
      const char *key = tok, *val = eq + 1;
      int m = -1;
      for (int k = 0; k < NMETRICS && m < 0; k++)
        if (!strcmp(key, metric_key[k])) m = k;
      int x = tok == s;
      if (!x && m < 0) continue; /* a key the report does not draw */
      double v;
      if (parse_num(val, &v) != 0 || (x && v < 0)) {
        fprintf(stderr, PROG ": %s:%ld: %s=%s is not a %s\n", r->file, lineno, key, val,
                x ? "count" : "number");
        rc = 2;
      } else if (x) {
        p.x = v;
      } else {
        p.v[m] = v, p.have |= 1u << m;
      }
    }
    if (rc) break;
    snprintf(r->xname, sizeof(r->xname), "%s", is_epoch ? "epoch" : "iteration");
    if (run_put(r, &p) != 0) {
      fprintf(stderr, PROG ": out of memory\n");
      rc = 1;
    }
  }
  if (rc == 0 && ferror(f)) {
    fprintf(stderr, PROG ": cannot read %s: %s\n", r->file, strerror(errno));
    rc = 1;
  }
  free(line);
  if (rc == 0 && r->n == 0) {
    fprintf(stderr,
            PROG ": %s: no epoch=N or iteration=N lines (is it a program's output, or a trace "
                 "that does not start with '{'?)\n",
            r->file);
    rc = 2;
  }
  return rc;
}

/* --- traces ---------------------------------------------------------------------------- */

enum { E_RSTART, E_REND, E_RCREATE, E_RDROP };

typedef struct pev {
  uint64_t key; /* table << 32 | actor */
  int64_t ts;
  int kind;
  int node;  /* the node whose file it is in */
  int other; /* relocation: to; replica: owner */
} pev_t;

typedef struct tspan {
  int64_t ts, dur;
  uint64_t n;
} tspan_t;

typedef struct timeline {
  char stem[512];
  int nfiles, nodes;
  int64_t t0, t1;
  pev_t *ev;
  size_t n, cap;
  tspan_t *spans; /* rank 0's epoch or iteration spans */
  size_t nspans, spans_cap;
  char span_name[16];
} timeline_t;

typedef struct tsink {
  timeline_t *tl;
  int oom;
} tsink_t;

static int trace_event(reader_t *r, void *ctx, const event_t *e, span_t raw)
{
  (void)r, (void)raw;
  tsink_t *s = ctx;
  timeline_t *tl = s->tl;
  if (strcmp(e->cat, "augur") || !e->has_ts) return 0;
  const int node =
      e->has_pid && e->pid >= 1 && e->pid <= 4096 ? (int)e->pid - 1 : 0; /* pid: rank + 1 */
  if (node + 1 > tl->nodes) tl->nodes = node + 1;
  const int64_t dur = e->has_dur && e->dur > 0 ? e->dur : 0;
  const int64_t end = e->ts > INT64_MAX - dur ? INT64_MAX : e->ts + dur;
  if (e->ts < tl->t0) tl->t0 = e->ts;
  if (end > tl->t1) tl->t1 = end;
  if ((!strcmp(e->name, "epoch") || !strcmp(e->name, "iteration")) && e->has_dur) {
    if (node != 0) return 0;
    uint64_t n = 0;
    tj_arg(e, "n", &n);
    if (tl->nspans == tl->spans_cap) {
      size_t cap = tl->spans_cap ? 2 * tl->spans_cap : 64;
      tspan_t *bigger = realloc(tl->spans, cap * sizeof(*bigger));
      if (!bigger) return s->oom = 1, -1;
      tl->spans = bigger, tl->spans_cap = cap;
    }
    tl->spans[tl->nspans++] = (tspan_t){e->ts, e->dur, n};
    snprintf(tl->span_name, sizeof(tl->span_name), "%s", e->name[0] == 'e' ? "epoch" : "iteration");
    return 0;
  }
  int kind = !strcmp(e->name, "relocation_start") ? E_RSTART
             : !strcmp(e->name, "relocation_end") ? E_REND
             : !strcmp(e->name, "replica_create") ? E_RCREATE
             : !strcmp(e->name, "replica_drop")   ? E_RDROP
                                                  : -1;
  uint64_t table, actor, other = 0;
  if (kind < 0 || !tj_arg(e, "table", &table) || !tj_arg(e, "actor", &actor)) return 0;
  if (table > UINT32_MAX || actor > UINT32_MAX) return 0;
  if (kind == E_RSTART || kind == E_REND)
    tj_arg(e, "to", &other);
  else
    tj_arg(e, "owner", &other);
  if (tl->n == tl->cap) {
    size_t cap = tl->cap ? 2 * tl->cap : 1024;
    pev_t *bigger = realloc(tl->ev, cap * sizeof(*bigger));
    if (!bigger) return s->oom = 1, -1;
    tl->ev = bigger, tl->cap = cap;
  }
  tl->ev[tl->n++] =
      (pev_t){(table << 32) | actor, e->ts, kind, node, other < 4096 ? (int)other : -1};
  return 0;
}

/* Reads one trace file into tl. 0, 1 or 2 as read_run. */
static int read_trace(timeline_t *tl, const char *path, char *text, size_t len)
{
  reader_t r = {.s = text, .n = len, .file = path};
  info_t info;
  tsink_t s = {.tl = tl};
  sink_t sink = {trace_event, &s};
  if (tj_parse(&r, &sink, &info) != 0) {
    if (s.oom) {
      fprintf(stderr, PROG ": out of memory reading %s\n", path);
      return 1;
    }
    fprintf(stderr, PROG ": %s\n", r.err);
    return 2;
  }
  if (info.rank >= 0 && info.rank < 4096 && info.rank + 1 > tl->nodes)
    tl->nodes = (int)info.rank + 1;
  tl->nfiles++;
  return 0;
}

static int cmp_pev(const void *a, const void *b)
{
  const pev_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->kind - y->kind;
}

/* --- drawing --------------------------------------------------------------------------- */

static const char *const palette[8] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static void esc(FILE *o, const char *s)
{
  for (; *s; s++) switch (*s) {
    case '&':
      fputs("&amp;", o);
      break;
    case '<':
      fputs("&lt;", o);
      break;
    case '>':
      fputs("&gt;", o);
      break;
    case '"':
      fputs("&quot;", o);
      break;
    case '\'':
      fputs("&#39;", o);
      break;
    default:
      fputc(*s, o);
    }
}

/* A round step for about n ticks over [lo, hi]. */
static double nice_step(double lo, double hi, int n)
{
  double raw = (hi - lo) / n, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void num(char *buf, size_t len, double v)
{
  double a = fabs(v);
  if (a >= 1e9)
    snprintf(buf, len, "%.3gG", v / 1e9);
  else if (a >= 1e6)
    snprintf(buf, len, "%.3gM", v / 1e6);
  else if (a >= 1e4)
    snprintf(buf, len, "%.3gk", v / 1e3);
  else
    snprintf(buf, len, "%.4g", v);
}

enum { CW = 900, CH = 300, PL = 64, PR = 236, PT = 30, PB = 44 }; /* chart, margins, legend */

/* A line chart of metric m over the runs that printed it; nothing if none did. */
static void chart(FILE *o, const run_t *runs, int nruns, int m, const char *title)
{
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  int any = 0;
  for (int r = 0; r < nruns; r++)
    for (size_t i = 0; i < runs[r].n; i++) {
      const point_t *p = &runs[r].pts[i];
      if (!(p->have >> m & 1)) continue;
      any = 1;
      x0 = fmin(x0, p->x), x1 = fmax(x1, p->x), y0 = fmin(y0, p->v[m]), y1 = fmax(y1, p->v[m]);
    }
  if (!any) return;
  /* a range too narrow for the doubles to tell ticks apart is drawn as a flat one */
  if (x1 - x0 <= 1e-9 * fmax(fabs(x0), fabs(x1)) || x1 - x0 < 1e-300) x0 -= 1, x1 += 1;
  if (y1 - y0 <= 1e-9 * fmax(fabs(y0), fabs(y1)) || y1 - y0 < 1e-300)
    y0 -= fabs(y0) * 0.05 + 1e-3, y1 += fabs(y1) * 0.05 + 1e-3;
  const double ys = nice_step(y0, y1, 5), xs = fmax(1, nice_step(x0, x1, 8));
  y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
  /* ticks by count, not by adding steps (which a large value can swallow): at most 12 */
  const int nyt = (int)fmin(12, floor((y1 - y0) / ys + 0.5));
  const double xt0 = ceil(x0 / xs) * xs;
  const int nxt = (int)fmin(12, floor((x1 - xt0) / xs + 1e-6));
  const double pw = CW - PL - PR, ph = CH - PT - PB;
#define SX(x) (PL + ((x)-x0) / (x1 - x0) * pw)
#define SY(y) (PT + (1 - ((y)-y0) / (y1 - y0)) * ph)
  fprintf(o, "<h3>");
  esc(o, title);
  fprintf(o,
          "</h3>\n<svg class=\"chart\" data-metric=\"%s\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" role=\"img\">\n",
          metric_key[m], CW, CH, CW, CH);
  fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" fill=\"#fff\" stroke=\"#999\"/>\n",
          PL, PT, pw, ph);
  char b[32];
  for (int i = 0; i <= nyt; i++) {
    const double y = y0 + i * ys;
    num(b, sizeof(b), fabs(y) < ys / 1e6 ? 0 : y);
    fprintf(o,
            "<line x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%s</text>\n",
            PL, PL + pw, SY(y), SY(y), PL - 4, SY(y) + 4, b);
  }
  for (int i = 0; i <= nxt; i++) {
    const double x = xt0 + i * xs;
    num(b, sizeof(b), x);
    fprintf(o, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\" font-size=\"11\">%s</text>\n",
            SX(x), PT + ph + 15, b);
  }
  fprintf(o, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n",
          PL + pw / 2, CH - 8, runs[0].xname);
  for (int r = 0; r < nruns; r++) {
    const char *c = palette[r % 8];
    fprintf(o,
            "<polyline class=\"series\" data-run=\"%d\" fill=\"none\" stroke=\"%s\" "
            "stroke-width=\"2.5\" points=\"",
            r, c);
    for (size_t i = 0; i < runs[r].n; i++) {
      const point_t *p = &runs[r].pts[i];
      if (p->have >> m & 1) fprintf(o, "%.1f,%.1f ", SX(p->x), SY(p->v[m]));
    }
    fprintf(o, "\"/>\n");
    for (size_t i = 0; i < runs[r].n; i++) {
      const point_t *p = &runs[r].pts[i];
      if (!(p->have >> m & 1)) continue;
      fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", SX(p->x),
              SY(p->v[m]), c);
      esc(o, runs[r].label);
      fprintf(o, " %s %g: %s=%g</title></circle>\n", runs[r].xname, p->x, metric_key[m], p->v[m]);
    }
  }
  /* the legend, right of the plot */
  for (int r = 0; r < nruns; r++) {
    const double ly = PT + 6 + 16 * r;
    fprintf(o,
            "<rect x=\"%g\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>"
            "<text x=\"%g\" y=\"%.1f\" font-size=\"11\">",
            PL + pw + 10, ly, palette[r % 8], PL + pw + 28, ly + 5);
    esc(o, runs[r].label);
    fprintf(o, "</text>\n");
  }
  fprintf(o, "</svg>\n");
#undef SX
#undef SY
}

static void bytes_text(char *buf, size_t len, double v)
{
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* Bytes sent over each run, by purpose: one stacked bar per run. */
static void bytes_chart(FILE *o, const run_t *runs, int nruns)
{
  static const char *const kind[] = {"fetch", "push", "move", "replica", "control", "other"};
  static const char *const kcolor[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                       "#9467bd", "#8c564b", "#bbbbbb"};
  double tot[MAX_RUNS][6] = {{0}}, most = 0;
  for (int r = 0; r < nruns; r++) {
    double all = 0, parts = 0;
    for (size_t i = 0; i < runs[r].n; i++) {
      const point_t *p = &runs[r].pts[i];
      if (p->have >> M_BYTES & 1) all += p->v[M_BYTES];
      for (int k = 0; k < 5; k++)
        if (p->have >> (M_FETCH + k) & 1)
          tot[r][k] += p->v[M_FETCH + k], parts += p->v[M_FETCH + k];
    }
    tot[r][5] = all > parts ? all - parts : 0;
    most = fmax(most, fmax(all, parts));
  }
  const int rowh = 26, top = 28, left = 170, width = CW - left - 100;
  const int h = top + rowh * nruns + 10;
  fprintf(o,
          "<svg class=\"bytes\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "role=\"img\">\n",
          CW, h, CW, h);
  for (int k = 0; k < 6; k++)
    fprintf(o,
            "<rect x=\"%d\" y=\"6\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%d\" y=\"16\" font-size=\"11\">%s</text>\n",
            left + 90 * k, kcolor[k], left + 90 * k + 16, kind[k]);
  char b[32];
  for (int r = 0; r < nruns; r++) {
    const int y = top + rowh * r;
    fprintf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">", left - 6, y + 15);
    esc(o, runs[r].label);
    fprintf(o, "</text>\n");
    double x = left, sum = 0;
    for (int k = 0; k < 6; k++) {
      sum += tot[r][k];
      if (tot[r][k] <= 0 || most <= 0) continue;
      const double w = tot[r][k] / most * width;
      bytes_text(b, sizeof(b), tot[r][k]);
      fprintf(o,
              "<rect class=\"bar\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"18\" "
              "fill=\"%s\"><title>%s: %s</title></rect>\n",
              x, y + 2, w < 1 ? 1 : w, kcolor[k], kind[k], b);
      x += w;
    }
    bytes_text(b, sizeof(b), sum);
    fprintf(o, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>\n", x + 6, y + 15,
            sum > 0 ? b : "none (one node, or not printed)");
  }
  fprintf(o, "</svg>\n");
}

typedef struct top {
  uint64_t key;
  size_t first, n; /* its events: tl->ev[first .. first + n) */
  int moves, replicas;
} top_t;

static int cmp_top(const void *a, const void *b)
{
  const top_t *x = a, *y = b;
  if (x->moves != y->moves) return y->moves - x->moves;
  if (x->replicas != y->replicas) return y->replicas - x->replicas;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* The most-moved actors of one cluster's trace: a row each, who owned it when (the bar's
 * colour is the node), replicas as thin bands below it in the holder's colour, and the
 * epochs (iterations) behind, from rank 0's spans. */
static int timeline_svg(FILE *o, timeline_t *tl, int ntop)
{
  qsort(tl->ev, tl->n, sizeof(*tl->ev), cmp_pev);
  size_t nact = 0;
  for (size_t i = 0; i < tl->n; i++)
    if (i == 0 || tl->ev[i].key != tl->ev[i - 1].key) nact++;
  top_t *t = calloc(nact ? nact : 1, sizeof(*t));
  if (!t) return -1;
  size_t a = 0;
  for (size_t i = 0; i < tl->n; i++) {
    if (i > 0 && tl->ev[i].key != tl->ev[i - 1].key) a++;
    if (t[a].n == 0) t[a].key = tl->ev[i].key, t[a].first = i;
    t[a].n++;
    t[a].moves += tl->ev[i].kind == E_REND;
    t[a].replicas += tl->ev[i].kind == E_RCREATE;
  }
  qsort(t, nact, sizeof(*t), cmp_top);
  int rows = (int)(nact < (size_t)ntop ? nact : (size_t)ntop);
  const int left = 90, rowh = 24, top = 34, w = CW - left - 10;
  const int h = top + rowh * (rows ? rows : 1) + 30;
  const double t0 = (double)tl->t0, span = tl->t1 > tl->t0 ? (double)tl->t1 - (double)tl->t0 : 1;
#define TX(ts) (left + ((double)(ts)-t0) / span * w)
  fprintf(o,
          "<svg class=\"timeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "role=\"img\">\n",
          CW, h, CW, h);
  /* epochs behind, every other one shaded, numbered above */
  for (size_t i = 0; i < tl->nspans; i++) {
    const tspan_t *s = &tl->spans[i];
    fprintf(o,
            "<rect class=\"span\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
            "fill=\"%s\"><title>%s %llu: %.3f s</title></rect>"
            "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#666\">%llu</text>\n",
            TX(s->ts), top - 4, TX((double)s->ts + (double)s->dur) - TX(s->ts), rowh * rows + 8,
            i % 2 ? "#f4f4f4" : "#e8eef6", tl->span_name, (unsigned long long)s->n,
            (double)s->dur / 1e9, TX(s->ts) + 2, top - 8, (unsigned long long)s->n);
  }
  if (tl->nspans)
    fprintf(o, "<text x=\"4\" y=\"%d\" font-size=\"10\" fill=\"#666\">%s</text>\n", top - 8,
            tl->span_name);
  for (int r = 0; r < rows; r++) {
    const top_t *ta = &t[r];
    const pev_t *ev = &tl->ev[ta->first];
    const int y = top + rowh * r;
    fprintf(o, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%u:%u (%d)</text>\n",
            left - 6, y + 12, (unsigned)(ta->key >> 32), (unsigned)ta->key, ta->moves);
    /* the owner over time: the first event tells who had it at the start */
    int owner = -1;
    for (size_t i = 0; i < ta->n && owner < 0; i++)
      if (ev[i].kind == E_RSTART)
        owner = ev[i].node;
      else if (ev[i].kind == E_RCREATE)
        owner = ev[i].other;
      else if (ev[i].kind == E_REND)
        break; /* its start is in no file: unknown until then */
    int64_t from = tl->t0;
    for (size_t i = 0; i <= ta->n; i++) {
      const int last = i == ta->n;
      if (!last && ev[i].kind != E_RSTART && ev[i].kind != E_REND) continue;
      const int64_t until = last ? tl->t1 : ev[i].ts;
      if (until > from && owner >= 0)
        fprintf(o,
                "<rect class=\"own\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"12\" "
                "fill=\"%s\"><title>node %d</title></rect>\n",
                TX(from), y + 2, fmax(TX(until) - TX(from), 0.5), palette[owner % 8], owner);
      if (last) break;
      if (ev[i].kind == E_RSTART) { /* in transit until its end */
        owner = -1;
        from = ev[i].ts;
      } else {
        owner = ev[i].node;
        from = ev[i].ts;
      }
    }
    /* replicas: create to drop on one node (or to the end) */
    for (size_t i = 0; i < ta->n; i++) {
      if (ev[i].kind != E_RCREATE) continue;
      int64_t until = tl->t1;
      for (size_t j = i + 1; j < ta->n; j++)
        if (ev[j].node == ev[i].node && (ev[j].kind == E_RDROP || ev[j].kind == E_RCREATE)) {
          until = ev[j].ts;
          break;
        }
      const int nodes = tl->nodes > 0 ? tl->nodes : 1;
      const double bh = 6.0 / nodes;
      fprintf(o,
              "<rect class=\"replica\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
              "fill=\"%s\"><title>replica on node %d</title></rect>\n",
              TX(ev[i].ts), y + 15 + bh * (ev[i].node % nodes), fmax(TX(until) - TX(ev[i].ts), 0.5),
              bh, palette[ev[i].node % 8], ev[i].node);
    }
  }
  if (rows == 0)
    fprintf(o,
            "<text x=\"%d\" y=\"%d\" font-size=\"12\">no relocations or replicas in the "
            "trace</text>\n",
            left, top + 14);
  /* time axis and the nodes' colours */
  const int ay = top + rowh * (rows ? rows : 1) + 14;
  for (int k = 0; k <= 5; k++)
    fprintf(o, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%.3g s</text>\n",
            left + w * k / 5.0, ay, span / 1e9 * k / 5);
  for (int n = 0; n < tl->nodes && n < 8; n++)
    fprintf(o,
            "<rect x=\"%d\" y=\"4\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%d\" y=\"14\" font-size=\"11\">node %d</text>\n",
            left + 70 * n, palette[n], left + 70 * n + 16, n);
  fprintf(o, "</svg>\n");
#undef TX
  free(t);
  return 0;
}

/* --- the command ----------------------------------------------------------------------- */

void report_help(FILE *out)
{
  fprintf(out,
          "usage: augur report [-o OUT] [--title TEXT] [--top N] [--label NAME] FILE...\n"
          "\n"
          "Turns runs' output into one self-contained HTML page (inline SVG, nothing\n"
          "loaded from the network). A FILE is either what a program printed (augur-mf,\n"
          "augur-lda, also through augur run: rank 0's lines count) or a trace file\n"
          "(--trace; its nodes' files PATH.0, PATH.1, ... form one timeline). The page has:\n"
          "  learning curves (test_rmse, train_rmse, llh_per_token per epoch or iteration,\n"
          "  one line per run), seconds per epoch, the local-access share, the bytes sent\n"
          "  by purpose (fetch, push, move, replica, control), and for each trace the\n"
          "  ownership timeline of its most-moved parameter actors (owner by colour,\n"
          "  replicas as bands, epochs behind).\n"
          "\n"
          "options:\n"
          "  -o OUT        the page (default report.html)\n"
          "  --title TEXT  its title (default: augur report)\n"
          "  --top N       actors per timeline (1..%d, default 12)\n"
          "  --label NAME  the name of the next run FILE (default: its file name and mode)\n"
          "  -h, --help    this text\n"
          "\n"
          "Exit status: 0; 1 when a file cannot be read or written; 2 for bad usage or a\n"
          "malformed file (FILE:LINE, or FILE: byte N for a trace). See docs/report.md.\n",
          MAX_TOP);
}

static const char *base_name(const char *p)
{
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* PATH.N -> PATH (the nodes of one cluster's trace) */
static void stem_of(const char *path, char *out, size_t len)
{
  snprintf(out, len, "%s", path);
  char *dot = strrchr(out, '.');
  if (!dot || !dot[1]) return;
  for (const char *c = dot + 1; *c; c++)
    if (*c < '0' || *c > '9') return;
  *dot = '\0';
}

static int usage_error(const char *what)
{
  fprintf(stderr, PROG ": %s (see 'augur report --help')\n", what);
  return 2;
}

int report_main(int argc, char **argv)
{
  const char *out = "report.html", *title = "augur report", *label = NULL;
  long ntop = 12;
  static run_t runs[MAX_RUNS];
  static timeline_t tls[MAX_RUNS];
  int nruns = 0, ntl = 0, rc = 0, nfiles = 0;
  for (int i = 1; i < argc && rc == 0; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      report_help(stdout);
      return 0;
    }
    if (!strcmp(a, "-o") || !strcmp(a, "--title") || !strcmp(a, "--top") || !strcmp(a, "--label")) {
      if (i + 1 >= argc) {
        char m[64];
        snprintf(m, sizeof(m), "%s needs a value", a);
        return usage_error(m);
      }
      const char *v = argv[++i];
      if (!strcmp(a, "-o")) {
        out = v;
      } else if (!strcmp(a, "--title")) {
        title = v;
      } else if (!strcmp(a, "--label")) {
        label = v;
      } else {
        char *end;
        ntop = strtol(v, &end, 10);
        if (!*v || *end || ntop < 1 || ntop > MAX_TOP) {
          fprintf(stderr, PROG ": --top %s: expected a count from 1 to %d\n", v, MAX_TOP);
          return 2;
        }
      }
      continue;
    }
    if (a[0] == '-' && a[1]) {
      char m[300];
      snprintf(m, sizeof(m), "unknown option '%.200s'", a);
      return usage_error(m);
    }
    nfiles++;
    size_t len = 0;
    char *text = tj_slurp(PROG, a, &len);
    if (!text) return 1;
    size_t k = 0;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r'))
      k++;
    /* a trace: an object, or a bare array of events ("[0] ..." is augur run's prefix) */
    size_t j = k + 1;
    while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
      j++;
    if (k < len &&
        (text[k] == '{' || (text[k] == '[' && (j == len || text[j] == '{' || text[j] == ']')))) {
      char stem[512];
      stem_of(a, stem, sizeof(stem));
      int t = 0;
      while (t < ntl && strcmp(tls[t].stem, stem)) t++;
      if (t == ntl) {
        if (ntl == MAX_RUNS) {
          free(text);
          return usage_error("too many traces (at most 64 clusters)");
        }
        snprintf(tls[ntl].stem, sizeof(tls[ntl].stem), "%s", stem);
        tls[ntl].t0 = INT64_MAX, tls[ntl].t1 = INT64_MIN;
        ntl++;
      }
      rc = read_trace(&tls[t], a, text, len);
    } else {
      if (nruns == MAX_RUNS) {
        free(text);
        return usage_error("too many runs (at most 64)");
      }
      run_t *r = &runs[nruns++];
      r->file = a;
      FILE *f = len ? fmemopen(text, len, "r") : NULL;
      if (!len) {
        fprintf(stderr, PROG ": %s: empty (no epoch=N or iteration=N lines)\n", a);
        rc = 2;
      } else if (!f) {
        fprintf(stderr, PROG ": %s: %s\n", a, strerror(errno));
        rc = 1;
      } else {
        rc = read_run(r, f);
        fclose(f);
      }
      if (label)
        snprintf(r->label, sizeof(r->label), "%s", label);
      else if (r->mode[0]) {
        char mode[sizeof(r->mode)];
        memcpy(mode, r->mode, sizeof(mode));
        snprintf(r->label, sizeof(r->label), "%.120s (%s)", base_name(a), mode);
      } else
        snprintf(r->label, sizeof(r->label), "%.150s", base_name(a));
      label = NULL;
    }
    free(text);
  }
  if (rc == 0 && nfiles == 0) rc = usage_error("expected FILE...");
  FILE *o = NULL;
  if (rc == 0 && !(o = fopen(out, "w"))) {
    fprintf(stderr, PROG ": cannot write %s: %s\n", out, strerror(errno));
    rc = 1;
  }
  if (rc == 0) {
    fprintf(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    esc(o, title);
    fprintf(o, "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
               "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;"
               "border-bottom:1px solid #ddd}svg{display:block;margin:4px 0 18px}"
               "h3{margin:14px 0 2px;font-size:15px}</style>\n</head><body>\n<h1>");
    esc(o, title);
    fprintf(o, "</h1>\n");
    if (nruns) {
      fprintf(o, "<table class=\"runs\"><tr><th></th><th>run</th><th>file</th><th>mode</th>"
                 "<th>nodes</th><th>points</th></tr>\n");
      for (int r = 0; r < nruns; r++) {
        fprintf(o, "<tr><td style=\"background:%s;width:12px\"></td><td>", palette[r % 8]);
        esc(o, runs[r].label);
        fprintf(o, "</td><td>");
        esc(o, runs[r].file);
        fprintf(o, "</td><td>");
        esc(o, runs[r].mode[0] ? runs[r].mode : "-");
        fprintf(o, "</td><td>%ld</td><td>%zu %ss</td></tr>\n", runs[r].nodes ? runs[r].nodes : 1,
                runs[r].n, runs[r].xname);
      }
      fprintf(o, "</table>\n<h2>Learning curves</h2>\n");
      chart(o, runs, nruns, M_TEST_RMSE, "test RMSE");
      chart(o, runs, nruns, M_TRAIN_RMSE, "training RMSE");
      chart(o, runs, nruns, M_LLH, "log-likelihood per token");
      fprintf(o, "<h2>Speed and locality</h2>\n");
      chart(o, runs, nruns, M_SECONDS, "seconds per epoch (iteration)");
      chart(o, runs, nruns, M_LOCAL, "local-access share (rows that were on the node)");
      fprintf(o, "<h2>Bytes sent between nodes, by purpose</h2>\n");
      bytes_chart(o, runs, nruns);
    }
    for (int t = 0; t < ntl && rc == 0; t++) {
      fprintf(o, "<h2>Ownership timeline: ");
      esc(o, base_name(tls[t].stem));
      fprintf(o,
              " (%d file%s, %d node%s)</h2>\n<p>The most-moved parameter actors "
              "(table:actor, moves): who owned each when, by colour; gaps are moves in "
              "flight; thin bands below are replicas, in their node's colour.</p>\n",
              tls[t].nfiles, tls[t].nfiles == 1 ? "" : "s", tls[t].nodes,
              tls[t].nodes == 1 ? "" : "s");
      if (tls[t].t1 < tls[t].t0) tls[t].t0 = tls[t].t1 = 0; /* no augur events */
      if (timeline_svg(o, &tls[t], (int)ntop) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        rc = 1;
      }
    }
    fprintf(o, "</body></html>\n");
    if (fclose(o) != 0 && rc == 0) {
      fprintf(stderr, PROG ": cannot write %s: %s\n", out, strerror(errno));
      rc = 1;
    }
    if (rc == 0) printf("report=%s runs=%d traces=%d\n", out, nruns, ntl);
  }
  for (int r = 0; r < nruns; r++) free(runs[r].pts);
  for (int t = 0; t < ntl; t++) free(tls[t].ev), free(tls[t].spans);
  return rc;
}
