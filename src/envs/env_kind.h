/*
 * An env kind of either ABI (registry.h) seen one way: its name, its args
 * checked, and the layout of its spaces (spaces/layout.h) from a probe
 * instance. ABI 1 kinds go through the layout's shim; the env actor still
 * calls their vtable directly, so they pay nothing for ABI 2.
 */
#ifndef RO_ENV_KIND_H
#define RO_ENV_KIND_H

#include <stddef.h>
#include <stdint.h>

#include "envs/registry.h"
#include "spaces/layout.h"

/* ro__env_kind_name is the kind's env name. */
const char *ro__env_kind_name(const ro_env_kind_t *k);

/* ro__env_kind_max_steps is the kind's own episode limit (0: none). */
uint32_t ro__env_kind_max_steps(const ro_env_kind_t *k);

/* ro__env_kind_check_args is ro__env_check_args for a kind of either ABI. */
int ro__env_kind_check_args(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t n,
                            ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                            size_t errlen);

/* ro__env2_spaces asks an ABI 2 instance for its spaces (zeroed first,
 * size set). The thread that owns env. */
void ro__env2_spaces(const ro_env2_vtable_t *vt2, void *env, ro_env_spaces_t *sp);

/*
 * ro__env_kind_layout makes one instance of the kind (args as checked,
 * seed), checks its spaces (ro__env_check_spaces for ABI 1; the layout's
 * checks and the metric names for ABI 2), builds *lay from them (ABI 1
 * through the shim) and destroys the instance. Main thread. 0, or
 * create()'s error or RO_EINVAL with a message naming the env and the
 * field; *lay is then empty.
 */
int ro__env_kind_layout(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t nargs,
                        uint64_t seed, ro_space_layout_t *lay, char *err, size_t errlen);

/* ro__env_layout_of builds the layout of an instance already made (the
 * env actor's probe), as ro__env_kind_layout does. */
int ro__env_layout_of(const ro_env_vtable_t *vt, const ro_env2_vtable_t *vt2, void *env,
                      ro_space_layout_t *lay, char *err, size_t errlen);

/*
 * ro__env_kind_pool readies a kind for nenvs instances before any is made:
 * nothing for a C env; for a Python env (envs/pyenv_host.h) its worker
 * processes, nprocs of them (0: one per allowed CPU), each env made with args, a command
 * timeout of timeout_ms (0: the default). Main thread. 0, or a negative code
 * with err.
 */
int ro__env_kind_pool(ro_env_kind_t *k, const ro_env_arg_t *args, size_t nargs, uint32_t nenvs,
                      uint32_t nprocs, uint32_t timeout_ms, char *err, size_t errlen);

/* ro__env_kind_last_error: a Python env's last failure (its traceback, or
 * how its worker died) into buf, "" if none or for a C env. Any thread. */
void ro__env_kind_last_error(const ro_env_kind_t *k, char *buf, size_t len);

/* ro__env_kind_group is a Python env's envs per worker process (envs [g x
 * group, (g+1) x group) share process g: step them together), or 0 for a C
 * env. After ro__env_kind_pool. */
uint32_t ro__env_kind_group(const ro_env_kind_t *k);

#endif
