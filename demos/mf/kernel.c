/* kernel.c — see kernel.h: the SGD loop (kernel_loop.h) instantiated for each instruction
 * set this compiler can target, and the run-time choice among them. On x86-64 the AVX2
 * and AVX-512 loops are compiled with target attributes, so the file needs no -m flags
 * and the binary runs on any x86-64: mf_isa_supported() asks the CPU. Elsewhere only the
 * plain C loop exists.
 */
#include "kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MF_X86 1
#include <immintrin.h>
#endif

/* Cells ahead whose rows are prefetched: far enough to cover a miss to memory at
 * ~15 ns a step, near enough that the lines are still in L1 when used. */
#define PREFETCH_AHEAD 12

/* ---- plain C: one lane ---------------------------------------------------------------- */

#define KNAME(x)       x##_scalar
#define KTARGET        /* none */
#define KLANES         1
#define KVEC           float
#define KLOAD(p)       (*(p))
#define KSTORE(p, v)   (*(p) = (v))
#define KSET1(x)       (x)
#define KZERO()        0.0f
#define KADD(a, b)     ((a) + (b))
#define KMUL(a, b)     ((a) * (b))
#define KFMA(a, b, c)  ((a) * (b) + (c))
#define KFNMA(a, b, c) ((c) - (a) * (b))
#define KSUM(v)        (v)
#define KMASKED        0
#include "kernel_loop.h"

#ifdef MF_X86
/* ---- SSE2: 4 lanes, no FMA, scalar tails ------------------------------------------- */

static inline float sum_sse2(__m128 v)
{
  __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#define KNAME(x)       x##_sse2
#define KTARGET        /* the x86-64 baseline */
#define KLANES         4
#define KVEC           __m128
#define KLOAD(p)       _mm_loadu_ps(p)
#define KSTORE(p, v)   _mm_storeu_ps(p, v)
#define KSET1(x)       _mm_set1_ps(x)
#define KZERO()        _mm_setzero_ps()
#define KADD(a, b)     _mm_add_ps(a, b)
#define KMUL(a, b)     _mm_mul_ps(a, b)
#define KFMA(a, b, c)  _mm_add_ps(_mm_mul_ps(a, b), c)
#define KFNMA(a, b, c) _mm_sub_ps(c, _mm_mul_ps(a, b))
#define KSUM(v)        sum_sse2(v)
#define KMASKED        0
#include "kernel_loop.h"

/* ---- AVX2 + FMA: 8 lanes, masked tails ------------------------------------------------ */

#define TARGET_AVX2 __attribute__((target("avx2,fma")))

static TARGET_AVX2 inline float sum_avx2(__m256 v)
{
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* the first n (1..7) lanes */
static TARGET_AVX2 inline __m256i mask_avx2(uint32_t n)
{
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define KNAME(x)         x##_avx2
#define KTARGET          TARGET_AVX2
#define KLANES           8
#define KVEC             __m256
#define KLOAD(p)         _mm256_loadu_ps(p)
#define KSTORE(p, v)     _mm256_storeu_ps(p, v)
#define KSET1(x)         _mm256_set1_ps(x)
#define KZERO()          _mm256_setzero_ps()
#define KADD(a, b)       _mm256_add_ps(a, b)
#define KMUL(a, b)       _mm256_mul_ps(a, b)
#define KFMA(a, b, c)    _mm256_fmadd_ps(a, b, c)
#define KFNMA(a, b, c)   _mm256_fnmadd_ps(a, b, c)
#define KSUM(v)          sum_avx2(v)
#define KMASKED          1
#define KMASK_T          __m256i
#define KMASK(n)         mask_avx2(n)
#define KLOADM(m, p)     _mm256_maskload_ps(p, m)
#define KSTOREM(p, m, v) _mm256_maskstore_ps(p, m, v)
#include "kernel_loop.h"

/* ---- AVX-512 F: 16 lanes, masked tails ------------------------------------------------ */

#define KNAME(x)         x##_avx512
#define KTARGET          __attribute__((target("avx512f,avx2,fma")))
#define KLANES           16
#define KVEC             __m512
#define KLOAD(p)         _mm512_loadu_ps(p)
#define KSTORE(p, v)     _mm512_storeu_ps(p, v)
#define KSET1(x)         _mm512_set1_ps(x)
#define KZERO()          _mm512_setzero_ps()
#define KADD(a, b)       _mm512_add_ps(a, b)
#define KMUL(a, b)       _mm512_mul_ps(a, b)
#define KFMA(a, b, c)    _mm512_fmadd_ps(a, b, c)
#define KFNMA(a, b, c)   _mm512_fnmadd_ps(a, b, c)
#define KSUM(v)          _mm512_reduce_add_ps(v)
#define KMASKED          1
#define KMASK_T          __mmask16
#define KMASK(n)         ((__mmask16)((1u << (n)) - 1u))
#define KLOADM(m, p)     _mm512_maskz_loadu_ps(m, p)
#define KSTOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#include "kernel_loop.h"
#endif /* MF_X86 */

typedef double (*loop_fn)(const mf_kargs_t *a, const mf_cell_t *cells, size_t n);

static const struct {
  const char *name;
  loop_fn run, eval;
} isas[MF_ISA_COUNT] = {
    [MF_ISA_SCALAR] = {"scalar", run_scalar, eval_scalar},
#ifdef MF_X86
    [MF_ISA_SSE2] = {"sse2", run_sse2, eval_sse2},
    [MF_ISA_AVX2] = {"avx2", run_avx2, eval_avx2},
    [MF_ISA_AVX512] = {"avx512", run_avx512, eval_avx512},
#else
    [MF_ISA_SSE2] = {"sse2", NULL, NULL},
    [MF_ISA_AVX2] = {"avx2", NULL, NULL},
    [MF_ISA_AVX512] = {"avx512", NULL, NULL},
#endif
};

int mf_isa_parse(const char *name, mf_isa_t *out)
{
  for (int i = 0; name && i < MF_ISA_COUNT; i++)
    if (!strcmp(name, isas[i].name)) {
      *out = (mf_isa_t)i;
      return 0;
    }
  return -1;
}

const char *mf_isa_name(mf_isa_t isa)
{
  return (unsigned)isa < MF_ISA_COUNT ? isas[isa].name : "?";
}

int mf_isa_supported(mf_isa_t isa)
{
  if ((unsigned)isa >= MF_ISA_COUNT || !isas[isa].run) return 0;
#ifdef MF_X86
  /* __builtin_cpu_supports also checks that the OS saves the vector registers */
  __builtin_cpu_init();
  if (isa == MF_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == MF_ISA_AVX512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
#endif
  return 1;
}

mf_isa_t mf_isa_best(void)
{
  for (int i = MF_ISA_COUNT - 1; i > 0; i--)
    if (mf_isa_supported((mf_isa_t)i)) return (mf_isa_t)i;
  return MF_ISA_SCALAR;
}

int mf_isa_from_env(mf_isa_t *out, char *err, size_t errlen)
{
  const char *e = getenv("AUGUR_MF_ISA");
  if (!e || !*e) {
    *out = mf_isa_best();
    return 0;
  }
  mf_isa_t isa;
  if (mf_isa_parse(e, &isa) != 0) {
    snprintf(err, errlen, "AUGUR_MF_ISA=%s: expected scalar, sse2, avx2 or avx512", e);
    return -1;
  }
  if (!mf_isa_supported(isa)) {
    snprintf(err, errlen, "AUGUR_MF_ISA=%s: this %s does not run it (best here: %s)", e,
             isas[isa].run ? "CPU" : "build", mf_isa_name(mf_isa_best()));
    return -1;
  }
  *out = isa;
  return 0;
}

double mf_kernel_run(mf_isa_t isa, const mf_kargs_t *a, const mf_cell_t *cells, size_t n)
{
  return isas[isa].run(a, cells, n);
}

double mf_kernel_eval(mf_isa_t isa, const mf_kargs_t *a, const mf_cell_t *cells, size_t n)
{
  return isas[isa].eval(a, cells, n);
}
