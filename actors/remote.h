/* remote.h — rows that live on other nodes (the classic parameter server): a worker's
 * requests for rows it lacks and the rows that come back, the deltas it pushes to their
 * owners, and the server actors that answer both on the owner.
 *
 * The invariant: within one step a worker requests each missing (table, key) once; the
 * step is re-run only when every reply of the step has arrived; rows fetched for a step
 * live until the step completes, and updates to them travel to the owner, once.
 */
#ifndef AUGUR_ACTORS_REMOTE_H
#define AUGUR_ACTORS_REMOTE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actors/obuf.h"
#include "augur.h"

#define PS_SERVER_PORT(i) ((au_port_t)(AU_PORT_RESERVED + (i)))
#define PS_WORKER_PORT(i) ((au_port_t)(AU_PORT_RESERVED + 0x1000 + (i)))
#define PS_PLACER_PORT    ((au_port_t)(AU_PORT_RESERVED + 0x2000))
#define PS_MAX_SERVERS    0x1000
#define PS_MAX_WORKERS    0x1000

/* A worker's remote state: the rows fetched for the running step and what it sends. */
typedef struct wremote {
  struct rslot {
    uint64_t key;
    int32_t table; /* -1: empty */
    uint32_t ready;
    size_t off; /* row bytes in arena */
  } * slots;
  size_t mask, count;
  uint8_t *arena;
  size_t arena_len, arena_cap;
  int pending;   /* request messages of this step not answered yet */
  int link_wait; /* waiting for a congested link to drain */
  int failed;    /* AU_E* from a server, ends the step */
  int nbufs;     /* nodes * tables the buffers below are sized for */
  obuf_t *req;   /* by node * ntables + table: [u32 table][u32 n][keys] */
  obuf_t *push;  /* by node * ntables + table: [u32 table][u32 n][keys][deltas] */
} wremote_t;

struct au_worker;
struct au_table;

/* Looks up (table, key) in the step's fetched rows: the row, or NULL (and then asks its
 * owner for it, once). */
void *remote_row(struct au_worker *w, struct au_table *t, au_key_t key, int *requested);
/* Sends the requests the step built; AU_EAGAIN when some were sent (wait for replies),
 * or when a link is congested (wait for it to drain). */
int remote_send_requests(struct au_worker *w);
/* Queues a delta for a row held by another node. */
int remote_push(struct au_worker *w, struct au_table *t, au_key_t key, const void *delta);
/* After a step: sends the pushes; forgets the fetched rows unless the step waits. */
void remote_step_done(struct au_worker *w, int waiting);
/* The worker got a PS_ROWS or PS_ERR message: 1 when the step can be re-run. */
int remote_on_reply(struct au_worker *w, const au_msg_t *m);
void remote_free(struct au_worker *w);

/* Server actors (one per scheduler thread) answer requests and apply pushes. */
int remote_start_servers(au_node_t *node);
void remote_free_servers(au_node_t *node);
/* A server's step epoch (odd while it handles a message), for hand-off grace periods. */
uint64_t remote_server_epoch(const au_node_t *node, int server);
/* Serves a request or push (PS_REQ / PS_PUSH payload) whose keys are all here; scratch
 * holds an aligned copy of a delta. */
void remote_serve_local(au_node_t *node, uint32_t type, const uint8_t *payload, size_t len,
                        obuf_t *scratch);
/* Calls fn for each key of a PS_FWD_* message, as a one-key message of `type`. */
typedef void (*remote_one_fn)(void *arg, struct au_table *t, uint64_t actor, const au_msg_t *m,
                              uint32_t type, const uint8_t *one, uint32_t len);
void remote_split(au_node_t *node, const au_msg_t *m, uint32_t type, remote_one_fn fn, void *arg);

/* placement.c: the node's placer actor (relocation of parameter actors) */
int placement_start(au_node_t *node);
void placement_free(au_node_t *node);
/* A server or the placer changed values of a replicated actor owned here: the placer
 * must send them on before the node may count as idle (replica.c). */
void placement_touched(au_node_t *node);
/* The placer has replica syncs or held messages to finish: the node is not idle. */
int placer_busy(const au_node_t *node);
/* Adds the placer's counters (moves, forwards, syncs) to st. */
void placement_stats(const au_node_t *node, au_node_stats_t *st);

#endif
