/* data.h — data sets for augur-mf: a ratings array, external-id → dense-index maps,
 * loaders for the common rating file formats, a synthetic low-rank generator, and a
 * seeded split and shuffle. libc and libm only; no global state.
 *
 * The one invariant: every rating's row and col are dense indices (0..n-1) into the
 * id maps the ratings were loaded through, so factor tables can be plain arrays.
 * Everything random is a pure function of its seed (own PRNG, never rand()).
 * See docs/mf-data.md.
 */
#ifndef AUGUR_DEMOS_MF_DATA_H
#define AUGUR_DEMOS_MF_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Errors: 0 or one of these; mf_strerror() names them. Loaders also write a message
 * for people into their err buffer. */
enum {
  MF_EIO = -1,    /* file could not be opened or read */
  MF_EPARSE = -2, /* malformed input */
  MF_ENOMEM = -3, /* allocation failed */
  MF_EINVAL = -4, /* bad argument (unknown format name, impossible generator options) */
  MF_ERANGE = -5, /* more than MF_IDMAP_MAX distinct ids */
};
const char *mf_strerror(int err);
/* Internal to data.c and generate.c: formats a message into err (which may be NULL). */
void mf__set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- ratings ---------------------------------------------------------------------- */

typedef struct {
  uint32_t row, col; /* dense indices */
  float value;
} mf_rating_t;

/* Growable array; zero-initialise (`mf_ratings_t r = {0};`) before first use. */
typedef struct {
  mf_rating_t *r;
  size_t n, cap;
} mf_ratings_t;

/* Make room for at least cap ratings in total. 0 or MF_ENOMEM. */
int mf_ratings_reserve(mf_ratings_t *r, size_t cap);
/* Append one rating, growing geometrically. 0 or MF_ENOMEM. */
int mf_ratings_push(mf_ratings_t *r, uint32_t row, uint32_t col, float value);
/* Frees the array and leaves r empty and reusable. */
void mf_ratings_free(mf_ratings_t *r);

/* ---- id maps ---------------------------------------------------------------------- */

#define MF_IDMAP_MAX 0xfffffffeu /* most distinct ids one map holds */
#define MF_NO_ID     UINT64_MAX  /* ids[] of a dense index that no rating has (shard.c) */

typedef struct {
  uint64_t id;
  uint32_t index1; /* dense index + 1; 0 = empty slot */
} mf_idmap_slot_t;

/* External 64-bit id → dense index in first-seen order, plus the reverse array.
 * Small ids (below ndirect, which grows with n but stays under 8 * n + 65536) are
 * looked up in a plain array, the rest in an open-addressing table (linear probing,
 * load factor at most 1/2, the id stored in the slot): either way one cache miss per
 * lookup. Zero-initialise before first use. ids[i] is the external id of dense index
 * i, for i < n. The other fields are the map's own. */
typedef struct {
  uint64_t *ids; /* dense → external, n used of cap */
  size_t n, cap;
  uint32_t *direct; /* id < ndirect: direct[id] = dense index + 1, 0 = absent */
  size_t ndirect;
  mf_idmap_slot_t *slots; /* ids >= ndirect; mask + 1 slots (a power of two) */
  size_t mask, nhashed;
} mf_idmap_t;

/* Dense index of id: 1 and *index set if present, 0 if not. */
int mf_idmap_find(const mf_idmap_t *m, uint64_t id, uint32_t *index);
/* Dense index of id, adding it as index n if new. 0, MF_ENOMEM or MF_ERANGE. */
int mf_idmap_insert(mf_idmap_t *m, uint64_t id, uint32_t *index);
/* Resets m to the identity map 0..n-1 (for generated data, whose ids are indices).
 * 0, MF_ENOMEM or MF_ERANGE. */
int mf_idmap_init_identity(mf_idmap_t *m, size_t n);
void mf_idmap_free(mf_idmap_t *m);

/* ---- file formats ----------------------------------------------------------------- */

typedef enum {
  MF_FMT_AUTO,    /* by file name, then by the first line; see mf_format_detect */
  MF_FMT_CSV,     /* MovieLens ratings.csv: [header,] user,item,rating[,timestamp] */
  MF_FMT_UDATA,   /* MovieLens 100k u.data: user item rating [timestamp], tab-separated */
  MF_FMT_DAT,     /* MovieLens 1M/10M ratings.dat: user::item::rating[::timestamp] */
  MF_FMT_TRIPLES, /* LIBMF text: row col value, whitespace-separated, '#' comments */
  MF_FMT_MM,      /* Matrix Market coordinate real/integer, general/symmetric, 1-based */
} mf_format_t;

/* --format names: auto csv udata dat triples mm. 0, or MF_EINVAL for anything else. */
int mf_format_parse(const char *name, mf_format_t *out);
const char *mf_format_name(mf_format_t fmt);
/* The format MF_FMT_AUTO picks for path: by name (*.csv; u.data or *.data; *.dat;
 * *.mtx or *.mm), else by the first non-blank, non-'#' line (%%MatrixMarket → MM,
 * containing "::" → DAT, containing ',' → CSV, four blank-separated fields → UDATA),
 * else TRIPLES. Never MF_FMT_AUTO. */
mf_format_t mf_format_detect(const char *path);

/* Appends the ratings of the file at path to out, mapping row ids through rows and
 * column ids through cols. With add_new_ids, unseen ids are added to the maps (in
 * first-seen order); without, a rating with an unseen row or column id is skipped and
 * counted in *skipped (which may be NULL; it is set, not accumulated).
 *
 * Returns 0, or MF_EIO, MF_EPARSE, MF_ENOMEM, MF_ERANGE with a one-line message in err
 * ("PATH:LINE: expected 'row col value', got 'abc'"; err may be NULL). On failure out
 * is restored to its length on entry; the maps may keep ids from the partial read. */
int mf_load(const char *path, mf_format_t fmt, mf_idmap_t *rows, mf_idmap_t *cols, int add_new_ids,
            mf_ratings_t *out, size_t *skipped, char *err, size_t errlen);

/* One rating with its ids as the file has them: 0, or MF_ENOMEM to stop. */
typedef int (*mf_rating_fn)(void *arg, uint64_t row_id, uint64_t col_id, float value);
/* Reads part `part` of `nparts` of the file's bytes, cut at line starts (a line belongs to
 * the part in which it starts, so the parts together read every line once), and hands
 * each rating to fn, ids unmapped. Every format; of a Matrix Market file every part reads
 * the header (banner, comments, size line) and cuts the bytes after it, and since its
 * entry count can only be checked over all parts, *mm_entries (may be NULL) gets the
 * entries this part read and *mm_nnz the count the size line declares (both 0 for the
 * other formats). 0, or MF_EIO, MF_EPARSE ("PATH: the line at byte B: expected ..."; in
 * part 0 "PATH:LINE: ..."), MF_ENOMEM, MF_EINVAL. */
int mf_load_part(const char *path, mf_format_t fmt, int part, int nparts, mf_rating_fn fn,
                 void *arg, uint64_t *mm_entries, uint64_t *mm_nnz, char *err, size_t errlen);

/* ---- generator -------------------------------------------------------------------- */

#define MF_GEN_MIN_PER_AUTO UINT32_MAX

/* Synthetic ratings: value = p_row · q_col + N(0, sigma²), with truth factors whose
 * entries are i.i.d. normal with variance 1/sqrt(rank), so p·q has variance ~1. */
typedef struct {
  uint32_t rows, cols; /* matrix size */
  size_t nnz;          /* ratings to generate (duplicate (row, col) pairs possible) */
  uint32_t rank;       /* rank of the truth */
  double sigma;        /* noise standard deviation */
  double row_skew;     /* power-law exponent a: the k-th most popular row (k from 0) */
  double col_skew;     /* is drawn with weight 1/(k+1)^a; 0 = uniform */
  uint32_t min_per;    /* ratings every row and every column gets first, before the
                          popularity draws; 0 = none; MF_GEN_MIN_PER_AUTO = 2 * rank.
                          Lowered to nnz / (rows + cols) when nnz is too small. */
  uint64_t seed;
} mf_gen_opts_t;

/* rows 20000, cols 5000, nnz 5000000, rank 8, sigma 0.1, skews 0.8, min_per auto,
 * seed 1. */
void mf_gen_opts_default(mf_gen_opts_t *o);
/* 0, or MF_EINVAL with a message in err (may be NULL) saying which option is wrong. */
int mf_gen_opts_check(const mf_gen_opts_t *o, char *err, size_t errlen);
/* Appends o->nnz ratings to out, in random order; *nrows, *ncols (either may be NULL)
 * get o->rows, o->cols. Same options, same ratings. 0, MF_EINVAL (see
 * mf_gen_opts_check) or MF_ENOMEM (out unchanged). */
int mf_generate(const mf_gen_opts_t *o, mf_ratings_t *out, uint32_t *nrows, uint32_t *ncols);

/* ---- random numbers --------------------------------------------------------------- */

/* xoshiro256** seeded by splitmix64: the demos' one PRNG, a pure function of its seed. */
typedef struct {
  uint64_t s[4];
  double spare; /* second Box-Muller normal, valid when has_spare */
  int has_spare;
} mf_rng_t;
void mf_rng_seed(mf_rng_t *r, uint64_t seed);
/* 64 random bits. */
uint64_t mf_rng_next(mf_rng_t *r);
/* Standard normal (Box-Muller). */
double mf_rng_normal(mf_rng_t *r);
/* A 64-bit hash of x (splitmix64's step): what seeds the PRNG, for hashing ids. */
uint64_t mf_hash64(uint64_t x);

/* ---- split and shuffle ------------------------------------------------------------ */

/* Appends each rating of all, in order, to train or test: test gets round(n *
 * test_ratio) ratings chosen uniformly by seed, except that a rating stays in train
 * when moving it would leave its row or column without training ratings (then test
 * gets slightly fewer). all is not modified. 0 or MF_ENOMEM. */
int mf_split(const mf_ratings_t *all, double test_ratio, uint64_t seed, mf_ratings_t *train,
             mf_ratings_t *test);
/* The same split without a copy: the test ratings move from all to test, and all keeps
 * the training ratings (in order, its memory shrunk to them): the training set costs no
 * second array. 0 or MF_ENOMEM (then all is unchanged). */
int mf_split_inplace(mf_ratings_t *all, double test_ratio, uint64_t seed, mf_ratings_t *test);
/* Fisher–Yates shuffle of r, a pure function of seed. */
void mf_shuffle(mf_ratings_t *r, uint64_t seed);

#endif
