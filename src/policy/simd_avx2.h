/*
 * simd_avx2.h: policy/simd.h's operations for AVX2 and FMA (8 floats, 4 doubles).
 * Included by simd.h only, which includes the intrinsics first.
 */
#ifndef RO_POLICY_SIMD_AVX2_H
#define RO_POLICY_SIMD_AVX2_H

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

#endif
