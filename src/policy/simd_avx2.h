/*
 * simd_avx2.h: policy/simd.h's operations for AVX2 and FMA (8 floats, 4 doubles).
 * Included by simd.h only, which includes the intrinsics first; the
 * operations spelt as AVX-512 spells them are in simd_x86.h.
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

#define RO_MM(op) _mm256_##op
#define RO_MM_SI(op) _mm256_##op##_si256
#define RO_MM_FROM_SI(t) _mm256_castsi256_##t
#define RO_MM_CMP(t) _mm256_cmp_##t
#include "policy/simd_x86.h"

/* Masks are vectors of all-ones or all-zero lanes. */
RO_SIMD_OP(vf, vf_select, (mf m, vf yes, vf no), _mm256_blendv_ps(no, yes, m))
RO_SIMD_OP(vd, vd_select, (md m, vd yes, vd no), _mm256_blendv_pd(no, yes, m))
RO_SIMD_OP(md, md_and, (md a, md b), _mm256_and_pd(a, b))
RO_SIMD_OP(md, md_andnot, (md a, md b), _mm256_andnot_pd(a, b)) /* !a && b */

RO_SIMD_OP(vd, vd_load_f, (const float *p), _mm256_cvtps_pd(_mm_load_ps(p))) /* 16-byte aligned */
RO_SIMD_DO(vd_store_f, (float *p, vd a), _mm_store_ps(p, _mm256_cvtpd_ps(a)))
RO_SIMD_OP(vq, vq_set1, (int64_t a), _mm256_set1_epi64x(a))

#endif
