/*
 * A built-in env whose step is a sequence of parts: MuJoCo's, one part per
 * mj_step of its frame skip. The vector engine spreads one step of a few
 * costly envs over its threads part by part (vecenv/vec_pool.h), so a
 * synchronous step() does not end with one thread running a whole env step
 * while the others wait. Not part of the plugin ABI: a plugin's step is one
 * part.
 */
#ifndef RO_ENVS_STEP_PART_H
#define RO_ENVS_STEP_PART_H

#include <stdint.h>

#include "rollout/env.h"

/*
 * ro_env_step_part_fn runs part `part` (0 first) of one step of instance
 * env with `action`, which stays the same for every part of the step.
 * Returns > 0 while parts remain; 0 after the last, which wrote obs and
 * *out as the vtable's step() does; or step()'s negative code, which ends
 * the step there. The vtable's step() is exactly its parts run in order.
 * The parts of one step run one at a time, in order, on any threads (each
 * part's writes published to the next part's thread by its caller).
 */
typedef int (*ro_env_step_part_fn)(void *env, uint32_t part, ro_action_t action, float *obs,
                                   ro_step_t *out);

#endif
