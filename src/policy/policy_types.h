/*
 * The policy's kinds and dense-layer choices, apart from policy.h so that
 * policy_internal.h (the structs) can use them without including the API
 * that its own module implements.
 */
#ifndef RO_POLICY_TYPES_H
#define RO_POLICY_TYPES_H

#include <stdint.h>

typedef enum ro_policy_kind {
    RO_POLICY_RANDOM = 1, /* uniform over the action space; no forward pass */
    RO_POLICY_MLP = 2,    /* MLP with seeded init, or loaded weights */
} ro_policy_kind_t;

/* How dense layers are computed. */
typedef enum ro_gemm {
    /* Our kernels (kernels.h): every output is the same float operations
     * whatever the batch and the instruction set, so a row's actions never
     * depend on batching, nor on the CPU. */
    RO_GEMM_EXACT = 0,
    /* OpenBLAS cblas_sgemm: its kernels round a row differently depending on
     * the batch size and the row's position, so trajectories under a Gaussian
     * or near-tied categorical policy can change with scheduling. Faster for
     * wide layers (hundreds of units) on CPUs with AVX-512. */
    RO_GEMM_BLAS = 1,
} ro_gemm_t;

/*
 * What a recurrent policy carries from one step to the next, per row:
 * state[i] points at row i's ro__policy_state_floats(p) floats, read as
 * the state before this step and overwritten with the state after it;
 * first[i] nonzero (or first NULL: none) says row i's observation starts
 * an episode, so its state is taken as zeros. A row's result depends only
 * on its own state, observation and draws, whatever the batch. With no
 * carry (NULL) every row starts from zeros and its new state is dropped.
 * Ignored by a policy without a cell.
 */
typedef struct ro_policy_carry {
    float *const *state;
    const uint8_t *first;
} ro_policy_carry_t;

#endif
