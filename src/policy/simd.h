/*
 * simd.h: the vector operations the policy's kernels are written with, one
 * definition per instruction set. A kernel file defines RO_SIMD (one of the
 * RO_SIMD_* below) and includes this header, then the kernel bodies
 * (kernel_math.h, kernel_dense.h, kernel_sample.h): every kernel is written
 * once, over these operations, and compiled three times.
 *
 * Why this shape: the kernels must give the same bits on every path
 * (docs/policy.md). That holds when every path performs the same IEEE
 * operations on each lane in the same order, and only the number of lanes
 * differs. So each operation here is one IEEE-defined operation per lane
 * (add, sub, mul, div, sqrt and a fused multiply-add, each correctly
 * rounded; compares and selects; integer and bit operations), never an
 * approximation whose bits the vendor defines (rcp, rsqrt), and the scalar
 * path computes the fused multiply-add with fmaf/fma, which C defines as
 * correctly rounded. Each operation is a function call in the source, so
 * no compiler contracts a multiply and an add of ours into one FMA (clang's
 * default -ffp-contract=on fuses within one expression only).
 *
 * Types: vf is VF_LANES floats, vi as many int32, vd VD_LANES doubles, vq
 * as many int64; mf and md are the masks of float and double compares.
 *
 * max and min are x86's: vf_max(a, b) is a > b ? a : b, so a NaN in either
 * operand gives b. Kernels order the operands for the NaN behaviour they
 * want, and the scalar path spells the same select.
 */
#ifndef RO_POLICY_SIMD_H
#define RO_POLICY_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define RO_SIMD_SCALAR 1
#define RO_SIMD_AVX2 2
#define RO_SIMD_AVX512 3

#ifndef RO_SIMD
#error "define RO_SIMD before including policy/simd.h"
#endif

#define RO_INLINE static inline __attribute__((always_inline))

#if RO_SIMD == RO_SIMD_AVX512 || RO_SIMD == RO_SIMD_AVX2
#include <immintrin.h>
#endif

#if RO_SIMD == RO_SIMD_AVX512

#define VF_LANES 16
#define VD_LANES 8
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 mf;
typedef __m512d vd;
typedef __m512i vq;
typedef __mmask8 md;

RO_INLINE vf vf_set1(float a)
{
    return _mm512_set1_ps(a);
}
RO_INLINE vf vf_load(const float *p) /* 64-byte aligned */
{
    return _mm512_load_ps(p);
}
RO_INLINE vf vf_loadu(const float *p)
{
    return _mm512_loadu_ps(p);
}
RO_INLINE void vf_store(float *p, vf a)
{
    _mm512_store_ps(p, a);
}
RO_INLINE void vf_storeu(float *p, vf a)
{
    _mm512_storeu_ps(p, a);
}
RO_INLINE vf vf_add(vf a, vf b)
{
    return _mm512_add_ps(a, b);
}
RO_INLINE vf vf_sub(vf a, vf b)
{
    return _mm512_sub_ps(a, b);
}
RO_INLINE vf vf_mul(vf a, vf b)
{
    return _mm512_mul_ps(a, b);
}
RO_INLINE vf vf_div(vf a, vf b)
{
    return _mm512_div_ps(a, b);
}
RO_INLINE vf vf_fma(vf a, vf b, vf c) /* a * b + c, one rounding */
{
    return _mm512_fmadd_ps(a, b, c);
}
RO_INLINE vf vf_max(vf a, vf b)
{
    return _mm512_max_ps(a, b);
}
RO_INLINE vf vf_min(vf a, vf b)
{
    return _mm512_min_ps(a, b);
}
/* vf_clamp: min(max(x, -c), c) for c > 0; a NaN stays a NaN: max and min
 * return their second operand for a NaN, x and then v. (AVX-512's
 * VRANGEPS would do it in one operation, but returns c for a quiet NaN.) */
RO_INLINE vf vf_clamp(vf x, vf c)
{
    const vf v = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), c), x);
    return _mm512_min_ps(c, v);
}
RO_INLINE vf vf_abs(vf a)
{
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
RO_INLINE vf vf_with_sign_of(vf mag, vf sgn) /* mag's bits or sgn's sign bit */
{
    const __m512i sb = _mm512_and_si512(_mm512_castps_si512(sgn), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sb));
}
RO_INLINE mf vf_lt(vf a, vf b)
{
    return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ);
}
RO_INLINE vf vf_select(mf m, vf yes, vf no)
{
    return _mm512_mask_blend_ps(m, no, yes);
}
RO_INLINE vi vf_bits(vf a)
{
    return _mm512_castps_si512(a);
}
RO_INLINE vf vi_float_bits(vi a)
{
    return _mm512_castsi512_ps(a);
}
RO_INLINE vi vi_set1(int32_t a)
{
    return _mm512_set1_epi32(a);
}
RO_INLINE vi vi_add(vi a, vi b)
{
    return _mm512_add_epi32(a, b);
}
RO_INLINE vi vi_sub(vi a, vi b)
{
    return _mm512_sub_epi32(a, b);
}
RO_INLINE vi vi_shl(vi a, int n)
{
    return _mm512_slli_epi32(a, (unsigned)n);
}

RO_INLINE vd vd_set1(double a)
{
    return _mm512_set1_pd(a);
}
RO_INLINE vd vd_load(const double *p) /* 64-byte aligned */
{
    return _mm512_load_pd(p);
}
RO_INLINE void vd_store(double *p, vd a)
{
    _mm512_store_pd(p, a);
}
RO_INLINE vd vd_load_f(const float *p) /* VD_LANES floats, 32-byte aligned */
{
    return _mm512_cvtps_pd(_mm256_load_ps(p));
}
RO_INLINE void vd_store_f(float *p, vd a) /* rounded to VD_LANES floats */
{
    _mm256_store_ps(p, _mm512_cvtpd_ps(a));
}
RO_INLINE vd vd_add(vd a, vd b)
{
    return _mm512_add_pd(a, b);
}
RO_INLINE vd vd_sub(vd a, vd b)
{
    return _mm512_sub_pd(a, b);
}
RO_INLINE vd vd_mul(vd a, vd b)
{
    return _mm512_mul_pd(a, b);
}
RO_INLINE vd vd_div(vd a, vd b)
{
    return _mm512_div_pd(a, b);
}
RO_INLINE vd vd_sqrt(vd a)
{
    return _mm512_sqrt_pd(a);
}
RO_INLINE vd vd_fma(vd a, vd b, vd c)
{
    return _mm512_fmadd_pd(a, b, c);
}
RO_INLINE md vd_lt(vd a, vd b)
{
    return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ);
}
RO_INLINE md vd_gt(vd a, vd b)
{
    return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ);
}
RO_INLINE md vd_eq(vd a, vd b)
{
    return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ);
}
RO_INLINE md md_and(md a, md b)
{
    return (md)(a & b);
}
RO_INLINE md md_andnot(md a, md b) /* !a && b */
{
    return (md)(~a & b);
}
RO_INLINE vd vd_select(md m, vd yes, vd no)
{
    return _mm512_mask_blend_pd(m, no, yes);
}
RO_INLINE vq vd_bits(vd a)
{
    return _mm512_castpd_si512(a);
}
RO_INLINE vd vq_double_bits(vq a)
{
    return _mm512_castsi512_pd(a);
}
RO_INLINE vq vq_set1(int64_t a)
{
    return _mm512_set1_epi64(a);
}
RO_INLINE vq vq_and(vq a, vq b)
{
    return _mm512_and_si512(a, b);
}
RO_INLINE vq vq_or(vq a, vq b)
{
    return _mm512_or_si512(a, b);
}
RO_INLINE vq vq_add(vq a, vq b)
{
    return _mm512_add_epi64(a, b);
}
RO_INLINE vq vq_shr(vq a, int n) /* logical */
{
    return _mm512_srli_epi64(a, (unsigned)n);
}

#elif RO_SIMD == RO_SIMD_AVX2

#define VF_LANES 8
#define VD_LANES 4
typedef __m256 vf;
typedef __m256i vi;
typedef __m256 mf;
typedef __m256d vd;
typedef __m256i vq;
typedef __m256d md;

RO_INLINE vf vf_set1(float a)
{
    return _mm256_set1_ps(a);
}
RO_INLINE vf vf_load(const float *p)
{
    return _mm256_load_ps(p);
}
RO_INLINE vf vf_loadu(const float *p)
{
    return _mm256_loadu_ps(p);
}
RO_INLINE void vf_store(float *p, vf a)
{
    _mm256_store_ps(p, a);
}
RO_INLINE void vf_storeu(float *p, vf a)
{
    _mm256_storeu_ps(p, a);
}
RO_INLINE vf vf_add(vf a, vf b)
{
    return _mm256_add_ps(a, b);
}
RO_INLINE vf vf_sub(vf a, vf b)
{
    return _mm256_sub_ps(a, b);
}
RO_INLINE vf vf_mul(vf a, vf b)
{
    return _mm256_mul_ps(a, b);
}
RO_INLINE vf vf_div(vf a, vf b)
{
    return _mm256_div_ps(a, b);
}
RO_INLINE vf vf_fma(vf a, vf b, vf c)
{
    return _mm256_fmadd_ps(a, b, c);
}
RO_INLINE vf vf_max(vf a, vf b)
{
    return _mm256_max_ps(a, b);
}
RO_INLINE vf vf_min(vf a, vf b)
{
    return _mm256_min_ps(a, b);
}
RO_INLINE vf vf_clamp(vf x, vf c)
{
    /* max and min return their second operand for a NaN: x, then v. */
    const vf v = _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), c), x);
    return _mm256_min_ps(c, v);
}
RO_INLINE vf vf_abs(vf a)
{
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
RO_INLINE vf vf_with_sign_of(vf mag, vf sgn)
{
    return _mm256_or_ps(mag, _mm256_and_ps(sgn, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))));
}
RO_INLINE mf vf_lt(vf a, vf b)
{
    return _mm256_cmp_ps(a, b, _CMP_LT_OQ);
}
RO_INLINE vf vf_select(mf m, vf yes, vf no)
{
    return _mm256_blendv_ps(no, yes, m);
}
RO_INLINE vi vf_bits(vf a)
{
    return _mm256_castps_si256(a);
}
RO_INLINE vf vi_float_bits(vi a)
{
    return _mm256_castsi256_ps(a);
}
RO_INLINE vi vi_set1(int32_t a)
{
    return _mm256_set1_epi32(a);
}
RO_INLINE vi vi_add(vi a, vi b)
{
    return _mm256_add_epi32(a, b);
}
RO_INLINE vi vi_sub(vi a, vi b)
{
    return _mm256_sub_epi32(a, b);
}
RO_INLINE vi vi_shl(vi a, int n)
{
    return _mm256_slli_epi32(a, n);
}

RO_INLINE vd vd_set1(double a)
{
    return _mm256_set1_pd(a);
}
RO_INLINE vd vd_load(const double *p)
{
    return _mm256_load_pd(p);
}
RO_INLINE void vd_store(double *p, vd a)
{
    _mm256_store_pd(p, a);
}
RO_INLINE vd vd_load_f(const float *p)
{
    return _mm256_cvtps_pd(_mm_load_ps(p));
}
RO_INLINE void vd_store_f(float *p, vd a)
{
    _mm_store_ps(p, _mm256_cvtpd_ps(a));
}
RO_INLINE vd vd_add(vd a, vd b)
{
    return _mm256_add_pd(a, b);
}
RO_INLINE vd vd_sub(vd a, vd b)
{
    return _mm256_sub_pd(a, b);
}
RO_INLINE vd vd_mul(vd a, vd b)
{
    return _mm256_mul_pd(a, b);
}
RO_INLINE vd vd_div(vd a, vd b)
{
    return _mm256_div_pd(a, b);
}
RO_INLINE vd vd_sqrt(vd a)
{
    return _mm256_sqrt_pd(a);
}
RO_INLINE vd vd_fma(vd a, vd b, vd c)
{
    return _mm256_fmadd_pd(a, b, c);
}
RO_INLINE md vd_lt(vd a, vd b)
{
    return _mm256_cmp_pd(a, b, _CMP_LT_OQ);
}
RO_INLINE md vd_gt(vd a, vd b)
{
    return _mm256_cmp_pd(a, b, _CMP_GT_OQ);
}
RO_INLINE md vd_eq(vd a, vd b)
{
    return _mm256_cmp_pd(a, b, _CMP_EQ_OQ);
}
RO_INLINE md md_and(md a, md b)
{
    return _mm256_and_pd(a, b);
}
RO_INLINE md md_andnot(md a, md b)
{
    return _mm256_andnot_pd(a, b);
}
RO_INLINE vd vd_select(md m, vd yes, vd no)
{
    return _mm256_blendv_pd(no, yes, m);
}
RO_INLINE vq vd_bits(vd a)
{
    return _mm256_castpd_si256(a);
}
RO_INLINE vd vq_double_bits(vq a)
{
    return _mm256_castsi256_pd(a);
}
RO_INLINE vq vq_set1(int64_t a)
{
    return _mm256_set1_epi64x(a);
}
RO_INLINE vq vq_and(vq a, vq b)
{
    return _mm256_and_si256(a, b);
}
RO_INLINE vq vq_or(vq a, vq b)
{
    return _mm256_or_si256(a, b);
}
RO_INLINE vq vq_add(vq a, vq b)
{
    return _mm256_add_epi64(a, b);
}
RO_INLINE vq vq_shr(vq a, int n)
{
    return _mm256_srli_epi64(a, n);
}

#elif RO_SIMD == RO_SIMD_SCALAR

#define VF_LANES 1
#define VD_LANES 1
typedef float vf;
typedef uint32_t vi;
typedef int mf;
typedef double vd;
typedef uint64_t vq;
typedef int md;

RO_INLINE vf vf_set1(float a)
{
    return a;
}
RO_INLINE vf vf_load(const float *p)
{
    return *p;
}
RO_INLINE vf vf_loadu(const float *p)
{
    return *p;
}
RO_INLINE void vf_store(float *p, vf a)
{
    *p = a;
}
RO_INLINE void vf_storeu(float *p, vf a)
{
    *p = a;
}
RO_INLINE vf vf_add(vf a, vf b)
{
    return a + b;
}
RO_INLINE vf vf_sub(vf a, vf b)
{
    return a - b;
}
RO_INLINE vf vf_mul(vf a, vf b)
{
    return a * b;
}
RO_INLINE vf vf_div(vf a, vf b)
{
    return a / b;
}
RO_INLINE vf vf_fma(vf a, vf b, vf c)
{
    return fmaf(a, b, c);
}
RO_INLINE vf vf_max(vf a, vf b)
{
    return a > b ? a : b;
}
RO_INLINE vf vf_min(vf a, vf b)
{
    return a < b ? a : b;
}
RO_INLINE vf vf_clamp(vf x, vf c)
{
    const vf v = -c > x ? -c : x;
    return c < v ? c : v;
}
RO_INLINE vf vf_abs(vf a)
{
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    u &= 0x7fffffffu;
    memcpy(&a, &u, sizeof a);
    return a;
}
RO_INLINE vf vf_with_sign_of(vf mag, vf sgn)
{
    uint32_t m, s;
    memcpy(&m, &mag, sizeof m);
    memcpy(&s, &sgn, sizeof s);
    m |= s & 0x80000000u;
    memcpy(&mag, &m, sizeof mag);
    return mag;
}
RO_INLINE mf vf_lt(vf a, vf b)
{
    return a < b;
}
RO_INLINE vf vf_select(mf m, vf yes, vf no)
{
    return m ? yes : no;
}
RO_INLINE vi vf_bits(vf a)
{
    vi u;
    memcpy(&u, &a, sizeof u);
    return u;
}
RO_INLINE vf vi_float_bits(vi a)
{
    vf f;
    memcpy(&f, &a, sizeof f);
    return f;
}
RO_INLINE vi vi_set1(int32_t a)
{
    return (vi)a;
}
RO_INLINE vi vi_add(vi a, vi b)
{
    return a + b; /* unsigned: wraps as the vector add does */
}
RO_INLINE vi vi_sub(vi a, vi b)
{
    return a - b;
}
RO_INLINE vi vi_shl(vi a, int n)
{
    return a << n;
}

RO_INLINE vd vd_set1(double a)
{
    return a;
}
RO_INLINE vd vd_load(const double *p)
{
    return *p;
}
RO_INLINE void vd_store(double *p, vd a)
{
    *p = a;
}
RO_INLINE vd vd_load_f(const float *p)
{
    return (double)*p;
}
RO_INLINE void vd_store_f(float *p, vd a)
{
    *p = (float)a;
}
RO_INLINE vd vd_add(vd a, vd b)
{
    return a + b;
}
RO_INLINE vd vd_sub(vd a, vd b)
{
    return a - b;
}
RO_INLINE vd vd_mul(vd a, vd b)
{
    return a * b;
}
RO_INLINE vd vd_div(vd a, vd b)
{
    return a / b;
}
RO_INLINE vd vd_sqrt(vd a)
{
    return sqrt(a);
}
RO_INLINE vd vd_fma(vd a, vd b, vd c)
{
    return fma(a, b, c);
}
RO_INLINE md vd_lt(vd a, vd b)
{
    return a < b;
}
RO_INLINE md vd_gt(vd a, vd b)
{
    return a > b;
}
RO_INLINE md vd_eq(vd a, vd b)
{
    return a == b;
}
RO_INLINE md md_and(md a, md b)
{
    return a && b;
}
RO_INLINE md md_andnot(md a, md b)
{
    return !a && b;
}
RO_INLINE vd vd_select(md m, vd yes, vd no)
{
    return m ? yes : no;
}
RO_INLINE vq vd_bits(vd a)
{
    vq u;
    memcpy(&u, &a, sizeof u);
    return u;
}
RO_INLINE vd vq_double_bits(vq a)
{
    vd d;
    memcpy(&d, &a, sizeof d);
    return d;
}
RO_INLINE vq vq_set1(int64_t a)
{
    return (vq)a;
}
RO_INLINE vq vq_and(vq a, vq b)
{
    return a & b;
}
RO_INLINE vq vq_or(vq a, vq b)
{
    return a | b;
}
RO_INLINE vq vq_add(vq a, vq b)
{
    return a + b;
}
RO_INLINE vq vq_shr(vq a, int n)
{
    return a >> n;
}

#else
#error "unknown RO_SIMD"
#endif

#endif
