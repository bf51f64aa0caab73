/*
 * The policy's kernels, one table per instruction set: the dense layer
 * with its activation, the activations alone, the recurrent cells' gates,
 * and the batched sampling arithmetic. Written once (kernel_math.h,
 * kernel_dense.h, kernel_cell.h, kernel_sample.h over simd.h) and built three times: portable C
 * (kernels_scalar.c), AVX2+FMA (kernels_avx2.c) and AVX-512
 * (kernels_avx512.c). Every table gives the same bits for the same inputs;
 * only the speed differs. ro__kernels picks one at run time from the CPU.
 *
 * All kernels are pure functions of their arguments: any thread may call
 * them at any time. None allocates.
 */
#ifndef RO_POLICY_KERNELS_H
#define RO_POLICY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "policy/activation.h"

/* Samples per block. A block holds its samples feature-major: feature k of
 * sample s at x[k * RO_BLOCK + s], rows 64-byte aligned. A multiple of
 * every path's vector width. */
#define RO_BLOCK 64

/* An instruction set a table is built for. */
typedef enum ro_kernel_path {
    RO_KERNELS_AUTO = 0,   /* the best this CPU runs */
    RO_KERNELS_SCALAR = 1, /* portable C, any x86-64 (or other) CPU */
    RO_KERNELS_AVX2 = 2,   /* AVX2 and FMA */
    RO_KERNELS_AVX512 = 3, /* AVX-512 F and DQ */
} ro_kernel_path_t;

typedef struct ro_kernels {
    ro_kernel_path_t path;
    const char *name; /* "scalar", "avx2", "avx512" */
    uint32_t lanes;   /* floats per vector */

    /* dense: y[j][s] = act(bias[j] + sum_k w[j][k] x[k][s]) for every
     * output j of l, over block rows x [l->in][RO_BLOCK] and y
     * [l->out][RO_BLOCK], for the lanes of samples 0 .. n - 1 rounded up to
     * whole vectors; act 0 is the identity (the head). The sum is bias, then
     * one fused multiply-add per k in k order. */
    void (*dense)(const ro_dense_t *l, const float *x, float *y, uint32_t n, ro_activation_t act);

    /* act: x[0 .. n) = act(x) in place (any n, any alignment). */
    void (*act)(float *x, size_t n, ro_activation_t act);

    /* categorical: one action per sample from softmax of the logits z
     * [nout][RO_BLOCK] (overwritten), with u[s] the sample's uniform draw;
     * act[s] for s < n. u must hold whole vectors of lanes past n. The
     * blocks and the draws (z, u, u1, u2, mean, out) are 64-byte aligned. */
    void (*categorical)(float *z, uint32_t nout, uint32_t n, const double *u, int32_t *act);

    /* gaussian: out[s] = clip(mean[s] + std N(u1[s], u2[s]), lo, hi) for s
     * < n and the lanes up to the next whole vector, N by Box-Muller. */
    void (*gaussian)(const float *mean, uint32_t n, const double *u1, const double *u2, float std,
                     float lo, float hi, float *out);

    /* exp_weight: x[i] = exp(x[i]) for the softmax weights (x <= 0; 0
     * below -87 or for a NaN), any n; for the tests. */
    void (*exp_weight)(float *x, size_t n);

    /* gru: hout [hid][RO_BLOCK] = the GRU cell's new state from gi = W_ih
     * x + b_ih and gh = W_hh h + b_hh ([3 hid][RO_BLOCK], gates r, z, n)
     * and the old state h, for the lanes of samples 0 .. n - 1 rounded up
     * to whole vectors (kernel_cell.h). */
    void (*gru)(const float *gi, const float *gh, const float *h, float *hout, uint32_t hid,
                uint32_t n);

    /* lstm: hout and cout [hid][RO_BLOCK] = the LSTM cell's new state from
     * gi and gh ([4 hid][RO_BLOCK], gates i, f, g, o) and the old cell c. */
    void (*lstm)(const float *gi, const float *gh, const float *c, float *hout, float *cout,
                 uint32_t hid, uint32_t n);
} ro_kernels_t;

/* ro__kernels returns the table for path, or NULL if this build or this CPU
 * cannot run it; RO_KERNELS_AUTO gives the best one that runs. Any thread. */
const ro_kernels_t *ro__kernels(ro_kernel_path_t path);

/* ro__kernels_path_name names a path ("auto", "scalar", "avx2", "avx512";
 * "?" for another value). */
const char *ro__kernels_path_name(ro_kernel_path_t path);

/* The tables themselves (kernels.c chooses among them). */
extern const ro_kernels_t ro__kernels_scalar;
extern const ro_kernels_t ro__kernels_avx2;
extern const ro_kernels_t ro__kernels_avx512;

#endif
