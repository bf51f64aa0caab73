/*
 * The types the policy's kernels compute with: the hidden layers'
 * activation and one dense layer in the kernels' layout. The kernels
 * themselves are in kernels.h.
 */
#ifndef RO_ACTIVATION_H
#define RO_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

/* The activation applied after each hidden layer of an MLP (0: none, the
 * head). */
typedef enum ro_activation {
    RO_ACT_TANH = 1,
    RO_ACT_RELU = 2,
} ro_activation_t;

/* Row strides of dense-layer weights are multiples of this many floats. */
#define RO_DENSE_PAD 8

/*
 * ro_dense_t is one affine layer y = W x + b in the layout the kernels
 * read: the weights transposed to [in x ldw] row-major (wt[k * ldw + j] is
 * W[j][k]), ldw = out rounded up to RO_DENSE_PAD, with zero padding columns;
 * bias [ldw], zero padded. wt and bias are 32-byte aligned. A dense kernel
 * broadcasts wt[k * ldw + j] for a few consecutive j at each k.
 */
typedef struct ro_dense {
    uint32_t in;
    uint32_t out;
    uint32_t ldw;
    const float *wt;
    const float *bias;
} ro_dense_t;

#endif
