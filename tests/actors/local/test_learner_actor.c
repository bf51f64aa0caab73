/*
 * The local learner lane (actors/local/learner_actor.c), driven message by
 * message on the test's thread: its actor and the actors it answers (the
 * shards' env actor, the node's control actor) are made runnable into flags
 * the test reads, and the test runs them (ro__actor_run), so every step is
 * deterministic. Its timer is armed on a run queue no worker serves; the
 * test reads and fires it.
 *
 * Checked: a forward pass waits until `batch` envs are ready, or every
 * running shard is waiting; then one pass answers every shard, each env's
 * action drawn from its own stream exactly as a direct ro__policy_act over
 * the same rows draws it, with the policy's version; a lone shard arms the
 * max-wait timer for its arrival + max_wait, and its TICK does not flush
 * early; the last shard done sends LANE_DONE; a policy swap answers
 * POLICY_DONE and the next pass uses the new policy; stream mode hands the
 * log-probabilities (and a box policy's means and log_std) with the
 * actions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "actors/exchange/messages.h"
#include "actors/local/learner_actor.h"
#include "policy/policy.h"
#include "runtime/clock.h"
#include "runtime/scheduler.h"
#include "step_batch_fixture.h"

#define OBS_DIM 4
#define SHARDS 2
#define PER_SHARD 3
#define ERRLEN 256
#define HOUR_US (3600ull * 1000 * 1000)

/* An actor the test runs by hand: its schedule function raises a flag. */
typedef struct manual {
    ro_actor_t actor;
    bool runnable;
} manual_t;

typedef struct fixture {
    ro_sched_t *sched; /* never started: its queue keeps the lane's timer */
    ro_learner_t lane;
    manual_t *lane_home; /* the lane's actor, scheduled by hand */
    manual_t env, control;
    ro_step_batch_t b[SHARDS];
    ro_rng_t rng[SHARDS][PER_SHARD];
    ro_policy_t *policy, *policy2;
    ro_space_t obs, act;
    float low[2], high[2];
    /* What the env actor and the control actor received, in order. */
    uint32_t actions[SHARDS], stops, lane_done, policy_done;
    uint32_t order[8], norder;
} fixture_t;

static manual_t lane_manual;

/* schedule_manual marks the actor's manual record runnable. */
static void schedule_manual(ro_actor_t *a)
{
    ((manual_t *)a->home)->runnable = true;
}

static void env_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fixture_t *f = (fixture_t *)((char *)self - offsetof(fixture_t, env));
    ro_step_batch_t *b = ro__container_of(msg, ro_step_batch_t, to_env);
    if (msg->type == RO_MSG_ACTIONS) {
        f->actions[b->index]++;
        if (f->norder < 8)
            f->order[f->norder++] = b->index;
    } else if (msg->type == RO_MSG_STOP) {
        f->stops++;
    }
}

static void control_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fixture_t *f = (fixture_t *)((char *)self - offsetof(fixture_t, control));
    if (msg->type == RO_MSG_LANE_DONE)
        f->lane_done++;
    else if (msg->type == RO_MSG_POLICY_DONE)
        f->policy_done++;
}

/* run_all runs every runnable actor until none is. */
static void run_all(fixture_t *f)
{
    manual_t *all[3] = {&lane_manual, &f->env, &f->control};
    for (bool any = true; any;) {
        any = false;
        for (int i = 0; i < 3; i++) {
            if (!all[i]->runnable)
                continue;
            any = true;
            all[i]->runnable = false;
            while (ro__actor_run(all[i] == &lane_manual ? &f->lane.actor : &all[i]->actor))
                ;
        }
    }
}

/* policy_for builds an MLP(8) for the fixture's spaces from seed. */
static ro_policy_t *policy_for(fixture_t *f, uint64_t seed)
{
    ro_policy_spec_t spec = {
        .kind = RO_POLICY_MLP, .nhidden = 1, .activation = RO_ACT_TANH, .seed = seed};
    spec.hidden[0] = 8;
    ro_policy_t *p = NULL;
    char err[ERRLEN];
    assert_int_equal(ro__policy_new(&p, &spec, &f->obs, &f->act, err, sizeof err), 0);
    return p;
}

/* fx_new: SHARDS shards of PER_SHARD envs (discrete, 3 actions, or a box
 * of 2 in [-1, 1]) served by one lane of batch `batch`. */
static fixture_t *fx_new(bool discrete, uint32_t batch, uint64_t max_wait_us)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->obs = (ro_space_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {OBS_DIM}};
    f->low[0] = f->low[1] = -1.0f;
    f->high[0] = f->high[1] = 1.0f;
    f->act =
        discrete
            ? (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = 3}
            : (ro_space_t){
                  .kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = f->low, .high = f->high};
    f->policy = policy_for(f, 11);
    const int node = 0;
    const ro_worker_plan_t plan = {.cpu = -1, .group = 0};
    assert_int_equal(ro__sched_new(&f->sched, 1, &node, &plan, 1), 0);
    ro__actor_init(&f->env.actor, "env", env_behaviour, 8, schedule_manual, &f->env);
    ro__actor_init(&f->control.actor, "control", control_behaviour, 8, schedule_manual,
                   &f->control);
    assert_int_equal(ro__learner_init(&f->lane, f->policy, ro__sched_queue(f->sched, 0),
                                      &f->control.actor, batch, max_wait_us, SHARDS,
                                      SHARDS * PER_SHARD, PER_SHARD, discrete),
                     0);
    /* The lane's own behaviour, on the test's schedule. */
    lane_manual.runnable = false;
    ro__actor_init(&f->lane.actor, "learner", f->lane.actor.behaviour, 64, schedule_manual,
                   &lane_manual);
    for (uint32_t s = 0; s < SHARDS; s++) {
        fake_batch_init(&f->b[s], s, s * PER_SHARD, PER_SHARD, OBS_DIM, 2, discrete);
        f->b[s].env = &f->env.actor;
        f->b[s].learner = &f->lane.actor;
        f->b[s].act_rng = f->rng[s];
        for (uint32_t j = 0; j < PER_SHARD; j++)
            ro__rng_init(&f->rng[s][j], 1000 + s * PER_SHARD + j);
        fake_batch_fill(&f->b[s], 5);
    }
    return f;
}

static void fx_free(fixture_t *f)
{
    ro__learner_destroy(&f->lane);
    ro__sched_free(f->sched);
    for (uint32_t s = 0; s < SHARDS; s++) {
        free(f->b[s].logp);
        free(f->b[s].mean);
        free(f->b[s].log_std);
        fake_batch_free(&f->b[s]);
    }
    ro__policy_free(f->policy);
    ro__policy_free(f->policy2);
    free(f);
}

/* offer hands shard s's batch to the lane, as its env actor does. */
static void offer(fixture_t *f, uint32_t s, uint32_t type)
{
    ro__step_batch_offer(&f->b[s], type);
}

/* The reference: what p draws in one pass over the shards in order[0 ..
 * n-1] (their rows in that order), from copies of the streams as they are
 * now; after: the copies once drawn from. */
typedef struct expect {
    uint32_t rows;
    int32_t act_i[SHARDS * PER_SHARD];
    float act_f[SHARDS * PER_SHARD * 2];
    float logp[SHARDS * PER_SHARD];
    float mean[SHARDS * PER_SHARD * 2];
    ro_rng_t after[SHARDS * PER_SHARD];
} expect_t;

static void reference(fixture_t *f, const ro_policy_t *p, const uint32_t *order, uint32_t n,
                      expect_t *e)
{
    ro_policy_ws_t *ws = NULL;
    assert_int_equal(ro__policy_ws_new(&ws, p, SHARDS * PER_SHARD), 0);
    float *in = ro__policy_ws_input(ws);
    ro_rng_t *rngs[SHARDS * PER_SHARD];
    e->rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t s = order[i];
        memcpy(in + (size_t)e->rows * OBS_DIM, f->b[s].obs, PER_SHARD * OBS_DIM * sizeof(float));
        for (uint32_t j = 0; j < PER_SHARD; j++) {
            e->after[e->rows + j] = f->rng[s][j];
            rngs[e->rows + j] = &e->after[e->rows + j];
        }
        e->rows += PER_SHARD;
    }
    const ro_act_stats_t stats = {.logp = e->logp, .mean = e->mean};
    ro__policy_act(p, ws, e->rows, rngs, e->act_i, e->act_f, &stats, NULL);
    ro__policy_ws_free(ws);
}

static const uint32_t IN_ORDER[SHARDS] = {0, 1};

/* check_answer: shard s got rows r0.. of e as its actions (and their
 * statistics), and its streams were drawn from as the reference's. */
static void check_answer(const fixture_t *f, uint32_t s, const expect_t *e, uint32_t r0, bool stats)
{
    const ro_step_batch_t *b = &f->b[s];
    for (uint32_t j = 0; j < PER_SHARD; j++) {
        if (b->discrete) {
            assert_int_equal(b->act_i[j], e->act_i[r0 + j]);
        } else {
            assert_memory_equal(&b->act_f[j * 2], &e->act_f[(r0 + j) * 2], 2 * sizeof(float));
        }
        if (stats)
            assert_memory_equal(&b->logp[j], &e->logp[r0 + j], sizeof(float));
        if (stats && !b->discrete)
            assert_memory_equal(&b->mean[j * 2], &e->mean[(r0 + j) * 2], 2 * sizeof(float));
        assert_memory_equal(&f->rng[s][j], &e->after[r0 + j], sizeof(ro_rng_t));
    }
}

/* One shard of a batch of 6 waits (timer armed for its arrival +
 * max_wait); the second completes the batch: one pass, both answered, each
 * env's action its own stream's draw. */
static void test_full_batch_one_pass(void **state)
{
    (void)state;
    fixture_t *f = fx_new(true, SHARDS * PER_SHARD, HOUR_US);
    expect_t e;
    reference(f, f->policy, IN_ORDER, SHARDS, &e);
    const uint64_t before = ro__now_ns();
    offer(f, 0, RO_MSG_OBS_READY);
    run_all(f);
    const uint64_t after = ro__now_ns();
    assert_int_equal(f->actions[0], 0); /* waits for the rest of its batch */
    ro_runq_t *q = ro__sched_queue(f->sched, 0);
    assert_ptr_equal(q->timers, &f->lane.timer);
    assert_true(f->lane.timer.deadline_ns >= before + HOUR_US * 1000);
    assert_true(f->lane.timer.deadline_ns <= after + HOUR_US * 1000);
    offer(f, 1, RO_MSG_OBS_READY);
    run_all(f);
    assert_int_equal(f->actions[0], 1);
    assert_int_equal(f->actions[1], 1);
    assert_int_equal(f->norder, 2);
    assert_int_equal(f->order[0], 0); /* in arrival order */
    assert_int_equal(atomic_load(&f->lane.batches), 1);
    assert_int_equal(atomic_load(&f->lane.rows), SHARDS * PER_SHARD);
    check_answer(f, 0, &e, 0, false);
    check_answer(f, 1, &e, PER_SHARD, false);
    assert_int_equal(f->b[0].policy_version, ro__policy_version(f->policy));
    assert_int_equal(f->b[1].policy_version, ro__policy_version(f->policy));
    q->timers = NULL; /* the queue is the test's to clear: no worker runs it */
    fx_free(f);
}

/* A lone shard's TICK before its deadline flushes nothing; its
 * neighbour's SHARD_DONE leaves it the only rows that can come: it goes
 * alone. The last shard done sends LANE_DONE. */
static void test_shard_done_flushes_the_rest(void **state)
{
    (void)state;
    fixture_t *f = fx_new(false, SHARDS * PER_SHARD, HOUR_US);
    expect_t e;
    reference(f, f->policy, IN_ORDER, 1, &e);
    offer(f, 0, RO_MSG_OBS_READY);
    run_all(f);
    ro_runq_t *q = ro__sched_queue(f->sched, 0);
    assert_ptr_equal(q->timers, &f->lane.timer);
    q->timers = NULL; /* fire it by hand, long before its deadline */
    ro__actor_send(&f->lane.actor, &f->lane.timer.msg);
    run_all(f);
    assert_int_equal(f->actions[0], 0);          /* not due: nothing ran */
    assert_ptr_equal(q->timers, &f->lane.timer); /* armed again for the rest */
    q->timers = NULL;
    offer(f, 1, RO_MSG_SHARD_DONE);
    run_all(f);
    assert_int_equal(f->actions[0], 1);
    assert_int_equal(f->lane_done, 0);
    assert_int_equal(atomic_load(&f->lane.rows), PER_SHARD);
    check_answer(f, 0, &e, 0, false);
    offer(f, 0, RO_MSG_SHARD_DONE);
    run_all(f);
    assert_int_equal(f->lane_done, 1);
    q->timers = NULL;
    fx_free(f);
}

/* A swapped policy answers POLICY_DONE, and the next pass draws from it. */
static void test_policy_swap(void **state)
{
    (void)state;
    fixture_t *f = fx_new(false, SHARDS * PER_SHARD, HOUR_US); /* box: every bit tells */
    f->policy2 = policy_for(f, 12);
    f->lane.swap_to = f->policy2;
    ro__actor_send(&f->lane.actor, &f->lane.swap_msg);
    run_all(f);
    assert_int_equal(f->policy_done, 1);
    assert_true(f->lane.swap_ok);
    assert_ptr_equal(f->lane.policy, f->policy2);
    expect_t e, old;
    reference(f, f->policy2, IN_ORDER, SHARDS, &e);
    reference(f, f->policy, IN_ORDER, SHARDS, &old);
    assert_memory_not_equal(e.act_f, old.act_f, sizeof e.act_f); /* the test can tell them apart */
    offer(f, 0, RO_MSG_OBS_READY);
    offer(f, 1, RO_MSG_OBS_READY);
    run_all(f);
    check_answer(f, 0, &e, 0, false);
    check_answer(f, 1, &e, PER_SHARD, false);
    ro__sched_queue(f->sched, 0)->timers = NULL;
    fx_free(f);
}

/* Stream mode: each batch gets its actions' log-probabilities, and a box
 * policy's means and log_std, as the policy computed them. */
static void test_stream_stats(void **state)
{
    (void)state;
    fixture_t *f = fx_new(false, SHARDS * PER_SHARD, HOUR_US);
    assert_int_equal(ro__learner_want_stats(&f->lane), 0);
    for (uint32_t s = 0; s < SHARDS; s++) {
        f->b[s].logp = calloc(PER_SHARD, sizeof(float));
        f->b[s].mean = calloc(PER_SHARD * 2, sizeof(float));
        f->b[s].log_std = calloc(2, sizeof(float));
    }
    const uint32_t arrival[SHARDS] = {1, 0}; /* arrival order decides the rows */
    expect_t e;
    reference(f, f->policy, arrival, SHARDS, &e);
    offer(f, 1, RO_MSG_OBS_READY);
    offer(f, 0, RO_MSG_OBS_READY);
    run_all(f);
    assert_int_equal(f->order[0], 1);
    check_answer(f, 1, &e, 0, true);
    check_answer(f, 0, &e, PER_SHARD, true);
    const float *ls = ro__policy_log_std(f->policy);
    assert_non_null(ls);
    for (uint32_t s = 0; s < SHARDS; s++)
        assert_memory_equal(f->b[s].log_std, ls, 2 * sizeof(float));
    ro__sched_queue(f->sched, 0)->timers = NULL;
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_batch_one_pass),
        cmocka_unit_test(test_shard_done_flushes_the_rest),
        cmocka_unit_test(test_policy_swap),
        cmocka_unit_test(test_stream_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
