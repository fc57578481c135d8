/* run.c — `augur run`: start N local processes that form one augur cluster, relay their
 * output line by line with a rank prefix, and stop them all when one fails.
 *
 * The invariant: the launcher does not exit while a process it started may still run.
 * Each child leads its own process group, so a signal to the group also reaches the
 * grandchildren it forked; each child dies with the launcher (PR_SET_PDEATHSIG); the
 * launcher is a child subreaper, so orphaned grandchildren are reaped here too; and
 * every stop ends with SIGKILL to each group that still exists.
 *
 * One thread, one poll loop. Signals reach the loop through a self-pipe; the loop reaps
 * children, reads their pipes, and writes whole lines only, each with a single write
 * sequence of its own, so lines of two children never mix.
 */
#include "tools/run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define PROG "augur run"

#define MAX_NODES  1024
#define STREAM_BUF 32768 /* the longest line relayed in one piece; longer ones are split */
#define PREFIX_MAX 16    /* "[1023] " and then some */
#define OUT_BUF    (2 * STREAM_BUF)
#define DRAIN_MS   500  /* how long a pipe is read after its child exited (grandchildren) */
#define SWEEP_MS   1000 /* how long to wait for processes to vanish after SIGKILL */
#define MAX_SECS   1e9

/* The signals the launcher forwards to the children; SIGCHLD and SIGPIPE are handled too. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

typedef struct options {
  int nodes;        /* -n */
  int port;         /* --port; 0: pick a free one */
  const char *bind; /* --bind */
  char **host;      /* --hosts: the host of each rank (NULL: all here) */
  char *hosts_buf;  /* ... the names, one block */
  int host_ranks;   /* ... how many ranks it names */
  double timeout_s; /* --timeout; 0: none */
  double grace_s;   /* --grace */
  int restarts;     /* --restarts: start the job again this many times when a rank fails */
  bool prefix;      /* false with --no-prefix */
  char **argv;      /* PROGRAM ARGS..., NULL-terminated (main's argv) */
} options_t;

typedef struct stream {
  int fd;     /* read end of the child's stdout or stderr pipe; -1 once closed */
  int out;    /* where its lines go: 1 or 2 */
  size_t len; /* bytes of an unfinished line at the start of buf */
  char *buf;  /* STREAM_BUF bytes */
  bool split; /* the last line was split at STREAM_BUF: a newline right after ends it */
} stream_t;

typedef struct child {
  pid_t pid;      /* also its process group id */
  bool running;   /* not reaped yet */
  bool group;     /* its process group may still exist */
  int64_t cut_ms; /* after it exited: when its pipes are closed even if still held open */
  stream_t io[2]; /* stdout, stderr */
} child_t;

typedef struct launcher {
  options_t opt;
  pid_t self;
  child_t *child;             /* opt.nodes of them */
  char *bufs;                 /* every stream's buf, one block */
  struct pollfd *pfd;         /* 1 + 2 * nodes */
  stream_t **pst;             /* the stream behind pfd[i], i >= 1 */
  int *prank;                 /* its rank */
  int started;                /* children forked */
  int running;                /* children not yet reaped */
  int open;                   /* streams not yet closed */
  int wake[2];                /* self-pipe: the signal handler writes the signal number */
  int status;                 /* the exit status, set by the first event that ends the run; -1 */
  int raise_sig;              /* the launcher was stopped by this signal: die of it at the end */
  bool stopping;              /* the stop signal was sent */
  bool failed;                /* a process exited nonzero or was killed by a signal */
  int port_fd;                /* the coordinator port, held (free_port); -1: none */
  bool killed;                /* SIGKILL was sent */
  int64_t kill_ms;            /* when SIGKILL follows the stop signal */
  int64_t deadline_ms;        /* --timeout; 0: none */
  bool out_dead[3];           /* writing to fd 1 or 2 failed: its lines are dropped */
  int out_errno;              /* the first such failure's (not EPIPE's): exit 1, said */
  bool stdin_tty;             /* the launcher's stdin is a terminal: no child gets it */
  bool nofile_raised;         /* RLIMIT_NOFILE was raised: restore it in the children */
  struct rlimit nofile;       /* as found */
  sigset_t mask;              /* the signal mask as found */
  struct sigaction old[NSIG]; /* dispositions as found, for the children */
  char *out;                  /* OUT_BUF bytes: lines being assembled for one write */
  size_t outlen;
} launcher_t;

/* The signal handler's only way to reach the loop. Set once, before any handler is
 * installed; written from the handler, read nowhere else. */
static int wake_fd = -1;

static void on_signal(int sig)
{
  int saved = errno;
  unsigned char c = (unsigned char)sig;
  ssize_t n = write(wake_fd, &c, 1); /* full pipe: a wake-up is pending anyway */
  (void)n;
  errno = saved;
}

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *signal_name(int sig)
{
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  default:
    return "a signal";
  }
}

/* ---- usage ------------------------------------------------------------------------ */

void run_help(FILE *out)
{
  fprintf(out,
          "usage: augur run -n N [options] [--] PROGRAM [ARGS...]\n"
          "       augur run --hosts H1:N1,H2:N2,... [options] [--] PROGRAM [ARGS...]\n"
          "\n"
          "Start N processes of PROGRAM on this machine as one augur cluster, or with\n"
          "--hosts N1 on host H1, N2 on H2, ... over ssh (docs/launch.md).\n"
          "\n"
          "Each process gets the launcher's environment plus:\n"
          "  AU_RANK     its rank, 0 to N-1\n"
          "  AU_NODES    N\n"
          "  AU_COORD    ADDR:PORT, where rank 0 listens as the coordinator\n"
          "  AU_CLUSTER  the cluster id, the same for all N: run-<pid>-<random hex>\n"
          "  AU_SECRET   the job's secret (64 random hex digits), which the nodes prove to\n"
          "              each other at every connection; one already set is passed on\n"
          "Rank 0 reads the launcher's stdin unless that is a terminal; the others read\n"
          "/dev/null.\n"
          "\n"
          "Every line a process writes to stdout or stderr goes to the launcher's stdout or\n"
          "stderr with the rank in front, \"[2] ...\". Lines are relayed whole and never\n"
          "mixed; a line longer than %d bytes is split into several; a last line\n"
          "without a newline gets one.\n"
          "\n"
          "options:\n"
          "  -n, --nodes N    number of processes, 1 to %d (required)\n"
          "  --port P         coordinator port (default: a free port, held by the launcher\n"
          "                   until the job ends so that another launcher is not given it;\n"
          "                   a program that takes it anyway makes rank 0 fail to listen)\n"
          "  --bind ADDR      coordinator address, an IPv4 address of this machine\n"
          "                   (default 127.0.0.1)\n"
          "  --hosts LIST     HOST[:N],... : N ranks (default 1) on each HOST in turn, rank 0\n"
          "                   on the first, which is also the coordinator (AU_COORD=\n"
          "                   HOST:PORT, PORT from --port or at random in 20000-31999).\n"
          "                   Each rank runs as AU_RSH HOST 'COMMAND' (AU_RSH default ssh:\n"
          "                   set up keys first) in this directory if the host has it,\n"
          "                   with the cluster's and every other AU_* variable; the job's\n"
          "                   secret goes on its stdin, on no command line, so remote\n"
          "                   ranks read nothing else there\n"
          "  --timeout S      stop every process after S seconds and exit 124 (default: none)\n"
          "  --grace S        seconds between the stop signal and SIGKILL (default 2)\n"
          "  --restarts K     when a process fails, stop the others and start the whole job\n"
          "                   again, up to K times, with AU_RESTART=1, 2, ... set (a program\n"
          "                   that writes checkpoints goes on from its last one: augur-mf\n"
          "                   --checkpoint DIR); the exit status is the last attempt's\n"
          "  --no-prefix      relay lines without the \"[rank] \" prefix\n"
          "  -h, --help       this text\n"
          "Options end at PROGRAM or at --. S may have a fraction (0.5).\n"
          "\n"
          "Stopping: when a process fails (exits nonzero or is killed by a signal), the\n"
          "launcher says which one on stderr, sends SIGTERM to the others, waits --grace\n"
          "seconds, then sends SIGKILL. Signals go to each process's own process group, so\n"
          "they reach what it forked. SIGINT, SIGTERM and SIGHUP sent to the launcher are\n"
          "forwarded the same way (a second one sends SIGKILL at once), and the launcher\n"
          "then dies of that signal. If the launcher's stdout or stderr is closed (| head),\n"
          "it stops the processes and exits 141. A process that exits while something it\n"
          "forked still holds its stdout or stderr open has its output read for %d ms more;\n"
          "whatever it left running in its process group is then stopped the same way.\n"
          "\n"
          "exit status:\n"
          "  0        every process exited 0\n"
          "  1-255    the first process to fail exited with this status\n"
          "  128+S    the first process to fail was killed by signal S (137: SIGKILL)\n"
          "  127      PROGRAM could not be run\n"
          "  124      --timeout expired\n"
          "  2        bad usage\n"
          "  1        the launcher itself failed (no free port, too many processes)\n",
          STREAM_BUF, MAX_NODES, DRAIN_MS);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, PROG ": %s (see 'augur run --help')\n", msg);
  return 2;
}

static bool parse_int(const char *s, long min, long max, long *out)
{
  if (!s || !*s) return false;
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') return false;
  errno = 0;
  long v = strtol(s, NULL, 10);
  if (errno || v < min || v > max) return false;
  *out = v;
  return true;
}

static bool parse_secs(const char *s, double min, bool min_ok, double *out)
{
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v) || v < min || (v == min && !min_ok) || v > MAX_SECS)
    return false;
  *out = v;
  return true;
}

/* Parses argv into o. Returns 0 to run, 1 after --help, 2 after a usage error (printed). */
/* --hosts H1:N1,H2:N2,... (":N" may be left out: one rank): each host's ranks in turn,
 * rank 0 on the first host. Sets o->host, o->host_ranks and, unless -n came first,
 * o->nodes. 0 or 2 (usage). */
static int parse_hosts(const char *val, options_t *o)
{
  free(o->host);
  free(o->hosts_buf);
  o->host = NULL;
  o->hosts_buf = strdup(val);
  if (!o->hosts_buf) return usage_error("--hosts: out of memory");
  int total = 0, cap = 0;
  for (char *rest = o->hosts_buf, *h; (h = strsep(&rest, ","));) { /* (an empty entry too) */
    long n = 1;
    char *colon = strrchr(h, ':');
    if (colon && !strchr(colon, ']')) { /* host:N, not the port of an [IPv6] address */
      *colon = '\0';
      if (!parse_int(colon + 1, 1, MAX_NODES, &n))
        return usage_error("--hosts: expected HOST or HOST:N with N from 1 to %d, got '%s:%s'",
                           MAX_NODES, h, colon + 1);
    }
    /* a name or IPv4 address, or an IPv6 address in brackets: not an ssh option (-v), a
       bare IPv6 address (::1 read as host ':') or unbalanced brackets */
    const size_t len = strlen(h);
    const int v6 = len > 2 && h[0] == '[' && h[len - 1] == ']';
    if (!*h || *h == '-' ||
        strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_[]:") != len ||
        (!v6 && strpbrk(h, "[]:")) || (v6 && strpbrk(h + 1, "[")) ||
        (v6 && strchr(h, ']') != h + len - 1))
      return usage_error("--hosts: '%s' is not a host name or address (IPv6 in brackets)", h);
    if (total + n > MAX_NODES) return usage_error("--hosts: more than %d ranks", MAX_NODES);
    if (total + n > cap) {
      cap = (int)(total + n) * 2;
      char **m = realloc(o->host, (size_t)cap * sizeof(*m));
      if (!m) return usage_error("--hosts: out of memory");
      o->host = m;
    }
    for (long k = 0; k < n; k++) o->host[total++] = h;
  }
  if (total == 0) return usage_error("--hosts: expected HOST[:N],... , got '%s'", val);
  o->host_ranks = total;
  if (o->nodes == 0) o->nodes = total;
  return 0;
}

static int parse(int argc, char **argv, options_t *o)
{
  *o = (options_t){.nodes = 0, .bind = "127.0.0.1", .grace_s = 2, .prefix = true};
  int i = 1;
  while (i < argc) {
    char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break; /* PROGRAM */
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return 1;
    if (strcmp(a, "--no-prefix") == 0) {
      o->prefix = false;
      i++;
      continue;
    }
    /* The options with a value: "-n 4", "-n4", "--nodes 4", "--nodes=4". */
    const char *name = a, *val = NULL;
    char flag[32];
    if (strncmp(a, "-n", 2) == 0 && a[2] != '\0') {
      name = "-n";
      val = a + 2;
    } else if (strncmp(a, "--", 2) == 0 && strchr(a, '=')) {
      size_t len = (size_t)(strchr(a, '=') - a);
      if (len >= sizeof(flag)) len = sizeof(flag) - 1;
      memcpy(flag, a, len);
      flag[len] = '\0';
      name = flag;
      val = strchr(a, '=') + 1;
    }
    bool known = strcmp(name, "-n") == 0 || strcmp(name, "--nodes") == 0 ||
                 strcmp(name, "--port") == 0 || strcmp(name, "--bind") == 0 ||
                 strcmp(name, "--hosts") == 0 || strcmp(name, "--timeout") == 0 ||
                 strcmp(name, "--grace") == 0 || strcmp(name, "--restarts") == 0;
    if (!known) return usage_error("unknown option '%s'", a);
    if (!val) {
      if (i + 1 >= argc) return usage_error("%s: expected a value after it, got nothing", name);
      val = argv[++i];
    }
    i++;

    long v;
    if (strcmp(name, "-n") == 0 || strcmp(name, "--nodes") == 0) {
      if (!parse_int(val, 1, MAX_NODES, &v))
        return usage_error("%s: expected a number of processes from 1 to %d, got '%s'", name,
                           MAX_NODES, val);
      o->nodes = (int)v;
    } else if (strcmp(name, "--port") == 0) {
      if (!parse_int(val, 1, 65535, &v))
        return usage_error("--port: expected a TCP port from 1 to 65535, got '%s'", val);
      o->port = (int)v;
    } else if (strcmp(name, "--bind") == 0) {
      struct in_addr ia;
      if (inet_pton(AF_INET, val, &ia) != 1)
        return usage_error("--bind: expected an IPv4 address such as 127.0.0.1, got '%s'", val);
      o->bind = val;
    } else if (strcmp(name, "--hosts") == 0) {
      int rc = parse_hosts(val, o);
      if (rc != 0) return rc;
    } else if (strcmp(name, "--restarts") == 0) {
      if (!parse_int(val, 0, 1000000, &v))
        return usage_error("--restarts: expected a number of restarts, 0 or more, got '%s'", val);
      o->restarts = (int)v;
    } else if (strcmp(name, "--timeout") == 0) {
      if (!parse_secs(val, 0, false, &o->timeout_s))
        return usage_error("--timeout: expected a number of seconds above 0 (at most %g), got "
                           "'%s'",
                           MAX_SECS, val);
    } else {
      if (!parse_secs(val, 0, true, &o->grace_s))
        return usage_error("--grace: expected a number of seconds, 0 or more (at most %g), got "
                           "'%s'",
                           MAX_SECS, val);
    }
  }
  if (o->host && o->nodes != o->host_ranks)
    return usage_error("-n %d, but --hosts names %d ranks", o->nodes, o->host_ranks);
  if (o->nodes == 0) return usage_error("missing -n N, the number of processes to start");
  if (i >= argc) return usage_error("missing PROGRAM, the program to start N times");
  o->argv = argv + i;
  return 0;
}

/* ---- output ----------------------------------------------------------------------- */

static void stop(launcher_t *l, int sig);

static void drain_wake(launcher_t *l);

/* Writes all of buf to fd: through EINTR, partial writes, and an fd someone else made
 * non-blocking. It never blocks without watching the launcher's signals and --timeout:
 * while fd cannot take more (a reader that does not read), a signal to the launcher or
 * the deadline gives up on the output (-ECANCELED), so that Ctrl-C and --timeout stop the
 * ranks whatever their output waits for. A pipe that polls writable takes PIPE_BUF bytes
 * without blocking. Returns 0 or -errno. */
static int write_all(launcher_t *l, int fd, const char *buf, size_t len)
{
  while (len > 0) {
    struct pollfd p[2] = {{.fd = fd, .events = POLLOUT}, {.fd = l->wake[0], .events = POLLIN}};
    int r = poll(p, 1, 0);
    if (r == 0) { /* it would block: wait, watching the signals and the deadline */
      if (l->raise_sig || (l->deadline_ms && now_ms() >= l->deadline_ms)) return -ECANCELED;
      r = poll(p, l->wake[0] >= 0 ? 2 : 1, 100);
      if (r > 0 && (p[1].revents & POLLIN)) drain_wake(l); /* (a signal: raise_sig) */
      continue;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    ssize_t n = write(fd, buf, len < PIPE_BUF ? len : PIPE_BUF);
    if (n > 0) {
      buf += n;
      len -= (size_t)n;
    } else if (n == 0) {
      return -EIO; /* not for pipes, files or terminals; do not spin on it */
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return -errno;
    }
  }
  return 0;
}

/* Writes to the launcher's stdout or stderr. A failed stream is dropped from then on; a
 * closed one (EPIPE: `augur run ... | head`) also stops the run, as SIGPIPE would stop a
 * plain program. */
static void emit(launcher_t *l, int fd, const char *buf, size_t len)
{
  if (l->out_dead[fd] || len == 0) return;
  int rc = write_all(l, fd, buf, len);
  if (rc == 0) return;
  l->out_dead[fd] = true;
  if (rc == -EPIPE) {
    if (l->status < 0) l->status = 128 + SIGPIPE;
    stop(l, SIGTERM);
  } else if (rc != -ECANCELED && !l->out_errno) {
    l->out_errno = -rc; /* (a full disk: the ranks' output is lost, and the status says so) */
  }
}

/* One line of the launcher's own to stderr: "augur run: ...". */
static void say(launcher_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(launcher_t *l, const char *fmt, ...)
{
  char msg[512];
  int n = snprintf(msg, sizeof(msg), PROG ": ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(msg);
  msg[len++] = '\n';
  emit(l, 2, msg, len);
}

static void flush(launcher_t *l, int fd)
{
  emit(l, fd, l->out, l->outlen);
  l->outlen = 0;
}

/* Appends one line (given without its newline) to the output, after the rank prefix. */
static void put_line(launcher_t *l, int fd, int rank, const char *s, size_t n)
{
  if (l->outlen + PREFIX_MAX + n + 1 > OUT_BUF) flush(l, fd);
  if (l->opt.prefix) l->outlen += (size_t)snprintf(l->out + l->outlen, PREFIX_MAX, "[%d] ", rank);
  memcpy(l->out + l->outlen, s, n);
  l->outlen += n;
  l->out[l->outlen++] = '\n';
}

/* Relays the whole lines in s->buf and keeps the unfinished rest at its start. The rest
 * goes out too, as a line of its own with a newline added, when `all` is set (end of
 * file) or when it fills the buffer (a line longer than STREAM_BUF: split, not lost). */
static void relay(launcher_t *l, int rank, stream_t *s, bool all)
{
  size_t start = 0;
  char *nl;
  if (s->split && s->len > 0) { /* the newline that ends a line split at STREAM_BUF */
    if (s->buf[0] == '\n') start = 1;
    s->split = false;
  }
  while ((nl = memchr(s->buf + start, '\n', s->len - start))) {
    size_t end = (size_t)(nl - s->buf);
    put_line(l, s->out, rank, s->buf + start, end - start);
    start = end + 1;
  }
  if (start < s->len && (all || (start == 0 && s->len == STREAM_BUF))) {
    put_line(l, s->out, rank, s->buf + start, s->len - start);
    s->split = !all;
    start = s->len;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
  flush(l, s->out);
}

static void close_stream(launcher_t *l, int rank, stream_t *s)
{
  relay(l, rank, s, true);
  close(s->fd);
  s->fd = -1;
  l->open--;
}

/* Reads what the pipe holds, up to `reads` times, and relays it. Returns false once the
 * stream is closed (end of file or a read error). */
static bool pump(launcher_t *l, int rank, stream_t *s, int reads)
{
  for (int r = 0; r < reads; r++) {
    ssize_t n = read(s->fd, s->buf + s->len, STREAM_BUF - s->len);
    if (n > 0) {
      s->len += (size_t)n;
      relay(l, rank, s, false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    close_stream(l, rank, s);
    return false;
  }
  return true;
}

/* ---- processes -------------------------------------------------------------------- */

/* Sends sig to the process group of every child, exited or not, whose group may still
 * exist: after a child exits, its group lives on as long as something it forked does.
 * A group id is not reused while the group exists, so this never hits a stranger. */
static void signal_groups(launcher_t *l, int sig)
{
  for (int i = 0; i < l->started; i++) {
    child_t *c = &l->child[i];
    if (c->group && kill(-c->pid, sig) < 0 && errno == ESRCH) c->group = false;
  }
}

/* Starts stopping the run: sig to every group now, SIGKILL after the grace period. */
static void stop(launcher_t *l, int sig)
{
  if (l->stopping) return;
  l->stopping = true;
  signal_groups(l, sig);
  l->kill_ms = now_ms() + (int64_t)(l->opt.grace_s * 1000);
}

static void kill_all(launcher_t *l)
{
  l->stopping = true;
  l->killed = true;
  signal_groups(l, SIGKILL);
}

static void child_exited(launcher_t *l, int rank, int st)
{
  child_t *c = &l->child[rank];
  c->running = false;
  l->running--;
  c->cut_ms = now_ms() + DRAIN_MS;
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (code == 0 || l->status >= 0) return; /* fine, or a consequence of the first event */
  l->status = code;
  l->failed = true;
  const char *others = l->running > 0 ? "; stopping the others" : "";
  if (WIFEXITED(st))
    say(l, "rank %d exited with status %d%s", rank, code, others);
  else
    say(l, "rank %d was killed by signal %d (%s)%s", rank, WTERMSIG(st), strsignal(WTERMSIG(st)),
        others);
  stop(l, SIGTERM);
}

/* Reaps every child that has exited, and any orphaned grandchild handed to us as the
 * subreaper. */
static void reap(launcher_t *l)
{
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0 || (pid < 0 && errno == EINTR)) {
    if (pid < 0) continue;
    for (int i = 0; i < l->started; i++)
      if (l->child[i].running && l->child[i].pid == pid) {
        child_exited(l, i, st);
        break;
      }
  }
}

static void on_launcher_signal(launcher_t *l, int sig)
{
  if (l->stopping) {
    /* a signal to the launcher ends the job, whatever was stopping it: no restart, and
       the launcher dies of it */
    if (!l->raise_sig) l->raise_sig = sig;
    if (!l->killed) kill_all(l); /* a second signal: do not wait out the grace period */
    return;
  }
  if (l->status < 0) {
    l->status = 128 + sig;
    l->raise_sig = sig;
  }
  say(l, "received %s; stopping all %d ranks", signal_name(sig), l->opt.nodes);
  stop(l, sig);
}

/* Handles the signals the self-pipe holds. SIGCHLD needs nothing: the loop reaps anyway. */
static void drain_wake(launcher_t *l)
{
  unsigned char sigs[64];
  ssize_t n;
  while ((n = read(l->wake[0], sigs, sizeof(sigs))) > 0 || (n < 0 && errno == EINTR))
    for (ssize_t i = 0; i < n; i++)
      if (sigs[i] != SIGCHLD) on_launcher_signal(l, sigs[i]);
}

/* In the child, between fork and exec: set up what PROGRAM expects, then exec it. */
extern char **environ;

/* s in single quotes for a POSIX shell, appended to buf (cap bytes); false if it does not
 * fit. */
static bool shell_quote(char *buf, size_t cap, size_t *len, const char *s)
{
  if (*len + 3 > cap) return false;
  buf[(*len)++] = '\'';
  for (; *s; s++) {
    const char *piece = *s == '\'' ? "'\\''" : NULL;
    size_t n = piece ? 4 : 1;
    if (*len + n + 2 > cap) return false;
    if (piece)
      memcpy(buf + *len, piece, n);
    else
      buf[*len] = *s;
    *len += n;
  }
  buf[(*len)++] = '\'';
  buf[*len] = '\0';
  return true;
}

static bool append(char *buf, size_t cap, size_t *len, const char *s)
{
  size_t n = strlen(s);
  if (*len + n + 1 > cap) return false;
  memcpy(buf + *len, s, n + 1);
  *len += n;
  return true;
}

/* The command a remote rank runs through AU_RSH: in the launcher's directory if it
 * exists there, the secret read from stdin (so that it is on no command line), then the
 * program with the cluster's variables and every other AU_* variable of the launcher. */
static bool remote_command(const launcher_t *l, char *buf, size_t cap)
{
  size_t len = 0;
  char cwd[4096];
  buf[0] = '\0';
  if (getcwd(cwd, sizeof(cwd)) &&
      !(append(buf, cap, &len, "cd ") && shell_quote(buf, cap, &len, cwd) &&
        append(buf, cap, &len, " 2>/dev/null; ")))
    return false;
  if (!append(buf, cap, &len, "IFS= read -r AU_SECRET; export AU_SECRET; exec env")) return false;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "AU_", 3) != 0 || strncmp(*e, "AU_SECRET=", 10) == 0) continue;
    if (!append(buf, cap, &len, " ") || !shell_quote(buf, cap, &len, *e)) return false;
  }
  for (char **a = l->opt.argv; *a; a++)
    if (!append(buf, cap, &len, " ") || !shell_quote(buf, cap, &len, *a)) return false;
  return true;
}

static void __attribute__((noreturn)) child_exec(launcher_t *l, int rank, int out, int err)
{
  /* Dispositions and mask as the launcher found them (an ignored SIGINT stays ignored,
   * as nohup and shells expect). Every signal is blocked until then, so the launcher's
   * handler never runs here. */
  sigaction(SIGCHLD, &l->old[SIGCHLD], NULL);
  sigaction(SIGPIPE, &l->old[SIGPIPE], NULL);
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
    sigaction(forwarded[i], &l->old[forwarded[i]], NULL);
  setpgid(0, 0);
#ifdef PR_SET_PDEATHSIG
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != l->self) _exit(1); /* the launcher died before the line above */
#endif
  if (l->opt.host) {
    /* a remote rank: its stdin is the pipe with the job's secret, nothing more */
    int p[2];
    const char *secret = getenv("AU_SECRET");
    if (pipe(p) == 0) {
      dprintf(p[1], "%s\n", secret ? secret : "");
      close(p[1]);
      dup2(p[0], 0);
      close(p[0]);
    }
  } else if (rank != 0 || l->stdin_tty) {
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != 0) {
      dup2(null, 0);
      close(null);
    }
  }
  /* out and err are above 2 (run_main made sure 0-2 are open) and close on exec. */
  dup2(out, 1);
  dup2(err, 2);
  if (l->nofile_raised) setrlimit(RLIMIT_NOFILE, &l->nofile);
  sigprocmask(SIG_SETMASK, &l->mask, NULL);
  if (l->opt.host) { /* AU_RSH HOST COMMAND, as ssh takes it */
    static char cmd[65536];
    char *words[64];
    int nw = 0;
    const char *rsh = getenv("AU_RSH");
    char *rshs = strdup(rsh && *rsh ? rsh : "ssh");
    for (char *save = NULL, *w = rshs ? strtok_r(rshs, " \t", &save) : NULL; w && nw < 60;
         w = strtok_r(NULL, " \t", &save))
      words[nw++] = w;
    if (nw == 0 || !remote_command(l, cmd, sizeof(cmd))) {
      dprintf(2, PROG ": cannot build the command for rank %d on %s\n", rank, l->opt.host[rank]);
      _exit(127);
    }
    words[nw++] = l->opt.host[rank];
    words[nw++] = cmd;
    words[nw] = NULL;
    execvp(words[0], words);
    dprintf(2, PROG ": cannot run AU_RSH '%s': %s\n", words[0], strerror(errno));
    _exit(127);
  }
  execvp(l->opt.argv[0], l->opt.argv);
  dprintf(2, PROG ": cannot run '%s': %s\n", l->opt.argv[0], strerror(errno));
  _exit(127);
}

/* Forks the child of `rank` with its stdout and stderr on new pipes. Returns 0 or -errno. */
static int spawn(launcher_t *l, int rank)
{
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) < 0) return -errno;
  if (pipe2(err, O_CLOEXEC) < 0) {
    int e = errno;
    close(out[0]);
    close(out[1]);
    return -e;
  }
  char buf[16];
  snprintf(buf, sizeof(buf), "%d", rank);
  int rc = setenv("AU_RANK", buf, 1) < 0 ? -errno : 0;

  /* No handler may run in the child before it restored the dispositions. */
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid_t pid = rc == 0 ? fork() : -1;
  if (pid == 0) child_exec(l, rank, out[1], err[1]);
  if (pid < 0 && rc == 0) rc = -errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(out[1]);
  close(err[1]);
  if (rc < 0) {
    close(out[0]);
    close(err[0]);
    return rc;
  }
  setpgid(pid, pid); /* also here: signals may target the group before the child runs */

  child_t *c = &l->child[rank];
  c->pid = pid;
  c->running = true;
  c->group = true;
  int fds[2] = {out[0], err[0]};
  for (int k = 0; k < 2; k++) {
    fcntl(fds[k], F_SETFL, fcntl(fds[k], F_GETFL) | O_NONBLOCK);
    c->io[k] = (stream_t){
        .fd = fds[k], .out = 1 + k, .buf = l->bufs + ((size_t)rank * 2 + (size_t)k) * STREAM_BUF};
  }
  l->started++;
  l->running++;
  l->open += 2;
  return 0;
}

/* The poll loop: runs until every child is reaped and every pipe closed. */
static void loop(launcher_t *l)
{
  for (;;) {
    reap(l);
    int64_t now = now_ms();
    if (l->deadline_ms && now >= l->deadline_ms && !l->stopping) {
      if (l->status < 0) l->status = 124;
      say(l, "timed out after %g s; stopping all %d ranks", l->opt.timeout_s, l->opt.nodes);
      stop(l, SIGTERM);
    }
    if (l->stopping && !l->killed && now >= l->kill_ms) kill_all(l);

    /* A pipe still open after its child exited is held by something the child forked:
     * read what is there for a while, then close it, so such a process cannot keep the
     * launcher waiting. */
    int64_t next = -1;
    for (int i = 0; i < l->started; i++) {
      child_t *c = &l->child[i];
      if (c->running || (c->io[0].fd < 0 && c->io[1].fd < 0)) continue;
      if (now >= c->cut_ms) {
        for (int k = 0; k < 2; k++)
          if (c->io[k].fd >= 0 && pump(l, i, &c->io[k], 16)) close_stream(l, i, &c->io[k]);
      } else if (next < 0 || c->cut_ms < next) {
        next = c->cut_ms;
      }
    }
    if (l->running == 0 && l->open == 0) return;

    if (l->deadline_ms && !l->stopping && (next < 0 || l->deadline_ms < next))
      next = l->deadline_ms;
    if (l->stopping && !l->killed && (next < 0 || l->kill_ms < next)) next = l->kill_ms;
    int64_t wait = next < 0 ? -1 : next > now ? next - now : 0;
    int wait_ms = wait > 3600000 ? 3600000 : (int)wait; /* a long --timeout: wake up hourly */

    int n = 0;
    l->pfd[n++] = (struct pollfd){.fd = l->wake[0], .events = POLLIN};
    for (int i = 0; i < l->started; i++)
      for (int k = 0; k < 2; k++)
        if (l->child[i].io[k].fd >= 0) {
          l->pst[n] = &l->child[i].io[k];
          l->prank[n] = i;
          l->pfd[n++] = (struct pollfd){.fd = l->child[i].io[k].fd, .events = POLLIN};
        }
    int ready = poll(l->pfd, (nfds_t)n, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      /* Cannot happen with valid fds; do not spin: end it all. */
      say(l, "poll: %s; killing all ranks", strerror(errno));
      if (l->status < 0) l->status = 1;
      kill_all(l);
      for (int i = 0; i < l->started; i++)
        while (l->child[i].running) {
          int st;
          pid_t pid = waitpid(l->child[i].pid, &st, 0);
          if (pid == l->child[i].pid || (pid < 0 && errno != EINTR)) {
            l->child[i].running = false;
            l->running--;
          }
        }
      for (int i = 1; i < n; i++) close_stream(l, l->prank[i], l->pst[i]);
      return;
    }
    if (l->pfd[0].revents) drain_wake(l);
    for (int i = 1; i < n; i++)
      if (l->pfd[i].revents) pump(l, l->prank[i], l->pst[i], 1);
  }
}

/* After every child is gone: stops what they forked and left running in their process
 * groups, SIGTERM then SIGKILL, and waits until those groups are empty. */
static void sweep(launcher_t *l)
{
  reap(l);             /* a grandchild that just exited is no reason to complain */
  signal_groups(l, 0); /* drops the groups that are gone */
  bool any = false;
  for (int i = 0; i < l->started; i++)
    if (l->child[i].group) {
      any = true;
      if (!l->stopping) say(l, "rank %d left processes running; stopping them", i);
    }
  if (!any) return;
  int64_t kill_ms = now_ms() + (int64_t)(l->opt.grace_s * 1000);
  if (!l->killed) signal_groups(l, SIGTERM);
  for (;;) {
    reap(l); /* orphans are ours to reap, and a zombie still belongs to its group */
    signal_groups(l, 0);
    any = false;
    for (int i = 0; i < l->started; i++) any |= l->child[i].group;
    if (!any) return;
    int64_t now = now_ms();
    if (!l->killed && now >= kill_ms) {
      l->killed = true;
      signal_groups(l, SIGKILL);
      kill_ms = now + SWEEP_MS;
    } else if (l->killed && now >= kill_ms) {
      return; /* unkillable (uninterruptible sleep): nothing more to do */
    }
    /* a signal meanwhile (Ctrl-C): kill them now rather than wait out the grace period */
    struct pollfd p = {.fd = l->wake[0], .events = POLLIN};
    if (poll(&p, l->wake[0] >= 0 ? 1 : 0, 10) > 0 && (p.revents & POLLIN)) {
      drain_wake(l);
      if (l->raise_sig && !l->killed) {
        l->killed = true;
        signal_groups(l, SIGKILL);
        kill_ms = now_ms() + SWEEP_MS;
      }
    }
  }
}

/* ---- setup ------------------------------------------------------------------------ */

/* A TCP port that is free on addr right now: bind to port 0 and read what the kernel
 * chose. The socket is closed before the children start, so another program could take
 * the port in between; rank 0 then fails to listen and the run fails (no retry). */
/* A free port, kept: *held is a socket bound to it (SO_REUSEADDR, not listening) that
 * the launcher holds until the job ends, so that another launcher's probe cannot be given
 * the same port in the meantime (two `augur run` jobs started together once got one
 * port, and a rank of one joined the other's coordinator), while rank 0, binding with
 * SO_REUSEADDR as libuv does, can still listen on it. */
static int free_port(const char *addr, int *port, int *held)
{
  struct sockaddr_in sa = {.sin_family = AF_INET};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return -EINVAL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  socklen_t len = sizeof(sa);
  int rc = 0, one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
    rc = -errno;
  else
    *port = ntohs(sa.sin_port);
  if (rc) {
    close(fd);
    return rc;
  }
  *held = fd;
  return 0;
}

/* "run-<pid>-<16 random hex digits>". */
static void cluster_id(char *buf, size_t cap)
{
  uint64_t r;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    /* No entropy yet (early boot): the time and pid still make it unique enough. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40);
    r ^= r >> 31;
    r *= 0x9e3779b97f4a7c15u;
  }
  snprintf(buf, cap, "run-%ld-%016llx", (long)getpid(), (unsigned long long)r);
}

/* A per-job secret: 32 random bytes in hex (the kernel's generator; blocks at early boot
 * until it is seeded). 0, or -1. */
static int job_secret(char *buf, size_t cap)
{
  uint8_t r[32];
  size_t got = 0;
  while (got < sizeof(r)) {
    ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof(r) && 2 * i + 2 < cap; i++) snprintf(buf + 2 * i, 3, "%02x", r[i]);
  return 0;
}

/* Opens /dev/null on whichever of fds 0-2 is closed, so that pipes never land there. */
static void open_std_fds(void)
{
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd) close(n); /* lower fd still closed: cannot happen */
    }
}

/* Room for two pipes per child: raises the soft limit on open files when needed. */
static void raise_nofile(launcher_t *l)
{
  if (getrlimit(RLIMIT_NOFILE, &l->nofile) < 0) return;
  rlim_t need = (rlim_t)l->opt.nodes * 2 + 64;
  if (l->nofile.rlim_cur == RLIM_INFINITY || l->nofile.rlim_cur >= need) return;
  struct rlimit r = l->nofile;
  r.rlim_cur =
      l->nofile.rlim_max == RLIM_INFINITY || l->nofile.rlim_max > need ? need : l->nofile.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) == 0) l->nofile_raised = true;
}

static int install_handlers(launcher_t *l)
{
  if (pipe2(l->wake, O_CLOEXEC | O_NONBLOCK) < 0) return -errno;
  wake_fd = l->wake[1];
  sigprocmask(SIG_SETMASK, NULL, &l->mask);

  struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: EINTR is handled */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, NULL, &l->old[SIGPIPE]);
  sigaction(SIGCHLD, NULL, &l->old[SIGCHLD]);
  struct sigaction ign = {.sa_handler = SIG_IGN};
  sigaction(SIGPIPE, &ign, NULL); /* a closed stdout is an EPIPE, handled in emit */
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  sa.sa_flags = 0;
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
    int sig = forwarded[i];
    sigaction(sig, NULL, &l->old[sig]);
    /* Ignored on entry (nohup, `cmd &` in a script): stays ignored, as for any program. */
    if (l->old[sig].sa_handler != SIG_IGN) sigaction(sig, &sa, NULL);
  }
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, SIGCHLD);
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
    sigaddset(&unblock, forwarded[i]);
  sigprocmask(SIG_UNBLOCK, &unblock, NULL);
  return 0;
}

static void restore_handlers(launcher_t *l)
{
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
    sigaction(forwarded[i], &l->old[forwarded[i]], NULL);
  sigaction(SIGCHLD, &l->old[SIGCHLD], NULL);
  sigaction(SIGPIPE, &l->old[SIGPIPE], NULL);
  sigprocmask(SIG_SETMASK, &l->mask, NULL);
  wake_fd = -1;
  close(l->wake[0]);
  close(l->wake[1]);
  l->wake[0] = l->wake[1] = -1; /* (write_all polls it while it is there) */
}

/* Starts every child, runs the loop, cleans up. Returns the exit status. */
static int launch(launcher_t *l)
{
  int nodes = l->opt.nodes;
  int port = l->opt.port;
  if (l->opt.host && port == 0) {
    /* another host's ports cannot be probed from here: one at random where the MPI and
     * Slurm modes look (docs/cluster.md); --port names one */
    uint16_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) r = (uint16_t)getpid();
    port = 20000 + r % 12000;
  } else if (port == 0) {
    int rc = free_port(l->opt.bind, &port, &l->port_fd);
    if (rc < 0) {
      fprintf(stderr, PROG ": cannot find a free port on %s: %s (use --port or --bind)\n",
              l->opt.bind, strerror(-rc));
      return 1;
    }
  }
  char coord[300], cluster[64], nodes_s[16];
  snprintf(coord, sizeof(coord), "%s:%d", l->opt.host ? l->opt.host[0] : l->opt.bind, port);
  snprintf(nodes_s, sizeof(nodes_s), "%d", nodes);
  cluster_id(cluster, sizeof(cluster));
  if (setenv("AU_NODES", nodes_s, 1) < 0 || setenv("AU_COORD", coord, 1) < 0 ||
      setenv("AU_CLUSTER", cluster, 1) < 0) {
    fprintf(stderr, PROG ": cannot set the environment: %s\n", strerror(errno));
    return 1;
  }
  /* the nodes prove the job's secret to each other at every connection */
  if (!getenv("AU_SECRET")) {
    char secret[65];
    if (job_secret(secret, sizeof(secret)) != 0 || setenv("AU_SECRET", secret, 1) < 0) {
      fprintf(stderr, PROG ": cannot make the job's secret: %s\n", strerror(errno));
      return 1;
    }
  }

  l->child = calloc((size_t)nodes, sizeof(*l->child));
  l->bufs = malloc((size_t)nodes * 2 * STREAM_BUF); /* pages are touched only when used */
  l->pfd = calloc((size_t)nodes * 2 + 1, sizeof(*l->pfd));
  l->pst = calloc((size_t)nodes * 2 + 1, sizeof(*l->pst));
  l->prank = calloc((size_t)nodes * 2 + 1, sizeof(*l->prank));
  l->out = malloc(OUT_BUF);
  if (!l->child || !l->bufs || !l->pfd || !l->pst || !l->prank || !l->out) {
    fprintf(stderr, PROG ": out of memory for %d processes\n", nodes);
    return 1;
  }
  int rc = install_handlers(l);
  if (rc < 0) {
    fprintf(stderr, PROG ": cannot create a pipe: %s\n", strerror(-rc));
    return 1;
  }
#ifdef PR_SET_CHILD_SUBREAPER
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned grandchildren come to us, not to init */
#endif
  if (l->opt.timeout_s > 0) l->deadline_ms = now_ms() + (int64_t)(l->opt.timeout_s * 1000);

  for (int rank = 0; rank < nodes; rank++) {
    reap(l);
    drain_wake(l);
    if (l->stopping) break; /* a child failed already, or we were told to stop */
    rc = spawn(l, rank);
    if (rc < 0) {
      say(l, "cannot start rank %d: %s%s", rank, strerror(-rc),
          rc == -EMFILE || rc == -ENFILE ? " (raise the limit, ulimit -n, or start fewer)" : "");
      if (l->status < 0) l->status = 1;
      stop(l, SIGTERM);
      break;
    }
  }
  loop(l);
  sweep(l);
  restore_handlers(l);
  if (l->port_fd >= 0) close(l->port_fd);
  return l->status < 0 ? 0 : l->status;
}

int run_main(int argc, char **argv)
{
  options_t opt;
  int rc = parse(argc, argv, &opt);
  if (rc != 0) { /* help, or a usage error (parse's --hosts list among what it made) */
    free(opt.host);
    free(opt.hosts_buf);
  }
  if (rc == 1) {
    run_help(stdout);
    return 0;
  }
  if (rc != 0) return rc;

  open_std_fds();
  launcher_t l;
  int status = 0;
  for (int attempt = 0;; attempt++) {
    l = (launcher_t){.opt = opt, .status = -1, .wake = {-1, -1}, .port_fd = -1};
    fflush(NULL); /* nothing buffered may be written twice by a child */
    l.self = getpid();
    l.stdin_tty = isatty(0);
    raise_nofile(&l);
    status = launch(&l);
    if (l.out_errno && status == 0) {
      fprintf(stderr, PROG ": writing the ranks' output: %s\n", strerror(l.out_errno));
      status = 1;
    }
    free(l.child);
    free(l.bufs);
    free(l.pfd);
    free(l.pst);
    free(l.prank);
    free(l.out);
    /* again after a failed process; not after a signal to the launcher, --timeout (124),
     * a program that could not run (127) or a usage or launcher error */
    if (status == 0 || l.raise_sig || attempt >= opt.restarts || status == 124 || status == 127 ||
        !l.failed)
      break;
    char n[16];
    snprintf(n, sizeof(n), "%d", attempt + 1);
    if (setenv("AU_RESTART", n, 1) < 0) break;
    fprintf(stderr, PROG ": starting the job again (restart %d of %d, AU_RESTART=%d)\n",
            attempt + 1, opt.restarts, attempt + 1);
  }
  free(opt.host);
  free(opt.hosts_buf);
  if (l.raise_sig) {
    /* Die of the signal we were stopped by, so that a shell or make sees it. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, l.raise_sig);
    signal(l.raise_sig, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(l.raise_sig);
  }
  return status;
}
