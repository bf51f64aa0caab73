/*
 * A test env that breaks one MuJoCo simulation on purpose: "hopper_fault"
 * is the built-in hopper (reached through the symbols rollout-node exports),
 * except that the first instance to take its `at_step`-th step (counted
 * over all its episodes) has its simulation broken just before that step:
 *
 *   fault=qvel   a joint velocity beyond MuJoCo's limit: mj_step warns
 *                (bad qvel) and resets the data itself;
 *   fault=stack  the mjData stack marked full: MuJoCo raises an error
 *                (stack overflow) in the middle of mj_step, which by
 *                default would exit the process.
 *
 * Exactly one instance per process is broken, once. The node must count
 * one env failure, reset that env and go on. Test-only: it lives in tests/
 * and is never installed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/mujoco/mj_envs.h"
#include "envs/mujoco/mj_registry.h"
#include "rollout/env.h"

typedef struct fault_env {
    void *inner;
    uint64_t steps;
    uint64_t at_step;
    int stack; /* 1: stack fault, 0: qvel fault */
} fault_env_t;

/* The one process-wide flag: which instance breaks is a race, that only one
 * does is not. Relaxed is enough: the flag guards no other data. */
static atomic_int fired;

static const char *const arg_keys[] = {
    "fault",   "qvel or stack (default qvel)",
    "at_step", "the instance step before which the fault is injected (default 50)",
    NULL,
};

static int fault_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                        char *err, size_t errlen)
{
    fault_env_t *f = calloc(1, sizeof *f);
    if (f == NULL) {
        snprintf(err, errlen, "hopper_fault: out of memory");
        return -12;
    }
    f->at_step = 50;
    for (size_t i = 0; i < nargs; i++) {
        if (strcmp(args[i].key, "fault") == 0 && strcmp(args[i].value, "stack") == 0)
            f->stack = 1;
        else if (strcmp(args[i].key, "fault") == 0 && strcmp(args[i].value, "qvel") == 0)
            f->stack = 0;
        else if (strcmp(args[i].key, "at_step") == 0)
            f->at_step = strtoull(args[i].value, NULL, 10);
        else {
            snprintf(err, errlen, "hopper_fault: bad arg %s=%s", args[i].key, args[i].value);
            free(f);
            return -22;
        }
    }
    int rc = ro__env_hopper.create(&f->inner, NULL, 0, seed, err, errlen);
    if (rc != 0) {
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

static void fault_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    ro__env_hopper.spaces(((fault_env_t *)env)->inner, obs, act);
}

static void fault_reset(void *env, float *obs)
{
    ro__env_hopper.reset(((fault_env_t *)env)->inner, obs);
}

static int fault_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    fault_env_t *f = env;
    int expected = 0;
    if (++f->steps == f->at_step &&
        atomic_compare_exchange_strong_explicit(&fired, &expected, 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
        mjData *d = ro__mj_env_data(f->inner);
        if (f->stack) /* MuJoCo >= 3: the stack grows down from the arena's end */
            d->pstack = (size_t)d->narena - d->parena;
        else
            d->qvel[3] = 1e300;
    }
    return ro__env_hopper.step(f->inner, action, obs, out);
}

static void fault_destroy(void *env)
{
    fault_env_t *f = env;
    ro__env_hopper.destroy(f->inner);
    free(f);
}

static const ro_env_vtable_t vtable = {
    .abi_version = RO_ENV_ABI_VERSION,
    .name = "hopper_fault",
    .arg_keys = arg_keys,
    .max_episode_steps = 1000,
    .create = fault_create,
    .spaces = fault_spaces,
    .reset = fault_reset,
    .step = fault_step,
    .destroy = fault_destroy,
};

const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vtable;
}
