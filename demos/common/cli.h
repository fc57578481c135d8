/* cli.h — command-line helpers shared by the demo programs (augur-mf, augur-lda).
 * Each failure prints one line to stderr, "PROG: FLAG: expected WANT, got 'VALUE' (see
 * --help)", and returns exit status 2; success returns 0.
 */
#ifndef DEMOS_COMMON_CLI_H
#define DEMOS_COMMON_CLI_H

#include <stdint.h>

/* Names the program in every message; call once before parsing. */
void cli_set_prog(const char *prog);

/* Reports a bad value of flag; val NULL (a missing value) shows as ''. Returns 2. */
int cli_fail_flag(const char *flag, const char *val, const char *want);

/* Reports an unknown flag. Returns 2. */
int cli_unknown_flag(const char *flag);

/* A decimal whole number in [min, max]; rejects a sign, which strtoull would accept
 * (and wrap, for '-'). */
int cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A finite number in [min, max]. */
int cli_parse_double(const char *flag, const char *s, double min, double max, double *out);

#endif
