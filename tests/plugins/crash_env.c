/*
 * A test env that fails on purpose: "crash" counts steps and, at step
 * crash_at of env instance 3's first episode, writes to an unmapped address
 * (for the node's crash report, docs/operations.md); at step nan_at it
 * returns a NaN observation and at inf_at an infinite reward (for
 * --check-finite); at fail_at its step returns an error.
 */
#include <rollout/env.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct crash {
    /* t: step of the episode; total: of the instance; the rest: args */
    uint32_t t, total, crash_at, nan_at, inf_at, fail_at;
    int victim;
    float low[1], high[1];
} crash_t;

static const char *const arg_keys[] = {
    "crash_at", "step at which env 3 crashes (0: never)",
    "nan_at",   "step at which env 3 returns NaN (0: never)",
    "inf_at",   "step at which env 3's reward is +inf (0: never)",
    "fail_at",  "step at which env 3's step fails (0: never)",
    NULL};

static int crash_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                        char *err, size_t errlen)
{
    crash_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "crash: out of memory");
        return -12;
    }
    c->crash_at = 5;
    for (size_t i = 0; i < nargs; i++)
        if (strcmp(args[i].key, "crash_at") == 0)
            c->crash_at = (uint32_t)strtoul(args[i].value, NULL, 10);
        else if (strcmp(args[i].key, "nan_at") == 0)
            c->nan_at = (uint32_t)strtoul(args[i].value, NULL, 10);
        else if (strcmp(args[i].key, "inf_at") == 0)
            c->inf_at = (uint32_t)strtoul(args[i].value, NULL, 10);
        else if (strcmp(args[i].key, "fail_at") == 0)
            c->fail_at = (uint32_t)strtoul(args[i].value, NULL, 10);
    /* The runtime seeds env i with a mix of (seed, i): tell env 3 by its
     * index, which the test passes as a second arg-free convention: the
     * victim is the instance created fourth. */
    static int created; /* test-only env: creation order, single-threaded */
    c->victim = created++ == 3;
    (void)seed;
    c->low[0] = -1.0f;
    c->high[0] = 1.0f;
    *out = c;
    return 0;
}

static void crash_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    crash_t *c = env;
    memset(obs, 0, sizeof *obs);
    obs->kind = RO_SPACE_BOX;
    obs->ndim = 1;
    obs->shape[0] = 1;
    obs->low = c->low;
    obs->high = c->high;
    memset(act, 0, sizeof *act);
    act->kind = RO_SPACE_DISCRETE;
    act->n = 2;
}

static void crash_reset(void *env, float *obs)
{
    crash_t *c = env;
    c->t = 0;
    obs[0] = 0.0f;
}

static int crash_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    crash_t *c = env;
    (void)action;
    c->t++;
    c->total++;
    if (c->victim && c->t == c->crash_at) {
        /* The bug: a store to an unmapped page (not NULL, which UBSan
         * would catch first in sanitizer builds). */
        volatile uintptr_t addr = 64; /* volatile: the compiler cannot see it */
        volatile int *p = (volatile int *)addr;
        *p = 42;
    }
    /* Each once in the instance's life. */
    obs[0] = c->victim && c->total == c->nan_at ? NAN : 0.0f;
    out->reward = c->victim && c->total == c->inf_at ? INFINITY : 1.0f;
    return c->victim && c->total == c->fail_at ? -5 : 0;
}

static void crash_destroy(void *env)
{
    free(env);
}

static const ro_env_vtable_t vt = {
    .abi_version = RO_ENV_ABI_VERSION,
    .name = "crash",
    .arg_keys = arg_keys,
    .max_episode_steps = 100,
    .create = crash_create,
    .spaces = crash_spaces,
    .reset = crash_reset,
    .step = crash_step,
    .destroy = crash_destroy,
};

const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vt;
}
