#include "replay/recorded_env.h"

#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/rng.h"

int ro__recorded_env_open(ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                          const char *plugin, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    const char *spec = plugin ? plugin : h->env_spec;
    char why[400] = "";
    if (ro__env_open(&e->kind, spec, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_ENOENT, "cannot load env '%s': %s", spec, why);
    int rc = 0;
    if (strcmp(e->kind.vt->name, h->env) != 0)
        rc = ro__errorf(err, errlen, RO_EINVAL, "'%s' is env '%s', the recording is of '%s'", spec,
                        e->kind.vt->name, h->env);
    else if (h->n_env_args > RO_MAX_ENV_ARGS)
        rc = ro__errorf(err, errlen, RO_EINVAL, "more than %d env args", RO_MAX_ENV_ARGS);
    if (rc == 0) {
        ro_env_arg_t in[RO_MAX_ENV_ARGS];
        for (size_t i = 0; i < h->n_env_args; i++) {
            in[i].key = h->env_args[i]->key;
            in[i].value = h->env_args[i]->value;
        }
        uint32_t ignored;
        rc = ro__env_check_args(e->kind.vt, in, h->n_env_args, e->args, &e->nargs, &ignored, err,
                                errlen);
    }
    if (rc)
        ro__recorded_env_close(e);
    return rc;
}

int ro__recorded_env_create(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                            uint32_t i, void **out, char *err, size_t errlen)
{
    return e->kind.vt->create(out, e->args, e->nargs, ro__seed_mix(h->seed, i, RO_STREAM_ENV), err,
                              errlen);
}

void ro__recorded_env_close(ro_recorded_env_t *e)
{
    if (e->kind.vt)
        ro__env_close(&e->kind);
    memset(e, 0, sizeof *e);
}
