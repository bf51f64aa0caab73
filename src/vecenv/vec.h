/*
 * The in-process vector engine behind the Python package's make_vec: N env
 * instances of one kind (a built-in or a plugin, either ABI) stepped
 * together with Gymnasium's semantics, in the caller's process, on the
 * caller's thread and, when the envs cost enough to pay for the hand-off,
 * on helper threads (vec_pool.h). EnvPool's design: no second process, no
 * socket, no copy of observations between processes.
 *
 * Seeding is the node's: env i is created with ro__seed_mix(seed, i,
 * RO_STREAM_ENV), so a vector env reset with seed S plays env i's episodes
 * exactly as `rollout-node --seed S` plays its env i.
 *
 * Autoreset (Gymnasium 1.x, gymnasium.vector.AutoresetMode):
 * - NEXT_STEP: the step that ends an episode returns its last observation;
 *   the env's next step ignores its action, resets it and returns the first
 *   observation with reward 0 and both flags false.
 * - SAME_STEP: the step that ends an episode resets the env at once and
 *   returns the first observation of the next; the last observation is in
 *   the final tensors (ro_vec_t.final_obs) of the envs that ended.
 * - DISABLED: an env that ended stays ended until ro__vec_reset names it;
 *   stepping it is refused (RO_EINVAL naming the env).
 * An env whose step fails (a negative code, or a non-finite observation or
 * reward) is counted in `failed` and `failures`, reported truncated, and
 * reset in the same step (its observation is the next episode's first).
 *
 * Threads: every call from one thread at a time (the Python wrapper holds
 * the engine); helpers touch only the envs of their part of a job.
 */
#ifndef RO_VEC_H
#define RO_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envs/registry.h"
#include "spaces/layout.h"
#include "vecenv/vec_pool.h"

typedef enum ro_autoreset {
    RO_AUTORESET_NEXT_STEP = 0,
    RO_AUTORESET_SAME_STEP = 1,
    RO_AUTORESET_DISABLED = 2,
} ro_autoreset_t;

/* The most envs of one vector engine. */
#define RO_VEC_MAX_ENVS (1u << 20)

typedef struct ro_vec_config {
    const char *env; /* a built-in name, or a plugin path (ro__env_open) */
    const ro_env_arg_t *args;
    size_t nargs;
    uint32_t num_envs;
    uint64_t seed;
    ro_autoreset_t autoreset;
    int threads;       /* < 0: chosen from the envs' cost (ro__vec_new); else
                          that many threads in all, the caller's included */
    bool check_finite; /* a non-finite observation or reward fails the step */
} ro_vec_config_t;

typedef struct ro_vec {
    /* Read-only after ro__vec_new. */
    ro_env_kind_t kind;
    ro_space_layout_t lay;
    uint32_t n;
    uint32_t max_steps; /* episode limit, 0 = none */
    ro_autoreset_t mode;
    bool check_finite;
    uint32_t threads;    /* threads stepping: 1 + the pool's helpers */
    double step_cost_ns; /* one env step, measured on a probe instance */
    ro_env_arg_t *args;  /* owned copies of the config's args */
    size_t nargs;

    /* The batch, each [n x row]: written by ro__vec_step/reset, read by the
     * caller between calls. */
    uint8_t *obs[RO_ENV_MAX_TENSORS];
    uint8_t *final_obs[RO_ENV_MAX_TENSORS]; /* SAME_STEP: rows of envs that ended */
    uint8_t *mask;                          /* [n x mask_width], or NULL */
    double *reward;
    uint8_t *terminated, *truncated;
    uint8_t *failed; /* the env's step failed this step */
    /* The actions, written by the caller before ro__vec_step. */
    int32_t *act_i; /* [n x ndisc] */
    float *act_f;   /* [n x nbox] */

    /* Per env, touched by the thread stepping that env's part. */
    void **envs;
    uint8_t *ended;   /* NEXT_STEP / DISABLED: the last step ended it */
    uint32_t *ep_len; /* steps of the running episode */

    /* Owner only. */
    uint64_t failures; /* failed steps since creation */
    /* A reset's arguments, for its job (ro__vec_reset_part). */
    const uint64_t *seeds;
    const uint8_t *reseed;
    const uint8_t *reset_mask;
    ro_vec_pool_t pool;
} ro_vec_t;

/*
 * ro__vec_new opens the env (ro__env_open: a plugin path loads its code),
 * checks the args, builds the layout, creates num_envs instances and starts
 * the threads; nothing is reset yet (ro__vec_reset). Only single-agent envs
 * (one row per env). threads < 0 chooses: the caller alone unless a step
 * of every env, measured on a probe instance, costs more than handing it
 * to helpers (one thread per allowed CPU, at most one per env). Returns 0,
 * or a negative code with a message naming the problem in err; *out is
 * then NULL.
 */
int ro__vec_new(ro_vec_t **out, const ro_vec_config_t *cfg, char *err, size_t errlen);

/*
 * ro__vec_reset starts a new episode of every env, or of those whose mask
 * byte is set (mask NULL: all). seeds (NULL: none) gives, per env, a new
 * seed: that env is re-created from ro__seed_mix(seeds[i], i,
 * RO_STREAM_ENV) first; has_seed (NULL: every env of seeds) says which
 * entries count. Clears the flags of the envs it resets. 0, or a negative
 * code with a message (an env that cannot be re-created: it keeps its old
 * instance).
 */
int ro__vec_reset(ro_vec_t *v, const uint64_t *seeds, const uint8_t *has_seed, const uint8_t *mask,
                  char *err, size_t errlen);

/*
 * ro__vec_step steps every env with the actions in act_i / act_f (which
 * the caller checked against the layout), by the autoreset mode. 0, or
 * RO_EINVAL under DISABLED when an env that ended was not reset (nothing
 * stepped, a message names the first such env).
 */
int ro__vec_step(ro_vec_t *v, char *err, size_t errlen);

/* ro__vec_free destroys the envs, stops the threads, frees everything. */
void ro__vec_free(ro_vec_t *v);

#endif
