/* cli.c — see cli.h. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *prog = "demo";

void cli_set_prog(const char *name)
{
  prog = name;
}

int cli_fail_flag(const char *flag, const char *val, const char *want)
{
  fprintf(stderr, "%s: %s: expected %s, got '%s' (see --help)\n", prog, flag, want, val ? val : "");
  return 2;
}

int cli_path(const char *flag, const char *v)
{
  if (!v || !*v) return cli_fail_flag(flag, v, "a path");
  if (v[0] == '-' && v[1] == '-') {
    fprintf(stderr,
            "%s: %s: expected a path, got the flag '%s' (a path that starts with -- "
            "can be given as ./%s)\n",
            prog, flag, v, v);
    return 2;
  }
  return 0;
}

double cli_memory_bytes(void)
{
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

int cli_check_memory(const char *what, double bytes)
{
  const double have = cli_memory_bytes();
  if (have == 0 || bytes <= have) return 0; /* (unknown: let the allocation say) */
  fprintf(stderr, "%s: %s needs %.1f GB, more than this machine's %.1f GB of memory\n", prog, what,
          bytes / 1e9, have / 1e9);
  return 2;
}

int cli_unknown_flag(const char *flag)
{
  fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", prog, flag);
  return 2;
}

int cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
  char *end;
  errno = 0;
  /* digits only: strtoull would skip leading blanks and take " -1" as 2^64 - 1 */
  if (!s || !isdigit((unsigned char)*s)) return cli_fail_flag(flag, s, "a whole number");
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < min || v > max) {
    char want[96];
    snprintf(want, sizeof(want), "a whole number in [%llu, %llu]", (unsigned long long)min,
             (unsigned long long)max);
    return cli_fail_flag(flag, s, want);
  }
  *out = v;
  return 0;
}

int cli_parse_double(const char *flag, const char *s, double min, double max, double *out)
{
  char *end;
  errno = 0;
  if (!s || !*s) return cli_fail_flag(flag, "", "a number");
  double v = strtod(s, &end);
  /* decimal only, as the data files: strtod also reads hex ("0x0.8" is 0.5) */
  if (errno || *end || !isfinite(v) || v < min || v > max || strpbrk(s, "xX")) {
    char want[96];
    snprintf(want, sizeof(want), "a number in [%g, %g]", min, max);
    return cli_fail_flag(flag, s, want);
  }
  *out = v;
  return 0;
}

void cli_ckpt_default(cli_ckpt_t *c)
{
  *c = (cli_ckpt_t){.every = 1, .keep = 2};
}

void cli_ckpt_usage(FILE *f, const char *unit)
{
  fprintf(f,
          "  --checkpoint DIR  write checkpoints into DIR; restarted by augur run\n"
          "                    --restarts (AU_RESTART set), the job resumes from DIR's latest\n"
          "  --checkpoint-every N\n"
          "                    %s between checkpoints (default 1; the last one always)\n"
          "  --checkpoint-keep N\n"
          "                    keep the last N full checkpoints (one in 10 is full) and\n"
          "                    those after them, remove older ones (default 2; 0: keep all)\n",
          unit);
}

int cli_ckpt_is(const char *flag)
{
  return !strcmp(flag, "--checkpoint") || !strcmp(flag, "--checkpoint-every") ||
         !strcmp(flag, "--checkpoint-keep") || !strcmp(flag, "--resume");
}

int cli_ckpt_set(cli_ckpt_t *c, const char *flag, const char *v)
{
  uint64_t u;
  int rc;
  if (!strcmp(flag, "--checkpoint-every") || !strcmp(flag, "--checkpoint-keep")) {
    const int every = !strcmp(flag, "--checkpoint-every");
    if ((rc = cli_parse_u64(flag, v, every ? 1 : 0, 1000000, &u)) != 0) return rc;
    *(every ? &c->every : &c->keep) = (int)u;
    c->tuned = every ? "--checkpoint-every" : "--checkpoint-keep";
    return 0;
  }
  if ((rc = cli_path(flag, v)) != 0) return rc;
  *(!strcmp(flag, "--resume") ? &c->resume : &c->dir) = v;
  return 0;
}

const char *cli_ckpt_from(const cli_ckpt_t *c)
{
  if (c->resume) return c->resume;
  if (!c->dir || !getenv("AU_RESTART")) return NULL;
  char latest[4200];
  snprintf(latest, sizeof(latest), "%s/LATEST", c->dir);
  return access(latest, R_OK) == 0 ? c->dir : NULL;
}

/* A directory the run will write into: made if absent, and writable. */
static int output_dir(const char *flag, const char *dir)
{
  struct stat st;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: %s %s: %s\n", prog, flag, dir, strerror(errno));
    return 2;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
    fprintf(stderr, "%s: %s %s: %s\n", prog, flag, dir,
            stat(dir, &st) == 0 && !S_ISDIR(st.st_mode) ? "not a directory" : strerror(errno));
    return 2;
  }
  return 0;
}

int cli_check_outputs(const char *save, const char *ckdir, const char *trace)
{
  if (save && output_dir("--save", save)) return 2;
  if (ckdir && output_dir("--checkpoint", ckdir)) return 2;
  struct stat st;
  if (trace && stat(trace, &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "%s: --trace %s: a directory, not a file\n", prog, trace);
    return 2;
  }
  if (trace) { /* its directory must be one to write in (the files are TRACE.RANK) */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", trace);
    char *slash = strrchr(dir, '/');
    if (!slash)
      snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
      dir[1] = 0;
    else
      *slash = 0;
    const char *why = stat(dir, &st) != 0      ? strerror(errno)
                      : !S_ISDIR(st.st_mode)   ? "not a directory"
                      : access(dir, W_OK) != 0 ? strerror(errno)
                                               : NULL;
    if (why) {
      fprintf(stderr, "%s: --trace %s: %s: %s\n", prog, trace, dir, why);
      return 2;
    }
  }
  return 0;
}

int cli_stdout_status(int status)
{
  if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) { /* (a full disk, /dev/full) */
    fprintf(stderr, "%s: writing the output: %s\n", prog, strerror(errno));
    return 1;
  }
  return status;
}

int cli_ckpt_check(const cli_ckpt_t *c)
{
  if (c->tuned && !c->dir) {
    fprintf(stderr, "%s: %s needs --checkpoint DIR (alone it does nothing)\n", prog, c->tuned);
    return 2;
  }
  struct stat st;
  if (c->resume && (stat(c->resume, &st) != 0 || !S_ISDIR(st.st_mode))) {
    fprintf(stderr, "%s: --resume %s: %s\n", prog, c->resume,
            stat(c->resume, &st) != 0 ? strerror(errno) : "not a directory");
    return 2;
  }
  return 0;
}

int cli_close_synced(FILE *f)
{
  errno = 0;
  int e = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0 ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
  return e;
}

const char *cli_one_of(const char *flag, const char *const *list)
{
  for (; *list; list++)
    if (!strcmp(flag, *list)) return *list;
  return NULL;
}
