/* report.h — `augur report RUN... [-o OUT]`: one self-contained HTML page (inline SVG,
 * nothing loaded from the network) from the key=value lines that augur-mf, augur-lda and
 * programs like them print, plus their trace files when given: learning curves, seconds
 * per epoch, local-access share, bytes sent by purpose, and an ownership timeline of the
 * most-moved parameter actors. docs/report.md describes it for users.
 */
#ifndef AUGUR_TOOLS_REPORT_H
#define AUGUR_TOOLS_REPORT_H

#include <stdio.h>

/* Runs `augur report`; argv[0] is "report". 0 on success, 1 when a file cannot be read
 * or written, 2 for bad usage or malformed input (the message names the file and line,
 * or byte for a trace). */
int report_main(int argc, char **argv);

/* Writes the `augur report --help` text to out. */
void report_help(FILE *out);

#endif
