/*
 * Python envs (--env gym:ID, --env py:MODULE:CALLABLE; docs/env-api.md
 * "Python envs"): an env kind whose instances live in K env worker
 * processes (pyenv_proc.h), envs [p x per, (p+1) x per) in process p. To the
 * rest of the node the kind is an env ABI 2 env (its vtable, from
 * ro__pyhost_vtable): spaces() reports what the workers reported, reset()
 * and step() move one env's observation out of its process's shared
 * memory. Its one addition is ro__pyhost_step_group: the envs of a shard
 * stepped with one command per process (one hand-over each way), after which
 * each env's step() only copies its row.
 *
 * Faults: a worker that raises (the env is made again and reset), dies or
 * overruns the timeout is an env failure of every env it hosts (step()
 * returns an error: the caller counts it and resets the env); the process
 * is restarted at once and its envs reset. Each failure is one line on
 * stderr, the Python traceback in it.
 *
 * Threads: open, configure and close on one thread with no instance in
 * use; create and destroy on any thread; an instance's reset/step on the
 * thread that owns it (a process's lock orders the shards it serves).
 */
#ifndef RO_ENVS_PYENV_HOST_H
#define RO_ENVS_PYENV_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"

typedef struct ro_pyhost ro_pyhost_t;

/* The most envs of one host (the node's --num-envs limit). */
#define RO_PYENV_MAX_ENVS (1u << 20)

/* The seconds a worker may take for one command before it counts as hung
 * (its first command, starting Python and making its envs, gets 10x). */
#define RO_PYENV_TIMEOUT_S 60

/* ro__pyhost_is_name tells a Python env's name ("gym:..." or "py:...") */
bool ro__pyhost_is_name(const char *name);

/* ro__pyhost_open makes the host of env `name` (no process yet). */
int ro__pyhost_open(ro_pyhost_t **out, const char *name, char *err, size_t errlen);

/* ro__pyhost_vtable is the kind's vtable (valid until close). */
const ro_env2_vtable_t *ro__pyhost_vtable(const ro_pyhost_t *h);

/*
 * ro__pyhost_configure starts the pool: nprocs processes (0: one per CPU
 * this process may run on; at most nenvs) for nenvs envs, each made with args as keyword arguments,
 * a command timeout of timeout_ms (0: RO_PYENV_TIMEOUT_S), and waits for each to report its spaces
 * (checked, and the same from all). Once, before any create. 0, or a negative code with err (the
 * Python traceback in it).
 */
int ro__pyhost_configure(ro_pyhost_t *h, const ro_env_arg_t *args, size_t nargs, uint32_t nenvs,
                         uint32_t nprocs, uint32_t timeout_ms, char *err, size_t errlen);

/* ro__pyhost_create makes the handle of env `index` (< nenvs) with seed:
 * its first reset is reset(seed=seed). */
int ro__pyhost_create(ro_pyhost_t *h, void **env, uint64_t seed, uint32_t index, char *err,
                      size_t errlen);

/* ro__pyhost_step_group steps n instances: instance j with disc + j x ndisc
 * and box + j x nbox (either NULL when the layout has none), but not those
 * with skip[j] (skip may be NULL); each one's step() then returns its
 * outcome. One command per run of instances of one process, every run's
 * posted before the first is waited for (processes locked in increasing
 * order). The thread owning the instances. */
void ro__pyhost_step_group(void *const *envs, uint32_t n, const int32_t *disc, const float *box,
                           const uint8_t *skip);

/* ro__pyhost_last_error copies the text of the last failure (a worker's
 * Python traceback, or how it died) into buf; "" if none. Any thread. */
void ro__pyhost_last_error(ro_pyhost_t *h, char *buf, size_t len);

/* ro__pyhost_group is the envs per process (after configure). */
uint32_t ro__pyhost_group(const ro_pyhost_t *h);

/* ro__pyhost_close stops every process and frees the host. */
void ro__pyhost_close(ro_pyhost_t *h);

#endif
