/*
 * rollout-learner's forward passes (programs/learner/forward.c) over a
 * discrete MLP: a job of several frames gets, row for row, the actions
 * ro__policy_act gives over the same rows with the same sampling streams,
 * whether the loop thread runs it (workers 0: on_done before submit
 * returns) or two pinned workers do (jobs round robin, each lane's scratch
 * grown to its largest job, every job back on the loop's done actor); more
 * workers than allowed CPUs are refused naming --overcommit; a lane whose
 * scratch cannot be allocated (ro__policy_ws_new wrapped to fail) marks the
 * job failed, computes nothing, and runs the next job. Every wait is for a
 * job coming back (loop_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "learner/forward.h"
#include "loop_fixture.h"
#include "runtime/error.h"

#define OBS 4
#define ACTS 3
#define MAX_ROWS 16
#define MAX_JOBS 4

/* ro__policy_ws_new fails while fail_ws is set (the lane's scratch). */
int __real_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch);
static bool fail_ws;
int __wrap_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch);
int __wrap_ro__policy_ws_new(ro_policy_ws_t **out, const ro_policy_t *p, uint32_t max_batch)
{
    if (fail_ws)
        return RO_ENOMEM;
    return __real_ro__policy_ws_new(out, p, max_batch);
}

/* One job with its frames, their observations, rows' streams and room for
 * the actions. */
typedef struct test_job {
    ro_job_t j;
    ro_pending_t *p[3];
    float obs[MAX_ROWS * OBS];
    ro_rng_t rng[MAX_ROWS];
    ro_rng_t *rowrng[MAX_ROWS];
    int32_t act_i[MAX_ROWS];
    float act_f[MAX_ROWS];
    bool back;
    bool back_on_loop; /* on_done came while the loop ran (not inside submit) */
} test_job_t;

typedef struct fixture {
    uv_loop_t loop;
    ro_policy_t *policy;
    ro_forward_t fw;
    test_job_t jobs[MAX_JOBS];
    uint32_t done;
    bool in_submit;
} fixture_t;

static void on_done(void *ctx, ro_job_t *j)
{
    fixture_t *f = ctx;
    test_job_t *tj = ro__container_of(j, test_job_t, j);
    assert_false(tj->back); /* once */
    tj->back = true;
    tj->back_on_loop = !f->in_submit;
    f->done++;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {OBS}};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = ACTS};
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .activation = RO_ACT_TANH, .seed = 11};
    spec.hidden[0] = 16;
    spec.nhidden = 1;
    char err[256] = "";
    if (ro__policy_new(&f->policy, &spec, &obs, &act, err, sizeof err) != 0)
        fail_msg("ro__policy_new: %s", err);
    f->fw.policy = f->policy;
    f->fw.obs_dim = OBS;
    fail_ws = false;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    loop_finish(&f->loop); /* the done handle closed (main thread after the loop, as main.c) */
    ro__forward_stop(&f->fw);
    for (int k = 0; k < MAX_JOBS; k++)
        for (int i = 0; i < 3; i++)
            free(f->jobs[k].p[i]);
    ro__policy_free(f->policy);
    free(f);
    return 0;
}

/* make_job builds job k of frames of rows[0..nframes) rows: observations
 * and streams seeded from k, actions set to -1 (not written). */
static ro_job_t *make_job(fixture_t *f, int k, const uint32_t *rows, int nframes)
{
    test_job_t *tj = &f->jobs[k];
    uint32_t r = 0;
    ro_batch_item_t **tail = &tj->j.frames;
    for (int i = 0; i < nframes; i++) {
        ro_pending_t *p = calloc(1, sizeof *p);
        assert_non_null(p);
        tj->p[i] = p;
        p->item.rows = rows[i];
        p->obs = tj->obs + (size_t)r * OBS;
        *tail = &p->item;
        tail = &p->item.next;
        r += rows[i];
    }
    assert_true(r <= MAX_ROWS);
    ro_rng_t in;
    ro__rng_init(&in, 100 + (uint64_t)k);
    for (uint32_t i = 0; i < r * OBS; i++)
        tj->obs[i] = (float)ro__rng_uniform(&in, -3.0, 3.0);
    for (uint32_t i = 0; i < r; i++) {
        ro__rng_init(&tj->rng[i], 1000 * (uint64_t)(k + 1) + i);
        tj->rowrng[i] = &tj->rng[i];
        tj->act_i[i] = -1;
    }
    tj->j.rows = r;
    tj->j.rowrng = tj->rowrng;
    tj->j.act_i = tj->act_i;
    tj->j.act_f = tj->act_f;
    return &tj->j;
}

/* check_job: job k's actions are ro__policy_act's over its rows with the
 * streams its rows started from, and each stream was drawn as far. */
static void check_job(fixture_t *f, int k)
{
    test_job_t *tj = &f->jobs[k];
    uint32_t n = tj->j.rows;
    ro_policy_ws_t *ws = NULL;
    assert_int_equal(ro__policy_ws_new(&ws, f->policy, n), 0);
    memcpy(ro__policy_ws_input(ws), tj->obs, (size_t)n * OBS * sizeof(float));
    ro_rng_t rng[MAX_ROWS];
    ro_rng_t *rngs[MAX_ROWS];
    int32_t want[MAX_ROWS];
    float want_f[MAX_ROWS];
    for (uint32_t i = 0; i < n; i++) {
        ro__rng_init(&rng[i], 1000 * (uint64_t)(k + 1) + i);
        rngs[i] = &rng[i];
    }
    ro__policy_act(f->policy, ws, n, rngs, want, want_f, NULL, NULL);
    ro__policy_ws_free(ws);
    assert_false(tj->j.failed);
    for (uint32_t i = 0; i < n; i++) {
        assert_in_range(tj->act_i[i], 0, ACTS - 1);
        assert_int_equal(tj->act_i[i], want[i]);
        assert_int_equal(ro__rng_next(&tj->rng[i]), ro__rng_next(&rng[i]));
    }
}

/* Workers 0: the loop thread runs the job inside submit and hands it to
 * on_done there; three frames' rows in order get the policy's actions. */
static void test_inline_lane(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    assert_int_equal(ro__forward_start(&f->fw, &f->loop, 0, false, on_done, f, err, sizeof err), 0);
    assert_true(f->fw.inline_lane);
    assert_int_equal(f->fw.nlanes, 1);
    const uint32_t rows[3] = {2, 5, 1};
    ro_job_t *j = make_job(f, 0, rows, 3);
    f->in_submit = true;
    ro__forward_submit(&f->fw, j);
    f->in_submit = false;
    assert_true(f->jobs[0].back);
    assert_false(f->jobs[0].back_on_loop);
    assert_int_equal(f->fw.jobs_out, 0);
    assert_int_equal(f->fw.lanes[0].ws_rows, 8);
    check_job(f, 0);
    ro__forward_close(&f->fw);
}

static bool all_back(void *ctx)
{
    const fixture_t *f = ctx;
    return f->done == MAX_JOBS;
}

/* Two workers: four jobs go round robin (lane 0 takes jobs 0 and 2, lane
 * 1 jobs 1 and 3: each lane's scratch holds its largest), come back through
 * the loop, and carry the same actions as ro__policy_act gives. */
static void test_workers_round_robin(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    int rc = ro__forward_start(&f->fw, &f->loop, 2, true, on_done, f, err, sizeof err);
    if (rc)
        fail_msg("ro__forward_start: %d %s", rc, err);
    assert_false(f->fw.inline_lane);
    assert_int_equal(f->fw.nlanes, 2);
    const uint32_t rows[MAX_JOBS][2] = {{3, 4}, {1, 1}, {9, 2}, {5, 0}};
    f->in_submit = true;
    for (int k = 0; k < MAX_JOBS; k++)
        ro__forward_submit(&f->fw, make_job(f, k, rows[k], rows[k][1] ? 2 : 1));
    f->in_submit = false;
    loop_wait(&f->loop, all_back, f, "every job back from the lanes");
    assert_int_equal(f->fw.jobs_out, 0);
    for (int k = 0; k < MAX_JOBS; k++) {
        assert_true(f->jobs[k].back_on_loop);
        check_job(f, k);
    }
    assert_int_equal(f->fw.lanes[0].ws_rows, 11); /* jobs 0 (7 rows) and 2 (11) */
    assert_int_equal(f->fw.lanes[1].ws_rows, 5);  /* jobs 1 (2 rows) and 3 (5) */
    ro__forward_close(&f->fw);
}

/* More workers than allowed CPUs, without --overcommit: refused by name,
 * nothing started. */
static void test_too_many_workers(void **state)
{
    fixture_t *f = *state;
    ro_topology_t topo = {0};
    char err[256] = "";
    assert_int_equal(ro__topology_read(&topo, err, sizeof err), 0);
    int ncpus = topo.ncpus;
    ro__topology_free(&topo);
    assert_int_equal(ro__forward_start(&f->fw, &f->loop, (uint32_t)ncpus + 1, false, on_done, f,
                                       err, sizeof err),
                     RO_ERANGE);
    char want[64];
    snprintf(want, sizeof want, "only %d CPUs are allowed", ncpus);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "--overcommit"));
    assert_null(f->fw.sched);
}

/* A lane that cannot grow its scratch: the job comes back failed with no
 * action written; the next job, with memory again, is computed. */
static void test_no_scratch_fails_the_job(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    assert_int_equal(ro__forward_start(&f->fw, &f->loop, 0, false, on_done, f, err, sizeof err), 0);
    const uint32_t rows[1] = {4};
    fail_ws = true;
    ro__forward_submit(&f->fw, make_job(f, 0, rows, 1));
    fail_ws = false;
    assert_true(f->jobs[0].back);
    assert_true(f->jobs[0].j.failed);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f->jobs[0].act_i[i], -1);
    assert_int_equal(f->fw.lanes[0].ws_rows, 0);
    ro__forward_submit(&f->fw, make_job(f, 1, rows, 1));
    assert_true(f->jobs[1].back);
    check_job(f, 1);
    ro__forward_close(&f->fw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inline_lane, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workers_round_robin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_many_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_scratch_fails_the_job, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
