/*
 * kernel_cell.h: the element-wise step of the recurrent cells (GRU, LSTM)
 * over a block of samples, written once over policy/simd.h and included by
 * each kernel file after kernel_math.h (see kernel_dense.h). The matrix
 * products before it are the dense kernel's: gi = W_ih x + b_ih and gh =
 * W_hh h + b_hh, blocks [G*H][RO_BLOCK], gates in torch's order.
 *
 * Every lane is one sample and the operations are the same IEEE ones on
 * every path, so the scalar, AVX2 and AVX-512 builds give the same bits
 * (the dense kernel's argument). The formulas are torch.nn.GRUCell's and
 * LSTMCell's, in the order ATen evaluates them on the CPU:
 *   GRU:  r = sig(gi_r + gh_r), z = sig(gi_z + gh_z),
 *         n = tanh(gi_n + r gh_n), h' = n + z (h - n)
 *   LSTM: g = gi + gh; i, f, o = sig(g_i, g_f, g_o), u = tanh(g_g),
 *         c' = f c + i u, h' = o tanh(c')
 * with this file's sigmoid and kernel_math.h's tanh (a few ulp from
 * torch's: tests/policy/test_cell.py compares them).
 */
#ifndef RO_POLICY_KERNEL_CELL_H
#define RO_POLICY_KERNEL_CELL_H

/* sigmoid(x) = 1 / (1 + e^-x) through e = exp(-|x|) <= 1, so nothing
 * overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below. Below x = -87 the
 * weight is 0 (vf_exp_weight), and so is the result; a NaN gives 1. */
RO_INLINE vf vf_sigmoid(vf x)
{
    const vf e = vf_exp_weight(vf_sub(vf_set1(0.0f), vf_abs(x)));
    const vf s = vf_div(vf_set1(1.0f), vf_add(vf_set1(1.0f), e));
    return vf_select(vf_lt(x, vf_set1(0.0f)), vf_mul(e, s), s);
}

/* kernel_gru: hout[j] = the GRU's new state for the hid units j and the
 * lanes of samples 0 .. n - 1 (whole vectors), from gi and gh [3 hid][RO_BLOCK]
 * and the old state h [hid][RO_BLOCK]. */
static void kernel_gru(const float *gi, const float *gh, const float *h, float *hout, uint32_t hid,
                       uint32_t n)
{
    const size_t nf = (n + VF_LANES - 1) / VF_LANES * VF_LANES, B = RO_BLOCK;
    for (uint32_t j = 0; j < hid; j++)
        for (size_t s = 0; s < nf; s += VF_LANES) {
            const size_t r0 = (size_t)j * B + s, z0 = r0 + hid * B, n0 = z0 + hid * B;
            const vf r = vf_sigmoid(vf_add(vf_load(gi + r0), vf_load(gh + r0)));
            const vf z = vf_sigmoid(vf_add(vf_load(gi + z0), vf_load(gh + z0)));
            const vf nn = vf_tanh(vf_fma(r, vf_load(gh + n0), vf_load(gi + n0)));
            vf_store(hout + r0, vf_fma(z, vf_sub(vf_load(h + r0), nn), nn));
        }
}

/* kernel_lstm: hout and cout [hid][RO_BLOCK] = the LSTM's new state from gi
 * and gh [4 hid][RO_BLOCK] and the old cell c [hid][RO_BLOCK]. */
static void kernel_lstm(const float *gi, const float *gh, const float *c, float *hout, float *cout,
                        uint32_t hid, uint32_t n)
{
    const size_t nf = (n + VF_LANES - 1) / VF_LANES * VF_LANES, B = RO_BLOCK;
    for (uint32_t j = 0; j < hid; j++)
        for (size_t s = 0; s < nf; s += VF_LANES) {
            const size_t i0 = (size_t)j * B + s, f0 = i0 + hid * B, g0 = f0 + hid * B,
                         o0 = g0 + hid * B;
            const vf i = vf_sigmoid(vf_add(vf_load(gi + i0), vf_load(gh + i0)));
            const vf f = vf_sigmoid(vf_add(vf_load(gi + f0), vf_load(gh + f0)));
            const vf u = vf_tanh(vf_add(vf_load(gi + g0), vf_load(gh + g0)));
            const vf o = vf_sigmoid(vf_add(vf_load(gi + o0), vf_load(gh + o0)));
            const vf cn = vf_fma(f, vf_load(c + i0), vf_mul(i, u));
            vf_store(cout + i0, cn);
            vf_store(hout + i0, vf_mul(o, vf_tanh(cn)));
        }
}

#endif
