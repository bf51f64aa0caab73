/*
 * Asynchronous stepping of the vector engine, EnvPool's way: send()
 * hands the actions of some envs over and returns at once, the helper
 * threads step them meanwhile, and recv() returns the next `batch` envs
 * whose results are in (in the order they were sent), so a policy works on
 * one batch while the envs of another step. Without helpers a send() steps
 * its envs before it returns.
 *
 * Every env is in one place: READY (its results wait for a recv), HANDED
 * (a recv returned it; only it may be sent), STEPPING (sent). A reset puts
 * every env in READY, in env order. The owner thread only.
 */
#ifndef RO_VEC_ASYNC_H
#define RO_VEC_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "vecenv/vec_types.h"

/* ro__vec_async_start puts every env in READY (after a reset). */
void ro__vec_async_start(ro_vec_t *v);

/* ro__vec_async_drop waits for a job still stepping and forgets every
 * send (before a reset). */
void ro__vec_async_drop(ro_vec_t *v);

/*
 * ro__vec_send steps envs ids[0..k) with the actions in their rows of
 * act_i / act_f (written by the caller, who checked them), in the
 * background. Each must be HANDED: RO_EINVAL naming the first that is not
 * (nothing sent).
 */
int ro__vec_send(ro_vec_t *v, const uint32_t *ids, uint32_t k, char *err, size_t errlen);

/*
 * ro__vec_recv waits until `batch` envs are READY and writes them to
 * ids[0..batch) (they become HANDED); their results are in the engine's
 * rows. RO_EINVAL when fewer than batch could ever come (not sent).
 */
int ro__vec_recv(ro_vec_t *v, uint32_t *ids, char *err, size_t errlen);

#endif
