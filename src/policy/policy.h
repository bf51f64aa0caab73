/*
 * The policy forward pass: an MLP evaluated with cblas_sgemm over a batch of
 * observations, then per-row action sampling; or a random policy.
 *
 * A ro_policy_t holds immutable weights and may be read by several threads
 * at once. A ro_policy_ws_t is the scratch of one learner lane (one thread
 * at a time): input rows, hidden activations, outputs.
 */
#ifndef RO_POLICY_H
#define RO_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"
#include "policy/activation.h"
#include "policy/params.h"
#include "runtime/rng.h"

typedef enum ro_policy_kind {
    RO_POLICY_RANDOM = 1, /* uniform over the action space; no forward pass */
    RO_POLICY_MLP = 2,    /* MLP with seeded init, or loaded weights */
} ro_policy_kind_t;

/* How dense layers are computed. */
typedef enum ro_gemm {
    /* Our kernel (activation.c): every output is the same float operations
     * whatever the batch, so a row's actions never depend on batching. */
    RO_GEMM_EXACT = 0,
    /* OpenBLAS cblas_sgemm: its kernels round a row differently depending on
     * the batch size and the row's position, so trajectories under a Gaussian
     * or near-tied categorical policy can change with scheduling. Faster for
     * wide layers (hundreds of units) on CPUs with AVX-512. */
    RO_GEMM_BLAS = 1,
} ro_gemm_t;

typedef struct ro_policy_spec {
    ro_policy_kind_t kind;
    uint32_t hidden[RO_POLICY_MAX_HIDDEN]; /* hidden layer widths */
    uint32_t nhidden;
    ro_activation_t activation;
    const char *params_path; /* MLP weights file (PolicyParams), or NULL for seeded init */
    uint64_t seed;           /* run seed; init uses stream RO_STREAM_INIT */
    ro_gemm_t gemm;          /* dense-layer kernel */
} ro_policy_spec_t;

typedef struct ro_policy ro_policy_t;
typedef struct ro_policy_ws ro_policy_ws_t;

/*
 * ro__policy_new builds a policy for the given spaces. For an MLP with
 * params_path set, loads and validates the file (dimensions must match the
 * spaces; spec hidden/activation are then taken from the file). On failure
 * returns a negative code and a message naming the problem in err.
 */
int ro__policy_new(ro_policy_t **out, const ro_policy_spec_t *spec, const ro_space_t *obs,
                   const ro_space_t *act, char *err, size_t errlen);
void ro__policy_free(ro_policy_t *p);

struct ro_policy_params;
/* ro__policy_new_from_params builds an MLP from decoded weights (checked
 * against the spaces; label names them in messages, e.g. "pushed policy v3").
 * On success the weights move into the policy and *pp is emptied. */
int ro__policy_new_from_params(ro_policy_t **out, struct ro_policy_params *pp, ro_gemm_t gemm,
                               const ro_space_t *obs, const ro_space_t *act, const char *label,
                               char *err, size_t errlen);

/* ro__policy_describe writes e.g. "mlp(64,64,tanh)" or "random" into buf. */
void ro__policy_describe(const ro_policy_t *p, char *buf, size_t len);

/* Widths of the observation and of the action (1 for discrete). */
uint32_t ro__policy_obs_dim(const ro_policy_t *p);
uint32_t ro__policy_act_dim(const ro_policy_t *p);

/* ro__policy_version is the version field of the weights (PolicyParams: a
 * file or a trainer's push); 0 for a random or seeded policy. */
uint64_t ro__policy_version(const ro_policy_t *p);

/* ro__policy_ws_new allocates scratch for batches of up to max_batch rows. */
int ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch);
/* ro__policy_ws_new_on is ro__policy_ws_new with the scratch (input batch
 * and activations) placed on NUMA node mem_node; < 0: the heap. */
int ro__policy_ws_new_on(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch,
                         int mem_node);
void ro__policy_ws_free(ro_policy_ws_t *ws);

/* ro__policy_ws_input returns the [max_batch x obs_dim] row-major input the
 * caller fills before ro__policy_act. */
float *ro__policy_ws_input(ro_policy_ws_t *ws);

/*
 * ro__policy_act runs the forward pass over the first n input rows and
 * samples one action per row, row i drawing only from rngs[i]. Discrete
 * actions go to act_i[i]; box actions to act_f[i * act_dim ...], clipped to
 * the action bounds. Exactly the same number of draws is taken from rngs[i]
 * whatever n is, so sampling does not depend on batching.
 */
void ro__policy_act(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, ro_rng_t *const *rngs,
                    int32_t *act_i, float *act_f);

/* ro__policy_forward writes the raw head outputs (logits or means) of the
 * first n input rows to out [n x act_dim]. MLP only; used by tests. */
void ro__policy_forward(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, float *out);

/* ro__policy_save writes an MLP's weights as a PolicyParams file. */
int ro__policy_save(const ro_policy_t *p, const char *path, char *err, size_t errlen);

#endif
