/*
 * Broken env ABI 2 plugins for the registry's tests, one per macro:
 * RO_BAD_ABI2 exports ro_env2_plugin() with a future version;
 * RO_BAD_SPACES2 a valid vtable whose spaces give obs[1] a dtype that does
 * not exist; RO_BAD_METRICS2 metric names without episode_metrics();
 * RO_BAD_STATE2 state_size() without save_state() and load_state().
 */
#include <rollout/env.h>

#include <stdlib.h>

static const char *const no_args[] = {NULL};
static const char *const metrics[] = {"score", NULL};

static int bad_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                      size_t errlen)
{
    (void)args, (void)nargs, (void)seed, (void)err, (void)errlen;
    *out = malloc(1);
    return *out ? 0 : -1;
}

static void bad_spaces(void *env, ro_env_spaces_t *sp)
{
    (void)env;
    sp->num_obs = 2;
    sp->obs[0] =
        (ro_tensor_space_t){.name = "a", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {3}};
    sp->obs[1] = (ro_tensor_space_t){.name = "b", .dtype = (ro_dtype_t)9, .ndim = 1, .shape = {3}};
    sp->num_parts = 1;
    sp->act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 2};
}

static void bad_reset(void *env, const ro_obs_out_t *o)
{
    (void)env, (void)o;
}

static int bad_step(void *env, const ro_actions_t *a, const ro_obs_out_t *o, ro_step_t *out)
{
    (void)env, (void)a, (void)o, (void)out;
    return 0;
}

#ifdef RO_BAD_STATE2
static size_t bad_state_size(void *env)
{
    (void)env;
    return 1;
}
#endif

static const ro_env2_vtable_t vtable = {
#ifdef RO_BAD_ABI2
    .abi_version = RO_ENV_ABI2_VERSION + 1,
#else
    .abi_version = RO_ENV_ABI2_VERSION,
#endif
    .size = sizeof(ro_env2_vtable_t),
    .name = "bad2",
    .arg_keys = no_args,
    .create = bad_create,
    .spaces = bad_spaces,
    .reset = bad_reset,
    .step = bad_step,
    .destroy = free,
#ifdef RO_BAD_METRICS2
    .metric_names = metrics,
#endif
#ifdef RO_BAD_STATE2
    .state_size = bad_state_size,
#endif
};

const ro_env2_vtable_t *ro_env2_plugin(void);

const ro_env2_vtable_t *ro_env2_plugin(void)
{
    (void)metrics;
    return &vtable;
}
