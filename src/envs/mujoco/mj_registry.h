/*
 * The MuJoCo envs as the env registry sees them (issue 17). This header does
 * not need MuJoCo: in a build without it (meson -Dmujoco=disabled, or
 * no mujoco Python package) the envs are absent and ro__mj_lookup() says how to
 * get them.
 */
#ifndef RO_ENVS_MUJOCO_MJ_REGISTRY_H
#define RO_ENVS_MUJOCO_MJ_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "ro_build_config.h"
#include "envs/step_part.h"
#include "rollout/env.h"

/* The MuJoCo env names, for messages. */
#define RO_MJ_ENV_NAMES "inverted_pendulum, hopper, half_cheetah, walker2d, ant"

#if RO_HAVE_MUJOCO
extern const ro_env_vtable_t ro__env_inverted_pendulum;
extern const ro_env_vtable_t ro__env_hopper;
extern const ro_env_vtable_t ro__env_half_cheetah;
extern const ro_env_vtable_t ro__env_walker2d;
extern const ro_env_vtable_t ro__env_ant;
/* Their env state functions (one set: they dispatch on the instance). */
extern const ro_env_state_ops_t ro__mj_state;
/* Every MuJoCo env's step in parts, one per frame (envs/step_part.h). */
int ro__mj_step_part(void *env, uint32_t part, ro_action_t action, float *obs, ro_step_t *out);
/* Appended to the list of built-in names in messages. */
#define RO_MJ_BUILTIN_NAMES ", " RO_MJ_ENV_NAMES
#else
#define RO_MJ_BUILTIN_NAMES ""
#endif

/*
 * ro__mj_lookup finds a MuJoCo env by name. Returns 0 with *vt set to its
 * vtable and *state to its env state functions, or 0 with both NULL when
 * `name` is no MuJoCo env; RO_ENOTSUP and a
 * message saying how to get the MuJoCo envs when `name` is one of them and
 * this build has none. Any thread.
 */
int ro__mj_lookup(const char *name, const ro_env_vtable_t **vt, const ro_env_state_ops_t **state,
                  char *err, size_t errlen);

/* ro__mj_version_of returns ro__mj_version() when vt is one of the built-in
 * MuJoCo envs (a plugin of the same name is not), else NULL: what a
 * recording's header names as its MuJoCo. Any thread. */
const char *ro__mj_version_of(const ro_env_vtable_t *vt);

/* ro__mj_step_part_of: the step in parts of vt when vt is a MuJoCo env's,
 * else NULL. */
ro_env_step_part_fn ro__mj_step_part_of(const ro_env_vtable_t *vt);

/* ro__mj_version returns the version of the MuJoCo library the envs run on
 * (e.g. "4.0.0"), or NULL in a build without MuJoCo. Any thread. */
const char *ro__mj_version(void);

/* ro__mj_warning_count returns how many MuJoCo warnings this process's envs
 * have seen (counted, never printed; 0 in a build without MuJoCo), for the
 * node's summary. Any thread. */
uint64_t ro__mj_warning_count(void);

#endif
