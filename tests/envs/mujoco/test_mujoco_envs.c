/*
 * MuJoCo envs, physics sanity against Gymnasium v5's definitions: spaces,
 * dt and frame_skip, observation layout (x left out, qvel clipped where
 * Gymnasium clips it), reward terms recomputed from the state and the
 * action, healthy ranges and termination, reset noise bounds, the args and
 * their errors, determinism, and that models come from the binary, not
 * from the current directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "envs/registry.h"
#include "envs/mujoco/mj_envs.h"
#include "envs/mujoco/mj_registry.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "tmpdir_fixture.h"

#define MAX_OBS 128
#define MAX_ACT 8

typedef struct expect {
    const ro_env_vtable_t *vt;
    uint32_t obs_dim, act_dim, frame_skip;
    double timestep, act_bound, noise;
} expect_t;

static const expect_t envs[] = {
    {&ro__env_inverted_pendulum, 4, 1, 2, 0.02, 3.0, 0.01},
    {&ro__env_hopper, 11, 3, 4, 0.002, 1.0, 5e-3},
    {&ro__env_half_cheetah, 17, 6, 5, 0.01, 1.0, 0.1},
    {&ro__env_walker2d, 17, 6, 4, 0.002, 1.0, 5e-3},
    {&ro__env_ant, 105, 8, 5, 0.01, 1.0, 0.1},
};
#define NENVS (sizeof envs / sizeof envs[0])

/* make creates an instance or fails the test with the env's message. */
static void *make(const ro_env_vtable_t *vt, const ro_env_arg_t *args, size_t n, uint64_t seed)
{
    char err[256] = "";
    void *env = NULL;
    int rc = vt->create(&env, args, n, seed, err, sizeof err);
    if (rc != 0)
        fail_msg("%s: create failed (%d): %s", vt->name, rc, err);
    return env;
}

/* create_err returns create()'s code for one arg, with its message. */
static int create_err(const ro_env_vtable_t *vt, const char *key, const char *value, char *err,
                      size_t errlen)
{
    ro_env_arg_t a = {key, value};
    void *env = NULL;
    err[0] = '\0';
    int rc = vt->create(&env, &a, 1, 1, err, errlen);
    if (rc == 0)
        vt->destroy(env);
    return rc;
}

static void uniform_actions(ro_rng_t *r, float *a, uint32_t n, double bound)
{
    for (uint32_t j = 0; j < n; j++)
        a[j] = (float)ro__rng_uniform(r, -bound, bound);
}

static void test_spaces_dt_and_limits(void **state)
{
    (void)state;
    for (size_t k = 0; k < NENVS; k++) {
        const expect_t *x = &envs[k];
        void *env = make(x->vt, NULL, 0, 1);
        ro_space_t os, as;
        x->vt->spaces(env, &os, &as);
        assert_int_equal(os.kind, RO_SPACE_BOX);
        assert_int_equal(os.ndim, 1);
        assert_int_equal(os.shape[0], x->obs_dim);
        assert_true(isinf(os.low[0]) && os.low[0] < 0 && isinf(os.high[0]));
        assert_int_equal(as.kind, RO_SPACE_BOX);
        assert_int_equal(as.shape[0], x->act_dim);
        for (uint32_t j = 0; j < x->act_dim; j++) {
            assert_true(as.low[j] == (float)-x->act_bound);
            assert_true(as.high[j] == (float)x->act_bound);
        }
        const mjModel *m = ro__mj_env_model(env);
        assert_true(m->opt.timestep == x->timestep);
        assert_true(ro__mj_env_dt(env) == x->timestep * x->frame_skip);
        assert_int_equal(x->vt->max_episode_steps, 1000);
        /* One env step is frame_skip physics steps. */
        float obs[MAX_OBS], a[MAX_ACT] = {0};
        x->vt->reset(env, obs);
        ro_step_t st;
        assert_int_equal(x->vt->step(env, (ro_action_t){.box = a}, obs, &st), 0);
        assert_true(fabs(ro__mj_env_data(env)->time - ro__mj_env_dt(env)) < 1e-12);
        x->vt->destroy(env);
    }
}

static void test_frame_skip_arg(void **state)
{
    (void)state;
    ro_env_arg_t a = {"frame_skip", "7"};
    void *env = make(&ro__env_hopper, &a, 1, 1);
    assert_true(ro__mj_env_dt(env) == 0.002 * 7);
    float obs[MAX_OBS], act[MAX_ACT] = {0};
    ro_step_t st;
    ro__env_hopper.reset(env, obs);
    assert_int_equal(ro__env_hopper.step(env, (ro_action_t){.box = act}, obs, &st), 0);
    assert_true(fabs(ro__mj_env_data(env)->time - 0.014) < 1e-12);
    ro__env_hopper.destroy(env);
}

/* The observation is qpos (without x, ant: x and y, where excluded), then
 * qvel, clipped to [-10, 10] for hopper and walker2d, in float32; ant adds
 * the contact forces of every body but the world, clipped to [-1, 1]. */
static void check_obs(const ro_env_vtable_t *vt, void *env, const float *obs, bool with_x)
{
    const mjModel *m = ro__mj_env_model(env);
    const mjData *d = ro__mj_env_data(env);
    bool clip = vt == &ro__env_hopper || vt == &ro__env_walker2d;
    int skip = (vt != &ro__env_inverted_pendulum && !with_x) ? 1 : 0;
    if (vt == &ro__env_ant && skip)
        skip = 2;
    size_t k = 0;
    for (int i = skip; i < m->nq; i++)
        assert_true(obs[k++] == (float)d->qpos[i]);
    for (int i = 0; i < m->nv; i++) {
        double v = d->qvel[i];
        if (clip)
            v = fmin(fmax(v, -10.0), 10.0);
        assert_true(obs[k++] == (float)v);
    }
    if (vt == &ro__env_ant) {
        assert_int_equal(m->nbody, 14);
        for (int i = 6; i < 6 * m->nbody; i++)
            assert_true(obs[k++] == (float)fmin(fmax(d->cfrc_ext[i], -1.0), 1.0));
    }
}

/* Resets put qpos within +-noise of qpos0 and qvel within +-noise of 0
 * (half_cheetah's qvel: noise * N(0, 1)), with fresh draws each time. */
static void test_reset_noise(void **state)
{
    (void)state;
    for (size_t k = 0; k < NENVS; k++) {
        const expect_t *x = &envs[k];
        void *env = make(x->vt, NULL, 0, 77);
        const mjModel *m = ro__mj_env_model(env);
        assert_null(ro__mj_env_data(env)); /* made at the first reset */
        float obs[MAX_OBS];
        double first = NAN, sum = 0, sumsq = 0;
        int nvel = 0, differ = 0;
        for (int r = 0; r < 200; r++) {
            x->vt->reset(env, obs);
            const mjData *d = ro__mj_env_data(env);
            assert_non_null(d);
            check_obs(x->vt, env, obs, false);
            assert_true(d->time == 0.0);
            /* Every qpos, ant's root quaternion included: MuJoCo 4's
             * mj_forward normalises a copy, qpos keeps the noise as drawn
             * (as in Gymnasium's Ant-v5). */
            for (int i = 0; i < m->nq; i++)
                assert_true(fabs(d->qpos[i] - m->qpos0[i]) <= x->noise);
            for (int i = 0; i < m->nv; i++) {
                if (x->vt == &ro__env_half_cheetah || x->vt == &ro__env_ant) {
                    sum += d->qvel[i];
                    sumsq += d->qvel[i] * d->qvel[i];
                    nvel++;
                } else {
                    assert_true(fabs(d->qvel[i]) <= x->noise);
                }
            }
            if (r == 0)
                first = d->qpos[1];
            differ += d->qpos[1] != first;
        }
        assert_true(differ > 190);
        if (nvel) {
            /* 1800 (ant: 2800) normal draws scaled by 0.1: mean near 0, sd near 0.1. */
            double mean = sum / nvel, sd = sqrt(sumsq / nvel - mean * mean);
            assert_true(fabs(mean) < 0.01);
            assert_true(fabs(sd - x->noise) < 0.01);
        }
        x->vt->destroy(env);
    }
}

static void test_exclude_x_arg(void **state)
{
    (void)state;
    ro_env_arg_t a = {"exclude_current_positions_from_observation", "false"};
    void *env = make(&ro__env_walker2d, &a, 1, 3);
    ro_space_t os, as;
    ro__env_walker2d.spaces(env, &os, &as);
    assert_int_equal(os.shape[0], 18);
    float obs[MAX_OBS], act[MAX_ACT] = {0.5f, -0.5f, 0.2f, 0, 0, 0};
    ro__env_walker2d.reset(env, obs);
    ro_step_t st;
    assert_int_equal(ro__env_walker2d.step(env, (ro_action_t){.box = act}, obs, &st), 0);
    check_obs(&ro__env_walker2d, env, obs, true);
    ro__env_walker2d.destroy(env);
}

/* healthy: Gymnasium's open ranges on z = qpos[1] and angle = qpos[2]
 * (hopper: also qpos[2:] and qvel in healthy_state_range). */
static bool healthy(const ro_env_vtable_t *vt, const mjData *d, const mjModel *m, double zlo,
                    double zhi, double alo, double ahi)
{
    bool ok = zlo < d->qpos[1] && d->qpos[1] < zhi && alo < d->qpos[2] && d->qpos[2] < ahi;
    if (vt == &ro__env_hopper) {
        for (int i = 2; i < m->nq; i++)
            ok = ok && fabs(d->qpos[i]) < 100.0;
        for (int i = 0; i < m->nv; i++)
            ok = ok && fabs(d->qvel[i]) < 100.0;
    }
    return ok;
}

/* np_sum128 is numpy's sum of n <= 128 doubles: 8 interleaved partial sums
 * combined pairwise, then the rest in order (n < 8: all in order). */
static double np_sum128(const double *a, size_t n)
{
    assert_true(n <= 128);
    double res = 0, r[8];
    size_t i = 0;
    if (n >= 8) {
        memcpy(r, a, sizeof r);
        for (i = 8; i + 8 <= n; i += 8)
            for (size_t j = 0; j < 8; j++)
                r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    }
    for (; i < n; i++)
        res += a[i];
    return res;
}

/* ctrl_cost32 is Gymnasium's ctrl cost of a float32 action under NumPy 2:
 * float32 squares, summed in float32 (in order; 8 of them pairwise), times
 * the weight rounded to float32. */
static float ctrl_cost32(const float *a, uint32_t n, double w)
{
    float sq[MAX_ACT], sum = 0;
    for (uint32_t j = 0; j < n; j++)
        sq[j] = a[j] * a[j];
    if (n == 8)
        sum = ((sq[0] + sq[1]) + (sq[2] + sq[3])) + ((sq[4] + sq[5]) + (sq[6] + sq[7]));
    else
        for (uint32_t j = 0; j < n; j++)
            sum += sq[j];
    assert_true(n <= 8);
    return (float)w * sum;
}

/* Every reward and termination over random episodes, recomputed from the
 * state before and after each step and the action, and the reward terms. */
static void test_rewards_and_termination(void **state)
{
    (void)state;
    for (size_t k = 0; k < NENVS; k++) {
        const expect_t *x = &envs[k];
        const ro_env_vtable_t *vt = x->vt;
        void *env = make(vt, NULL, 0, 5);
        const mjModel *m = ro__mj_env_model(env);
        float obs[MAX_OBS], a[MAX_ACT];
        ro_rng_t r;
        ro__rng_init(&r, 9);
        vt->reset(env, obs);
        int terminations = 0;
        for (int t = 0; t < 3000; t++) {
            const mjData *d = ro__mj_env_data(env);
            uniform_actions(&r, a, x->act_dim, x->act_bound);
            /* ant: dx of body 1's frame, which lags qpos by one step */
            const bool ant = vt == &ro__env_ant;
            const double x0 = ant ? d->xpos[3] : d->qpos[0];
            ro_step_t st;
            assert_int_equal(vt->step(env, (ro_action_t){.box = a}, obs, &st), 0);
            check_obs(vt, env, obs, false);
            assert_int_equal(st.truncated, 0);
            const double xvel = ((ant ? d->xpos[3] : d->qpos[0]) - x0) / ro__mj_env_dt(env);
            double want;
            bool term;
            if (vt == &ro__env_inverted_pendulum) {
                term = fabs(d->qpos[1]) > 0.2;
                want = term ? 0.0 : 1.0;
            } else if (vt == &ro__env_half_cheetah) {
                term = false;
                want = xvel - ctrl_cost32(a, x->act_dim, 0.1);
            } else if (ant) {
                bool finite = true;
                for (int i = 0; i < m->nq; i++)
                    finite = finite && isfinite(d->qpos[i]);
                for (int i = 0; i < m->nv; i++)
                    finite = finite && isfinite(d->qvel[i]);
                bool h = finite && 0.2 <= d->qpos[2] && d->qpos[2] <= 1.0;
                double sq[128];
                for (int i = 0; i < 6 * m->nbody; i++) {
                    double f = fmin(fmax(d->cfrc_ext[i], -1.0), 1.0);
                    sq[i] = f * f;
                }
                const double contact = 5e-4 * np_sum128(sq, 6 * (size_t)m->nbody);
                term = !h;
                want = (xvel + (h ? 1.0 : 0.0)) - (ctrl_cost32(a, 8, 0.5) + contact);
                ro_mj_terms_t tm;
                ro__mj_env_terms(env, &tm);
                assert_true(tm.contact_cost == contact);
            } else {
                bool h = vt == &ro__env_hopper ? healthy(vt, d, m, 0.7, INFINITY, -0.2, 0.2)
                                               : healthy(vt, d, m, 0.8, 2.0, -1.0, 1.0);
                term = !h;
                want = (xvel + (h ? 1.0 : 0.0)) - ctrl_cost32(a, x->act_dim, 1e-3);
            }
            ro_mj_terms_t tm;
            ro__mj_env_terms(env, &tm);
            assert_true(tm.x_velocity == (vt == &ro__env_inverted_pendulum ? 0.0 : xvel));
            assert_true(tm.forward + tm.survive - (tm.ctrl_cost + tm.contact_cost) == want);
            assert_int_equal(st.terminated, term);
            if (st.reward != (float)want)
                fail_msg("%s step %d: reward %.9g, recomputed %.9g", vt->name, t, st.reward, want);
            if (term) {
                terminations++;
                vt->reset(env, obs);
            }
        }
        /* Random actions topple hopper, walker2d and the pendulum often,
         * ant now and then (it jumps above z = 1); half_cheetah never
         * terminates. */
        if (vt == &ro__env_half_cheetah)
            assert_int_equal(terminations, 0);
        else
            assert_true(terminations > (vt == &ro__env_ant ? 0 : 10));
        vt->destroy(env);
    }
}

/* The weights and ranges reach the reward and the termination. */
static void test_weight_and_range_args(void **state)
{
    (void)state;
    ro_env_arg_t args[] = {{"forward_reward_weight", "2.5"},
                           {"ctrl_cost_weight", "0.5"},
                           {"healthy_reward", "3"},
                           {"healthy_z_range", "2,inf"}, /* never healthy: it stands at 1.25 */
                           {"terminate_when_unhealthy", "false"}};
    void *env = make(&ro__env_hopper, args, 5, 2);
    float obs[MAX_OBS], a[3] = {0.5f, -1.0f, 0.25f};
    ro__env_hopper.reset(env, obs);
    for (int t = 0; t < 50; t++) {
        const mjData *d = ro__mj_env_data(env);
        double x0 = d->qpos[0];
        ro_step_t st;
        assert_int_equal(ro__env_hopper.step(env, (ro_action_t){.box = a}, obs, &st), 0);
        assert_int_equal(st.terminated, 0); /* unhealthy, but told not to terminate */
        double want = (2.5 * (d->qpos[0] - x0) / 0.008 + 0.0) - 0.5 * (0.25 + 1.0 + 0.0625);
        assert_true(st.reward == (float)want);
    }
    ro__env_hopper.destroy(env);

    /* The same ranges with termination on: the first step terminates. */
    env = make(&ro__env_hopper, args + 3, 1, 2);
    ro__env_hopper.reset(env, obs);
    ro_step_t st;
    assert_int_equal(ro__env_hopper.step(env, (ro_action_t){.box = a}, obs, &st), 0);
    assert_int_equal(st.terminated, 1);
    ro__env_hopper.destroy(env);

    /* walker2d's angle range, tight enough that any tilt is unhealthy. */
    ro_env_arg_t tight = {"healthy_angle_range", "-1e-9,1e-9"};
    env = make(&ro__env_walker2d, &tight, 1, 2);
    float wa[6] = {1, 1, 1, -1, -1, -1};
    ro__env_walker2d.reset(env, obs);
    assert_int_equal(ro__env_walker2d.step(env, (ro_action_t){.box = wa}, obs, &st), 0);
    assert_int_equal(st.terminated, 1);
    ro__env_walker2d.destroy(env);

    /* No noise: every reset is qpos0 exactly. */
    ro_env_arg_t quiet = {"reset_noise_scale", "0"};
    env = make(&ro__env_inverted_pendulum, &quiet, 1, 2);
    ro__env_inverted_pendulum.reset(env, obs);
    for (int i = 0; i < 4; i++)
        assert_true(obs[i] == 0.0f);
    ro__env_inverted_pendulum.destroy(env);
}

static void test_arg_errors(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(create_err(&ro__env_hopper, "frame_skip", "0", err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "frame_skip"));
    assert_int_equal(create_err(&ro__env_hopper, "frame_skip", "two", err, sizeof err), RO_EINVAL);
    assert_int_equal(create_err(&ro__env_hopper, "ctrl_cost_weight", "nan", err, sizeof err),
                     RO_EINVAL);
    assert_non_null(strstr(err, "ctrl_cost_weight"));
    assert_int_equal(create_err(&ro__env_hopper, "reset_noise_scale", "-1", err, sizeof err),
                     RO_EINVAL);
    assert_int_equal(create_err(&ro__env_hopper, "healthy_z_range", "0.7", err, sizeof err),
                     RO_EINVAL);
    assert_non_null(strstr(err, "LO,HI"));
    assert_int_equal(create_err(&ro__env_hopper, "healthy_z_range", "2,1", err, sizeof err),
                     RO_EINVAL);
    assert_non_null(strstr(err, "empty range"));
    assert_int_equal(create_err(&ro__env_hopper, "healthy_angle_range", "a,1", err, sizeof err),
                     RO_EINVAL);
    assert_int_equal(create_err(&ro__env_hopper, "healthy_z_range", "1,2,3", err, sizeof err),
                     RO_EINVAL);
    assert_int_equal(
        create_err(&ro__env_walker2d, "terminate_when_unhealthy", "maybe", err, sizeof err),
        RO_EINVAL);
    assert_non_null(strstr(err, "true or false"));
    /* A key another MuJoCo env has, but this one does not. */
    assert_int_equal(create_err(&ro__env_inverted_pendulum, "healthy_reward", "1", err, sizeof err),
                     RO_EINVAL);
    assert_non_null(strstr(err, "healthy_reward"));
    assert_int_equal(create_err(&ro__env_half_cheetah, "healthy_z_range", "0,1", err, sizeof err),
                     RO_EINVAL);
    /* main_body: a body's name or id in the model (Ant-v5's). */
    assert_int_equal(create_err(&ro__env_ant, "main_body", "tail", err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "'main_body': 'tail' is no body's name, nor an id in 0..13"));
    assert_int_equal(create_err(&ro__env_ant, "main_body", "14", err, sizeof err), RO_EINVAL);
    assert_int_equal(create_err(&ro__env_hopper, "main_body", "torso", err, sizeof err), RO_EINVAL);
    ro_env_arg_t mb[2] = {{"main_body", "torso"}, {"main_body", "0"}};
    for (int i = 0; i < 2; i++) {
        void *env = make(&ro__env_ant, &mb[i], 1, 1);
        float obs[MAX_OBS], act[MAX_ACT] = {0};
        ro_step_t st;
        ro__env_ant.reset(env, obs);
        assert_int_equal(ro__env_ant.step(env, (ro_action_t){.box = act}, obs, &st), 0);
        ro__env_ant.destroy(env);
    }

    /* The registry names the accepted keys. */
    ro_env_arg_t in = {"bogus", "1"}, out[1];
    size_t nout;
    uint32_t steps;
    assert_int_equal(
        ro__env_check_args(&ro__env_hopper, &in, 1, out, &nout, &steps, err, sizeof err),
        RO_EINVAL);
    assert_non_null(strstr(err, "healthy_state_range"));
    assert_non_null(strstr(err, "reset_noise_scale"));
}

static void test_registry(void **state)
{
    (void)state;
    const char *names[] = {"inverted_pendulum", "hopper", "half_cheetah", "walker2d", "ant"};
    for (size_t i = 0; i < 5; i++) {
        ro_env_kind_t kind;
        char err[256] = "";
        assert_int_equal(ro__env_open(&kind, names[i], err, sizeof err), 0);
        assert_string_equal(kind.vt->name, names[i]);
        ro__env_close(&kind);
    }
}

/* The same seed and actions give the same bits; another seed does not. */
static void test_determinism(void **state)
{
    (void)state;
    for (size_t k = 0; k < NENVS; k++) {
        const expect_t *x = &envs[k];
        void *e1 = make(x->vt, NULL, 0, 123), *e2 = make(x->vt, NULL, 0, 123);
        void *e3 = make(x->vt, NULL, 0, 124);
        float o1[MAX_OBS], o2[MAX_OBS], o3[MAX_OBS], a[MAX_ACT];
        ro_rng_t r;
        ro__rng_init(&r, 1);
        x->vt->reset(e1, o1);
        x->vt->reset(e2, o2);
        x->vt->reset(e3, o3);
        assert_memory_not_equal(o1, o3, x->obs_dim * sizeof(float));
        for (int t = 0; t < 500; t++) {
            assert_memory_equal(o1, o2, x->obs_dim * sizeof(float));
            uniform_actions(&r, a, x->act_dim, x->act_bound);
            ro_step_t s1, s2;
            assert_int_equal(x->vt->step(e1, (ro_action_t){.box = a}, o1, &s1), 0);
            assert_int_equal(x->vt->step(e2, (ro_action_t){.box = a}, o2, &s2), 0);
            assert_memory_equal(&s1.reward, &s2.reward, sizeof(float));
            assert_int_equal(s1.terminated, s2.terminated);
            if (s1.terminated) {
                x->vt->reset(e1, o1);
                x->vt->reset(e2, o2);
            }
        }
        /* Instances of one env share one model. */
        assert_ptr_equal(ro__mj_env_model(e1), ro__mj_env_model(e3));
        x->vt->destroy(e1);
        x->vt->destroy(e2);
        x->vt->destroy(e3);
    }
}

/* Calls of a timer callback someone else installed in the process. */
static int timer_calls;

static mjtNum counting_timer(void)
{
    timer_calls++;
    return 0;
}

/* A timer callback set process-wide (as `import mujoco` sets one) is
 * cleared before the envs simulate, whether set before the first reset or
 * between steps: MuJoCo never calls it from an env's reset or step. */
static void test_timer_callback_cleared(void **state)
{
    (void)state;
    void *env = make(&ro__env_hopper, NULL, 0, 9); /* (compiling the model may time itself) */
    timer_calls = 0;
    mjcb_time = counting_timer;
    float obs[MAX_OBS], a[MAX_ACT] = {0.5f, -0.5f, 0.25f};
    ro__env_hopper.reset(env, obs);
    assert_null(mjcb_time);
    for (int t = 0; t < 10; t++) {
        if (t == 5)
            mjcb_time = counting_timer; /* as an import after the first steps */
        ro_step_t st;
        assert_int_equal(ro__env_hopper.step(env, (ro_action_t){.box = a}, obs, &st), 0);
        assert_null(mjcb_time);
    }
    assert_int_equal(timer_calls, 0);
    ro__env_hopper.destroy(env);
}

/* A hopper.xml in the current directory is not what the env loads. */
static void test_models_not_from_cwd(void **state)
{
    (void)state;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(tmpdir_create("mujoco"), 0);
    assert_int_equal(chdir(tmpdir), 0);
    FILE *f = fopen("hopper.xml", "w");
    assert_non_null(f);
    fputs("<mujoco><worldbody><body><joint type='slide'/><geom size='1'/></body>"
          "</worldbody></mujoco>\n",
          f);
    fclose(f);
    void *env = make(&ro__env_hopper, NULL, 0, 1);
    ro_space_t os, as;
    ro__env_hopper.spaces(env, &os, &as);
    assert_int_equal(os.shape[0], 11);
    assert_int_equal(as.shape[0], 3);
    ro__env_hopper.destroy(env);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(tmpdir_remove(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spaces_dt_and_limits),
        cmocka_unit_test(test_frame_skip_arg),
        cmocka_unit_test(test_reset_noise),
        cmocka_unit_test(test_exclude_x_arg),
        cmocka_unit_test(test_rewards_and_termination),
        cmocka_unit_test(test_weight_and_range_args),
        cmocka_unit_test(test_arg_errors),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_models_not_from_cwd),
        cmocka_unit_test(test_timer_callback_cleared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
