/* kernel_loop.h — the SGD loop of kernel.c, written once over a small vector vocabulary and
 * included once per instruction set (see kernel.c for the vocabulary: KVEC, KLOAD, KFMA,
 * ...). Every function carries KTARGET, so that the intrinsics compile inside it whatever
 * the file's own flags, and KNAME gives it the ISA's suffix. No include guard: meant to
 * be included several times; it undefines the vocabulary at its end, for the next ISA.
 */

/* p·q over k values. */
static KTARGET inline float KNAME(dot)(const float *p, const float *q, uint32_t k)
{
  KVEC a0 = KZERO(), a1 = KZERO();
  uint32_t j = 0;
  for (; j + 2 * KLANES <= k; j += 2 * KLANES) {
    a0 = KFMA(KLOAD(p + j), KLOAD(q + j), a0);
    a1 = KFMA(KLOAD(p + j + KLANES), KLOAD(q + j + KLANES), a1);
  }
  for (; j + KLANES <= k; j += KLANES) a0 = KFMA(KLOAD(p + j), KLOAD(q + j), a0);
#if KMASKED
  if (j < k) {
    KMASK_T m = KMASK(k - j);
    a1 = KFMA(KLOADM(m, p + j), KLOADM(m, q + j), a1);
  }
  return KSUM(KADD(a0, a1));
#else
  float s = KSUM(KADD(a0, a1));
  for (; j < k; j++) s += p[j] * q[j];
  return s;
#endif
}

/* One step on rating r for p and q (rows of dim values, accumulators at [dim]); q's
 * gradient goes to u (MF_Q_GRAD), or q descends in place (MF_Q_INPLACE). Returns the
 * error. */
static KTARGET inline float KNAME(step)(float *restrict p, float *restrict q, float *restrict u,
                                        const mf_kargs_t *a, float r)
{
  const uint32_t k = a->k, dim = k + (a->biases ? 1 : 0);
  float pred = a->mean + KNAME(dot)(p, q, k);
  if (a->biases) pred += p[k] + q[k];
  const float err = r - pred, reg = a->reg, lr = a->lr;
  const int ada = a->optim == MF_ADAGRAD;
  const mf_qmode_t qm = a->qmode;
  /* the rates: adagrad's from the accumulators as they were */
  const float etap = ada ? lr / sqrtf(p[dim]) : lr;
  const float etaq = qm == MF_Q_GRAD ? 0.0f : ada ? lr / sqrtf(q[dim]) : lr;
  const KVEC verr = KSET1(err), vreg = KSET1(reg), vetap = KSET1(etap), vetaq = KSET1(etaq);
  KVEC sp = KZERO(), sq = KZERO();
  uint32_t j = 0;
  for (; j + KLANES <= k; j += KLANES) {
    const KVEC vp = KLOAD(p + j), vq = KLOAD(q + j);
    const KVEC gp = KFNMA(verr, vq, KMUL(vreg, vp)); /* reg p - err q */
    const KVEC gq = KFNMA(verr, vp, KMUL(vreg, vq));
    KSTORE(p + j, KFNMA(vetap, gp, vp));
    if (ada) sp = KFMA(gp, gp, sp); /* sums of squares: adagrad's alone */
    if (qm == MF_Q_GRAD) {
      KSTORE(u + j, gq);
    } else {
      KSTORE(q + j, KFNMA(vetaq, gq, vq));
      if (ada) sq = KFMA(gq, gq, sq);
    }
  }
  float ssp, ssq;
#if KMASKED
  if (j < k) {
    KMASK_T m = KMASK(k - j);
    const KVEC vp = KLOADM(m, p + j), vq = KLOADM(m, q + j);
    const KVEC gp = KFNMA(verr, vq, KMUL(vreg, vp));
    const KVEC gq = KFNMA(verr, vp, KMUL(vreg, vq));
    KSTOREM(p + j, m, KFNMA(vetap, gp, vp));
    if (ada) sp = KFMA(gp, gp, sp); /* masked-off lanes are zero */
    if (qm == MF_Q_GRAD) {
      KSTOREM(u + j, m, gq);
    } else {
      KSTOREM(q + j, m, KFNMA(vetaq, gq, vq));
      if (ada) sq = KFMA(gq, gq, sq);
    }
  }
  /* a horizontal sum costs more than the row's FMAs at small ranks: only where used */
  ssp = ada ? KSUM(sp) : 0.0f;
  ssq = ada && qm == MF_Q_INPLACE ? KSUM(sq) : 0.0f;
#else
  ssp = ada ? KSUM(sp) : 0.0f;
  ssq = ada && qm == MF_Q_INPLACE ? KSUM(sq) : 0.0f;
  for (; j < k; j++) {
    const float pj = p[j], qj = q[j], gp = reg * pj - err * qj, gq = reg * qj - err * pj;
    p[j] = pj - etap * gp;
    ssp += gp * gp;
    if (qm == MF_Q_GRAD) {
      u[j] = gq;
    } else {
      q[j] = qj - etaq * gq;
      ssq += gq * gq;
    }
  }
#endif
  if (a->biases) {
    const float bp = p[k], bq = q[k], gp = reg * bp - err, gq = reg * bq - err;
    p[k] = bp - etap * gp;
    ssp += gp * gp;
    if (qm == MF_Q_GRAD) {
      u[k] = gq;
    } else {
      q[k] = bq - etaq * gq;
      ssq += gq * gq;
    }
  }
  if (ada) {
    p[dim] += ssp / (float)dim;
    if (qm == MF_Q_INPLACE) q[dim] += ssq / (float)dim;
  }
  return err;
}

/* Prefetches the rows of cell c: lines of P's row and of its column's row. */
static KTARGET inline void KNAME(prefetch)(const mf_kargs_t *a, const mf_cell_t *c, size_t bytes)
{
  const char *p = (const char *)(a->P + (size_t)c->row * a->pstride);
  const char *q = (const char *)a->Q[c->col];
  for (size_t o = 0; o < bytes; o += 64) {
    __builtin_prefetch(p + o, 1, 3);
    __builtin_prefetch(q + o, 1, 3);
  }
}

static KTARGET double KNAME(run)(const mf_kargs_t *a, const mf_cell_t *cells, size_t n)
{
  const uint32_t dim = a->k + (a->biases ? 1 : 0);
  const size_t bytes = ((size_t)dim + 1) * sizeof(float), ahead = PREFETCH_AHEAD;
  float u[dim];
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    if (i + ahead < n) KNAME(prefetch)(a, &cells[i + ahead], bytes);
    const mf_cell_t c = cells[i];
    float *p = a->P + (size_t)c.row * a->pstride, *q = (float *)a->Q[c.col];
    const float err = KNAME(step)(p, q, u, a, c.value);
    if (a->qmode != MF_Q_INPLACE) au_view_update(a->v, c.col, u);
    sse += (double)err * err;
  }
  return sse;
}

static KTARGET double KNAME(eval)(const mf_kargs_t *a, const mf_cell_t *cells, size_t n)
{
  const uint32_t k = a->k;
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    const mf_cell_t c = cells[i];
    const float *p = a->P + (size_t)c.row * a->pstride, *q = (const float *)a->Q[c.col];
    float pred = a->mean + KNAME(dot)(p, q, k);
    if (a->biases) pred += p[k] + q[k];
    const double e = (double)c.value - pred;
    sse += e * e;
  }
  return sse;
}

#undef KNAME
#undef KTARGET
#undef KLANES
#undef KVEC
#undef KLOAD
#undef KSTORE
#undef KSET1
#undef KZERO
#undef KADD
#undef KMUL
#undef KFMA
#undef KFNMA
#undef KSUM
#undef KMASKED
#undef KMASK_T
#undef KMASK
#undef KLOADM
#undef KSTOREM
