/*
 * env_registry: built-ins by name, plugins by path (the example plugin and
 * two broken ones), and the checking of env args.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_args.h"
#include "envs/env_kind.h"
#include "envs/mujoco/mj_registry.h" /* issue 17: RO_MJ_BUILTIN_NAMES */
#include "envs/registry.h"
#include "runtime/error.h"
#include "spaces/layout.h"

static void assert_contains(const char *msg, const char *part)
{
    if (strstr(msg, part) == NULL)
        fail_msg("message '%s' lacks '%s'", msg, part);
}

static void test_builtins(void **state)
{
    (void)state;
    const struct {
        const char *name;
        const ro_env_vtable_t *vt;
    } cases[] = {
        {"cartpole", &ro__env_cartpole}, {"pendulum", &ro__env_pendulum}, {"burn", &ro__env_burn}};
    for (size_t i = 0; i < 3; i++) {
        ro_env_kind_t k;
        char err[256] = "";
        assert_int_equal(ro__env_open(&k, cases[i].name, err, sizeof err), 0);
        assert_ptr_equal(k.vt, cases[i].vt);
        assert_null(k.dl_handle);
        ro__env_close(&k);
        assert_null(k.vt);
    }
}

static void test_unknown_name(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[256] = "";
    assert_int_equal(ro__env_open(&k, "foo", err, sizeof err), RO_ENOENT);
    assert_string_equal(err,
                        "unknown env 'foo' (built-ins: cartpole, pendulum, burn" RO_MJ_BUILTIN_NAMES
                        "; Python envs: gym:ID, py:MODULE:CALLABLE; or a path to a plugin .so)");
    assert_null(k.vt);
    assert_int_equal(ro__env_open(&k, "CartPole", err, sizeof err), RO_ENOENT);
    assert_int_equal(ro__env_open(&k, "", err, sizeof err), RO_ENOENT);
    assert_contains(err, "unknown env ''");

    /* A short buffer gets a cut, terminated message. */
    char small[12];
    assert_int_equal(ro__env_open(&k, "foo", small, sizeof small), RO_ENOENT);
    assert_string_equal(small, "unknown env");
}

/* The example plugin is MountainCar-v0: from rest at p in [-0.6, -0.4),
 * pushing right gives v = 0.001 - 0.0025 cos(3 p) and p' = p + v. */
static void test_plugin_loads_and_steps(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    int rc = ro__env_open(&k, RO_PLUGIN_PATH, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    assert_non_null(k.dl_handle);
    const ro_env_vtable_t *vt = k.vt;
    assert_string_equal(vt->name, "mountaincar");
    assert_int_equal(vt->max_episode_steps, 200);

    void *env;
    assert_int_equal(vt->create(&env, NULL, 0, 7, err, sizeof err), 0);
    ro_space_t obs_space, act_space;
    vt->spaces(env, &obs_space, &act_space);
    assert_int_equal(obs_space.kind, RO_SPACE_BOX);
    assert_int_equal(ro_space_size(&obs_space), 2);
    assert_int_equal(act_space.kind, RO_SPACE_DISCRETE);
    assert_int_equal(act_space.n, 3);

    float obs[2];
    vt->reset(env, obs);
    assert_true(obs[0] >= -0.6f && obs[0] <= -0.4f);
    assert_true(obs[1] == 0.0f);
    double p = obs[0];
    ro_step_t st;
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 2}, obs, &st), 0);
    double v = 0.001 - 0.0025 * cos(3 * p);
    /* p came back in float32: allow for that rounding. */
    assert_true(fabs(obs[1] - v) < 1e-8);
    assert_true(fabs(obs[0] - (p + v)) < 1e-7);
    assert_true(st.reward == -1.0f);
    assert_int_equal(st.terminated, 0);
    assert_int_equal(vt->step(env, (ro_action_t){.discrete = 3}, obs, &st), -EINVAL);
    vt->destroy(env);

    /* The runtime's arg check works on a plugin's keys too. */
    const ro_env_arg_t args[] = {{"goal_velocity", "0.01"}, {"speed", "1"}};
    ro_env_arg_t out[2];
    size_t nout;
    uint32_t steps;
    assert_int_equal(ro__env_check_args(vt, args, 2, out, &nout, &steps, err, sizeof err),
                     RO_EINVAL);
    assert_string_equal(err, "env 'mountaincar' has no arg 'speed' (accepted: max_episode_steps, "
                             "goal_velocity)");
    ro__env_close(&k);
    assert_null(k.dl_handle);
}

static void test_plugin_missing_file(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    const char *path = "/nonexistent/dir/libnoenv.so";
    assert_int_equal(ro__env_open(&k, path, err, sizeof err), RO_ENOENT);
    assert_contains(err, "cannot load env plugin '/nonexistent/dir/libnoenv.so'");
    assert_contains(err, "No such file"); /* dlerror()'s reason */
    assert_null(k.vt);

    /* A name ending in .so is a path too, not a built-in. */
    assert_int_equal(ro__env_open(&k, "cartpole.so", err, sizeof err), RO_ENOENT);
    assert_contains(err, "cannot load env plugin 'cartpole.so'");
}

static void test_plugin_without_symbol(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    assert_int_equal(ro__env_open(&k, RO_BAD_PLUGIN_PATH, err, sizeof err), RO_ENOENT);
    assert_contains(err, "env plugin '" RO_BAD_PLUGIN_PATH "' does not export ro_env_plugin()");
    assert_contains(err, "undefined symbol"); /* dlerror()'s reason */
    assert_null(k.vt);
    assert_null(k.dl_handle);
}

static void test_plugin_wrong_abi(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    char want[64];
    snprintf(want, sizeof want, "env ABI version %u, this runtime needs version %u",
             RO_ENV_ABI_VERSION + 1, RO_ENV_ABI_VERSION);
    assert_int_equal(ro__env_open(&k, RO_BAD_ABI_PLUGIN_PATH, err, sizeof err), RO_ENOTSUP);
    assert_contains(err, RO_BAD_ABI_PLUGIN_PATH);
    assert_contains(err, want);
    assert_null(k.vt);
}

static void test_check_args_consumes_max_steps(void **state)
{
    (void)state;
    const ro_env_arg_t args[] = {{"cost_us", "3"}, {"max_episode_steps", "77"}, {"obs_dim", "4"}};
    ro_env_arg_t out[3];
    size_t nout = 99;
    uint32_t steps = 0;
    char err[256] = "";
    assert_int_equal(
        ro__env_check_args(&ro__env_burn, args, 3, out, &nout, &steps, err, sizeof err), 0);
    assert_int_equal(steps, 77);
    assert_int_equal(nout, 2);
    assert_string_equal(out[0].key, "cost_us");
    assert_string_equal(out[0].value, "3");
    assert_string_equal(out[1].key, "obs_dim");

    /* Without it, the env's own limit; 0 turns the limit off. */
    assert_int_equal(
        ro__env_check_args(&ro__env_cartpole, NULL, 0, out, &nout, &steps, err, sizeof err), 0);
    assert_int_equal(steps, 500);
    assert_int_equal(nout, 0);
    const ro_env_arg_t zero[] = {{"max_episode_steps", "0"}};
    assert_int_equal(
        ro__env_check_args(&ro__env_pendulum, zero, 1, out, &nout, &steps, err, sizeof err), 0);
    assert_int_equal(steps, 0);
    assert_int_equal(nout, 0);
    const ro_env_arg_t most[] = {{"max_episode_steps", "4294967295"}};
    assert_int_equal(
        ro__env_check_args(&ro__env_pendulum, most, 1, out, &nout, &steps, err, sizeof err), 0);
    assert_int_equal(steps, UINT32_MAX);
}

static void test_check_args_errors(void **state)
{
    (void)state;
    ro_env_arg_t out[4];
    size_t nout;
    uint32_t steps = 12345;
    char err[256] = "";

    const ro_env_arg_t unknown[] = {{"foo", "1"}};
    assert_int_equal(
        ro__env_check_args(&ro__env_cartpole, unknown, 1, out, &nout, &steps, err, sizeof err),
        RO_EINVAL);
    assert_string_equal(
        err, "env 'cartpole' has no arg 'foo' (accepted: max_episode_steps, observe_velocity)");
    assert_int_equal(
        ro__env_check_args(&ro__env_burn, unknown, 1, out, &nout, &steps, err, sizeof err),
        RO_EINVAL);
    assert_string_equal(
        err, "env 'burn' has no arg 'foo' (accepted: max_episode_steps, cost_us, obs_dim, act_n)");

    const ro_env_arg_t dup[] = {{"g", "9"}, {"g", "10"}};
    assert_int_equal(
        ro__env_check_args(&ro__env_pendulum, dup, 2, out, &nout, &steps, err, sizeof err),
        RO_EINVAL);
    assert_string_equal(err, "env 'pendulum' got arg 'g' twice ('9' and '10')");
    const ro_env_arg_t dup_steps[] = {{"max_episode_steps", "9"}, {"max_episode_steps", "9"}};
    assert_int_equal(
        ro__env_check_args(&ro__env_pendulum, dup_steps, 2, out, &nout, &steps, err, sizeof err),
        RO_EINVAL);
    assert_contains(err, "twice");

    const char *bad[] = {"",    "abc", "-1",   "+5",         "1e3",
                         "12 ", " 12", "0x10", "4294967296", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const ro_env_arg_t a[] = {{"max_episode_steps", bad[i]}};
        err[0] = '\0';
        assert_int_equal(
            ro__env_check_args(&ro__env_cartpole, a, 1, out, &nout, &steps, err, sizeof err),
            RO_EINVAL);
        assert_contains(err, "'max_episode_steps'");
    }
    assert_int_equal(steps, 12345); /* untouched on failure */
}

static void test_arg_parsers(void **state)
{
    (void)state;
    char err[256];
    double d;
    uint32_t u;
    assert_int_equal(ro__env_arg_double("k", "1.5", 0, 2, &d, err, sizeof err), 0);
    assert_true(d == 1.5);
    assert_int_equal(ro__env_arg_double("k", "-2e-3", -1, 1, &d, err, sizeof err), 0);
    assert_true(d == -2e-3);
    assert_int_equal(ro__env_arg_double("k", "2", 0, 2, &d, err, sizeof err), 0);
    const char *bad_d[] = {"", " 1", "1 ", "1.5x", "nan", "inf", "-inf", "1e400", "2.0001"};
    for (size_t i = 0; i < sizeof bad_d / sizeof bad_d[0]; i++) {
        err[0] = '\0';
        d = 42;
        assert_int_equal(ro__env_arg_double("k", bad_d[i], 0, 2, &d, err, sizeof err), RO_EINVAL);
        assert_true(d == 42);
        char want[32];
        snprintf(want, sizeof want, "'k': '%s'", bad_d[i]);
        assert_contains(err, want);
    }

    assert_int_equal(ro__env_arg_u32("k", "42", 1, 100, &u, err, sizeof err), 0);
    assert_int_equal(u, 42);
    assert_int_equal(ro__env_arg_u32("k", "007", 1, 100, &u, err, sizeof err), 0);
    assert_int_equal(u, 7);
    const char *bad_u[] = {"", "0", "101", "-1", "+1", "1.0", "4x", " 4", "0x4"};
    for (size_t i = 0; i < sizeof bad_u / sizeof bad_u[0]; i++) {
        err[0] = '\0';
        u = 42;
        assert_int_equal(ro__env_arg_u32("k", bad_u[i], 1, 100, &u, err, sizeof err), RO_EINVAL);
        assert_int_equal(u, 42);
        char want[32];
        snprintf(want, sizeof want, "'k': '%s'", bad_u[i]);
        assert_contains(err, want);
    }
}

/* A name a file gave: never loaded, whatever it looks like. */
static void test_open_builtin_never_loads(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[256] = "";
    assert_int_equal(ro__env_open_builtin(&k, "pendulum", err, sizeof err), 0);
    assert_ptr_equal(k.vt, &ro__env_pendulum);
    ro__env_close(&k);
    const char *paths[] = {RO_PLUGIN_PATH, "./x.so", "sub/run.traj.1", "", "cartpole\n"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        assert_int_equal(ro__env_open_builtin(&k, paths[i], err, sizeof err), RO_ENOENT);
        assert_null(k.vt);
        assert_null(k.dl_handle);
        assert_contains(err, "unknown env '");
        assert_null(strchr(err, '\n')); /* escaped */
    }
}

/* Every way a space can be wrong, each named. */
static void test_check_spaces(void **state)
{
    (void)state;
    float lo[3] = {-1, -1, -INFINITY}, hi[3] = {1, 1, INFINITY}, bad[3] = {1, NAN, 1};
    const ro_space_t box = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = lo, .high = hi};
    const ro_space_t disc = {.kind = RO_SPACE_DISCRETE, .n = 4};
    char err[256];
    assert_int_equal(ro__env_check_spaces(&ro__env_cartpole, &box, &disc, err, sizeof err), 0);
    assert_int_equal(ro__env_check_spaces(&ro__env_cartpole, &box, &box, err, sizeof err), 0);
    const struct {
        ro_space_t obs, act;
        const char *words;
    } cases[] = {
        {disc, disc, "the observation space must be a box"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .high = hi},
         "the action box's low bounds are NULL"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = lo},
         "the action box's high bounds are NULL"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = lo, .high = bad},
         "the action box's bounds [-1, nan] at 1 are not a range"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = hi, .high = lo},
         "the action box's bounds [1, -1] at 0 are not a range"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 0, .low = lo, .high = hi},
         "the action box has 0 dims"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 9, .low = lo, .high = hi},
         "the action box has 9 dims"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 2, .shape = {3, 0}, .low = lo, .high = hi},
         "the action box has shape[1] = 0"},
        {box,
         {.kind = RO_SPACE_BOX, .ndim = 2, .shape = {4096, 4096}, .low = lo, .high = hi},
         "the action box has shape[1] = 4096"},
        {box, {.kind = RO_SPACE_DISCRETE, .n = 0}, "the action space has 0 discrete actions"},
        {box, {.kind = 7}, "the action space's kind 7 is neither discrete nor box"},
        {{.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}, .low = lo},
         disc,
         "the observation box's high bounds are NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(
            ro__env_check_spaces(&ro__env_cartpole, &cases[i].obs, &cases[i].act, err, sizeof err),
            RO_EINVAL);
        assert_contains(err, "env 'cartpole': ");
        assert_contains(err, cases[i].words);
    }
}

/* An ABI 1 plugin goes through the shim: its layout is one float32 tensor
 * "obs" and one plain action, ABI 1 shaped. */
static void test_abi1_plugin_shim(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    assert_int_equal(ro__env_open(&k, RO_PLUGIN_PATH, err, sizeof err), 0);
    assert_non_null(k.vt);
    assert_null(k.vt2);
    assert_string_equal(ro__env_kind_name(&k), "mountaincar");
    ro_space_layout_t lay;
    assert_int_equal(ro__env_kind_layout(&k, NULL, 0, 1, &lay, err, sizeof err), 0);
    assert_true(lay.abi1);
    assert_int_equal(lay.agents, 1);
    assert_int_equal(lay.ntensors, 1);
    assert_string_equal(lay.t[0].name, "obs");
    assert_int_equal(lay.t[0].dtype, RO_DTYPE_FLOAT32);
    assert_int_equal(lay.obs_width, 2);
    assert_int_equal(lay.ndisc, 1);
    assert_int_equal(lay.disc_n[0], 3);
    assert_int_equal(lay.mask_width, 0);
    ro__layout_free(&lay);
    ro__env_close(&k);
}

/* The ABI 2 examples load through ro_env2_plugin() and lay out as declared. */
static void test_abi2_plugins_load(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    assert_int_equal(ro__env_open(&k, RO_GRIDWORLD_PATH, err, sizeof err), 0);
    assert_null(k.vt);
    assert_non_null(k.vt2);
    assert_non_null(k.dl_handle);
    assert_string_equal(ro__env_kind_name(&k), "gridworld");
    assert_int_equal(ro__env_kind_max_steps(&k), 50);
    ro_space_layout_t lay;
    assert_int_equal(ro__env_kind_layout(&k, NULL, 0, 1, &lay, err, sizeof err), 0);
    assert_false(lay.abi1);
    assert_int_equal(lay.agents, 2);
    assert_int_equal(lay.ntensors, 3);
    assert_int_equal(lay.obs_width, 49 + 2 + 2);
    assert_int_equal(lay.mask_width, 5);
    assert_int_equal(lay.nmetrics, 2);
    assert_string_equal(lay.metric[0], "success");
    char what[160];
    ro__layout_abi2_features(&lay, what, sizeof what);
    assert_string_equal(what, "2 agents, 3 observation tensors, uint8 observations, int32 "
                              "observations and an action mask");
    ro__layout_free(&lay);
    /* Its args are checked as ABI 1 envs' are. */
    ro_env_arg_t in[1] = {{"speed", "2"}}, out[1];
    size_t nout;
    uint32_t steps;
    assert_int_equal(ro__env_kind_check_args(&k, in, 1, out, &nout, &steps, err, sizeof err),
                     RO_EINVAL);
    assert_contains(err, "env 'gridworld' has no arg 'speed'");
    ro__env_close(&k);
    assert_null(k.vt2);

    assert_int_equal(ro__env_open(&k, RO_CATCH_PATH, err, sizeof err), 0);
    ro_env_arg_t md[1] = {{"action", "multidiscrete"}};
    assert_int_equal(ro__env_kind_layout(&k, md, 1, 1, &lay, err, sizeof err), 0);
    assert_int_equal(lay.t[0].dtype, RO_DTYPE_UINT8);
    assert_int_equal(lay.obs_width, 84 * 84);
    assert_int_equal(lay.t[0].row_bytes, 84 * 84);
    assert_int_equal(lay.ndisc, 2);
    assert_int_equal(lay.head_width, 5);
    assert_false(lay.simple_act);
    ro__layout_free(&lay);
    ro__env_close(&k);
}

/* Broken ABI 2 plugins are refused with messages naming what is wrong. */
static void test_abi2_refusals(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[512] = "";
    assert_int_equal(ro__env_open(&k, RO_BAD_ABI2_PLUGIN_PATH, err, sizeof err), RO_ENOTSUP);
    assert_contains(err, "ro_env2_plugin() with env ABI version 3");
    assert_contains(err, "rebuild it against this rollout/env.h");
    assert_null(k.vt2);

    assert_int_equal(ro__env_open(&k, RO_BAD_METRICS2_PLUGIN_PATH, err, sizeof err), RO_EINVAL);
    assert_contains(err, "sets metric_names but not episode_metrics()");

    /* Env state: all three functions or none. */
    assert_int_equal(ro__env_open(&k, RO_BAD_STATE2_PLUGIN_PATH, err, sizeof err), RO_EINVAL);
    assert_contains(err, "(env 'bad2') leaves save_state() NULL: give state_size(), save_state() "
                         "and load_state(), or none");
    assert_null(k.vt2);

    /* Loads (its vtable is fine); its spaces are not. It has no state
     * functions, and its kind says so. */
    assert_int_equal(ro__env_open(&k, RO_BAD_SPACES2_PLUGIN_PATH, err, sizeof err), 0);
    assert_null(k.state.state_size);
    assert_null(k.state.load_state);
    ro_space_layout_t lay;
    assert_int_equal(ro__env_kind_layout(&k, NULL, 0, 1, &lay, err, sizeof err), RO_EINVAL);
    assert_string_equal(err, "env 'bad2': obs[1] ('b') has dtype 9; expected uint8 (1), int32 (2) "
                             "or float32 (3)");
    ro__env_close(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_plugin_loads_and_steps),
        cmocka_unit_test(test_plugin_missing_file),
        cmocka_unit_test(test_plugin_without_symbol),
        cmocka_unit_test(test_plugin_wrong_abi),
        cmocka_unit_test(test_check_args_consumes_max_steps),
        cmocka_unit_test(test_check_args_errors),
        cmocka_unit_test(test_arg_parsers),
        cmocka_unit_test(test_open_builtin_never_loads),
        cmocka_unit_test(test_check_spaces),
        cmocka_unit_test(test_abi1_plugin_shim),
        cmocka_unit_test(test_abi2_plugins_load),
        cmocka_unit_test(test_abi2_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
