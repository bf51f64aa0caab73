/* env_ops.c: ABI 1 and ABI 2 instances behind one set of calls
 * (env_ops.h). */
#include "envs/env_ops.h"

#include <stdio.h>
#include <string.h>

#include "envs/pyenv_host.h"
#include "runtime/error.h"

int ro__env_create(const ro_env_kind_t *k, void **env, const ro_env_arg_t *args, size_t nargs,
                   uint64_t seed, uint32_t index, char *err, size_t errlen)
{
    *env = NULL;
    if (k->py)
        return ro__pyhost_create(k->py, env, seed, index, err, errlen);
    int rc = k->vt ? k->vt->create(env, args, nargs, seed, err, errlen)
                   : k->vt2->create(env, args, nargs, seed, err, errlen);
    if (rc == 0 && !*env) {
        snprintf(err, errlen, "env '%s': create() returned 0 and no instance",
                 k->vt ? k->vt->name : k->vt2->name);
        return RO_EINVAL;
    }
    return rc > 0 ? RO_EINVAL : rc;
}

void ro__env_destroy(const ro_env_kind_t *k, void *env)
{
    if (!env)
        return;
    if (k->vt)
        k->vt->destroy(env);
    else
        k->vt2->destroy(env);
}

void ro__env_reset(const ro_env_kind_t *k, void *env, void *const *tensors, uint8_t *mask)
{
    if (k->vt) {
        k->vt->reset(env, (float *)tensors[0]);
        return;
    }
    ro_obs_out_t o = {.tensors = tensors, .mask = mask};
    k->vt2->reset(env, &o);
}

/* abi1_action: an ABI 1 env's action, its one Discrete or Box part. */
static ro_action_t abi1_action(const int32_t *disc, const float *box)
{
    ro_action_t a;
    if (disc)
        a.discrete = disc[0];
    else
        a.box = box;
    return a;
}

int ro__env_step(const ro_env_kind_t *k, void *env, const int32_t *disc, const float *box,
                 void *const *tensors, uint8_t *mask, ro_step_t *st, uint32_t agents)
{
    memset(st, 0, agents * sizeof *st);
    if (k->vt)
        return k->vt->step(env, abi1_action(disc, box), (float *)tensors[0], st);
    ro_actions_t act = {.discrete = disc, .box = box};
    ro_obs_out_t o = {.tensors = tensors, .mask = mask};
    return k->vt2->step(env, &act, &o, st);
}

int ro__env_step_part(const ro_env_kind_t *k, void *env, uint32_t part, const int32_t *disc,
                      const float *box, void *const *tensors, uint8_t *mask, ro_step_t *st,
                      uint32_t agents)
{
    if (!k->step_part) {
        /* One part. A plugin's positive code is a failure, as for a whole
         * step, never "parts remain". */
        const int rc = ro__env_step(k, env, disc, box, tensors, mask, st, agents);
        return rc > 0 ? RO_EINVAL : rc;
    }
    /* Only ABI 1 built-ins have parts: one agent. */
    memset(st, 0, sizeof *st);
    return k->step_part(env, part, abi1_action(disc, box), (float *)tensors[0], st);
}

void ro__env_step_group(const ro_env_kind_t *k, void *const *envs, uint32_t n, const int32_t *disc,
                        const float *box, const uint8_t *skip)
{
    if (k->py)
        ro__pyhost_step_group(envs, n, disc, box, skip);
}
