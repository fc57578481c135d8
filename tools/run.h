/* run.h — `augur run`: the local launcher. Starts N processes on this machine that form
 * one augur cluster (AU_RANK, AU_NODES, AU_COORD, AU_CLUSTER), relays their output line by
 * line with a rank prefix, and stops them all when one fails. docs/launch.md describes it
 * for users.
 */
#ifndef AUGUR_TOOLS_RUN_H
#define AUGUR_TOOLS_RUN_H

#include <stdio.h>

/* Runs `augur run`. argv[0] is the subcommand's name ("run"), argv[1..] its options,
 * then PROGRAM and its arguments. Returns the exit status for main: 0 when every process
 * exited 0, else the first failure's status (128 + signal number for a process killed
 * by a signal), 124 after --timeout, 2 for bad usage, 1 when the launcher itself failed.
 * When the launcher is stopped by SIGINT, SIGTERM or SIGHUP it does not return: it stops
 * the processes, then dies of the same signal, as a shell expects. */
int run_main(int argc, char **argv);

/* Writes the `augur run --help` text to out. */
void run_help(FILE *out);

#endif
