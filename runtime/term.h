/* term.h — termination of collective runs and reductions (term.c): au__cluster_run ends
 * when every node is idle and nothing is in flight; au_allreduce_sum sums over all nodes
 * in rank order. Rank 0 polls and decides; the state below belongs to the I/O thread
 * unless said otherwise.
 *
 * The invariant (Mattern's counting method): rank 0 declares a run done only after two
 * consecutive polls in which every node reported itself idle in that run and the total
 * of messages sent equalled the total processed, with the same totals both times.
 */
#ifndef AUGUR_RUNTIME_TERM_H
#define AUGUR_RUNTIME_TERM_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/conn.h"

typedef struct node_status {
  uint64_t run, round;
  int idle;
  uint64_t sent, processed;
} node_status_t;

typedef struct term {
  /* under net->mu: the main thread's run and reduction, and what the I/O thread says */
  uint64_t run;      /* main: the run in progress or last finished */
  uint64_t run_done; /* I/O: the last run rank 0 declared done */
  uint64_t reduce_seq, reduced_seq;
  double *reduced; /* result of reduced_seq */
  int reduced_n;

  atomic_int idle; /* this node's workers are idle in the current run (any thread) */

  /* rank 0: termination and reductions */
  node_status_t *status; /* by rank */
  uint64_t poll_round;
  int polls_out; /* replies still expected for poll_round */
  uint64_t last_sent, last_processed;
  int last_balanced; /* the previous complete poll was idle and balanced */
  uint64_t acc_seq;
  double *acc; /* contributions of acc_seq, by rank */
  int *acc_have, acc_count, acc_n;
} term_t;

/* Main thread, on joining / freeing. */
int term_init(net_t *net);
void term_free(net_t *net);

/* Control frames STATUS..REDUCED. */
void term_on_ctrl(net_t *net, conn_t *c, const wire_hdr_t *h, const uint8_t *p, size_t n);
/* Commands: NET_CMD_IDLE (this node became idle), NET_CMD_REDUCE (m: seq, n, values). */
void term_on_idle(net_t *net);
void term_on_reduce(net_t *net, const au_msg_t *m);

#endif
