/*
 * One way to drive an env instance of either ABI: an ABI 1 env is seen
 * through its layout's shim (one float32 tensor "obs", one Discrete or Box
 * part, one agent), so a caller written against ABI 2's shapes (tensors,
 * discrete entries, box floats, a mask) steps both. The in-process vector
 * engine (src/vecenv) is written against it.
 */
#ifndef RO_ENV_OPS_H
#define RO_ENV_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "envs/registry.h"

/* ro__env_create makes instance `index` of kind k with args (as checked by
 * ro__env_kind_check_args) and seed (a C env sees only args and seed; a
 * Python env's index places it in its pool's processes). 0, or create()'s
 * negative code (a positive one reads as RO_EINVAL) with a message in err. */
int ro__env_create(const ro_env_kind_t *k, void **env, const ro_env_arg_t *args, size_t nargs,
                   uint64_t seed, uint32_t index, char *err, size_t errlen);

/* ro__env_step_group tells a Python env's instances envs[0..n) that step()
 * follows for each of them with discrete entries disc + j x ndisc and box
 * floats box + j x nbox (the layout's), except those with skip[j] set (skip
 * NULL: none): their processes step them together, one command each.
 * Nothing for a C env. The thread owning the instances. */
void ro__env_step_group(const ro_env_kind_t *k, void *const *envs, uint32_t n, const int32_t *disc,
                        const float *box, const uint8_t *skip);

/* ro__env_destroy frees an instance of kind k. */
void ro__env_destroy(const ro_env_kind_t *k, void *env);

/* ro__env_reset starts a new episode: tensors[k] gets observation tensor k
 * of every agent, mask the action mask (NULL when the layout has none). */
void ro__env_reset(const ro_env_kind_t *k, void *env, void *const *tensors, uint8_t *mask);

/* ro__env_step applies one action per agent (disc: the discrete entries,
 * box: the box floats, in part order; either NULL when the layout has
 * none), writes the next observations as ro__env_reset does and one
 * outcome per agent into st (zeroed first). Returns the env's code: 0, or
 * negative when the env failed. */
int ro__env_step(const ro_env_kind_t *k, void *env, const int32_t *disc, const float *box,
                 void *const *tensors, uint8_t *mask, ro_step_t *st, uint32_t agents);

/* ro__env_step_part runs part `part` (0 first) of ro__env_step with the
 * same arguments for every part (envs/step_part.h): > 0 while parts remain,
 * else 0 or a negative code, with st written by the last part. A kind
 * without parts (k->step_part NULL) steps whole at part 0, its positive
 * code read as RO_EINVAL. */
int ro__env_step_part(const ro_env_kind_t *k, void *env, uint32_t part, const int32_t *disc,
                      const float *box, void *const *tensors, uint8_t *mask, ro_step_t *st,
                      uint32_t agents);

#endif
