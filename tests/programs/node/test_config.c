/* rollout-node's flag parser: values land where they should, and every bad
 * flag or value is refused with a message naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "node/config.h"
#include "runtime/error.h"

#include <stdlib.h>

/* argv strings must be writable: the parser splits KEY=VALUE in place. */
static char **dup_argv(const char *const *in, int *argc)
{
    static char *out[64];
    int n = 0;
    while (in[n]) {
        out[n] = strdup(in[n]);
        n++;
    }
    out[n] = NULL;
    *argc = n;
    return out;
}

static int parse(char **argv, int argc, ro_config_t *c, char *err)
{
    err[0] = '\0';
    return ro__config_parse(c, argc, argv, err, 256);
}

static void test_defaults(void **state)
{
    (void)state;
    ro_config_t c;
    char err[256];
    char *argv[] = {"rollout-node", NULL};
    assert_int_equal(parse(argv, 1, &c, err), 0);
    assert_string_equal(c.env, "cartpole");
    assert_int_equal(c.num_envs, 256);
    assert_int_equal(c.policy.kind, RO_POLICY_MLP);
    assert_int_equal(c.policy.nhidden, 2);
    assert_int_equal(c.policy.hidden[0], 64);
    assert_true(c.seconds > 0); /* the main job ends by itself */
    assert_int_equal(c.steps, 0);
    assert_int_equal(c.node_index, 0);
    assert_true(c.seed_drawn); /* no --seed: a fresh one per run */
}

/* Without --seed every parse draws its own seed; --seed (even 1, the old
 * default) is kept as given; --node-index is any u32. */
static void test_seed_and_node_index(void **state)
{
    (void)state;
    ro_config_t a, b;
    char err[256];
    char *none[] = {"rollout-node", NULL};
    assert_int_equal(parse(none, 1, &a, err), 0);
    assert_int_equal(parse(none, 1, &b, err), 0);
    assert_true(a.seed_drawn && b.seed_drawn);
    assert_true(a.seed != b.seed); /* 2^-64 */
    char *given[] = {"rollout-node", "--seed", "1", "--node-index", "4294967295", NULL};
    assert_int_equal(parse(given, 5, &a, err), 0);
    assert_false(a.seed_drawn);
    assert_true(a.seed == 1);
    assert_true(a.node_index == UINT32_MAX);
    char *help[] = {"rollout-node", "--help", NULL};
    assert_int_equal(parse(help, 2, &a, err), 0);
    assert_false(a.seed_drawn); /* --help draws nothing */
}

static void test_values(void **state)
{
    (void)state;
    ro_config_t c;
    char err[256];
    const char *in[] = {"rollout-node",
                        "--env",
                        "pendulum",
                        "--env-arg",
                        "g=9.81",
                        "--env-arg",
                        "max_episode_steps=50",
                        "--num-envs",
                        "12",
                        "--workers",
                        "2",
                        "--shard",
                        "3",
                        "--batch",
                        "6",
                        "--max-wait-us",
                        "0",
                        "--hidden",
                        "32,16,8",
                        "--activation",
                        "relu",
                        "--seed",
                        "42",
                        "--steps",
                        "1000",
                        "--json",
                        "--metrics",
                        "m.jsonl",
                        "--check-finite",
                        NULL};
    int argc;
    char **argv = dup_argv(in, &argc);
    assert_int_equal(parse(argv, argc, &c, err), 0);
    assert_string_equal(c.env, "pendulum");
    assert_int_equal(c.nenv_args, 2);
    assert_string_equal(c.env_args[0].key, "g");
    assert_string_equal(c.env_args[0].value, "9.81");
    assert_string_equal(c.env_args[1].key, "max_episode_steps");
    assert_int_equal(c.num_envs, 12);
    assert_int_equal(c.workers, 2);
    assert_int_equal(c.shard, 3);
    assert_int_equal(c.batch, 6);
    assert_int_equal(c.max_wait_us, 0);
    assert_int_equal(c.policy.nhidden, 3);
    assert_int_equal(c.policy.hidden[2], 8);
    assert_int_equal(c.policy.activation, RO_ACT_RELU);
    assert_int_equal(c.seed, 42);
    assert_int_equal(c.steps, 1000);
    assert_true(c.seconds == 0); /* --steps alone: no time limit */
    assert_true(c.json);
    assert_true(c.check_finite);
    assert_string_equal(c.metrics, "m.jsonl");
    for (int i = 0; i < argc; i++)
        free(argv[i]);
}

static void test_policy_choices(void **state)
{
    (void)state;
    ro_config_t c;
    char err[256];
    char *a1[] = {"rollout-node", "--policy", "random", NULL};
    assert_int_equal(parse(a1, 3, &c, err), 0);
    assert_int_equal(c.policy.kind, RO_POLICY_RANDOM);
    char *a2[] = {"rollout-node", "--policy", "weights.pb", NULL};
    assert_int_equal(parse(a2, 3, &c, err), 0);
    assert_int_equal(c.policy.kind, RO_POLICY_MLP);
    assert_string_equal(c.policy.params_path, "weights.pb");
}

/* Each bad input: RO_EINVAL and a message that names the flag and value. */
static void expect_error(const char *flag, const char *value, const char *needle)
{
    ro_config_t c;
    char err[256];
    char f[64], v[64];
    strcpy(f, flag);
    strcpy(v, value);
    char *argv[] = {"rollout-node", f, v, NULL};
    int argc = value[0] ? 3 : 2; /* "" means: the flag alone */
    int rc = parse(argv, argc, &c, err);
    assert_int_equal(rc, RO_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("for %s '%s' the message '%s' lacks '%s'", flag, value, err, needle);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("--num-envs", "0", "--num-envs '0'");
    expect_error("--num-envs", "-3", "--num-envs '-3'");
    expect_error("--num-envs", "12abc", "expected an integer");
    expect_error("--batch", "-1", "--batch '-1'");
    expect_error("--batch", "0", "--batch '0'");
    expect_error("--shard", "x", "--shard 'x'");
    expect_error("--max-wait-us", "-5", "--max-wait-us");
    expect_error("--seconds", "-1", "--seconds '-1'");
    expect_error("--seconds", "nan", "--seconds 'nan'");
    expect_error("--steps", "0", "--steps '0'");
    expect_error("--seed", "1.5", "--seed '1.5'");
    expect_error("--node-index", "-1", "--node-index '-1'");
    expect_error("--node-index", "4294967296", "--node-index '4294967296'");
    expect_error("--hidden", "64,,64", "--hidden '64,,64'");
    expect_error("--hidden", "0", "--hidden '0'");
    expect_error("--hidden", "64,", "--hidden '64,'");
    expect_error("--hidden", "1,2,3,4,5,6,7,8,9", "1 to 8");
    expect_error("--activation", "sigmoid", "expected tanh or relu");
    expect_error("--gemm", "mkl", "expected exact or openblas");
    expect_error("--env-arg", "noequals", "expected KEY=VALUE");
    expect_error("--env-arg", "=3", "expected KEY=VALUE");
    expect_error("--bogus", "", "unknown option '--bogus'");
    expect_error("--num-envs", "", "--num-envs: missing value");
    expect_error("--metrics-interval", "0.001", "at least 0.01");
}

static void test_record_flags(void **state)
{
    (void)state;
    ro_config_t c;
    char err[256];
    int argc;
    const char *a[] = {"rollout-node", "--record",      "run.traj", "--record-max-bytes",
                       "1000000",      "--record-full", "drop",     NULL};
    char **av = dup_argv(a, &argc);
    assert_int_equal(parse(av, argc, &c, err), 0);
    assert_string_equal(c.record, "run.traj");
    assert_int_equal(c.record_max_bytes, 1000000);
    assert_int_equal(c.record_full, RO_RECORD_DROP);
    for (int i = 0; i < argc; i++)
        free(av[i]);
    const char *b[] = {"rollout-node", NULL};
    av = dup_argv(b, &argc);
    assert_int_equal(parse(av, argc, &c, err), 0);
    assert_null(c.record);
    assert_int_equal(c.record_max_bytes, 0);
    assert_int_equal(c.record_full, RO_RECORD_BLOCK);
    for (int i = 0; i < argc; i++)
        free(av[i]);
    expect_error("--record-full", "sometimes", "expected block or drop");
    expect_error("--record-max-bytes", "100", "expected 0 or at least 4096");
    expect_error("--record-max-bytes", "-1", "--record-max-bytes '-1'");
}

/* A command line whose flags conflict: RO_EINVAL naming the flag. */
static void expect_conflict(const char *const *args, const char *needle)
{
    ro_config_t c;
    char err[256];
    int argc;
    char **av = dup_argv(args, &argc);
    int rc = parse(av, argc, &c, err);
    for (int i = 0; i < argc; i++)
        free(av[i]);
    assert_int_equal(rc, RO_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("for %s %s the message '%s' lacks '%s'", args[1], args[2], err, needle);
}

/* Flags that the others would make meaningless are refused, never
 * ignored (issue 16, defect 7). */
static void test_conflicting_flags(void **state)
{
    (void)state;
#define CONFLICT(needle, ...)                                                                      \
    expect_conflict((const char *const[]){"rollout-node", __VA_ARGS__, NULL}, needle)
    CONFLICT("--hidden: the policy file 'w.pb' sets", "--policy", "w.pb", "--hidden", "8");
    CONFLICT("--activation: the policy file", "--activation", "relu", "--policy", "w.pb");
    CONFLICT("--hidden: --policy random runs no MLP", "--policy", "random", "--hidden", "8");
    CONFLICT("--gemm: --policy random", "--policy", "random", "--gemm", "openblas");
    CONFLICT("--kernels: --policy random", "--policy", "random", "--kernels", "scalar");
    CONFLICT("--save-policy: --policy random", "--policy", "random", "--save-policy", "w.pb");
    CONFLICT("--record-full: only with --record", "--record-full", "drop");
    CONFLICT("--record-max-bytes: only with --record", "--record-max-bytes", "8192");
    CONFLICT("--record-error: only with --record", "--record-error", "continue");
    CONFLICT("--metrics-every: only with --metrics", "--metrics-every", "1");
    CONFLICT("--metrics-interval: only with --metrics", "--metrics-interval", "1");
    CONFLICT("give it or --metrics-interval", "--metrics", "m", "--metrics-every", "1",
             "--metrics-interval", "2");
    CONFLICT("--metrics-episodes: only with --metrics", "--metrics-episodes");
    CONFLICT("--metrics-episodes: --metrics-every writes throughput lines only", "--metrics", "m",
             "--metrics-every", "1", "--metrics-episodes");
    CONFLICT("--policy: with --learner remote", "--learner", "remote", "--policy", "random");
    CONFLICT("--hidden: with --learner remote", "--learner", "remote", "--hidden", "8");
    CONFLICT("--kernels: with --learner remote", "--learner", "remote", "--kernels", "avx2");
    CONFLICT("--token-file: nothing connects", "--token-file", "t");
    CONFLICT("--learner-timeout: nothing connects", "--learner-timeout", "5");
    CONFLICT("--overcommit: only with --workers", "--overcommit");
    CONFLICT("--workers 0: only with --learner remote", "--workers", "0");
    CONFLICT("--workers 0: only with --learner remote", "--learner", "stream", "--workers", "0");
#undef CONFLICT

    /* The same flags where they act. */
    ro_config_t c;
    char err[256];
    int argc;
    const char *ok[] = {"rollout-node",
                        "--policy",
                        "w.pb",
                        "--gemm",
                        "openblas",
                        "--metrics",
                        "m",
                        "--metrics-every",
                        "0.5",
                        "--record",
                        "r.traj",
                        "--record-full",
                        "drop",
                        "--listen",
                        "127.0.0.1:0",
                        "--token-file",
                        "t",
                        "--workers",
                        "2",
                        "--overcommit",
                        NULL};
    char **av = dup_argv(ok, &argc);
    assert_int_equal(parse(av, argc, &c, err), 0);
    assert_true(c.metrics_throughput_only);
    assert_true(c.metrics_interval == 0.5);
    for (int i = 0; i < argc; i++)
        free(av[i]);
    const char *remote[] = {"rollout-node",
                            "--learner",
                            "remote",
                            "--token-file",
                            "t",
                            "--metrics",
                            "m",
                            "--metrics-interval",
                            "2",
                            "--metrics-episodes",
                            NULL};
    av = dup_argv(remote, &argc);
    assert_int_equal(parse(av, argc, &c, err), 0);
    assert_false(c.metrics_throughput_only);
    assert_true(c.metrics_episodes);
    assert_true(c.metrics_interval == 2.0);
    for (int i = 0; i < argc; i++)
        free(av[i]);
}

static void test_stray_argument(void **state)
{
    (void)state;
    ro_config_t c;
    char err[256];
    char *argv[] = {"rollout-node", "cartpole", NULL};
    assert_int_equal(parse(argv, 2, &c, err), RO_EINVAL);
    assert_non_null(strstr(err, "unexpected argument 'cartpole'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),          cmocka_unit_test(test_values),
        cmocka_unit_test(test_policy_choices),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_stray_argument),    cmocka_unit_test(test_record_flags),
        cmocka_unit_test(test_conflicting_flags), cmocka_unit_test(test_seed_and_node_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
