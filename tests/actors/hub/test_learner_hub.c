/*
 * The remote-learner hub (actors/hub/learner_hub.c) serving learners, on a real
 * loop (fixtures/hub_fixture.h): ready shards with no learner wait as
 * orphans; a learner's hello gets a welcome with the spaces and the
 * orphans' observations; its actions send the shards back to stepping; a
 * learner that leaves mid-batch has its batches resent, as they were, to
 * the next one. Faults and stopping: test_learner_hub_faults.c. Nothing
 * depends on time: no max-wait timer fires (1 h), no watchdog runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "hub_fixture.h"

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

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the node does */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orphans_adopted_answered_stepping),
        cmocka_unit_test(test_learner_leaves_mid_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
