/*
 * The hub in stream mode (actors/hub/learner_hub.c with ro__hub_stream), on a
 * real loop (fixtures/hub_fixture.h's hub and shards; the test hands the
 * hub segments as the shards' ports would). Learners here read each
 * Segment in place (wire/segment_view.h) and acknowledge when told.
 * Checked: a shard's segments stay with the learner that holds some of
 * them, however unbalanced, and move to a new learner only once none is
 * held, so that each shard's segments reach learners in order; a learner
 * that leaves with segments unacknowledged gives them back, and the next
 * one gets every segment once, in order, none lost; empty last segments
 * end the shards and the hub reports done once everything is acknowledged,
 * with every segment back in its pool. Waits are for events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "actors/stream/segment.h"
#include "hub_fixture.h"
#include "wire/segment_view.h"

#define T_ROWS 2
#define NSEGS 16
#define WINDOW 2
#define MAX_SEGS 32

/* A stream learner: the segments it read, in order. */
typedef struct slearner {
    ro_conn_t c;
    ro_pb_alloc_t alloc;
    const char *name;
    bool connected, welcomed, closed, goodbye;
    uint32_t nrecv;
    uint64_t seq[MAX_SEGS], shard_seq[MAX_SEGS];
    uint32_t shard[MAX_SEGS];
    uint64_t acked; /* the last seq acknowledged */
    char bad[ERRLEN];
} slearner_t;

typedef struct sfx {
    hub_test_t *t;
    ro_seg_pool_t pool;
    uint64_t next_shard_seq[SHARDS];
} sfx_t;

static bool sl_raw(ro_conn_t *c, const uint8_t *body, size_t len)
{
    slearner_t *L = c->o.owner;
    ro_segment_view_t v;
    char err[ERRLEN];
    const ro_segment_rules_t rules = {
        .unroll = T_ROWS, .num_envs = NUM_ENVS, .obs_dim = OBS_DIM, .act_dim = 1, .discrete = true};
    int rc = ro__segment_view_parse(body, len, &v, err, sizeof err);
    if (rc == 0)
        return false;
    if (rc < 0 || ro__segment_view_check(&v, &rules, err, sizeof err) != 0) {
        snprintf(L->bad, sizeof L->bad, "%s", err);
        return true;
    }
    assert_true(L->nrecv < MAX_SEGS);
    L->seq[L->nrecv] = v.seq;
    L->shard[L->nrecv] = v.shard;
    L->shard_seq[L->nrecv] = v.shard_seq;
    L->nrecv++;
    return true;
}

static void sl_frame(ro_conn_t *c, ro_frame_t *f, bool *keep)
{
    slearner_t *L = c->o.owner;
    (void)keep;
    if (f->body_case == ROLLOUT__V1__FRAME__BODY_WELCOME)
        L->welcomed = true;
    else if (f->body_case == ROLLOUT__V1__FRAME__BODY_GOODBYE)
        L->goodbye = true;
    else
        snprintf(L->bad, sizeof L->bad, "unexpected %s frame", ro__frame_kind(f));
}

static void sl_connect(ro_conn_t *c, int status)
{
    slearner_t *L = c->o.owner;
    assert_int_equal(status, 0);
    L->connected = true;
    Rollout__V1__Hello h = ROLLOUT__V1__HELLO__INIT;
    h.protocol_version = RO_PROTOCOL_VERSION;
    h.role = "learner";
    h.name = (char *)L->name;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &h;
    assert_int_equal(ro__conn_send(&L->c, &f), 0);
}

static void sl_closed(ro_conn_t *c)
{
    ((slearner_t *)c->o.owner)->closed = true;
}

static const ro_conn_ops_t sl_ops = {
    .on_frame = sl_frame, .on_raw = sl_raw, .on_connect = sl_connect, .on_closed = sl_closed};

static slearner_t *sl_attach(hub_test_t *t, const char *name)
{
    slearner_t *L = calloc(1, sizeof *L);
    assert_non_null(L);
    L->name = name;
    ro__pb_alloc_init(&L->alloc, 1u << 20);
    ro_conn_opts_t o = {.ops = &sl_ops,
                        .owner = L,
                        .program = "test-stream-learner",
                        .max_frame = 1u << 20,
                        .max_queued = 1u << 20,
                        .alloc = &L->alloc};
    ro_addr_t a;
    struct sockaddr_storage ss;
    char err[ERRLEN];
    assert_int_equal(ro__addr_parse(t->addr, false, &a, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__addr_resolve(&t->loop, &a, &ss, "--connect", err, sizeof err), 0);
    assert_int_equal(ro__conn_connect(&L->c, &t->loop, (struct sockaddr *)&ss, &o), 0);
    loop_wait_flag(&t->loop, &L->welcomed, "the welcome to a stream learner");
    return L;
}

/* sl_ack acknowledges every segment read so far. */
static void sl_ack(slearner_t *L)
{
    if (L->nrecv == 0)
        return;
    Rollout__V1__SegmentAck a = ROLLOUT__V1__SEGMENT_ACK__INIT;
    a.seq = L->seq[L->nrecv - 1];
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT_ACK;
    f.segment_ack = &a;
    assert_int_equal(ro__conn_send(&L->c, &f), 0);
    L->acked = a.seq;
}

static void sl_close(hub_test_t *t, slearner_t *L)
{
    ro__conn_close(&L->c, "test over");
    loop_wait_flag(&t->loop, &L->closed, "a stream learner's connection closing");
    assert_string_equal(L->bad, "");
    free(L);
}

typedef struct want_recv {
    slearner_t *L;
    uint32_t n;
} want_recv_t;

static bool sl_has(void *ctx)
{
    want_recv_t *w = ctx;
    return w->L->nrecv >= w->n || w->L->bad[0];
}

static void sl_wait(hub_test_t *t, slearner_t *L, uint32_t n, const char *what)
{
    want_recv_t w = {L, n};
    loop_wait(&t->loop, sl_has, &w, what);
    assert_string_equal(L->bad, "");
    assert_int_equal(L->nrecv, n);
}

/* ---- the hub and its segments ---- */

static sfx_t *sfx_new(void)
{
    sfx_t *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->t = hub_test_new();
    ro_seg_layout_t lay;
    ro__seg_layout(&lay, T_ROWS, &x->t->obs, &x->t->act, false, PER_SHARD);
    assert_int_equal(ro__seg_pool_init(&x->pool, &lay, NSEGS, true), 0);
    assert_int_equal(ro__hub_stream(x->t->hub, &x->pool, WINDOW, 0), 0);
    return x;
}

/* feed hands the hub the next full segment of shard i (t rows; 0: the
 * shard's empty last), as the shard's port does. */
static void feed(sfx_t *x, uint32_t i, uint32_t t, bool last)
{
    ro_pool_item_t *it = ro__grant_pool_take(&x->pool.pool, NULL);
    assert_non_null(it);
    ro_segment_t *s = ro__container_of(it, ro_segment_t, item);
    s->shard = i;
    s->shard_seq = x->next_shard_seq[i]++;
    s->first_env = i * PER_SHARD;
    s->n = PER_SHARD;
    s->t = t;
    s->nfinal = 0;
    s->version_min = s->version_max = 0;
    s->last = last;
    s->conn_seq = 0;
    s->acked = false;
    s->next = NULL;
    ro__actor_send(ro__hub_actor(x->t->hub), &s->msg);
}

static uint32_t pool_free(sfx_t *x)
{
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts(&x->pool.pool, &nfree, &nwaiting);
    return nfree;
}

typedef struct want_stats {
    sfx_t *x;
    uint64_t acked;
    uint32_t unsent;
} want_stats_t;

static bool hub_at(void *ctx)
{
    want_stats_t *w = ctx;
    ro_hub_stats_t st;
    hub_stats(w->x->t, &st);
    return st.segments_acked >= w->acked && st.segments_unsent == w->unsent;
}

static void wait_hub(sfx_t *x, uint64_t acked, uint32_t unsent, const char *what)
{
    want_stats_t w = {x, acked, unsent};
    loop_wait(&x->t->loop, hub_at, &w, what);
}

/* End every shard with an empty last segment; the hub reports done once
 * everything is acknowledged; every segment is back in the pool. */
static void sfx_finish(sfx_t *x, slearner_t **learners, uint32_t n)
{
    for (uint32_t i = 0; i < SHARDS; i++)
        feed(x, i, 0, true);
    loop_wait_flag(&x->t->loop, &x->t->lane_done, "the hub's done once every shard ended");
    for (uint32_t k = 0; k < n; k++)
        sl_close(x->t, learners[k]);
    hub_test_free(x->t);
    assert_int_equal(pool_free(x), NSEGS);
    ro__seg_pool_free(&x->pool);
    free(x);
}

/* check_order wants each shard's segments read in shard_seq order from
 * `from` (per shard), with no gap and none twice; returns the next. */
static void check_order(const slearner_t *L, uint32_t from_idx, uint64_t *next)
{
    for (uint32_t k = from_idx; k < L->nrecv; k++) {
        if (L->shard_seq[k] != next[L->shard[k]])
            fail_msg("%s: segment %u is shard %u #%llu, expected #%llu", L->name, k, L->shard[k],
                     (unsigned long long)L->shard_seq[k], (unsigned long long)next[L->shard[k]]);
        next[L->shard[k]]++;
    }
}

/*
 * A second learner attaches while the first holds all three shards: a
 * shard moves to it only at a segment with none of that shard held by
 * the first (sent and unacknowledged, or pending), never in between.
 */
static void test_shard_moves_only_when_not_held(void **state)
{
    (void)state;
    sfx_t *x = sfx_new();
    hub_test_t *t = x->t;
    slearner_t *A = sl_attach(t, "A");
    for (uint32_t i = 0; i < SHARDS; i++)
        feed(x, i, T_ROWS, false);
    sl_wait(t, A, WINDOW, "the first learner's window of segments");
    wait_hub(x, 0, SHARDS - WINDOW, "the third segment pending at the first learner");

    slearner_t *B = sl_attach(t, "B");
    /* Every shard is held by A (two sent, one pending): B gets none, even
     * though A serves 6 envs and B none. */
    for (uint32_t i = 0; i < SHARDS; i++)
        feed(x, i, T_ROWS, false);
    wait_hub(x, 0, 2 * SHARDS - WINDOW, "the new segments queued at the first learner");
    assert_int_equal(B->nrecv, 0);

    /* A acknowledges as it goes; nothing moves while A holds some of a
     * shard. */
    uint64_t next[SHARDS] = {0};
    while (A->nrecv < 2 * SHARDS) {
        sl_ack(A);
        uint32_t want = A->nrecv + WINDOW < 2 * SHARDS ? A->nrecv + WINDOW : 2 * SHARDS;
        sl_wait(t, A, want, "A's next window once it acknowledged");
    }
    sl_ack(A);
    wait_hub(x, 2 * SHARDS, 0, "every segment at A acknowledged");
    check_order(A, 0, next);
    assert_int_equal(B->nrecv, 0);
    for (uint32_t i = 0; i < SHARDS; i++)
        assert_int_equal(next[i], 2);

    /* Nothing is held now: shard 0's next segment moves to B (A serves 6
     * envs, B 0); then A's 4 envs are no longer over B's 2 + 2, and shards
     * 1 and 2 stay. */
    for (uint32_t i = 0; i < SHARDS; i++)
        feed(x, i, T_ROWS, false);
    sl_wait(t, B, 1, "shard 0's next segment at B");
    sl_wait(t, A, 2 * SHARDS + 2, "shards 1 and 2's next segments at A");
    assert_int_equal(B->shard[0], 0);
    assert_int_equal(B->shard_seq[0], 2);
    assert_int_equal(B->seq[0], 1);
    check_order(A, 2 * SHARDS, next);
    assert_int_equal(next[0], 2);
    assert_int_equal(next[1], 3);
    assert_int_equal(next[2], 3);
    sl_ack(A);
    sl_ack(B);
    wait_hub(x, 3 * SHARDS, 0, "every segment acknowledged");
    slearner_t *all[] = {A, B};
    sfx_finish(x, all, 2);
}

/*
 * A learner leaves with segments sent but not acknowledged and others
 * pending: they wait (no learner left) and go to the next learner, which
 * gets every segment not acknowledged once, each shard in order; the
 * acknowledged ones are not sent again.
 */
static void test_detach_reattach(void **state)
{
    (void)state;
    sfx_t *x = sfx_new();
    hub_test_t *t = x->t;
    slearner_t *A = sl_attach(t, "A");
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < SHARDS; i++)
            feed(x, i, T_ROWS, false);
    sl_wait(t, A, WINDOW, "A's window");
    sl_ack(A); /* A takes its first two */
    sl_wait(t, A, 2 * WINDOW, "A's second window");
    wait_hub(x, WINDOW, 2 * SHARDS - 2 * WINDOW, "two acknowledged, two in flight, two pending");
    uint64_t next[SHARDS] = {0};
    check_order(A, 0, next);
    ro__conn_close(&A->c, "leaving");
    loop_wait_flag(&t->loop, &A->closed, "A gone");
    ro_hub_stats_t st;
    hub_stats(t, &st);
    assert_int_equal(st.segments_resent, WINDOW);
    assert_int_equal(st.learners, 0);

    slearner_t *B = sl_attach(t, "B");
    /* B gets the four not acknowledged: first the two A had unacked. */
    uint64_t nb[SHARDS];
    nb[A->shard[0]] = A->shard_seq[0] + 1;
    nb[A->shard[1]] = A->shard_seq[1] + 1;
    for (uint32_t i = 0; i < SHARDS; i++)
        if (i != A->shard[0] && i != A->shard[1])
            nb[i] = 0;
    const uint32_t rest = 2 * SHARDS - WINDOW;
    sl_wait(t, B, WINDOW, "B's first window");
    while (B->nrecv < rest) {
        sl_ack(B);
        sl_wait(t, B, B->nrecv + WINDOW < rest ? B->nrecv + WINDOW : rest, "B's next window");
    }
    sl_ack(B);
    check_order(B, 0, nb);
    for (uint32_t i = 0; i < SHARDS; i++)
        assert_int_equal(nb[i], 2); /* every segment of every shard, once in all */
    assert_int_equal(B->seq[0], 1); /* B's connection counts from 1 */
    wait_hub(x, 2 * SHARDS, 0, "everything acknowledged by A or B");
    hub_stats(t, &st);
    assert_int_equal(st.segments_acked, 2 * SHARDS);
    assert_int_equal(st.segments_in_flight, 0);
    free(A);
    slearner_t *all[] = {B};
    sfx_finish(x, all, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_moves_only_when_not_held),
        cmocka_unit_test(test_detach_reattach),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
