/* io.h — the I/O thread (io.c): one libuv loop per runtime, a command queue that any
 * thread posts to, timers; and one extension slot, through which the cluster transport
 * adds its commands and hooks, so that io.c names nothing above it.
 */
#ifndef AUGUR_RUNTIME_IO_H
#define AUGUR_RUNTIME_IO_H

#include "runtime/rt.h"

/* Commands for the I/O thread (a message's type); from IO_CMD_EXT up, the extension's. */
enum {
  IO_CMD_TIMER_START = 1,
  IO_CMD_TIMER_STOP,
  IO_CMD_QUIT,
  IO_CMD_EXT = 100,
};

/* What an extension adds to the I/O thread. Every hook runs on the I/O thread. */
typedef struct io_ext {
  void (*on_cmd)(au_runtime_t *rt, au_msg_t *m); /* a command >= IO_CMD_EXT; takes m */
  void (*after_batch)(au_runtime_t *rt);         /* after each batch of commands */
  void (*on_quit)(au_runtime_t *rt);             /* told to stop: close your handles */
} io_ext_t;

/* au_runtime_create / au_runtime_destroy: start and stop the thread. */
int io_start(au_runtime_t *rt);
void io_stop(au_runtime_t *rt);

/* Any thread: hands m to the I/O thread (m->type is an IO_CMD_*), which frees it. Only
 * the post that finds the queue empty wakes the thread (one eventfd write). Posted at
 * once: commands from all threads reach the I/O thread in the order they were posted,
 * and the cluster's protocols rely on it (a frame posted before something another
 * thread then sees goes out before what that thread posts next). Gathering a turn's
 * frames and posting them at its end broke this: pushes were lost in cluster_intents
 * under TSan (4 of 12 runs). */
void io_post_msg(au_runtime_t *rt, au_msg_t *m);

/* Any thread: io_post_msg of a pooled copy of data. 0 or AU_ENOMEM. */
int io_post(au_runtime_t *rt, uint32_t type, const void *data, size_t len);

/* Installs the runtime's one extension (ext outlives the runtime), before the first of its
 * commands is posted. 0 (also when ext is installed already), AU_EBUSY if another is. */
int io_extend(au_runtime_t *rt, const io_ext_t *ext);

#endif
