/*
 * simd_x86.h: policy/simd.h's operations that AVX2 and AVX-512 spell alike
 * but for the vector width in the intrinsics' names. Included by
 * simd_avx2.h and simd_avx512.h only, after they define the types and these
 * spellings of the width:
 *
 *   RO_MM(op)          _mm256_op, _mm512_op
 *   RO_MM_SI(op)       _mm256_op_si256, _mm512_op_si512 (integer vectors)
 *   RO_MM_FROM_SI(t)   _mm256_castsi256_t, _mm512_castsi512_t
 *   RO_MM_CMP(t)       _mm256_cmp_t (a vector mask), _mm512_cmp_t_mask (a mask register)
 *
 * What the two spell differently (selects, mask logic, the half-width
 * float loads) stays in their own headers.
 */
#ifndef RO_POLICY_SIMD_X86_H
#define RO_POLICY_SIMD_X86_H

RO_SIMD_OP(vf, vf_set1, (float a), RO_MM(set1_ps)(a))
RO_SIMD_OP(vf, vf_load, (const float *p), RO_MM(load_ps)(p)) /* aligned to the vector */
RO_SIMD_OP(vf, vf_loadu, (const float *p), RO_MM(loadu_ps)(p))
RO_SIMD_DO(vf_store, (float *p, vf a), RO_MM(store_ps)(p, a))
RO_SIMD_DO(vf_storeu, (float *p, vf a), RO_MM(storeu_ps)(p, a))
RO_SIMD_OP(vf, vf_add, (vf a, vf b), RO_MM(add_ps)(a, b))
RO_SIMD_OP(vf, vf_sub, (vf a, vf b), RO_MM(sub_ps)(a, b))
RO_SIMD_OP(vf, vf_mul, (vf a, vf b), RO_MM(mul_ps)(a, b))
RO_SIMD_OP(vf, vf_div, (vf a, vf b), RO_MM(div_ps)(a, b))
RO_SIMD_OP(vf, vf_fma, (vf a, vf b, vf c), RO_MM(fmadd_ps)(a, b, c)) /* a * b + c, one rounding */
RO_SIMD_OP(vf, vf_max, (vf a, vf b), RO_MM(max_ps)(a, b))
RO_SIMD_OP(vf, vf_min, (vf a, vf b), RO_MM(min_ps)(a, b))
RO_SIMD_OP(mf, vf_lt, (vf a, vf b), RO_MM_CMP(ps)(a, b, _CMP_LT_OQ))
RO_SIMD_OP(vi, vf_bits, (vf a), RO_MM_SI(castps)(a))
RO_SIMD_OP(vf, vi_float_bits, (vi a), RO_MM_FROM_SI(ps)(a))
RO_SIMD_OP(vi, vi_set1, (int32_t a), RO_MM(set1_epi32)(a))
RO_SIMD_OP(vi, vi_add, (vi a, vi b), RO_MM(add_epi32)(a, b))
RO_SIMD_OP(vi, vi_sub, (vi a, vi b), RO_MM(sub_epi32)(a, b))
RO_SIMD_OP(vi, vi_shl, (vi a, int n), RO_MM(slli_epi32)(a, n))

/* vf_clamp: min(max(x, -c), c) for c > 0; a NaN stays a NaN: max and min
 * return their second operand for a NaN, x and then v. (AVX-512's
 * VRANGEPS would do it in one operation, but returns c for a quiet NaN.) */
RO_INLINE vf vf_clamp(vf x, vf c)
{
    const vf v = RO_MM(max_ps)(RO_MM(sub_ps)(RO_MM(setzero_ps)(), c), x);
    return RO_MM(min_ps)(c, v);
}
/* vf_abs: a with its sign bit cleared. */
RO_INLINE vf vf_abs(vf a)
{
    return RO_MM(and_ps)(a, vi_float_bits(vi_set1(0x7fffffff)));
}
/* vf_with_sign_of: mag's bits or sgn's sign bit. */
RO_INLINE vf vf_with_sign_of(vf mag, vf sgn)
{
    return RO_MM(or_ps)(mag, RO_MM(and_ps)(sgn, vi_float_bits(vi_set1(INT32_MIN))));
}

RO_SIMD_OP(vd, vd_set1, (double a), RO_MM(set1_pd)(a))
RO_SIMD_OP(vd, vd_load, (const double *p), RO_MM(load_pd)(p)) /* aligned to the vector */
RO_SIMD_DO(vd_store, (double *p, vd a), RO_MM(store_pd)(p, a))
RO_SIMD_OP(vd, vd_add, (vd a, vd b), RO_MM(add_pd)(a, b))
RO_SIMD_OP(vd, vd_sub, (vd a, vd b), RO_MM(sub_pd)(a, b))
RO_SIMD_OP(vd, vd_mul, (vd a, vd b), RO_MM(mul_pd)(a, b))
RO_SIMD_OP(vd, vd_div, (vd a, vd b), RO_MM(div_pd)(a, b))
RO_SIMD_OP(vd, vd_sqrt, (vd a), RO_MM(sqrt_pd)(a))
RO_SIMD_OP(vd, vd_fma, (vd a, vd b, vd c), RO_MM(fmadd_pd)(a, b, c))
RO_SIMD_OP(md, vd_lt, (vd a, vd b), RO_MM_CMP(pd)(a, b, _CMP_LT_OQ))
RO_SIMD_OP(md, vd_gt, (vd a, vd b), RO_MM_CMP(pd)(a, b, _CMP_GT_OQ))
RO_SIMD_OP(md, vd_eq, (vd a, vd b), RO_MM_CMP(pd)(a, b, _CMP_EQ_OQ))
RO_SIMD_OP(vq, vd_bits, (vd a), RO_MM_SI(castpd)(a))
RO_SIMD_OP(vd, vq_double_bits, (vq a), RO_MM_FROM_SI(pd)(a))
RO_SIMD_OP(vq, vq_and, (vq a, vq b), RO_MM_SI (and)(a, b))
RO_SIMD_OP(vq, vq_or, (vq a, vq b), RO_MM_SI(or)(a, b))
RO_SIMD_OP(vq, vq_add, (vq a, vq b), RO_MM(add_epi64)(a, b))
RO_SIMD_OP(vq, vq_shr, (vq a, int n), RO_MM(srli_epi64)(a, n)) /* logical */

#endif
