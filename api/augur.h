/* augur.h — the one public header of augur, an adaptive parameter server built as an
 * actor runtime.
 *
 * This part is the general actor runtime: a runtime owns S scheduler threads and one
 * I/O thread; actors are spawned into it, receive messages one at a time (never two
 * threads in one actor), send messages, arm timers and stop. Functions that can fail
 * return 0 or a negative AU_E* code; au_strerror() names it.
 *
 * Conventions: names are au_<noun>_<verb>; create/destroy allocate and free, start/stop
 * begin and end activity (an actor's stop also frees it); a created object comes back
 * through the last parameter; step results (AU_CONTINUE..AU_DONE) are positive, apart
 * from the error codes; fields named au__* are internal.
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
#define AU_EAGAIN    (-11)  /* values are not local yet: return AU_WAIT from the step */
#define AU_EDEADLK   (-35)  /* au_node_run: workers wait for something that cannot come */
#define AU_ERANGE    (-34)  /* a key is outside the table */
#define AU_ENOENT    (-2)   /* no actor is registered at that port */
#define AU_EPROTO    (-71)  /* a peer spoke another protocol or was refused */
#define AU_ETIMEDOUT (-110) /* the cluster did not form in time */
#define AU_ENODE     (-113) /* a node of the cluster was lost */
#define AU_EIO       (-5)   /* a file could not be read or written, or is not what it should be */

const char *au_strerror(int err);

/* --- messages --------------------------------------------------------------------------
 * What goes wrong where no return value can say it (a peer refused or lost, a malformed
 * message from the network, memory running out on the I/O thread, a worker misusing a
 * view) is reported as a one-line message. By default each goes to stderr as
 * "augur[rank R]: text" ("augur: text" when it names no node); a program that embeds
 * augur can take them instead, e.g. into its own log. See docs/architecture.md. */

typedef enum au_log_level {
  AU_LOG_ERROR = 0, /* something failed: a run, a message or a node is lost */
  AU_LOG_WARN = 1,  /* something was refused or dropped, and the node goes on */
  AU_LOG_INFO = 2,  /* worth knowing; nothing was lost */
} au_log_level_t;

/* Receives one message: `rank` is the node it concerns (its rank in the cluster) or -1,
 * `msg` one line without a newline, valid during the call. Called from whichever thread
 * reports it (a scheduler thread, the I/O thread, the caller's), one call at a time:
 * calls never overlap, so it needs no lock. It must return soon and must not call
 * au_log_set; a message it causes itself goes to stderr. */
typedef void (*au_log_fn)(void *arg, au_log_level_t level, int rank, const char *msg);

/* From now on the library's messages go to fn(arg, ...), NULL restores stderr. For the
 * whole process (messages may come before any runtime exists); safe from any thread,
 * and once it returns the previous function is never called again. */
void au_log_set(au_log_fn fn, void *arg);

typedef struct au_runtime au_runtime_t;
typedef struct au_actor au_actor_t;

/* A message. Allocated from per-thread pools; the runtime owns it. A behaviour may
 * read it until it returns and must not keep the pointer afterwards. */
typedef struct au_msg {
  void *au__next;     /* internal: mailbox link */
  au_actor_t *sender; /* the local actor whose behaviour sent it; NULL when it came from
                       * another node or from outside any behaviour */
  uint32_t type;      /* chosen by the sender; the runtime never looks at it */
  uint32_t len;       /* bytes in data */
  uint32_t from_node; /* rank of the node it came from (this node's rank when local) */
  uint16_t from_port; /* port of the sending actor (AU_NO_PORT if it has none) */
  uint16_t au__class; /* internal: pool size class */
  _Alignas(16) unsigned char data[]; /* payload, 16-byte aligned */
} au_msg_t;

/* Ports name actors across nodes: (node rank, port) is an actor's address in a
 * cluster. User programs use ports below AU_PORT_RESERVED; the parameter server uses
 * the rest. */
typedef uint16_t au_port_t;
#define AU_NO_PORT       ((au_port_t)0xffff)
#define AU_PORT_RESERVED ((au_port_t)0xc000)

/* A behaviour handles one message. `state` is the actor's own state block. */
typedef void (*au_behaviour_t)(au_actor_t *self, void *state, au_msg_t *msg);

typedef struct au_runtime_opts {
  int threads;        /* scheduler threads; 0 = online cores */
  int batch;          /* messages an actor handles per turn before it yields; 0 = 64 */
  int keep_denormals; /* 1: keep IEEE subnormals; 0 (default): scheduler threads flush
                       * them to zero (FTZ/DAZ), which keeps SGD from slowing down 2-10x
                       * as regularization drives values toward zero */
} au_runtime_opts_t;

/* Counters of one scheduler thread. */
typedef struct au_sched_stats {
  uint64_t runs;   /* actor turns */
  uint64_t msgs;   /* messages handled */
  uint64_t steals; /* actors taken from another thread's deque */
  uint64_t parks;  /* times the thread went to sleep for lack of work */
} au_sched_stats_t;

/* Creates a runtime and starts its I/O thread. opts may be NULL. */
int au_runtime_create(const au_runtime_opts_t *opts, au_runtime_t **rt);

/* Runs the scheduler threads until the runtime is quiescent (no actor has a message,
 * no timer is armed) or au_runtime_stop() is called. May be called again afterwards.
 * Returns 0, AU_EBUSY if already running, or AU_ENODE when it ended because a node of
 * the cluster was lost. In a cluster the runtime is never quiescent: the network may
 * always bring a message, so a run ends by au_runtime_stop (or a lost node). */
int au_runtime_run(au_runtime_t *rt);

/* Makes au_runtime_run() return soon. Safe from any thread, including behaviours.
 * Messages still queued stay queued for the next au_runtime_run(). A stop requested
 * while no run is in progress makes the next au_runtime_run() return at once. */
void au_runtime_stop(au_runtime_t *rt);

/* Stops the I/O thread and frees every actor, message and timer. Not while running. */
void au_runtime_destroy(au_runtime_t *rt);

int au_runtime_threads(const au_runtime_t *rt);

/* Copies per-thread counters into out[0..n-1] (n = au_runtime_threads()). Exact after
 * au_runtime_run() returns; approximate while it runs. */
void au_runtime_stats(const au_runtime_t *rt, int n, au_sched_stats_t *out);

/* Spawns an actor with a zeroed state block of state_size bytes. Safe from any thread,
 * including behaviours. The actor runs when it first receives a message. */
int au_actor_spawn(au_runtime_t *rt, au_behaviour_t fn, size_t state_size, au_actor_t **out);

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

/* --- clusters --------------------------------------------------------------------------
 * Several processes (nodes), on one machine or many, form a cluster: a full TCP mesh. An
 * actor's address in a cluster is (node rank, port). See docs/cluster.md. */

typedef struct au_cluster_opts {
  int rank;             /* this node, 0..nodes-1 */
  int nodes;            /* nodes in the cluster */
  char coord[256];      /* "host:port" where rank 0 listens and the others join */
  char cluster[65];     /* cluster id: nodes of different clusters refuse each other */
  char bind[64];        /* where this node listens: an address, a host name or an interface
                         * ("eth0"); "": rank 0 on coord's address, the others on the address
                         * from which their host reaches coord */
  char secret[256];     /* shared secret proven by HMAC-SHA256 at each connection; "" = none,
                         * which a node listening off loopback refuses unless insecure */
  int insecure;         /* AU_INSECURE=1: off loopback without a secret all the same */
  int port_lo, port_hi; /* AU_PORTS=LO-HI: the ranks but 0 listen on a port in it (0: any) */
  int timeout_ms;       /* forming the cluster must finish within this (0 = 30000) */
  int heartbeat_ms;     /* send something to each peer at least this often (0 = 500) */
  int dead_ms;          /* a peer silent this long is lost (0 = 5000) */
  long queue_bytes;     /* bytes queued to one peer before senders are asked to wait
                         * (au_link_wait); they resume below a quarter of it (0 = 4 MiB) */
} au_cluster_opts_t;

/* Fills o from the environment: AU_RANK, AU_NODES, AU_COORD (host:port, a name or an
 * address, IPv6 as [addr]:port; and AU_CLUSTER, AU_BIND,
 * AU_SECRET, AU_INSECURE, AU_PORTS, AU_TIMEOUT in seconds), else from the launcher: OpenMPI
 * (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/SIZE) or Slurm (SLURM_PROCID/NTASKS).
 * AU_QUEUE_BYTES sets queue_bytes, AU_DEAD_MS dead_ms (and heartbeat_ms a tenth of it, at
 * most 500).
 * Returns 1 when it describes a cluster of 2 or more nodes, 0 for a single embedded node,
 * or AU_EINVAL with a message naming the variable in err. */
int au_cluster_opts_from_env(au_cluster_opts_t *o, char *err, size_t errlen);

/* Joins the cluster: blocks until every node is connected to every other (a barrier),
 * or fails with AU_ETIMEDOUT, AU_EPROTO or AU_ENODE and a message in err. Then
 * au_runtime_run serves messages from other nodes until stopped; au_runtime_destroy
 * leaves the cluster cleanly. */
int au_runtime_join(au_runtime_t *rt, const au_cluster_opts_t *o, char *err, size_t errlen);
int au_runtime_rank(const au_runtime_t *rt);  /* 0 when not in a cluster */
int au_runtime_nodes(const au_runtime_t *rt); /* 1 when not in a cluster */

/* Gives actor a the port on this node; before messages for it can arrive. */
int au_port_register(au_runtime_t *rt, au_port_t port, au_actor_t *a);
/* Sends to the actor at (node, port): this node or another. Per-sender FIFO holds
 * across nodes too. Never blocks and never drops; see au_link_wait. 0, AU_ENOENT (no
 * actor at a local port), AU_ENODE, AU_EINVAL. */
int au_send_to(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, const void *data,
               size_t len);
/* Zero-copy au_send_to: returns len bytes (16-byte aligned) to fill, then
 * au_send_to_finish sends them. NULL with ob->rc set on error. */
typedef struct au_outbuf {
  int rc;            /* the error, when au_send_to_start returned NULL */
  au_msg_t *au__msg; /* internal, as the rest */
  au_runtime_t *au__rt;
  au_actor_t *au__to;
  uint32_t au__node;
} au_outbuf_t;
void *au_send_to_start(au_runtime_t *rt, uint32_t node, au_port_t port, uint32_t type, size_t len,
                       au_outbuf_t *ob);
int au_send_to_finish(au_outbuf_t *ob);

/* Backpressure, for an actor about to send much to `node`: returns 1 when the outgoing
 * queue to it is full, and then `self` receives an empty message of `type` once it has
 * drained; 0 when it may go on sending. */
int au_link_wait(au_actor_t *self, uint32_t node, uint32_t type);
/* Collective (every node calls it, from outside behaviours, in the same order, with the
 * same n): element-wise sum of v[0..n-1] over all nodes, left in v on every node. Any n:
 * it goes as reductions of at most 2^20 values each. */
int au_allreduce_sum(au_runtime_t *rt, double *v, size_t n);

/* --- tracing ---------------------------------------------------------------------------
 * Placement and scheduler events (relocations, replicas, remote accesses, forwards,
 * steals, parks) recorded per thread, cheap enough to leave on, and written as Chrome
 * trace-event JSON that Perfetto (ui.perfetto.dev) and chrome://tracing open; `augur trace
 * summary FILE...` prints counts and latencies. See docs/tracing.md. For a node, pass
 * au_node_runtime(node). */

/* Starts recording in memory; au_trace_stop writes the file. Any time, also during a run.
 * In a cluster each node writes path.RANK (decided when it stops). AU_TRACE_MAX_EVENTS
 * caps the events kept (default 4194304, 40 bytes each); events past it are counted as
 * dropped. 0, AU_EINVAL (already on, no path, a directory that cannot be written or a bad
 * AU_TRACE_MAX_EVENTS: prints why), AU_ENOMEM. */
int au_trace_start(au_runtime_t *rt, const char *path);
/* Stops recording and writes the JSON file. Not during a run: between au_runtime_run or
 * au_node_run calls, or before au_runtime_destroy (which stops and writes a trace still
 * on). 0, AU_EBUSY (a run is in progress; still recording), AU_EINVAL (not recording, or
 * the file could not be written: prints why). */
int au_trace_stop(au_runtime_t *rt);
/* 1 while recording. */
int au_trace_enabled(const au_runtime_t *rt);
/* Records a span of the program's own work, such as an epoch: it began at begin_ns
 * (au_now_ns) and ends now; the trace draws it as a slice called `name` (copied; 1 to 31
 * bytes, longer names are not recorded) on the calling thread's track, with n as its
 * argument ("n"), so that placement events line up with training in a viewer. A no-op
 * while not recording; up to 12 names per runtime, spans of further names are not
 * recorded. Any thread. */
void au_trace_span(au_runtime_t *rt, const char *name, uint64_t n, uint64_t begin_ns);

/* ======================================================================================
 * The parameter server: nodes, tables, worker actors.
 *
 * A node is one process. It holds tables of parameters — keys 0..K-1, each a row of
 * `dim` values — grouped into parameter actors (contiguous key ranges), the unit that
 * is placed, relocated and replicated. Workers are actors that run a user's step
 * function over their own data shard; they read rows in place while a step runs, push
 * deltas through the table's update kernel, and announce which keys they will touch in
 * which future clocks (intents).
 * ====================================================================================== */

typedef struct au_node au_node_t;
typedef struct au_table au_table_t;
typedef struct au_worker au_worker_t;
typedef uint64_t au_key_t;
typedef int64_t au_clock_t;

/* What a worker's read may miss of the others' updates (docs/workers.md, "Consistency").
 * Clocks are the workers' own (au_worker_clock). */
typedef enum au_consistency {
  AU_ASYNC = 0, /* reads see what has arrived: replicas within sync_ms, no clock bound */
  AU_SSP = 1,   /* stale synchronous parallel: a read at clock c sees every update any worker
                   made at clocks <= c - staleness - 1 (a read that would not waits) */
  AU_BSP = 2,   /* bulk synchronous: AU_SSP with staleness 0, no worker reads at clock c + 1
                   before every worker has finished clock c */
} au_consistency_t;

/* "async", "ssp:S" (S = 0..1000000) or "bsp" -> model and staleness (0 unless ssp); 0 or
 * AU_EINVAL. au_consistency_name writes the same form into buf (at least 24 bytes). */
int au_consistency_parse(const char *text, au_consistency_t *model, int *staleness);
const char *au_consistency_name(au_consistency_t model, int staleness, char *buf, size_t len);

typedef struct au_node_opts {
  int threads;                  /* scheduler threads; 0 = online cores */
  int keep_denormals;           /* see au_runtime_opts_t */
  int sync_ms;                  /* replicas ship deltas and get fresh values every this many ms:
                                   their staleness bound (1..1000; 0 = 2) */
  au_consistency_t consistency; /* AU_ASYNC (default), AU_SSP or AU_BSP, for every run; every
                                   node of a cluster must give the same (au_node_create
                                   fails with AU_EINVAL otherwise). Under AU_SSP and
                                   AU_BSP parameter actors do not relocate (docs/workers.md) */
  int staleness;                /* AU_SSP: S, in clocks (0..1000000) */
} au_node_opts_t;

/* Starts a node (its runtime and I/O thread). opts may be NULL. When the environment
 * describes a cluster (au_cluster_opts_from_env: AU_RANK/AU_NODES/AU_COORD, mpirun,
 * srun), joins it first: then every node must create the same tables in the same order,
 * and au_node_run, au_allreduce_sum and au_node_destroy are collective. A bad environment
 * or a failure to join prints why and returns the error. */
int au_node_create(const au_node_opts_t *opts, au_node_t **node);
/* Runs every worker that is ready or paused until each is done or paused (see the step
 * results below). Returns 0, the first negative result a step returned, or AU_EDEADLK
 * if workers still wait (AU_WAIT) when nothing else can run. */
int au_node_run(au_node_t *node);
/* Frees the node with its tables and workers. Not while au_node_run runs. */
void au_node_destroy(au_node_t *node);
au_runtime_t *au_node_runtime(au_node_t *node);
int au_node_rank(const au_node_t *node);  /* 0..nodes-1 */
int au_node_nodes(const au_node_t *node); /* nodes in the cluster, 1 alone */

/* --- tables --------------------------------------------------------------------------- */

typedef enum au_type { AU_F32 = 1, AU_I32 = 2 } au_type_t;

typedef enum au_init {
  AU_INIT_ZERO = 0,
  AU_INIT_CONST,   /* every value = init_a */
  AU_INIT_UNIFORM, /* uniform in [init_a, init_b) */
  AU_INIT_NORMAL,  /* normal, mean init_a, standard deviation init_b */
} au_init_t;

typedef enum au_kernel {
  AU_KERNEL_ADD = 0, /* exact: int32 fetch_add, float CAS on the bit pattern */
  AU_KERNEL_HOGWILD, /* plain vectorized add; a racing update to the same value may be
                      * lost (Hogwild!); never torn. See docs/tables.md. */
  AU_KERNEL_CUSTOM,  /* kernel_fn below */
} au_kernel_t;

/* A user kernel applies `delta` (dim values of the table's type) to `row`. It may run
 * on several threads at once for the same row: it must be atomic per value or accept
 * lost updates, as the built-in kernels do. */
typedef void (*au_kernel_fn)(void *row, const void *delta, uint32_t dim, void *arg);

/* Where a table's parameter actors live across nodes (docs/cluster.md, "Placement").
 * Every node of a cluster must give a table the same placement. */
typedef enum au_place {
  AU_PLACE_CLASSIC = 0,   /* each stays on its home node; others fetch and push rows */
  AU_PLACE_REPLICATE = 1, /* every node that needs rows keeps a replica for the run */
  AU_PLACE_RELOCATE = 2,  /* ownership moves to the node that needs the rows */
  /* The next two act on intents (au_worker_intent) and fetch rows like classic otherwise. */
  AU_PLACE_HOT = 3,      /* the `hot` most intended parameter actors (or those au_table_hot
                            names) replicated on every node that intends them, for the run;
                            the others placed as AU_PLACE_ADAPTIVE places them */
  AU_PLACE_ADAPTIVE = 4, /* per actor: intended by one node -> moved there; by several at
                            once -> a replica on each; intents over -> replicas dropped */
} au_place_t;

/* "classic", "replicate", "relocate", "hot", "adaptive" <-> au_place_t. The parse
 * returns 0 or AU_EINVAL; the name of an unknown value is "?". */
int au_place_parse(const char *name, au_place_t *out);
const char *au_place_name(au_place_t place);

/* What au_view_update and au_worker_push take for a table, and how it reaches the row
 * (docs/tables.md, "Optimizers"). With an optimizer the row carries the optimizer's
 * state ("slots", float32 each) right after its dim values, as part of the row's bytes:
 * relocation and replication carry it like the values. Float32 tables only. */
typedef enum au_optim {
  AU_OPTIM_NONE = 0, /* updates are deltas, added by the table's kernel */
  /* updates are gradients g of the loss; the row descends: */
  AU_OPTIM_SGD = 1,         /* row -= lr * g; no slots */
  AU_OPTIM_ADAGRAD = 2,     /* per value: G_j += g_j^2, row_j -= lr * g_j / sqrt(G_j); dim slots */
  AU_OPTIM_ADAGRAD_ROW = 3, /* one accumulator per row (LIBMF's): row -= lr / sqrt(G) * g, then
                               G += mean(g^2); one slot */
} au_optim_t;

/* "none", "sgd", "adagrad", "adagrad-row" <-> au_optim_t (0 or AU_EINVAL; "?" unknown). */
int au_optim_parse(const char *name, au_optim_t *out);
const char *au_optim_name(au_optim_t optim);

typedef struct au_table_opts {
  uint64_t keys;  /* key space 0..keys-1 */
  uint32_t dim;   /* values per key (a row) */
  au_type_t type; /* AU_F32 or AU_I32 */
  au_init_t init;
  double init_a, init_b;
  uint64_t seed; /* initial values depend on (seed, key) only */
  au_kernel_t kernel;
  au_kernel_fn kernel_fn; /* for AU_KERNEL_CUSTOM */
  void *kernel_arg;
  uint32_t group;     /* keys per parameter actor, a power of two; 0 = about 4 KiB of values */
  au_place_t place;   /* AU_PLACE_CLASSIC (default), _REPLICATE, _RELOCATE, _HOT, _ADAPTIVE */
  const char *name;   /* for messages and traces; copied */
  uint64_t hot;       /* AU_PLACE_HOT: how many parameter actors count as hot (intents name
                         actors; each node counts its own); 0 = 1% of the actors. Not
                         used once the application names them (au_table_hot) */
  au_optim_t optim;   /* AU_OPTIM_NONE (default): updates are deltas; else gradients */
  float lr;           /* the optimizer's learning rate (> 0 with an optimizer) */
  float optim_init;   /* AU_OPTIM_ADAGRAD*: the accumulators' first value (0 = 1.0); it bounds
                         the first steps at lr / sqrt(optim_init) */
  uint32_t row_align; /* bytes, a power of two up to 4096: each row (values and slots) is
                         padded to a multiple of it and starts at such an address (0 = 4: no
                         padding); e.g. 64 for rows read with 512-bit vectors */
} au_table_opts_t;

int au_table_create(au_node_t *node, const au_table_opts_t *opts, au_table_t **table);
uint64_t au_table_keys(const au_table_t *t);
uint32_t au_table_dim(const au_table_t *t);
uint32_t au_table_group(const au_table_t *t);
/* Optimizer slots per row (0, 1 or dim; see au_optim_t), stored after the dim values. */
uint32_t au_table_slots(const au_table_t *t);
/* Bytes from one row to the next in the table's storage: values and slots, padded to the
 * row alignment (au_table_opts_t.row_align). */
size_t au_table_row_bytes(const au_table_t *t);
/* Sets the optimizer's learning rate, e.g. per epoch. Between runs (not while
 * au_node_run runs); on a cluster every node sets the same. 0 or AU_EINVAL (no optimizer,
 * or lr not > 0). */
int au_table_set_lr(au_table_t *t, float lr);
/* AU_PLACE_HOT: the application names the hot keys (e.g. the most rated columns, from its
 * own data); the parameter actors that hold them are hot, and this node no longer counts
 * intents to find them. Each node names its own (normally all the same). Between runs;
 * n = 0 goes back to counting. 0, AU_EINVAL (not a hot table), AU_ERANGE (a bad key) or
 * AU_ENOMEM; on an error nothing changes. */
int au_table_hot(au_table_t *t, const au_key_t *keys, size_t n);
/* Bytes this node uses for the table: values, parameter-actor descriptors, the table. */
size_t au_table_memory(const au_table_t *t);
/* Reads rows from outside any worker (e.g. main, between au_node_run calls): copies
 * n rows into out. AU_ERANGE for a bad key, AU_EAGAIN if a row is not on this node. */
int au_table_read(au_table_t *t, const au_key_t *keys, size_t n, void *out);
/* The same for the rows' optimizer slots: n * au_table_slots() floats into out. */
int au_table_read_slots(au_table_t *t, const au_key_t *keys, size_t n, float *out);
/* Checkpoints (docs/checkpoints.md). Collective, between runs (every node calls it, with
 * the same arguments): each node writes the parameter actors it owns, values and optimizer
 * slots, of every table into DIR/ckpt-CLOCK/part-RANK.bin; rank 0 writes the manifest and
 * then DIR/LATEST, each under a temporary name renamed into place, so a crash leaves the
 * previous checkpoint whole. The cut is consistent: between runs nothing is in flight
 * and every replica has synced. Unless `full`, a checkpoint after one this node wrote into
 * the same DIR is incremental: it holds only the actors whose values changed since (by a
 * checksum per actor) or that moved, and names the last one as its base; a restore
 * replays the chain. Id tables' resident rows are written whole every time and restored
 * from the newest checkpoint (docs/tables.md). Checkpoints into one DIR go forward: a
 * clock not after this node's last one there is AU_EINVAL (nothing written). 0, or AU_EIO /
 * AU_ENOMEM with a message in err (on every node: "another node failed" where the cause
 * was elsewhere). */
int au_checkpoint(au_node_t *node, const char *dir, uint64_t clock, int full, char *err,
                  size_t errlen);
/* Collective, after creating the same tables (names, keys, dim, optimizer) and before the
 * first run: every node reads the checkpoint DIR/LATEST names (or DIR itself, if it is
 * one) and takes the rows whose actors it owns, bit for bit, whatever node count and
 * placement wrote it. DIR must be readable by every node (one host, or a shared file
 * system). *clock (may be NULL) gets the checkpoint's clock. Every part of the chain is
 * checked on every node before any table changes, so a refused restore leaves the tables
 * as they were. 0, or AU_EIO / AU_EINVAL (the tables differ) / AU_ENOMEM with a message in
 * err. */
int au_restore(au_node_t *node, const char *dir, uint64_t *clock, char *err, size_t errlen);
/* The same with each written key put where map(arg, table, key) says (a key of the table,
 * or any larger value to leave the row out): for programs whose keys depend on the node
 * count (augur-mf's column keys follow its block layout). */
typedef au_key_t (*au_restore_map_fn)(void *arg, const au_table_t *t, au_key_t written);
/* The checkpoint au_restore reads from DIR: its directory into path (cap bytes) and the
 * number of nodes that wrote it, for programs that keep their own state beside the
 * tables (augur-mf's row factors, augur-lda's topics). 0, AU_EIO (none there), or AU_EINVAL
 * (DIR's path is longer than au_checkpoint takes, 4000 bytes). */
int au_checkpoint_find(const char *dir, char *path, size_t cap, int *nodes);
int au_restore_map(au_node_t *node, const char *dir, au_restore_map_fn map, void *arg,
                   uint64_t *clock, char *err, size_t errlen);
/* Removes from DIR the checkpoints no restore needs any more: every DIR/ckpt-N (with its
 * files) older than the keep-th newest full checkpoint, so that DIR holds the last `keep`
 * full checkpoints and the incremental ones after them (a chain never reaches further
 * back). keep 0 removes nothing. Any node, between runs, after au_checkpoint: on a shared
 * file system several nodes may do it at once. *removed (may be NULL) gets how many went.
 * 0, AU_EINVAL (keep < 0, no DIR) or AU_EIO with a message in err. */
int au_checkpoint_prune(const char *dir, int keep, int *removed, char *err, size_t errlen);

/* 1 if this node owns the key's parameter actor (a replica is held, not owned), 0 if not,
 * AU_ERANGE for a bad key. Between runs every key has exactly one owner in the cluster:
 * reductions over a table that may have replicas count the owners' rows only. */
int au_table_owns(const au_table_t *t, au_key_t key);

/* --- id tables -------------------------------------------------------------------------
 * Rows keyed by arbitrary 64-bit ids that appear at run time (docs/tables.md, "Id
 * tables"): an id hashes into a bucket of `bucket` rows; past a doorkeeper (its first
 * push), it gets a row on its `admit`-th counted push (counted exactly, in its bucket,
 * until then; a count may be forgotten, never overstated), initialized as a dense
 * table's key would be (from seed and id); when its bucket is full, the bucket's
 * least frequently (LFU) or least recently (LRU) used row gives way, or first one not
 * used for `ttl` clocks. `budget` bytes bound everything the table allocates on this
 * node: it fixes the buckets, which are allocated on first use. Rows carry their
 * optimizer state as dense tables' do. Any thread may call the functions below at once
 * (a lock per bucket).
 *
 * On a cluster, an id hashes into the same parameter actor on every node (a group of
 * buckets; its home node holds its rows at first, `budget` bytes on each node):
 * au_ids_create is collective there (every node, in the same order, with the same
 * options; any placement: relocate moves an actor to the node whose workers pull its ids,
 * replicate copies it there, hot and adaptive act on au_worker_ids_intent; placements
 * other than classic need the async consistency model), workers reach every id with
 * au_worker_ids_pull and
 * au_worker_ids_push (below the workers), and the functions here act on this node's own
 * ids: AU_EAGAIN, with nothing done, for an id another node holds (au_ids_owner). */
typedef struct au_ids au_ids_t;

typedef enum au_evict {
  AU_EVICT_LFU = 0, /* fewest uses since the row was made (ties: least recent, then slot) */
  AU_EVICT_LRU = 1, /* least recent clock of use (ties: fewest uses, then slot) */
} au_evict_t;

typedef struct au_ids_opts {
  /* the rows: dim, type, init, init_a, init_b, seed, kernel (kernel_fn, kernel_arg),
     optim, lr, optim_init, row_align, name, place and hot as for a dense table; keys and
     group are not used */
  au_table_opts_t row;
  size_t budget;    /* bytes on this node, index and counts included */
  uint32_t admit;   /* pushes that make an id a row, <= 255 (0 or 1: the first) */
  au_evict_t evict; /* AU_EVICT_LFU (default) or AU_EVICT_LRU */
  uint64_t ttl;     /* clocks: a row unused for ttl clocks is dropped (0 = never; < 2^31) */
  uint32_t bucket;  /* rows per bucket, a power of two 8..256 (0 = 64) */
  int no_door;      /* 1: no doorkeeper, an id's first push counts (see docs/tables.md) */
} au_ids_opts_t;

/* Maps the budget's buckets at once (their pages come on first use). 0, AU_EINVAL (bad
 * options, or on a cluster options that differ between nodes, with a message) or
 * AU_ENOMEM (the system would not commit the budget). */
int au_ids_create(au_node_t *node, const au_ids_opts_t *opts, au_ids_t **ids);
/* The rank of the node that holds the id's row, as far as this node knows (0 on one
 * node; under AU_PLACE_RELOCATE its actor may have moved on since). */
int au_ids_owner(const au_ids_t *t, uint64_t id);
/* Applies n updates (n * dim values: deltas, or gradients with an optimizer) at `clock`
 * (the caller's: a worker's clock, a batch number). An id without a row is counted
 * towards admission; its update is dropped until it is admitted (counted `rejected`).
 * 0 or AU_EINVAL (a NULL argument). */
int au_ids_push(au_ids_t *t, const uint64_t *ids, size_t n, const void *updates, uint64_t clock);
/* Copies n rows' values (n * dim) into out; an id without a row reads its initial values
 * (and is not made a row). A read is a use (LFU, LRU, TTL). 0, AU_EINVAL or AU_ENOMEM. */
int au_ids_pull(au_ids_t *t, const uint64_t *ids, size_t n, void *out, uint64_t clock);
/* The same as au_ids_pull, but not a use: a row's uses and last clock stay as they are
 * (for saving or evaluating a model without changing what eviction and expiry see), and
 * an id without a row is not counted a miss. */
int au_ids_read(au_ids_t *t, const uint64_t *ids, size_t n, void *out);
/* 1 if the id has a row on this node, else 0 (also for another node's id). Not a use. */
int au_ids_contains(au_ids_t *t, uint64_t id);
/* The same as au_ids_pull for the rows' optimizer slots (n * slots floats), not a use. */
int au_ids_read_slots(au_ids_t *t, const uint64_t *ids, size_t n, float *out);
/* Calls fn for every row held here (values, dim of them), bucket by bucket, each under
 * its bucket's lock: fn must not call into the table. Stops at fn's first nonzero return
 * and returns it; else 0. */
typedef int (*au_ids_each_fn)(void *arg, uint64_t id, const void *values);
int au_ids_foreach(au_ids_t *t, au_ids_each_fn fn, void *arg);

typedef struct au_ids_stats {
  uint64_t rows;                  /* held now */
  uint64_t capacity;              /* buckets * bucket */
  uint64_t buckets, buckets_used; /* buckets, and those allocated so far */
  uint64_t admitted;              /* rows made */
  uint64_t evicted;               /* rows that gave way to a new id in a full bucket */
  uint64_t expired;               /* rows dropped for ttl */
  uint64_t rejected;              /* updates dropped: the id was below the admission count */
  uint64_t misses;                /* reads of ids without a row */
  uint64_t candidates;            /* ids counted towards admission now */
  uint64_t forgotten;             /* candidates dropped to make room for another */
  size_t memory;                  /* bytes allocated now (<= budget) */
  size_t row_bytes;               /* raw bytes of a row: (dim + slots) * 4 */
} au_ids_stats_t;
void au_ids_stats(au_ids_t *t, au_ids_stats_t *out);
uint32_t au_ids_dim(const au_ids_t *t);
uint32_t au_ids_slots(const au_ids_t *t);

/* --- workers -------------------------------------------------------------------------- */

/* What a step returns: positive, so that a step result is never mistaken for a call's
 * 0 or negative AU_E* code. */
enum {
  AU_CONTINUE = 1, /* run the next step (after other actors had their turn) */
  AU_WAIT = 2,     /* re-run this step when what it waits for arrives (after AU_EAGAIN) */
  AU_PAUSE = 3,    /* stop until the next au_node_run */
  AU_DONE = 4,     /* finished for good */
};
/* A step must not block. A step that returns AU_WAIT is re-run from its start, so what
 * it does before the call that said AU_EAGAIN must be safe to repeat. A negative value
 * is an error: the worker stops and au_node_run returns it; 0 (or any other value) is a
 * mistake, reported as AU_EINVAL. */
typedef int (*au_step_fn)(au_worker_t *w, void *arg);

typedef struct au_worker_opts {
  au_step_fn step;
  void *arg;
} au_worker_opts_t;

/* Spawns a worker; it first runs in the next au_node_run. Not while running. */
int au_worker_spawn(au_node_t *node, const au_worker_opts_t *opts, au_worker_t **w);
int au_worker_id(const au_worker_t *w); /* 0.. in spawn order on this node */
au_node_t *au_worker_node(const au_worker_t *w);

/* The worker's logical clock: starts at 0; the worker advances it, usually once per step
 * or batch. Intents name windows of this clock. */
au_clock_t au_worker_clock(const au_worker_t *w);
void au_worker_advance(au_worker_t *w);

/* "This worker will access these keys in clocks [start, end)." Idempotent for the same
 * (keys, window). AU_EINVAL for an empty or inverted window, AU_ERANGE for a bad key. */
int au_worker_intent(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                     au_clock_t start, au_clock_t end);

/* Zero-copy access: between au_view_acquire and au_view_release, within one step, row i of the
 * view points at the values of keys[i] in place. The fields are read-only to users;
 * au_view_row and au_view_update are inline because they sit in the innermost loops. */
typedef struct au_view {
  void **rows; /* row i, held by the worker until the step returns */
  size_t n;
  uint32_t dim;
  int au__inline;          /* internal: 1 + au_optim_t when updates run inline (Hogwild
                              float32), else 0 (see au_view_update) */
  float au__lr;            /* internal: the optimizer's learning rate */
  au_kernel_fn au__kernel; /* internal: the kernel for deltas, NULL with an optimizer */
  void *au__kernel_arg;
  const uint8_t *au__remote; /* internal: row i was fetched from another node, or NULL */
  const au_key_t *au__keys;
  au_worker_t *au__worker;
  au_table_t *au__table;
} au_view_t;

/* Internal: applies an update to a row fetched from another node (kept for the step)
 * and queues it for the row's owner. */
void au__view_update_remote(const au_view_t *v, size_t i, const void *update);
/* Internal: applies an update through the table's optimizer (not inline). */
void au__view_update_optim(const au_view_t *v, size_t i, const void *update);

/* 0, AU_EAGAIN (not all rows local yet: return AU_WAIT; the step is re-run when they
 * are), AU_ERANGE or AU_ENOMEM. */
int au_view_acquire(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n, au_view_t *v);
void au_view_release(au_worker_t *w, au_view_t *v);

static inline void *au_view_row(const au_view_t *v, size_t i)
{
  return v->rows[i];
}

/* 1 when every row of the view is held on this node (owned or a replica): its rows may
 * then be updated in place with the table's own arithmetic (what au_view_update does);
 * 0 when some were fetched from another node, whose updates must go through
 * au_view_update so that they reach the owner. */
static inline int au_view_local(const au_view_t *v)
{
  return v->au__remote == NULL;
}

/* 1 when row i of the view is held on this node: it may be updated in place as above;
 * 0 when it was fetched from another node (its updates go through au_view_update). */
static inline int au_view_row_local(const au_view_t *v, size_t i)
{
  return v->au__remote == NULL || !v->au__remote[i];
}

/* ThreadSanitizer builds take the kernel call (its relaxed-atomic variant) instead of
 * the inline Hogwild loop, which is a deliberate data race. */
#if defined(__SANITIZE_THREAD__)
#define AU__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AU__TSAN 1
#endif
#endif

/* Applies an update to row i: a delta through the table's kernel (AU_OPTIM_NONE), or a
 * gradient through its optimizer. A Hogwild float32 table's update runs inline, as a loop
 * the compiler vectorizes. */
static inline void au_view_update(const au_view_t *v, size_t i, const void *update)
{
  if (v->au__remote && v->au__remote[i]) {
    au__view_update_remote(v, i, update);
    return;
  }
#ifndef AU__TSAN
  if (v->au__inline) {
    float *restrict r = (float *)v->rows[i];
    const float *restrict g = (const float *)update;
    const uint32_t dim = v->dim;
    const float lr = v->au__lr;
    switch (v->au__inline - 1) {
    case AU_OPTIM_NONE:
      for (uint32_t j = 0; j < dim; j++) r[j] += g[j];
      return;
    case AU_OPTIM_SGD:
      for (uint32_t j = 0; j < dim; j++) r[j] -= lr * g[j];
      return;
    case AU_OPTIM_ADAGRAD_ROW: {
      /* the rate from the accumulator as it was; eight partial sums vectorize */
      const float eta = lr / __builtin_sqrtf(r[dim]);
      float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      uint32_t j = 0;
      for (; j + 8 <= dim; j += 8)
        for (uint32_t l = 0; l < 8; l++) {
          r[j + l] -= eta * g[j + l];
          s[l] += g[j + l] * g[j + l];
        }
      for (; j < dim; j++) {
        r[j] -= eta * g[j];
        s[0] += g[j] * g[j];
      }
      r[dim] += (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))) / (float)dim;
      return;
    }
    case AU_OPTIM_ADAGRAD:
      for (uint32_t j = 0; j < dim; j++) {
        const float G = r[dim + j] + g[j] * g[j];
        r[dim + j] = G;
        r[j] -= lr * g[j] / __builtin_sqrtf(G);
      }
      return;
    default:
      break;
    }
  }
#endif
  if (v->au__kernel)
    v->au__kernel(v->rows[i], update, v->dim, v->au__kernel_arg);
  else
    au__view_update_optim(v, i, update);
}

/* Copy-out read: n rows into out (n * dim values). 0, AU_EAGAIN or AU_ERANGE. */
int au_worker_pull(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n, void *out);
/* Applies updates (n * dim values: deltas, or gradients for a table with an optimizer)
 * through the table's kernel and optimizer. 0 or AU_ERANGE; never AU_EAGAIN: updates to
 * rows held elsewhere are sent there (the owner applies them). */
int au_worker_push(au_worker_t *w, au_table_t *t, const au_key_t *keys, size_t n,
                   const void *deltas);

/* An id table from a worker's step, on one node or a cluster: au_ids_pull and au_ids_push
 * at the worker's clock for any ids. Ids another node holds are fetched from it for the
 * step (AU_EAGAIN until they are here: return AU_WAIT; the step is re-run, and the
 * fetched rows stay for it) and their updates go to it after the step, where the owner
 * counts, admits and applies them as au_ids_push does. A pull's uses of this node's ids
 * are counted when it succeeds (a call that says AU_EAGAIN counts none), a fetched id's
 * when its owner answers. 0, AU_EAGAIN,
 * AU_EINVAL or AU_ENOMEM. */
int au_worker_ids_pull(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n, void *out);
int au_worker_ids_push(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n,
                       const void *updates);
/* au_worker_intent for an id table: this worker will pull or push these ids in clocks
 * [start, end); an id table placed hot or adaptive acts on it as a dense table does on
 * its keys' actors (others count it). A pull of an id whose actor has a replica here
 * reads the replica (the owner's values as last synced, the initializer's for an id
 * without a row there); pushes always go to the owner, which alone counts, admits,
 * evicts and applies. 0, AU_EINVAL or AU_ENOMEM. */
int au_worker_ids_intent(au_worker_t *w, au_ids_t *t, const uint64_t *ids, size_t n,
                         au_clock_t start, au_clock_t end);

/* Counters of a node's workers, summed. Exact between au_node_run calls. */
typedef struct au_node_stats {
  uint64_t steps;         /* step calls */
  uint64_t rows_local;    /* rows acquired, pulled or pushed that were on this node */
  uint64_t rows_remote;   /* rows that had to come from, or go to, another node */
  uint64_t intents;       /* au_worker_intent calls */
  uint64_t intent_keys;   /* keys named in them */
  uint64_t intent_sparse; /* actors adaptive intents named too sparsely to claim: their
                           * rows are fetched (keys named * clocks < keys per actor) */
  uint64_t moves_in;      /* parameter actors that moved to this node */
  uint64_t moves_out;     /* parameter actors that moved away */
  uint64_t forwards;      /* rows re-sent toward an actor that had moved */
  uint64_t syncs;         /* replica deltas shipped to owners */
  uint64_t replicas;      /* replicas held here now */
  uint64_t replicas_made, replicas_dropped; /* replicas this node received / let go */
  uint64_t claims;     /* intents passed on to owners as claims (AU_PLACE_HOT/_ADAPTIVE) */
  uint64_t releases;   /* claims ended early: this node's workers were past the actor */
  uint64_t bytes_sent; /* payload bytes this node sent to other nodes */
  /* the parameter server's part of bytes_sent, by what the messages were for (the
   * rest: messages of the program's own actors; the counters are kept per message type
   * in 32 slots, so should a program's type share a slot with one of the parameter
   * server's and be sent before it, that one's bytes are in the rest too): */
  uint64_t bytes_fetch;   /* rows fetched: requests and their replies */
  uint64_t bytes_push;    /* updates pushed to rows held elsewhere */
  uint64_t bytes_move;    /* relocations: moved actors' rows, owner news, wants */
  uint64_t bytes_replica; /* replicas: their rows, deltas synced, fresh rows, drops */
  uint64_t bytes_control; /* intents, claims, hints, barriers, clocks */
  /* AU_SSP / AU_BSP: reads that had to wait for the bound (au_worker_sync said AU_EAGAIN),
   * and the time they waited in all */
  uint64_t reads_waited;
  uint64_t wait_ns;
} au_node_stats_t;
void au_node_stats(const au_node_t *node, au_node_stats_t *out);

/* Under AU_SSP or AU_BSP (au_node_opts_t): 0 when a read at the worker's clock may go on,
 * AU_EAGAIN when some update it must see has not reached this node yet (return AU_WAIT;
 * the step is re-run when it has). au_view_acquire and au_worker_pull ask it themselves;
 * a step calls it first when it must not take something else (a block of work) while it
 * waits. Always 0 under AU_ASYNC. */
int au_worker_sync(au_worker_t *w);
/* Advances the worker's clock to `clock` if it is behind (e.g. each epoch from a clock all
 * workers share, so that under AU_SSP a worker with less work per epoch does not fall
 * behind the others for good). */
void au_worker_advance_to(au_worker_t *w, au_clock_t clock);

/* Barrier over all workers of the node that are not done: 0 once every one has arrived,
 * AU_EAGAIN before (return AU_WAIT; the step is re-run when the last one arrives). */
int au_worker_barrier(au_worker_t *w);

#ifdef __cplusplus
}
#endif
#endif /* AUGUR_H */
