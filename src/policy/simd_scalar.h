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

#endif
