/* trace.c — `augur trace summary` and `augur trace merge`: read the Chrome trace-event
 * JSON that augur's tracing writes (tracejson.h) and print what happened, or join the
 * files of a cluster's nodes into one.
 */
#include "tools/trace.h"

#include "tools/tracejson.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PROG "augur trace"

/* --- summary ------------------------------------------------------------------------ */

static const char *const kind_names[] = {
    "intent",       "relocation_start", "relocation_end", "replica_create", "replica_sync",
    "replica_drop", "remote_access",    "forward",        "steal",          "park",
    "unpark",
};
#define NKINDS (sizeof(kind_names) / sizeof(kind_names[0]))
enum { K_RELOC_START = 1, K_RELOC_END = 2, K_REPLICA_CREATE = 3, K_REPLICA_DROP = 5, K_PARK = 9 };

typedef struct reloc {
  uint64_t flow, table, actor;
  int64_t ts;
  int end;
} reloc_t;

typedef struct replica {
  int64_t node;
  uint64_t table, actor;
  int64_t ts;
  int drop;
} replica_t;

/* A growable array of fixed-size items. */
typedef struct vec {
  void *p;
  size_t n, cap, size;
} vec_t;

static void *vec_push(vec_t *v)
{
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 256;
    void *p = realloc(v->p, cap * v->size);
    if (!p) {
      fprintf(stderr, PROG ": out of memory\n");
      exit(1);
    }
    v->p = p;
    v->cap = cap;
  }
  return (char *)v->p + v->n++ * v->size;
}

typedef struct node_count {
  int64_t node;
  uint64_t events;
} node_count_t;

typedef struct summary {
  uint64_t kinds[NKINDS], other, events;
  vec_t nodes;    /* node_count_t */
  vec_t relocs;   /* reloc_t */
  vec_t replicas; /* replica_t */
  vec_t parks;    /* int64_t ns */
  uint64_t file_events;
} summary_t;

static int summary_event(reader_t *r, void *ctx, const event_t *e, span_t raw)
{
  (void)r;
  (void)raw;
  summary_t *s = ctx;
  if (strcmp(e->cat, "augur") != 0) return 0;
  s->events++;
  s->file_events++;
  size_t k = 0;
  while (k < NKINDS && strcmp(kind_names[k], e->name) != 0) k++;
  if (k == NKINDS) {
    s->other++;
  } else {
    s->kinds[k]++;
  }
  int64_t node = e->has_pid ? e->pid - 1 : -1;
  node_count_t *nc = s->nodes.p;
  size_t j = 0;
  while (j < s->nodes.n && nc[j].node != node) j++;
  if (j == s->nodes.n) *(node_count_t *)vec_push(&s->nodes) = (node_count_t){node, 0};
  ((node_count_t *)s->nodes.p)[j].events++;

  uint64_t table = 0, actor = 0, flow = 0;
  int keyed = tj_arg(e, "table", &table) & tj_arg(e, "actor", &actor);
  if (k == K_RELOC_START || k == K_RELOC_END) {
    if (!keyed) return 0; /* not ours to pair */
    tj_arg(e, "flow", &flow);
    *(reloc_t *)vec_push(&s->relocs) = (reloc_t){flow, table, actor, e->ts, k == K_RELOC_END};
  } else if ((k == K_REPLICA_CREATE || k == K_REPLICA_DROP) && keyed) {
    *(replica_t *)vec_push(&s->replicas) =
        (replica_t){node, table, actor, e->ts, k == K_REPLICA_DROP};
  } else if (k == K_PARK && e->ph[0] == 'X' && e->has_dur) {
    *(int64_t *)vec_push(&s->parks) = e->dur;
  }
  return 0;
}

/* qsort, which must not be given NULL even for 0 items */
static void sort(void *p, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
  if (n > 1) qsort(p, n, size, cmp);
}

static int cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Relocations pair by flow id when they have one, else by (table, actor); in time order. */
static int cmp_reloc(const void *a, const void *b)
{
  const reloc_t *x = a, *y = b;
  uint64_t kx[3] = {x->flow != 0, x->flow ? x->flow : x->table, x->flow ? 0 : x->actor};
  uint64_t ky[3] = {y->flow != 0, y->flow ? y->flow : y->table, y->flow ? 0 : y->actor};
  for (int i = 0; i < 3; i++)
    if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

static int same_reloc(const reloc_t *x, const reloc_t *y)
{
  return x->flow == y->flow && (x->flow || (x->table == y->table && x->actor == y->actor));
}

static int cmp_replica(const void *a, const void *b)
{
  const replica_t *x = a, *y = b;
  if (x->node != y->node) return x->node < y->node ? -1 : 1;
  if (x->table != y->table) return x->table < y->table ? -1 : 1;
  if (x->actor != y->actor) return x->actor < y->actor ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->drop - y->drop; /* created and dropped at the same ns: create first */
}

typedef struct moved {
  uint64_t table, actor, n;
} moved_t;

static int cmp_moved_key(const void *a, const void *b)
{
  const moved_t *x = a, *y = b;
  if (x->table != y->table) return x->table < y->table ? -1 : 1;
  return (x->actor > y->actor) - (x->actor < y->actor);
}

static int cmp_moved_count(const void *a, const void *b)
{
  const moved_t *x = a, *y = b;
  if (x->n != y->n) return x->n > y->n ? -1 : 1;
  return cmp_moved_key(a, b);
}

static void put_us(char *buf, size_t len, int64_t ns)
{
  uint64_t m = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
  snprintf(buf, len, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", m / 1000, (unsigned)(m % 1000));
}

/* duration=NAME count=N [extra] p50_us=... p90_us=... p99_us=... max_us=... */
static void print_durations(const char *name, int64_t *v, size_t n, const char *extra)
{
  printf("duration=%-10s count=%zu%s", name, n, extra);
  if (n) {
    sort(v, n, sizeof(*v), cmp_i64);
    static const int pct[] = {50, 90, 99};
    char buf[32];
    for (int i = 0; i < 3; i++) {
      size_t rank = ((size_t)pct[i] * n + 99) / 100; /* nearest rank, 1-based */
      put_us(buf, sizeof(buf), v[rank - 1]);
      printf(" p%d_us=%s", pct[i], buf);
    }
    put_us(buf, sizeof(buf), v[n - 1]);
    printf(" max_us=%s", buf);
  }
  printf("\n");
}

static void report(summary_t *s, int top)
{
  printf("# events per kind\n");
  for (size_t k = 0; k < NKINDS; k++)
    printf("kind=%-16s count=%" PRIu64 "\n", kind_names[k], s->kinds[k]);
  if (s->other) printf("kind=%-16s count=%" PRIu64 "\n", "other", s->other);

  printf("# durations in microseconds. relocation: start (old owner) to end (new owner), "
         "paired by flow id, else by table:actor; replica: create to drop on one node; park: "
         "parked to woken\n");
  /* relocations: pair within each group, in time order */
  reloc_t *rl = s->relocs.p;
  sort(rl, s->relocs.n, sizeof(*rl), cmp_reloc);
  vec_t lat = {.size = sizeof(int64_t)}, moved = {.size = sizeof(moved_t)};
  uint64_t lone_start = 0, lone_end = 0;
  for (size_t g = 0, h; g < s->relocs.n; g = h) {
    size_t starts = 0, ends = 0;
    for (h = g; h < s->relocs.n && same_reloc(&rl[g], &rl[h]); h++) {
      if (rl[h].end)
        ends++;
      else
        starts++;
    }
    /* the i-th start of the group goes with its i-th end */
    for (size_t i = g, j = g;;) {
      while (i < h && rl[i].end) i++;
      while (j < h && !rl[j].end) j++;
      if (i == h || j == h) break;
      *(int64_t *)vec_push(&lat) = rl[j].ts - rl[i].ts;
      i++;
      j++;
    }
    size_t paired = starts < ends ? starts : ends;
    lone_start += starts - paired;
    lone_end += ends - paired;
    *(moved_t *)vec_push(&moved) =
        (moved_t){rl[g].table, rl[g].actor, starts > ends ? starts : ends};
  }
  char extra[96];
  snprintf(extra, sizeof(extra), " start_only=%" PRIu64 " end_only=%" PRIu64, lone_start, lone_end);
  print_durations("relocation", lat.p, lat.n, extra);

  /* replicas: create opens, drop closes, per (node, table, actor) */
  replica_t *rp = s->replicas.p;
  sort(rp, s->replicas.n, sizeof(*rp), cmp_replica);
  lat.n = 0;
  uint64_t undropped = 0, lone_drop = 0;
  for (size_t i = 0; i < s->replicas.n; i++) {
    int same = i > 0 && rp[i].node == rp[i - 1].node && rp[i].table == rp[i - 1].table &&
               rp[i].actor == rp[i - 1].actor;
    int open = same && !rp[i - 1].drop;
    if (rp[i].drop) {
      if (open)
        *(int64_t *)vec_push(&lat) = rp[i].ts - rp[i - 1].ts;
      else
        lone_drop++;
    } else if (open) {
      undropped++; /* the one before was created again without a drop between */
    }
    if (!rp[i].drop && (i + 1 == s->replicas.n || rp[i + 1].node != rp[i].node ||
                        rp[i + 1].table != rp[i].table || rp[i + 1].actor != rp[i].actor))
      undropped++; /* still there when the trace stopped */
  }
  snprintf(extra, sizeof(extra), " undropped=%" PRIu64 " drop_only=%" PRIu64, undropped, lone_drop);
  print_durations("replica", lat.p, lat.n, extra);
  print_durations("park", s->parks.p, s->parks.n, "");
  free(lat.p);

  /* the most-moved parameter actors */
  moved_t *mv = moved.p;
  sort(mv, moved.n, sizeof(*mv), cmp_moved_key);
  size_t m = 0;
  for (size_t i = 0; i < moved.n; i++) {
    if (m > 0 && mv[m - 1].table == mv[i].table && mv[m - 1].actor == mv[i].actor)
      mv[m - 1].n += mv[i].n;
    else
      mv[m++] = mv[i];
  }
  sort(mv, m, sizeof(*mv), cmp_moved_count);
  printf("# the most-moved parameter actors (table:actor)\n");
  if (m == 0) printf("moved none\n");
  for (size_t i = 0; i < m && i < (size_t)top; i++)
    printf("moved rank=%zu actor=%" PRIu64 ":%" PRIu64 " relocations=%" PRIu64 "\n", i + 1,
           mv[i].table, mv[i].actor, mv[i].n);
  free(moved.p);
}

static int cmp_node(const void *a, const void *b)
{
  const node_count_t *x = a, *y = b;
  return (x->node > y->node) - (x->node < y->node);
}

static int summary_main(int argc, char **argv)
{
  int top = 10, first = 1;
  for (; first < argc && argv[first][0] == '-' && argv[first][1]; first++) {
    if (!strcmp(argv[first], "--")) {
      first++;
      break;
    } else if (!strcmp(argv[first], "-h") || !strcmp(argv[first], "--help")) {
      trace_help(stdout);
      return 0;
    } else if (!strcmp(argv[first], "--top") && first + 1 < argc) {
      char *end;
      long v = strtol(argv[++first], &end, 10);
      if (*end || v < 0 || v > 1000000) {
        fprintf(stderr, PROG " summary: --top: expected a number from 0 to 1000000, got '%s'\n",
                argv[first]);
        return 2;
      }
      top = (int)v;
    } else {
      fprintf(stderr, PROG " summary: unknown option '%s' (see 'augur trace --help')\n",
              argv[first]);
      return 2;
    }
  }
  if (first == argc) {
    fprintf(stderr, PROG " summary: expected FILE... (see 'augur trace --help')\n");
    return 2;
  }
  summary_t s = {.nodes.size = sizeof(node_count_t),
                 .relocs.size = sizeof(reloc_t),
                 .replicas.size = sizeof(replica_t),
                 .parks.size = sizeof(int64_t)};
  sink_t sink = {summary_event, &s};
  typedef struct file_line {
    const char *path;
    info_t info;
    uint64_t events;
  } file_line_t;
  vec_t lines = {.size = sizeof(file_line_t)};
  int rc = 0;
  for (int f = first; f < argc && rc == 0; f++) {
    size_t len;
    char *text = tj_slurp(PROG, argv[f], &len);
    if (!text) {
      rc = 1;
      break;
    }
    reader_t r = {.s = text, .n = len, .file = argv[f]};
    file_line_t *fl = vec_push(&lines);
    fl->path = argv[f];
    s.file_events = 0;
    if (tj_parse(&r, &sink, &fl->info) != 0) {
      fprintf(stderr, "%s\n", r.err);
      rc = 2;
    }
    fl->events = s.file_events;
    free(text);
  }
  if (rc == 0) {
    printf("# files\n");
    file_line_t *fl = lines.p;
    int64_t dropped = 0;
    int hosts_differ = 0;
    for (size_t i = 0; i < lines.n; i++) {
      info_t *in = &fl[i].info;
      if (in->dropped > 0) dropped += in->dropped;
      if (strcmp(in->host, fl[0].info.host) != 0) hosts_differ = 1;
      printf("file=%s rank=%" PRId64 " events=%" PRIu64 " dropped=%" PRId64 " host=%s\n",
             fl[i].path, in->rank, fl[i].events, in->dropped < 0 ? 0 : in->dropped,
             in->host[0] ? in->host : "?");
    }
    node_count_t *nc = s.nodes.p;
    sort(nc, s.nodes.n, sizeof(*nc), cmp_node);
    printf("# all files\n");
    printf("total files=%zu nodes=%zu events=%" PRIu64 " dropped=%" PRId64 "\n", lines.n, s.nodes.n,
           s.events, dropped);
    for (size_t i = 0; i < s.nodes.n; i++)
      printf("node=%" PRId64 " events=%" PRIu64 "\n", nc[i].node, nc[i].events);
    if (dropped > 0)
      printf("warning: %" PRId64 " events were dropped (over AU_TRACE_MAX_EVENTS): counts and "
             "latencies miss them\n",
             dropped);
    if (hosts_differ)
      printf("warning: the files come from different hosts, whose clocks are not aligned: "
             "relocation times between them are not meaningful\n");
    report(&s, top);
  }
  free(lines.p);
  free(s.nodes.p);
  free(s.relocs.p);
  free(s.replicas.p);
  free(s.parks.p);
  return rc;
}

/* --- merge --------------------------------------------------------------------------- */

typedef struct merger {
  FILE *out;
  const char *text;
  uint64_t n;
} merger_t;

static int merge_event(reader_t *r, void *ctx, const event_t *e, span_t raw)
{
  (void)r;
  (void)e;
  merger_t *m = ctx;
  fputs(m->n++ ? ",\n" : "\n", m->out);
  fwrite(m->text + raw.a, 1, raw.b - raw.a, m->out);
  return 0;
}

static int merge_main(int argc, char **argv)
{
  const char *out_path = NULL;
  int first = 1;
  for (; first < argc && argv[first][0] == '-' && argv[first][1]; first++) {
    if (!strcmp(argv[first], "--")) {
      first++;
      break;
    } else if (!strcmp(argv[first], "-h") || !strcmp(argv[first], "--help")) {
      trace_help(stdout);
      return 0;
    } else if (!strcmp(argv[first], "-o") && first + 1 < argc) {
      out_path = argv[++first];
    } else {
      fprintf(stderr, PROG " merge: unknown option '%s' (see 'augur trace --help')\n", argv[first]);
      return 2;
    }
  }
  if (!out_path || first == argc) {
    fprintf(stderr, PROG " merge: expected -o OUT FILE... (see 'augur trace --help')\n");
    return 2;
  }
  /* a temporary name, renamed at the end: a failed merge leaves no half file, and OUT
   * may be one of the inputs */
  size_t len = strlen(out_path) + 8;
  char *tmp = malloc(len);
  if (!tmp) return 1;
  snprintf(tmp, len, "%s.part", out_path);
  FILE *out = fopen(tmp, "w");
  if (!out) {
    fprintf(stderr, PROG " merge: cannot create %s: %s\n", tmp, strerror(errno));
    free(tmp);
    return 1;
  }
  merger_t m = {.out = out};
  sink_t sink = {merge_event, &m};
  int64_t events = 0, dropped = 0;
  int rc = 0;
  fputs("{\"traceEvents\":[", out);
  for (int f = first; f < argc && rc == 0; f++) {
    size_t n;
    char *text = tj_slurp(PROG, argv[f], &n);
    if (!text) {
      rc = 1;
      break;
    }
    reader_t r = {.s = text, .n = n, .file = argv[f]};
    info_t info;
    m.text = text;
    if (tj_parse(&r, &sink, &info) != 0) {
      fprintf(stderr, "%s\n", r.err);
      rc = 2;
    }
    if (info.events > 0) events += info.events;
    if (info.dropped > 0) dropped += info.dropped;
    free(text);
  }
  fprintf(out,
          "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":\"augur trace "
          "merge\",\"files\":%d,\"events\":%" PRId64 ",\"dropped\":%" PRId64 "}}\n",
          argc - first, events, dropped);
  if ((ferror(out) | fclose(out)) && rc == 0) {
    fprintf(stderr, PROG " merge: writing %s failed: %s\n", tmp, strerror(errno));
    rc = 1;
  }
  if (rc == 0 && rename(tmp, out_path) != 0) {
    fprintf(stderr, PROG " merge: cannot rename %s to %s: %s\n", tmp, out_path, strerror(errno));
    rc = 1;
  }
  if (rc != 0) remove(tmp);
  free(tmp);
  return rc;
}

/* --- the command ----------------------------------------------------------------------- */

void trace_help(FILE *out)
{
  fprintf(out,
          "usage: augur trace summary [--top N] FILE...\n"
          "       augur trace merge -o OUT FILE...\n"
          "\n"
          "Read the Chrome trace-event JSON files that augur's tracing writes\n"
          "(au_trace_start / au_trace_stop; a cluster's node R writes FILE.R). The files also\n"
          "open in Perfetto (ui.perfetto.dev) and chrome://tracing. See docs/tracing.md.\n"
          "\n"
          "summary  prints, as key=value lines, for all FILEs together:\n"
          "           file=... rank= events= dropped= host=   one line per file\n"
          "           total ... and node=R events=N          events per node\n"
          "           kind=K count=N                        events per kind\n"
          "           duration=relocation|replica|park count=N p50_us= p90_us= p99_us= max_us=\n"
          "             relocation: start (old owner) to end (new owner), paired by flow id,\n"
          "             else by table:actor; replica: create to drop on one node; park:\n"
          "             parked to woken\n"
          "           moved rank=I actor=TABLE:ACTOR relocations=N   the --top N (default 10)\n"
          "             parameter actors moved most often\n"
          "         and a warning line when events were dropped or the files come from\n"
          "         different hosts (whose clocks are not aligned).\n"
          "merge    writes the events of every FILE into OUT, one trace, so that a viewer\n"
          "         shows all nodes on one timeline with the relocation arrows between them.\n"
          "\n"
          "options:\n"
          "  --top N     summary: how many most-moved parameter actors to list (default 10)\n"
          "  -o OUT      merge: the file to write\n"
          "  -h, --help  this text\n"
          "\n"
          "Exit status: 0 done, 1 a file could not be read or written, 2 bad usage or a\n"
          "malformed trace (\"FILE: byte N: expected ...\", N counted from 1).\n");
}

int trace_main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, PROG ": expected an action: summary or merge (see 'augur trace --help')\n");
    return 2;
  }
  const char *action = argv[1];
  if (!strcmp(action, "-h") || !strcmp(action, "--help") || !strcmp(action, "help")) {
    trace_help(stdout);
    return 0;
  }
  if (!strcmp(action, "summary")) return summary_main(argc - 1, argv + 1);
  if (!strcmp(action, "merge")) return merge_main(argc - 1, argv + 1);
  fprintf(stderr,
          PROG ": unknown action '%s': expected summary or merge (see 'augur trace "
               "--help')\n",
          action);
  return 2;
}
