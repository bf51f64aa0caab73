/*
 * MuJoCo envs when the simulation goes wrong: a MuJoCo error inside a step
 * (mju_error, here a stack overflow) and a state MuJoCo throws away (a bad
 * qvel: it warns and resets the data) both fail that step, count, and leave
 * the instance usable after a reset; the process never exits; NaN actions
 * are refused without touching the state; the mjData is made on the thread
 * that resets the instance first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "envs/registry.h"
#include "envs/mujoco/mj_envs.h"
#include "envs/mujoco/mj_registry.h"
#include "envs/mujoco/mj_runtime.h"
#include "runtime/error.h"

static const ro_env_vtable_t *const vt = &ro__env_hopper;

static int setup(void **state)
{
    char err[256] = "";
    void *env = NULL;
    if (vt->create(&env, NULL, 0, 11, err, sizeof err) != 0)
        return -1;
    float obs[16];
    vt->reset(env, obs);
    *state = env;
    return 0;
}

static int teardown(void **state)
{
    vt->destroy(*state);
    return 0;
}

static int step(void *env, float *obs, ro_step_t *st)
{
    static const float a[3] = {0.1f, -0.2f, 0.3f};
    return vt->step(env, (ro_action_t){.box = a}, obs, st);
}

static void raise_error(void *arg)
{
    *(int *)arg = 1;
    mju_error("induced by the test");
    *(int *)arg = 2; /* never reached */
}

static void no_error(void *arg)
{
    *(int *)arg = 3;
}

static void nested(void *arg)
{
    int inner = 0;
    int rc = ro__mj_guard(raise_error, &inner);
    *(int *)arg = rc == RO_EIO && inner == 1 ? 4 : -1;
}

static void test_guard(void **state)
{
    (void)state;
    int where = 0;
    assert_int_equal(ro__mj_guard(raise_error, &where), RO_EIO);
    assert_int_equal(where, 1);
    assert_non_null(strstr(ro__mj_last_error(), "induced by the test"));
    assert_int_equal(ro__mj_guard(no_error, &where), 0);
    assert_int_equal(where, 3);
    /* An error in an inner guard returns to the inner one only. */
    assert_int_equal(ro__mj_guard(nested, &where), 0);
    assert_int_equal(where, 4);
}

/* A full mjData stack makes MuJoCo's next allocation call mju_error
 * ("stack overflow") in the middle of mj_step. */
static void test_error_inside_step(void **state)
{
    void *env = *state;
    float obs[16];
    ro_step_t st;
    assert_int_equal(step(env, obs, &st), 0);
    mjData *d = ro__mj_env_data(env);
    d->pstack = (size_t)d->narena - d->parena; /* MuJoCo >= 3: it grows down from the end */
    assert_int_equal(step(env, obs, &st), RO_EIO);
    assert_int_equal(ro__mj_env_errors(env), 1);
    assert_non_null(strstr(ro__mj_last_error(), "tack"));
    /* Until it is reset the instance refuses to step. */
    assert_int_equal(step(env, obs, &st), RO_EIO);
    vt->reset(env, obs);
    assert_int_equal(d->pstack, 0);
    for (int t = 0; t < 20; t++) {
        assert_int_equal(step(env, obs, &st), 0);
        if (st.terminated)
            vt->reset(env, obs);
    }
    assert_int_equal(ro__mj_env_errors(env), 1);
}

/* A velocity beyond MuJoCo's limit: mj_step warns (BADQVEL), resets the
 * data and carries on; the env reports a failed step instead of a state
 * the action did not lead to, and counts the warning. */
static void test_bad_state_warning(void **state)
{
    void *env = *state;
    float obs[16];
    ro_step_t st;
    uint64_t before = ro__mj_warnings();
    mjData *d = ro__mj_env_data(env);
    d->qvel[3] = 1e300;
    assert_int_equal(step(env, obs, &st), RO_ERANGE);
    assert_true(ro__mj_env_warnings(env) >= 1);
    assert_true(ro__mj_warnings() > before);
    assert_int_equal(step(env, obs, &st), RO_EIO);
    vt->reset(env, obs);
    assert_int_equal(step(env, obs, &st), 0);

    /* NaN too. */
    d->qpos[2] = NAN;
    assert_int_equal(step(env, obs, &st), RO_ERANGE);
    vt->reset(env, obs);
    assert_int_equal(step(env, obs, &st), 0);
}

/* NaN or infinite actions: -EINVAL, and the state is as it was. */
static void test_bad_action(void **state)
{
    void *env = *state;
    float obs[16];
    ro_step_t st;
    const mjData *d = ro__mj_env_data(env);
    double q[6], t0 = d->time;
    memcpy(q, d->qpos, sizeof q);
    const float nan_a[3] = {0.0f, NAN, 0.0f}, inf_a[3] = {INFINITY, 0.0f, 0.0f};
    assert_int_equal(vt->step(env, (ro_action_t){.box = nan_a}, obs, &st), RO_EINVAL);
    assert_int_equal(vt->step(env, (ro_action_t){.box = inf_a}, obs, &st), RO_EINVAL);
    assert_memory_equal(q, d->qpos, sizeof q);
    assert_true(d->time == t0);
    /* Out-of-box actions are the policy's business: MuJoCo clamps ctrl, the
     * control cost sees the action as given (Gymnasium does the same). */
    const float big[3] = {10.0f, 0.0f, 0.0f};
    double x0 = d->qpos[0];
    assert_int_equal(vt->step(env, (ro_action_t){.box = big}, obs, &st), 0);
    double want = ((d->qpos[0] - x0) / 0.008 + (st.terminated ? 0.0 : 1.0)) - 1e-3 * 100.0;
    assert_true(st.reward == (float)want);
}

static void *reset_on_thread(void *env)
{
    float obs[16];
    vt->reset(env, obs);
    return NULL;
}

/* create() makes no mjData; the first reset does, on its own thread. */
static void test_data_made_at_first_reset(void **state)
{
    (void)state;
    char err[256] = "";
    void *env = NULL;
    assert_int_equal(vt->create(&env, NULL, 0, 5, err, sizeof err), 0);
    assert_null(ro__mj_env_data(env));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reset_on_thread, env), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_non_null(ro__mj_env_data(env));
    float obs[16];
    ro_step_t st;
    assert_int_equal(step(env, obs, &st), 0);
    vt->destroy(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard),
        cmocka_unit_test_setup_teardown(test_error_inside_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_state_warning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_action, setup, teardown),
        cmocka_unit_test(test_data_made_at_first_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
