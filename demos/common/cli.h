/* cli.h — command-line helpers shared by the demo programs (augur-mf, augur-lda,
 * augur-kge).
 * Each failure prints one line to stderr, "PROG: FLAG: expected WANT, got 'VALUE' (see
 * --help)", and returns exit status 2; success returns 0.
 */
#ifndef DEMOS_COMMON_CLI_H
#define DEMOS_COMMON_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Names the program in every message; call once before parsing. */
void cli_set_prog(const char *prog);

/* Reports a bad value of flag; val NULL (a missing value) shows as ''. Returns 2. */
int cli_fail_flag(const char *flag, const char *val, const char *want);

/* Reports an unknown flag. Returns 2. */
int cli_unknown_flag(const char *flag);

/* A path flag's value: 0 when v is one, else 2 after the message: missing, empty, or a
 * flag ("--save --biases" would save into ./--biases and drop --biases; a path that
 * starts with "--" can be given as ./--NAME). */
int cli_path(const char *flag, const char *v);

/* 0 when `bytes` fit in this machine's memory, else 2 after one line: "PROG: WHAT needs
 * N GB, more than this machine's M GB" (before the allocation, not an OOM kill minutes
 * later). */
int cli_check_memory(const char *what, double bytes);
/* This machine's physical memory in bytes, or 0 when it cannot be told. */
double cli_memory_bytes(void);

/* A decimal whole number in [min, max]; rejects a sign, which strtoull would accept
 * (and wrap, for '-'). */
int cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A finite number in [min, max]. */
int cli_parse_double(const char *flag, const char *s, double min, double max, double *out);

/* The checkpoint flags every demo takes: --checkpoint DIR, --checkpoint-every N (1 to
 * 10^6, default 1), --checkpoint-keep N (0 to 10^6, default 2) and --resume DIR. */
typedef struct cli_ckpt {
  const char *dir, *resume;
  int every, keep;
  const char *tuned; /* --checkpoint-every or --checkpoint-keep, given (else NULL) */
} cli_ckpt_t;
void cli_ckpt_default(cli_ckpt_t *c);
/* Their --help lines but --resume's (which says what must match); unit: what --checkpoint-every
 * counts ("epochs", "sweeps"). */
void cli_ckpt_usage(FILE *f, const char *unit);
/* 1 if flag is one of them. */
int cli_ckpt_is(const char *flag);
/* Takes flag's value v (NULL: missing) into c: 0, or 2 after the message. */
int cli_ckpt_set(cli_ckpt_t *c, const char *flag, const char *v);
/* Where the run goes on from: --resume's directory, else, when augur run --restarts
 * started the job again (AU_RESTART set), --checkpoint's if it holds a LATEST; or NULL. */
const char *cli_ckpt_from(const cli_ckpt_t *c);
/* After parsing: --checkpoint-every or --checkpoint-keep without --checkpoint (they would
 * do nothing), or a --resume DIR that is not a directory, is 2 after one line; else 0. */
int cli_ckpt_check(const cli_ckpt_t *c);

/* What a run writes, checked before it trains (exit 2 and one line naming the flag, not a
 * failure after the work): save and ckdir (each NULL: not written here) must be
 * directories it can write, made if absent; trace must not name a directory. 0 or 2. */
int cli_check_outputs(const char *save, const char *ckdir, const char *trace);
/* Flushes f to the disk (fflush, fsync) and closes it: 0, or the first errno that went
 * wrong (EIO when none was set), for a file that is renamed into place next. */
int cli_close_synced(FILE *f);
/* flag if it is one of the NULL-terminated list, else NULL. */
const char *cli_one_of(const char *flag, const char *const *list);
/* For the end of main: status, or 1 after a message when standard output could not be
 * written (a full disk, a closed pipe's reader aside). */
int cli_stdout_status(int status);

#endif
