/*
 * pendulum: one step against values worked out by hand from the
 * Pendulum-v1 equations, angle normalisation, torque and speed clipping,
 * resets, spaces, the g arg and determinism.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "envs/registry.h"
#include "envs/pendulum.h"
#include "runtime/error.h"

static const ro_env_vtable_t *const vt = &ro__env_pendulum;

static int setup(void **state)
{
    char err[256] = "";
    void *env = NULL;
    if (vt->create(&env, NULL, 0, 42, err, sizeof err) != 0)
        return -1;
    *state = env;
    return 0;
}

static int teardown(void **state)
{
    vt->destroy(*state);
    return 0;
}

static void assert_close(double got, double want)
{
    if (fabs(got - want) > 1e-12 * (1.0 + fabs(want)))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* step_from sets [th, thdot], applies torque u and returns the reward; the
 * next state goes to next[], the observation to obs[]. */
static float step_from(void *env, double th, double thdot, float u, float obs[3], double next[2])
{
    const double s[2] = {th, thdot};
    ro__pendulum_set_state(env, s);
    ro_step_t st = {0};
    assert_int_equal(vt->step(env, (ro_action_t){.box = &u}, obs, &st), 0);
    assert_int_equal(st.terminated, 0);
    assert_int_equal(st.truncated, 0);
    ro__pendulum_get_state(env, next);
    /* The observation is [cos, sin, thdot] of the new state in float32. */
    assert_true(obs[0] == (float)cos(next[0]));
    assert_true(obs[1] == (float)sin(next[0]));
    assert_true(obs[2] == (float)next[1]);
    return st.reward;
}

/* At the bottom, at rest, no torque: nothing moves and nothing costs. */
static void test_step_at_rest(void **state)
{
    float obs[3];
    double s[2];
    float r = step_from(*state, 0.0, 0.0, 0.0f, obs, s);
    assert_true(r == 0.0f);
    assert_true(s[0] == 0.0 && s[1] == 0.0);
    assert_true(obs[0] == 1.0f && obs[1] == 0.0f && obs[2] == 0.0f);
}

/*
 * Horizontal (th = pi/2, sin = 1), at rest, u = 1, g = 10, m = l = 1:
 *   cost     = (pi/2)^2 + 0.1 * 0 + 0.001 * 1 = 2.4674011002723395 + 0.001
 *   newthdot = 0 + (3 * 10 / 2 * 1 + 3 / 1 * 1) * 0.05 = 18 * 0.05 = 0.9
 *   newth    = pi/2 + 0.9 * 0.05 = pi/2 + 0.045
 *   obs      = [cos(pi/2 + 0.045), sin(pi/2 + 0.045), 0.9]
 *            = [-sin(0.045), cos(0.045), 0.9] = [-0.044984814, 0.99898767, 0.9]
 */
static void test_step_horizontal(void **state)
{
    float obs[3];
    double s[2];
    float r = step_from(*state, M_PI / 2, 0.0, 1.0f, obs, s);
    assert_close(s[1], 0.9);
    assert_close(s[0], M_PI / 2 + 0.045);
    assert_true(r == (float)-(M_PI * M_PI / 4 + 0.001));
    assert_true(r == -2.4684011f);
    assert_true(fabsf(obs[0] - (float)-sin(0.045)) <= 1e-7f);
    assert_true(fabsf(obs[1] - (float)cos(0.045)) <= 1e-7f);
    assert_true(obs[2] == 0.9f);
}

/* Torque beyond +-2 acts as +-2, in the dynamics and in the cost: from rest
 * at the bottom, newthdot = 3 * 2 * 0.05 = 0.3, cost = 0.001 * 4. */
static void test_torque_clipped(void **state)
{
    float obs[3];
    double s[2];
    float r = step_from(*state, 0.0, 0.0, 5.0f, obs, s);
    assert_close(s[1], 0.3);
    assert_close(s[0], 0.015);
    assert_true(r == -0.004f);

    r = step_from(*state, 0.0, 0.0, -100.0f, obs, s);
    assert_close(s[1], -0.3);
    assert_close(s[0], -0.015);
    assert_true(r == -0.004f);
}

/* Speed is clipped to +-8 before the angle moves: from pi/2 at 7.9 with
 * u = 2, 7.9 + (15 + 6) * 0.05 = 8.95 -> 8, newth = pi/2 + 0.4; the cost
 * uses the old speed: (pi/2)^2 + 0.1 * 7.9^2 + 0.004 = 8.7124011002723396. */
static void test_speed_clipped(void **state)
{
    float obs[3];
    double s[2];
    float r = step_from(*state, M_PI / 2, 7.9, 2.0f, obs, s);
    assert_true(s[1] == 8.0);
    assert_close(s[0], M_PI / 2 + 0.4);
    assert_true(r == (float)-(M_PI * M_PI / 4 + 0.1 * 7.9 * 7.9 + 0.004));
    assert_true(obs[2] == 8.0f);

    r = step_from(*state, -M_PI / 2, -7.9, -2.0f, obs, s);
    assert_true(s[1] == -8.0);
    assert_close(s[0], -M_PI / 2 - 0.4);
    assert_true(obs[2] == -8.0f);
}

/* angle_normalize(x) = ((x + pi) mod 2 pi) - pi, with Python's modulo; the
 * expected values are what Python prints for the same expression. */
static void test_angle_normalize(void **state)
{
    (void)state;
    assert_true(ro__pendulum_angle_normalize(0.0) == 0.0);
    assert_true(ro__pendulum_angle_normalize(M_PI) == -M_PI);
    assert_true(ro__pendulum_angle_normalize(-M_PI) == -M_PI);
    assert_close(ro__pendulum_angle_normalize(3 * M_PI / 2), -M_PI / 2);
    assert_close(ro__pendulum_angle_normalize(-3 * M_PI / 2), M_PI / 2);
    assert_close(ro__pendulum_angle_normalize(2 * M_PI + 0.1), 0.099999999999999645);
    assert_close(ro__pendulum_angle_normalize(-7 * M_PI + 0.1), -3.0415926535897917);
    assert_close(ro__pendulum_angle_normalize(100.0), -0.53096491487337616);
    assert_close(ro__pendulum_angle_normalize(-100.0), 0.53096491487338326);
    for (double x = -50.0; x < 50.0; x += 0.37) {
        double y = ro__pendulum_angle_normalize(x);
        assert_true(y >= -M_PI && y < M_PI);
    }

    /* The cost sees the normalised angle: 3 pi/2 costs as much as -pi/2. */
    float obs[3];
    double s[2];
    float r = step_from(*state, 3 * M_PI / 2, 0.0, 0.0f, obs, s);
    assert_true(fabsf(r - (float)-(M_PI * M_PI / 4)) <= 1e-6f);
}

static void test_bad_action(void **state)
{
    void *env = *state;
    const double s0[2] = {0.5, 0.25};
    float obs[3];
    double s[2];
    ro_step_t st;
    float u = NAN;
    ro__pendulum_set_state(env, s0);
    assert_int_equal(vt->step(env, (ro_action_t){.box = &u}, obs, &st), RO_EINVAL);
    u = INFINITY;
    assert_int_equal(vt->step(env, (ro_action_t){.box = &u}, obs, &st), RO_EINVAL);
    u = -INFINITY;
    assert_int_equal(vt->step(env, (ro_action_t){.box = &u}, obs, &st), RO_EINVAL);
    ro__pendulum_get_state(env, s);
    assert_memory_equal(s, s0, sizeof s);
}

/* g = 9.81 from pi/2 at rest without torque: newthdot = 3 * 9.81 / 2 * 0.05
 * = 0.73575. */
static void test_g_arg(void **state)
{
    (void)state;
    void *env;
    char err[256] = "";
    const ro_env_arg_t args[] = {{"g", "9.81"}};
    assert_int_equal(vt->create(&env, args, 1, 1, err, sizeof err), 0);
    float obs[3];
    double s[2];
    step_from(env, M_PI / 2, 0.0, 0.0f, obs, s);
    assert_close(s[1], 0.73575);
    vt->destroy(env);

    const char *bad[] = {"abc", "", "9.81x", " 9.81", "nan", "inf", "-1", "1e400", "1001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const ro_env_arg_t a[] = {{"g", bad[i]}};
        err[0] = '\0';
        env = NULL;
        assert_int_equal(vt->create(&env, a, 1, 1, err, sizeof err), RO_EINVAL);
        assert_null(env);
        assert_non_null(strstr(err, "'g'"));
    }
    const ro_env_arg_t unknown[] = {{"mass", "2"}};
    assert_int_equal(vt->create(&env, unknown, 1, 1, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "'mass'"));
}

static void test_reset_ranges(void **state)
{
    (void)state;
    const int n = 2000;
    double sum_th = 0, sum_thdot = 0;
    for (int seed = 0; seed < n; seed++) {
        void *env;
        char err[128];
        assert_int_equal(vt->create(&env, NULL, 0, (uint64_t)seed, err, sizeof err), 0);
        float obs[3];
        double s[2];
        vt->reset(env, obs);
        ro__pendulum_get_state(env, s);
        assert_true(s[0] >= -M_PI && s[0] < M_PI);
        assert_true(s[1] >= -1.0 && s[1] < 1.0);
        assert_true(obs[0] == (float)cos(s[0]));
        assert_true(obs[1] == (float)sin(s[0]));
        assert_true(obs[2] == (float)s[1]);
        sum_th += s[0];
        sum_thdot += s[1];
        vt->destroy(env);
    }
    /* Standard deviations of the means: 2 pi / sqrt(12 n) = 0.041 and
     * 2 / sqrt(12 n) = 0.013; the bounds are six of them. */
    assert_true(fabs(sum_th / n) < 0.25);
    assert_true(fabs(sum_thdot / n) < 0.08);
}

static void test_spaces(void **state)
{
    ro_space_t obs, act;
    vt->spaces(*state, &obs, &act);
    assert_int_equal(obs.kind, RO_SPACE_BOX);
    assert_int_equal(obs.ndim, 1);
    assert_int_equal(obs.shape[0], 3);
    const float high[3] = {1.0f, 1.0f, 8.0f};
    for (int i = 0; i < 3; i++) {
        assert_true(obs.high[i] == high[i]);
        assert_true(obs.low[i] == -high[i]);
    }
    assert_int_equal(act.kind, RO_SPACE_BOX);
    assert_int_equal(act.ndim, 1);
    assert_int_equal(act.shape[0], 1);
    assert_true(act.low[0] == -2.0f && act.high[0] == 2.0f);

    assert_int_equal(vt->abi_version, RO_ENV_ABI_VERSION);
    assert_string_equal(vt->name, "pendulum");
    assert_int_equal(vt->max_episode_steps, 200);
    assert_string_equal(vt->arg_keys[0], "g");
    assert_null(vt->arg_keys[2]);
}

/* run records a rollout of n steps with a torque pattern; it never
 * terminates, so there is no reset inside. */
static void run(uint64_t seed, int n, float *obs, float *rew)
{
    void *env;
    char err[128];
    assert_int_equal(vt->create(&env, NULL, 0, seed, err, sizeof err), 0);
    vt->reset(env, obs);
    for (int t = 0; t < n; t++) {
        ro_step_t st;
        float u = (float)sin(t * 0.7) * 3.0f;
        assert_int_equal(vt->step(env, (ro_action_t){.box = &u}, obs + 3 * (t + 1), &st), 0);
        assert_int_equal(st.terminated, 0);
        rew[t] = st.reward;
        assert_true(rew[t] <= 0.0f);
        for (int i = 0; i < 3; i++)
            assert_true(fabsf(obs[3 * (t + 1) + i]) <= (i < 2 ? 1.0f : 8.0f));
    }
    vt->destroy(env);
}

static void test_determinism(void **state)
{
    (void)state;
    enum { N = 500 };
    static float oa[3 * (N + 1)], ob[3 * (N + 1)], oc[3 * (N + 1)];
    static float ra[N], rb[N], rc[N];
    run(9, N, oa, ra);
    run(9, N, ob, rb);
    run(10, N, oc, rc);
    assert_memory_equal(oa, ob, sizeof oa);
    assert_memory_equal(ra, rb, sizeof ra);
    assert_memory_not_equal(oa, oc, 3 * sizeof(float));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_step_at_rest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_horizontal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torque_clipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_speed_clipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_angle_normalize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_action, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spaces, setup, teardown),
        cmocka_unit_test(test_g_arg),
        cmocka_unit_test(test_reset_ranges),
        cmocka_unit_test(test_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
