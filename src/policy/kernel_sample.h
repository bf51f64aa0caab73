/*
 * kernel_sample.h: the arithmetic of action sampling over a block of
 * samples, written once over policy/simd.h (see kernel_dense.h for how the
 * kernel files include it). The random draws themselves stay in policy.c,
 * which takes each sample's numbers from that sample's own generator and
 * hands them over in arrays; here every lane is one sample, and lanes
 * never mix.
 */
#ifndef RO_POLICY_KERNEL_SAMPLE_H
#define RO_POLICY_KERNEL_SAMPLE_H

/*
 * kernel_categorical draws one action per sample from softmax(z): z is the
 * head's block [nout][RO_BLOCK] (overwritten by the weights), u[s] the
 * sample's uniform draw in [0, 1), act[s] the result, for samples 0 .. n -
 * 1. The weights are exp(z - max z) (the largest is exactly 1), their total
 * is summed in double in action order, and the action is the first whose
 * running sum exceeds u * total (the inverse CDF). When rounding leaves no
 * such action (u * total at the very end), or every weight is 0 (NaN
 * logits), the last action with a positive weight is taken, or 0: the
 * result is always in [0, nout).
 */
static void kernel_categorical(float *z, uint32_t nout, uint32_t n, const double *u, int32_t *act)
{
    const uint32_t nf = (n + VF_LANES - 1) / VF_LANES * VF_LANES;
    for (uint32_t s = 0; s < nf; s += VF_LANES) {
        /* z[j] > m ? z[j] : m, in action order: a NaN logit never becomes
         * the maximum unless it is the first. */
        vf m = vf_load(z + s);
        for (uint32_t j = 1; j < nout; j++)
            m = vf_max(vf_load(z + (size_t)j * RO_BLOCK + s), m);
        for (uint32_t j = 0; j < nout; j++) {
            float *zj = z + (size_t)j * RO_BLOCK + s;
            vf_store(zj, vf_exp_weight(vf_sub(vf_load(zj), m)));
        }
    }
    const uint32_t nd = (n + VD_LANES - 1) / VD_LANES * VD_LANES;
    for (uint32_t s = 0; s < nd; s += VD_LANES) {
        vd total = vd_set1(0.0);
        for (uint32_t j = 0; j < nout; j++)
            total = vd_add(total, vd_load_f(z + (size_t)j * RO_BLOCK + s));
        const vd target = vd_mul(vd_load(u + s), total);
        const vd zero = vd_set1(0.0), none = vd_set1(-1.0);
        vd acc = zero, idx = none, last = zero;
        for (uint32_t j = 0; j < nout; j++) {
            const vd w = vd_load_f(z + (size_t)j * RO_BLOCK + s);
            const vd jd = vd_set1((double)j);
            acc = vd_add(acc, w);
            /* The first j with target < acc, where none was found yet. */
            idx = vd_select(md_and(vd_lt(target, acc), vd_eq(idx, none)), jd, idx);
            last = vd_select(vd_gt(w, zero), jd, last);
        }
        idx = vd_select(vd_eq(idx, none), last, idx);
        _Alignas(64) double out[VD_LANES];
        vd_store(out, idx);
        for (uint32_t l = 0; l < VD_LANES && s + l < n; l++)
            act[s + l] = (int32_t)out[l];
    }
}

/*
 * kernel_gaussian computes one action dimension for samples 0 .. n - 1:
 * out[s] = clip(mean[s] + std * N), N = sqrt(-2 log u1[s]) cos(2 pi
 * u2[s]) (Box-Muller; u1 in (0, 1], u2 in [0, 1)), in double, clipped to
 * [lo, hi] and rounded to float. Clipping the double and rounding gives the
 * same float as rounding and clipping the float, since lo and hi are
 * floats; a NaN mean gives a NaN.
 */
static void kernel_gaussian(const float *mean, uint32_t n, const double *u1, const double *u2,
                            float std, float lo, float hi, float *out)
{
    const vd vlo = vd_set1((double)lo), vhi = vd_set1((double)hi), vstd = vd_set1((double)std);
    const uint32_t nd = (n + VD_LANES - 1) / VD_LANES * VD_LANES;
    for (uint32_t s = 0; s < nd; s += VD_LANES) {
        const vd radius = vd_sqrt(vd_mul(vd_set1(-2.0), vd_log_unit(vd_load(u1 + s))));
        const vd normal = vd_mul(radius, vd_cos_2pi(vd_load(u2 + s)));
        vd a = vd_add(vd_load_f(mean + s), vd_mul(vstd, normal));
        a = vd_select(vd_lt(a, vlo), vlo, a);
        a = vd_select(vd_gt(a, vhi), vhi, a);
        vd_store_f(out + s, a);
    }
}

#endif
