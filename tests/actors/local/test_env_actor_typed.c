/* The env actor with env ABI 2 shards (env_shard.c, env_actor.c): typed
 * tensor buffers and agents as rows, per-row sampling streams, masks
 * checked, every agent of an env ending together with its final
 * observation, per-episode metrics counted, a masked action failing the
 * step, an instance with other spaces refused; driven through real
 * messages on a real scheduler with a stand-in learner, with the grid world
 * example (examples/plugin_env/gridworld.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <semaphore.h>
#include <string.h>

#include "actors/local/env_actor.h"
#include "actors/local/learner_actor.h"
#include "actors/exchange/messages.h"
#include "envs/env_kind.h"
#include "envs/registry.h"
#include "runtime/error.h"
#include "runtime/scheduler.h"
#include "spaces/layout.h"

#define ENVS 3
#define FIRST 10
#define SEED 7

typedef struct fixture {
    ro_sched_t *sched;
    ro_learner_t fake; /* only its actor is used */
    sem_t got;
    ro_metrics_ring_t ring;
    atomic_bool stopping;
    ro_env_kind_t kind;
    ro_space_layout_t lay;
    ro_env_shard_t shard;
} fixture_t;

static void fake_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    (void)msg;
    fixture_t *f = ro__container_of(self, fixture_t, fake.actor);
    sem_post(&f->got);
}

static fixture_t *setup(void)
{
    static fixture_t f;
    memset(&f, 0, sizeof f);
    char err[512] = "";
    assert_int_equal(ro__env_open(&f.kind, RO_GRIDWORLD_PATH, err, sizeof err), 0);
    assert_int_equal(ro__env_kind_layout(&f.kind, NULL, 0, 1, &f.lay, err, sizeof err), 0);
    ro_worker_plan_t plan = {.cpu = -1, .group = 0};
    int node = 0;
    assert_int_equal(ro__sched_new(&f.sched, 1, &node, &plan, 1), 0);
    sem_init(&f.got, 0, 0);
    assert_int_equal(ro__metrics_ring_init(&f.ring, 1024), 0);
    atomic_init(&f.stopping, false);
    ro__actor_init_worker(&f.fake.actor, "fake", fake_behaviour, ro__sched_queue(f.sched, 0), 8);
    assert_int_equal(ro__env_shard_init_kind(&f.shard, &f.kind, &f.lay, NULL, 0, FIRST, ENVS, SEED,
                                             -1, err, sizeof err),
                     0);
    ro_env_shard_wiring_t w = {
        .runq = ro__sched_queue(f.sched, 0),
        .learner = &f.fake.actor,
        .rules =
            {
                .ring = &f.ring,
                .stopping = &f.stopping,
                .max_steps = 50,
                .check_finite = true,
            },
    };
    assert_int_equal(ro__env_shard_wire(&f.shard, &w), 0);
    assert_int_equal(ro__sched_start(f.sched), 0);
    ro__env_shard_start(&f.shard);
    sem_wait(&f.got);
    return &f;
}

static void teardown(fixture_t *f)
{
    ro__sched_stop(f->sched);
    ro__sched_free(f->sched);
    ro__env_shard_destroy(&f->shard);
    ro__layout_free(&f->lay);
    ro__env_close(&f->kind);
    ro__metrics_ring_free(&f->ring);
    sem_destroy(&f->got);
}

static void step(fixture_t *f)
{
    f->shard.xchg.to_env.type = RO_MSG_ACTIONS;
    ro__actor_send(&f->shard.actor, &f->shard.xchg.to_env);
    sem_wait(&f->got);
}

/* choose gives each row its lowest allowed move but "stay" (masked: its
 * lowest masked one), or "stay" when there is none. */
static void choose(fixture_t *f, bool masked)
{
    ro_step_batch_t *b = &f->shard.xchg;
    for (uint32_t r = 0; r < b->n; r++) {
        const uint8_t *m = b->mask + r * 5;
        int32_t pick = -1;
        for (int32_t a = 0; a < 4 && pick < 0; a++)
            if ((m[a] != 0) != masked)
                pick = a;
        b->act_i[r] = pick < 0 ? 4 : pick;
    }
}

static void test_rows_buffers_and_streams(void **state)
{
    (void)state;
    fixture_t *f = setup();
    ro_step_batch_t *b = &f->shard.xchg;
    assert_int_equal(b->agents, 2);
    assert_int_equal(b->n, ENVS * 2);
    assert_int_equal(b->item.rows, ENVS * 2);
    assert_null(b->obs); /* three tensors: no single float buffer */
    assert_non_null(b->tensor[0]);
    assert_non_null(b->tensor[2]);
    assert_non_null(b->mask);
    assert_int_equal(b->obs_dim, 53);
    assert_int_equal(b->act_ndisc, 1);
    assert_false(b->discrete); /* masked: not an ABI 1 action */
    assert_ptr_equal(b->layout, &f->lay);
    /* Row r of env i samples from (seed, i x agents + r). */
    for (uint32_t j = 0; j < ENVS; j++)
        for (uint32_t a = 0; a < 2; a++) {
            ro_rng_t want;
            ro__rng_init(&want, ro__seed_mix(SEED, (FIRST + j) * 2ull + a, RO_STREAM_ACTION));
            assert_true(ro__rng_double(&b->act_rng[j * 2 + a]) == ro__rng_double(&want));
        }
    /* The reset: every row starts, views hold each agent as 192. */
    for (uint32_t r = 0; r < b->n; r++) {
        assert_int_equal(b->episode_start[r], 1);
        const int32_t *pos = (const int32_t *)(const void *)b->tensor[1] + r * 2;
        assert_int_equal(b->tensor[0][r * 49 + pos[0] * 7 + pos[1]], 192);
        assert_true(ro__layout_mask_ok(&f->lay, b->mask + r * 5, NULL));
    }
    teardown(f);
}

/* Allowed moves until every env has ended an episode: the rows of an env
 * end together with their final observations, metrics are counted once per
 * episode, and nothing failed. */
static void test_episodes_end_together(void **state)
{
    (void)state;
    fixture_t *f = setup();
    ro_step_batch_t *b = &f->shard.xchg;
    uint64_t ended[ENVS] = {0};
    for (int s = 0; s < 400; s++) {
        choose(f, false);
        step(f);
        for (uint32_t j = 0; j < ENVS; j++) {
            const uint8_t e0 = b->has_final[j * 2], e1 = b->has_final[j * 2 + 1];
            assert_int_equal(e0, e1);
            if (!e0)
                continue;
            ended[j]++;
            for (uint32_t a = 0; a < 2; a++) {
                const uint32_t r = j * 2 + a;
                assert_int_equal(b->episode_start[r], 1);
                assert_true(b->terminated[r] || b->truncated[r]);
                /* The final view still shows this agent where pos says. */
                const int32_t *pos = (const int32_t *)(const void *)b->final_tensor[1] + r * 2;
                assert_int_equal(b->final_tensor[0][r * 49 + pos[0] * 7 + pos[1]], 192);
            }
            assert_int_equal(b->terminated[j * 2], b->terminated[j * 2 + 1]); /* shared goal */
        }
    }
    for (uint32_t j = 0; j < ENVS; j++)
        assert_true(ended[j] > 0);
    assert_int_equal(f->shard.env_failures, 0);
    assert_int_equal(f->shard.metric_count[0], f->shard.episodes);
    assert_int_equal(f->shard.metric_count[1], f->shard.episodes);
    assert_true(f->shard.metric_sum[1] >= (double)f->shard.episodes); /* lengths >= 1 */
    teardown(f);
}

/* A masked move (into a wall) fails the step: counted, every row of the env
 * cut without a final observation, a new episode started. */
static void test_masked_action_fails_the_step(void **state)
{
    (void)state;
    fixture_t *f = setup();
    ro_step_batch_t *b = &f->shard.xchg;
    choose(f, false);
    /* Env 1's first agent walks into a wall, if one is next to it. */
    const uint8_t *m = b->mask + 2 * 5;
    int32_t wall = -1;
    for (int32_t a = 0; a < 4; a++)
        if (!m[a])
            wall = a;
    if (wall < 0) { /* no wall beside it: nothing to show with this start */
        teardown(f);
        skip();
    }
    b->act_i[2] = wall;
    step(f);
    assert_int_equal(f->shard.env_failures, 1);
    for (uint32_t a = 0; a < 2; a++) {
        assert_int_equal(b->truncated[2 + a], 1);
        assert_int_equal(b->has_final[2 + a], 0);
        assert_int_equal(b->episode_start[2 + a], 1);
    }
    assert_int_equal(b->has_final[0], 0); /* env 0 went on */
    teardown(f);
}

/* Shards are sized from the kind's layout: an instance whose spaces differ
 * is refused with a message. */
static void test_other_spaces_refused(void **state)
{
    (void)state;
    ro_env_kind_t grid, ctch;
    ro_space_layout_t lay;
    char err[512] = "";
    assert_int_equal(ro__env_open(&grid, RO_GRIDWORLD_PATH, err, sizeof err), 0);
    assert_int_equal(ro__env_open(&ctch, RO_CATCH_PATH, err, sizeof err), 0);
    assert_int_equal(ro__env_kind_layout(&ctch, NULL, 0, 1, &lay, err, sizeof err), 0);
    ro_env_shard_t s;
    assert_int_equal(
        ro__env_shard_init_kind(&s, &grid, &lay, NULL, 0, 0, 2, 1, -1, err, sizeof err), RO_EINVAL);
    assert_non_null(strstr(err, "env 'gridworld': instance 0 reports other spaces"));
    ro__layout_free(&lay);
    ro__env_close(&grid);
    ro__env_close(&ctch);
}

/* An ABI 1 env through the same constructor is laid out as before: one
 * float tensor that is obs, no mask, no ABI 2 scratch. */
static void test_abi1_shard_unchanged(void **state)
{
    (void)state;
    ro_env_shard_t s;
    char err[256] = "";
    const ro_env_kind_t cartpole = {.vt = &ro__env_cartpole};
    assert_int_equal(
        ro__env_shard_init_kind(&s, &cartpole, NULL, NULL, 0, 0, 4, 1, -1, err, sizeof err), 0);
    assert_int_equal(s.xchg.n, 4);
    assert_int_equal(s.xchg.agents, 1);
    assert_ptr_equal(s.xchg.obs, (float *)(void *)s.xchg.tensor[0]);
    assert_null(s.xchg.mask);
    assert_null(s.agent_steps);
    assert_null(s.metric_sum);
    assert_true(s.xchg.discrete);
    ro__env_shard_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_buffers_and_streams),
        cmocka_unit_test(test_episodes_end_together),
        cmocka_unit_test(test_masked_action_fails_the_step),
        cmocka_unit_test(test_other_spaces_refused),
        cmocka_unit_test(test_abi1_shard_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
