/*
 * The remote-learner hub (actors/hub/learner_hub.c) facing bad peers and
 * stopping, on a real loop (fixtures/hub_fixture.h): garbage, a wrong
 * hello, actions for an unknown seq or before a hello each close only that
 * learner, with an Error frame saying why, and count in `rejected`; stopping
 * says goodbye to every learner, tells every shard it holds (and any that
 * offers later) to stop, and turns new connections away. Strangers (no
 * hello yet) wait in the gate, apart: never counted against max_learners,
 * the longest waiting dropped when its slots are full, held to 4 KiB
 * frames. And a hub that cannot listen says why and leaves nothing behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "hub_fixture.h"

static bool rejected_and_closed(void *ctx)
{
    const want_t *w = ctx;
    ro_hub_stats_t st;
    hub_stats(w->t, &st);
    return w->L->closed && st.rejected >= w->n && st.learners == 1;
}

/* Garbage, a wrong hello, actions for an unknown seq, actions before a
 * hello: each closes that learner only, with an Error frame saying why,
 * and counts in `rejected`; the good learner is served throughout. */
static void test_bad_frames_close_only_that_learner(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    offer_all(t, RO_MSG_OBS_READY);
    learner_t *good = learner_connect(t, "good", GOOD);
    wait_rows(t, good, NUM_ENVS, "observations of all 6 envs at the good learner");

    static const struct {
        learner_mode_t mode;
        int code;
        const char *why;
    } bad[] = {
        {GARBAGE, RO_EBADMSG, "malformed length prefix at byte 0"},
        {WRONG_HELLO, RO_EPROTO, "protocol version 99 is not supported"},
        {BAD_SEQ, RO_EPROTO, "actions for seq 999, which is not awaiting actions"},
        {NO_HELLO_FIRST, RO_EPROTO, "expected hello first, got actions"},
    };
    for (uint32_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        learner_t *L = learner_connect(t, "bad", bad[i].mode);
        want_t w = {.t = t, .L = L, .n = i + 1};
        loop_wait(&t->loop, rejected_and_closed, &w,
                  "the hub closing a learner that broke the protocol (rejected)");
        assert_true(L->got_error);
        assert_int_equal(L->error_code, (uint32_t)-bad[i].code);
        if (!strstr(L->error_msg, bad[i].why))
            fail_msg("error \"%s\" does not say \"%s\"", L->error_msg, bad[i].why);
        assert_int_equal(L->frames, 0); /* it was given no envs */
        learner_close_and_free(t, L);
    }
    ro_hub_stats_t st;
    hub_stats(t, &st);
    assert_int_equal(st.rejected, 4);
    assert_int_equal(st.accepted, 5);
    assert_int_equal(st.attached, 2); /* the good one, and BAD_SEQ's valid hello */
    assert_int_equal(st.learners, 1);
    assert_int_equal(st.envs_in_flight, NUM_ENVS);
    assert_int_equal(st.batches_resent, 0);
    assert_false(good->closed);

    /* The good learner's envs step on. */
    t->auto_step = true;
    learner_new_round(good);
    learner_answer(good, false);
    want_t w = {.t = t, .L = good, .n = SHARDS};
    loop_wait(&t->loop, replies_at_least, &w, "the good learner's actions at the shards");
    w.n = NUM_ENVS;
    loop_wait(&t->loop, learner_has_rows, &w, "the good learner's next observations");
    check_round(good, 1);
    t->auto_step = false;
    learner_close_and_free(t, good);
    hub_test_free(t);
}

static bool all_stopped(void *ctx)
{
    const want_t *w = ctx;
    for (uint32_t i = 0; i < SHARDS; i++)
        if (w->t->stops[i] < w->n)
            return false;
    return true;
}

static bool shard1_stopped_again(void *ctx)
{
    return ((hub_test_t *)ctx)->stops[1] == 2;
}

static bool lane_done(void *ctx)
{
    return ((hub_test_t *)ctx)->lane_done;
}

/* Stopping: a goodbye to every learner, STOP to every shard the hub
 * holds (in flight or not), STOP to any shard that offers later, and a
 * connection that comes now is turned away. */
static void test_stop(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    offer_all(t, RO_MSG_OBS_READY);
    learner_t *busy = learner_connect(t, "busy", GOOD);
    wait_rows(t, busy, NUM_ENVS, "observations of all 6 envs at the learner");
    learner_t *idle = learner_connect(t, "idle", GOOD);
    loop_wait_flag(&t->loop, &idle->welcomed, "the welcome to the second learner");

    ro__hub_stop(t->hub);
    ro__hub_stop(t->hub); /* idempotent */
    want_t w = {.t = t, .n = 1};
    loop_wait(&t->loop, all_stopped, &w, "RO_MSG_STOP at every shard the hub held");
    loop_wait_flag(&t->loop, &busy->closed, "the busy learner's connection closing");
    loop_wait_flag(&t->loop, &idle->closed, "the idle learner's connection closing");
    assert_true(busy->goodbye && idle->goodbye);
    assert_string_equal(busy->goodbye_reason, "node stopping");
    assert_string_equal(idle->goodbye_reason, "node stopping");
    assert_int_equal(t->total_replies, 0);
    assert_int_equal(t->total_stops, SHARDS);
    ro_hub_stats_t st;
    hub_stats(t, &st);
    assert_int_equal(st.learners, 0);
    assert_int_equal(st.envs_in_flight, 0);
    assert_int_equal(st.envs_unsent, 0);
    assert_int_equal(st.batches_resent, 0); /* a stopping hub sends nothing again */

    /* A shard that offers now is told to stop at once. */
    ro__step_batch_offer(&t->b[1], RO_MSG_OBS_READY);
    loop_wait(&t->loop, shard1_stopped_again, t, "RO_MSG_STOP for a shard offering after the stop");
    assert_int_equal(t->stops[0], 1);
    assert_int_equal(t->stops[2], 1);
    /* A connection that comes now is turned away before it says anything
     * (SILENT: nothing of its own left unread when the hub closes). */
    learner_t *late = learner_connect(t, "late", SILENT);
    loop_wait_flag(&t->loop, &late->closed, "the hub turning away a learner after the stop");
    assert_true(late->got_error);
    assert_int_equal(late->error_code, (uint32_t)-RO_ESHUTDOWN);
    assert_non_null(strstr(late->error_msg, "the node is stopping"));
    assert_false(late->welcomed);

    /* Every shard done: the control actor hears it once. */
    offer_all(t, RO_MSG_SHARD_DONE);
    loop_wait(&t->loop, lane_done, t, "RO_MSG_LANE_DONE once every shard was done");
    learner_close_and_free(t, late);
    learner_close_and_free(t, idle);
    learner_close_and_free(t, busy);
    hub_test_free(t);
}

typedef struct strangers {
    learner_t *L[20];
    uint32_t n, closed;
} strangers_t;

static bool connected(void *ctx)
{
    return ((learner_t *)ctx)->connected;
}

static bool some_closed(void *ctx)
{
    strangers_t *s = ctx;
    uint32_t closed = 0;
    for (uint32_t i = 0; i < s->n; i++)
        closed += s->L[i]->closed;
    return closed >= s->closed;
}

/* 20 silent connections and a hub of max_learners 8: the gate keeps 16
 * (its minimum), dropping the 4 that waited longest; a learner that says
 * hello is welcomed all the same. A stranger's frame over 4 KiB is refused
 * from its prefix. */
static void test_strangers_wait_apart(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    offer_all(t, RO_MSG_OBS_READY);
    strangers_t s = {.n = 20, .closed = 4};
    for (uint32_t i = 0; i < s.n; i++)
        s.L[i] = learner_connect(t, "silent", SILENT);
    loop_wait(&t->loop, some_closed, &s, "the gate dropping the 4 strangers that waited longest");
    uint32_t dropped = 0;
    for (uint32_t i = 0; i < s.n; i++) {
        if (!s.L[i]->closed)
            continue;
        dropped++;
        assert_true(s.L[i]->got_error);
        assert_int_equal(s.L[i]->error_code, (uint32_t)-RO_ETIMEDOUT);
        assert_non_null(strstr(s.L[i]->error_msg, "dropped: 16 connections wait for their hello"));
    }
    assert_int_equal(dropped, 4);
    learner_t *good = learner_connect(t, "good", GOOD);
    wait_rows(t, good, NUM_ENVS, "observations of all 6 envs at a learner among 16 strangers");
    /* A stranger's large frame: refused from its length prefix. */
    learner_t *big = learner_connect(t, "big", SILENT);
    loop_wait(&t->loop, connected, big, "the large sender connecting");
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    char reason[5000];
    memset(reason, 'x', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    g.reason = reason;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    learner_send(big, &f);
    loop_wait(&t->loop, learner_closed, big, "the hub closing a stranger's 5 KB frame");
    assert_non_null(strstr(big->error_msg, "exceeds the limit of 4096"));
    learner_close_and_free(t, big);
    learner_close_and_free(t, good);
    for (uint32_t i = 0; i < s.n; i++)
        learner_close_and_free(t, s.L[i]);
    hub_test_free(t);
}

/* ro__hub_new refuses a listener off loopback without a token, and a port
 * already taken, with one line naming --listen; nothing is left open or
 * allocated (ASan checks the rest). */
static void test_new_refuses_bad_listen(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    const struct {
        const char *listen;
        int code;
        const char *why;
    } cases[] = {
        {"0.0.0.0:0", RO_EINVAL, "--listen '0.0.0.0:0' is not a loopback address"},
        {"127.0.0.1", RO_EINVAL, "--listen '127.0.0.1': expected HOST:PORT"},
        {t->addr, RO_EIO, "address already in use"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ro_hub_opts_t o = {
            .listen = cases[i].listen,
            .batch = 4,
            .max_frame = 1u << 20,
            .max_learners = 8,
            .env_name = "fake-env",
            .learners = true,
        };
        ro_hub_t *h = (ro_hub_t *)&o; /* untouched on failure */
        char err[ERRLEN] = "";
        int rc = ro__hub_new(&h, &t->loop, t->bp, SHARDS, NUM_ENVS, &t->obs, &t->act, &t->env, &o,
                             err, sizeof err);
        if (rc != cases[i].code || !strstr(err, cases[i].why))
            fail_msg("listen '%s': expected %d saying \"%s\"; got %d \"%s\"", cases[i].listen,
                     cases[i].code, cases[i].why, rc, err);
        assert_ptr_equal(h, (ro_hub_t *)&o);
    }
    hub_test_free(t); /* the failed hubs' handles are gone: the loop closes */
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the node does */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_frames_close_only_that_learner),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_new_refuses_bad_listen),
        cmocka_unit_test(test_strangers_wait_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
