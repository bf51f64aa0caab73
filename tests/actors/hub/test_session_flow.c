/*
 * One learner session's flow of step batches (actors/hub/session_flow.c) and
 * their frames (actors/hub/obs_codec.c), without a socket: the connection is
 * not open, so every send fails with RO_EIO and the batch stays in flight,
 * as the hub expects. Due when every owned env waits; sequence numbers 1,
 * 2, ...; a bad Actions frame (unknown seq, wrong count, action out of
 * range) changes nothing; a good one writes the actions into the step
 * batches and returns the sent batch to the pool; reclaim hands back what
 * was in flight, oldest first, then what was pending. And the encoder
 * writes every field of an Observations frame exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "actors/hub/obs_codec.h"
#include "actors/hub/session_flow.h"
#include "runtime/error.h"
#include "step_batch_fixture.h"
#include "wire/checks.h"

#define ERRLEN 256
#define OBS_DIM 3
#define SHARDS 3
#define PER_SHARD 2
#define FOREVER_NS (UINT64_MAX / 4)

typedef struct fixture {
    ro_step_batch_t b[SHARDS];
    ro_sent_batch_t pool_mem[SHARDS];
    ro_sent_batch_t *pool;
    ro_obs_encoder_t enc;
    ro_conn_t conn; /* never opened: sends fail, as to a closing peer */
    ro_flow_t flow;
    ro_space_t act;
    float low[2], high[2];
} fixture_t;

static uint32_t pool_size(const ro_sent_batch_t *p)
{
    uint32_t n = 0;
    for (; p; p = p->next)
        n++;
    return n;
}

/* SHARDS shards of PER_SHARD envs, discrete (3 actions) or a box of 2 in
 * [-1, 1]; a flow that owns them all, batches of `batch` envs. */
static fixture_t *fixture_new(bool discrete, uint32_t batch)
{
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    for (uint32_t i = 0; i < SHARDS; i++) {
        fake_batch_init(&t->b[i], i, i * PER_SHARD, PER_SHARD, OBS_DIM, 2, discrete);
        t->pool_mem[i].next = t->pool;
        t->pool = &t->pool_mem[i];
    }
    assert_int_equal(ro__obs_encoder_init(&t->enc, batch + PER_SHARD, OBS_DIM, NULL), 0);
    ro__flow_init(&t->flow, batch, FOREVER_NS);
    t->flow.owned_rows = SHARDS * PER_SHARD; /* the hub's bookkeeping */
    if (discrete) {
        t->act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    } else {
        t->low[0] = t->low[1] = -1.0f;
        t->high[0] = t->high[1] = 1.0f;
        t->act = (ro_space_t){
            .kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = t->low, .high = t->high};
    }
    return t;
}

static void fixture_free(fixture_t *t)
{
    for (uint32_t i = 0; i < SHARDS; i++)
        fake_batch_free(&t->b[i]);
    ro__obs_encoder_free(&t->enc);
    free(t);
}

static void push(fixture_t *t, uint32_t shard)
{
    ro__batcher_push(&t->flow.pending, &t->b[shard].item);
}

/* send_frame: one frame; the closed connection says RO_EIO, the frame is in
 * flight all the same. Returns its envs. */
static uint32_t send_frame(fixture_t *t)
{
    uint32_t rows = 0;
    assert_int_equal(ro__flow_send(&t->flow, &t->pool, &t->enc, &t->conn, &rows), RO_EIO);
    return rows;
}

/* check_list wants the items to be the step batches of shards[0..n). */
static void check_list(ro_batch_item_t *it, const uint32_t *shards, size_t n, fixture_t *t)
{
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(it, &t->b[shards[i]].item);
        it = it->next;
    }
    assert_null(it);
}

static void test_due_when_every_owned_env_waits(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 100); /* never full */
    assert_false(ro__flow_due(&t->flow));
    push(t, 0);
    push(t, 1);
    assert_false(ro__flow_due(&t->flow)); /* shard 2 may still come */
    push(t, 2);
    assert_true(ro__flow_due(&t->flow));
    assert_int_equal(send_frame(t), 6);
    assert_false(ro__flow_due(&t->flow)); /* nothing pending */

    /* With envs in flight, those count as waiting too. */
    fixture_free(t);
    t = fixture_new(true, 4);
    push(t, 0);
    push(t, 1);
    assert_true(ro__flow_due(&t->flow)); /* full */
    assert_int_equal(send_frame(t), 4);
    push(t, 2);
    assert_true(ro__flow_due(&t->flow)); /* 2 pending + 4 in flight = all 6 */
    assert_int_equal(send_frame(t), 2);
    assert_int_equal(t->flow.inflight_rows, 6);
    assert_int_equal(pool_size(t->pool), SHARDS - 2);
    fixture_free(t);
}

static void test_send_numbers_frames(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 2);
    assert_int_equal(ro__flow_oldest_sent_ns(&t->flow), 0);
    for (uint32_t i = 0; i < SHARDS; i++) {
        push(t, i);
        assert_int_equal(send_frame(t), PER_SHARD);
        /* The encoder holds the frame just sent: this shard's envs. */
        assert_int_equal(t->enc.c.env[0], i * PER_SHARD);
        assert_int_equal(t->enc.c.env[1], i * PER_SHARD + 1);
    }
    uint64_t seq = 1;
    for (ro_sent_batch_t *s = t->flow.inflight_head; s; s = s->next, seq++) {
        assert_int_equal(s->seq, seq);
        assert_int_equal(s->rows, PER_SHARD);
        check_list(s->items, (const uint32_t[]){(uint32_t)seq - 1}, 1, t);
    }
    assert_int_equal(seq, SHARDS + 1);
    assert_int_equal(t->flow.next_seq, SHARDS + 1);
    assert_int_equal(ro__flow_oldest_sent_ns(&t->flow), t->flow.inflight_head->sent_ns);
    assert_int_equal(pool_size(t->pool), 0);
    fixture_free(t);
}

/* answer sends an Actions frame for seq with n discrete values (or n box
 * values) starting at first. */
static ro_batch_item_t *answer(fixture_t *t, uint64_t seq, const int32_t *d, const float *f,
                               size_t n, char *err)
{
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = seq;
    if (d) {
        a.n_discrete = n;
        a.discrete = (int32_t *)d;
    } else {
        a.n_box = n;
        a.box = (float *)f;
    }
    err[0] = '\0';
    return ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN);
}

static void expect_refused(fixture_t *t, uint64_t seq, const int32_t *d, const float *f, size_t n,
                           const char *why)
{
    char err[ERRLEN];
    uint32_t inflight = t->flow.inflight_rows, pooled = pool_size(t->pool);
    int32_t before[SHARDS][PER_SHARD];
    for (uint32_t i = 0; i < SHARDS; i++)
        memcpy(before[i], t->b[i].act_i, sizeof before[i]);
    assert_null(answer(t, seq, d, f, n, err));
    if (!strstr(err, why))
        fail_msg("\"%s\" does not say \"%s\"", err, why);
    assert_int_equal(t->flow.inflight_rows, inflight); /* still in flight */
    assert_int_equal(pool_size(t->pool), pooled);
    for (uint32_t i = 0; i < SHARDS; i++) /* no action written */
        assert_memory_equal(t->b[i].act_i, before[i], sizeof before[i]);
}

static void test_bad_answers_change_nothing(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 4);
    push(t, 0);
    push(t, 1);
    assert_int_equal(send_frame(t), 4); /* seq 1: envs 0-3 */
    expect_refused(t, 2, (const int32_t[]){0, 1, 2, 0}, NULL, 4,
                   "actions for seq 2, which is not awaiting actions");
    expect_refused(t, 0, (const int32_t[]){0, 1, 2, 0}, NULL, 4,
                   "actions for seq 0, which is not awaiting actions");
    expect_refused(t, 1, (const int32_t[]){0, 1, 2}, NULL, 3,
                   "actions for seq 1: 3 discrete values, expected 4");
    expect_refused(t, 1, (const int32_t[]){0, 1, 2, 0, 1}, NULL, 5,
                   "actions for seq 1: 5 discrete values, expected 4");
    expect_refused(t, 1, NULL, (const float[]){0, 0, 0, 0}, 4,
                   "actions for seq 1: 4 box values, but the env's actions are discrete: expected "
                   "4 discrete values");
    expect_refused(t, 1, (const int32_t[]){0, 1, 3, 0}, NULL, 4,
                   "actions for seq 1: action 3 at 2 is outside [0, 3)");
    expect_refused(t, 1, (const int32_t[]){0, -1, 2, 0}, NULL, 4,
                   "action -1 at 1 is outside [0, 3)");
    fixture_free(t);
}

static void test_good_answer_discrete(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 4);
    push(t, 0);
    push(t, 1);
    assert_int_equal(send_frame(t), 4); /* seq 1: shards 0, 1 */
    push(t, 2);
    assert_int_equal(send_frame(t), 2); /* seq 2: shard 2 */
    char err[ERRLEN];
    /* Answered out of order: seq 2 first. */
    ro_batch_item_t *it = answer(t, 2, (const int32_t[]){2, 1}, NULL, 2, err);
    if (!it)
        fail_msg("%s", err);
    check_list(it, (const uint32_t[]){2}, 1, t);
    assert_int_equal(t->b[2].act_i[0], 2);
    assert_int_equal(t->b[2].act_i[1], 1);
    assert_int_equal(t->flow.inflight_rows, 4);
    assert_int_equal(pool_size(t->pool), 2); /* its sent batch is back */
    /* A seq answers once. */
    expect_refused(t, 2, (const int32_t[]){2, 1}, NULL, 2, "which is not awaiting actions");
    /* A frame sent after the last in flight was answered goes behind the
     * oldest, not into the answered one's place. */
    push(t, 2);
    assert_int_equal(send_frame(t), 2); /* seq 3 */
    assert_int_equal(t->flow.inflight_head->seq, 1);
    assert_int_equal(t->flow.inflight_head->next->seq, 3);
    assert_null(t->flow.inflight_head->next->next);
    it = answer(t, 1, (const int32_t[]){0, 1, 2, 0}, NULL, 4, err);
    if (!it)
        fail_msg("%s", err);
    check_list(it, (const uint32_t[]){0, 1}, 2, t);
    assert_int_equal(t->b[0].act_i[0], 0);
    assert_int_equal(t->b[0].act_i[1], 1);
    assert_int_equal(t->b[1].act_i[0], 2);
    assert_int_equal(t->b[1].act_i[1], 0);
    it = answer(t, 3, (const int32_t[]){1, 1}, NULL, 2, err);
    check_list(it, (const uint32_t[]){2}, 1, t);
    assert_int_equal(t->flow.inflight_rows, 0);
    assert_null(t->flow.inflight_head);
    assert_int_equal(ro__flow_oldest_sent_ns(&t->flow), 0);
    assert_int_equal(pool_size(t->pool), SHARDS);
    /* The tail was kept right: the next frame is the only one in flight. */
    push(t, 0);
    assert_int_equal(send_frame(t), 2);
    assert_int_equal(t->flow.inflight_head->seq, 4);
    assert_null(t->flow.inflight_head->next);
    fixture_free(t);
}

/* Actions.hold (NEXT_STEP): the named envs are marked in their shards'
 * batches and counted, every other mark of the frame cleared; an env not
 * in the frame is refused by name. */
static void test_answer_holds_envs(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 4);
    uint8_t hold[SHARDS][PER_SHARD] = {{0}};
    for (uint32_t i = 0; i < SHARDS; i++)
        t->b[i].hold = hold[i];
    push(t, 0);
    push(t, 1);
    assert_int_equal(send_frame(t), 4); /* seq 1: envs 0-3 */
    push(t, 2);
    assert_int_equal(send_frame(t), 2); /* seq 2: envs 4, 5 */
    char err[ERRLEN];
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 2;
    a.n_discrete = 2;
    a.discrete = (int32_t[]){0, 0};
    a.n_hold = 1;
    a.hold = (uint32_t[]){1}; /* env 1 is in seq 1, not 2 */
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN));
    assert_non_null(strstr(err, "actions for seq 2 hold env 1, which is not in that frame"));
    assert_int_equal(t->flow.inflight_rows, 6); /* still in flight */
    hold[0][0] = 1; /* a mark of an earlier answer (counted): cleared by this one */
    t->b[0].nheld = 1;
    a.seq = 1;
    a.n_discrete = 4;
    a.discrete = (int32_t[]){0, 1, 2, 0};
    a.n_hold = 2;
    a.hold = (uint32_t[]){3, 1};
    ro_batch_item_t *it = ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN);
    if (!it)
        fail_msg("%s", err);
    check_list(it, (const uint32_t[]){0, 1}, 2, t);
    assert_int_equal(hold[0][0], 0);
    assert_int_equal(hold[0][1], 1);
    assert_int_equal(hold[1][0], 0);
    assert_int_equal(hold[1][1], 1);
    assert_int_equal(t->b[0].nheld, 1);
    assert_int_equal(t->b[1].nheld, 1);
    /* A Reseed takes the frames still awaiting an answer: seq 2. */
    uint64_t frames;
    it = ro__flow_take_awaiting(&t->flow, &t->pool, &frames);
    assert_int_equal(frames, 1);
    check_list(it, (const uint32_t[]){2}, 1, t);
    assert_int_equal(t->flow.inflight_rows, 0);
    assert_int_equal(pool_size(t->pool), SHARDS);
    fixture_free(t);
}

static void test_good_answer_box(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(false, 6);
    for (uint32_t i = 0; i < SHARDS; i++)
        push(t, i);
    assert_int_equal(send_frame(t), 6);
    char err[ERRLEN];
    /* A value outside [-1, 1], or not finite: refused. */
    float box[12];
    for (int i = 0; i < 12; i++)
        box[i] = (float)i / 12.0f - 0.5f;
    box[7] = 1.5f;
    assert_null(answer(t, 1, NULL, box, 12, err));
    assert_non_null(strstr(err, "actions for seq 1: value 1.5 at 7 is outside [-1, 1]"));
    box[7] = NAN;
    assert_null(answer(t, 1, NULL, box, 12, err));
    assert_non_null(strstr(err, "at 7 is outside [-1, 1]"));
    assert_null(answer(t, 1, NULL, box, 11, err));
    assert_non_null(strstr(err, "11 box values, expected 12"));
    box[7] = 1.0f; /* the bound itself is inside */
    ro_batch_item_t *it = answer(t, 1, NULL, box, 12, err);
    if (!it)
        fail_msg("%s", err);
    check_list(it, (const uint32_t[]){0, 1, 2}, 3, t);
    for (uint32_t i = 0; i < SHARDS; i++)
        assert_memory_equal(t->b[i].act_f, box + i * PER_SHARD * 2, PER_SHARD * 2 * sizeof(float));
    fixture_free(t);
}

static void test_reclaim_order(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 2);
    push(t, 1);
    assert_int_equal(send_frame(t), 2); /* seq 1: shard 1 */
    push(t, 2);
    assert_int_equal(send_frame(t), 2); /* seq 2: shard 2 */
    push(t, 0);                         /* pending */
    uint64_t resent = 99;
    ro_batch_item_t *it = ro__flow_reclaim(&t->flow, &t->pool, &resent);
    check_list(it, (const uint32_t[]){1, 2, 0}, 3, t);
    assert_int_equal(resent, 2);
    assert_int_equal(t->flow.inflight_rows, 0);
    assert_int_equal(t->flow.pending.rows, 0);
    assert_null(t->flow.inflight_head);
    assert_int_equal(pool_size(t->pool), SHARDS);
    /* Empty: nothing, nothing resent; and the flow works on afterwards. */
    assert_null(ro__flow_reclaim(&t->flow, &t->pool, &resent));
    assert_int_equal(resent, 0);
    push(t, 0);
    assert_int_equal(send_frame(t), 2);
    assert_int_equal(t->flow.inflight_head->seq, 3); /* numbers go on: a new frame */
    it = ro__flow_reclaim(&t->flow, &t->pool, &resent);
    check_list(it, (const uint32_t[]){0}, 1, t);
    assert_int_equal(resent, 1);
    fixture_free(t);
}

/* Every field of the frame, from two shards of different sizes, with
 * final observations where episodes ended. */
static void test_obs_encode(void **state)
{
    (void)state;
    ro_step_batch_t a, b;
    fake_batch_init(&a, 0, 10, 2, OBS_DIM, 1, true);
    fake_batch_init(&b, 1, 20, 3, OBS_DIM, 1, true);
    fake_batch_fill(&a, 5);
    fake_batch_fill(&b, 6);
    a.item.next = &b.item;
    b.item.next = NULL;
    ro_obs_encoder_t e;
    assert_int_equal(ro__obs_encoder_init(&e, 5, OBS_DIM, NULL), 0);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__obs_encode(&e, &a.item, 42, NULL, NULL, &o);

    assert_int_equal(o.seq, 42);
    assert_int_equal(o.n_env, 5);
    assert_int_equal(o.n_step, 5);
    assert_int_equal(o.n_reward, 5);
    assert_int_equal(o.n_terminated, 5);
    assert_int_equal(o.n_truncated, 5);
    assert_int_equal(o.n_episode_start, 5);
    assert_int_equal(o.n_obs, 5 * OBS_DIM);
    const ro_step_batch_t *src[5] = {&a, &a, &b, &b, &b};
    const uint32_t row[5] = {0, 1, 0, 1, 2};
    uint32_t nfinal = 0;
    for (uint32_t r = 0; r < 5; r++) {
        const ro_step_batch_t *s = src[r];
        const uint32_t j = row[r];
        assert_int_equal(o.env[r], s->first + j);
        assert_int_equal(o.step[r], s->steps);
        assert_true(o.reward[r] == s->reward[j]);
        assert_int_equal(o.terminated[r], s->terminated[j]);
        assert_int_equal(o.truncated[r], s->truncated[j]);
        assert_int_equal(o.episode_start[r], s->episode_start[j]);
        assert_memory_equal(o.obs + r * OBS_DIM, s->obs + j * OBS_DIM, OBS_DIM * sizeof(float));
        if (s->has_final[j]) {
            assert_int_equal(o.final_index[nfinal], r);
            assert_memory_equal(o.final_obs + nfinal * OBS_DIM, s->final_obs + j * OBS_DIM,
                                OBS_DIM * sizeof(float));
            nfinal++;
        }
    }
    assert_true(nfinal > 0 && nfinal < 5); /* the fixture ends some episodes, not all */
    assert_int_equal(o.n_final_index, nfinal);
    assert_int_equal(o.n_final_obs, nfinal * OBS_DIM);

    /* The frame it makes is one the learner's checks accept. */
    char err[ERRLEN];
    assert_int_equal(ro__check_observations(&o, OBS_DIM, 23, err, sizeof err), 0);
    ro__obs_encoder_free(&e);
    fake_batch_free(&a);
    fake_batch_free(&b);
}

/* A flow whose learner maps the node's memory: a buffer laid out as the
 * node lays it out (the memfd is runtime/shared_mem's, tested there). */
typedef struct memfix {
    ro_seed_mem_layout_t lay;
    uint8_t *obs_mem, *act_mem;
} memfix_t;

static void mem_attach(fixture_t *t, memfix_t *m, bool discrete)
{
    ro__seed_mem_layout(&m->lay, SHARDS * PER_SHARD, OBS_DIM, discrete ? 1 : 2);
    m->obs_mem = calloc(1, m->lay.obs_bytes);
    m->act_mem = calloc(1, m->lay.act_bytes);
    assert_true(m->obs_mem && m->act_mem);
    t->flow.mem_layout = &m->lay;
    t->flow.obs_mem = m->obs_mem;
    t->flow.act_mem = m->act_mem;
}

static void test_obs_encode_memory(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 100);
    memfix_t m;
    mem_attach(t, &m, true);
    for (uint32_t i = 0; i < SHARDS; i++)
        fake_batch_fill(&t->b[i], 7);
    /* Shards 0, 1 then 2: one range. 2 then 0: two. 2, 0, 1: one. */
    push(t, 0);
    push(t, 1);
    push(t, 2);
    uint32_t rows;
    ro_batch_item_t *items = ro__batcher_take(&t->flow.pending, &rows);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__obs_encode(&t->enc, items, 41, &m.lay, m.obs_mem, &o);
    assert_true(o.in_memory);
    assert_int_equal(o.seq, 41);
    assert_int_equal(o.n_env + o.n_step + o.n_obs + o.n_reward + o.n_final_obs, 0);
    assert_int_equal(o.n_ranges, 2);
    assert_int_equal(o.ranges[0], 0);
    assert_int_equal(o.ranges[1], SHARDS * PER_SHARD);
    char err[ERRLEN];
    assert_int_equal(ro__check_observations(&o, OBS_DIM, SHARDS * PER_SHARD, err, ERRLEN), 0);
    const float *obs = (const float *)(m.obs_mem + m.lay.obs_off);
    const float *fin = (const float *)(m.obs_mem + m.lay.final_off);
    const float *rew = (const float *)(m.obs_mem + m.lay.reward_off);
    const uint64_t *step = (const uint64_t *)(m.obs_mem + m.lay.step_off);
    const uint8_t *flags = m.obs_mem + m.lay.flags_off;
    for (uint32_t i = 0; i < SHARDS; i++)
        for (uint32_t j = 0; j < PER_SHARD; j++) {
            const ro_step_batch_t *b = &t->b[i];
            const uint32_t e = b->first + j;
            assert_memory_equal(obs + e * OBS_DIM, b->obs + j * OBS_DIM, OBS_DIM * sizeof(float));
            if (b->has_final[j])
                assert_memory_equal(fin + e * OBS_DIM, b->final_obs + j * OBS_DIM,
                                    OBS_DIM * sizeof(float));
            assert_true(rew[e] == b->reward[j]);
            assert_int_equal(step[e], 7);
            assert_int_equal(flags[e], ro__seed_mem_flags(b->terminated[j], b->truncated[j],
                                                          b->episode_start[j], b->has_final[j]));
        }
    push(t, 2);
    push(t, 0);
    items = ro__batcher_take(&t->flow.pending, &rows);
    ro__obs_encode(&t->enc, items, 42, &m.lay, m.obs_mem, &o);
    assert_int_equal(o.n_ranges, 4); /* in order; apart */
    assert_int_equal(o.ranges[0], 0);
    assert_int_equal(o.ranges[1], PER_SHARD);
    assert_int_equal(o.ranges[2], 2 * PER_SHARD);
    assert_int_equal(o.ranges[3], PER_SHARD);
    push(t, 2); /* ready in any order, one range */
    push(t, 0);
    push(t, 1);
    items = ro__batcher_take(&t->flow.pending, &rows);
    ro__obs_encode(&t->enc, items, 43, &m.lay, m.obs_mem, &o);
    assert_int_equal(o.n_ranges, 2);
    assert_int_equal(o.ranges[0], 0);
    assert_int_equal(o.ranges[1], SHARDS * PER_SHARD);
    free(m.obs_mem);
    free(m.act_mem);
    fixture_free(t);
}

static void test_answer_in_memory(void **state)
{
    (void)state;
    fixture_t *t = fixture_new(true, 100);
    memfix_t m;
    mem_attach(t, &m, true);
    push(t, 0);
    push(t, 1);
    push(t, 2);
    assert_int_equal(send_frame(t), 6);
    int32_t *act = (int32_t *)(m.act_mem + m.lay.act_off);
    for (uint32_t e = 0; e < 6; e++)
        act[e] = (int32_t)(e % 3);
    act[4] = 3; /* outside Discrete(3) */
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 1;
    a.in_memory = true;
    char err[ERRLEN] = "";
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN));
    assert_non_null(strstr(err, "action 3 at 0 is outside [0, 3)"));
    assert_int_equal(t->flow.inflight_rows, 6); /* still in flight */
    int32_t one = 1;                            /* values in the frame too: refused */
    a.n_discrete = 1;
    a.discrete = &one;
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN));
    assert_non_null(strstr(err, "in memory, yet 1 values in the frame"));
    a.n_discrete = 0;
    act[4] = 1;
    ro_batch_item_t *it = ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN);
    assert_non_null(it);
    for (uint32_t i = 0; i < SHARDS; i++)
        for (uint32_t j = 0; j < PER_SHARD; j++)
            assert_int_equal(t->b[i].act_i[j], act[i * PER_SHARD + j]);
    assert_int_equal(t->flow.inflight_rows, 0);
    /* A flow without memory refuses actions said to be in memory. */
    t->flow.act_mem = NULL;
    t->flow.obs_mem = NULL;
    push(t, 0);
    push(t, 1);
    push(t, 2);
    assert_int_equal(send_frame(t), 6);
    a.seq = 2;
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, &t->act, err, ERRLEN));
    assert_non_null(strstr(err, "this connection has no shared memory"));
    free(m.obs_mem);
    free(m.act_mem);
    fixture_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_when_every_owned_env_waits),
        cmocka_unit_test(test_send_numbers_frames),
        cmocka_unit_test(test_bad_answers_change_nothing),
        cmocka_unit_test(test_good_answer_discrete),
        cmocka_unit_test(test_good_answer_box),
        cmocka_unit_test(test_answer_holds_envs),
        cmocka_unit_test(test_reclaim_order),
        cmocka_unit_test(test_obs_encode),
        cmocka_unit_test(test_obs_encode_memory),
        cmocka_unit_test(test_answer_in_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
