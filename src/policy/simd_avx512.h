/*
 * simd_avx512.h: policy/simd.h's operations for AVX-512 (16 floats, 8 doubles).
 * Included by simd.h only, which includes the intrinsics first; the
 * operations spelt as AVX2 spells them are in simd_x86.h.
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

#define RO_MM(op) _mm512_##op
#define RO_MM_SI(op) _mm512_##op##_si512
#define RO_MM_FROM_SI(t) _mm512_castsi512_##t
#define RO_MM_CMP(t) _mm512_cmp_##t##_mask
#include "policy/simd_x86.h"

/* Masks are mask registers, one bit a lane. */
RO_SIMD_OP(vf, vf_select, (mf m, vf yes, vf no), _mm512_mask_blend_ps(m, no, yes))
RO_SIMD_OP(vd, vd_select, (md m, vd yes, vd no), _mm512_mask_blend_pd(m, no, yes))
RO_SIMD_OP(md, md_and, (md a, md b), (md)(a &b))
RO_SIMD_OP(md, md_andnot, (md a, md b), (md)(~a &b)) /* !a && b */

RO_SIMD_OP(vd, vd_load_f, (const float *p),
           _mm512_cvtps_pd(_mm256_load_ps(p))) /* 32-byte aligned */
RO_SIMD_DO(vd_store_f, (float *p, vd a), _mm256_store_ps(p, _mm512_cvtpd_ps(a)))
RO_SIMD_OP(vq, vq_set1, (int64_t a), _mm512_set1_epi64(a))

#endif
