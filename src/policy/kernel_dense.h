/*
 * kernel_dense.h: the dense layer and the activations over a block of
 * samples, written once over policy/simd.h and included by each kernel
 * file (kernels_scalar.c, kernels_avx2.c, kernels_avx512.c) after
 * kernel_math.h.
 *
 * Layout: a block holds up to RO_BLOCK samples feature-major: feature k of
 * sample s is at x[k * RO_BLOCK + s]. A dense layer reads its inputs that
 * way and writes its outputs the same way, so one vector holds one feature
 * of VF_LANES consecutive samples, and every lane is one sample's own sum.
 *
 * The sum is fixed by definition: y[j] = bias[j], then y[j] = fma(w[j][k],
 * x[k], y[j]) for k = 0, 1, ..., in - 1, one rounding per step. Lanes never
 * mix, so a sample's outputs do not depend on which lane, vector or block
 * it sits in, nor on how many lanes a vector has: the scalar, AVX2 and
 * AVX-512 builds of this file give the same bits.
 *
 * Register tiling: a tile of TILE_C outputs by TILE_R vectors of samples
 * keeps TILE_C * TILE_R accumulators in registers over the whole k loop;
 * each step loads TILE_R input vectors and broadcasts TILE_C weights.
 */
#ifndef RO_POLICY_KERNEL_DENSE_H
#define RO_POLICY_KERNEL_DENSE_H

#if RO_SIMD == RO_SIMD_AVX512
#define TILE_C 6 /* 24 accumulators of the 32 registers */
#define TILE_R 4
#elif RO_SIMD == RO_SIMD_AVX2
#define TILE_C 6 /* 12 accumulators of the 16 registers */
#define TILE_R 2
#else
#define TILE_C 8
#define TILE_R 1
#endif

/* RO_ACT_EXP_WEIGHT: an element function that is not an activation, for
 * kernel_act to apply in the tests. */
#define RO_ACT_EXP_WEIGHT 100

/* act_apply applies the hidden layers' activation to one vector. */
RO_INLINE vf act_apply(vf v, ro_activation_t act)
{
    if (act == RO_ACT_RELU)
        return vf_relu(v);
    if (act == RO_ACT_TANH)
        return vf_tanh(v);
    if ((int)act == RO_ACT_EXP_WEIGHT)
        return vf_exp_weight(v);
    return v;
}

/* dense_tile computes outputs j0 .. j0 + C - 1 for the R vectors of
 * samples starting at lane s0. C and R are constants after inlining, so
 * the accumulators live in registers. */
/* The tile loops have constant trip counts once inlined; unrolled (the
 * pragmas), the accumulators are registers at -O2 as at -O3. */
RO_INLINE void dense_tile(const ro_dense_t *l, const float *x, float *y, uint32_t j0, const int C,
                          size_t s0, const int R, ro_activation_t act)
{
    vf acc[TILE_C][TILE_R];
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        const vf b = vf_set1(l->bias[j0 + c]);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            acc[c][r] = b;
    }
    const float *w = l->wt + j0;
    const float *xk = x + s0;
    for (uint32_t k = 0; k < l->in; k++, w += l->ldw, xk += RO_BLOCK) {
        vf xv[TILE_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            xv[r] = vf_load(xk + r * VF_LANES);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const vf wb = vf_set1(w[c]);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                acc[c][r] = vf_fma(wb, xv[r], acc[c][r]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            vf_store(y + (size_t)(j0 + c) * RO_BLOCK + s0 + (size_t)r * VF_LANES,
                     act_apply(acc[c][r], act));
}

/* dense_cols computes outputs j0 .. j0 + C - 1 for the first nvec vectors
 * of samples: whole tiles of TILE_R vectors, then the rest as one tile (R a
 * constant in each case, so its loops unroll). */
RO_INLINE void dense_cols(const ro_dense_t *l, const float *x, float *y, uint32_t j0, const int C,
                          uint32_t nvec, ro_activation_t act)
{
    uint32_t v = 0;
    for (; v + TILE_R <= nvec; v += TILE_R)
        dense_tile(l, x, y, j0, C, (size_t)v * VF_LANES, TILE_R, act);
#if TILE_R > 1
    const size_t s0 = (size_t)v * VF_LANES;
#define DENSE_REST_R(R)                                                                            \
    case R:                                                                                        \
        dense_tile(l, x, y, j0, C, s0, R, act);                                                    \
        break
    switch (nvec - v) {
        DENSE_REST_R(1);
#if TILE_R > 2
        DENSE_REST_R(2);
#endif
#if TILE_R > 3
        DENSE_REST_R(3);
#endif
    default:
        break;
    }
#undef DENSE_REST_R
#endif
}

/* kernel_dense: y[j][s] = act(bias[j] + sum_k w[j][k] x[k][s]) for every
 * output j and the lanes of the first n samples, rounded up to whole
 * vectors (the lanes past n hold whatever the inputs there give): whole
 * tiles of TILE_C outputs, then the rest as one tile. */
static void kernel_dense(const ro_dense_t *l, const float *x, float *y, uint32_t n,
                         ro_activation_t act)
{
    const uint32_t nvec = (n + VF_LANES - 1) / VF_LANES;
    uint32_t j = 0;
    for (; j + TILE_C <= l->out; j += TILE_C)
        dense_cols(l, x, y, j, TILE_C, nvec, act);
#define DENSE_REST_C(C)                                                                            \
    case C:                                                                                        \
        dense_cols(l, x, y, j, C, nvec, act);                                                      \
        break
    switch (l->out - j) {
        DENSE_REST_C(1);
        DENSE_REST_C(2);
        DENSE_REST_C(3);
        DENSE_REST_C(4);
        DENSE_REST_C(5);
#if TILE_C > 6
        DENSE_REST_C(6);
        DENSE_REST_C(7);
#endif
    default:
        break;
    }
#undef DENSE_REST_C
}

/* kernel_act applies an activation to x[0 .. n) in place, any n and any
 * alignment: whole vectors, then the last few lanes through a padded
 * vector, so every element goes through the same vector function. */
static void kernel_act(float *x, size_t n, ro_activation_t act)
{
    size_t i = 0;
    for (; i + VF_LANES <= n; i += VF_LANES)
        vf_storeu(x + i, act_apply(vf_loadu(x + i), act));
    if (i < n) {
        float tail[VF_LANES] = {0};
        memcpy(tail, x + i, (n - i) * sizeof(float));
        vf_storeu(tail, act_apply(vf_loadu(tail), act));
        memcpy(x + i, tail, (n - i) * sizeof(float));
    }
}

static void kernel_exp_weight(float *x, size_t n)
{
    kernel_act(x, n, (ro_activation_t)RO_ACT_EXP_WEIGHT);
}

#endif
