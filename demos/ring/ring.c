/* ring.c — augur-ring: N actors in a ring pass one token H hops around it, printing
 * progress as it goes and the message rate at the end.
 *
 * The invariant: the token carries the number of hops made so far, and every actor
 * counts the tokens it handled; the run is good only if the ring handled exactly H + 1
 * tokens (the kick-off plus one per hop) and one actor saw hop H.
 */
#include <augur.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "augur-ring"

#define MSG_TOKEN 1

/* Read-only while the ring runs. */
typedef struct ring {
  uint64_t hops;     /* stop when the token has made this many */
  uint64_t every;    /* print progress when hops % every == 0 */
  uint64_t start_ns; /* when au_runtime_run was called */
} ring_t;

typedef struct node {
  au_actor_t *next;
  const ring_t *ring;
  uint64_t handled; /* tokens this actor received */
  uint64_t end_ns;  /* set by the actor that saw hop `ring->hops` */
} node_t;

static void node_fn(au_actor_t *self, void *state, au_msg_t *msg)
{
  (void)self;
  node_t *s = state;
  const ring_t *r = s->ring;
  uint64_t h;
  memcpy(&h, msg->data, sizeof(h));
  s->handled++;
  if (h > 0 && h % r->every == 0) {
    printf("hops=%llu elapsed_s=%.3f\n", (unsigned long long)h,
           (double)(au_now_ns() - r->start_ns) / 1e9);
    fflush(stdout);
  }
  if (h == r->hops) {
    s->end_ns = au_now_ns();
    return;
  }
  h++;
  int rc = au_send(s->next, MSG_TOKEN, &h, sizeof(h));
  if (rc != 0) {
    /* The token is lost; the count check in main reports the short ring. */
    fprintf(stderr, PROG ": au_send at hop %llu failed: %s\n", (unsigned long long)h,
            au_strerror(rc));
  }
}

static void usage(FILE *f)
{
  fprintf(f, "usage: " PROG " [--actors N] [--hops H] [--threads T] [--help]\n"
             "\n"
             "Passes one token H hops around a ring of N actors, printing progress every\n"
             "H/10 hops and then hops, seconds and messages per second. Exits 1 if the\n"
             "ring did not make exactly H hops.\n"
             "\n"
             "  --actors N   actors in the ring, at least 1 (default 1000)\n"
             "  --hops H     hops to make, at least 1 (default 1000000)\n"
             "  --threads T  scheduler threads, 1..1024 (default: one per online core)\n"
             "  --help       print this and exit\n");
}

/* Parses all of s as a decimal integer in [min, max]. No sign, no spaces. */
static int parse_int(const char *s, long long min, long long max, long long *out)
{
  if (s[0] < '0' || s[0] > '9') return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

typedef struct opts {
  long long actors, hops, threads; /* threads 0: the runtime's default */
} opts_t;

typedef struct flag {
  const char *name;
  long long min, max;
  long long *dst;
} flag_t;

/* Returns 0, or -1 after printing what was wrong. */
static int parse_args(int argc, char **argv, opts_t *o)
{
  const flag_t flags[] = {
      {"--actors", 1, 100000000, &o->actors},
      {"--hops", 1, 1000000000000000LL, &o->hops},
      {"--threads", 1, 1024, &o->threads},
  };
  const size_t nflags = sizeof(flags) / sizeof(flags[0]);
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    const flag_t *f = NULL;
    const char *val = NULL;
    for (size_t k = 0; k < nflags && !f; k++) {
      size_t n = strlen(flags[k].name);
      if (strcmp(arg, flags[k].name) == 0) {
        f = &flags[k];
        if (i + 1 >= argc) {
          fprintf(stderr, PROG ": %s needs a value; see --help\n", f->name);
          return -1;
        }
        val = argv[++i];
      } else if (strncmp(arg, flags[k].name, n) == 0 && arg[n] == '=') {
        f = &flags[k];
        val = arg + n + 1;
      }
    }
    if (!f) {
      fprintf(stderr, PROG ": %s '%s'; see --help\n",
              arg[0] == '-' ? "unknown flag" : "unexpected argument", arg);
      return -1;
    }
    if (parse_int(val, f->min, f->max, f->dst) != 0) {
      fprintf(stderr, PROG ": %s: expected an integer from %lld to %lld, got '%s'\n", f->name,
              f->min, f->max, val);
      return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv)
{
  opts_t o = {.actors = 1000, .hops = 1000000, .threads = 0};
  if (parse_args(argc, argv, &o) != 0) return 2;

  au_runtime_t *rt;
  au_runtime_opts_t ro = {.threads = (int)o.threads};
  int rc = au_runtime_create(&ro, &rt);
  if (rc != 0) {
    fprintf(stderr, PROG ": cannot create a runtime with %lld threads: %s\n", o.threads,
            au_strerror(rc));
    return 1;
  }
  size_t n = (size_t)o.actors;
  au_actor_t **actors = calloc(n, sizeof(*actors));
  if (!actors) {
    fprintf(stderr, PROG ": out of memory for %zu actors\n", n);
    au_runtime_destroy(rt);
    return 1;
  }
  ring_t ring = {.hops = (uint64_t)o.hops};
  ring.every = ring.hops >= 10 ? ring.hops / 10 : 1;
  for (size_t i = 0; i < n; i++) {
    if ((rc = au_actor_spawn(rt, node_fn, sizeof(node_t), &actors[i])) != 0) {
      fprintf(stderr, PROG ": spawning actor %zu of %zu failed: %s\n", i, n, au_strerror(rc));
      au_runtime_destroy(rt);
      free(actors);
      return 1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    node_t *s = au_actor_state(actors[i]);
    s->next = actors[(i + 1) % n];
    s->ring = &ring;
  }

  uint64_t zero = 0;
  if ((rc = au_send(actors[0], MSG_TOKEN, &zero, sizeof(zero))) != 0) {
    fprintf(stderr, PROG ": sending the token failed: %s\n", au_strerror(rc));
    au_runtime_destroy(rt);
    free(actors);
    return 1;
  }
  printf("actors=%zu hops=%llu threads=%d\n", n, (unsigned long long)ring.hops,
         au_runtime_threads(rt));
  fflush(stdout);
  ring.start_ns = au_now_ns();
  if ((rc = au_runtime_run(rt)) != 0) {
    fprintf(stderr, PROG ": au_runtime_run failed: %s\n", au_strerror(rc));
    au_runtime_destroy(rt);
    free(actors);
    return 1;
  }

  /* The threads have been joined: the actors' counters can be read. */
  uint64_t handled = 0, end_ns = 0;
  int finishers = 0;
  for (size_t i = 0; i < n; i++) {
    node_t *s = au_actor_state(actors[i]);
    handled += s->handled;
    if (s->end_ns) {
      finishers++;
      end_ns = s->end_ns;
    }
  }
  au_runtime_destroy(rt);
  free(actors);
  if (handled != ring.hops + 1 || finishers != 1) {
    fprintf(stderr,
            PROG ": expected %llu hops, but the ring handled %llu tokens (kick-off "
                 "included) and %d actors saw the last hop\n",
            (unsigned long long)ring.hops, (unsigned long long)handled, finishers);
    return 1;
  }
  double seconds = (double)(end_ns - ring.start_ns) / 1e9;
  printf("hops=%llu seconds=%.3f msgs_per_s=%.0f\n", (unsigned long long)ring.hops, seconds,
         (double)ring.hops / seconds);
  return 0;
}
