/* The env actor's auto-reset semantics, step quota and stop flag, driven
 * through real messages on a real scheduler with a stand-in learner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

#include "actors/local/env_actor.h"
#include "envs/registry.h"
#include "actors/local/learner_actor.h"
#include "actors/exchange/messages.h"
#include "runtime/scheduler.h"

typedef struct fixture {
    ro_sched_t *sched;
    ro_learner_t fake; /* only its actor is used */
    sem_t got;         /* posted on each message to the fake learner */
    uint32_t last_type;
    ro_metrics_ring_t ring;
    atomic_bool stopping;
    ro_env_shard_t shard;
} fixture_t;

static void fake_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    fixture_t *f = ro__container_of(self, fixture_t, fake.actor);
    f->last_type = msg->type;
    sem_post(&f->got);
}

static fixture_t *setup(const ro_env_vtable_t *vt, ro_env_arg_t *args, size_t nargs, uint32_t n,
                        uint64_t quota)
{
    static fixture_t f;
    memset(&f, 0, sizeof f);
    ro_worker_plan_t plan = {.cpu = -1, .group = 0};
    int node = 0;
    assert_int_equal(ro__sched_new(&f.sched, 1, &node, &plan, 1), 0);
    sem_init(&f.got, 0, 0);
    assert_int_equal(ro__metrics_ring_init(&f.ring, 1024), 0);
    atomic_init(&f.stopping, false);
    ro__actor_init_worker(&f.fake.actor, "fake", fake_behaviour, ro__sched_queue(f.sched, 0), 8);

    ro_env_arg_t rest[4];
    size_t nrest = 0;
    uint32_t max_steps = 0;
    char err[256];
    assert_int_equal(ro__env_check_args(vt, args, nargs, rest, &nrest, &max_steps, err, sizeof err),
                     0);
    assert_int_equal(ro__env_shard_init(&f.shard, vt, rest, nrest, 10, n, 7, err, sizeof err), 0);
    ro_env_shard_wiring_t w = {
        .runq = ro__sched_queue(f.sched, 0),
        .learner = &f.fake.actor,
        .rules =
            {
                .ring = &f.ring,
                .stopping = &f.stopping,
                .max_steps = max_steps,
                .quota = quota,
                .record_episodes = true,
            },
    };
    assert_int_equal(ro__env_shard_wire(&f.shard, &w), 0);
    assert_int_equal(ro__sched_start(f.sched), 0);
    return &f;
}

static void teardown(fixture_t *f)
{
    ro__sched_stop(f->sched);
    ro__sched_free(f->sched);
    ro__env_shard_destroy(&f->shard);
    ro__metrics_ring_free(&f->ring);
    sem_destroy(&f->got);
}

/* Send ACTIONS and wait for the reply; returns its type. The semaphore
 * orders the shard's writes before our reads. */
static uint32_t step(fixture_t *f)
{
    f->shard.xchg.to_env.type = RO_MSG_ACTIONS;
    ro__actor_send(&f->shard.actor, &f->shard.xchg.to_env);
    sem_wait(&f->got);
    return f->last_type;
}

static void test_start_flags_first_observation(void **state)
{
    (void)state;
    fixture_t *f = setup(&ro__env_cartpole, NULL, 0, 3, 0);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    assert_int_equal(f->last_type, RO_MSG_OBS_READY);
    for (uint32_t j = 0; j < 3; j++) {
        assert_int_equal(f->shard.xchg.episode_start[j], 1);
        assert_int_equal(f->shard.xchg.terminated[j], 0);
        assert_int_equal(f->shard.xchg.truncated[j], 0);
        for (int k = 0; k < 4; k++)
            assert_true(fabsf(f->shard.xchg.obs[j * 4 + k]) <= 0.05f);
    }
    teardown(f);
}

/* Push right until the pole falls: the ending step reports terminated with
 * reward 1, its true last observation in final_obs (beyond a threshold), and
 * obs already holds the next episode's first observation. */
static void test_termination_autoreset(void **state)
{
    (void)state;
    fixture_t *f = setup(&ro__env_cartpole, NULL, 0, 1, 0);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    int steps = 0;
    for (;;) {
        f->shard.xchg.act_i[0] = 1;
        assert_int_equal(step(f), RO_MSG_OBS_READY);
        steps++;
        assert_true(steps < 500);
        if (f->shard.xchg.terminated[0])
            break;
        assert_int_equal(f->shard.xchg.episode_start[0], 0);
        assert_int_equal(f->shard.xchg.has_final[0], 0);
    }
    assert_true(f->shard.xchg.reward[0] == 1.0f);
    assert_int_equal(f->shard.xchg.truncated[0], 0);
    assert_int_equal(f->shard.xchg.has_final[0], 1);
    assert_int_equal(f->shard.xchg.episode_start[0], 1);
    const float *fin = f->shard.xchg.final_obs;
    assert_true(fabsf(fin[0]) > 2.4f || fabsf(fin[2]) > 0.2094395f);
    for (int k = 0; k < 4; k++)
        assert_true(fabsf(f->shard.xchg.obs[k]) <= 0.05f); /* a fresh reset */
    assert_int_equal(f->shard.episodes, 1);
    assert_true(f->shard.return_sum == (double)steps);

    /* The next step continues the new episode. */
    f->shard.xchg.act_i[0] = 0;
    step(f);
    assert_int_equal(f->shard.xchg.episode_start[0], 0);
    assert_int_equal(f->shard.xchg.has_final[0], 0);

    ro_metric_t m;
    assert_true(ro__metrics_ring_pop(&f->ring, &m));
    assert_int_equal(m.kind, RO_METRIC_EPISODE);
    assert_int_equal(m.env, 10);
    assert_int_equal(m.episode, 0);
    assert_int_equal(m.length, steps);
    assert_true(m.terminated);
    teardown(f);
}

/* max_episode_steps=5: step 5 reports truncated (not terminated), the
 * final observation is the one step 5 produced. */
static void test_truncation_final_obs(void **state)
{
    (void)state;
    ro_env_arg_t args[] = {{"max_episode_steps", "5"}};
    fixture_t *f = setup(&ro__env_cartpole, args, 1, 2, 0);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    for (int t = 1; t <= 5; t++) {
        f->shard.xchg.act_i[0] = t & 1;
        f->shard.xchg.act_i[1] = (t + 1) & 1;
        step(f);
        for (uint32_t j = 0; j < 2; j++) {
            assert_int_equal(f->shard.xchg.terminated[j], 0);
            assert_int_equal(f->shard.xchg.truncated[j], t == 5);
            assert_int_equal(f->shard.xchg.has_final[j], t == 5);
            assert_int_equal(f->shard.xchg.episode_start[j], t == 5);
        }
    }
    /* Cart-pole states after 5 alternating pushes stay small; the final obs
     * differs from the fresh reset held in obs. */
    assert_memory_not_equal(f->shard.xchg.final_obs, f->shard.xchg.obs, 4 * sizeof(float));
    assert_int_equal(f->shard.episodes, 2);
    teardown(f);
}

static void test_quota_and_stop(void **state)
{
    (void)state;
    fixture_t *f = setup(&ro__env_pendulum, NULL, 0, 2, 3);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    f->shard.xchg.act_f[0] = f->shard.xchg.act_f[1] = 0.5f;
    assert_int_equal(step(f), RO_MSG_OBS_READY);
    assert_int_equal(step(f), RO_MSG_OBS_READY);
    assert_int_equal(step(f), RO_MSG_SHARD_DONE); /* quota of 3 steps */
    assert_int_equal(atomic_load(&f->shard.steps), 6);
    teardown(f);

    f = setup(&ro__env_pendulum, NULL, 0, 2, 0);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    assert_int_equal(step(f), RO_MSG_OBS_READY);
    atomic_store(&f->stopping, true);
    /* The step in flight completes, then the shard reports done. */
    assert_int_equal(step(f), RO_MSG_SHARD_DONE);
    assert_int_equal(f->shard.xchg.steps, 2);
    teardown(f);
}

/* A failing step (out-of-range action) is counted, cuts the episode as
 * truncated without a final observation, and the env starts over. */
static void test_env_failure_resets(void **state)
{
    (void)state;
    fixture_t *f = setup(&ro__env_cartpole, NULL, 0, 1, 0);
    ro__env_shard_start(&f->shard);
    sem_wait(&f->got);
    f->shard.xchg.act_i[0] = 1;
    step(f);
    f->shard.xchg.act_i[0] = 7; /* cartpole accepts 0 or 1 */
    step(f);
    assert_int_equal(f->shard.env_failures, 1);
    assert_int_equal(f->shard.xchg.truncated[0], 1);
    assert_int_equal(f->shard.xchg.has_final[0], 0);
    assert_int_equal(f->shard.xchg.episode_start[0], 1);
    assert_int_equal(f->shard.episodes, 0); /* a failed episode is not a finished one */
    ro_metric_t m;
    assert_true(ro__metrics_ring_pop(&f->ring, &m));
    assert_int_equal(m.kind, RO_METRIC_ENV_FAIL);
    teardown(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_flags_first_observation),
        cmocka_unit_test(test_termination_autoreset),
        cmocka_unit_test(test_truncation_final_obs),
        cmocka_unit_test(test_quota_and_stop),
        cmocka_unit_test(test_env_failure_resets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
