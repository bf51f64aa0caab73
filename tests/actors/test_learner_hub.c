/*
 * The remote-learner hub (actors/learner_hub.c) on a real libuv loop:
 * the hub listens on 127.0.0.1:0, three fake shards offer it their step
 * batches (their env actor is a loop actor of the test that records what
 * comes back: RO_MSG_ACTIONS, RO_MSG_STOP), and learners are clients built
 * on the one connection module (wire/conn.h) in the same loop.
 *
 * Ready shards with no learner wait as orphans; a learner's hello gets a
 * welcome with the spaces and the orphans' observations; its actions send
 * the shards back to stepping; a learner that leaves mid-batch has its
 * batches resent to the next one; a bad frame closes only that learner;
 * stopping says goodbye and tells every held shard to stop. Every wait is
 * for an event (loop_fixture.h); nothing depends on time: no max-wait
 * timer fires (1 h), no watchdog runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/learner_hub.h"
#include "actors/messages.h"
#include "loop_fixture.h"
#include "runtime/error.h"
#include "step_batch_fixture.h"
#include "wire/checks.h"
#include "wire/conn.h"

#define SHARDS 3
#define PER_SHARD 2
#define NUM_ENVS (SHARDS * PER_SHARD)
#define OBS_DIM 3
#define NUM_ACTIONS 2
#define ERRLEN 256
#define MAX_KEPT 16

typedef struct hub_test hub_test_t;

typedef enum learner_mode {
    GOOD,           /* hello, then answers when told */
    GARBAGE,        /* bytes that are not frames */
    WRONG_HELLO,    /* protocol version 99 */
    BAD_SEQ,        /* hello, then actions for a seq never sent */
    NO_HELLO_FIRST, /* actions before any hello */
    SILENT,         /* says nothing */
} learner_mode_t;

/* A learner client: what it got from the hub. Loop thread. */
typedef struct learner {
    ro_conn_t c;
    ro_pb_alloc_t alloc;
    uv_write_t wreq;
    learner_mode_t mode;
    const char *name;
    bool connected, closed, welcomed, goodbye, got_error;
    uint32_t error_code;
    char error_msg[256], goodbye_reason[64];
    ro_frame_t *welcome;              /* kept: the spaces point into it */
    ro_frame_t *unanswered[MAX_KEPT]; /* Observations not answered yet */
    uint32_t nunanswered;
    uint32_t frames; /* Observations frames received */
    uint32_t rows;   /* envs received since learner_new_round */
    uint32_t seen[NUM_ENVS];
    uint64_t step[NUM_ENVS];
} learner_t;

struct hub_test {
    uv_loop_t loop;
    ro_step_batch_t b[SHARDS];
    ro_step_batch_t *bp[SHARDS];
    ro_actor_t env; /* the shards' env actor, and the hub's control actor */
    uv_async_t env_async;
    ro_hub_t *hub;
    char addr[80];
    ro_space_t obs, act;
    float low[OBS_DIM], high[OBS_DIM];
    bool auto_step; /* the env actor steps and offers again on ACTIONS */
    uint32_t replies[SHARDS], stops[SHARDS], total_replies, total_stops;
    bool lane_done;
};

/* The action a learner chooses for env e at step s, checked by the env. */
static int32_t action_for(uint32_t e, uint64_t s)
{
    return (int32_t)((e + s) % NUM_ACTIONS);
}

static void hub_stats(hub_test_t *t, ro_hub_stats_t *st)
{
    ro__hub_stats(t->hub, st);
}

/* ---------- the shards' env actor ---------- */

static void env_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    hub_test_t *t = ro__container_of(self, hub_test_t, env);
    if (msg->type == RO_MSG_LANE_DONE) { /* the hub's done message, no batch */
        t->lane_done = true;
        return;
    }
    ro_step_batch_t *b = ro__container_of(msg, ro_step_batch_t, to_env);
    if (msg->type == RO_MSG_STOP) {
        t->stops[b->index]++;
        t->total_stops++;
        return;
    }
    assert_int_equal(msg->type, RO_MSG_ACTIONS);
    for (uint32_t j = 0; j < b->n; j++)
        assert_int_equal(b->act_i[j], action_for(b->first + j, b->steps));
    t->replies[b->index]++;
    t->total_replies++;
    if (t->auto_step) { /* as an env actor does: step, offer again */
        fake_batch_fill(b, b->steps + 1);
        ro__step_batch_offer(b, RO_MSG_OBS_READY);
    }
}

static void offer_all(hub_test_t *t, uint32_t type)
{
    for (uint32_t i = 0; i < SHARDS; i++)
        ro__step_batch_offer(&t->b[i], type);
}

static hub_test_t *hub_test_new(void)
{
    hub_test_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    assert_int_equal(uv_async_init(&t->loop, &t->env_async, ro__actor_async_cb), 0);
    t->env_async.data = &t->env;
    ro__actor_init_loop(&t->env, "test-env", env_behaviour, &t->env_async);
    for (uint32_t k = 0; k < OBS_DIM; k++) {
        t->low[k] = -1e6f;
        t->high[k] = 1e6f;
    }
    t->obs = (ro_space_t){
        .kind = RO_SPACE_BOX, .ndim = 1, .shape = {OBS_DIM}, .low = t->low, .high = t->high};
    t->act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = NUM_ACTIONS};
    ro_hub_opts_t o = {
        .listen = "127.0.0.1:0",
        .batch = 4,
        .max_wait_us = 3600000000ull, /* never: batches go when full or all waiting */
        .max_frame = 1u << 20,
        .max_learners = 8,
        .env_name = "fake-env",
        .seed = 5,
        .max_episode_steps = 500,
        .learners = true,
    };
    char err[ERRLEN] = "";
    for (uint32_t i = 0; i < SHARDS; i++)
        t->bp[i] = &t->b[i];
    int rc = ro__hub_new(&t->hub, &t->loop, t->bp, SHARDS, NUM_ENVS, &t->obs, &t->act, &t->env, &o,
                         err, sizeof err);
    if (rc)
        fail_msg("ro__hub_new: %s", err);
    for (uint32_t i = 0; i < SHARDS; i++) {
        fake_batch_init(&t->b[i], i, i * PER_SHARD, PER_SHARD, OBS_DIM, 1, true);
        t->b[i].env = &t->env;
        t->b[i].learner = ro__hub_actor(t->hub);
    }
    ro__hub_address(t->hub, t->addr, sizeof t->addr);
    assert_int_equal(strncmp(t->addr, "127.0.0.1:", 10), 0);
    return t;
}

static void hub_test_free(hub_test_t *t)
{
    ro__hub_stop(t->hub);
    ro__hub_close(t->hub);
    uv_close((uv_handle_t *)&t->env_async, NULL);
    loop_finish(&t->loop);
    ro__hub_free(t->hub);
    for (uint32_t i = 0; i < SHARDS; i++)
        fake_batch_free(&t->b[i]);
    free(t);
}

/* ---------- learner clients ---------- */

static void learner_send(learner_t *L, ro_frame_t *f)
{
    assert_int_equal(ro__conn_send(&L->c, f), 0);
}

static void send_actions(learner_t *L, uint64_t seq, const int32_t *a, size_t n)
{
    Rollout__V1__Actions act = ROLLOUT__V1__ACTIONS__INIT;
    act.seq = seq;
    act.n_discrete = n;
    act.discrete = (int32_t *)a;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
    f.actions = &act;
    learner_send(L, &f);
}

static void send_hello(learner_t *L, uint32_t version)
{
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = version;
    h.role = "learner";
    h.name = (char *)L->name;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    learner_send(L, &f);
}

static void on_written(uv_write_t *req, int status)
{
    (void)req;
    (void)status;
}

static void learner_on_connect(ro_conn_t *c, int status)
{
    learner_t *L = c->owner;
    assert_int_equal(status, 0);
    L->connected = true;
    static const uint8_t garbage[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0xff};
    switch (L->mode) {
    case GARBAGE: {
        uv_buf_t buf = uv_buf_init((char *)garbage, sizeof garbage);
        assert_int_equal(uv_write(&L->wreq, (uv_stream_t *)&L->c.tcp, &buf, 1, on_written), 0);
        break;
    }
    case WRONG_HELLO:
        send_hello(L, 99);
        break;
    case NO_HELLO_FIRST:
        send_actions(L, 1, (const int32_t[]){0}, 1);
        break;
    case SILENT:
        break;
    default:
        send_hello(L, RO_PROTOCOL_VERSION);
        break;
    }
}

/* Every row as the fake shards wrote it for (env, step). */
static void check_observations(learner_t *L, const Rollout__V1__Observations *o)
{
    char err[ERRLEN];
    if (ro__check_observations(o, OBS_DIM, NUM_ENVS, err, sizeof err) != 0)
        fail_msg("%s: %s", L->name, err);
    for (size_t i = 0; i < o->n_env; i++) {
        const uint32_t e = o->env[i];
        const uint64_t s = o->step[i];
        for (uint32_t k = 0; k < OBS_DIM; k++)
            assert_true(o->obs[i * OBS_DIM + k] == fake_obs(e, s, k));
        assert_true(o->reward[i] == (float)e + 0.25f * (float)s);
        assert_int_equal(o->terminated[i], (e + s) % 3 == 1);
        L->seen[e]++;
        L->step[e] = s;
        L->rows++;
    }
}

static void learner_on_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    learner_t *L = c->owner;
    char err[ERRLEN];
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_WELCOME: {
        ro_space_t obs, act;
        if (ro__check_welcome(f->welcome, NUM_ENVS, &obs, &act, err, sizeof err) != 0)
            fail_msg("%s: welcome: %s", L->name, err);
        assert_false(L->welcomed);
        L->welcome = f;
        *keep = true;
        L->welcomed = true;
        if (L->mode == BAD_SEQ)
            send_actions(L, 999, (const int32_t[]){0, 1}, 2);
        break;
    }
    case ROLLOUT__V1__FRAME__BODY_OBSERVATIONS:
        check_observations(L, f->observations);
        assert_true(L->nunanswered < MAX_KEPT);
        L->unanswered[L->nunanswered++] = f;
        *keep = true;
        L->frames++;
        break;
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        L->goodbye = true;
        snprintf(L->goodbye_reason, sizeof L->goodbye_reason, "%s",
                 f->goodbye->reason ? f->goodbye->reason : "");
        break;
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        L->got_error = true;
        L->error_code = f->error->code;
        snprintf(L->error_msg, sizeof L->error_msg, "%s",
                 f->error->message ? f->error->message : "");
        break;
    default:
        fail_msg("%s: unexpected %s frame", L->name, ro__frame_kind(f));
    }
}

static void learner_on_closed(ro_conn_t *c)
{
    learner_t *L = c->owner;
    L->closed = true;
}

static const ro_conn_ops_t learner_ops = {
    .on_frame = learner_on_frame,
    .on_connect = learner_on_connect,
    .on_closed = learner_on_closed,
};

static learner_t *learner_connect(hub_test_t *t, const char *name, learner_mode_t mode)
{
    learner_t *L = calloc(1, sizeof *L);
    assert_non_null(L);
    L->name = name;
    L->mode = mode;
    ro__pb_alloc_init(&L->alloc, 64u << 20);
    ro_conn_opts_t o = {
        .ops = &learner_ops,
        .owner = L,
        .program = "test-learner",
        .max_frame = 16u << 20,
        .max_queued = 64u << 20,
        .alloc = &L->alloc,
    };
    ro_addr_t a;
    struct sockaddr_storage ss;
    char err[ERRLEN];
    assert_int_equal(ro__addr_parse(t->addr, false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&t->loop, &a, &ss, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__conn_connect(&L->c, &t->loop, (struct sockaddr *)&ss, &o), 0);
    return L;
}

/* A new round: the envs received from now on. */
static void learner_new_round(learner_t *L)
{
    L->rows = 0;
    memset(L->seen, 0, sizeof L->seen);
}

/* learner_answer answers every unanswered frame (last first, if reverse)
 * with action_for each of its envs. */
static void learner_answer(learner_t *L, bool reverse)
{
    uint32_t n = L->nunanswered;
    L->nunanswered = 0;
    for (uint32_t k = 0; k < n; k++) {
        ro_frame_t *f = L->unanswered[reverse ? n - 1 - k : k];
        const Rollout__V1__Observations *o = f->observations;
        int32_t a[NUM_ENVS];
        for (size_t i = 0; i < o->n_env; i++)
            a[i] = action_for(o->env[i], o->step[i]);
        send_actions(L, o->seq, a, o->n_env);
        ro__frame_free(&L->alloc, f);
    }
}

static bool learner_closed(void *ctx)
{
    return ((learner_t *)ctx)->closed;
}

static void learner_close_and_free(hub_test_t *t, learner_t *L)
{
    ro__conn_close(&L->c, "test over");
    loop_wait(&t->loop, learner_closed, L, "a learner's connection closing");
    for (uint32_t k = 0; k < L->nunanswered; k++)
        ro__frame_free(&L->alloc, L->unanswered[k]);
    ro__frame_free(&L->alloc, L->welcome);
    assert_int_equal(L->alloc.used, 0);
    free(L);
}

/* ---------- conditions waited for ---------- */

typedef struct want {
    hub_test_t *t;
    learner_t *L;
    uint32_t n;
} want_t;

static bool hub_holds_orphans(void *ctx)
{
    const want_t *w = ctx;
    ro_hub_stats_t st;
    hub_stats(w->t, &st);
    return st.envs_unsent == w->n && st.learners == 0;
}

static bool learner_has_rows(void *ctx)
{
    const want_t *w = ctx;
    return w->L->rows >= w->n;
}

static bool replies_at_least(void *ctx)
{
    const want_t *w = ctx;
    return w->t->total_replies >= w->n;
}

static void wait_orphans(hub_test_t *t, uint32_t n, const char *what)
{
    want_t w = {.t = t, .n = n};
    loop_wait(&t->loop, hub_holds_orphans, &w, what);
}

static void wait_rows(hub_test_t *t, learner_t *L, uint32_t n, const char *what)
{
    want_t w = {.t = t, .L = L, .n = n};
    loop_wait(&t->loop, learner_has_rows, &w, what);
}

/* check_round wants every env received once since learner_new_round, at
 * step s. */
static void check_round(const learner_t *L, uint64_t s)
{
    assert_int_equal(L->rows, NUM_ENVS);
    for (uint32_t e = 0; e < NUM_ENVS; e++) {
        assert_int_equal(L->seen[e], 1);
        assert_int_equal(L->step[e], s);
    }
}

/* ---------- tests ---------- */

static void test_orphans_adopted_answered_stepping(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    offer_all(t, RO_MSG_OBS_READY);
    wait_orphans(t, NUM_ENVS, "the hub holding the 6 ready envs of no learner (envs_unsent)");
    ro_hub_stats_t st;
    hub_stats(t, &st);
    assert_int_equal(st.batches_sent, 0);
    assert_int_equal(st.envs_in_flight, 0);

    learner_t *L = learner_connect(t, "one", GOOD);
    loop_wait_flag(&t->loop, &L->welcomed, "the welcome to the first learner");
    const Rollout__V1__Welcome *w = L->welcome->welcome;
    assert_int_equal(w->protocol_version, RO_PROTOCOL_VERSION);
    assert_int_equal(w->seed, 5);
    assert_int_equal(w->max_frame, 1u << 20);
    assert_string_equal(w->spec->env, "fake-env");
    assert_int_equal(w->spec->num_envs, NUM_ENVS);
    assert_int_equal(w->spec->max_episode_steps, 500);
    ro_space_t obs, act;
    char err[ERRLEN];
    assert_int_equal(ro__check_welcome(w, NUM_ENVS, &obs, &act, err, sizeof err), 0);
    assert_int_equal(obs.kind, RO_SPACE_BOX);
    assert_int_equal(ro_space_size(&obs), OBS_DIM);
    assert_memory_equal(obs.low, t->low, sizeof t->low);
    assert_memory_equal(obs.high, t->high, sizeof t->high);
    assert_int_equal(act.kind, RO_SPACE_DISCRETE);
    assert_int_equal(act.n, NUM_ACTIONS);

    wait_rows(t, L, NUM_ENVS, "observations of all 6 orphaned envs at the learner that attached");
    check_round(L, 0);
    hub_stats(t, &st);
    assert_int_equal(st.accepted, 1);
    assert_int_equal(st.attached, 1);
    assert_int_equal(st.learners, 1);
    assert_int_equal(st.batches_sent, L->frames);
    assert_int_equal(st.rows_sent, NUM_ENVS);
    assert_int_equal(st.envs_in_flight, NUM_ENVS);
    assert_int_equal(st.envs_unsent, 0);

    /* Answering sends the shards back to stepping with those actions (the
     * env actor checks them); they offer their next step, and so on. */
    t->auto_step = true;
    for (uint64_t round = 1; round <= 3; round++) {
        learner_new_round(L);
        learner_answer(L, round % 2 == 1); /* out of order, then in order */
        want_t want = {.t = t, .L = L, .n = SHARDS * (uint32_t)round};
        loop_wait(&t->loop, replies_at_least, &want, "the actions at the shards' env actor");
        want.n = NUM_ENVS;
        loop_wait(&t->loop, learner_has_rows, &want, "the stepped envs' next observations");
        check_round(L, round);
    }
    for (uint32_t i = 0; i < SHARDS; i++)
        assert_int_equal(t->replies[i], 3);
    /* The last answers, with no step after them: nothing in flight. */
    t->auto_step = false;
    learner_answer(L, false);
    want_t all = {.t = t, .n = 4 * SHARDS};
    loop_wait(&t->loop, replies_at_least, &all, "the last actions at the shards' env actor");
    hub_stats(t, &st);
    assert_int_equal(st.envs_in_flight, 0);
    assert_int_equal(st.envs_unsent, 0);
    assert_int_equal(st.rows_sent, 4 * NUM_ENVS);
    assert_int_equal(st.batches_sent, L->frames);
    assert_int_equal(st.batches_resent, 0);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(t->total_stops, 0);
    learner_close_and_free(t, L);
    hub_test_free(t);
}

static bool learner_gone(void *ctx)
{
    const want_t *w = ctx;
    ro_hub_stats_t st;
    hub_stats(w->t, &st);
    return w->L->closed && st.learners == 0 && st.envs_unsent == NUM_ENVS;
}

/* A learner that leaves with batches unanswered: the next learner gets
 * them again, as they were (the envs did not step). */
static void test_learner_leaves_mid_batch(void **state)
{
    (void)state;
    hub_test_t *t = hub_test_new();
    offer_all(t, RO_MSG_OBS_READY);
    learner_t *one = learner_connect(t, "one", GOOD);
    wait_rows(t, one, NUM_ENVS, "observations of all 6 envs at the first learner");
    check_round(one, 0);
    const uint32_t unanswered = one->frames;

    ro__conn_close(&one->c, "leaving mid-batch");
    want_t w = {.t = t, .L = one};
    loop_wait(&t->loop, learner_gone, &w,
              "the hub taking back the 6 envs of the learner that left (envs_unsent)");
    ro_hub_stats_t st;
    hub_stats(t, &st);
    assert_int_equal(st.batches_resent, unanswered);
    assert_int_equal(st.envs_in_flight, 0);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(t->total_replies, 0); /* no env stepped */
    assert_int_equal(t->total_stops, 0);

    learner_t *two = learner_connect(t, "two", GOOD);
    wait_rows(t, two, NUM_ENVS, "the resent observations at the next learner");
    check_round(two, 0); /* the same envs, the same step: sent again as they were */
    hub_stats(t, &st);
    assert_int_equal(st.learners, 1);
    assert_int_equal(st.attached, 2);
    assert_int_equal(st.batches_sent, one->frames + two->frames);
    assert_int_equal(st.rows_sent, 2 * NUM_ENVS);
    assert_int_equal(st.envs_in_flight, NUM_ENVS);

    learner_answer(two, false);
    want_t replies = {.t = t, .n = SHARDS};
    loop_wait(&t->loop, replies_at_least, &replies, "the resent batches' actions at the shards");
    for (uint32_t i = 0; i < SHARDS; i++)
        assert_int_equal(t->replies[i], 1);
    learner_close_and_free(t, two);
    learner_close_and_free(t, one);
    hub_test_free(t);
}

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

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the node does */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orphans_adopted_answered_stepping),
        cmocka_unit_test(test_learner_leaves_mid_batch),
        cmocka_unit_test(test_bad_frames_close_only_that_learner),
        cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
