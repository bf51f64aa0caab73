/*
 * One view of an env kind of either ABI (env_kind.h).
 */
#include "envs/env_kind.h"

#include <string.h>

#include "runtime/error.h"

const char *ro__env_kind_name(const ro_env_kind_t *k)
{
    return k->vt2 ? k->vt2->name : k->vt ? k->vt->name : "?";
}

uint32_t ro__env_kind_max_steps(const ro_env_kind_t *k)
{
    return k->vt2 ? k->vt2->max_episode_steps : k->vt->max_episode_steps;
}

int ro__env_kind_check_args(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t n,
                            ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                            size_t errlen)
{
    if (k->vt)
        return ro__env_check_args(k->vt, args, n, out, nout, max_steps, err, errlen);
    /* ro__env_check_args reads the name, the arg keys and the limit only. */
    ro_env_vtable_t keys = {
        .name = k->vt2->name,
        .arg_keys = k->vt2->arg_keys,
        .max_episode_steps = k->vt2->max_episode_steps,
    };
    return ro__env_check_args(&keys, args, n, out, nout, max_steps, err, errlen);
}

void ro__env2_spaces(const ro_env2_vtable_t *vt2, void *env, ro_env_spaces_t *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->size = sizeof *sp;
    vt2->spaces(env, sp);
}

int ro__env_layout_of(const ro_env_vtable_t *vt, const ro_env2_vtable_t *vt2, void *env,
                      ro_space_layout_t *lay, char *err, size_t errlen)
{
    memset(lay, 0, sizeof *lay);
    if (vt) {
        ro_space_t obs, act;
        memset(&obs, 0, sizeof obs);
        memset(&act, 0, sizeof act);
        vt->spaces(env, &obs, &act);
        int rc = ro__env_check_spaces(vt, &obs, &act, err, errlen);
        return rc ? rc : ro__layout_from_abi1(lay, &obs, &act, vt->name, err, errlen);
    }
    ro_env_spaces_t sp;
    ro__env2_spaces(vt2, env, &sp);
    int rc = ro__layout_from_spaces(lay, &sp, vt2->name, err, errlen);
    if (rc == 0 && (rc = ro__layout_set_metrics(lay, vt2->metric_names, vt2->name, err, errlen)))
        ro__layout_free(lay);
    return rc;
}

int ro__env_kind_layout(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t nargs,
                        uint64_t seed, ro_space_layout_t *lay, char *err, size_t errlen)
{
    memset(lay, 0, sizeof *lay);
    void *env = NULL;
    int rc = k->vt ? k->vt->create(&env, args, nargs, seed, err, errlen)
                   : k->vt2->create(&env, args, nargs, seed, err, errlen);
    if (rc)
        return rc < 0 ? rc : RO_EINVAL;
    rc = ro__env_layout_of(k->vt, k->vt2, env, lay, err, errlen);
    if (k->vt)
        k->vt->destroy(env);
    else
        k->vt2->destroy(env);
    return rc;
}
