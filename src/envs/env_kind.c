/*
 * One view of an env kind of either ABI (env_kind.h).
 */
#include "envs/env_kind.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "envs/env_ops.h"
#include "envs/pyenv_host.h"
#include "runtime/error.h"

const char *ro__env_kind_name(const ro_env_kind_t *k)
{
    return k->vt2 ? k->vt2->name : k->vt ? k->vt->name : "?";
}

uint32_t ro__env_kind_max_steps(const ro_env_kind_t *k)
{
    return k->vt2 ? k->vt2->max_episode_steps : k->vt->max_episode_steps;
}

/* python_args: a Python env takes any keyword (an identifier, once) for
 * its factory; max_episode_steps is the runtime's, as for every env. */
static int python_args(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t n,
                       ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                       size_t errlen)
{
    static const char *const none[] = {NULL};
    const ro_env_vtable_t keys = {.name = k->vt2->name, .arg_keys = none};
    ro_env_arg_t steps[1];
    size_t nsteps = 0, kept = 0, unused = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = args[i].key;
        bool ident = key && args[i].value && (isalpha((unsigned char)key[0]) || key[0] == '_');
        for (const char *c = key ? key : ""; *c && ident; c++)
            ident = isalnum((unsigned char)*c) || *c == '_';
        if (!ident)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "env '%s': arg '%s' is not a Python keyword (an identifier)",
                              k->vt2->name, key ? key : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(args[j].key, key) == 0)
                return ro__errorf(err, errlen, RO_EINVAL, "env '%s' got arg '%s' twice",
                                  k->vt2->name, key);
        if (strcmp(key, "max_episode_steps") == 0)
            steps[nsteps++] = args[i];
        else
            out[kept++] = args[i];
    }
    *nout = kept;
    return ro__env_check_args(&keys, steps, nsteps, out + kept, &unused, max_steps, err, errlen);
}

int ro__env_kind_check_args(const ro_env_kind_t *k, const ro_env_arg_t *args, size_t n,
                            ro_env_arg_t *out, size_t *nout, uint32_t *max_steps, char *err,
                            size_t errlen)
{
    if (k->vt)
        return ro__env_check_args(k->vt, args, n, out, nout, max_steps, err, errlen);
    if (k->py)
        return python_args(k, args, n, out, nout, max_steps, err, errlen);
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
    int rc = ro__env_create(k, &env, args, nargs, seed, 0, err, errlen);
    if (rc)
        return rc;
    rc = ro__env_layout_of(k->vt, k->vt2, env, lay, err, errlen);
    if (k->vt)
        k->vt->destroy(env);
    else
        k->vt2->destroy(env);
    return rc;
}

int ro__env_kind_pool(ro_env_kind_t *k, const ro_env_arg_t *args, size_t nargs, uint32_t nenvs,
                      uint32_t nprocs, uint32_t timeout_ms, char *err, size_t errlen)
{
    if (!k->py)
        return 0;
    return ro__pyhost_configure(k->py, args, nargs, nenvs, nprocs, timeout_ms, err, errlen);
}

uint32_t ro__env_kind_group(const ro_env_kind_t *k)
{
    return k->py ? ro__pyhost_group(k->py) : 0;
}

void ro__env_kind_last_error(const ro_env_kind_t *k, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (k->py)
        ro__pyhost_last_error(k->py, buf, len);
}
