/*
 * The vectorized kernels of the policy forward pass: the activations and the
 * dense (affine) layer.
 *
 * All of them are pure functions of their arguments: any thread may call
 * them at any time. None allocates.
 *
 * Every output element is computed by the same sequence of float operations
 * whatever the batch size or the row's position in the batch, so a row's
 * result never depends on how rows were batched (see activation.c for why
 * that needed our own dense kernel). The activations give the same bits on
 * every x86-64 CPU; the dense layer rounds once per step with FMA on CPUs
 * with AVX2+FMA and twice without, so across those two kinds of machine its
 * last bits may differ.
 */
#ifndef RO_ACTIVATION_H
#define RO_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

/* The activation applied after each hidden layer of an MLP. */
typedef enum ro_activation {
    RO_ACT_TANH = 1,
    RO_ACT_RELU = 2,
} ro_activation_t;

/* ro__act_tanh replaces x[0..n) by tanh(x) in place: absolute error at
 * most 2e-6 over all floats, odd (exact signs, tanh(-0) = -0), NaN in gives
 * NaN out. */
void ro__act_tanh(float *x, size_t n);

/* ro__act_relu replaces x[0..n) by max(x, 0) in place; NaN stays NaN. */
void ro__act_relu(float *x, size_t n);

/* Row strides of dense-layer weights and outputs are multiples of this many
 * floats (32 bytes: one AVX2 vector). */
#define RO_DENSE_PAD 8

/*
 * ro_dense_t is one affine layer y = x W^T + b in the layout the kernel
 * reads: the weights transposed to [in x ldw] row-major (wt[k * ldw + j] is
 * W[j][k]), ldw = out rounded up to RO_DENSE_PAD, with zero padding columns;
 * bias [ldw], zero padded. wt and bias are 32-byte aligned.
 */
typedef struct ro_dense {
    uint32_t in;
    uint32_t out;
    uint32_t ldw;
    const float *wt;
    const float *bias;
} ro_dense_t;

/*
 * ro__dense computes y[i][j] = bias[j] + sum_k x[i][k] * wt[k][j] for the n
 * rows of x (row stride ldx floats, no alignment needed) into the n rows of
 * y (row stride ldy, a multiple of RO_DENSE_PAD, y 32-byte aligned); all
 * ldw columns are written, the padding ones too. Uses AVX2+FMA where the
 * CPU has them, else ro__dense_portable.
 */
void ro__dense(const ro_dense_t *l, const float *x, size_t ldx, uint32_t n, float *y, size_t ldy);

/* ro__dense_portable is the plain C kernel ro__dense falls back to; exposed
 * so that tests check it on machines that never run it otherwise. */
void ro__dense_portable(const ro_dense_t *l, const float *x, size_t ldx, uint32_t n, float *y,
                        size_t ldy);

#endif
