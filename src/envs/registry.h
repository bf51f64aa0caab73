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

#include "rollout/env.h"

/* The most --env-arg pairs an env is given. */
#define RO_MAX_ENV_ARGS 32

extern const ro_env_vtable_t ro__env_cartpole;
extern const ro_env_vtable_t ro__env_pendulum;
extern const ro_env_vtable_t ro__env_burn;

typedef struct ro_env_kind {
    const ro_env_vtable_t *vt;
    void *dl_handle; /* NULL for a built-in */
} ro_env_kind_t;

/* The names accepted by ro__env_open besides a plugin path, for messages. */
#define RO_ENV_BUILTIN_NAMES "cartpole, pendulum, burn"

/*
 * ro__env_open resolves `name`: a built-in name, or a path to a plugin
 * shared object (any name containing '/' or ending in ".so"). A plugin must
 * export ro_env_plugin() returning a vtable with a matching abi_version and
 * every function set. On failure returns a negative code and writes a message
 * naming the problem into err. Main thread only.
 */
int ro__env_open(ro_env_kind_t *out, const char *name, char *err, size_t errlen);

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
