/*
 * A test env with a deliberate, switchable bug, for rollout-replay --verify.
 *
 * "drift": a point on a line. Action 0 moves it left, 1 right, plus a
 * little noise from the instance's seeded generator; the reward is -|x|;
 * the episode terminates when |x| > 2 and is cut at 100 steps.
 *
 * The bug: create() reads DRIFT_BUG_AFTER from the process environment (an
 * input the seed does not cover). When it is set to N, every step after
 * the instance's N-th adds 1e-6 to x. A recording made without it and
 * replayed with it diverges at exactly step N+1 of the instance's life.
 *
 * Built with -DDRIFT_STATE it also saves and loads its state (the env ABI's
 * optional ro_env_state_plugin()): two recordings, with and without the
 * bug, have snapshots for rollout-replay --bisect to search.
 */
#include <rollout/env.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct drift {
    uint64_t rng;
    uint64_t steps;     /* over every episode of the instance */
    uint64_t bug_after; /* 0 = no bug */
    float x, t;
    float low[2], high[2];
} drift_t;

static const char *const arg_keys[] = {NULL};

static uint64_t next_u64(uint64_t *s)
{
    /* xorshift64* (Vigna); a zero state never happens: seeded | 1. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static float uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(next_u64(s) >> 11) * 0x1.0p-53);
}

static int drift_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                        char *err, size_t errlen)
{
    (void)args;
    (void)nargs;
    drift_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "drift: out of memory");
        return -12;
    }
    d->rng = seed | 1;
    const char *bug = getenv("DRIFT_BUG_AFTER");
    d->bug_after = bug ? strtoull(bug, NULL, 10) : 0;
    d->low[0] = d->low[1] = -INFINITY;
    d->high[0] = d->high[1] = INFINITY;
    *out = d;
    return 0;
}

static void drift_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    drift_t *d = env;
    *obs =
        (ro_space_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = d->low, .high = d->high};
    *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 2};
}

static void drift_reset(void *env, float *obs)
{
    drift_t *d = env;
    d->x = uniform(&d->rng, -1.0f, 1.0f);
    d->t = 0.0f;
    obs[0] = d->x;
    obs[1] = d->t;
}

static int drift_step(void *env, ro_action_t a, float *obs, ro_step_t *out)
{
    drift_t *d = env;
    d->steps++;
    d->x += (a.discrete == 1 ? 0.1f : -0.1f) + uniform(&d->rng, -0.01f, 0.01f);
    if (d->bug_after && d->steps > d->bug_after)
        d->x += 1e-6f;
    d->t += 1.0f;
    obs[0] = d->x;
    obs[1] = d->t;
    out->reward = -fabsf(d->x);
    out->terminated = fabsf(d->x) > 2.0f;
    out->truncated = 0;
    return 0;
}

static void drift_destroy(void *env)
{
    free(env);
}

static const ro_env_vtable_t vtable = {
    .abi_version = RO_ENV_ABI_VERSION,
    .name = "drift",
    .arg_keys = arg_keys,
    .max_episode_steps = 100,
    .create = drift_create,
    .spaces = drift_spaces,
    .reset = drift_reset,
    .step = drift_step,
    .destroy = drift_destroy,
};

const ro_env_vtable_t *ro_env_plugin(void)
{
    return &vtable;
}

#ifdef DRIFT_STATE
/* The state: the generator, the step count and the point (the bug's step
 * comes from the process environment, not the state). */
typedef struct drift_state {
    uint64_t rng, steps;
    float x, t;
} drift_state_t;

static size_t drift_state_size(void *env)
{
    (void)env;
    return sizeof(drift_state_t);
}

static int drift_save(void *env, void *buf, size_t len)
{
    const drift_t *d = env;
    if (len != sizeof(drift_state_t))
        return -22;
    drift_state_t s = {.rng = d->rng, .steps = d->steps, .x = d->x, .t = d->t};
    memcpy(buf, &s, sizeof s);
    return 0;
}

static int drift_load(void *env, const void *buf, size_t len)
{
    drift_t *d = env;
    drift_state_t s;
    if (len != sizeof s)
        return -22;
    memcpy(&s, buf, sizeof s);
    d->rng = s.rng | 1; /* xorshift's state is never 0 */
    d->steps = s.steps;
    d->x = s.x;
    d->t = s.t;
    return 0;
}

static const ro_env_state_ops_t state_ops = {
    .version = RO_ENV_STATE_VERSION,
    .size = sizeof(ro_env_state_ops_t),
    .state_size = drift_state_size,
    .save_state = drift_save,
    .load_state = drift_load,
};

const ro_env_state_ops_t *ro_env_state_plugin(void);

const ro_env_state_ops_t *ro_env_state_plugin(void)
{
    return &state_ops;
}
#endif
