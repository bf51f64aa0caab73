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

/* A recurrent cell after the MLP's hidden layers (0: none). Gates in
 * torch.nn.GRUCell's order (r, z, n) and torch.nn.LSTMCell's (i, f, g, o). */
typedef enum ro_cell {
    RO_CELL_NONE = 0,
    RO_CELL_GRU = 1,
    RO_CELL_LSTM = 2,
} ro_cell_t;

/* The widest recurrent cell (state floats per row: H for a GRU, 2H for an
 * LSTM). */
#define RO_CELL_MAX 512u

/* ro_cell_gates is G, the gate count of a cell (3 GRU, 4 LSTM). */
static inline uint32_t ro_cell_gates(ro_cell_t c)
{
    return c == RO_CELL_LSTM ? 4u : c == RO_CELL_GRU ? 3u : 1u;
}

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
