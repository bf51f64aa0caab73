/*
 * rollout-replay --fork (programs/replay/fork.c) on a CartPole recording
 * made here (tests/recording_fixture.h, a snapshot of every env every 10
 * steps): replayed to STEP, the envs go on with a random policy for the
 * steps asked and the new recording names its parent and STEP, holds the
 * steps taken, and is itself replayed bit for bit (--verify). --env forks
 * only those envs. The same --seed makes the same actions, another seed
 * others. A replay that did not reach STEP, or a policy file that is not
 * there, is refused by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "recording_fixture.h"
#include "replay/fork.h"
#include "replay/replay.h"
#include "tmpdir_fixture.h"
#include "trajectory/reader.h"

static char parent[256];

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

static int group_setup(void **state)
{
    (void)state;
    if (tmpdir_create("fork") != 0)
        return -1;
    path_of(parent, sizeof parent, "parent.traj");
    record_steps_snap(parent, 60, 0, 10); /* 4 envs x 60 steps */
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

/* fork replays parent to step, then forks with policy for steps into out
 * (envs: NULL for all; seed: NULL for the recording's); the exit status,
 * its log in *log (free it). fed: whether to feed the parent at all. */
static int fork_run(uint64_t step, const char *policy, uint64_t steps, const char *out,
                    const uint32_t *envs, size_t nenvs, const uint64_t *seed, bool fed, char **log)
{
    size_t len;
    FILE *lf = open_memstream(log, &len), *devnull = fopen("/dev/null", "w");
    assert_true(lf && devnull);
    ro_replay_opts_t o = {.verify = true,
                          .resync = true,
                          .from_set = true,
                          .from = step,
                          .until_set = true,
                          .until = step,
                          .out = devnull,
                          .log = lf};
    for (size_t i = 0; i < nenvs; i++)
        o.envs.v[i] = envs[i];
    o.envs.n = nenvs;
    ro_replay_t *r;
    assert_int_equal(ro__replay_new(&r, &o), 0);
    int rc = fed ? ro__replay_feed_path(r, parent) : RO_REPLAY_OK;
    int fin = ro__replay_finish(r);
    if (rc == RO_REPLAY_OK && fin == RO_REPLAY_OK) {
        ro_fork_opts_t fo = {.step = step,
                             .policy = policy,
                             .steps = steps,
                             .out = out,
                             .parent = parent,
                             .seed_set = seed != NULL,
                             .seed = seed ? *seed : 0};
        fin = ro__replay_fork(r, &fo);
    }
    ro__replay_free(r);
    fclose(lf);
    fclose(devnull);
    return rc != RO_REPLAY_OK ? rc : fin;
}

/* verify replays path (--verify): its exit status; its log in *log. */
static int verify(const char *path, char **log)
{
    size_t len;
    FILE *lf = open_memstream(log, &len), *devnull = fopen("/dev/null", "w");
    assert_true(lf && devnull);
    ro_replay_opts_t o = {.verify = true, .resync = true, .out = devnull, .log = lf};
    ro_replay_t *r;
    assert_int_equal(ro__replay_new(&r, &o), 0);
    int rc = ro__replay_feed_path(r, path);
    int fin = ro__replay_finish(r);
    ro__replay_free(r);
    fclose(lf);
    fclose(devnull);
    return rc != RO_REPLAY_OK ? rc : fin;
}

/* header_of: path's parent, parent_step and env steps recorded. */
static void header_of(const char *path, char *par, size_t plen, uint64_t *pstep, uint64_t *steps)
{
    size_t len;
    uint8_t *data = slurp_file(path, &len);
    assert_non_null(data);
    ro_traj_reader_t rd;
    char err[512];
    assert_int_equal(ro__traj_reader_open(&rd, data, len, false, err, sizeof err), 0);
    snprintf(par, plen, "%s", rd.hdr->parent ? rd.hdr->parent : "");
    *pstep = rd.hdr->parent_step;
    *steps = 0;
    Rollout__V1__TransitionBatch *b;
    ro_traj_event_t ev;
    while ((ev = ro__traj_reader_next(&rd, &b)) != RO_TRAJ_EOF) {
        assert_int_equal(ev, RO_TRAJ_BATCH);
        for (size_t k = 0; k < b->n_env; k++)
            *steps += !(b->flags[k] & RO_TRAJ_RESET);
        ro__traj_batch_free(&rd, b);
    }
    ro__traj_reader_close(&rd);
    free(data);
}

/* actions_of: the actions of path's steps, in order (at most cap). */
static size_t actions_of(const char *path, int32_t *out, size_t cap)
{
    size_t len, n = 0;
    uint8_t *data = slurp_file(path, &len);
    assert_non_null(data);
    ro_traj_reader_t rd;
    char err[512];
    assert_int_equal(ro__traj_reader_open(&rd, data, len, false, err, sizeof err), 0);
    Rollout__V1__TransitionBatch *b;
    while (ro__traj_reader_next(&rd, &b) == RO_TRAJ_BATCH) {
        for (size_t k = 0; k < b->n_env; k++)
            if (!(b->flags[k] & RO_TRAJ_RESET) && n < cap)
                out[n++] = b->action[k];
        ro__traj_batch_free(&rd, b);
    }
    ro__traj_reader_close(&rd);
    free(data);
    return n;
}

/* The fork: its steps, its parent and STEP named, and replayed bit for
 * bit; --env forks only those envs. */
static void test_fork_verifies(void **state)
{
    (void)state;
    char out[300], *log, par[256];
    path_of(out, sizeof out, "all.traj");
    assert_int_equal(fork_run(100, "random", 40, out, NULL, 0, NULL, true, &log), RO_REPLAY_OK);
    char want[700];
    snprintf(want, sizeof want, "rollout-replay: fork: 40 steps of 4 env(s) from step 100 of %s",
             parent);
    if (!strstr(log, want))
        fail_msg("no \"%s\" in:\n%s", want, log);
    free(log);
    uint64_t pstep, steps;
    header_of(out, par, sizeof par, &pstep, &steps);
    assert_string_equal(par, parent);
    assert_int_equal(pstep, 100);
    assert_int_equal(steps, 40);
    assert_int_equal(verify(out, &log), RO_REPLAY_OK);
    free(log);
    path_of(out, sizeof out, "two.traj");
    assert_int_equal(
        fork_run(100, "random", 10, out, (const uint32_t[]){1, 3}, 2, NULL, true, &log),
        RO_REPLAY_OK);
    assert_non_null(strstr(log, "fork: 10 steps of 2 env(s)"));
    free(log);
    assert_int_equal(verify(out, &log), RO_REPLAY_OK);
    free(log);
}

/* The same --seed, the same fork; another seed, another. */
static void test_seed(void **state)
{
    (void)state;
    char a[300], b[300], c[300], *log;
    const uint64_t s1 = 5, s2 = 6;
    path_of(a, sizeof a, "s1a.traj");
    path_of(b, sizeof b, "s1b.traj");
    path_of(c, sizeof c, "s2.traj");
    assert_int_equal(fork_run(80, "random", 40, a, NULL, 0, &s1, true, &log), RO_REPLAY_OK);
    free(log);
    assert_int_equal(fork_run(80, "random", 40, b, NULL, 0, &s1, true, &log), RO_REPLAY_OK);
    free(log);
    assert_int_equal(fork_run(80, "random", 40, c, NULL, 0, &s2, true, &log), RO_REPLAY_OK);
    free(log);
    int32_t xa[64], xb[64], xc[64]; /* the actions the forks took */
    const size_t na = actions_of(a, xa, 64), nb = actions_of(b, xb, 64), nc = actions_of(c, xc, 64);
    assert_int_equal(na, 40);
    assert_true(na == nb && memcmp(xa, xb, na * sizeof *xa) == 0);
    assert_true(na == nc);
    assert_memory_not_equal(xa, xc, na * sizeof *xa);
}

/* Refused by name: a replay that did not reach the step; a policy file
 * that is not there. */
static void test_refused(void **state)
{
    (void)state;
    char out[300], *log;
    path_of(out, sizeof out, "no.traj");
    assert_int_equal(fork_run(100, "random", 8, out, NULL, 0, NULL, false, &log), RO_REPLAY_FAILED);
    assert_non_null(strstr(log, "rollout-replay: --fork: the recording did not replay up to step "
                                "100"));
    free(log);
    assert_int_equal(fork_run(100, "/nonexistent/p.pb", 8, out, NULL, 0, NULL, true, &log),
                     RO_REPLAY_UNUSABLE);
    assert_non_null(strstr(log, "rollout-replay: --fork: --policy /nonexistent/p.pb: "));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_verifies),
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
