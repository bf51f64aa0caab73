/*
 * simd_avx512.h: policy/simd.h's operations for AVX-512 (16 floats, 8 doubles).
 * Included by simd.h only, which includes the intrinsics first.
 */
#ifndef RO_POLICY_SIMD_AVX512_H
#define RO_POLICY_SIMD_AVX512_H

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

#endif
