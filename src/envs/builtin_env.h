/*
 * builtin_env.h: the tables every built-in env ends with, written once.
 * A built-in named NAME defines static functions NAME_create, NAME_spaces,
 * NAME_reset, NAME_step, NAME_arg_keys (and, with state support,
 * NAME_state_size, NAME_save_state, NAME_load_state), then:
 *
 *   RO_ENV_VTABLE(NAME, max_episode_steps, destroy);   defines ro__env_NAME
 *
 * (destroy: free for an env that is one allocation, from ro__env_alloc.)
 *   RO_ENV_STATE_OPS(NAME);                   defines ro__NAME_state
 *
 * An env whose state is its RNG (the field rng) then n float64 that
 * ro__NAME_get_state and ro__NAME_set_state copy has its three state
 * functions from RO_ENV_RNG_DOUBLES_STATE(NAME, type, n) (rollout/env.h
 * "Env state": host order; any bytes are a state such an env's step
 * handles, so load takes them as they are).
 */
#ifndef RO_ENVS_BUILTIN_ENV_H
#define RO_ENVS_BUILTIN_ENV_H

#include <string.h>

#include "rollout/env.h"
#include "runtime/error.h"
#include "runtime/rng.h"

#define RO_ENV_VTABLE(NAME, steps, destroy_fn)                                                     \
    const ro_env_vtable_t ro__env_##NAME = {                                                       \
        .abi_version = RO_ENV_ABI_VERSION,                                                         \
        .name = #NAME,                                                                             \
        .arg_keys = NAME##_arg_keys,                                                               \
        .max_episode_steps = (steps),                                                              \
        .create = NAME##_create,                                                                   \
        .spaces = NAME##_spaces,                                                                   \
        .reset = NAME##_reset,                                                                     \
        .step = NAME##_step,                                                                       \
        .destroy = (destroy_fn),                                                                   \
    }

#define RO_ENV_STATE_OPS(NAME)                                                                     \
    const ro_env_state_ops_t ro__##NAME##_state = {                                                \
        .version = RO_ENV_STATE_VERSION,                                                           \
        .size = sizeof(ro_env_state_ops_t),                                                        \
        .state_size = NAME##_state_size,                                                           \
        .save_state = NAME##_save_state,                                                           \
        .load_state = NAME##_load_state,                                                           \
    }

#define RO_ENV_RNG_DOUBLES_STATE(NAME, type, n)                                                    \
    static size_t NAME##_state_size(void *env)                                                     \
    {                                                                                              \
        (void)env;                                                                                 \
        return sizeof(ro_rng_t) + (n) * sizeof(double);                                            \
    }                                                                                              \
    static int NAME##_save_state(void *env, void *buf, size_t len)                                 \
    {                                                                                              \
        type *e = env;                                                                             \
        double v[n];                                                                               \
        if (len != NAME##_state_size(env))                                                         \
            return RO_EINVAL;                                                                      \
        ro__##NAME##_get_state(e, v);                                                              \
        memcpy(buf, &e->rng, sizeof e->rng);                                                       \
        memcpy((char *)buf + sizeof e->rng, v, sizeof v);                                          \
        return 0;                                                                                  \
    }                                                                                              \
    static int NAME##_load_state(void *env, const void *buf, size_t len)                           \
    {                                                                                              \
        type *e = env;                                                                             \
        double v[n];                                                                               \
        if (len != NAME##_state_size(env))                                                         \
            return RO_EINVAL;                                                                      \
        memcpy(&e->rng, buf, sizeof e->rng);                                                       \
        memcpy(v, (const char *)buf + sizeof e->rng, sizeof v);                                    \
        ro__##NAME##_set_state(e, v);                                                              \
        return 0;                                                                                  \
    }

#endif
