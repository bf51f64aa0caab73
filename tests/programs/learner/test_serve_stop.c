/*
 * rollout-learner's serving (programs/learner/serve.c): stream nodes, the
 * welcome and stopping, with what it calls below wrapped
 * (learner_serve_fixture.h). A stream node's segments are counted and
 * acknowledged once half the window is owed or after the loop's turn; bad
 * ones fail the link; the step budget stops every node, owed acks first,
 * and stopping happens once. A welcome starts the lanes (a SEED node's
 * rows, none for a stream node) or, on a misfit, stops all; its errors are
 * returned. A batch without memory stops the learner (exit 1), or goes
 * back unanswered when its rows' memory is missing. The loop's handles
 * close once no link is open and no job is out, once; a TensorBoard file
 * not written makes exit 1 unless an earlier error did.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "learner_serve_fixture.h"

/* A stream node's segments: counted, acknowledged at once when half the
 * window (3) is owed, else at the next check; bad ones fail the link; the
 * step budget sends what is owed and stops every node. */
static void test_stream_acks_and_budget(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    const uint8_t body[1] = {0};
    assert_false(ro__learner_link_ops.on_raw(&n0->link, body, 1)); /* a SEED node's */
    assert_int_equal(w.rx_calls, 0);
    n1->stream = true;
    n1->ack_every = 3;
    w.rx_rc = 1;
    w.rx_steps = 4;
    for (w.rx_ack = 1; w.rx_ack <= 4; w.rx_ack++)
        assert_true(ro__learner_link_ops.on_raw(&n1->link, body, 1));
    assert_int_equal(w.nev, 1); /* segments 1-3 at once */
    assert_int_equal(ev(0, EV_SEND, &n1->link, NULL)->seq, 3);
    assert_int_equal(L->steps, 16);
    assert_int_equal(n1->steps, 16);
    assert_int_equal(n1->episodes, 4);
    assert_true(n1->return_sum == 8.0);
    assert_int_equal(L->batches, 4);
    ro__learner_on_check(&L->check);
    assert_int_equal(ev(1, EV_SEND, &n1->link, NULL)->seq, 4);
    ro__learner_on_check(&L->check);
    assert_int_equal(w.nev, 2);
    w.rx_rc = 0; /* not a segment: decoded as usual */
    assert_false(ro__learner_link_ops.on_raw(&n1->link, body, 1));
    w.rx_rc = RO_EPROTO;
    assert_true(ro__learner_link_ops.on_raw(&n1->link, body, 1));
    ev(2, EV_FAIL, &n1->link, "segment 9: no tensor 'obs'");
    assert_int_equal(L->steps, 16);
    L->cfg.steps = 20;
    w.rx_rc = 1;
    assert_true(ro__learner_link_ops.on_raw(&n1->link, body, 1)); /* ack 5, owed: 20 steps */
    assert_true(L->stopping);
    ev(3, EV_STOP, &n0->link, "step budget reached");
    assert_int_equal(ev(4, EV_SEND, &n1->link, NULL)->seq, 5); /* owed: before the stop */
    ev(5, EV_STOP, &n1->link, "step budget reached");
    assert_int_equal(w.nev, 6);
    const uint32_t calls = w.rx_calls;
    assert_false(ro__learner_link_ops.on_raw(&n1->link, body, 1));
    assert_int_equal(w.rx_calls, calls);
    ro__learner_stop_all(L, "learner stopped by a signal"); /* once only */
    assert_int_equal(w.nev, 6);
}

/* A welcome starts the lanes for a SEED node's rows (none for a stream
 * node); its or their error is returned; a misfit stops every node. */
static void test_welcome(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    Rollout__V1__Welcome wel = ROLLOUT__V1__WELCOME__INIT;
    char err[ERRLEN] = "";
    n1->link.conn.local = true;
    assert_int_equal(ro__learner_link_ops.on_welcome(&n1->link, &wel, err, sizeof err), 0);
    assert_int_equal(w.threads_rows, ENVS);
    assert_true(w.threads_local);
    assert_ptr_equal(w.threads_done, ro__learner_job_done);
    assert_true(L->threads >= 1);
    n0->stream = true;
    assert_int_equal(ro__learner_link_ops.on_welcome(&n0->link, &wel, err, sizeof err), 0);
    assert_int_equal(w.threads_rows, 0);
    assert_false(w.threads_local);
    w.threads_rc = RO_EINVAL;
    assert_int_equal(ro__learner_link_ops.on_welcome(&n1->link, &wel, err, sizeof err), RO_EINVAL);
    assert_string_equal(err, "cannot start 2 workers");
    w.welcome_rc = RO_EPROTO;
    assert_int_equal(ro__learner_link_ops.on_welcome(&n1->link, &wel, err, sizeof err), RO_EPROTO);
    assert_string_equal(err, "a layout not the first node's");
    assert_int_equal(w.threads_calls, 3);
    assert_int_equal(w.nev, 0);
    w.welcome_rc = 0;
    w.misfit = true;
    assert_int_equal(ro__learner_link_ops.on_welcome(&n1->link, &wel, err, sizeof err), 0);
    assert_int_equal(w.threads_calls, 3);
    assert_true(L->stopping);
    ev(0, EV_STOP, &n0->link, "policy does not fit the env");
    ev(1, EV_STOP, &n1->link, "policy does not fit the env");
    assert_int_equal(w.welcomes, 5);
}

/* No memory for a batch: the learner stops, exit 1, naming it. */
static void test_batch_out_of_memory_stops(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    assert_true(give_obs(&L->nodes[1], 1, 0, ENVS, false));
    w.fail_calloc = 1; /* the job */
    ro__learner_on_check(&L->check);
    assert_int_equal(w.fail_calloc, 0);
    assert_int_equal(w.njobs, 0);
    assert_int_equal(L->exit_code, 1);
    assert_string_equal(L->err, "out of memory for a batch");
    ev(0, EV_STOP, &L->nodes[0].link, "out of memory");
    ev(1, EV_STOP, &L->nodes[1].link, "out of memory");
}

/* No memory for a batch's rows: the job goes back as a lane's would,
 * unanswered (the node sends its frames again), the frames freed. */
static void test_batch_rows_out_of_memory(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    assert_true(give_obs(&L->nodes[1], 1, 0, ENVS, false));
    w.fail_calloc = 2; /* the rows' sampling streams */
    ro__learner_on_check(&L->check);
    assert_int_equal(w.njobs, 0);
    assert_non_null(w.sent_back);
    assert_ptr_equal(w.sent_to, &L->fw.done);
    assert_true(w.sent_back->failed);
    assert_int_equal(w.sent_back->rows, ENVS);
    assert_int_equal(L->fw.jobs_out, 1);
    assert_int_equal(L->batches, 1);
    L->fw.jobs_out--;
    ro__learner_job_done(L, w.sent_back);
    assert_int_equal(w.nev, 0);
    assert_int_equal(L->pending.rows, 0);
    assert_int_equal(L->exit_code, 0);
}

/* The loop's handles close once no link is open and no job is out, once. */
static void test_finish_waits_for_links_and_jobs(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    L->nodes[0].link.done = true;
    ro__learner_link_ops.on_down(&L->nodes[0].link);
    assert_false(L->finished);
    L->fw.jobs_out = 1;
    L->nodes[1].link.done = true;
    ro__learner_link_ops.on_down(&L->nodes[1].link);
    assert_int_equal(L->open_links, 0);
    assert_false(L->finished); /* a job is out */
    assert_int_equal(w.releases + w.fw_closes + w.metrics_closes, 0);
    L->fw.jobs_out = 0;
    ro__learner_maybe_finish(L);
    assert_true(L->finished);
    assert_true(uv_is_closing((uv_handle_t *)&L->check));
    assert_int_equal(w.releases, NODES);
    assert_int_equal(w.fw_closes, 1);
    assert_int_equal(w.metrics_closes, 1);
    ro__learner_maybe_finish(L);
    assert_int_equal(w.releases, NODES);
    assert_int_equal(L->exit_code, 0);
}

/* A TensorBoard file not written makes exit 1, unless an earlier error
 * already did (that one is reported). */
static void test_finish_metrics_error(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    w.metrics_rc = RO_EIO;
    L->open_links = 0;
    ro__learner_maybe_finish(L);
    assert_int_equal(L->exit_code, 1);
    assert_string_equal(L->err, "could not write the TensorBoard events in tb-dir");
}

static void test_finish_metrics_error_after_another(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    w.metrics_rc = RO_EIO;
    L->open_links = 0;
    L->exit_code = 1;
    ro__learner_maybe_finish(L);
    assert_int_equal(w.metrics_closes, 1);
    assert_string_equal(L->err, "");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_stream_acks_and_budget),
        T(test_welcome),
        T(test_batch_out_of_memory_stops),
        T(test_batch_rows_out_of_memory),
        T(test_finish_waits_for_links_and_jobs),
        T(test_finish_metrics_error),
        T(test_finish_metrics_error_after_another),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
