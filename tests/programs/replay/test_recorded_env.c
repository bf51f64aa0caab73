/*
 * The env a recording was made with, re-created by rollout-replay
 * (programs/replay/recorded_env.c). A built-in env opens by the header's
 * name and makes env i as the node made it (its seed from the run seed,
 * the node index and i: the same first observation); a name not built in
 * is refused naming the recorded --env, never loaded from the file; a
 * version 2 header needs an env ABI 2 env. A --plugin must be the recorded
 * env (name and ABI), and an ABI 2 plugin's layout the recorded one; a
 * plugin not there, bad or too many args are refused by name. A MuJoCo
 * env's recording re-steps only on the MuJoCo it ran on; other envs'
 * never ask.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/mujoco/mj_registry.h"
#include "replay/recorded_env.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "trajectory/abi2_format.h"

#define ERRLEN 1024

/* A header of env (spec the --env it was recorded with): 4 envs of run
 * seed 42 on node 3. */
static void header(Rollout__V1__TrajectoryHeader *h, const char *env, const char *spec)
{
    rollout__v1__trajectory_header__init(h);
    h->env = (char *)env;
    h->env_spec = (char *)spec;
    h->seed = 42;
    h->node_index = 3;
    h->num_envs = 4;
}

/* first_obs: env i's first observation (4 floats) from kind, seeded. */
static void first_obs(const ro_env_kind_t *k, uint64_t seed, uint32_t i, float obs[4])
{
    void *env;
    char err[ERRLEN];
    assert_int_equal(ro__env_create(k, &env, NULL, 0, seed, i, err, sizeof err), 0);
    void *t[1] = {obs};
    ro__env_reset(k, env, t, NULL);
    ro__env_destroy(k, env);
}

/* A built-in env: opened by name; env 2 made as the node made it. */
static void test_builtin_made_as_recorded(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryHeader h;
    header(&h, "cartpole", "cartpole");
    ro_recorded_env_t e;
    char err[ERRLEN];
    assert_int_equal(ro__recorded_env_open(&e, &h, NULL, err, sizeof err), 0);
    assert_string_equal(ro__env_kind_name(&e.kind), "cartpole");
    void *env;
    assert_int_equal(ro__recorded_env_create(&e, &h, 2, &env, err, sizeof err), 0);
    float got[4], want[4], other[4];
    void *t[1] = {got};
    ro__env_reset(&e.kind, env, t, NULL);
    ro__recorded_env_destroy(&e, env);
    first_obs(&e.kind, ro__seed_mix(ro__node_seed(42, 3), 2, RO_STREAM_ENV), 2, want);
    assert_memory_equal(got, want, sizeof got);
    first_obs(&e.kind, ro__seed_mix(ro__node_seed(42, 0), 2, RO_STREAM_ENV), 2, other);
    assert_memory_not_equal(got, other, sizeof got); /* the node index counts */
    ro__recorded_env_close(&e);
}

/* An env not built in is refused naming what it was recorded with; a
 * file's env never loads code. A version 2 header needs an ABI 2 env. */
static void test_not_built_in(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryHeader h;
    header(&h, "evil", "/tmp/evil.so");
    ro_recorded_env_t e;
    char err[ERRLEN];
    assert_int_equal(ro__recorded_env_open(&e, &h, NULL, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "the recording's env 'evil' is not built in (it was recorded "
                                "with --env '/tmp/evil.so'): give the plugin with --plugin PATH"));
    assert_non_null(strstr(err, "never loads code because a file names it"));
    header(&h, "cartpole", "cartpole");
    Rollout__V1__TrajectoryLayout lay = ROLLOUT__V1__TRAJECTORY_LAYOUT__INIT;
    h.layout = &lay;
    assert_int_equal(ro__recorded_env_open(&e, &h, NULL, err, sizeof err), RO_EINVAL);
    assert_string_equal(err, "the recording (format version 2) is of an env ABI 2 env, and the "
                             "built-in env 'cartpole' is ABI 1");
}

/* The recorded args are checked as the node checks them; more than the
 * node takes are refused. */
static void test_args(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryHeader h;
    header(&h, "mountaincar", "mountaincar");
    Rollout__V1__EnvArg arg = ROLLOUT__V1__ENV_ARG__INIT, *args[RO_MAX_ENV_ARGS + 1];
    arg.key = "friction";
    arg.value = "1";
    for (size_t i = 0; i <= RO_MAX_ENV_ARGS; i++)
        args[i] = &arg;
    h.env_args = args;
    h.n_env_args = 1;
    ro_recorded_env_t e;
    char err[ERRLEN];
    assert_true(ro__recorded_env_open(&e, &h, RO_PLUGIN_PATH, err, sizeof err) < 0);
    assert_non_null(strstr(err, "friction"));
    arg.key = "goal_velocity";
    arg.value = "0.5";
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_PLUGIN_PATH, err, sizeof err), 0);
    assert_int_equal(e.nargs, 1);
    ro__recorded_env_close(&e);
    h.n_env_args = RO_MAX_ENV_ARGS + 1;
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_PLUGIN_PATH, err, sizeof err), RO_EINVAL);
    assert_string_equal(err, "more than 32 env args");
}

/* A --plugin must be the recorded env, of the recorded ABI. */
static void test_plugin_must_be_the_recorded_env(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryHeader h;
    header(&h, "cartpole", "cartpole");
    ro_recorded_env_t e;
    char err[ERRLEN], want[ERRLEN];
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_PLUGIN_PATH, err, sizeof err), RO_EINVAL);
    snprintf(want, sizeof want,
             "--plugin '%s' is env 'mountaincar', the recording is of env "
             "'cartpole'",
             RO_PLUGIN_PATH);
    assert_string_equal(err, want);
    header(&h, "gridworld", "gridworld");
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_GRIDWORLD_PATH, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "is an env ABI 2 plugin (env 'gridworld'); the recording (format "
                                "version 1) is of an ABI 1 env"));
    header(&h, "mountaincar", "mountaincar");
    Rollout__V1__TrajectoryLayout lay = ROLLOUT__V1__TRAJECTORY_LAYOUT__INIT;
    h.layout = &lay;
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_PLUGIN_PATH, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "is an env ABI 1 plugin (env 'mountaincar'); the recording "
                                "(format version 2) is of an env ABI 2 env"));
    assert_int_equal(ro__recorded_env_open(&e, &h, "/nonexistent/env.so", err, sizeof err),
                     RO_ENOENT);
    assert_non_null(strstr(err, "--plugin '/nonexistent/env.so': "));
}

/* An ABI 2 plugin re-created with the recorded layout opens; one whose
 * layout is not the recorded one is refused naming the difference. */
static void test_abi2_layout_must_match(void **state)
{
    (void)state;
    ro_env_kind_t k;
    char err[ERRLEN];
    assert_int_equal(ro__env_open(&k, RO_GRIDWORLD_PATH, err, sizeof err), 0);
    ro_space_layout_t lay;
    assert_int_equal(ro__env_kind_layout(&k, NULL, 0, 1, &lay, err, sizeof err), 0);
    ro_traj_layout_msg_t m;
    assert_int_equal(ro__traj_layout_msg_init(&m, &lay), 0);
    ro__layout_free(&lay);
    ro__env_close(&k);
    Rollout__V1__TrajectoryHeader h;
    header(&h, "gridworld", "gridworld");
    h.layout = &m.msg;
    ro_recorded_env_t e;
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_GRIDWORLD_PATH, err, sizeof err), 0);
    assert_int_equal(e.layout.agents, 2);
    void *env;
    assert_int_equal(ro__recorded_env_create(&e, &h, 1, &env, err, sizeof err), 0);
    ro__recorded_env_destroy(&e, env);
    ro__recorded_env_close(&e);
    m.msg.agents = 3;
    assert_int_equal(ro__recorded_env_open(&e, &h, RO_GRIDWORLD_PATH, err, sizeof err), RO_EINVAL);
    assert_non_null(
        strstr(err, "env 'gridworld' as re-created does not match the recording: it has "));
    ro__traj_layout_msg_free(&m);
}

/* A MuJoCo env's recording re-steps only on its MuJoCo (or one that does
 * not say); other envs are not asked. */
static void test_mujoco_version(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryHeader h;
    header(&h, "cartpole", "cartpole");
    h.mujoco_version = "2.3.7";
    ro_recorded_env_t e;
    char err[ERRLEN];
    assert_int_equal(ro__recorded_env_open(&e, &h, NULL, err, sizeof err), 0);
    assert_int_equal(ro__recorded_env_check_mujoco(&e, &h, err, sizeof err), 0);
    ro__recorded_env_close(&e);
    const char *mine = ro__mj_version();
    if (!mine)
        skip(); /* built without MuJoCo: nothing more to ask */
    header(&h, "hopper", "hopper");
    h.mujoco_version = "2.3.7";
    assert_int_equal(ro__recorded_env_open(&e, &h, NULL, err, sizeof err), 0);
    assert_int_equal(ro__recorded_env_check_mujoco(&e, &h, err, sizeof err), RO_ENOTSUP);
    char want[ERRLEN];
    snprintf(want, sizeof want,
             "the recording ran on MuJoCo 2.3.7 and this build's MuJoCo envs run on %s", mine);
    assert_non_null(strstr(err, want));
    h.mujoco_version = (char *)mine;
    assert_int_equal(ro__recorded_env_check_mujoco(&e, &h, err, sizeof err), 0);
    h.mujoco_version = "";
    assert_int_equal(ro__recorded_env_check_mujoco(&e, &h, err, sizeof err), 0);
    ro__recorded_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_made_as_recorded),
        cmocka_unit_test(test_not_built_in),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_plugin_must_be_the_recorded_env),
        cmocka_unit_test(test_abi2_layout_must_match),
        cmocka_unit_test(test_mujoco_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
