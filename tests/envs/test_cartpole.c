/*
 * cartpole: one Euler step against values worked out by hand from the
 * CartPole-v1 equations, termination thresholds, resets, spaces and
 * determinism.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "envs/registry.h"
#include "envs/cartpole.h"
#include "runtime/rng.h"
#include "runtime/error.h"

static const ro_env_vtable_t *const vt = &ro__env_cartpole;

static int setup(void **state)
{
    char err[256] = "";
    void *env = NULL;
    int rc = vt->create(&env, NULL, 0, 42, err, sizeof err);
    if (rc != 0)
        return -1;
    *state = env;
    return 0;
}

static int teardown(void **state)
{
    vt->destroy(*state);
    return 0;
}

/* step_from sets the state, steps once and checks the invariants of every
 * CartPole step. */
static void step_from(void *env, const double s[4], int32_t action, float obs[4], double next[4])
{
    ro__cartpole_set_state(env, s);
    ro_step_t st = {0};
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = action}, obs, &st), 0);
    ro__cartpole_get_state(env, next);
    assert_true(st.reward == 1.0f);
    assert_int_equal(st.truncated, 0);
    /* The observation is the float64 state rounded to float32. */
    for (int i = 0; i < 4; i++)
        assert_true(obs[i] == (float)next[i]);
}

static void assert_close(double got, double want)
{
    if (fabs(got - want) > 1e-12 * (1.0 + fabs(want)))
        fail_msg("got %.17g, want %.17g", got, want);
}

/*
 * From rest, pole upright: sin = 0, cos = 1, so with force F = +-10:
 *   temp     = F / 1.1                              = +-100/11
 *   thetaacc = (0 - temp) / (0.5 * (4/3 - 0.1/1.1))
 *            = -temp / (0.5 * 41/33) = -temp * 66/41 = -+600/41 = -+14.634146...
 *   xacc     = temp - 0.05 * thetaacc / 1.1 = 100/11 + 300/451 = +-4400/451
 *            = +-9.7560975...
 *   x' = 0, x_dot' = 0.02 * xacc = +-88/451 = +-0.19512195...,
 *   theta' = 0, theta_dot' = 0.02 * thetaacc = -+12/41 = -+0.29268292...
 */
static void test_step_from_rest(void **state)
{
    void *env = *state;
    const double rest[4] = {0, 0, 0, 0};
    float obs[4];
    double s[4];

    step_from(env, rest, 1, obs, s);
    assert_close(s[0], 0.0);
    assert_close(s[1], 88.0 / 451.0);
    assert_close(s[2], 0.0);
    assert_close(s[3], -12.0 / 41.0);
    assert_true(obs[1] == (float)(88.0 / 451.0));
    assert_true(obs[3] == (float)(-12.0 / 41.0));
    assert_true(obs[1] == 0x1.8f9c18p-3f); /* 0.19512195 in float32 */

    step_from(env, rest, 0, obs, s);
    assert_close(s[1], -88.0 / 451.0);
    assert_close(s[3], 12.0 / 41.0);
    assert_true(obs[1] == -0x1.8f9c18p-3f);
}

/* x moves with the old x_dot: from x_dot = 1 (pole upright, still), the
 * accelerations are those above, so x' = 0.02 and x_dot' = 1 + 88/451. */
static void test_euler_uses_old_speed(void **state)
{
    float obs[4];
    double s[4];
    const double moving[4] = {0, 1, 0, 0};
    step_from(*state, moving, 1, obs, s);
    assert_close(s[0], 0.02);
    assert_close(s[1], 1.0 + 88.0 / 451.0);
    assert_close(s[2], 0.0);
    assert_close(s[3], -12.0 / 41.0);
}

/*
 * From x = 0.1, x_dot = -0.5, theta = pi/6, theta_dot = 2: sin = 1/2,
 * cos = sqrt(3)/2, cos^2 = 3/4.
 *   temp     = (F + 0.05 * 4 * 1/2) / 1.1 = (F + 0.1) / 1.1
 *              push right: 101/11 = 9.1818181...; push left: -9 exactly
 *   denom    = 0.5 * (4/3 - 0.1 * 3/4 / 1.1) = 0.5 * (4/3 - 3/44) = 167/264
 *   thetaacc = (9.8/2 - sqrt(3)/2 * temp) * 264/167
 *              right: -4.8242250225956838; left: 20.067523110130693
 *   xacc     = temp - 0.05 * thetaacc * sqrt(3)/2 / 1.1 = temp - sqrt(3)/44 * thetaacc
 *              right: 9.3717227919609254; left: -9.7899538547456579
 *   x' = 0.1 - 0.01 = 0.09, theta' = pi/6 + 0.04, the speeds gain 0.02 * acc.
 */
static void test_step_tilted(void **state)
{
    const double s0[4] = {0.1, -0.5, M_PI / 6, 2.0};
    const double r3 = sqrt(3.0);
    float obs[4];
    double s[4];

    double temp = 101.0 / 11.0;
    double thetaacc = (4.9 - r3 / 2 * temp) * 264.0 / 167.0;
    double xacc = temp - r3 / 44.0 * thetaacc;
    assert_close(thetaacc, -4.8242250225956838);
    assert_close(xacc, 9.3717227919609254);
    step_from(*state, s0, 1, obs, s);
    assert_close(s[0], 0.09);
    assert_close(s[1], -0.5 + 0.02 * xacc);
    assert_close(s[2], M_PI / 6 + 0.04);
    assert_close(s[3], 2.0 + 0.02 * thetaacc);

    temp = -9.0;
    thetaacc = (4.9 - r3 / 2 * temp) * 264.0 / 167.0;
    xacc = temp - r3 / 44.0 * thetaacc;
    assert_close(thetaacc, 20.067523110130693);
    assert_close(xacc, -9.7899538547456579);
    step_from(*state, s0, 0, obs, s);
    assert_close(s[1], -0.5 + 0.02 * xacc);
    assert_close(s[3], 2.0 + 0.02 * thetaacc);
    assert_true(obs[3] == (float)(2.0 + 0.02 * thetaacc));
}

/* terminated_after steps once from s (zero speeds keep x and theta where
 * they are) and returns the flag. */
static int terminated_after(void *env, double x, double theta)
{
    const double s[4] = {x, 0.0, theta, 0.0};
    float obs[4];
    double next[4];
    ro__cartpole_set_state(env, s);
    ro_step_t st = {0};
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 0}, obs, &st), 0);
    ro__cartpole_get_state(env, next);
    assert_true(next[0] == x);
    assert_true(st.reward == 1.0f); /* the terminating step is rewarded too */
    return st.terminated;
}

static void test_termination_thresholds(void **state)
{
    void *env = *state;
    const double th = 12 * 2 * M_PI / 360; /* 0.20943951023931953 */
    assert_false(terminated_after(env, 0.0, 0.0));
    assert_false(terminated_after(env, 2.4, 0.0));
    assert_false(terminated_after(env, -2.4, 0.0));
    assert_true(terminated_after(env, nextafter(2.4, 3), 0.0));
    assert_true(terminated_after(env, nextafter(-2.4, -3), 0.0));

    /* theta moves by theta_dot only: zero here, but the step gives theta_dot
     * an acceleration, so theta stays put for this one step. */
    assert_false(terminated_after(env, 0.0, th));
    assert_false(terminated_after(env, 0.0, -th));
    assert_true(terminated_after(env, 0.0, nextafter(th, 1)));
    assert_true(terminated_after(env, 0.0, nextafter(-th, -1)));
}

static void test_invalid_action(void **state)
{
    void *env = *state;
    const double s0[4] = {0.01, 0.02, 0.03, 0.04};
    float obs[4] = {0};
    double s[4];
    ro_step_t st = {0};
    ro__cartpole_set_state(env, s0);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 2}, obs, &st), RO_EINVAL);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = -1}, obs, &st), RO_EINVAL);
    ro__cartpole_get_state(env, s);
    assert_memory_equal(s, s0, sizeof s);
}

static void test_reset_ranges(void **state)
{
    (void)state;
    double sum[4] = {0};
    const int n = 2000;
    for (int seed = 0; seed < n; seed++) {
        void *env;
        char err[128];
        assert_int_equal(vt->create(&env, NULL, 0, (uint64_t)seed * 7919u, err, sizeof err), 0);
        float obs[4];
        double s[4];
        vt->reset(env, obs);
        ro__cartpole_get_state(env, s);
        for (int i = 0; i < 4; i++) {
            assert_true(s[i] >= -0.05 && s[i] < 0.05);
            assert_true(obs[i] == (float)s[i]);
            sum[i] += s[i];
        }
        vt->destroy(env);
    }
    /* The mean of n uniforms on [-0.05, 0.05) has a standard deviation of
     * 0.1 / sqrt(12 n) = 0.00065: 0.004 is six of them. */
    for (int i = 0; i < 4; i++)
        assert_true(fabs(sum[i] / n) < 0.004);
}

static void test_spaces(void **state)
{
    ro_space_t obs, act;
    vt->spaces(*state, &obs, &act);
    assert_int_equal(obs.kind, RO_SPACE_BOX);
    assert_int_equal(obs.ndim, 1);
    assert_int_equal(obs.shape[0], 4);
    assert_int_equal(ro_space_size(&obs), 4);
    const float high[4] = {4.8f, FLT_MAX, 0.41887903f, FLT_MAX};
    for (int i = 0; i < 4; i++) {
        assert_true(obs.high[i] == high[i]);
        assert_true(obs.low[i] == -high[i]);
    }
    assert_true(obs.high[2] == (float)(2 * (12 * 2 * M_PI / 360)));
    assert_int_equal(act.kind, RO_SPACE_DISCRETE);
    assert_int_equal(act.n, 2);

    assert_int_equal(vt->abi_version, RO_ENV_ABI_VERSION);
    assert_string_equal(vt->name, "cartpole");
    assert_int_equal(vt->max_episode_steps, 500);
    assert_string_equal(vt->arg_keys[0], "observe_velocity");
    assert_null(vt->arg_keys[2]);
}

static void test_rejects_args(void **state)
{
    (void)state;
    void *env = NULL;
    char err[128] = "";
    const ro_env_arg_t args[] = {{"foo", "1"}};
    assert_int_equal(vt->create(&env, args, 1, 1, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "'foo'"));
}

/* observe_velocity=false: the same dynamics, (x, theta) observed, the
 * positions' bounds; a value that is not a boolean is refused. */
static void test_without_velocity(void **state)
{
    (void)state;
    void *full, *part;
    char err[128] = "";
    const ro_env_arg_t off[] = {{"observe_velocity", "false"}},
                       bad[] = {{"observe_velocity", "no"}};
    assert_int_equal(vt->create(&full, NULL, 0, 5, err, sizeof err), 0);
    assert_int_equal(vt->create(&part, off, 1, 5, err, sizeof err), 0);
    ro_space_t os, as;
    vt->spaces(part, &os, &as);
    assert_int_equal(os.shape[0], 2);
    assert_true(os.high[0] == 4.8f && os.high[1] == (float)(12 * 2 * M_PI / 360 * 2));
    float o4[4], o2[2];
    vt->reset(full, o4);
    vt->reset(part, o2);
    for (int t = 0; t < 40; t++) {
        assert_true(o2[0] == o4[0] && o2[1] == o4[2]);
        ro_step_t s4, s2;
        ro_action_t a = {.discrete = t % 3 == 0};
        assert_int_equal(vt->step(full, a, o4, &s4), 0);
        assert_int_equal(vt->step(part, a, o2, &s2), 0);
        assert_int_equal(s4.terminated, s2.terminated);
        if (s4.terminated) {
            vt->reset(full, o4);
            vt->reset(part, o2);
        }
    }
    vt->destroy(full);
    vt->destroy(part);
    assert_int_equal(vt->create(&part, bad, 1, 5, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "observe_velocity=no"));
}

/* run records n steps of an episode-resetting rollout with a fixed action
 * pattern into obs (n+1 rows of 4). */
static void run(uint64_t seed, int n, float *obs)
{
    void *env;
    char err[128];
    assert_int_equal(vt->create(&env, NULL, 0, seed, err, sizeof err), 0);
    vt->reset(env, obs);
    for (int t = 0; t < n; t++) {
        ro_step_t st;
        int32_t a = (t * 7 + t / 3) % 2;
        float *o = obs + 4 * (t + 1);
        assert_int_equal(vt->step(env, (ro_action_t){.discrete = a}, o, &st), 0);
        if (st.terminated)
            vt->reset(env, o);
    }
    vt->destroy(env);
}

static void test_determinism(void **state)
{
    (void)state;
    enum { N = 1000 };
    static float a[4 * (N + 1)], b[4 * (N + 1)], c[4 * (N + 1)];
    run(123, N, a);
    run(123, N, b);
    run(124, N, c);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, 4 * sizeof(float));
}

/* The step calls sincos once; it must give libm's sin and cos bits, or
 * trajectories would stop matching Gymnasium's (and recorded files would
 * no longer verify). Angles in and far beyond the episode's range. */
static void test_sincos_is_sin_and_cos(void **state)
{
    (void)state;
    /* Through volatile pointers: the compiler would otherwise merge the
     * sin and cos calls below into one sincos, and compare it to itself. */
    double (*volatile sin_fn)(double) = sin;
    double (*volatile cos_fn)(double) = cos;
    ro_rng_t rng;
    ro__rng_init(&rng, 77);
    for (int i = 0; i < 2000000; i++) {
        const double scale = i % 4 == 0 ? 0.25 : i % 4 == 1 ? 1.0 : i % 4 == 2 ? 40.0 : 1e6;
        const double th = ro__rng_uniform(&rng, -scale, scale);
        double sn, cs;
        sincos(th, &sn, &cs);
        const double s2 = sin_fn(th), c2 = cos_fn(th);
        assert_memory_equal(&sn, &s2, sizeof sn);
        assert_memory_equal(&cs, &c2, sizeof cs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_step_from_rest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_euler_uses_old_speed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_tilted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_termination_thresholds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_action, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spaces, setup, teardown),
        cmocka_unit_test(test_reset_ranges),
        cmocka_unit_test(test_rejects_args),
        cmocka_unit_test(test_without_velocity),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_sincos_is_sin_and_cos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
