/*
 * A test env for the hardening tests (tests/integration/test_hostile.py):
 *   - env arg "defect" makes its spaces wrong in one way: null_low,
 *     null_high (the action box's bounds are NULL), nan_bound, zero_dims,
 *     big_dims, discrete_zero, obs_discrete; "none" (default) is a sound
 *     one-float box observation with a two-float box action;
 *   - env arg "reward": "nan" makes every reward NaN (finished episodes then
 *     have a NaN return), else each step pays 1;
 *   - in the process environment, RO_TEST_SHRINK_FILE=PATH and
 *     RO_TEST_SHRINK_TO=BYTES make create() truncate PATH to BYTES (for a
 *     replay reading PATH: the file shrinks under it);
 *   - RO_TEST_LOADED=PATH makes the library, when loaded, create PATH: a
 *     test tells that a program loaded it at all.
 * Episodes last 10 steps.
 */
#include <rollout/env.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct hostile {
    char defect[32];
    int nan_reward;
    uint32_t t;
    float low[2], high[2];
} hostile_t;

__attribute__((constructor)) static void on_load(void)
{
    const char *marker = getenv("RO_TEST_LOADED");
    if (marker) {
        int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            close(fd);
    }
}

static const char *const arg_keys[] = {"defect", "how the spaces are wrong (default none)",
                                       "reward", "nan: every reward is NaN", NULL};

static int hostile_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                          char *err, size_t errlen)
{
    (void)seed;
    hostile_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "hostile: out of memory");
        return -12;
    }
    snprintf(h->defect, sizeof h->defect, "none");
    for (size_t i = 0; i < nargs; i++) {
        if (strcmp(args[i].key, "defect") == 0)
            snprintf(h->defect, sizeof h->defect, "%s", args[i].value);
        else if (strcmp(args[i].key, "reward") == 0)
            h->nan_reward = strcmp(args[i].value, "nan") == 0;
    }
    h->low[0] = h->low[1] = -1.0f;
    h->high[0] = h->high[1] = 1.0f;
    if (strcmp(h->defect, "nan_bound") == 0)
        h->high[1] = NAN;
    const char *shrink = getenv("RO_TEST_SHRINK_FILE"), *to = getenv("RO_TEST_SHRINK_TO");
    if (shrink && to && truncate(shrink, (off_t)strtoll(to, NULL, 10)) != 0) {
        snprintf(err, errlen, "hostile: cannot truncate %s", shrink);
        free(h);
        return -5;
    }
    *out = h;
    return 0;
}

static void hostile_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    hostile_t *h = env;
    memset(obs, 0, sizeof *obs);
    obs->kind = RO_SPACE_BOX;
    obs->ndim = 1;
    obs->shape[0] = 1;
    obs->low = h->low;
    obs->high = h->high;
    memset(act, 0, sizeof *act);
    act->kind = RO_SPACE_BOX;
    act->ndim = 1;
    act->shape[0] = 2;
    act->low = h->low;
    act->high = h->high;
    if (strcmp(h->defect, "null_low") == 0)
        act->low = NULL;
    else if (strcmp(h->defect, "null_high") == 0)
        act->high = NULL;
    else if (strcmp(h->defect, "zero_dims") == 0)
        act->ndim = 0;
    else if (strcmp(h->defect, "big_dims") == 0)
        act->ndim = 1000;
    else if (strcmp(h->defect, "discrete_zero") == 0)
        *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 0};
    else if (strcmp(h->defect, "obs_discrete") == 0)
        *obs = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 3};
}

static void hostile_reset(void *env, float *obs)
{
    hostile_t *h = env;
    h->t = 0;
    obs[0] = 0.0f;
}

static int hostile_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    hostile_t *h = env;
    (void)action;
    h->t++;
    obs[0] = (float)h->t / 10.0f;
    out->reward = h->nan_reward ? NAN : 1.0f;
    out->terminated = h->t >= 10;
    return 0;
}

static void hostile_destroy(void *env)
{
    free(env);
}

static const ro_env_vtable_t vt = {
    .abi_version = RO_ENV_ABI_VERSION,
    .name = "hostile",
    .arg_keys = arg_keys,
    .max_episode_steps = 0,
    .create = hostile_create,
    .spaces = hostile_spaces,
    .reset = hostile_reset,
    .step = hostile_step,
    .destroy = hostile_destroy,
};

const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vt;
}
