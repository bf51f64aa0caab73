/*
 * What policy.c (building a policy) and policy_act.c (running it) share:
 * the two structs. Nothing outside src/policy includes this.
 */
#ifndef RO_POLICY_INTERNAL_H
#define RO_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"
#include "policy/kernels.h"
#include "policy/params.h"
#include "policy/policy_types.h"
#include "runtime/rng.h"
#include "spaces/layout.h"

typedef struct ro_policy ro_policy_t;
typedef struct ro_policy_ws ro_policy_ws_t;

/* Buffers the vector kernels read are aligned to a cache line. */
#define RO_POLICY_ALIGN 64

/* Lanes past a block's last sample that some kernel path reads: inputs and
 * draws there are filled, so every lane holds a defined value. */
#define RO_POLICY_MAX_LANES 16

struct ro_policy {
    ro_policy_kind_t kind;
    ro_space_kind_t act_kind;
    uint32_t obs_dim;
    uint32_t act_dim; /* floats per action: 1 for discrete */
    uint32_t nout;    /* discrete: number of actions; box: act_dim */

    /* MLP only. params is the PyTorch-layout copy that save writes (and
     * the OpenBLAS path reads); dense the same weights in the kernels'
     * layout. */
    ro_policy_params_t params;
    uint32_t nlayers;
    ro_dense_t dense[RO_POLICY_MAX_HIDDEN + 1];
    uint32_t max_out; /* widest layer output (a cell's: H) */
    /* A recurrent cell (policy_cell.c): dense[cell_at] is its input side
     * (out = G*H), cell_hh its recurrent side; hid = H. cell 0: none. */
    ro_cell_t cell;
    uint32_t cell_at, hid;
    ro_dense_t cell_hh;
    float *std;               /* box head: exp(log_std) */
    char *path;               /* the weights file, or NULL for seeded init */
    void *kmem;               /* dense weights and biases */
    ro_gemm_t gemm;           /* which kernel computes the dense layers */
    const ro_kernels_t *kern; /* the instruction set's kernels */

    /* Box actions: MLP clip bounds, or the random policy's sampling range
     * (infinite bounds replaced, see random_range). Composite: [nbox]. */
    float *low;
    float *high;

    /* Env ABI 2: the layout the policy was built for (the caller's, alive
     * as long as the policy), or NULL. composite: the action is not one
     * unmasked Discrete nor one Box, so acting goes through
     * policy_composite.c: one categorical head per discrete entry (masked),
     * Gaussian heads for the box floats with log_std below (saved in a
     * format-2 file's log_std, params_layout.h). */
    const ro_space_layout_t *lay;
    bool composite;
    float *box_log_std; /* [nbox] 0 at init; box_std = exp of it */
    float *box_std;
};

/* ro__policy_forward_block (policy_act.c) runs the block of the call's n
 * rows in ws->in that starts at row i0 (RO_BLOCK rows, fewer at the end:
 * *bn gets how many) through the MLP and returns the head block
 * [nout][RO_BLOCK]. carry (or NULL) holds the states of the call's rows. */
float *ro__policy_forward_block(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, uint32_t i0,
                                const ro_policy_carry_t *carry, uint32_t *bn);

/* ro__policy_cell_block (policy_cell.c) runs the cell over a block: x
 * [in][RO_BLOCK] the torso's output, y [hid][RO_BLOCK] the new h; reads
 * and writes the rows' states in carry (rows i0 ..), or starts from zero
 * and keeps nothing (carry NULL). */
void ro__policy_cell_block(const ro_policy_t *p, ro_policy_ws_t *ws, const float *x, float *y,
                           uint32_t n, const ro_policy_carry_t *carry, uint32_t i0);

/* ro__policy_alloc_aligned (policy_act.c) is malloc for the buffers the
 * kernels read: RO_POLICY_ALIGN-aligned (free() frees it), at least one
 * line even for 0 bytes; NULL when out of memory. */
void *ro__policy_alloc_aligned(size_t bytes);

/* ro__policy_check_call (policy_act.c) aborts on a workspace misuse. */
void ro__policy_check_call(const ro_policy_t *p, const ro_policy_ws_t *ws, uint32_t n);

/* A lane's scratch. The forward pass runs RO_BLOCK rows at a time through
 * all the layers, feature-major (kernels.h): a block's activations (2 x 64
 * features x 64 rows x 4 bytes = 32 KiB for 64-wide layers) stay in L1 from
 * one layer to the next, and the scratch does not grow with the batch. */
struct ro_policy_ws {
    const ro_policy_t *p;
    uint32_t max_batch;
    float *in;    /* [max_batch x obs_dim], row-major: what the caller fills */
    float *xt;    /* [obs_dim][RO_BLOCK]: a block's inputs, transposed */
    float *h[2];  /* [max_out][RO_BLOCK] each: layer outputs in turn */
    float *col;   /* [RO_BLOCK]: one Gaussian action dimension of a block */
    double *u[2]; /* [RO_BLOCK] each: a block's uniform draws */
    /* A recurrent policy's: st [state floats][RO_BLOCK] the rows' states
     * in (h, then c), gi and gh [G*H][RO_BLOCK] the gates' two sides, cout
     * [H][RO_BLOCK] an LSTM's new c; NULL otherwise. */
    float *st, *gi, *gh, *cout;
    void *hmem;
    size_t in_bytes, hmem_bytes; /* sizes of in and hmem */
    bool on_node;                /* in and hmem are NUMA blocks (ro__numa_alloc) */
};

#endif
