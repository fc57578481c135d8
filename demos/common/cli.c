/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

int cli_unknown_flag(const char *flag)
{
  fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", prog, flag);
  return 2;
}

int cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
  char *end;
  errno = 0;
  if (!s || !*s || *s == '-' || *s == '+') return cli_fail_flag(flag, s, "a whole number");
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
  if (errno || *end || !isfinite(v) || v < min || v > max) {
    char want[96];
    snprintf(want, sizeof(want), "a number in [%g, %g]", min, max);
    return cli_fail_flag(flag, s, want);
  }
  *out = v;
  return 0;
}
