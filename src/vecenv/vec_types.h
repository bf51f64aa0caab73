/*
 * The vector engine's types (vec.h says what the engine does): its config
 * and its state, shared by vec.c (its life) and vec_step.c (the per-env
 * work of a step and a reset).
 */
#ifndef RO_VEC_TYPES_H
#define RO_VEC_TYPES_H

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

/* Where an env is in asynchronous stepping. */
enum { RO_VEC_READY = 0, RO_VEC_HANDED = 1, RO_VEC_STEPPING = 2 };

typedef struct ro_vec_config {
    const char *env; /* a built-in name, or a plugin path (ro__env_open) */
    const ro_env_arg_t *args;
    size_t nargs;
    uint32_t num_envs;
    uint64_t seed;
    ro_autoreset_t autoreset;
    int threads;         /* < 0: chosen from the envs' cost (ro__vec_new); else
                            that many threads in all, the caller's included */
    bool check_finite;   /* a non-finite observation or reward fails the step */
    uint32_t batch_size; /* envs a recv() returns (vec_async.h); 0: num_envs */
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
    bool in_parts;       /* a step's job in parts (ro__vec_pool_run_parts) */
    uint32_t group;      /* a Python env's envs per worker process (a job's item); 0: C */
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

    /* Asynchronous stepping (vec_async.c), owner only but job_ids, which
     * the posted job's helpers read until it is harvested. */
    uint32_t batch;  /* envs a recv returns */
    uint32_t *ready; /* ring of envs whose results wait for a recv */
    uint32_t ready_head, ready_len;
    uint32_t *pending; /* envs sent, not yet handed to a job */
    uint32_t npending;
    uint32_t *job_ids; /* the envs of the posted job */
    /* A Python env's job, per worker process g from slot g x group: its
     * envs of job_ids (in job order), their instances, actions and skips
     * gathered for one command (the helper stepping that process's item). */
    uint32_t *py_ids;
    void **py_envs;
    int32_t *py_act_i; /* [n x ndisc] */
    float *py_act_f;   /* [n x nbox] */
    uint8_t *py_skip;
    uint32_t njob;  /* > 0: a job posted and not yet harvested */
    uint8_t *where; /* per env: RO_VEC_READY, _HANDED or _STEPPING */
} ro_vec_t;

#endif
