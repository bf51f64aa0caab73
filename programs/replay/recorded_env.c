#include "replay/recorded_env.h"

#include <stdio.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/mujoco/mj_registry.h"
#include "runtime/error.h"
#include "trajectory/abi2_format.h"
#include "runtime/rng.h"
#include "runtime/text.h"

/* The seed the node derived its envs' seeds from: the header's run seed
 * and node index (absent in files from before node indices: 0, the run
 * seed itself), as rollout-node derives it. */
static uint64_t node_seed(const Rollout__V1__TrajectoryHeader *h)
{
    return ro__node_seed(h->seed, h->node_index);
}

int ro__recorded_env_check_mujoco(const ro_recorded_env_t *e,
                                  const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen)
{
    const char *mine = ro__mj_version_of(e->kind.vt);
    if (mine == NULL || h->mujoco_version == NULL || h->mujoco_version[0] == '\0' ||
        strcmp(mine, h->mujoco_version) == 0)
        return 0;
    char theirs[48];
    ro__text_log(theirs, sizeof theirs, h->mujoco_version, 32); /* the file's words */
    return ro__errorf(err, errlen, RO_ENOTSUP,
                      "the recording ran on MuJoCo %s and this build's MuJoCo envs run on %s: "
                      "MuJoCo's results differ across versions, so it cannot be re-stepped here",
                      theirs, mine);
}

/* check_plugin: the --plugin is the recorded env, of the recorded ABI. */
static int check_plugin(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                        const char *plugin, const char *env, char *err, size_t errlen)
{
    const char *name = ro__env_kind_name(&e->kind);
    if (e->kind.vt2 && !h->layout)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--plugin '%s' is an env ABI 2 plugin (env '%s'); the recording "
                          "(format version 1) is of an ABI 1 env",
                          plugin, name);
    if (!e->kind.vt2 && h->layout)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--plugin '%s' is an env ABI 1 plugin (env '%s'); the recording "
                          "(format version 2) is of an env ABI 2 env",
                          plugin, name);
    if (strcmp(name, h->env) != 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--plugin '%s' is env '%s', the recording is of env '%s'", plugin, name,
                          env);
    return 0;
}

/* check_spaces: the spaces of one instance, checked as the node checks
 * them (registry.h, spaces/layout.h); an ABI 2 env's layout must be the
 * header's. */
static int check_spaces(ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                        const char *env, char *err, size_t errlen)
{
    uint64_t seed = ro__seed_mix(node_seed(h), 0, RO_STREAM_ENV);
    if (!e->kind.vt2)
        return ro__env_probe(e->kind.vt, e->args, e->nargs, seed, err, errlen);
    int rc = ro__env_kind_layout(&e->kind, e->args, e->nargs, seed, &e->layout, err, errlen);
    if (rc)
        return rc;
    char why[256];
    if (ro__traj_layout_matches(h->layout, &e->layout, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s' as re-created does not match the recording: it has %s", env,
                          why);
    return 0;
}

int ro__recorded_env_open(ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                          const char *plugin, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    char env[120], spec[280];
    ro__text_log(env, sizeof env, h->env, 80); /* the file's words, for messages */
    ro__text_log(spec, sizeof spec, h->env_spec, 200);
    int rc;
    if (plugin) {
        /* Code is loaded only from the command line, and must be the env
         * the recording names. */
        char why[400] = "";
        if (ro__env_open(&e->kind, plugin, why, sizeof why) != 0)
            return ro__errorf(err, errlen, RO_ENOENT, "--plugin '%s': %s", plugin, why);
        if ((rc = check_plugin(e, h, plugin, env, err, errlen)) != 0)
            goto fail;
    } else if (ro__env_open_builtin(&e->kind, h->env, NULL, 0) != 0) {
        /* Never the header's env_spec: a file must not make us load code. */
        return ro__errorf(err, errlen, RO_EINVAL,
                          "the recording's env '%s' is not built in (it was recorded with --env "
                          "'%s'): give the plugin with --plugin PATH (a Python env: --plugin "
                          "gym:ID or py:MODULE:CALLABLE); rollout-replay never loads code because "
                          "a file names it",
                          env, spec);
    } else if (h->layout) {
        rc = ro__errorf(err, errlen, RO_EINVAL,
                        "the recording (format version 2) is of an env ABI 2 env, and the "
                        "built-in env '%s' is ABI 1",
                        env);
        goto fail;
    }
    if (h->n_env_args > RO_MAX_ENV_ARGS) {
        rc = ro__errorf(err, errlen, RO_EINVAL, "more than %d env args", RO_MAX_ENV_ARGS);
        goto fail;
    }
    ro_env_arg_t in[RO_MAX_ENV_ARGS];
    for (size_t i = 0; i < h->n_env_args; i++) {
        in[i].key = h->env_args[i]->key;
        in[i].value = h->env_args[i]->value;
    }
    uint32_t ignored;
    rc = ro__env_kind_check_args(&e->kind, in, h->n_env_args, e->args, &e->nargs, &ignored, err,
                                 errlen);
    if (rc == 0) /* a Python env: one worker process for the recorded envs */
        rc = ro__env_kind_pool(&e->kind, e->args, e->nargs, h->num_envs, 1, 0, err, errlen);
    if (rc == 0)
        rc = check_spaces(e, h, env, err, errlen);
    if (rc == 0)
        return 0;
fail:
    ro__recorded_env_close(e);
    return rc;
}

int ro__recorded_env_create(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h,
                            uint32_t i, void **out, char *err, size_t errlen)
{
    uint64_t seed = ro__seed_mix(node_seed(h), i, RO_STREAM_ENV);
    return ro__env_create(&e->kind, out, e->args, e->nargs, seed, i, err, errlen);
}

void ro__recorded_env_destroy(const ro_recorded_env_t *e, void *env)
{
    if (e->kind.vt2)
        e->kind.vt2->destroy(env);
    else
        e->kind.vt->destroy(env);
}

void ro__recorded_env_close(ro_recorded_env_t *e)
{
    ro__layout_free(&e->layout);
    ro__env_close(&e->kind); /* either ABI, or nothing opened */
    memset(e, 0, sizeof *e);
}
