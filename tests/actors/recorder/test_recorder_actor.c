/* The recorder (actors/recorder/recorder_actor.c) driven by the test thread as a
 * shard would drive it: every step lands in the file in order, files rotate
 * at --record-max-bytes with every part whole, a torn tail loses only the
 * record it cuts, a full pool makes the shard wait until the I/O thread
 * hands it a chunk (an event on a loop, no clock), and drop mode counts
 * what it loses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "recording_fixture.h"
#include "tmpdir_fixture.h"

static void tmp_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

/* What a file (or a run of parts) holds, entry by entry. */
typedef struct contents {
    uint64_t batches, steps, resets, dropped;
    uint64_t cut_short, corrupt;
    /* Per env: the episode and step the next entry must have. */
    uint64_t episode[REC_ENVS];
    uint32_t next_step[REC_ENVS];
    bool started[REC_ENVS];
} contents_t;

/* Reads data into c, checking that each env's entries run reset, 1, 2, ...
 * and that an ended episode is followed by the next one's reset. */
static void read_into(contents_t *c, const uint8_t *data, size_t len)
{
    ro_traj_reader_t r;
    char err[512];
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    Rollout__V1__TransitionBatch *b;
    ro_traj_event_t ev;
    while ((ev = ro__traj_reader_next(&r, &b)) != RO_TRAJ_EOF) {
        if (ev == RO_TRAJ_CUT_SHORT) {
            c->cut_short++;
            continue;
        }
        if (ev != RO_TRAJ_BATCH) {
            c->corrupt++;
            continue;
        }
        c->batches++;
        c->dropped += b->dropped;
        for (size_t k = 0; k < b->n_env; k++) {
            uint32_t e = b->env[k];
            assert_true(e < REC_ENVS);
            if (b->flags[k] & RO_TRAJ_RESET) {
                assert_int_equal(b->step[k], 0);
                if (c->started[e])
                    assert_int_equal(b->episode[k], c->episode[e]);
                c->started[e] = true;
                c->episode[e] = b->episode[k];
                c->next_step[e] = 1;
                c->resets++;
                continue;
            }
            assert_true(c->started[e]);
            assert_int_equal(b->episode[k], c->episode[e]);
            assert_int_equal(b->step[k], c->next_step[e]);
            c->next_step[e]++;
            c->steps++;
            if (b->flags[k] & (RO_TRAJ_TERMINATED | RO_TRAJ_TRUNCATED))
                c->episode[e]++; /* its reset comes next */
        }
        ro__traj_batch_free(&r, b);
    }
    ro__traj_reader_close(&r);
}

static void test_every_step_in_order(void **state)
{
    (void)state;
    char p[256];
    tmp_path(p, sizeof p, "all.traj");
    ro_recorder_stats_t st = record_steps(p, 300, 0);
    assert_int_equal(st.transitions, 300 * REC_ENVS);
    assert_int_equal(st.files, 1);
    assert_false(st.failed);
    size_t len;
    uint8_t *data = slurp_file(p, &len);
    assert_non_null(data);
    assert_int_equal(len, st.bytes);
    contents_t c = {0};
    read_into(&c, data, len);
    assert_int_equal(c.batches, 301); /* the reset, then one record per shard step */
    assert_int_equal(c.steps, 300 * REC_ENVS);
    assert_int_equal(c.resets, st.resets);
    assert_true(c.resets > REC_ENVS); /* episodes ended and restarted */
    assert_int_equal(c.cut_short + c.corrupt + c.dropped, 0);
    free(data);
}

/* --record-max-bytes: parts p, p.1, p.2 ..., each at most the limit, each
 * with its own header, together every step in order. */
static void test_rotation(void **state)
{
    (void)state;
    enum { MAX = 8192 };
    char p[256], q[300];
    tmp_path(p, sizeof p, "rot.traj");
    ro_recorder_stats_t st = record_steps(p, 2000, MAX);
    assert_true(st.files > 2);
    contents_t c = {0};
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < st.files; k++) {
        if (k == 0)
            snprintf(q, sizeof q, "%s", p);
        else
            snprintf(q, sizeof q, "%s.%u", p, k);
        size_t len;
        uint8_t *data = slurp_file(q, &len);
        assert_non_null(data);
        assert_true(len <= MAX);
        bytes += len;
        ro_traj_reader_t r;
        char err[512];
        assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
        assert_int_equal(r.hdr->part, k);
        ro__traj_reader_close(&r);
        read_into(&c, data, len); /* continues across parts */
        free(data);
    }
    snprintf(q, sizeof q, "%s.%u", p, st.files);
    assert_int_equal(access(q, F_OK), -1); /* no part beyond the count */
    assert_int_equal(bytes, st.bytes);
    assert_int_equal(c.steps, 2000 * REC_ENVS);
    assert_int_equal(c.cut_short + c.corrupt, 0);
}

/* A file cut anywhere inside its last record (a crash mid-write): every
 * record before it is read whole, the cut is reported, nothing is called
 * damaged. */
static void test_torn_tail(void **state)
{
    (void)state;
    char p[256];
    tmp_path(p, sizeof p, "torn.traj");
    record_steps(p, 50, 0);
    size_t len;
    uint8_t *data = slurp_file(p, &len);
    assert_non_null(data);
    /* Where the last record begins. */
    ro_traj_reader_t r;
    char err[512];
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    size_t last = r.off;
    Rollout__V1__TransitionBatch *b;
    uint64_t whole = 0;
    for (;;) {
        size_t at = r.off;
        ro_traj_event_t ev = ro__traj_reader_next(&r, &b);
        if (ev == RO_TRAJ_EOF)
            break;
        assert_int_equal(ev, RO_TRAJ_BATCH);
        ro__traj_batch_free(&r, b);
        last = at;
        whole++;
    }
    ro__traj_reader_close(&r);
    assert_int_equal(whole, 51);
    for (size_t cut = last + 1; cut < len; cut++) {
        contents_t c = {0};
        read_into(&c, data, cut);
        assert_int_equal(c.batches, whole - 1);
        assert_int_equal(c.cut_short, 1);
        assert_int_equal(c.corrupt, 0);
    }
    free(data);
}

/* ---- a full pool: the shard waits for RO_MSG_RECORD_RESUME ---- */

static void test_full_pool_makes_the_shard_wait(void **state)
{
    (void)state;
    char p[256];
    tmp_path(p, sizeof p, "wait.traj");
    recording_t t;
    recording_open(&t, p, 0, 2, false); /* two chunks; the I/O thread not started */
    shard_reset(&t.sh);
    assert_false(rec_capture(&t, true)); /* chunk 1 */
    shard_step(&t.sh, 0);
    assert_false(rec_capture(&t, false)); /* chunk 2 */
    shard_step(&t.sh, 1);
    /* None left, and nobody writes: the shard must wait. */
    assert_false(ro__recorder_capture(t.port, false));
    uint64_t waits, dropped;
    ro__recorder_pressure(t.rec, &waits, &dropped);
    assert_int_equal(waits, 1);
    assert_int_equal(dropped, 0);
    /* The I/O thread writes the two chunks and hands one to the shard,
     * whose RO_MSG_RECORD_RESUME records the step that waited. */
    recording_start(&t);
    t.resumed = false;
    t.waited = 1;
    assert_int_equal(uv_timer_start(&t.guard, rec_on_guard, REC_HANG_GUARD_MS, 0), 0);
    while (!t.resumed && !t.timed_out)
        uv_run(&t.loop, UV_RUN_ONCE);
    uv_timer_stop(&t.guard);
    if (!t.resumed)
        fail_msg("the recorder never handed the waiting shard a chunk (RO_MSG_RECORD_RESUME)");
    ro_recorder_stats_t st;
    recording_close(&t, &st);
    assert_int_equal(st.transitions, 2 * REC_ENVS); /* the step that waited is there */
    assert_int_equal(st.waits, 1);
    size_t len;
    uint8_t *data = slurp_file(p, &len);
    contents_t c = {0};
    read_into(&c, data, len);
    assert_int_equal(c.batches, 3);
    assert_int_equal(c.steps, 2 * REC_ENVS);
    free(data);
}

/* --record-full drop: a capture that finds no chunk goes on, counted; the
 * file says how many shard steps are missing. */
static void test_drop_mode_counts(void **state)
{
    (void)state;
    char p[256];
    tmp_path(p, sizeof p, "drop.traj");
    recording_t t;
    recording_open(&t, p, 0, 2, true); /* the I/O thread not started: nothing comes back */
    shard_reset(&t.sh);
    assert_true(ro__recorder_capture(t.port, true));
    shard_step(&t.sh, 0);
    assert_true(ro__recorder_capture(t.port, false));
    for (uint64_t k = 1; k <= 3; k++) {
        shard_step(&t.sh, k);
        assert_true(ro__recorder_capture(t.port, false)); /* no chunk: dropped, not waited */
    }
    uint64_t waits, dropped;
    ro__recorder_pressure(t.rec, &waits, &dropped);
    assert_int_equal(waits, 0);
    assert_int_equal(dropped, 3 * REC_ENVS);
    recording_start(&t);
    ro_recorder_stats_t st;
    recording_close(&t, &st);
    assert_int_equal(st.transitions, REC_ENVS);
    assert_int_equal(st.dropped_steps, 3 * REC_ENVS);
    size_t len;
    uint8_t *data = slurp_file(p, &len);
    contents_t c = {0};
    read_into(&c, data, len);
    assert_int_equal(c.steps, REC_ENVS);
    assert_int_equal(c.dropped, 3); /* shard steps, said in the file */
    free(data);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("recorder");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_step_in_order),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_full_pool_makes_the_shard_wait),
        cmocka_unit_test(test_drop_mode_counts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
