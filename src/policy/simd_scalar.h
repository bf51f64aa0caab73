/*
 * simd_scalar.h: policy/simd.h's operations for portable C (one float, one double).
 * Included by simd.h only, which includes the intrinsics first.
 */
#ifndef RO_POLICY_SIMD_SCALAR_H
#define RO_POLICY_SIMD_SCALAR_H

#define VF_LANES 1
#define VD_LANES 1
typedef float vf;
typedef uint32_t vi;
typedef int mf;
typedef double vd;
typedef uint64_t vq;
typedef int md;

/* RO_SCALAR_BITS defines name(a): a's bits read as a `to`, without the
 * undefined behaviour of a pointer cast. */
#define RO_SCALAR_BITS(to, name, from)                                                             \
    RO_INLINE to name(from a)                                                                      \
    {                                                                                              \
        to r;                                                                                      \
        memcpy(&r, &a, sizeof r);                                                                  \
        return r;                                                                                  \
    }
RO_SCALAR_BITS(vi, vf_bits, vf)
RO_SCALAR_BITS(vf, vi_float_bits, vi)
RO_SCALAR_BITS(vq, vd_bits, vd)
RO_SCALAR_BITS(vd, vq_double_bits, vq)

RO_SIMD_OP(vf, vf_set1, (float a), a)
RO_SIMD_OP(vf, vf_load, (const float *p), *p)
RO_SIMD_OP(vf, vf_loadu, (const float *p), *p)
RO_SIMD_DO(vf_store, (float *p, vf a), *p = a)
RO_SIMD_DO(vf_storeu, (float *p, vf a), *p = a)
RO_SIMD_OP(vf, vf_add, (vf a, vf b), a + b)
RO_SIMD_OP(vf, vf_sub, (vf a, vf b), a - b)
RO_SIMD_OP(vf, vf_mul, (vf a, vf b), a *b)
RO_SIMD_OP(vf, vf_div, (vf a, vf b), a / b)
RO_SIMD_OP(vf, vf_fma, (vf a, vf b, vf c), fmaf(a, b, c))
RO_SIMD_OP(vf, vf_max, (vf a, vf b), a > b ? a : b)
RO_SIMD_OP(vf, vf_min, (vf a, vf b), a < b ? a : b)
RO_SIMD_OP(mf, vf_lt, (vf a, vf b), a < b)
RO_SIMD_OP(vf, vf_select, (mf m, vf yes, vf no), m ? yes : no)
RO_SIMD_OP(vi, vi_set1, (int32_t a), (vi)a)
RO_SIMD_OP(vi, vi_add, (vi a, vi b), a + b) /* unsigned: wraps as the vector add does */
RO_SIMD_OP(vi, vi_sub, (vi a, vi b), a - b)
RO_SIMD_OP(vi, vi_shl, (vi a, int n), a << n)

RO_INLINE vf vf_clamp(vf x, vf c)
{
    const vf v = -c > x ? -c : x;
    return c < v ? c : v;
}
RO_INLINE vf vf_abs(vf a)
{
    return vi_float_bits(vf_bits(a) & 0x7fffffffu);
}
RO_INLINE vf vf_with_sign_of(vf mag, vf sgn)
{
    return vi_float_bits(vf_bits(mag) | (vf_bits(sgn) & 0x80000000u));
}

RO_SIMD_OP(vd, vd_set1, (double a), a)
RO_SIMD_OP(vd, vd_load, (const double *p), *p)
RO_SIMD_DO(vd_store, (double *p, vd a), *p = a)
RO_SIMD_OP(vd, vd_load_f, (const float *p), (double)*p)
RO_SIMD_DO(vd_store_f, (float *p, vd a), *p = (float)a)
RO_SIMD_OP(vd, vd_add, (vd a, vd b), a + b)
RO_SIMD_OP(vd, vd_sub, (vd a, vd b), a - b)
RO_SIMD_OP(vd, vd_mul, (vd a, vd b), a *b)
RO_SIMD_OP(vd, vd_div, (vd a, vd b), a / b)
RO_SIMD_OP(vd, vd_sqrt, (vd a), sqrt(a))
RO_SIMD_OP(vd, vd_fma, (vd a, vd b, vd c), fma(a, b, c))
RO_SIMD_OP(md, vd_lt, (vd a, vd b), a < b)
RO_SIMD_OP(md, vd_gt, (vd a, vd b), a > b)
RO_SIMD_OP(md, vd_eq, (vd a, vd b), a == b)
RO_SIMD_OP(md, md_and, (md a, md b), a &&b)
RO_SIMD_OP(md, md_andnot, (md a, md b), !a && b)
RO_SIMD_OP(vd, vd_select, (md m, vd yes, vd no), m ? yes : no)
RO_SIMD_OP(vq, vq_set1, (int64_t a), (vq)a)
RO_SIMD_OP(vq, vq_and, (vq a, vq b), a &b)
RO_SIMD_OP(vq, vq_or, (vq a, vq b), a | b)
RO_SIMD_OP(vq, vq_add, (vq a, vq b), a + b)
RO_SIMD_OP(vq, vq_shr, (vq a, int n), a >> n)

#endif
