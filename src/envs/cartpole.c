/*
 * cartpole: Gymnasium CartPole-v1, same constants, same Euler step in the
 * same order of float64 operations, so a trajectory matches Gymnasium's for
 * the same start state and actions. With observe_velocity=false the
 * observation is (x, theta) only: a partially observed task that a
 * memoryless policy cannot solve (docs/policy.md "Recurrent policies").
 */
#include "envs/cartpole.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/builtin_env.h"
#include "envs/env_args.h"
#include "envs/registry.h"
#include "runtime/error.h"
#include "runtime/rng.h"

/* Gymnasium's constants; derived ones are computed as Gymnasium does so
 * that they round the same way. */
#define GRAVITY 9.8
#define MASSCART 1.0
#define MASSPOLE 0.1
#define TOTAL_MASS (MASSPOLE + MASSCART)
#define LENGTH 0.5 /* half the pole's length */
#define POLEMASS_LENGTH (MASSPOLE * LENGTH)
#define FORCE_MAG 10.0
#define TAU 0.02
#define THETA_THRESHOLD (12 * 2 * M_PI / 360)
#define X_THRESHOLD 2.4

typedef struct cartpole {
    ro_rng_t rng;
    double x, x_dot, theta, theta_dot;
    bool velocity; /* the observation has x_dot and theta_dot (the default) */
    float low[4], high[4];
} cartpole_t;

static const char *const cartpole_arg_keys[] = {
    "observe_velocity",
    "true (default): observe x, x_dot, theta, theta_dot; false: x and theta only",
    NULL,
};

/* write_obs rounds the float64 state to the float32 observation. */
static void write_obs(const cartpole_t *c, float *obs)
{
    if (!c->velocity) {
        obs[0] = (float)c->x;
        obs[1] = (float)c->theta;
        return;
    }
    obs[0] = (float)c->x;
    obs[1] = (float)c->x_dot;
    obs[2] = (float)c->theta;
    obs[3] = (float)c->theta_dot;
}

static int cartpole_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                           char *err, size_t errlen)
{
    int rc = ro__env_args_known("cartpole", cartpole_arg_keys, args, nargs, err, errlen);
    if (rc)
        return rc;
    bool velocity = true;
    for (size_t i = 0; i < nargs; i++) { /* observe_velocity, the one key */
        const char *v = args[i].value;
        if (strcmp(v, "true") && strcmp(v, "false") && strcmp(v, "1") && strcmp(v, "0")) {
            snprintf(err, errlen, "env 'cartpole': observe_velocity=%.32s; expected true or false",
                     v);
            return RO_EINVAL;
        }
        velocity = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    }
    cartpole_t *c = ro__env_alloc("cartpole", sizeof *c, err, errlen);
    if (c == NULL)
        return RO_ENOMEM;
    ro__rng_init(&c->rng, seed);
    c->velocity = velocity;
    /* Gymnasium's bounds: twice the termination thresholds, and the largest
     * float32 for the unbounded velocities. */
    const float high[4] = {(float)(X_THRESHOLD * 2), FLT_MAX, (float)(THETA_THRESHOLD * 2),
                           FLT_MAX};
    for (int i = 0, k = 0; i < 4; i++) {
        if (!velocity && (i == 1 || i == 3))
            continue; /* (x, theta): the positions' bounds */
        c->high[k] = high[i];
        c->low[k++] = -high[i];
    }
    *out = c;
    return 0;
}

static void cartpole_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    cartpole_t *c = env;
    *obs = (ro_space_t){.kind = RO_SPACE_BOX,
                        .ndim = 1,
                        .shape = {c->velocity ? 4 : 2},
                        .low = c->low,
                        .high = c->high};
    *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 2};
}

static void cartpole_reset(void *env, float *obs)
{
    cartpole_t *c = env;
    c->x = ro__rng_uniform(&c->rng, -0.05, 0.05);
    c->x_dot = ro__rng_uniform(&c->rng, -0.05, 0.05);
    c->theta = ro__rng_uniform(&c->rng, -0.05, 0.05);
    c->theta_dot = ro__rng_uniform(&c->rng, -0.05, 0.05);
    write_obs(c, obs);
}

static int cartpole_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    cartpole_t *c = env;
    if (action.discrete != 0 && action.discrete != 1)
        return RO_EINVAL;

    double force = action.discrete == 1 ? FORCE_MAG : -FORCE_MAG;
    /* One sincos a step (a GNU extension; -D_GNU_SOURCE): one range
     * reduction for both. glibc's sincos gives the bits of sin and cos
     * (tests/envs/test_cartpole.c checks it), so trajectories still match
     * Gymnasium's math.sin and math.cos, and recorded files still verify. */
    double sintheta, costheta;
    sincos(c->theta, &sintheta, &costheta);
    double temp = (force + POLEMASS_LENGTH * (c->theta_dot * c->theta_dot) * sintheta) / TOTAL_MASS;
    double thetaacc = (GRAVITY * sintheta - costheta * temp) /
                      (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
    double xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;

    /* Gymnasium's "euler" integrator: positions move with the old speeds. */
    c->x = c->x + TAU * c->x_dot;
    c->x_dot = c->x_dot + TAU * xacc;
    c->theta = c->theta + TAU * c->theta_dot;
    c->theta_dot = c->theta_dot + TAU * thetaacc;

    write_obs(c, obs);
    out->terminated = c->x < -X_THRESHOLD || c->x > X_THRESHOLD || c->theta < -THETA_THRESHOLD ||
                      c->theta > THETA_THRESHOLD;
    out->truncated = 0;
    out->reward = 1.0f;
    return 0;
}

void ro__cartpole_get_state(const void *env, double state[4])
{
    const cartpole_t *c = env;
    state[0] = c->x;
    state[1] = c->x_dot;
    state[2] = c->theta;
    state[3] = c->theta_dot;
}

void ro__cartpole_set_state(void *env, const double state[4])
{
    cartpole_t *c = env;
    c->x = state[0];
    c->x_dot = state[1];
    c->theta = state[2];
    c->theta_dot = state[3];
}

/* The state (rollout/env.h "Env state"): the RNG, then x, x_dot, theta,
 * theta_dot, host-order float64. Every value of the bytes is a state the
 * step handles (a NaN just terminates), so load takes them as they are. */
RO_ENV_RNG_DOUBLES_STATE(cartpole, cartpole_t, 4)
RO_ENV_STATE_OPS(cartpole);
RO_ENV_VTABLE(cartpole, 500, free); /* one allocation */
