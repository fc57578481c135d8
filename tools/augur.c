/* augur.c — the `augur` command: `augur COMMAND [ARGS...]`, one entry per subcommand in
 * the table below. A subcommand is a main-like function (argv[0] is its name) and a help
 * function, in its own file pair (run.c + run.h for `augur run`); adding one is adding a
 * row.
 */
#include <stdio.h>
#include <string.h>

#include "tools/report.h"
#include "tools/run.h"
#include "tools/trace.h"

#ifndef AUGUR_VERSION
#define AUGUR_VERSION "unknown"
#endif

typedef struct subcommand {
  const char *name;
  const char *summary; /* one line for `augur --help` */
  int (*main)(int argc, char **argv);
  void (*help)(FILE *out);
} subcommand_t;

static const subcommand_t subcommands[] = {
    {"run", "start N local processes that form one augur cluster", run_main, run_help},
    {"trace", "summarize or merge trace files (au_trace_start)", trace_main, trace_help},
    {"report", "one HTML page of runs' curves, bytes and placement", report_main, report_help},
};

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *out)
{
  fprintf(out, "usage: augur COMMAND [ARGS...]\n"
               "\n"
               "commands:\n");
  for (size_t i = 0; i < NSUBCOMMANDS; i++)
    fprintf(out, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
  fprintf(out, "  %-8s %s\n", "help", "show a command's options: augur help COMMAND");
  fprintf(out, "\n"
               "options:\n"
               "  -h, --help   this text\n"
               "  --version    print the version\n"
               "\n"
               "'augur COMMAND --help' also shows a command's options.\n"
               "Exit status 2 means bad usage; each command documents the others.\n");
}

static const subcommand_t *find(const char *name)
{
  for (size_t i = 0; i < NSUBCOMMANDS; i++)
    if (strcmp(subcommands[i].name, name) == 0) return &subcommands[i];
  return NULL;
}

static int unknown(const char *name)
{
  fprintf(stderr, "augur: unknown command '%s' (see 'augur --help')\n", name);
  return 2;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("augur %s\n", AUGUR_VERSION);
    return 0;
  }
  if (strcmp(cmd, "help") == 0) {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    if (argc > 3) {
      fprintf(stderr, "augur: help: expected one COMMAND, got %d (see 'augur --help')\n", argc - 2);
      return 2;
    }
    const subcommand_t *sub = find(argv[2]);
    if (!sub) return unknown(argv[2]);
    sub->help(stdout);
    return 0;
  }
  if (cmd[0] == '-') {
    fprintf(stderr, "augur: unknown option '%s' (see 'augur --help')\n", cmd);
    return 2;
  }
  const subcommand_t *sub = find(cmd);
  if (!sub) return unknown(cmd);
  return sub->main(argc - 1, argv + 1);
}
