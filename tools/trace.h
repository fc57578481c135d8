/* trace.h — `augur trace`: reads the Chrome trace-event JSON files that augur's tracing
 * writes (au_trace_stop, runtime/trace.c). `augur trace summary FILE...` prints event
 * counts per kind and node, relocation/replica/park latency percentiles, the most-moved
 * parameter actors and dropped events; `augur trace merge -o OUT FILE...` joins the files
 * of a cluster's nodes into one, so that a viewer draws relocation arrows between nodes.
 * docs/tracing.md describes both for users.
 */
#ifndef AUGUR_TOOLS_TRACE_H
#define AUGUR_TOOLS_TRACE_H

#include <stdio.h>

/* Runs `augur trace`. argv[0] is the subcommand's name ("trace"), argv[1] the action.
 * Returns the exit status for main: 0 on success, 1 when a file cannot be read or
 * written, 2 for bad usage or a malformed trace (the message names the file and byte). */
int trace_main(int argc, char **argv);

/* Writes the `augur trace --help` text to out. */
void trace_help(FILE *out);

#endif
