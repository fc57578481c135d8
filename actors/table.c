/* table.c — tables: a key space cut into parameter actors of `group` consecutive keys,
 * their values, initializers, and copy-out reads.
 *
 * The invariant: a key's initial values depend only on (seed, key), never on the group
 * size, the thread count or the node count, so every placement starts from the same
 * model and runs are reproducible.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/ps.h"

#define DEFAULT_GROUP_BYTES 4096

static uint64_t splitmix64(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* uniform in (0, 1): 53 random bits, never 0 (log() below) */
static double unit(uint64_t *s)
{
  return ((double)(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* A key's first values and optimizer slots. */
void table_init_row(const au_table_t *t, const au_table_opts_t *o, au_key_t key, void *row)
{
  for (uint32_t j = 0; j < t->nslots; j++) ((float *)row)[o->dim + j] = t->optim_init;
  if (o->init == AU_INIT_ZERO) return;
  uint64_t s = o->seed ^ (key * 0xd1342543de82ef95ULL);
  splitmix64(&s);
  if (o->init == AU_INIT_UNIFORM && o->type == AU_F32) {
    /* the loop below's values to the bit, each draw from its own state (the j-th call
       of splitmix64 sees s + (j + 1) * its step): no chain from one value to the next,
       so an id table's new rows (one a push with 10^8 distinct ids) are made faster */
    const double a = o->init_a, w = o->init_b - o->init_a;
    float *r = row;
    for (uint32_t j = 0; j < o->dim; j++) {
      uint64_t z = s + (uint64_t)(j + 1) * 0x9e3779b97f4a7c15ULL;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      r[j] = (float)(a + w * (((double)(z >> 11) + 0.5) * (1.0 / 9007199254740992.0)));
    }
    return;
  }
  for (uint32_t j = 0; j < o->dim; j++) {
    double x;
    switch (o->init) {
    case AU_INIT_CONST:
      x = o->init_a;
      break;
    case AU_INIT_UNIFORM:
      x = o->init_a + (o->init_b - o->init_a) * unit(&s);
      break;
    case AU_INIT_NORMAL:
      /* Box-Muller, one value per pair: simple and independent of dim's parity */
      x = o->init_a + o->init_b * sqrt(-2.0 * log(unit(&s))) * cos(6.283185307179586 * unit(&s));
      break;
    default:
      x = 0;
      break;
    }
    if (o->type == AU_F32)
      ((float *)row)[j] = (float)x;
    else
      ((int32_t *)row)[j] = (int32_t)llround(fmin(fmax(x, INT32_MIN), INT32_MAX));
  }
}

int table_check_opts(const au_table_opts_t *o)
{
  if (!o || o->keys == 0 || o->dim == 0 || o->dim > (1u << 20)) return AU_EINVAL;
  if (o->row_align & (o->row_align - 1) || o->row_align > 4096) return AU_EINVAL;
  if (o->optim < AU_OPTIM_NONE || o->optim > AU_OPTIM_ADAGRAD_ROW) return AU_EINVAL;
  if (o->optim != AU_OPTIM_NONE &&
      (o->type != AU_F32 || o->kernel == AU_KERNEL_CUSTOM || !(o->lr > 0) || !(o->optim_init >= 0)))
    return AU_EINVAL;
  if (o->type != AU_F32 && o->type != AU_I32) return AU_EINVAL;
  if (o->init < AU_INIT_ZERO || o->init > AU_INIT_NORMAL) return AU_EINVAL;
  if (o->init == AU_INIT_UNIFORM && !(o->init_b > o->init_a)) return AU_EINVAL;
  if (o->init == AU_INIT_NORMAL && !(o->init_b >= 0)) return AU_EINVAL;
  if (o->kernel == AU_KERNEL_CUSTOM
          ? !o->kernel_fn
          : (o->kernel != AU_KERNEL_ADD && o->kernel != AU_KERNEL_HOGWILD))
    return AU_EINVAL;
  if (o->group & (o->group - 1)) return AU_EINVAL; /* not a power of two */
  if (o->place < AU_PLACE_CLASSIC || o->place > AU_PLACE_ADAPTIVE) return AU_EINVAL;
  return 0;
}

/* Zeroed storage for values, aligned to the rows' alignment. calloc when 16 bytes do:
 * zero pages are mapped lazily, so zero-initialized tables cost nothing. */
static void *values_alloc(const au_table_t *t, size_t bytes)
{
  if (t->row_align <= 16) return calloc(1, bytes);
  void *p = aligned_alloc(t->row_align, (bytes + t->row_align - 1) / t->row_align * t->row_align);
  if (p) memset(p, 0, bytes);
  return p;
}

static uint32_t default_group(const au_table_opts_t *o, size_t row_bytes)
{
  uint32_t g = 1;
  while ((size_t)g * 2 * row_bytes <= DEFAULT_GROUP_BYTES && (uint64_t)g * 2 <= o->keys) g *= 2;
  return g;
}

int au_table_create(au_node_t *node, const au_table_opts_t *opts, au_table_t **out)
{
  if (!node || !out) return AU_EINVAL;
  int rc = table_check_opts(opts);
  if (rc != 0) return rc;
  if (opts->place == AU_PLACE_RELOCATE && node_bounded(node)) {
    au__log(AU_LOG_ERROR, node->rank,
            "table %s: relocate placement needs the async consistency model (under ssp and "
            "bsp parameter actors do not move; replicate, hot and adaptive work)",
            opts->name ? opts->name : "table");
    return AU_EINVAL;
  }
  if (node->ntables >= 0x8000) { /* the placer's records keep a table's id in 15 bits */
    au__log(AU_LOG_ERROR, node->rank, "table %s: a node holds at most 32768 tables",
            opts->name ? opts->name : "table");
    return AU_EINVAL;
  }
  au_table_t *t = calloc(1, sizeof(*t));
  if (!t) return AU_ENOMEM;
  t->node = node;
  t->id = node->ntables;
  snprintf(t->name, sizeof(t->name), "%s", opts->name ? opts->name : "table");
  t->keys = opts->keys;
  t->dim = opts->dim;
  t->type = opts->type;
  t->optim = opts->optim;
  t->lr = opts->lr;
  t->optim_init = opts->optim_init > 0 ? opts->optim_init : 1.0f;
  t->nslots = opts->optim == AU_OPTIM_ADAGRAD ? opts->dim : opts->optim == AU_OPTIM_ADAGRAD_ROW;
  t->width = opts->dim + t->nslots;
  t->row_align = opts->row_align > 4 ? opts->row_align : 4;
  t->row_bytes = ((size_t)t->width * 4 + t->row_align - 1) / t->row_align * t->row_align;
  t->update_bytes = (size_t)opts->dim * 4;
  t->group = opts->group ? opts->group : default_group(opts, t->row_bytes);
  while ((1u << t->group_shift) < t->group) t->group_shift++;
  t->nactors = (opts->keys + t->group - 1) >> t->group_shift;
  t->kernel =
      opts->kernel == AU_KERNEL_CUSTOM ? opts->kernel_fn : kernel_for(opts->type, opts->kernel);
  t->kernel_arg = opts->kernel_arg;
  t->hogwild = opts->kernel == AU_KERNEL_HOGWILD;

  /* Each parameter actor starts on its home node, actor id mod nodes, which holds its
   * values; the others know where it is. Home actors are packed: slot = id / nodes. */
  uint64_t nodes = (uint64_t)node->nodes, rank = (uint64_t)node->rank;
  uint64_t owned = t->nactors / nodes + (rank < t->nactors % nodes ? 1 : 0);
  t->slots = owned;
  t->place = opts->place;
  /* hot: a count of parameter actors (intents name actors, not keys) */
  uint64_t hot = opts->hot ? opts->hot : (t->nactors + 99) / 100;
  t->hot_actors = hot < t->nactors ? hot : t->nactors;
  size_t group_bytes = (size_t)t->group * t->row_bytes;
  au_table_t **by_id = realloc(node->table_by_id, (size_t)(node->ntables + 1) * sizeof(*by_id));
  if (by_id) node->table_by_id = by_id;
  t->actors = calloc(t->nactors, sizeof(param_actor_t));
  if (t->place == AU_PLACE_RELOCATE) t->contended = calloc(t->nactors, 1);
  t->storage = values_alloc(t, (owned ? owned : 1) * group_bytes);
  if (!by_id || !t->actors || !t->storage || (t->place == AU_PLACE_RELOCATE && !t->contended)) {
    table_free(t);
    return AU_ENOMEM;
  }
  for (uint64_t a = 0; a < t->nactors; a++) {
    param_actor_t *pa = &t->actors[a];
    pa->owner = (uint32_t)(a % nodes);
    if (pa->owner == rank) {
      pa->values = (char *)t->storage + (a / nodes) * group_bytes;
      atomic_init(&pa->state, PA_OWNER);
    } else {
      pa->values = NULL;
      atomic_init(&pa->state, PA_REMOTE);
    }
  }
  if (opts->init != AU_INIT_ZERO || t->nslots)
    for (uint64_t a = rank; a < t->nactors; a += nodes)
      for (au_key_t k = a << t->group_shift; k < t->keys && k < (a + 1) << t->group_shift; k++)
        table_init_row(t, opts, k, table_row(t, k));

  node->table_by_id[node->ntables] = t;
  t->next = node->tables;
  node->tables = t;
  node->ntables++;
  *out = t;
  return 0;
}

static int is_home_slot(const au_table_t *t, uint64_t actor)
{
  return actor % (uint64_t)t->node->nodes == (uint64_t)t->node->rank;
}

/* Zeroed blocks kept for arriving actors: at most one per actor that is not at home here
 * (a node holds no more at once), so the list stays within what the node once held. */
static uint64_t zero_blocks_max(const au_table_t *t)
{
  return t->nactors - t->slots;
}

/* A home actor's (is_home_slot) packed slot: its place in storage, its bit in home_zero. */
static uint64_t home_slot(const au_table_t *t, uint64_t actor)
{
  return actor / (uint64_t)t->node->nodes;
}

/* The first of the kept zeroed blocks, off the list (its link left in its first word). */
static void *pop_zero_block(au_table_t *t)
{
  void *b = t->zero_blocks;
  memcpy(&t->zero_blocks, b, sizeof(void *));
  return b;
}

void *table_values_take(au_table_t *t, uint64_t actor, int *zero)
{
  size_t bytes = (size_t)t->group * t->row_bytes;
  *zero = 0;
  if (is_home_slot(t, actor)) {
    const uint64_t slot = home_slot(t, actor);
    const uint8_t bit = (uint8_t)(1u << (slot % 8));
    if (t->home_zero && (t->home_zero[slot / 8] & bit)) {
      *zero = 1;
      t->home_zero[slot / 8] &= (uint8_t)~bit;
    }
    return (char *)t->storage + slot * bytes;
  }
  if (t->zero_blocks) { /* an actor that left: zeroed as it went, but for the link */
    void *b = pop_zero_block(t);
    memset(b, 0, sizeof(void *));
    t->nzero_blocks--;
    *zero = 1;
    return b;
  }
  /* not zeroed: psm_values_copy writes every byte (zeroing first read each arriving
   * actor's 128 KiB twice at K = 1000) */
  if (t->row_align <= 16) return malloc(bytes);
  return aligned_alloc(t->row_align, (bytes + t->row_align - 1) / t->row_align * t->row_align);
}

void table_values_give(au_table_t *t, uint64_t actor, void *values, int zero)
{
  if (is_home_slot(t, actor)) {
    const uint64_t slot = home_slot(t, actor);
    if (zero && !t->home_zero) t->home_zero = calloc((t->slots + 7) / 8, 1);
    if (zero && t->home_zero) t->home_zero[slot / 8] |= (uint8_t)(1u << (slot % 8));
    return;
  }
  /* a block of at least a pointer's bytes (rows are whole 32-bit words: 8 at group 2) */
  if (zero && t->nzero_blocks < zero_blocks_max(t) &&
      (size_t)t->group * t->row_bytes >= sizeof(void *)) {
    memcpy(values, &t->zero_blocks, sizeof(void *));
    t->zero_blocks = values;
    t->nzero_blocks++;
    return;
  }
  free(values);
}

void table_free(au_table_t *t)
{
  /* values of actors that moved here from elsewhere are blocks of their own */
  for (uint64_t a = 0; t->actors && a < t->nactors; a++)
    if (t->actors[a].values && !is_home_slot(t, a)) free(t->actors[a].values);
  while (t->zero_blocks) free(pop_zero_block(t));
  free(t->home_zero);
  free(t->storage);
  free(t->actors);
  free((void *)t->contended);
  free((void *)t->hot_set);
  free(t);
}

uint64_t au_table_keys(const au_table_t *t)
{
  return t->keys;
}

uint32_t au_table_dim(const au_table_t *t)
{
  return t->dim;
}

uint32_t au_table_group(const au_table_t *t)
{
  return t->group;
}

uint32_t au_table_slots(const au_table_t *t)
{
  return t->nslots;
}

size_t au_table_row_bytes(const au_table_t *t)
{
  return t->row_bytes;
}

int au_table_set_lr(au_table_t *t, float lr)
{
  if (!t || t->optim == AU_OPTIM_NONE || !(lr > 0)) return AU_EINVAL;
  t->lr = lr;
  return 0;
}

int au_table_hot(au_table_t *t, const au_key_t *keys, size_t n)
{
  if (!t || t->place != AU_PLACE_HOT || (n && !keys)) return AU_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (keys[i] >= t->keys) return AU_ERANGE;
  if (n == 0) { /* back to counting, afresh at the next border */
    t->hot_min = 0;
    atomic_store(&t->hot_named, 0);
    return 0;
  }
  if (!t->hot_set && !(t->hot_set = calloc(t->nactors, 1))) return AU_ENOMEM;
  /* written in place, never freed before the table: on a cluster this node's placer may
   * serve the others' claims between its own runs (relaxed: a claim that reads the old
   * mark is decided again at the next) */
  for (uint64_t a = 0; a < t->nactors; a++)
    atomic_store_explicit(&t->hot_set[a], 0, memory_order_relaxed);
  for (size_t i = 0; i < n; i++)
    atomic_store_explicit(&t->hot_set[keys[i] >> t->group_shift], 1, memory_order_relaxed);
  atomic_store(&t->hot_named, 1);
  return 0;
}

static const char *const optim_names[] = {"none", "sgd", "adagrad", "adagrad-row"};

int au_optim_parse(const char *name, au_optim_t *out)
{
  for (int i = 0; name && i < (int)(sizeof(optim_names) / sizeof(optim_names[0])); i++)
    if (strcmp(name, optim_names[i]) == 0) {
      *out = (au_optim_t)i;
      return 0;
    }
  return AU_EINVAL;
}

const char *au_optim_name(au_optim_t optim)
{
  return optim >= AU_OPTIM_NONE && optim <= AU_OPTIM_ADAGRAD_ROW ? optim_names[optim] : "?";
}

size_t au_table_memory(const au_table_t *t)
{
  /* the home slots are allocated whether used or not; blocks that moved in come on top */
  size_t group_bytes = (size_t)t->group * t->row_bytes, held = t->slots * group_bytes;
  for (uint64_t a = 0; a < t->nactors; a++)
    if (t->actors[a].values && !is_home_slot(t, a)) held += group_bytes;
  held += t->nzero_blocks * group_bytes; /* kept for actors that arrive */
  return sizeof(*t) + t->nactors * sizeof(param_actor_t) + held;
}

/* Copies `count` words from word `first` of each row. */
static int read_words(au_table_t *t, const au_key_t *keys, size_t n, void *out, uint32_t first,
                      uint32_t count)
{
  if (!t || (n && (!keys || !out))) return AU_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (keys[i] >= t->keys) return AU_ERANGE;
  for (size_t i = 0; i < n; i++) {
    char *row = table_row(t, keys[i]);
    if (!row) return AU_EAGAIN;
    kernel_copy_row((char *)out + i * count * 4, row + (size_t)first * 4, count);
  }
  return 0;
}

int au_table_read(au_table_t *t, const au_key_t *keys, size_t n, void *out)
{
  return read_words(t, keys, n, out, 0, t ? t->dim : 0);
}

int au_table_read_slots(au_table_t *t, const au_key_t *keys, size_t n, float *out)
{
  return read_words(t, keys, n, out, t ? t->dim : 0, t ? t->nslots : 0);
}

int au_table_owns(const au_table_t *t, au_key_t key)
{
  if (!t || key >= t->keys) return AU_ERANGE;
  return atomic_load(&t->actors[key >> t->group_shift].state) == PA_OWNER;
}
