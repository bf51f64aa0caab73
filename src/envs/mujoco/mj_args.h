/*
 * The MuJoCo envs' args (`--env-arg`): Gymnasium v5's knobs, their help
 * texts per env, and strict parsing with messages that name the key.
 */
#ifndef RO_ENVS_MUJOCO_MJ_ARGS_H
#define RO_ENVS_MUJOCO_MJ_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#include "rollout/env.h"

/* The longest body name main_body takes (MuJoCo's names are unbounded). */
#define RO_MJ_NAME_MAX 64

/* What a user may set; each env has its own defaults and keys. */
typedef struct ro_mj_params {
    uint32_t frame_skip;
    double forward_w, ctrl_w, healthy_w, contact_w, noise;
    double state_range[2], z_range[2], angle_range[2], contact_range[2];
    bool terminate_unhealthy, exclude_x, cfrc_obs;
    char main_body[RO_MJ_NAME_MAX]; /* a body's name or id; the env resolves it */
} ro_mj_params_t;

/* Each env's {key, help, ..., NULL} list, for its vtable's arg_keys. */
extern const char *const ro__mj_keys_inverted_pendulum[];
extern const char *const ro__mj_keys_hopper[];
extern const char *const ro__mj_keys_half_cheetah[];
extern const char *const ro__mj_keys_walker2d[];
extern const char *const ro__mj_keys_ant[];

/*
 * ro__mj_parse_args sets *p from the env's args over the defaults already
 * in *p. Every key must be in `keys` (the env's list). Returns 0, or
 * RO_EINVAL with a message naming the key and the value.
 */
int ro__mj_parse_args(const char *env, const char *const *keys, const ro_env_arg_t *args,
                      size_t nargs, ro_mj_params_t *p, char *err, size_t errlen);

/*
 * ro__mj_find_body resolves main_body as Gymnasium's data.body() does: a
 * body's name, or its id. Returns 0 with *out set, or RO_EINVAL with a
 * message naming env and the arg.
 */
int ro__mj_find_body(const char *env, const mjModel *m, const char *name, int *out, char *err,
                     size_t errlen);

#endif
