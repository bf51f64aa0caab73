/*
 * pendulum: Gymnasium Pendulum-v1, same constants and the same step (float64,
 * but for the float32 torque's terms, as NumPy 2 computes them), so a
 * trajectory matches Gymnasium's for the same start state and float32 torques
 * (tests/envs/mujoco/test_fidelity.py checks it transition by transition).
 */
#include "envs/pendulum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_args.h"
#include "envs/builtin_env.h"
#include "envs/registry.h"
#include "runtime/error.h"
#include "runtime/rng.h"

#define MAX_SPEED 8.0
#define MAX_TORQUE 2.0
#define DT 0.05
#define MASS 1.0
#define LEN 1.0
#define DEFAULT_G 10.0

typedef struct pendulum {
    ro_rng_t rng;
    double g;
    double th, thdot;
    double sin_th, cos_th; /* of th: the observation's, and the next step's sin */
    float obs_low[3], obs_high[3];
    float act_low[1], act_high[1];
} pendulum_t;

static const char *const pendulum_arg_keys[] = {
    "g",
    "gravity in m/s^2, a double in [0, 1000] (default 10.0, as Gymnasium)",
    NULL,
};

double ro__pendulum_angle_normalize(double x)
{
    /* fmod keeps the sign of its first operand; Python's % (and numpy's)
     * moves a negative remainder up by one period and returns +0 for 0. */
    double m = fmod(x + M_PI, 2 * M_PI);
    if (m < 0)
        m += 2 * M_PI;
    else if (m == 0)
        m = 0.0;
    return m - M_PI;
}

/* set_angle sets th and its sine and cosine: one sincos, whose bits are
 * libm's sin and cos (tests/envs/test_cartpole.c), serves the observation
 * now and the next step's sin(th). */
static void set_angle(pendulum_t *p, double th)
{
    p->th = th;
    sincos(th, &p->sin_th, &p->cos_th);
}

static void write_obs(const pendulum_t *p, float *obs)
{
    obs[0] = (float)p->cos_th;
    obs[1] = (float)p->sin_th;
    obs[2] = (float)p->thdot;
}

static int pendulum_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed,
                           char *err, size_t errlen)
{
    double g = DEFAULT_G;
    int rc = ro__env_args_known("pendulum", pendulum_arg_keys, args, nargs, err, errlen);
    for (size_t i = 0; rc == 0 && i < nargs; i++) /* g, the one key */
        rc = ro__env_arg_double("g", args[i].value, 0.0, 1000.0, &g, err, errlen);
    if (rc)
        return rc;

    pendulum_t *p = ro__env_alloc("pendulum", sizeof *p, err, errlen);
    if (p == NULL)
        return RO_ENOMEM;
    ro__rng_init(&p->rng, seed);
    p->g = g;
    const float high[3] = {1.0f, 1.0f, (float)MAX_SPEED};
    for (int i = 0; i < 3; i++) {
        p->obs_high[i] = high[i];
        p->obs_low[i] = -high[i];
    }
    p->act_low[0] = (float)-MAX_TORQUE;
    p->act_high[0] = (float)MAX_TORQUE;
    *out = p;
    return 0;
}

static void pendulum_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    pendulum_t *p = env;
    *obs = (ro_space_t){
        .kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = p->obs_low, .high = p->obs_high};
    *act = (ro_space_t){
        .kind = RO_SPACE_BOX, .ndim = 1, .shape = {1}, .low = p->act_low, .high = p->act_high};
}

static void pendulum_reset(void *env, float *obs)
{
    pendulum_t *p = env;
    /* Gymnasium draws both from one uniform(-high, high) call, th first. */
    set_angle(p, ro__rng_uniform(&p->rng, -M_PI, M_PI));
    p->thdot = ro__rng_uniform(&p->rng, -1.0, 1.0);
    write_obs(p, obs);
}

static int pendulum_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    pendulum_t *p = env;
    /* Clipping would turn inf into a full torque and keep NaN: neither is
     * an action a policy meant. */
    if (!isfinite(action.box[0]))
        return RO_EINVAL;
    /* The torque is float32, the action space's dtype, and NumPy 2 keeps
     * Gymnasium's terms with it in float32 (a Python float times a float32
     * is a float32): 0.001 * u**2 and 3.0 / (m * l**2) * u are rounded to
     * float32 before they join the float64 sums (issue 32). */
    const float uf = fminf(fmaxf(action.box[0], (float)-MAX_TORQUE), (float)MAX_TORQUE);
    const float u_cost = 0.001f * (uf * uf);
    const float u_acc = (float)(3.0 / (MASS * LEN * LEN)) * uf;

    double th = p->th, thdot = p->thdot;
    double an = ro__pendulum_angle_normalize(th);
    double cost = an * an + 0.1 * (thdot * thdot) + (double)u_cost;

    double newthdot = thdot + (3 * p->g / (2 * LEN) * p->sin_th + (double)u_acc) * DT;
    newthdot = fmin(fmax(newthdot, -MAX_SPEED), MAX_SPEED);
    double newth = th + newthdot * DT;

    set_angle(p, newth);
    p->thdot = newthdot;
    write_obs(p, obs);
    out->reward = (float)-cost;
    out->terminated = 0;
    out->truncated = 0;
    return 0;
}

void ro__pendulum_get_state(const void *env, double state[2])
{
    const pendulum_t *p = env;
    state[0] = p->th;
    state[1] = p->thdot;
}

void ro__pendulum_set_state(void *env, const double state[2])
{
    pendulum_t *p = env;
    set_angle(p, state[0]);
    p->thdot = state[1];
}

/* The state (rollout/env.h "Env state"): the RNG, then th and thdot,
 * host-order float64 (sin and cos follow from th; g from the args). Any
 * bytes are a state the step handles, so load takes them as they are. */
RO_ENV_RNG_DOUBLES_STATE(pendulum, pendulum_t, 2)
RO_ENV_STATE_OPS(pendulum);
RO_ENV_VTABLE(pendulum, 200, free); /* one allocation */
