/* use.c — `augur-mf predict` and `augur-mf recommend`: a saved model (model.h) put to use,
 * in one process, no cluster. */
#include "use.h"

#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"

#define PROG "augur-mf"

static void predict_usage(FILE *f)
{
  fprintf(f, "usage: " PROG " predict MODEL RATINGS [--format F] [--out FILE]\n"
             "\n"
             "Predicts every rating of RATINGS with the model that `augur-mf --save MODEL`\n"
             "wrote, one line per rating 'row col rating prediction' (the file's ids), then\n"
             "  predict ratings=N skipped=S rmse=X\n"
             "(skipped: a row or column the model does not know).\n"
             "  --format F   auto csv udata dat triples mm (default auto)\n"
             "  --out FILE   the prediction lines into FILE instead of standard output\n"
             "Exit status: 0 done, 1 failed, 2 bad flags or input.\n");
}

static void recommend_usage(FILE *f)
{
  fprintf(f, "usage: " PROG " recommend MODEL --user ID [--top N] [--exclude TRAIN] [--format F]\n"
             "\n"
             "The N columns (items) with the highest predicted rating for row (user) ID, one\n"
             "line each, best first:  rank=1 item=ID score=X\n"
             "  --user ID       the row's id in the training file\n"
             "  --top N         how many (default 10)\n"
             "  --exclude FILE  leave out the items the user rated in FILE (e.g. the training\n"
             "                  file); --format F is its format (default auto)\n"
             "Exit status: 0 done, 1 failed, 2 bad flags or input.\n");
}

static int load_model(const char *dir, mf_model_t *m, mf_idmap_t *rows, mf_idmap_t *cols)
{
  char err[512];
  int rc = mf_model_load(dir, m, err, sizeof(err));
  if (rc) {
    fprintf(stderr, PROG ": %s\n", err);
    return rc == MF_ENOMEM ? 1 : 2;
  }
  if (mf_model_maps(m, rows, cols) != 0) {
    fprintf(stderr, PROG ": %s: out of memory for the id maps\n", dir);
    mf_model_free(m);
    return 1;
  }
  return 0;
}

int mf_predict_main(int argc, char **argv)
{
  cli_set_prog(PROG);
  const char *model = NULL, *ratings = NULL, *outp = NULL;
  mf_format_t fmt = MF_FMT_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      predict_usage(stdout);
      return 0;
    } else if (!strcmp(f, "--format")) {
      const char *v = i + 1 < argc ? argv[++i] : NULL;
      if (!v || mf_format_parse(v, &fmt) != 0)
        return cli_fail_flag(f, v, "one of auto csv udata dat triples mm");
    } else if (!strcmp(f, "--out")) {
      if (!(outp = i + 1 < argc ? argv[++i] : NULL)) return cli_fail_flag(f, "", "a file name");
    } else if (f[0] == '-' && f[1]) {
      return cli_unknown_flag(f);
    } else if (!model) {
      model = f;
    } else if (!ratings) {
      ratings = f;
    } else {
      fprintf(stderr, PROG " predict: MODEL and RATINGS only, got '%s' too\n", f);
      return 2;
    }
  }
  if (!model || !ratings) {
    predict_usage(stderr);
    return 2;
  }
  mf_model_t m;
  mf_idmap_t rows, cols;
  int rc = load_model(model, &m, &rows, &cols);
  if (rc) return rc;
  mf_ratings_t r = {0};
  size_t skipped = 0;
  char err[512];
  int status = 0;
  FILE *out = stdout;
  if ((rc = mf_load(ratings, fmt, &rows, &cols, 0, &r, &skipped, err, sizeof(err))) != 0) {
    fprintf(stderr, PROG ": %s\n", err);
    status = rc == MF_ENOMEM ? 1 : 2;
  } else if (r.n == 0) { /* (as training's --test: nothing to score is not a result) */
    fprintf(stderr, PROG ": %s: no rating of a known row and column (%zu skipped)\n", ratings,
            skipped);
    status = 2;
  } else if (outp && !(out = fopen(outp, "w"))) {
    fprintf(stderr, PROG ": --out %s: %s\n", outp, strerror(errno));
    status = 2; /* (a path the user gave) */
  }
  double sse = 0;
  for (size_t i = 0; status == 0 && i < r.n; i++) {
    const mf_rating_t *x = &r.r[i];
    const float p = mf_model_predict(&m, x->row, x->col);
    sse += (double)(p - x->value) * (double)(p - x->value);
    fprintf(out, "%llu %llu %.7g %.7g\n", (unsigned long long)m.row_ids[x->row],
            (unsigned long long)m.col_ids[x->col], x->value, p);
  }
  if (status == 0 && out != stdout && (ferror(out) | fclose(out))) {
    fprintf(stderr, PROG ": --out %s: write failed\n", outp);
    status = 1;
  }
  if (status == 0)
    printf("predict ratings=%zu skipped=%zu rmse=%.6f\n", r.n, skipped,
           r.n ? sqrt(sse / (double)r.n) : NAN);
  mf_ratings_free(&r);
  mf_idmap_free(&rows), mf_idmap_free(&cols);
  mf_model_free(&m);
  return cli_stdout_status(status);
}

typedef struct scored {
  float score;
  uint32_t col;
} scored_t;

static int better(const void *a, const void *b)
{
  const scored_t *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->col < y->col ? -1 : x->col > y->col;
}

int mf_recommend_main(int argc, char **argv)
{
  cli_set_prog(PROG);
  const char *model = NULL, *exclude = NULL;
  uint64_t user = 0, top = 10;
  int have_user = 0;
  mf_format_t fmt = MF_FMT_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    int rc = 0;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      recommend_usage(stdout);
      return 0;
    } else if (!strcmp(f, "--user")) {
      rc = cli_parse_u64(f, i + 1 < argc ? argv[++i] : NULL, 0, UINT64_MAX - 1, &user);
      have_user = 1;
    } else if (!strcmp(f, "--top")) {
      rc = cli_parse_u64(f, i + 1 < argc ? argv[++i] : NULL, 1, 1u << 30, &top);
    } else if (!strcmp(f, "--exclude")) {
      if (!(exclude = i + 1 < argc ? argv[++i] : NULL)) return cli_fail_flag(f, "", "a file name");
    } else if (!strcmp(f, "--format")) {
      const char *v = i + 1 < argc ? argv[++i] : NULL;
      if (!v || mf_format_parse(v, &fmt) != 0)
        return cli_fail_flag(f, v, "one of auto csv udata dat triples mm");
    } else if (f[0] == '-' && f[1]) {
      return cli_unknown_flag(f);
    } else if (!model) {
      model = f;
    } else {
      fprintf(stderr, PROG " recommend: one MODEL only, got '%s' too\n", f);
      return 2;
    }
    if (rc) return rc;
  }
  if (!model || !have_user) {
    recommend_usage(stderr);
    return 2;
  }
  mf_model_t m;
  mf_idmap_t rows, cols;
  int rc = load_model(model, &m, &rows, &cols), status = 0;
  if (rc) return rc;
  uint32_t u;
  scored_t *s = malloc((m.ncols ? m.ncols : 1) * sizeof(scored_t));
  uint8_t *rated = calloc(m.ncols ? m.ncols : 1, 1);
  mf_ratings_t r = {0};
  char err[512];
  if (!mf_idmap_find(&rows, user, &u)) {
    fprintf(stderr, PROG ": --user %llu: no such row in %s (its ids are in row_ids.txt)\n",
            (unsigned long long)user, model);
    status = 2;
  } else if (!s || !rated) {
    fprintf(stderr, PROG ": out of memory\n");
    status = 1;
  } else if (exclude && (rc = mf_load(exclude, fmt, &rows, &cols, 0, &r, NULL, err, sizeof(err)))) {
    fprintf(stderr, PROG ": %s\n", err);
    status = rc == MF_ENOMEM ? 1 : 2;
  }
  uint32_t n = 0;
  for (size_t i = 0; status == 0 && i < r.n; i++)
    if (r.r[i].row == u) rated[r.r[i].col] = 1;
  for (uint32_t c = 0; status == 0 && c < m.ncols; c++)
    if (!rated[c]) s[n++] = (scored_t){mf_model_predict(&m, u, c), c};
  if (status == 0) {
    qsort(s, n, sizeof(*s), better);
    for (uint32_t i = 0; i < n && i < top; i++)
      printf("rank=%u item=%llu score=%.6f\n", i + 1, (unsigned long long)m.col_ids[s[i].col],
             s[i].score);
  }
  free(s);
  free(rated);
  mf_ratings_free(&r);
  mf_idmap_free(&rows), mf_idmap_free(&cols);
  mf_model_free(&m);
  return cli_stdout_status(status);
}
