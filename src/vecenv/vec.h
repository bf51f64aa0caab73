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

#include <stddef.h>
#include <stdint.h>

#include "vecenv/vec_types.h"

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

/*
 * ro__vec_get_state writes env j's state as a checked blob (envs/env_state.h:
 * the env's name, a hash of its args and episode limit, its episode's
 * steps) into buf (cap bytes; ro__vec_state_bytes says how many); *len
 * gets its bytes. RO_ENOTSUP naming the env when its kind has no state.
 * Not while envs step asynchronously (RO_EINVAL).
 */
int ro__vec_state_bytes(ro_vec_t *v, uint32_t j, size_t *out, char *err, size_t errlen);
int ro__vec_get_state(ro_vec_t *v, uint32_t j, void *buf, size_t cap, size_t *len, char *err,
                      size_t errlen);

/*
 * ro__vec_set_state restores env j from a blob ro__vec_get_state wrote (of
 * an env of the same name and args, from any engine or recording): checked
 * whole before the env sees it. The env's episode goes on from there (its
 * steps, for the episode limit, are the blob's); its next step() starts
 * from the restored state. 0; RO_EBADMSG naming what does not match;
 * RO_ENOTSUP; or the env's own refusal (the env is then reset).
 */
int ro__vec_set_state(ro_vec_t *v, uint32_t j, const void *blob, size_t len, char *err,
                      size_t errlen);

/* ro__vec_free destroys the envs, stops the threads, frees everything. */
void ro__vec_free(ro_vec_t *v);

#endif
