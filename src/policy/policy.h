/*
 * The policy forward pass: an MLP (optionally with a GRU or LSTM cell
 * before its head, whose state the caller keeps per row: ro_policy_carry_t)
 * evaluated over a batch of observations
 * by the kernels of kernels.h (or OpenBLAS's sgemm with --gemm openblas),
 * then one sampled action per row; or a random policy.
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
#include "policy/kernels.h"
#include "policy/params.h"
#include "policy/policy_types.h"
#include "runtime/rng.h"

typedef struct ro_policy_spec {
    ro_policy_kind_t kind;
    uint32_t hidden[RO_POLICY_MAX_HIDDEN]; /* hidden layer widths */
    uint32_t nhidden;
    ro_activation_t activation;
    /* A recurrent cell after the hidden layers (--recurrent gru:H|lstm:H),
     * cell_hidden = H in 1..RO_CELL_MAX; RO_CELL_NONE: an MLP. */
    ro_cell_t cell;
    uint32_t cell_hidden;
    const char *params_path; /* MLP weights file (PolicyParams), or NULL for seeded init */
    uint64_t seed;           /* run seed; init uses stream RO_STREAM_INIT */
    ro_gemm_t gemm;          /* dense-layer kernel */
    /* Which instruction set's kernels (kernels.h): RO_KERNELS_AUTO (0), the
     * best this CPU runs, unless a test or a benchmark asks for another.
     * Every path gives the same bits, so this changes speed only. */
    ro_kernel_path_t kernels;
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

struct ro_space_layout;
/*
 * ro__policy_new_layout builds a policy for an env's layout (env ABI 2,
 * spaces/layout.h; an ABI 1 layout gives exactly ro__policy_new's policy).
 * The MLP reads the flattened rows (obs_width floats: the tensors in the
 * env's order, uint8 / 255). One unmasked Discrete or one Box part: the
 * policy of ro__policy_new over that input (weights files work). Any other
 * action (MultiDiscrete, MultiBinary, a Tuple, a mask) is composite: one
 * categorical head per discrete entry, a Gaussian head per box float
 * (log_std 0 when seeded). With params_path the weights come from a
 * format-2 file of the same layout (params_layout.h), or a format-1 file
 * where one plain head of that width fits. lay must outlive the policy.
 */
int ro__policy_new_layout(ro_policy_t **out, const ro_policy_spec_t *spec,
                          const struct ro_space_layout *lay, char *err, size_t errlen);

/* ro__policy_layout is the layout a policy was built for, or NULL. */
const struct ro_space_layout *ro__policy_layout(const ro_policy_t *p);

struct ro_policy_params;
/* ro__policy_new_from_params builds an MLP from decoded weights (checked
 * against the spaces; label names them in messages, e.g. "pushed policy v3").
 * On success the weights move into the policy and *pp is emptied. */
int ro__policy_new_from_params(ro_policy_t **out, struct ro_policy_params *pp, ro_gemm_t gemm,
                               const ro_space_t *obs, const ro_space_t *act, const char *label,
                               char *err, size_t errlen);

/* ro__policy_new_from_params_layout is ro__policy_new_from_params for an
 * env's layout (env ABI 2): pp is checked against lay as a weights file is
 * (params_layout.h; a composite head needs a format-2 message), then moves
 * into the policy. lay must outlive the policy. */
int ro__policy_new_from_params_layout(ro_policy_t **out, struct ro_policy_params *pp,
                                      ro_gemm_t gemm, const struct ro_space_layout *lay,
                                      const char *label, char *err, size_t errlen);

/* ro__policy_kernels_name says which kernels the policy runs: "scalar",
 * "avx2" or "avx512". */
const char *ro__policy_kernels_name(const ro_policy_t *p);

/* ro__policy_describe writes e.g. "mlp(64,64,tanh)", "mlp(64,64,gru:128,tanh)"
 * or "random" into buf. */
void ro__policy_describe(const ro_policy_t *p, char *buf, size_t len);

/* Widths of the observation and of the action (1 for discrete). */
uint32_t ro__policy_obs_dim(const ro_policy_t *p);
uint32_t ro__policy_act_dim(const ro_policy_t *p);

/* ro__policy_version is the version field of the weights (PolicyParams: a
 * file or a trainer's push); 0 for a random or seeded policy. */
uint64_t ro__policy_version(const ro_policy_t *p);

/* ro__policy_state_floats is the recurrent state of one row: H floats
 * (GRU: h), 2H (LSTM: h then c), or 0 (no cell). */
uint32_t ro__policy_state_floats(const ro_policy_t *p);

/* ro__policy_cell is the policy's cell and (in *hidden) its H. */
ro_cell_t ro__policy_cell(const ro_policy_t *p, uint32_t *hidden);

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

/* What the policy tells about the actions it chose, for learners that
 * correct for policy lag (stream mode). Either array may be NULL. */
typedef struct ro_act_stats {
    /* [n] log-probability of each chosen action under the policy: of the
     * (clipped) box action under the unclipped Gaussian density, summed
     * over dimensions; -log(n) or -sum(log(high - low)) for a random one. */
    float *logp;
    /* [n x act_dim] the Gaussian's mean (box MLP only; untouched else). */
    float *mean;
} ro_act_stats_t;

/*
 * ro__policy_act runs the forward pass over the first n input rows and
 * samples one action per row, row i drawing only from rngs[i]. Discrete
 * actions go to act_i[i]; box actions to act_f[i * act_dim ...], clipped to
 * the action bounds. Exactly the same number of draws is taken from rngs[i]
 * whatever n is, so sampling does not depend on batching. stats, if not
 * NULL, gets what it asks for; computing it draws nothing.
 */
void ro__policy_act(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, ro_rng_t *const *rngs,
                    int32_t *act_i, float *act_f, const ro_act_stats_t *stats,
                    const ro_policy_carry_t *carry);

/*
 * ro__policy_act_masked is ro__policy_act for any layout: act_i gets n x
 * ndisc discrete entries, act_f n x nbox box floats (layout.h), mask is n x
 * mask_width bytes (or NULL: all allowed). A masked value (0) is never
 * drawn: its logit is -inf (MLP), or it is skipped (random: uniform over
 * the allowed values). Row i draws only from rngs[i], per part in order:
 * one uniform per discrete entry, two per box float. stats->logp gets the
 * sum over parts of each part's log-probability (under the masked
 * softmax); stats->mean the box floats' means [n x nbox]. For a policy
 * that is not composite this is ro__policy_act (mask must be NULL).
 */
void ro__policy_act_masked(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n,
                           ro_rng_t *const *rngs, const uint8_t *mask, int32_t *act_i, float *act_f,
                           const ro_act_stats_t *stats, const ro_policy_carry_t *carry);

/* ro__policy_log_std returns the box MLP's per-dimension log standard
 * deviation (act_dim floats), or NULL for other policies. */
const float *ro__policy_log_std(const ro_policy_t *p);

/* ro__policy_forward writes the raw head outputs (logits or means) of the
 * first n input rows to out [n x act_dim], with carry as ro__policy_act.
 * MLP only; used by tests. */
void ro__policy_forward(const ro_policy_t *p, ro_policy_ws_t *ws, uint32_t n, float *out,
                        const ro_policy_carry_t *carry);

/* ro__policy_save writes an MLP's weights as a PolicyParams file: format
 * 1, or format 2 with its layout for a policy of an env ABI 2 layout that
 * is not ABI 1 shaped (a composite's log_std included). */
int ro__policy_save(const ro_policy_t *p, const char *path, char *err, size_t errlen);

#endif
