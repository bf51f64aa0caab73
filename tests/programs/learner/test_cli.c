/* rollout-learner's flags (programs/learner/cli.c): the defaults, values
 * landing in their fields, the spin default that follows --workers, and
 * every refusal (no --connect, too many, bad values, combinations that
 * would be ignored) with one line naming the flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner/cli.h"
#include "runtime/error.h"

#define ERRLEN 256
#define MAX_ARGS 160

/* args: argv (the parser may write into its strings) from a NULL-ended
 * list, program name first. Freed by args_free. */
typedef struct args {
    int argc;
    char *argv[MAX_ARGS];
} args_t;

static void args_set(args_t *a, const char *const *in)
{
    a->argc = 0;
    a->argv[a->argc++] = strdup("rollout-learner");
    for (; *in; in++) {
        assert_true(a->argc < MAX_ARGS - 1);
        a->argv[a->argc++] = strdup(*in);
    }
    a->argv[a->argc] = NULL;
}

static void args_free(args_t *a)
{
    for (int i = 0; i < a->argc; i++)
        free(a->argv[i]);
    a->argc = 0;
}

/* parse: the parser's code, with err holding one line or nothing. */
static int parse(const char *const *in, ro_learner_cfg_t *c, char *err)
{
    args_t a;
    args_set(&a, in);
    err[0] = '\0';
    int rc = ro__learner_cfg_parse(c, a.argc, a.argv, err, ERRLEN);
    args_free(&a); /* the strings c points at are not read after this */
    if (rc) {
        assert_int_equal(rc, RO_EINVAL);
        assert_true(err[0] != '\0');
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

/* refused: in is refused with a message containing want. */
static void refused(const char *const *in, const char *want)
{
    ro_learner_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse(in, &c, err), RO_EINVAL);
    if (!strstr(err, want))
        fail_msg("'%s' does not name '%s'", err, want);
}

static void test_defaults(void **state)
{
    (void)state;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    const char *in[] = {"--connect", "127.0.0.1:7000", NULL};
    assert_int_equal(parse(in, &c, err), 0);
    assert_int_equal(c.nconnect, 1);
    assert_int_equal(c.policy.kind, RO_POLICY_MLP);
    assert_int_equal(c.policy.nhidden, 2);
    assert_int_equal(c.policy.hidden[0], 64);
    assert_int_equal(c.policy.hidden[1], 64);
    assert_int_equal(c.policy.seed, 1);
    /* No --workers: threads.c chooses at the first welcome; until then the
     * loop runs the lane, and spins while it does. */
    assert_int_equal(c.workers, 0);
    assert_false(c.workers_given);
    assert_false(c.spin_given);
    assert_int_equal(c.batch, 1024);
    assert_int_equal(c.max_wait_us, 0);
    assert_int_equal(c.steps, 0);
    assert_true(c.reconnect_s == 60.0);
    assert_true(c.metrics_interval == 1.0);
    assert_int_equal(c.spin_us, 50);
    assert_string_equal(c.name, "rollout-learner");
    assert_null(c.push_policy);
    assert_null(c.tensorboard);
    assert_false(c.no_shared_memory);
    assert_false(c.no_ring);
}

/* Values land in their fields; --connect repeats in order. */
static void test_values(void **state)
{
    (void)state;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    /* The strings are checked before the argv copies are freed: parse
     * from argv kept here. */
    char *argv[] = {"rollout-learner",
                    "--connect",
                    "a:1",
                    "--connect",
                    "unix:/tmp/n.sock",
                    "--workers",
                    "3",
                    "--batch",
                    "256",
                    "--max-wait-us",
                    "500",
                    "--seed",
                    "42",
                    "--steps",
                    "1000",
                    "--seconds",
                    "2.5",
                    "--hidden",
                    "32,16,8",
                    "--activation",
                    "relu",
                    "--reconnect-s",
                    "0",
                    "--no-ring",
                    "--name",
                    "L1",
                    "--tensorboard",
                    "/tmp/tb",
                    "--metrics-interval",
                    "0.5",
                    "--json",
                    NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    assert_int_equal(ro__learner_cfg_parse(&c, argc, argv, err, ERRLEN), 0);
    assert_int_equal(c.nconnect, 2);
    assert_string_equal(c.connect[0], "a:1");
    assert_string_equal(c.connect[1], "unix:/tmp/n.sock");
    assert_int_equal(c.workers, 3);
    assert_true(c.workers_given);
    assert_int_equal(c.spin_us, 0); /* workers: the loop is not the data path */
    assert_int_equal(c.batch, 256);
    assert_int_equal(c.max_wait_us, 500);
    assert_int_equal(c.policy.seed, 42);
    assert_int_equal(c.steps, 1000);
    assert_true(c.seconds == 2.5);
    assert_int_equal(c.policy.nhidden, 3);
    assert_int_equal(c.policy.hidden[2], 8);
    assert_int_equal(c.policy.activation, RO_ACT_RELU);
    assert_true(c.reconnect_s == 0.0);
    assert_true(c.no_ring);
    assert_false(c.no_shared_memory);
    assert_string_equal(c.name, "L1");
    assert_string_equal(c.tensorboard, "/tmp/tb");
    assert_true(c.metrics_interval == 0.5);
    assert_true(c.json);
}

/* --workers 0 (the loop runs the lane) spins 50 us by default; an explicit
 * --spin-us wins either way. */
static void test_spin_follows_workers(void **state)
{
    (void)state;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    const char *inline_lane[] = {"--connect", "h:1", "--workers", "0", NULL};
    assert_int_equal(parse(inline_lane, &c, err), 0);
    assert_int_equal(c.workers, 0);
    assert_int_equal(c.spin_us, 50);
    const char *given[] = {"--connect", "h:1", "--workers", "0", "--spin-us", "0", NULL};
    assert_int_equal(parse(given, &c, err), 0);
    assert_int_equal(c.spin_us, 0);
    assert_true(c.spin_given);
    const char *with_workers[] = {"--connect", "h:1", "--workers", "2", "--spin-us", "20", NULL};
    assert_int_equal(parse(with_workers, &c, err), 0);
    assert_int_equal(c.spin_us, 20);
}

/* --help and --version need no --connect. */
static void test_help_needs_nothing(void **state)
{
    (void)state;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    const char *help[] = {"--help", NULL};
    assert_int_equal(parse(help, &c, err), 0);
    assert_true(c.help);
    const char *version[] = {"--version", NULL};
    assert_int_equal(parse(version, &c, err), 0);
    assert_true(c.version);
}

/* 64 nodes are taken; the 65th is refused by name. */
static void test_connect_limit(void **state)
{
    (void)state;
    const char *in[2 * (RO_LEARNER_MAX_NODES + 1) + 1];
    for (int i = 0; i < RO_LEARNER_MAX_NODES; i++) {
        in[2 * i] = "--connect";
        in[2 * i + 1] = "h:1";
    }
    in[2 * RO_LEARNER_MAX_NODES] = NULL;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse(in, &c, err), 0);
    assert_int_equal(c.nconnect, RO_LEARNER_MAX_NODES);
    in[2 * RO_LEARNER_MAX_NODES] = "--connect";
    in[2 * RO_LEARNER_MAX_NODES + 1] = "h:2";
    in[2 * RO_LEARNER_MAX_NODES + 2] = NULL;
    refused(in, "at most 64 nodes");
}

static void test_refusals(void **state)
{
    (void)state;
    refused((const char *[]){NULL}, "no node to serve");
    refused((const char *[]){"--workers", "2", NULL}, "--connect");
    refused((const char *[]){"--connect", "h:1", "--batch", "0", NULL}, "--batch");
    refused((const char *[]){"--connect", "h:1", "--workers", "many", NULL}, "--workers");
    refused((const char *[]){"--connect", "h:1", "--max-frame-bytes", "10", NULL},
            "--max-frame-bytes");
    refused((const char *[]){"--connect", "h:1", "--no-such-flag", NULL}, "--no-such-flag");
    refused((const char *[]){"--connect", "h:1", "--seconds", "-1", NULL}, "--seconds");
    refused((const char *[]){"--connect", "h:1", "--metrics-interval", "2", NULL},
            "--metrics-interval");
    refused((const char *[]){"--connect", "h:1", "--policy", "random", "--hidden", "8", NULL},
            "--hidden");
}

/* --push-policy serves no envs: every serving flag beside it is refused. */
static void test_push_policy_alone(void **state)
{
    (void)state;
    ro_learner_cfg_t c;
    char err[ERRLEN];
    const char *ok[] = {"--connect", "h:1", "--push-policy", "w.pb", NULL};
    assert_int_equal(parse(ok, &c, err), 0);
    assert_non_null(c.push_policy); /* into the freed argv copies: not read */
    const char *serving[] = {"--workers", "--batch", "--seed", "--steps", "--spin-us"};
    const char *values[] = {"2", "8", "3", "10", "5"};
    for (size_t i = 0; i < sizeof serving / sizeof serving[0]; i++) {
        const char *in[] = {"--connect", "h:1", "--push-policy", "w.pb", serving[i],
                            values[i],   NULL};
        refused(in, serving[i]);
        refused(in, "--push-policy only pushes weights");
    }
}

/* The usage names every flag a user reads about in docs/operations.md. */
static void test_usage(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ro__learner_usage(f);
    assert_int_equal(fclose(f), 0);
    const char *names[] = {"--connect", "--workers",     "--batch",      "--push-policy",
                           "--no-ring", "--tensorboard", "--prometheus", "--reconnect-s"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(text, names[i]))
            fail_msg("usage does not name %s", names[i]);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_spin_follows_workers),
        cmocka_unit_test(test_help_needs_nothing),
        cmocka_unit_test(test_connect_limit),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_push_policy_alone),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
