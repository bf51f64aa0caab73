/*
 * kernel_math.h: the element functions of the policy's kernels (relu,
 * tanh, exp, log, cos), written once over policy/simd.h; see
 * kernel_dense.h for how the kernel files include it.
 */
#ifndef RO_POLICY_KERNEL_MATH_H
#define RO_POLICY_KERNEL_MATH_H

/* vf_horner and vd_horner: c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1] by
 * Horner's rule, one fused multiply-add a coefficient, written once for
 * both vector types. The coefficients are constants, so each call unrolls
 * to its chain of FMAs. */
#define RO_HORNER(v, scalar)                                                                       \
    RO_INLINE v v##_horner(v x, const scalar *c, int n)                                            \
    {                                                                                              \
        v p = v##_set1(c[0]);                                                                      \
        _Pragma("GCC unroll 16") for (int i = 1; i < n; i++) p = v##_fma(p, x, v##_set1(c[i]));    \
        return p;                                                                                  \
    }
RO_HORNER(vf, float)
RO_HORNER(vd, double)

/* relu(x) = x > 0 ? x : 0 as max(0, x) with 0 first: x86's max returns its
 * second operand when either is NaN, so a NaN passes through, and
 * relu(-0) = -0 (0 > -0 is false), as `x < 0 ? 0 : x` gives. */
RO_INLINE vf vf_relu(vf x)
{
    return vf_max(vf_set1(0.0f), x);
}

/*
 * tanh(x) = x P(x^2) / Q(x^2) for |x| <= TANH_CLAMP: a rational minimax
 * approximation of degree 9/8 (P and Q of degree 4 in x^2, P(0) = Q(0) =
 * 1), fitted for relative error on [0, 8.05] (approximation error 7.1e-9;
 * docs/policy.md). Evaluated in float, 12 vector operations: the clamp,
 * x^2, eight fused multiply-adds, a multiply and a divide. The float
 * rounding of the two Horner chains dominates the error: at most 4.97 ulp
 * over all floats, 0.04 ulp on average, 0.07 % of floats beyond 2 ulp
 * (tests/policy/test_kernels.c and bench/tanh_error.c measure it).
 *
 * TANH_CLAMP is the first float at which the expression rounds to 1, and
 * it stays below 1 under it, so |tanh| <= 1 everywhere and +-inf gives +-1
 * exactly. Odd by construction: x^2 is the same for -x, and the sign comes
 * in once, through x. A NaN stays a NaN: the clamp passes it through.
 */
#define TANH_CLAMP 0x1.ff9d8cp+2f /* 7.9939909 */

RO_INLINE vf vf_tanh(vf x)
{
    const vf v = vf_clamp(x, vf_set1(TANH_CLAMP));
    const vf s = vf_mul(v, v);
    static const float pc[] = {1.519451942e-08f, 2.187517384e-05f, 3.570632311e-03f,
                               1.344374716e-01f, 1.0f};
    static const float qc[] = {8.509771874e-07f, 3.409567871e-04f, 2.616096660e-02f,
                               4.677707553e-01f, 1.0f};
    return vf_div(vf_mul(v, vf_horner(s, pc, 5)), vf_horner(s, qc, 5));
}

/*
 * exp(d) for the softmax weights, d = z - max z <= 0 (or NaN). d = k ln2 +
 * r with k = round(d / ln2) and |r| <= ln2 / 2 (ln2 in two parts, so k
 * ln2_hi is exact); exp(r) is a degree-6 minimax polynomial (relative error
 * 1.9e-9); 2^k is built in the exponent bits. Below -87 (exp < 1.7e-38,
 * where 2^k would leave the normal range) and for a NaN the weight is 0: a
 * weight that small can never be drawn against a total of at least 1.
 */
RO_INLINE vf vf_exp_weight(vf d)
{
    const vf km = vf_fma(d, vf_set1(1.44269504f), vf_set1(0x1.8p23f)); /* 0x1.8p23 + k */
    const vf kf = vf_sub(km, vf_set1(0x1.8p23f));
    vf r = vf_fma(kf, vf_set1(-0.693145751953125f), d);
    r = vf_fma(kf, vf_set1(-1.42860677e-06f), r);
    static const float pc[] = {1.383683528e-03f,
                               8.374815807e-03f,
                               4.166822508e-02f,
                               1.666641980e-01f,
                               4.999999106e-01f,
                               1.0f,
                               1.0f};
    const vf p = vf_horner(r, pc, 7);
    const vf scale = vi_float_bits(vi_shl(vi_add(vf_bits(km), vi_set1(127 - 0x4B400000)), 23));
    return vf_select(vf_lt(vf_set1(-87.0f), d), vf_mul(p, scale), vf_set1(0.0f));
}

/*
 * log(u) for u in [2^-53, 1] (a uniform draw: normal and positive). u = 2^e
 * m with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s), s = (m - 1) / (m +
 * 1), |s| <= 0.172, by its Taylor series to s^23 (truncation below 1e-17
 * relative); e ln2 with ln2 in two parts (e ln2_hi exact).
 */
RO_INLINE vd vd_log_unit(vd u)
{
    const vq bits = vd_bits(u);
    /* The biased exponent as a double: its bits or 2^52, minus 2^52. */
    const vd be = vd_sub(vq_double_bits(vq_or(vq_shr(bits, 52), vq_set1(0x4330000000000000))),
                         vd_set1(0x1p52));
    vd m = vq_double_bits(
        vq_or(vq_and(bits, vq_set1(0x000fffffffffffff)), vq_set1(0x3ff0000000000000))); /* [1, 2) */
    const md big = vd_gt(m, vd_set1(0x1.6a09e667f3bcdp+0)); /* sqrt(2) */
    m = vd_select(big, vd_mul(m, vd_set1(0.5)), m);
    const vd e = vd_sub(be, vd_select(big, vd_set1(1022.0), vd_set1(1023.0)));
    const vd s = vd_div(vd_sub(m, vd_set1(1.0)), vd_add(m, vd_set1(1.0)));
    const vd z = vd_mul(s, s);
    static const double tc[] = {1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13,
                                1.0 / 11, 1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3};
    const vd t = vd_horner(z, tc, 11);
    const vd s2 = vd_add(s, s);
    const vd logm = vd_fma(vd_mul(s2, z), t, s2); /* 2s + 2s z t */
    return vd_fma(e, vd_set1(0x1.62e42feep-1), vd_fma(e, vd_set1(1.9082149292705877e-10), logm));
}

/*
 * cos(2 pi u) for u in [0, 1). t = u - round(u) in [-1/2, 1/2]; cos is
 * even, so a = |t|; n = round(4a) in {0, 1, 2} and r = a - n/4 (exact) in
 * [-1/8, 1/8]; with th = 2 pi r, cos(2 pi a) is cos th, -sin th or -cos th.
 * sin and cos of |th| <= pi/4 by their Taylor series (to th^17 and th^18:
 * truncation below 5e-17).
 */
RO_INLINE vd vd_cos_2pi(vd u)
{
    const vd round = vd_set1(0x1.8p52); /* adding it rounds to an integer */
    const vd t = vd_sub(u, vd_sub(vd_add(u, round), round));
    const vd a = vq_double_bits(vq_and(vd_bits(t), vq_set1(0x7fffffffffffffff)));
    const vd n = vd_sub(vd_add(vd_mul(a, vd_set1(4.0)), round), round);
    const vd th = vd_mul(vd_fma(n, vd_set1(-0.25), a), vd_set1(6.2831853071795862));
    const vd z = vd_mul(th, th);
    static const double sc[] = {2.8114572543455206e-15, -7.6471637318198164e-13,
                                1.6059043836821613e-10, -2.505210838544172e-08,
                                2.7557319223985893e-06, -1.9841269841269841e-04,
                                8.3333333333333332e-03, -1.6666666666666666e-01};
    static const double cc[] = {
        -1.5619206968586225e-16, 4.7794773323873853e-14,  -1.1470745597729725e-11,
        2.08767569878681e-09,    -2.7557319223985888e-07, 2.4801587301587302e-05,
        -1.3888888888888889e-03, 4.1666666666666664e-02,  -0.5};
    const vd sn = vd_fma(vd_mul(th, z), vd_horner(z, sc, 8), th);
    const vd cs = vd_fma(z, vd_horner(z, cc, 9), vd_set1(1.0));
    const vd zero = vd_set1(0.0);
    const vd res = vd_select(vd_eq(n, vd_set1(1.0)), vd_sub(zero, sn), cs);
    return vd_select(vd_eq(n, vd_set1(2.0)), vd_sub(zero, cs), res);
}

#endif
