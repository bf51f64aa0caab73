/*
 * How src/wire/conn.c writes small frames and reads without the loop.
 * Small frames are written at once when nothing is queued before them:
 * cut short (uv_try_write wrapped at link time) or queued behind full
 * socket buffers, every frame arrives whole, once and in order. And
 * ro__conn_read_now hands a frame over before it returns, finds the peer's
 * end as the loop's read would, and reads nothing once closed. Every wait
 * is for an event (loop_fixture.h). A connection failed with frames
 * queued flushes them and its Error frame before it closes, for a bounded
 * while.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>

#include "loop_fixture.h"
#include "conn_fixture.h"
#include "runtime/error.h"

/* uv_try_write, wrapped at link time (tests/wire/meson.build): while
 * short_writes is set, a write takes only the first half of its bytes, as
 * a socket buffer with that much room left would. */
int __real_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs);
int __wrap_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs);
static bool short_writes;
static unsigned short_written;

int __wrap_uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned nbufs)
{
    if (!short_writes || nbufs != 1 || bufs[0].len < 2)
        return __real_uv_try_write(h, bufs, nbufs);
    const uv_buf_t half = uv_buf_init(bufs[0].base, bufs[0].len / 2);
    const int n = __real_uv_try_write(h, &half, 1);
    short_written += n > 0;
    return n;
}

#define NUM_DISCRETE 100 /* a numbered Actions frame: about 450 bytes, sent directly */
#define NUM_FLOATS 16384 /* a numbered Observations frame: 64 KiB, always queued */

/* Frame seq of a numbered run: Actions with NUM_DISCRETE entries, every
 * eighth one Observations of NUM_FLOATS floats; each value from seq. */
static void numbered_frame(uint64_t seq, ro_frame_t *f, Rollout__V1__Actions *a, int32_t *acts,
                           Rollout__V1__Observations *o, float *obs)
{
    *f = (ro_frame_t)ROLLOUT__V1__FRAME__INIT;
    if (seq % 8 == 0) {
        *o = (Rollout__V1__Observations)ROLLOUT__V1__OBSERVATIONS__INIT;
        o->seq = seq;
        o->n_obs = NUM_FLOATS;
        o->obs = obs;
        for (uint32_t k = 0; k < NUM_FLOATS; k++)
            obs[k] = (float)(seq * 7 + k);
        f->body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
        f->observations = o;
        return;
    }
    *a = (Rollout__V1__Actions)ROLLOUT__V1__ACTIONS__INIT;
    a->seq = seq;
    a->n_discrete = NUM_DISCRETE;
    a->discrete = acts;
    for (uint32_t k = 0; k < NUM_DISCRETE; k++)
        acts[k] = (int32_t)(seq * 31 + k);
    f->body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f->actions = a;
}

/* Whether a received frame is numbered_frame(seq) for the next seq; the
 * first difference goes into e->disorder. */
static void check_numbered(end_t *e, const ro_frame_t *f)
{
    const uint64_t seq = e->last_seq + 1;
    bool ok;
    if (seq % 8 == 0) {
        const Rollout__V1__Observations *o = f->observations;
        ok = f->body_case == ROLLOUT__V1__FRAME__BODY_OBSERVATIONS && o->seq == seq &&
             o->n_obs == NUM_FLOATS;
        for (uint32_t k = 0; ok && k < NUM_FLOATS; k++)
            ok = o->obs[k] == (float)(seq * 7 + k);
    } else {
        const Rollout__V1__Actions *a = f->actions;
        ok = f->body_case == ROLLOUT__V1__FRAME__BODY_ACTIONS && a->seq == seq &&
             a->n_discrete == NUM_DISCRETE;
        for (uint32_t k = 0; ok && k < NUM_DISCRETE; k++)
            ok = a->discrete[k] == (int32_t)(seq * 31 + k);
    }
    if (!ok && !e->disorder[0])
        snprintf(e->disorder, sizeof e->disorder, "frame %u is not numbered frame %llu",
                 e->frames + 1, (unsigned long long)seq);
    e->last_seq = seq;
}

typedef struct numbered_wait {
    fixture_t *t;
    uint32_t want;
} numbered_wait_t;

static bool got_numbered(void *ctx)
{
    numbered_wait_t *w = ctx;
    return w->t->cli.frames >= w->want;
}

static bool srv_drained(void *ctx)
{
    return ro__conn_queued(&((fixture_t *)ctx)->srv.c) == 0;
}

/* A connected pair and a buffer of NUM_FLOATS floats for numbered frames. */
static fixture_t *pair_with_obs(float **obs)
{
    fixture_t *t = calloc(1, sizeof *t);
    *obs = calloc(NUM_FLOATS, sizeof(float));
    assert_non_null(t);
    assert_non_null(*obs);
    connect_pair(t);
    return t;
}

/* Both ends closed: the listener and the loop, then what pair_with_obs gave. */
static void pair_finish(fixture_t *t, float *obs)
{
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(obs);
    free(t);
}

/* Small frames are written at once when nothing is queued before them,
 * and go behind the queue otherwise (conn.c, DIRECT_MAX). Sent without
 * letting the loop run, until the kernel's buffers are full and frames
 * wait in the queue, then more behind them; then, once the queue drained,
 * direct again: every frame arrives whole, once, in order. */
static void test_order_through_full_buffers(void **state)
{
    (void)state;
    enum { SHORT = 20, AFTER_FULL = 400, AFTER_DRAIN = 100, MAX_SENDS = 200000 };
    float *obs;
    fixture_t *t = pair_with_obs(&obs);
    t->cli.on_each = check_numbered;
    int32_t acts[NUM_DISCRETE];
    Rollout__V1__Actions a;
    Rollout__V1__Observations o;
    ro_frame_t f;
    uint64_t seq = 0;
    /* Half of a small frame written at once, the rest queued. */
    short_writes = true;
    for (uint32_t i = 0; i < SHORT; i++) {
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
        loop_wait(&t->loop, srv_drained, t, "the rest of a frame cut short, written");
    }
    short_writes = false;
    assert_true(short_written >= SHORT - SHORT / 8 - 1); /* all but the Observations frames */
    uint32_t after_full = 0;
    while (after_full < AFTER_FULL) {
        if (seq >= MAX_SENDS)
            fail_msg("%llu frames sent and the connection's queue still empty",
                     (unsigned long long)seq);
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
        after_full += ro__conn_queued(&t->srv.c) > 0;
    }
    print_message("the queue took frames after %llu sends\n",
                  (unsigned long long)(seq - AFTER_FULL));
    numbered_wait_t w = {t, (uint32_t)seq};
    loop_wait(&t->loop, srv_drained, t, "the server's queue draining to the reading client");
    for (uint32_t i = 0; i < AFTER_DRAIN; i++) {
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
    }
    w.want = (uint32_t)seq;
    loop_wait(&t->loop, got_numbered, &w, "every numbered frame at the client");
    if (t->cli.disorder[0])
        fail_msg("%s", t->cli.disorder);
    assert_int_equal(t->cli.frames, seq);
    assert_int_equal(t->cli.alloc.used, 0);
    ro__conn_close(&t->cli.c, "test over");
    loop_wait(&t->loop, both_closed, t, "both ends' on_closed");
    pair_finish(t, obs);
}

/* ro__conn_read_now: nothing there, nothing happens; a frame there is
 * handed to on_frame before it returns, without the loop; the peer's end
 * is found as the loop's read finds it, and closes the connection. */
static void test_read_now(void **state)
{
    (void)state;
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    connect_pair(t);
    assert_int_equal(ro__conn_read_now(&t->cli.c), 0);
    assert_int_equal(t->cli.frames, 0);
    assert_int_equal(ro__conn_goodbye(&t->srv.c, "read me now", NULL), 0);
    assert_int_equal(ro__conn_queued(&t->srv.c), 0); /* written at once: in the kernel */
    size_t got = 0;
    /* Loopback hands the bytes over within the send; the loop is not run. */
    for (int i = 0; i < 1000 && got == 0; i++)
        got = ro__conn_read_now(&t->cli.c);
    assert_true(got > 0);
    assert_int_equal(t->cli.frames, 1);
    assert_int_equal(t->cli.kept[0]->body_case, ROLLOUT__V1__FRAME__BODY_GOODBYE);
    assert_string_equal(t->cli.kept[0]->goodbye->reason, "read me now");
    ro__conn_close(&t->srv.c, "server done");
    loop_wait_flag(&t->loop, &t->srv.closed, "the server's on_closed");
    for (int i = 0; i < 1000 && !t->cli.c.closing; i++)
        assert_int_equal(ro__conn_read_now(&t->cli.c), 0);
    assert_true(t->cli.c.closing); /* the end of the stream, read now */
    loop_wait_flag(&t->loop, &t->cli.closed, "the client's on_closed");
    assert_string_equal(t->cli.why, "disconnected");
    assert_int_equal(ro__conn_read_now(&t->cli.c), 0); /* closed: nothing */
    free_kept(&t->cli);
    ro__listener_close(&t->server);
    loop_finish(&t->loop);
    free(t);
}

/* For test_fail_*: the frames before the Error frame as check_numbered
 * sees them, then the Error frame's message. */
static char error_seen[256];
static uint32_t frames_before_error;

static void numbered_then_error(end_t *e, const ro_frame_t *f)
{
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_ERROR) {
        if (!error_seen[0])
            frames_before_error = e->frames;
        snprintf(error_seen, sizeof error_seen, "%s", f->error->message);
        return;
    }
    if (error_seen[0] && !e->disorder[0])
        snprintf(e->disorder, sizeof e->disorder, "a frame after the Error frame");
    check_numbered(e, f);
}

/* Sends numbered frames without running the loop until the server's queue
 * holds frames (the kernel's buffers are full); the last seq sent. */
static uint64_t fill_queue(fixture_t *t, float *obs)
{
    int32_t acts[NUM_DISCRETE];
    Rollout__V1__Actions a;
    Rollout__V1__Observations o;
    ro_frame_t f;
    uint64_t seq = 0;
    uint32_t queued_sends = 0;
    while (queued_sends < 40) {
        if (seq >= 200000)
            fail_msg("200000 frames sent and the connection's queue still empty");
        numbered_frame(++seq, &f, &a, acts, &o, obs);
        assert_int_equal(ro__conn_send(&t->srv.c, &f), 0);
        queued_sends += ro__conn_queued(&t->srv.c) > 0;
    }
    return seq;
}

/* A connection failed while frames wait in its queue still delivers them
 * and then its Error frame (uv_close alone would cancel them: the peer saw
 * the end of the stream and not why), then closes; it takes no frame and
 * reads nothing meanwhile. */
static void test_fail_flushes_the_queue_then_the_error(void **state)
{
    (void)state;
    float *obs;
    fixture_t *t = pair_with_obs(&obs);
    error_seen[0] = '\0';
    t->cli.on_each = numbered_then_error;
    const uint64_t sent = fill_queue(t, obs);
    ro__conn_fail(&t->srv.c, RO_EPROTO, "the test fails this connection");
    assert_true(t->srv.c.closing);
    assert_false(t->srv.closed); /* flushing first */
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    f.goodbye = &g;
    assert_int_equal(ro__conn_send(&t->srv.c, &f), RO_EIO); /* no frame after the error */
    loop_wait(&t->loop, both_closed, t, "both ends' on_closed after the server's failure");
    if (t->cli.disorder[0])
        fail_msg("%s", t->cli.disorder);
    assert_string_equal(error_seen, "the test fails this connection");
    assert_int_equal(frames_before_error, sent);
    assert_int_equal(t->cli.frames, sent + 1);
    assert_string_equal(t->srv.why, "the test fails this connection");
    assert_int_equal(t->cli.alloc.used, 0);
    pair_finish(t, obs);
}

/* A peer that never reads cannot hold a failed connection open: it closes
 * after RO_CONN_LINGER_MS with its queue unsent. */
static void test_fail_to_a_peer_that_does_not_read_still_closes(void **state)
{
    (void)state;
    float *obs;
    fixture_t *t = pair_with_obs(&obs);
    t->cli.on_each = check_numbered;
    uv_read_stop(&t->cli.c.h.stream); /* the client reads nothing more */
    fill_queue(t, obs);
    ro__conn_fail(&t->srv.c, RO_EPROTO, "failed towards a peer that does not read");
    assert_false(t->srv.closed);
    loop_wait_flag(&t->loop, &t->srv.closed, "the server's on_closed after its linger");
    assert_string_equal(t->srv.why, "failed towards a peer that does not read");
    ro__conn_close(&t->cli.c, "test over");
    loop_wait_flag(&t->loop, &t->cli.closed, "the client's on_closed");
    pair_finish(t, obs);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the programs do: a write to a gone peer is an error */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_through_full_buffers),
        cmocka_unit_test(test_read_now),
        cmocka_unit_test(test_fail_flushes_the_queue_then_the_error),
        cmocka_unit_test(test_fail_to_a_peer_that_does_not_read_still_closes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
