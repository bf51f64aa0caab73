/* Replay (programs/replay/replay.c) against recordings whose every entry the test
 * knows (tests/recording_fixture.h): an untouched one verifies, and one in
 * which the test changed what the env reported is caught at the first
 * entry that differs (env, episode, step, field), not at a later one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "recording_fixture.h"
#include "replay/replay.h"
#include "tmpdir_fixture.h"

static void tmp_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

/* rollout-replay --verify over parts; returns the exit status, the log in
 * *log (free it). */
static int verify(const char *const *paths, size_t n, char **log)
{
    size_t loglen;
    FILE *lf = open_memstream(log, &loglen);
    FILE *out = fopen("/dev/null", "w");
    assert_non_null(lf);
    assert_non_null(out);
    ro_replay_opts_t o = {.verify = true, .resync = true, .out = out, .log = lf};
    ro_replay_t *r;
    assert_int_equal(ro__replay_new(&r, &o), 0);
    int rc = RO_REPLAY_OK;
    for (size_t i = 0; i < n && rc == RO_REPLAY_OK; i++) {
        size_t len;
        uint8_t *data = slurp_file(paths[i], &len);
        assert_non_null(data);
        rc = ro__replay_feed(r, paths[i], data, len);
        free(data);
    }
    int fin = ro__replay_finish(r);
    ro__replay_free(r);
    fclose(out);
    fclose(lf);
    return rc != RO_REPLAY_OK ? rc : fin;
}

static void test_untouched_recording_verifies(void **state)
{
    (void)state;
    char p[256], q[300];
    tmp_path(p, sizeof p, "ok.traj");
    ro_recorder_stats_t st = record_steps(p, 200, 4096); /* in several parts */
    assert_true(st.files > 1);
    const char *paths[64];
    char names[64][300];
    assert_true(st.files <= 64);
    for (uint32_t k = 0; k < st.files; k++) {
        if (k == 0)
            snprintf(names[k], sizeof names[k], "%s", p);
        else
            snprintf(names[k], sizeof names[k], "%s.%u", p, k);
        paths[k] = names[k];
    }
    char *log = NULL;
    int rc = verify(paths, st.files, &log);
    if (rc != RO_REPLAY_OK)
        fail_msg("verify failed: %s", log);
    snprintf(q, sizeof q, "verify OK: %" PRIu64 " steps and %" PRIu64 " resets", st.transitions,
             st.resets);
    if (!strstr(log, q))
        fail_msg("expected '%s' in: %s", q, log);
    assert_null(strstr(log, "divergence"));
    free(log);
}

/* The entry the recorder wrote for env e in shard step k (the batch after
 * k + 1 others: the reset came first): its record, episode and step. */
static void recorded_entry(const char *path, uint64_t k, uint32_t e, uint64_t *record,
                           uint64_t *episode, uint32_t *step)
{
    size_t len;
    uint8_t *data = slurp_file(path, &len);
    ro_traj_reader_t r;
    char err[512];
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    Rollout__V1__TransitionBatch *b;
    bool found = false;
    for (uint64_t i = 0; !found && ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH; i++) {
        if (i == k + 1)
            for (size_t j = 0; j < b->n_env; j++)
                if (b->env[j] == e && !(b->flags[j] & RO_TRAJ_RESET)) {
                    *record = b->record;
                    *episode = b->episode[j];
                    *step = b->step[j];
                    found = true;
                }
        ro__traj_batch_free(&r, b);
    }
    ro__traj_reader_close(&r);
    free(data);
    assert_true(found);
}

/* Records 40 shard steps; from step `from` on, at the first step where
 * envs 2 and 3 both go on (no episode end: their obs is what replay
 * re-steps), the test changes obs[0] of env 2 and obs[1] of env 3 (same
 * record, env 2 first), and later the reward of env 1. Returns that step. */
static uint64_t record_tampered(const char *path, uint64_t from)
{
    recording_t t;
    recording_open(&t, path, 0, 0, false);
    recording_start(&t);
    shard_reset(&t.sh);
    rec_capture(&t, true);
    uint64_t tampered = UINT64_MAX;
    const uint32_t od = t.sh.xchg.obs_dim;
    for (uint64_t k = 0; k < 40; k++) {
        shard_step(&t.sh, k);
        if (tampered == UINT64_MAX && k >= from && !t.sh.xchg.has_final[2] &&
            !t.sh.xchg.has_final[3]) {
            /* The env would not return these: the recording is wrong here. */
            t.sh.xchg.obs[2 * od + 0] += 0.5f;
            t.sh.xchg.obs[3 * od + 1] += 0.25f;
            tampered = k;
        }
        if (tampered != UINT64_MAX && k == tampered + 5)
            t.sh.xchg.reward[1] += 1.0f;
        rec_capture(&t, false);
        if (k == tampered) { /* put the env's true state back: it steps on from it */
            t.sh.xchg.obs[2 * od + 0] -= 0.5f;
            t.sh.xchg.obs[3 * od + 1] -= 0.25f;
        }
    }
    recording_close(&t, NULL);
    assert_true(tampered != UINT64_MAX);
    return tampered;
}

static void test_first_divergence_is_found(void **state)
{
    (void)state;
    char p[256];
    tmp_path(p, sizeof p, "bad.traj");
    uint64_t k = record_tampered(p, 12);
    uint64_t record = 0, episode = 0;
    uint32_t step = 0;
    recorded_entry(p, k, 2, &record, &episode, &step);
    const char *paths[] = {p};
    char *log = NULL;
    assert_int_equal(verify(paths, 1, &log), RO_REPLAY_FAILED);
    /* One divergence reported: the first, env 2's obs[0]; not env 3 in the
     * same record, not env 1's reward later. */
    char want[512];
    snprintf(want, sizeof want,
             "divergence in %s (record %" PRIu64 "): env 2, episode %" PRIu64
             ", step %u, obs[0]: recorded ",
             p, record, episode, step);
    if (!strstr(log, want))
        fail_msg("expected '%s' in: %s", want, log);
    const char *first = strstr(log, "divergence in");
    assert_null(strstr(first + 1, "divergence in"));
    assert_null(strstr(log, "env 3,"));
    assert_null(strstr(log, "reward"));
    free(log);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("replay");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_untouched_recording_verifies),
        cmocka_unit_test(test_first_divergence_is_found),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
