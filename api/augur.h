/* augur.h — the one public header of augur, an adaptive parameter server built as an
 * actor runtime.
 *
 * This part is the general actor runtime: a runtime owns S scheduler threads and one
 * I/O thread; actors are spawned into it, receive messages one at a time (never two
 * threads in one actor), send messages, arm timers and stop. Functions that can fail
 * return 0 or a negative AU_E* code; au_strerror() names it.
 */
#ifndef AUGUR_H
#define AUGUR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AU_VERSION_MAJOR 0
#define AU_VERSION_MINOR 1

/* Error codes: negative ints, like libuv. */
#define AU_EINVAL    (-22)  /* an argument is out of range */
#define AU_ENOMEM    (-12)  /* allocation failed */
#define AU_EBUSY     (-16)  /* the runtime is already running */
#define AU_ESHUTDOWN (-108) /* the runtime is being destroyed */

const char *au_strerror(int err);

typedef struct au_runtime au_runtime_t;
typedef struct au_actor au_actor_t;

/* A message. Allocated from per-thread pools; the runtime owns it. A behaviour may
 * read it until it returns and must not keep the pointer afterwards. */
typedef struct au_msg {
  void *au__next;     /* internal: mailbox link */
  au_actor_t *sender; /* the actor whose behaviour sent it, or NULL from outside */
  uint32_t type;      /* chosen by the sender; the runtime never looks at it */
  uint32_t len;       /* bytes in data */
  uint32_t au__class; /* internal: pool size class */
  uint32_t au__pad;
  _Alignas(16) unsigned char data[]; /* payload, 16-byte aligned */
} au_msg_t;

/* A behaviour handles one message. `state` is the actor's own state block. */
typedef void (*au_behaviour_t)(au_actor_t *self, void *state, au_msg_t *msg);

typedef struct au_runtime_opts {
  int threads; /* scheduler threads; 0 = online cores */
  int batch;   /* messages an actor handles per turn before it yields; 0 = 64 */
} au_runtime_opts_t;

/* Counters of one scheduler thread. */
typedef struct au_sched_stats {
  uint64_t runs;   /* actor turns */
  uint64_t msgs;   /* messages handled */
  uint64_t steals; /* actors taken from another thread's deque */
  uint64_t parks;  /* times the thread went to sleep for lack of work */
} au_sched_stats_t;

/* Creates a runtime and starts its I/O thread. opts may be NULL. */
int au_runtime_create(au_runtime_t **rt, const au_runtime_opts_t *opts);

/* Runs the scheduler threads until the runtime is quiescent (no actor has a message,
 * no timer is armed) or au_runtime_stop() is called. May be called again afterwards.
 * Returns 0, or AU_EBUSY if already running. */
int au_runtime_run(au_runtime_t *rt);

/* Makes au_runtime_run() return soon. Safe from any thread, including behaviours.
 * Messages still queued stay queued for the next au_runtime_run(). */
void au_runtime_stop(au_runtime_t *rt);

/* Stops the I/O thread and frees every actor, message and timer. Not while running. */
void au_runtime_destroy(au_runtime_t *rt);

int au_runtime_threads(const au_runtime_t *rt);

/* Copies per-thread counters into out[0..n-1] (n = au_runtime_threads()). Exact after
 * au_runtime_run() returns; approximate while it runs. */
void au_runtime_stats(const au_runtime_t *rt, au_sched_stats_t *out, int n);

/* Spawns an actor with a zeroed state block of state_size bytes. Safe from any thread,
 * including behaviours. The actor runs when it first receives a message. */
int au_actor_spawn(au_runtime_t *rt, au_actor_t **out, au_behaviour_t fn, size_t state_size);

void *au_actor_state(au_actor_t *a);
au_runtime_t *au_actor_runtime(au_actor_t *a);

/* Called by an actor's own behaviour: the actor stops after this message, drops what
 * is still in its mailbox and is freed. Nobody may send to it afterwards: whoever
 * holds its address must know by the protocol that it has stopped. */
void au_actor_stop(au_actor_t *self);

/* Copies len bytes of data into a pooled message and delivers it to `to`.
 * Safe from any thread. Per-sender FIFO: two messages from one sender to one actor
 * arrive in the order they were sent. */
int au_send(au_actor_t *to, uint32_t type, const void *data, size_t len);

/* Zero-copy variant: allocate, fill msg->data, then au_msg_send() (which takes it). */
au_msg_t *au_msg_alloc(au_runtime_t *rt, uint32_t type, size_t len);
void au_msg_send(au_actor_t *to, au_msg_t *msg);

/* Timers run on the I/O thread and deliver a message of `type` with an empty payload to
 * `to` after timeout_ms and then, if repeat_ms > 0, every repeat_ms (millisecond
 * resolution, libuv's). An armed timer keeps the runtime from being quiescent. */
typedef uint64_t au_timer_id_t;
int au_timer_start(au_runtime_t *rt, au_actor_t *to, uint32_t type, uint64_t timeout_ms,
                   uint64_t repeat_ms, au_timer_id_t *id);
/* Disarms a timer. The stop takes effect on the I/O thread: a message already
 * delivered stays delivered, and an id that already fired (one-shot) or was stopped is
 * ignored. AU_EINVAL for id 0, which no timer has. */
int au_timer_stop(au_runtime_t *rt, au_timer_id_t id);

/* Monotonic clock in nanoseconds. */
uint64_t au_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* AUGUR_H */
