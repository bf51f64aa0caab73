/* rollout-replay's flags (programs/replay/cli.c): the defaults, values in
 * their fields (env lists, repeated; --episode ENV:EPISODE seeking from the
 * start; --fork setting verify, from and until at its step; --no-resync),
 * where the files start, and every refusal with one line naming it: a bad
 * list, no mode, no file, --serve or --bisect or --fork with another mode,
 * --fork without its flags or its flags without --fork, --token-file
 * without --serve, ENV:EPISODE with other envs or episodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/cli.h"
#include "runtime/error.h"

#define ERRLEN 256
#define MAX_ARGS 80

/* The last parse's argv (the config points into it): kept until the next. */
static struct {
    int argc;
    char *argv[MAX_ARGS];
} a;

static void args_free(void)
{
    for (int i = 0; i < a.argc; i++)
        free(a.argv[i]);
    a.argc = 0;
}

/* parse: the parser's code for the NULL-ended list, err one line or "". */
static int parse(const char *const *in, ro_replay_cfg_t *c, char *err)
{
    args_free();
    a.argv[a.argc++] = strdup("rollout-replay");
    for (; *in; in++) {
        assert_true(a.argc < MAX_ARGS - 1);
        a.argv[a.argc++] = strdup(*in);
    }
    a.argv[a.argc] = NULL;
    err[0] = '\0';
    int rc = ro__replay_cfg_parse(c, a.argc, a.argv, err, ERRLEN);
    if (rc) {
        assert_int_equal(rc, RO_EINVAL);
        assert_true(err[0] != '\0');
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    args_free();
    return 0;
}

/* refused: the args are refused with err holding want. */
static void refused(const char *const *in, const char *want)
{
    ro_replay_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse(in, &c, err), RO_EINVAL);
    if (!strstr(err, want))
        fail_msg("wanted \"%s\" in \"%s\"", want, err);
}

static void test_defaults_and_values(void **state)
{
    (void)state;
    ro_replay_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse((const char *[]){"--verify", "a.traj", "a.traj.1", NULL}, &c, err), 0);
    assert_true(c.o.verify && c.o.resync);
    assert_false(c.o.dump || c.o.stats || c.bisect || c.fork_set || c.o.from_set);
    assert_true(c.hello_timeout == 10.0);
    assert_int_equal(c.files, 2);
    assert_string_equal(a.argv[c.files], "a.traj");
    assert_int_equal(parse((const char *[]){"--dump", "--stats", "--env", "3,1", "--env-ids", "7",
                                            "--episode", "0,5", "--from", "100", "--no-resync",
                                            "--plugin", "gym:CartPole-v1", "x.traj", NULL},
                           &c, err),
                     0);
    assert_int_equal(c.o.envs.n, 3);
    assert_memory_equal(c.o.envs.v, ((uint64_t[]){3, 1, 7}), 24);
    assert_int_equal(c.o.episodes.n, 2);
    assert_int_equal(c.o.episodes.v[1], 5);
    assert_true(c.o.from_set && c.o.from == 100);
    assert_false(c.o.resync);
    assert_false(c.o.episode_seek);
    assert_string_equal(c.o.plugin, "gym:CartPole-v1");
    assert_int_equal(c.files, 14);
}

/* --episode ENV:EPISODE seeks that env's episode, from the start. */
static void test_episode_seek(void **state)
{
    (void)state;
    ro_replay_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(
        parse((const char *[]){"--verify", "--episode", "2:17", "r.traj", NULL}, &c, err), 0);
    assert_true(c.o.episode_seek && c.o.from_set);
    assert_int_equal(c.o.from, 0);
    assert_int_equal(c.o.envs.n, 1);
    assert_int_equal(c.o.envs.v[0], 2);
    assert_int_equal(c.o.episodes.v[0], 17);
    refused((const char *[]){"--verify", "--env", "1", "--episode", "2:17", "r.traj", NULL},
            "--episode '2:17': ENV:EPISODE (one env's episode, alone");
    refused((const char *[]){"--verify", "--episode", "2:17", "--env", "1", "r.traj", NULL},
            "names one env's episode alone");
    refused((const char *[]){"--verify", "--episode", ":4", "r.traj", NULL}, "--episode ':4'");
}

/* --fork STEP: verify up to STEP, then go on; its flags only with it. */
static void test_fork(void **state)
{
    (void)state;
    ro_replay_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse((const char *[]){"--fork", "500", "--policy", "random", "--steps", "64",
                                            "--record", "out.traj", "--seed", "0", "r.traj", NULL},
                           &c, err),
                     0);
    assert_true(c.fork_set && c.seed_set && c.seed == 0);
    assert_true(c.o.verify && c.o.from_set && c.o.until_set);
    assert_int_equal(c.o.from, 500);
    assert_int_equal(c.o.until, 500);
    assert_int_equal(c.steps, 64);
    assert_string_equal(c.policy, "random");
    assert_string_equal(c.record, "out.traj");
    refused((const char *[]){"--fork", "5", "--policy", "random", "--steps", "1", "r.traj", NULL},
            "--fork STEP needs --policy FILE|random, --steps N and --record OUT");
    refused((const char *[]){"--fork", "5", "--policy", "random", "--steps", "1", "--record", "o",
                             "--dump", "r.traj", NULL},
            "--fork replays (as --verify) and forks; it takes no other mode");
    refused((const char *[]){"--verify", "--seed", "3", "r.traj", NULL},
            "--policy, --steps, --record and --seed go with --fork");
    refused((const char *[]){"--fork", "5", "--policy", "random", "--steps", "0", "--record", "o",
                             "r.traj", NULL},
            "--steps");
}

/* --serve and --bisect stand alone. */
static void test_serve_and_bisect(void **state)
{
    (void)state;
    ro_replay_cfg_t c;
    char err[ERRLEN];
    assert_int_equal(parse((const char *[]){"--serve", "127.0.0.1:0", "--token-file", "t",
                                            "--hello-timeout", "2.5", "r.traj", NULL},
                           &c, err),
                     0);
    assert_string_equal(c.serve, "127.0.0.1:0");
    assert_string_equal(c.token_file, "t");
    assert_true(c.hello_timeout == 2.5);
    refused((const char *[]){"--serve", "127.0.0.1:0", "--verify", "r.traj", NULL},
            "--serve takes the trajectory files and no other mode");
    refused((const char *[]){"--serve", "127.0.0.1:0", NULL}, "--serve takes the trajectory files");
    refused((const char *[]){"--verify", "--token-file", "t", "r.traj", NULL},
            "--token-file goes with --serve");
    assert_int_equal(
        parse((const char *[]){"--bisect", "a.traj", "a.traj.1", "b.traj", NULL}, &c, err), 0);
    assert_true(c.bisect);
    assert_int_equal(c.files, 2);
    refused((const char *[]){"--bisect", "a.traj", NULL}, "--bisect takes two recordings");
    refused((const char *[]){"--bisect", "--stats", "a.traj", "b.traj", NULL}, "and no other mode");
}

/* No mode, no file, a bad list: refused, naming it. */
static void test_refusals(void **state)
{
    (void)state;
    refused((const char *[]){"r.traj", NULL}, "nothing to do: give --verify, --dump, --stats");
    refused((const char *[]){"--stats", NULL}, "no trajectory file given");
    refused((const char *[]){"--stats", "--env", "1,", "r.traj", NULL},
            "--env '1,': expected up to 64 comma-separated integers");
    refused((const char *[]){"--stats", "--env", "-1", "r.traj", NULL}, "--env '-1'");
    refused((const char *[]){"--stats", "--env", "4294967296", "r.traj", NULL},
            "--env '4294967296'");
    char many[200] = "0";
    for (int i = 1; i <= 64; i++) /* 65 envs */
        snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", i % 10);
    refused((const char *[]){"--stats", "--env", many, "r.traj", NULL}, "expected up to 64");
}

int main(void)
{
#define T(name) cmocka_unit_test_teardown(name, teardown)
    const struct CMUnitTest tests[] = {
        T(test_defaults_and_values), T(test_episode_seek), T(test_fork),
        T(test_serve_and_bisect),    T(test_refusals),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
