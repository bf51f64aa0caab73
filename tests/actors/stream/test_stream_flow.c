/*
 * Stream mode's flow of segments through one learner session
 * (actors/stream/stream_flow.c) over a real connection: the node's end accepted
 * by a listener on 127.0.0.1:0, a learner's end on the same loop reading
 * each Segment frame in place (wire/segment_view.h) and holding it to the
 * welcome's rules. Checked: at most `window` unacknowledged, cumulative
 * acks freeing segments into their pool, an ack for a seq never sent
 * refused with one line, an ack that comes while the frame is still being
 * written (the segment is freed once written, not before), segments too
 * far behind dropped and counted, the lag statistics; `held` per shard,
 * which lets the hub move a shard only at 0; a session closing gives its
 * segments back sent ones first, in order, and another session sends each
 * once, none lost. Then backpressure end to end with a shard's stream port
 * (actors/stream/segment.c): a learner that does not acknowledge stops the shard
 * (it waits for a grant, counted) with nothing growing, and each ack lets
 * it make exactly one more segment. Waits are for events (loop_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exchange/messages.h"
#include "actors/stream/stream_flow.h"
#include "actors/stream/stream_port.h"
#include "loop_fixture.h"
#include "runtime/error.h"
#include "step_batch_fixture.h"
#include "wire/addr.h"
#include "wire/conn.h"
#include "wire/listener.h"
#include "wire/segment_view.h"

#define T_ROWS 2
#define N_ENVS 2
#define OBS_DIM 3
#define NSHARDS 2
#define MAX_RECV 64
#define ERRLEN 256

/* What the learner's end read: every segment frame, in order. */
typedef struct recv_seg {
    uint64_t seq, shard_seq;
    uint32_t shard;
} recv_seg_t;

typedef struct fx {
    uv_loop_t loop;
    ro_listener_t server;
    char bound[80];
    ro_conn_t node, learner;
    ro_pb_alloc_t node_alloc, learner_alloc;
    bool accepted, connected, node_closed, learner_closed;
    recv_seg_t recv[MAX_RECV];
    uint32_t nrecv, other_frames;
    char bad[ERRLEN]; /* the first frame the learner could not take */

    ro_seg_layout_t lay;
    ro_seg_pool_t pool;
    uint64_t next_shard_seq[NSHARDS];
    uint32_t held[NSHARDS];
    ro_sflow_stats_t st;

    /* The backpressure test's shard and its hub. */
    ro_actor_t hub, env;
    ro_loop_home_t hub_home, env_home;
    ro_stream_port_t port;
    ro_step_batch_t b;
    float logp[N_ENVS];
    uint64_t ep_num[N_ENVS];
    uint32_t ep_len[N_ENVS];
    ro_sflow_t *flow; /* the session the hub feeds */
    uint32_t handed, resumed;
} fx_t;

/* ---- the learner's end ---- */

static bool learner_raw(ro_conn_t *c, const uint8_t *body, size_t len)
{
    fx_t *f = c->o.owner;
    ro_segment_view_t v;
    char err[ERRLEN];
    const ro_segment_rules_t rules = {.unroll = T_ROWS,
                                      .num_envs = NSHARDS * N_ENVS,
                                      .obs_dim = OBS_DIM,
                                      .act_dim = 1,
                                      .discrete = true};
    int rc = ro__segment_view_parse(body, len, &v, err, sizeof err);
    if (rc == 0) {
        f->other_frames++;
        return false;
    }
    if (rc < 0 || (rc = ro__segment_view_check(&v, &rules, err, sizeof err)) != 0) {
        if (!f->bad[0])
            snprintf(f->bad, sizeof f->bad, "%s", err);
        return true;
    }
    assert_true(f->nrecv < MAX_RECV);
    f->recv[f->nrecv++] = (recv_seg_t){.seq = v.seq, .shard_seq = v.shard_seq, .shard = v.shard};
    return true;
}

static void ignore_frame(ro_conn_t *c, ro_frame_t *fr, bool *keep)
{
    (void)fr;
    (void)keep;
    ((fx_t *)c->o.owner)->other_frames++;
}

static void on_connect(ro_conn_t *c, int status)
{
    assert_int_equal(status, 0);
    ((fx_t *)c->o.owner)->connected = true;
}

static void learner_closed(ro_conn_t *c)
{
    ((fx_t *)c->o.owner)->learner_closed = true;
}

static void node_closed(ro_conn_t *c)
{
    ((fx_t *)c->o.owner)->node_closed = true;
}

static const ro_conn_ops_t learner_ops = {
    .on_frame = ignore_frame,
    .on_raw = learner_raw,
    .on_connect = on_connect,
    .on_closed = learner_closed,
};

static const ro_conn_ops_t node_ops = {.on_frame = ignore_frame, .on_closed = node_closed};

static void on_connection(ro_listener_t *l, int fd)
{
    fx_t *f = l->data;
    assert_false(f->accepted);
    ro__pb_alloc_init(&f->node_alloc, 1u << 20);
    ro_conn_opts_t o = {.ops = &node_ops,
                        .owner = f,
                        .program = "test_stream_flow",
                        .max_frame = 1u << 20,
                        .max_queued = 64u << 20,
                        .alloc = &f->node_alloc};
    assert_int_equal(ro__conn_accept(&f->node, &f->loop, fd, &o), 0);
    f->accepted = true;
}

static bool both_up(void *ctx)
{
    fx_t *f = ctx;
    return f->accepted && f->connected;
}

/* ---- the segments' side: a loop hub and a shard's env actor ---- */

static void hub_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fx_t *f = ro__container_of(self, fx_t, hub);
    assert_int_equal(msg->type, RO_MSG_SEGMENT);
    ro_segment_t *s = ro__container_of(msg, ro_segment_t, msg);
    f->handed++;
    ro__sflow_push(f->flow, s, &f->st);
    ro_segment_t *dropped = NULL;
    assert_int_equal(ro__sflow_send(f->flow, &f->node, 0, &dropped, &f->st), 0);
    assert_null(dropped);
}

static void env_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fx_t *f = ro__container_of(self, fx_t, env);
    assert_int_equal(msg->type, RO_MSG_STREAM_RESUME);
    ro__stream_port_resume(&f->port);
    f->resumed++;
}

static fx_t *fx_new(uint32_t nsegs)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    char err[ERRLEN] = "";
    if (ro__listener_open(&f->server, &f->loop, "127.0.0.1:0", "--listen", false,
                          "test_stream_flow", on_connection, f, f->bound, sizeof f->bound, err,
                          sizeof err))
        fail_msg("listen: %s", err);
    ro_addr_t a;
    struct sockaddr_storage ss;
    assert_int_equal(ro__addr_parse(f->bound, false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&f->loop, &a, &ss, "--connect", err, sizeof err), 0);
    ro__pb_alloc_init(&f->learner_alloc, 1u << 20);
    ro_conn_opts_t o = {.ops = &learner_ops,
                        .owner = f,
                        .program = "test_stream_flow",
                        .max_frame = 1u << 20,
                        .max_queued = 1u << 20,
                        .alloc = &f->learner_alloc};
    assert_int_equal(ro__conn_connect(&f->learner, &f->loop, (struct sockaddr *)&ss, &o), 0);
    loop_wait(&f->loop, both_up, f, "the learner's connection to the node's listener");

    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {OBS_DIM}};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 3};
    ro__seg_layout(&f->lay, T_ROWS, &obs, &act, false, N_ENVS);
    assert_int_equal(ro__seg_pool_init(&f->pool, &f->lay, nsegs, false), 0);
    f->st.held = f->held;
    assert_int_equal(ro__actor_init_loop(&f->hub, "hub", hub_behaviour, &f->loop, &f->hub_home), 0);
    assert_int_equal(ro__actor_init_loop(&f->env, "env", env_behaviour, &f->loop, &f->env_home), 0);
    return f;
}

static void fx_free(fx_t *f)
{
    ro__conn_close(&f->learner, "test done");
    ro__conn_close(&f->node, "test done");
    loop_wait_flag(&f->loop, &f->learner_closed, "the learner's end closing");
    loop_wait_flag(&f->loop, &f->node_closed, "the node's end closing");
    ro__listener_close(&f->server);
    ro__actor_close_loop(&f->hub_home);
    ro__actor_close_loop(&f->env_home);
    loop_finish(&f->loop);
    assert_string_equal(f->bad, "");
    assert_int_equal(f->other_frames, 0);
    ro__seg_pool_free(&f->pool);
    if (f->b.obs)
        fake_batch_free(&f->b);
    free(f);
}

static uint32_t pool_free(fx_t *f)
{
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts(&f->pool.pool, &nfree, &nwaiting);
    return nfree;
}

/* A full segment of shard from the pool, as a port would hand it over:
 * versions v..v (every row), no final observations. */
static ro_segment_t *make_segment(fx_t *f, uint32_t shard, uint64_t version)
{
    ro_pool_item_t *it = ro__grant_pool_take(&f->pool.pool, NULL);
    assert_non_null(it);
    ro_segment_t *s = ro__container_of(it, ro_segment_t, item);
    s->shard = shard;
    s->shard_seq = f->next_shard_seq[shard]++;
    s->first_env = shard * N_ENVS;
    s->n = N_ENVS;
    s->t = T_ROWS;
    s->nfinal = 0;
    s->version_min = s->version_max = version;
    for (uint32_t t = 0; t < T_ROWS; t++)
        ((uint64_t *)s->col[RO_SEG_POLICY_VERSION])[t] = version;
    s->last = false;
    s->conn_seq = 0;
    s->acked = false;
    s->writing = 0;
    s->next = NULL;
    return s;
}

typedef struct want_n {
    fx_t *f;
    uint32_t n;
} want_n_t;

static bool got_recv(void *ctx)
{
    want_n_t *w = ctx;
    return w->f->nrecv >= w->n || w->f->bad[0];
}

static void wait_recv(fx_t *f, uint32_t n, const char *what)
{
    want_n_t w = {f, n};
    loop_wait(&f->loop, got_recv, &w, what);
    assert_string_equal(f->bad, "");
    assert_int_equal(f->nrecv, n);
}

static bool pool_has(void *ctx)
{
    want_n_t *w = ctx;
    return pool_free(w->f) >= w->n;
}

/* wait_pool_free runs the loop until n segments are free (written ones
 * that were acknowledged go back once their write completes). */
static void wait_pool_free(fx_t *f, uint32_t n, const char *what)
{
    want_n_t w = {f, n};
    loop_wait(&f->loop, pool_has, &w, what);
    assert_int_equal(pool_free(f), n);
}

static void send_all(fx_t *f, ro_sflow_t *fl, uint64_t version_now)
{
    ro_segment_t *dropped = NULL;
    assert_int_equal(ro__sflow_send(fl, &f->node, version_now, &dropped, &f->st), 0);
    assert_null(dropped);
}

static void expect_recv(const fx_t *f, uint32_t i, uint64_t seq, uint32_t shard, uint64_t shard_seq)
{
    if (f->recv[i].seq != seq || f->recv[i].shard != shard || f->recv[i].shard_seq != shard_seq)
        fail_msg("frame %u: seq %llu of shard %u #%llu, expected seq %llu of shard %u #%llu", i,
                 (unsigned long long)f->recv[i].seq, f->recv[i].shard,
                 (unsigned long long)f->recv[i].shard_seq, (unsigned long long)seq, shard,
                 (unsigned long long)shard_seq);
}

/* ---- window and acks ---- */

static void test_window_and_acks(void **state)
{
    (void)state;
    fx_t *f = fx_new(6);
    ro_sflow_t fl;
    ro__sflow_init(&fl, 2, 0);
    for (int i = 0; i < 5; i++)
        ro__sflow_push(&fl, make_segment(f, 1, 7), &f->st);
    assert_int_equal(fl.pending, 5);
    assert_int_equal(f->held[1], 5);
    assert_int_equal(f->held[0], 0);
    assert_int_equal(ro__sflow_oldest_sent_ns(&fl), 0);

    /* The window: two go, three wait; sending again sends nothing. */
    send_all(f, &fl, 7);
    send_all(f, &fl, 7);
    assert_int_equal(fl.sent, 2);
    assert_int_equal(fl.pending, 3);
    assert_true(ro__sflow_oldest_sent_ns(&fl) > 0);
    wait_recv(f, 2, "the first two segments at the learner");
    expect_recv(f, 0, 1, 1, 0);
    expect_recv(f, 1, 2, 1, 1);
    assert_int_equal(f->st.sent, 2);
    assert_int_equal(f->st.transitions_sent, 2 * T_ROWS * N_ENVS);

    /* An ack for what was never sent: refused, one line, nothing changes. */
    char err[ERRLEN] = "";
    assert_int_equal(ro__sflow_ack(&fl, 3, &f->st, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "segment 3, which was never sent"));
    assert_null(strchr(err, '\n'));
    assert_int_equal(fl.sent, 2);
    assert_int_equal(f->st.acked, 0);

    /* Ack 1: it goes back to the pool (once written), one more may go. */
    assert_int_equal(ro__sflow_ack(&fl, 1, &f->st, err, sizeof err), 0);
    assert_int_equal(fl.sent, 1);
    assert_int_equal(f->held[1], 4);
    wait_pool_free(f, 2, "the acknowledged segment back in the pool");
    send_all(f, &fl, 7);
    assert_int_equal(fl.sent, 2);
    wait_recv(f, 3, "the third segment");
    expect_recv(f, 2, 3, 1, 2);

    /* A stale ack changes nothing; a cumulative one frees both. */
    assert_int_equal(ro__sflow_ack(&fl, 1, &f->st, err, sizeof err), 0);
    assert_int_equal(fl.sent, 2);
    assert_int_equal(ro__sflow_ack(&fl, 3, &f->st, err, sizeof err), 0);
    assert_int_equal(fl.sent, 0);
    assert_int_equal(ro__sflow_oldest_sent_ns(&fl), 0);
    assert_int_equal(f->held[1], 2);
    wait_pool_free(f, 4, "two segments acknowledged at once back in the pool");

    send_all(f, &fl, 7);
    wait_recv(f, 5, "the last two segments");
    expect_recv(f, 3, 4, 1, 3);
    expect_recv(f, 4, 5, 1, 4);
    assert_int_equal(fl.pending, 0);
    /* The shard may move only when the learner holds none of it. */
    assert_int_equal(ro__sflow_ack(&fl, 4, &f->st, err, sizeof err), 0);
    assert_int_equal(f->held[1], 1);
    assert_int_equal(ro__sflow_ack(&fl, 5, &f->st, err, sizeof err), 0);
    assert_int_equal(f->held[1], 0);
    wait_pool_free(f, 6, "every segment back in the pool");
    assert_int_equal(f->st.sent, 5);
    assert_int_equal(f->st.acked, 5);
    assert_int_equal(f->st.transitions_acked, 5 * T_ROWS * N_ENVS);
    assert_int_equal(f->st.lag_count, 5);
    assert_int_equal(f->st.lag_max, 0);
    fx_free(f);
}

/* A window of 0 is read as 1: the flow never stalls for good. */
static void test_window_zero_is_one(void **state)
{
    (void)state;
    fx_t *f = fx_new(2);
    ro_sflow_t fl;
    ro__sflow_init(&fl, 0, 0);
    ro__sflow_push(&fl, make_segment(f, 0, 1), &f->st);
    ro__sflow_push(&fl, make_segment(f, 0, 1), &f->st);
    send_all(f, &fl, 1);
    assert_int_equal(fl.sent, 1);
    wait_recv(f, 1, "the one segment a window of 0 lets through");
    char err[ERRLEN];
    assert_int_equal(ro__sflow_ack(&fl, 1, &f->st, err, sizeof err), 0);
    send_all(f, &fl, 1);
    wait_recv(f, 2, "the second segment");
    assert_int_equal(ro__sflow_ack(&fl, 2, &f->st, err, sizeof err), 0);
    wait_pool_free(f, 2, "both segments back");
    fx_free(f);
}

/*
 * The learner acknowledges a segment before libuv reports its frame
 * written (the write callback comes a loop turn later): the segment must
 * stay out of the pool, since the kernel may still read its columns, and
 * go back when the write completes.
 */
static void test_ack_while_writing(void **state)
{
    (void)state;
    fx_t *f = fx_new(2);
    ro_sflow_t fl;
    ro__sflow_init(&fl, 4, 0);
    ro_segment_t *s = make_segment(f, 0, 3);
    ro__sflow_push(&fl, s, &f->st);
    send_all(f, &fl, 3);
    assert_int_equal(s->writing, 1);
    char err[ERRLEN];
    assert_int_equal(ro__sflow_ack(&fl, 1, &f->st, err, sizeof err), 0);
    assert_true(s->acked);
    assert_int_equal(pool_free(f), 1); /* not back yet */
    assert_int_equal(f->held[0], 0);
    wait_pool_free(f, 2, "the segment back once its frame was written");
    assert_int_equal(s->writing, 0);
    wait_recv(f, 1, "the segment at the learner");
    fx_free(f);
}

/* Segments more than max_lag versions behind are not sent: dropped,
 * counted, no longer held; the lag of the others is recorded. */
static void test_lag_drop(void **state)
{
    (void)state;
    fx_t *f = fx_new(4);
    ro_sflow_t fl;
    ro__sflow_init(&fl, 8, 3);
    ro_segment_t *old = make_segment(f, 0, 5);
    ro__sflow_push(&fl, old, &f->st);                   /* lag 5: dropped */
    ro__sflow_push(&fl, make_segment(f, 0, 7), &f->st); /* lag 3: sent */
    ro__sflow_push(&fl, make_segment(f, 0, 9), &f->st); /* lag 1 */
    ro_segment_t *dropped = NULL;
    assert_int_equal(ro__sflow_send(&fl, &f->node, 10, &dropped, &f->st), 0);
    assert_ptr_equal(dropped, old);
    assert_null(old->next);
    assert_int_equal(f->st.dropped_lag, 1);
    assert_int_equal(fl.sent, 2);
    assert_int_equal(f->held[0], 2);
    assert_int_equal(f->st.lag_count, 2);
    assert_int_equal(f->st.lag_sum, 4);
    assert_int_equal(f->st.lag_min, 1);
    assert_int_equal(f->st.lag_max, 3);
    /* Newer than the version now (weights went back): lag 0, not huge. */
    ro__sflow_push(&fl, make_segment(f, 0, 12), &f->st);
    send_all(f, &fl, 10);
    assert_int_equal(f->st.lag_count, 3);
    assert_int_equal(f->st.lag_sum, 4);
    assert_int_equal(f->st.lag_min, 0);
    assert_int_equal(f->st.lag_max, 3);
    assert_int_equal(f->held[0], 3);
    wait_recv(f, 3, "the three segments within the lag");
    expect_recv(f, 0, 1, 0, 1);
    expect_recv(f, 1, 2, 0, 2);
    expect_recv(f, 2, 3, 0, 3);
    ro__seg_pool_give(&f->pool, dropped);
    char err[ERRLEN];
    assert_int_equal(ro__sflow_ack(&fl, 3, &f->st, err, sizeof err), 0);
    wait_pool_free(f, 4, "every segment back");
    fx_free(f);
}

/*
 * A session closes with segments sent but not acknowledged and others
 * pending: reclaim gives them all back, sent ones first in their order,
 * unsent (conn_seq 0), and no longer held (their shards may move). Another
 * session sends each once: per shard in shard_seq order, none lost, none
 * twice, and every segment returns to the pool exactly once.
 */
static void test_reclaim_and_resend(void **state)
{
    (void)state;
    fx_t *f = fx_new(6);
    ro_sflow_t a, b;
    ro__sflow_init(&a, 2, 0);
    ro_segment_t *segs[5];
    const uint32_t shard_of[5] = {0, 0, 1, 0, 1};
    for (int i = 0; i < 5; i++) {
        segs[i] = make_segment(f, shard_of[i], 2);
        ro__sflow_push(&a, segs[i], &f->st);
    }
    assert_int_equal(f->held[0], 3);
    assert_int_equal(f->held[1], 2);
    send_all(f, &a, 2);
    wait_recv(f, 2, "two segments to the first session");
    uint64_t resent = 99;
    ro_segment_t *back = ro__sflow_reclaim(&a, &resent, &f->st);
    assert_int_equal(resent, 2);
    assert_int_equal(a.sent, 0);
    assert_int_equal(a.pending, 0);
    assert_int_equal(f->held[0], 0);
    assert_int_equal(f->held[1], 0);
    int i = 0;
    for (ro_segment_t *s = back; s; s = s->next, i++) {
        assert_true(i < 5);
        assert_ptr_equal(s, segs[i]);
        assert_int_equal(s->conn_seq, 0);
    }
    assert_int_equal(i, 5);
    /* Reclaiming an empty session gives nothing. */
    assert_null(ro__sflow_reclaim(&a, &resent, &f->st));
    assert_int_equal(resent, 0);

    ro__sflow_init(&b, 8, 0);
    while (back) {
        ro_segment_t *s = back;
        back = s->next;
        ro__sflow_push(&b, s, &f->st);
    }
    send_all(f, &b, 2);
    wait_recv(f, 7, "the five segments again on the second session");
    uint64_t next[NSHARDS] = {0, 0};
    for (uint32_t k = 2; k < 7; k++) {
        assert_int_equal(f->recv[k].seq, k - 1); /* the new session counts from 1 */
        assert_int_equal(f->recv[k].shard_seq, next[f->recv[k].shard]++);
    }
    assert_int_equal(next[0], 3);
    assert_int_equal(next[1], 2);
    char err[ERRLEN];
    assert_int_equal(ro__sflow_ack(&b, 5, &f->st, err, sizeof err), 0);
    wait_pool_free(f, 6, "every segment back exactly once");
    assert_int_equal(f->st.acked, 5);
    fx_free(f);
}

/* ---- backpressure: a shard's port against a learner that lags ---- */

/* step_shard steps the shard until its port must wait (or `limit` steps);
 * returns the steps taken. */
static uint32_t step_shard(fx_t *f, uint32_t limit)
{
    uint32_t steps = 0;
    while (steps < limit) {
        memset(f->logp, 0, sizeof f->logp);
        f->b.policy_version = 1;
        ro__stream_capture_action(&f->port, &f->b, f->ep_num, f->ep_len);
        fake_batch_fill(&f->b, f->b.steps + 1);
        steps++;
        if (!ro__stream_capture_outcome(&f->port, &f->b))
            break;
    }
    return steps;
}

typedef struct want_handed {
    fx_t *f;
    uint32_t handed, resumed;
} want_handed_t;

static bool handed_and_resumed(void *ctx)
{
    want_handed_t *w = ctx;
    return w->f->handed >= w->handed && w->f->resumed >= w->resumed;
}

static void test_backpressure(void **state)
{
    (void)state;
    const uint32_t nsegs = 3, window = 1, rounds = 6;
    fx_t *f = fx_new(nsegs);
    ro_sflow_t fl;
    ro__sflow_init(&fl, window, 0);
    f->flow = &fl;
    fake_batch_init(&f->b, 0, 0, N_ENVS, OBS_DIM, 1, true);
    f->b.logp = f->logp;
    ro__stream_port_init(&f->port, &f->pool, &f->hub, 0, &f->env);
    assert_true(ro__stream_port_ready(&f->port));

    /* No acks: the shard fills the whole pool, then waits. */
    assert_int_equal(step_shard(f, 100), nsegs * T_ROWS);
    assert_null(f->port.cur);
    assert_int_equal(atomic_load(&f->port.waits), 1);
    want_handed_t w = {f, nsegs, 0};
    loop_wait(&f->loop, handed_and_resumed, &w, "every segment of the pool at the hub");
    wait_recv(f, window, "the window's segments at the learner");
    /* Nothing grows while the learner is behind: the window is full, the
     * rest waits in the session, the pool is empty, one shard waits. */
    assert_int_equal(fl.sent, window);
    assert_int_equal(fl.pending, nsegs - window);
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts(&f->pool.pool, &nfree, &nwaiting);
    assert_int_equal(nfree, 0);
    assert_int_equal(nwaiting, 1);
    assert_int_equal(f->held[0], nsegs);

    /* Each ack frees one segment: the shard makes exactly one more. */
    char err[ERRLEN];
    for (uint32_t r = 1; r <= rounds; r++) {
        assert_int_equal(ro__sflow_ack(&fl, r, &f->st, err, sizeof err), 0);
        send_all(f, &fl, 1);
        want_handed_t g = {f, nsegs + r - 1, r};
        loop_wait(&f->loop, handed_and_resumed, &g, "RO_MSG_STREAM_RESUME after an ack");
        assert_int_equal(step_shard(f, 100), T_ROWS);
        assert_int_equal(atomic_load(&f->port.waits), r + 1);
        g.handed = nsegs + r;
        loop_wait(&f->loop, handed_and_resumed, &g, "the shard's next segment at the hub");
        wait_recv(f, window + r, "the next segment at the learner");
        ro__grant_pool_counts(&f->pool.pool, &nfree, &nwaiting);
        assert_int_equal(nfree, 0);
        assert_int_equal(nwaiting, 1);
        assert_int_equal(fl.sent + fl.pending, nsegs);
    }
    for (uint32_t k = 0; k < f->nrecv; k++)
        expect_recv(f, k, k + 1, 0, k); /* in order, none twice, none lost */

    /* The learner catches up: everything comes back, the shard goes on. */
    for (uint64_t seq = rounds + 1; fl.sent + fl.pending > 0; seq++) {
        assert_int_equal(ro__sflow_ack(&fl, seq, &f->st, err, sizeof err), 0);
        send_all(f, &fl, 1);
        wait_recv(f, (uint32_t)seq + (fl.sent ? 1 : 0), "the rest at the learner");
    }
    want_handed_t g = {f, nsegs + rounds, rounds + 1};
    loop_wait(&f->loop, handed_and_resumed, &g, "the shard resumed once the learner caught up");
    assert_int_equal(f->held[0], 0);
    wait_pool_free(f, nsegs - 1, "the pool full again but the shard's segment");
    assert_non_null(f->port.cur);
    f->port.cur->next = NULL;
    ro__seg_pool_give(&f->pool, f->port.cur);
    f->port.cur = NULL;
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_and_acks),    cmocka_unit_test(test_window_zero_is_one),
        cmocka_unit_test(test_ack_while_writing),  cmocka_unit_test(test_lag_drop),
        cmocka_unit_test(test_reclaim_and_resend), cmocka_unit_test(test_backpressure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
