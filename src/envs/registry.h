/*
 * Finding envs by name: the built-ins, or a plugin shared object.
 *
 * An env "kind" is a vtable plus, for a plugin, the dlopen() handle that
 * keeps its code mapped. The node opens one kind at start-up (on the main
 * thread, after BLAS/OpenMP thread counts are pinned) and closes it after
 * every instance has been destroyed.
 */
#ifndef RO_ENV_REGISTRY_H
#define RO_ENV_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "envs/step_part.h"
#include "rollout/env.h"

/* The most --env-arg pairs an env is given. */
#define RO_MAX_ENV_ARGS 32

extern const ro_env_vtable_t ro__env_cartpole;
extern const ro_env_vtable_t ro__env_pendulum;
extern const ro_env_vtable_t ro__env_burn;
/* Their env state (rollout/env.h "Env state"). */
extern const ro_env_state_ops_t ro__cartpole_state;
extern const ro_env_state_ops_t ro__pendulum_state;
extern const ro_env_state_ops_t ro__burn_state;

/* Exactly one of vt and vt2 is set: an ABI 1 env (the built-ins, ABI 1
 * plugins) or an ABI 2 plugin. vt2 points to the kind's own copy of the
 * plugin's vtable, zero past the plugin's size (fields it predates).
 * state holds the kind's env state functions, checked (all three set), or
 * is all zero for an env without state support (envs/env_state.h). */
struct ro_pyhost;
typedef struct ro_env_kind {
    const ro_env_vtable_t *vt;
    const ro_env2_vtable_t *vt2; /* owned (freed by ro__env_close) */
    void *dl_handle;             /* NULL for a built-in */
    ro_env_state_ops_t state;
    /* A Python env (gym:ID, py:MODULE:CALLABLE; envs/pyenv_host.h), owned;
     * NULL for the others. Its instances are made through env_ops.h. */
    struct ro_pyhost *py;
    /* A built-in whose step runs in parts (MuJoCo's), else NULL. */
    ro_env_step_part_fn step_part;
} ro_env_kind_t;

/* The names accepted by ro__env_open besides a plugin path, for messages. */
#define RO_ENV_BUILTIN_NAMES "cartpole, pendulum, burn"
/* ... and the forms of a Python env's name. */
#define RO_ENV_PYTHON_NAMES "gym:ID, py:MODULE:CALLABLE"

/*
 * ro__env_open resolves `name`: a built-in name, a Python env (gym:ID or
 * py:MODULE:CALLABLE: envs/pyenv_host.h, no process until the kind's pool
 * is made, ro__env_kind_pool), or a path to a plugin shared object (any
 * other name containing '/' or ending in ".so"). A plugin must
 * export ro_env2_plugin() (ABI 2) or ro_env_plugin() (ABI 1) returning a
 * vtable with a matching abi_version and every required function set; its
 * optional env state functions (ro_env_state_plugin() for ABI 1, the
 * vtable's fields for ABI 2) are checked and kept in out->state. On
 * failure returns a negative code and writes a message naming the problem
 * into err. Main thread only.
 */
int ro__env_open(ro_env_kind_t *out, const char *name, char *err, size_t errlen);

/*
 * ro__env_open_builtin resolves name among the built-ins only: it never
 * loads code, whatever name says (rollout-replay opens the env a file names
 * with it: a file must not make a program load a plugin). RO_ENOENT with a
 * message for any other name.
 */
int ro__env_open_builtin(ro_env_kind_t *out, const char *name, char *err, size_t errlen);

/*
 * ro__env_check_spaces validates the spaces an env instance of vt reports,
 * so that nothing downstream (policies, the wire's welcome, replay) reads a
 * bound that is not there: observations a box, actions discrete (1..2^20)
 * or a box; a box has 1..RO_SPACE_MAX_DIMS dims, every extent >= 1, at most
 * 2^20 values, non-NULL low and high, no NaN bound and low <= high
 * (infinite bounds are allowed). Every mode checks the same, at start-up.
 * RO_EINVAL with a message naming the env and the field.
 */
int ro__env_check_spaces(const ro_env_vtable_t *vt, const ro_space_t *obs, const ro_space_t *act,
                         char *err, size_t errlen);

/*
 * ro__env_probe makes one instance of vt (args as checked by
 * ro__env_check_args, seed), reads its spaces, checks them with
 * ro__env_check_spaces and destroys it: a program calls it once after
 * opening an env, before anything sizes a buffer from a space. Returns 0, or
 * create()'s error or RO_EINVAL, with a message in err.
 */
int ro__env_probe(const ro_env_vtable_t *vt, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                  char *err, size_t errlen);

/* ro__env_close releases a kind (dlclose for plugins). */
void ro__env_close(ro_env_kind_t *kind);

/*
 * ro__env_check_args validates user args against vt->arg_keys plus the
 * runtime key "max_episode_steps" (a non-negative integer), which it consumes:
 * *max_steps gets the override or vt->max_episode_steps. The remaining args
 * are copied to out (capacity n, count in *nout). An unknown key gives
 * RO_EINVAL and a message listing the accepted keys.
 */
int ro__env_check_args(const ro_env_vtable_t *vt, const ro_env_arg_t *args, size_t n,
                       ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                       size_t errlen);

#endif
