/*
 * rollout-learner's --tensorboard and --prometheus (programs/learner/
 * metrics.c), with the exporters wrapped (-Wl,--wrap): the test keeps the
 * render callback and every scalar, histogram and event the intervals
 * write. Nothing asked for: nothing opened, no timer. An open that fails
 * is returned and starts nothing. Each interval (the timer's, then the
 * last at close) writes rates over its own time and steps (an interval
 * without episodes leaves their mean out: NaN), the totals over the nodes,
 * stream figures only once segments came, the interval's histograms, an
 * event at the steps answered; the Prometheus page sums the nodes (the
 * newest version over nodes that sent segments only), labels every sample
 * with the learner's name, and its histograms hold every interval's rows.
 * Close returns the event file's failure and is harmless again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/clock.h"
#include "runtime/error.h"

#define ERRLEN 256
#define MAX_SCALARS 32

/* What the wrapped exporters saw, and answer. Reset per test. */
static struct {
    int open_rc, close_rc;
    uint32_t opens, closes;
    const char *tensorboard, *prometheus;
    ro_http_render_fn render;
    void *ctx;
    struct {
        char tag[64];
        double v;
    } s[MAX_SCALARS];
    uint32_t ns, events;
    uint64_t histo_n[2]; /* batch_rows, episode_return: values in the event's */
    uint64_t step;
} w;

static ro_tb_writer_t fake_tb; /* never written: the calls are the test's */

int __wrap_ro__exporters_open(ro_exporters_t *x, uv_loop_t *loop, const char *tensorboard,
                              const char *prometheus, const char *program, ro_http_render_fn render,
                              void *ctx, char *err, size_t errlen);
int __wrap_ro__exporters_open(ro_exporters_t *x, uv_loop_t *loop, const char *tensorboard,
                              const char *prometheus, const char *program, ro_http_render_fn render,
                              void *ctx, char *err, size_t errlen)
{
    (void)x, (void)loop;
    assert_string_equal(program, "rollout-learner");
    w.opens++;
    w.tensorboard = tensorboard, w.prometheus = prometheus;
    w.render = render, w.ctx = ctx;
    return w.open_rc ? ro__errorf(err, errlen, w.open_rc, "--prometheus: address in use") : 0;
}

ro_tb_writer_t *__wrap_ro__exporters_tb(ro_exporters_t *x);
ro_tb_writer_t *__wrap_ro__exporters_tb(ro_exporters_t *x)
{
    (void)x;
    return w.tensorboard ? &fake_tb : NULL;
}

void __wrap_ro__tb_scalar(ro_tb_writer_t *t, const char *tag, double v);
void __wrap_ro__tb_scalar(ro_tb_writer_t *t, const char *tag, double v)
{
    assert_ptr_equal(t, &fake_tb);
    assert_true(w.ns < MAX_SCALARS);
    snprintf(w.s[w.ns].tag, sizeof w.s[0].tag, "%s", tag);
    w.s[w.ns++].v = v;
}

void __wrap_ro__tb_histo(ro_tb_writer_t *t, const char *tag, const ro_histo_t *h);
void __wrap_ro__tb_histo(ro_tb_writer_t *t, const char *tag, const ro_histo_t *h)
{
    assert_ptr_equal(t, &fake_tb);
    w.histo_n[strcmp(tag, "learner/batch_rows") == 0 ? 0 : 1] = h->n;
}

/* A timer stopped by its first event (test_intervals): libuv's UV_RUN_ONCE
 * runs due timers before and after it polls, so on a slow machine one run
 * could end a second, empty interval right after the first. */
static uv_timer_t *stop_at_first_event;

void __wrap_ro__exporters_tb_write(ro_exporters_t *x, uint64_t step);
void __wrap_ro__exporters_tb_write(ro_exporters_t *x, uint64_t step)
{
    (void)x;
    w.events++;
    w.step = step;
    if (stop_at_first_event) {
        uv_timer_stop(stop_at_first_event);
        stop_at_first_event = NULL;
    }
}

int __wrap_ro__exporters_close(ro_exporters_t *x);
int __wrap_ro__exporters_close(ro_exporters_t *x)
{
    (void)x;
    w.closes++;
    return w.close_rc;
}

/* scalar: the value the last event gave tag; NAN if it gave none. */
static double scalar(const char *tag)
{
    for (uint32_t i = w.ns; i-- > 0;)
        if (strcmp(w.s[i].tag, tag) == 0)
            return w.s[i].v;
    return NAN;
}

static bool has_scalar(const char *tag)
{
    for (uint32_t i = 0; i < w.ns; i++)
        if (strcmp(w.s[i].tag, tag) == 0)
            return true;
    return false;
}

/* A learner of 2 nodes: node 0 welcomed, 4 episodes (returns 20). */
static int setup(void **state)
{
    memset(&w, 0, sizeof w);
    stop_at_first_event = NULL;
    learner_t *L = calloc(1, sizeof *L);
    assert_non_null(L);
    assert_int_equal(uv_loop_init(&L->loop), 0);
    L->cfg.nconnect = 2;
    L->cfg.name = "lrn";
    L->cfg.metrics_interval = 0.001;
    L->nodes[0].link.welcomed = true;
    L->nodes[0].episodes = 4;
    L->nodes[0].return_sum = 20.0;
    *state = L;
    return 0;
}

static int teardown(void **state)
{
    learner_t *L = *state;
    assert_int_equal(uv_run(&L->loop, UV_RUN_DEFAULT), 0); /* the timer's close */
    assert_int_equal(uv_loop_close(&L->loop), 0);
    free(L);
    return 0;
}

/* Neither flag: nothing opened, no timer; close still asks the exporters. */
static void test_off(void **state)
{
    learner_t *L = *state;
    char err[ERRLEN];
    assert_int_equal(ro__learner_metrics_open(L, err, sizeof err), 0);
    assert_int_equal(w.opens, 0);
    assert_false(L->met.on);
    assert_int_equal(ro__learner_metrics_close(L), 0);
    assert_int_equal(w.events, 0);
}

/* An open that fails is returned; no timer starts. */
static void test_open_fails(void **state)
{
    learner_t *L = *state;
    L->cfg.prometheus = "127.0.0.1:9100";
    w.open_rc = RO_EIO;
    char err[ERRLEN];
    assert_int_equal(ro__learner_metrics_open(L, err, sizeof err), RO_EIO);
    assert_string_equal(err, "--prometheus: address in use");
    assert_false(L->met.on);
    assert_int_equal(ro__learner_metrics_close(L), 0);
    assert_int_equal(w.events, 0);
}

/* The timer's interval, then the last one at close: each over its own
 * steps and time; episodes' mean only when some ended; stream figures
 * once segments came. */
static void test_intervals(void **state)
{
    learner_t *L = *state;
    L->cfg.tensorboard = "tb-dir";
    char err[ERRLEN];
    assert_int_equal(ro__learner_metrics_open(L, err, sizeof err), 0);
    assert_string_equal(w.tensorboard, "tb-dir");
    assert_null(w.prometheus);
    assert_true(L->met.on);
    L->steps = 1000, L->batches = 10;
    L->spin.hits = 7;
    ro__histo_add(&L->met.rows_iv, 100.0);
    ro__histo_add(&L->met.ret_iv, 5.0);
    stop_at_first_event = &L->met.timer;
    while (w.events == 0) /* the timer's event (the only handle: the loop waits for it) */
        assert_true(uv_run(&L->loop, UV_RUN_ONCE) != 0 || w.events > 0); /* 0: no timer */
    assert_int_equal(w.step, 1000);
    assert_true(scalar("learner/steps_per_s") > 0);
    assert_true(scalar("learner/mean_batch") == 100.0);
    assert_true(scalar("learner/episodes") == 4.0);
    assert_true(scalar("learner/episode_return_mean") == 5.0);
    assert_true(scalar("learner/nodes_connected") == 1.0);
    assert_true(scalar("learner/spin_hits") == 7.0);
    assert_false(has_scalar("learner/segments"));
    assert_int_equal(w.histo_n[0], 1);
    assert_int_equal(w.histo_n[1], 1);
    assert_int_equal(L->met.rows_iv.n, 0); /* the interval's, now the run's */
    assert_int_equal(L->met.rows_all.n, 1);
    assert_int_equal(w.events, 1);
    assert_false(uv_is_active((uv_handle_t *)&L->met.timer)); /* the rest by hand */
    /* The last interval, at close: 1000 s long (its start moved back). */
    L->met.last_ns = ro__now_ns() - 1000000000000ull;
    L->steps = 1600, L->batches = 13;
    L->nodes[1].rx.segments = 3, L->nodes[1].rx.version_max = 9;
    w.ns = 0;
    w.close_rc = RO_EIO; /* the event file could not be written */
    assert_int_equal(ro__learner_metrics_close(L), RO_EIO);
    assert_int_equal(w.events, 2);
    assert_int_equal(w.step, 1600);
    const double sps = scalar("learner/steps_per_s"); /* 600 steps over 1000 s and a little */
    assert_true(sps > 0.59 && sps <= 0.6);
    assert_true(scalar("learner/mean_batch") == 200.0);
    assert_true(has_scalar("learner/episode_return_mean"));
    assert_true(isnan(scalar("learner/episode_return_mean"))); /* none ended: left out */
    assert_true(scalar("learner/segments") == 3.0);
    assert_true(scalar("learner/segment_policy_version_max") == 9.0);
    assert_int_equal(w.histo_n[0], 0);
    assert_false(L->met.on);
    w.close_rc = 0;
    assert_int_equal(ro__learner_metrics_close(L), 0); /* again: no event */
    assert_int_equal(w.events, 2);
}

/* The Prometheus page: the nodes summed, the learner's label on every
 * sample, histograms over every interval. */
static void test_prometheus_page(void **state)
{
    learner_t *L = *state;
    L->cfg.prometheus = "127.0.0.1:0";
    char err[ERRLEN];
    assert_int_equal(ro__learner_metrics_open(L, err, sizeof err), 0);
    assert_ptr_equal(w.ctx, L);
    L->steps = 1234, L->batches = 5;
    L->spin.misses = 2;
    L->nodes[1].return_sum = 2.5, L->nodes[1].episodes = 1;
    L->nodes[0].rx.version_max = 99; /* no segments from it: not counted */
    L->nodes[1].rx.segments = 3, L->nodes[1].rx.version_max = 9;
    ro__histo_add(&L->met.rows_all, 8.0);
    ro__histo_add(&L->met.rows_iv, 16.0);
    char *page;
    size_t len;
    FILE *f = open_memstream(&page, &len);
    assert_non_null(f);
    w.render(w.ctx, f);
    fclose(f);
    const char *want[] = {
        "rollout_build_info{learner=\"lrn\",version=\"",
        "\nrollout_steps_total{learner=\"lrn\"} 1234\n",
        "\nrollout_forward_batches_total{learner=\"lrn\"} 5\n",
        "\nrollout_episodes_total{learner=\"lrn\"} 5\n",
        "\nrollout_episode_return_sum_total{learner=\"lrn\"} 22.5\n",
        "\nrollout_nodes_connected{learner=\"lrn\"} 1\n",
        "\nrollout_spin_misses_total{learner=\"lrn\"} 2\n",
        "\nrollout_segments_total{learner=\"lrn\"} 3\n",
        "\nrollout_segment_policy_version_max{learner=\"lrn\"} 9\n",
        "\nrollout_batch_rows_count{learner=\"lrn\"} 2\n",
        "\nrollout_batch_rows_sum{learner=\"lrn\"} 24\n",
        "\nrollout_episode_return_count{learner=\"lrn\"} 0\n",
        "# TYPE rollout_batch_rows histogram\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(page, want[i]))
            fail_msg("the page lacks \"%s\":\n%s", want[i], page);
    free(page);
    assert_int_equal(ro__learner_metrics_close(L), 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_off),
        T(test_open_fails),
        T(test_intervals),
        T(test_prometheus_page),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
