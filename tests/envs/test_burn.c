/*
 * burn: spaces and args, observation and reward ranges, determinism (also
 * across cost_us, which must change the work and not the numbers), and how
 * the iteration count follows cost_us. Timings belong to bench/, not here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/registry.h"
#include "envs/burn.h"
#include "runtime/error.h"

static const ro_env_vtable_t *const vt = &ro__env_burn;

/* make creates a burn instance with the given args, or fails the test. */
static void *make(uint64_t seed, const ro_env_arg_t *args, size_t n)
{
    void *env = NULL;
    char err[256] = "";
    int rc = vt->create(&env, args, n, seed, err, sizeof err);
    if (rc != 0)
        fail_msg("create: %d %s", rc, err);
    return env;
}

static void test_defaults(void **state)
{
    (void)state;
    void *env = make(1, NULL, 0);
    ro_space_t obs, act;
    vt->spaces(env, &obs, &act);
    assert_int_equal(obs.kind, RO_SPACE_BOX);
    assert_int_equal(obs.ndim, 1);
    assert_int_equal(obs.shape[0], 16);
    for (int i = 0; i < 16; i++)
        assert_true(obs.low[i] == -1.0f && obs.high[i] == 1.0f);
    assert_int_equal(act.kind, RO_SPACE_DISCRETE);
    assert_int_equal(act.n, 4);
    /* cost_us defaults to 50. */
    assert_true(llabs((long long)ro__burn_iters(env) - llround(50.0 * ro__burn_iters_per_us())) <=
                1);
    vt->destroy(env);

    assert_int_equal(vt->abi_version, RO_ENV_ABI_VERSION);
    assert_string_equal(vt->name, "burn");
    assert_int_equal(vt->max_episode_steps, 1000);
    assert_string_equal(vt->arg_keys[0], "cost_us");
    assert_string_equal(vt->arg_keys[2], "obs_dim");
    assert_string_equal(vt->arg_keys[4], "act_n");
    assert_null(vt->arg_keys[6]);
}

static void test_args_shape_spaces(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"obs_dim", "3"}, {"act_n", "7"}, {"cost_us", "0"}};
    void *env = make(1, args, 3);
    ro_space_t obs, act;
    vt->spaces(env, &obs, &act);
    assert_int_equal(obs.shape[0], 3);
    assert_int_equal(act.n, 7);
    assert_int_equal(ro__burn_iters(env), 0);
    vt->destroy(env);

    const ro_env_arg_t big[] = {{"obs_dim", "65536"}, {"act_n", "65536"}, {"cost_us", "0"}};
    env = make(1, big, 3);
    vt->spaces(env, &obs, &act);
    assert_int_equal(obs.shape[0], 65536);
    assert_int_equal(act.n, 65536);
    vt->destroy(env);
}

static void test_bad_args(void **state)
{
    (void)state;
    const ro_env_arg_t bad[] = {
        {"cost_us", "-1"},  {"cost_us", "abc"},
        {"cost_us", "nan"}, {"cost_us", "50us"},
        {"cost_us", ""},    {"cost_us", "1e7"},
        {"obs_dim", "0"},   {"obs_dim", "65537"},
        {"obs_dim", "-3"},  {"obs_dim", "1.5"},
        {"act_n", "0"},     {"act_n", "4 "},
        {"act_n", "0x10"},  {"act_n", "99999999999999999999"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *env = NULL;
        char err[256] = "";
        char key[64];
        snprintf(key, sizeof key, "'%s'", bad[i].key);
        assert_int_equal(vt->create(&env, &bad[i], 1, 1, err, sizeof err), RO_EINVAL);
        assert_null(env);
        if (strstr(err, key) == NULL)
            fail_msg("%s=%s: message '%s' does not name the key", bad[i].key, bad[i].value, err);
    }
    void *env = NULL;
    char err[256] = "";
    const ro_env_arg_t unknown[] = {{"episode_len", "10"}};
    assert_int_equal(vt->create(&env, unknown, 1, 1, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "'episode_len'"));
}

/* The iteration count is cost_us times a per-machine rate. */
static void test_iters_scale_with_cost(void **state)
{
    (void)state;
    double rate = ro__burn_iters_per_us();
    assert_true(rate > 0.0 && isfinite(rate));
    assert_true(ro__burn_iters_per_us() == rate); /* measured once */

    const ro_env_arg_t c100[] = {{"cost_us", "100"}};
    const ro_env_arg_t c200[] = {{"cost_us", "200"}};
    const ro_env_arg_t c0[] = {{"cost_us", "0"}};
    void *a = make(1, c100, 1), *b = make(1, c200, 1), *z = make(1, c0, 1);
    uint64_t ia = ro__burn_iters(a), ib = ro__burn_iters(b);
    assert_true(ia > 0);
    assert_true(llabs((long long)ia - llround(100.0 * rate)) <= 1);
    assert_true(llabs((long long)ib - 2 * (long long)ia) <= 1);
    assert_int_equal(ro__burn_iters(z), 0);
    vt->destroy(a);
    vt->destroy(b);
    vt->destroy(z);
}

/* run records obs (n+1 rows of dim) and rewards of n steps, resetting every
 * 100 steps as the runtime would at a time limit. */
static void run(uint64_t seed, const char *cost, uint32_t dim, int n, float *obs, float *rew)
{
    char dims[16];
    snprintf(dims, sizeof dims, "%u", dim);
    const ro_env_arg_t args[] = {{"cost_us", cost}, {"obs_dim", dims}, {"act_n", "5"}};
    void *env = make(seed, args, 3);
    vt->reset(env, obs);
    for (int t = 0; t < n; t++) {
        ro_step_t st;
        float *o = obs + (size_t)dim * (t + 1);
        int32_t a = (t * 3 + t / 7) % 5;
        assert_int_equal(vt->step(env, (ro_action_t){.discrete = a}, o, &st), 0);
        assert_int_equal(st.terminated, 0);
        assert_int_equal(st.truncated, 0);
        rew[t] = st.reward;
        if (t % 100 == 99)
            vt->reset(env, o);
    }
    vt->destroy(env);
}

static void test_ranges(void **state)
{
    (void)state;
    enum { N = 400, D = 33 };
    static float obs[D * (N + 1)], rew[N];
    run(5, "0", D, N, obs, rew);
    double sum = 0;
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++) {
        assert_true(obs[i] >= -1.0f && obs[i] <= 1.0f);
        sum += obs[i];
    }
    for (int t = 0; t < N; t++)
        assert_true(rew[t] >= 0.0f && rew[t] <= 1.0f);
    /* Not constant: the observation follows the state. */
    assert_memory_not_equal(obs, obs + D, D * sizeof(float));
    assert_true(fabs(sum / (D * (N + 1))) < 0.2);
}

static void test_deterministic(void **state)
{
    (void)state;
    enum { N = 300, D = 8 };
    static float oa[D * (N + 1)], ob[D * (N + 1)], oc[D * (N + 1)], od[D * (N + 1)];
    static float ra[N], rb[N], rc[N], rd[N];
    run(77, "0", D, N, oa, ra);
    run(77, "0", D, N, ob, rb);
    assert_memory_equal(oa, ob, sizeof oa);
    assert_memory_equal(ra, rb, sizeof ra);

    /* The work must not change the numbers: its iteration count depends on
     * the machine, and a trajectory must replay anywhere. */
    run(77, "3", D, N, oc, rc);
    assert_memory_equal(oa, oc, sizeof oa);
    assert_memory_equal(ra, rc, sizeof ra);

    run(78, "0", D, N, od, rd);
    assert_memory_not_equal(oa, od, D * sizeof(float));
}

static void test_invalid_action(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"act_n", "3"}, {"cost_us", "0"}};
    void *env = make(1, args, 2);
    float obs[16];
    ro_step_t st;
    vt->reset(env, obs);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 3}, obs, &st), RO_EINVAL);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = -1}, obs, &st), RO_EINVAL);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 2}, obs, &st), 0);
    vt->destroy(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_args_shape_spaces),
        cmocka_unit_test(test_bad_args),       cmocka_unit_test(test_iters_scale_with_cost),
        cmocka_unit_test(test_ranges),         cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_invalid_action),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
