/*
 * The vector engine's jobs (vec_pool.h's ro_vec_task_fn over env indices):
 * one step and one reset of envs [b, e) of a ro_vec_t (vec.h). Internal to
 * src/vecenv.
 */
#ifndef RO_VEC_STEP_H
#define RO_VEC_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "vecenv/vec_types.h"

/* ro__vec_step_part steps envs [b, e) by the engine's autoreset mode. */
void ro__vec_step_part(void *ctx, uint32_t b, uint32_t e);

/* ro__vec_step_env_part runs part `part` (0 first) of env j's step by the
 * engine's autoreset mode (vec_pool.h's ro_vec_part_fn): true while parts
 * remain. A MuJoCo env's step has one part per frame (envs/step_part.h);
 * any other env's, or a NEXT_STEP reset, one. */
bool ro__vec_step_env_part(void *ctx, uint32_t j, uint32_t part);

/* ro__vec_step_ids_groups_part steps the envs of job_ids that worker
 * processes [b, e) of a Python env host (process g: envs [g x group,
 * (g+1) x group)), one command per process (asynchronous stepping). */
void ro__vec_step_ids_groups_part(void *ctx, uint32_t b, uint32_t e);

/* ro__vec_step_ids_part steps envs job_ids[b..e) (asynchronous stepping,
 * vec_async.c). */
void ro__vec_step_ids_part(void *ctx, uint32_t b, uint32_t e);

/* ro__vec_reset_part resets the envs of [b, e) that reset_mask names (all
 * when NULL), re-creating first those that reseed marks, from seeds. A
 * re-creation that fails leaves the old instance and failed[j] = 2. */
void ro__vec_reset_part(void *ctx, uint32_t b, uint32_t e);

#endif
