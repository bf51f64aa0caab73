/*
 * rollout-replay --serve's rows (programs/replay/serve_rows.c). On an env
 * of 2 agents with a uint8 [2] tensor and a masked Discrete(3)
 * action: reset rows become first observations; a step and the reset
 * after it become one episode start whose final tensors are the step's;
 * answers are checked (range, mask) and compared entry by entry, the
 * first mismatch named by env, agent, episode, step and entry; a record
 * no node would send (a row twice, a mask that allows nothing) and
 * header bounds that are not the env's are refused. And a format version 1
 * recording of an ABI 1 env takes the same path: its flat observations
 * become the obs column a node sends, its answers are checked against its
 * spaces as a node checks them, and compared as any others.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "replay/serve_rows.h"
#include "runtime/error.h"
#include "wire/checks.h"
#include "wire/typed_checks.h"

#define ROWS 4 /* rows of a batch at most */

typedef struct fix {
    ro_space_layout_t lay;
    ro_traj_layout_msg_t lm;
    Rollout__V1__TrajectoryHeader h;
    ro_serve_rows_t v;
} fix_t;

typedef struct batch {
    Rollout__V1__TransitionBatch b;
    uint32_t env[ROWS], agent[ROWS], step[ROWS], flags[ROWS];
    uint64_t episode[ROWS];
    float reward[ROWS];
    int32_t action[ROWS];
    uint8_t view[ROWS * 2], mask[ROWS * 3];
    Rollout__V1__NamedTensor t;
    Rollout__V1__NamedTensor *tp[1];
    uint32_t shape[2];
} batch_t;

static int setup(void **state)
{
    fix_t *f = test_calloc(1, sizeof *f);
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 2;
    sp.num_obs = 1;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 1, .shape = {2}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    sp.action_mask = 1;
    char err[256];
    assert_int_equal(ro__layout_from_spaces(&f->lay, &sp, "t", err, sizeof err), 0);
    assert_int_equal(ro__traj_layout_msg_init(&f->lm, &f->lay), 0);
    rollout__v1__trajectory_header__init(&f->h);
    f->h.num_envs = 2;
    f->h.layout = &f->lm.msg;
    assert_int_equal(ro__serve_rows_init(&f->v, &f->h, &f->lay, NULL, NULL, err, sizeof err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fix_t *f = *state;
    ro__serve_rows_free(&f->v);
    ro__traj_layout_msg_free(&f->lm);
    ro__layout_free(&f->lay);
    test_free(f);
    return 0;
}

/* add: a row of env e, agent a with flags fl, action act, view (x, x+1)
 * and every move allowed. */
static void add(batch_t *t, uint32_t e, uint32_t a, uint32_t fl, uint32_t step, int32_t act,
                uint8_t x)
{
    size_t k = t->b.n_env++;
    t->env[k] = e, t->agent[k] = a, t->flags[k] = fl, t->step[k] = step, t->action[k] = act;
    t->episode[k] = 0;
    t->reward[k] = fl & 8 ? 0 : 1;
    t->view[2 * k] = x, t->view[2 * k + 1] = (uint8_t)(x + 1);
    memset(t->mask + 3 * k, 1, 3);
}

/* done: the columns' lengths and pointers. */
static Rollout__V1__TransitionBatch *done(batch_t *t, uint64_t record)
{
    Rollout__V1__TransitionBatch *b = &t->b;
    size_t n = b->n_env;
    b->record = record;
    b->env = t->env, b->agent = t->agent, b->step = t->step, b->flags = t->flags;
    b->episode = t->episode, b->reward = t->reward, b->action = t->action;
    b->n_agent = b->n_step = b->n_flags = b->n_episode = b->n_reward = b->n_action = n;
    rollout__v1__named_tensor__init(&t->t);
    t->t.name = "view";
    t->t.dtype = ROLLOUT__V1__DTYPE__DTYPE_UINT8;
    t->shape[0] = (uint32_t)n, t->shape[1] = 2;
    t->t.shape = t->shape, t->t.n_shape = 2;
    t->t.data.data = t->view, t->t.data.len = 2 * n;
    t->tp[0] = &t->t;
    b->tensors = t->tp, b->n_tensors = 1;
    b->mask.data = t->mask, b->mask.len = 3 * n;
    return b;
}

static batch_t *new_batch(void)
{
    batch_t *t = test_calloc(1, sizeof *t);
    rollout__v1__transition_batch__init(&t->b);
    return t;
}

static int answer(fix_t *f, uint64_t seq, int32_t *acts, char *err, size_t errlen)
{
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = seq;
    a.discrete = acts;
    a.n_discrete = f->v.n;
    return ro__serve_rows_answer(&f->v, &a, err, errlen);
}

static void test_frames_answers_and_mismatches(void **state)
{
    fix_t *f = *state;
    char err[256];
    /* The start: env 1's agents reset; their first observations. */
    batch_t *t = new_batch();
    add(t, 1, 0, 8, 0, 0, 10);
    add(t, 1, 1, 8, 0, 0, 20);
    t->mask[3 * 1 + 2] = 0; /* agent 1 may not take 2 */
    assert_int_equal(ro__serve_rows_fill(&f->v, done(t, 1), err, sizeof err), 2);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__serve_rows_frame(&f->v, 1, &o);
    assert_int_equal(o.n_env, 2);
    assert_int_equal(o.env[0], 2); /* env 1 x 2 agents + agent 0 */
    assert_int_equal(o.env[1], 3);
    assert_true(o.episode_start[0] && o.episode_start[1]);
    assert_int_equal(o.n_final_index, 0);
    assert_int_equal(o.n_tensors, 1);
    assert_int_equal(o.tensors[0]->shape[0], 2);
    assert_memory_equal(o.tensors[0]->data.data, ((uint8_t[]){10, 11, 20, 21}), 4);
    assert_int_equal(o.mask.len, 6);
    assert_int_equal(ro__check_observations_typed(&o, &f->lay, 4, err, sizeof err), 0);
    /* Answers out of range, or masked, are refused as a node refuses them. */
    assert_int_equal(answer(f, 1, (int32_t[]){3, 0}, err, sizeof err), RO_ERANGE);
    assert_non_null(strstr(err, "row 0 entry 0 is 3, outside [0, 3)"));
    assert_int_equal(answer(f, 1, (int32_t[]){0, 2}, err, sizeof err), RO_ERANGE);
    assert_non_null(strstr(err, "which its mask forbids"));
    Rollout__V1__Actions few = ROLLOUT__V1__ACTIONS__INIT;
    few.n_discrete = 1;
    few.discrete = (int32_t[]){0};
    assert_int_equal(ro__serve_rows_answer(&f->v, &few, err, sizeof err), RO_EPROTO);
    assert_int_equal(answer(f, 1, (int32_t[]){2, 1}, err, sizeof err), 0);
    test_free(t);
    /* Env 1 steps (agent 0 as answered, agent 1 not) and its episode ends:
     * one episode start per row, the step's observation final. */
    t = new_batch();
    add(t, 1, 0, 1, 1, 2, 30);
    add(t, 1, 1, 1, 1, 0, 40);
    add(t, 1, 0, 8, 0, 0, 50);
    add(t, 1, 1, 8, 0, 0, 60);
    assert_int_equal(ro__serve_rows_fill(&f->v, done(t, 2), err, sizeof err), 2);
    ro__serve_rows_frame(&f->v, 2, &o);
    assert_true(o.terminated[0] && o.terminated[1] && o.episode_start[0] && o.episode_start[1]);
    assert_int_equal(o.step[0], 1);
    assert_int_equal(o.n_final_index, 2);
    assert_memory_equal(o.final_tensors[0]->data.data, ((uint8_t[]){30, 31, 40, 41}), 4);
    assert_memory_equal(o.tensors[0]->data.data, ((uint8_t[]){50, 51, 60, 61}), 4);
    assert_int_equal(ro__check_observations_typed(&o, &f->lay, 4, err, sizeof err), 0);
    assert_int_equal(f->v.compared, 2);
    assert_int_equal(f->v.mismatches, 1);
    assert_string_equal(f->v.first_mismatch,
                        "env 1, agent 1, episode 0, step 1, entry 0: recorded 0, learner 1");
    test_free(t);
}

static void test_records_no_node_sends(void **state)
{
    fix_t *f = *state;
    char err[256];
    batch_t *t = new_batch();
    add(t, 0, 0, 0, 1, 0, 1);
    add(t, 0, 1, 0, 1, 0, 1);
    add(t, 0, 0, 0, 2, 0, 1);
    add(t, 0, 1, 0, 2, 0, 1);
    assert_int_equal(ro__serve_rows_fill(&f->v, done(t, 7), err, sizeof err), RO_EBADMSG);
    assert_string_equal(err, "record 7: env 0 agent 0 steps twice in one record");
    test_free(t);
    t = new_batch();
    add(t, 0, 0, 8, 0, 0, 1);
    add(t, 0, 1, 8, 0, 0, 1);
    memset(t->mask + 3, 0, 3);
    assert_int_equal(ro__serve_rows_fill(&f->v, done(t, 8), err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "record 8: env 0 agent 1: its mask allows no value"));
    test_free(t);
}

static void test_header_bounds_must_be_the_envs(void **state)
{
    fix_t *f = *state;
    char err[256];
    ro_serve_rows_t v;
    f->lm.p[0].low = (float[]){0.0f};
    f->lm.p[0].n_low = 1;
    assert_int_equal(ro__serve_rows_init(&v, &f->h, &f->lay, NULL, NULL, err, sizeof err),
                     RO_EINVAL);
    assert_non_null(strstr(err, "parts[0] carries 1 low and 0 high bounds that are not the env's"));
    ro__serve_rows_free(&v);
    f->lm.p[0].n_low = 0;
}

/* A format version 1 recording of an ABI 1 env (3 floats, Discrete(2)):
 * rows from its flat obs, an ABI 1 frame, ABI 1 action checks. */
static void test_abi1_recording(void **state)
{
    (void)state;
    const ro_space_t os = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = 2};
    ro_space_layout_t lay;
    char err[256];
    assert_int_equal(ro__layout_from_abi1(&lay, &os, &as, "t", err, sizeof err), 0);
    Rollout__V1__TrajectoryHeader h = ROLLOUT__V1__TRAJECTORY_HEADER__INIT;
    h.num_envs = 2; /* no layout: format version 1 */
    ro_serve_rows_t v;
    assert_int_equal(ro__serve_rows_init(&v, &h, &lay, &os, &as, err, sizeof err), 0);
    assert_true(v.flat_records && v.abi1_frames);
    /* Both envs' first observations, then env 0 steps (action 1) and ends
     * its episode, and env 1 steps (action 0). */
    uint32_t env[4] = {0, 1, 0, 0}, flags[4] = {8, 8, 0, 0}, step[4] = {0};
    uint64_t episode[4] = {0};
    float reward[4] = {0}, obs[4 * 3];
    int32_t action[4] = {0};
    for (uint32_t i = 0; i < 4 * 3; i++)
        obs[i] = (float)i;
    Rollout__V1__TransitionBatch b = ROLLOUT__V1__TRANSITION_BATCH__INIT;
    b.record = 1;
    b.n_env = b.n_flags = b.n_step = b.n_episode = b.n_reward = b.n_action = 2;
    b.env = env, b.flags = flags, b.step = step, b.episode = episode, b.reward = reward;
    b.action = action, b.obs = obs, b.n_obs = 2 * 3;
    assert_int_equal(ro__serve_rows_fill(&v, &b, err, sizeof err), 2);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__serve_rows_frame(&v, 1, &o);
    assert_int_equal(o.n_env, 2);
    assert_int_equal(o.n_tensors, 0);
    assert_int_equal(o.n_obs, 6);
    assert_memory_equal(o.obs, obs, 6 * sizeof(float));
    assert_int_equal(ro__check_observations(&o, 3, 2, err, sizeof err), 0);
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 1;
    a.n_discrete = 2;
    a.discrete = (int32_t[]){2, 0}; /* outside Discrete(2): refused as a node refuses it */
    assert_int_not_equal(ro__serve_rows_answer(&v, &a, err, sizeof err), 0);
    a.discrete = (int32_t[]){1, 1};
    assert_int_equal(ro__serve_rows_answer(&v, &a, err, sizeof err), 0);
    /* env 0 steps with 1 (as answered) and resets; env 1 steps with 0. */
    env[0] = 0, env[1] = 0, env[2] = 1;
    flags[0] = 1, flags[1] = 8, flags[2] = 0;
    action[0] = 1, action[1] = 0, action[2] = 0;
    reward[0] = 1.0f, reward[2] = 1.0f;
    b.record = 2;
    b.n_env = b.n_flags = b.n_step = b.n_episode = b.n_reward = b.n_action = 3;
    b.n_obs = 3 * 3;
    assert_int_equal(ro__serve_rows_fill(&v, &b, err, sizeof err), 2);
    ro__serve_rows_frame(&v, 2, &o);
    assert_int_equal(o.env[0], 0);
    assert_true(o.terminated[0] && o.episode_start[0]);
    assert_int_equal(o.n_final_index, 1);
    assert_int_equal(o.n_final_obs, 3);
    assert_memory_equal(o.final_obs, obs, 3 * sizeof(float)); /* the step's obs */
    assert_memory_equal(o.obs, obs + 3, 3 * sizeof(float));   /* the reset's */
    assert_int_equal(ro__check_observations(&o, 3, 2, err, sizeof err), 0);
    assert_int_equal(v.compared, 2);
    assert_int_equal(v.mismatches, 1);
    assert_string_equal(v.first_mismatch,
                        "env 1, agent 0, episode 0, step 0, entry 0: recorded 0, learner 1");
    ro__serve_rows_free(&v);
    ro__layout_free(&lay);
}

/* A format version 2 recording of an env shaped as ABI 1's: its tensor
 * rows go out as a node sends such an env's, an obs column, and its
 * answers are checked as an ABI 1 env's. */
static void test_abi1_shaped_version2_recording(void **state)
{
    (void)state;
    const ro_space_t os = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = 3};
    ro_space_layout_t lay;
    ro_traj_layout_msg_t lm;
    char err[256];
    assert_int_equal(ro__layout_from_abi1(&lay, &os, &as, "t", err, sizeof err), 0);
    assert_int_equal(ro__traj_layout_msg_init(&lm, &lay), 0);
    Rollout__V1__TrajectoryHeader h = ROLLOUT__V1__TRAJECTORY_HEADER__INIT;
    h.num_envs = 1;
    h.layout = &lm.msg;
    ro_serve_rows_t v;
    assert_int_equal(ro__serve_rows_init(&v, &h, &lay, NULL, NULL, err, sizeof err), 0);
    assert_true(!v.flat_records && v.abi1_frames);
    assert_int_equal(v.as.kind, RO_SPACE_DISCRETE);
    assert_int_equal(v.as.n, 3);
    uint32_t env[1] = {0}, agent[1] = {0}, flags[1] = {8}, step[1] = {0};
    uint64_t episode[1] = {0};
    float reward[1] = {0}, obs[2] = {0.5f, -0.5f};
    int32_t action[1] = {0};
    uint32_t shape[2] = {1, 2};
    Rollout__V1__NamedTensor nt = ROLLOUT__V1__NAMED_TENSOR__INIT, *ntp[1] = {&nt};
    nt.name = "obs";
    nt.dtype = ROLLOUT__V1__DTYPE__DTYPE_FLOAT32;
    nt.shape = shape, nt.n_shape = 2;
    nt.data.data = (uint8_t *)obs, nt.data.len = sizeof obs;
    Rollout__V1__TransitionBatch b = ROLLOUT__V1__TRANSITION_BATCH__INIT;
    b.record = 1;
    b.n_env = b.n_agent = b.n_flags = b.n_step = b.n_episode = b.n_reward = b.n_action = 1;
    b.env = env, b.agent = agent, b.flags = flags, b.step = step, b.episode = episode;
    b.reward = reward, b.action = action, b.tensors = ntp, b.n_tensors = 1;
    assert_int_equal(ro__serve_rows_fill(&v, &b, err, sizeof err), 1);
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__serve_rows_frame(&v, 1, &o);
    assert_int_equal(o.n_tensors, 0);
    assert_int_equal(o.n_obs, 2);
    assert_memory_equal(o.obs, obs, sizeof obs);
    assert_int_equal(ro__check_observations(&o, 2, 1, err, sizeof err), 0);
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 1;
    a.n_discrete = 1;
    a.discrete = (int32_t[]){3};
    assert_int_not_equal(ro__serve_rows_answer(&v, &a, err, sizeof err), 0);
    a.discrete = (int32_t[]){2};
    assert_int_equal(ro__serve_rows_answer(&v, &a, err, sizeof err), 0);
    ro__serve_rows_free(&v);
    ro__traj_layout_msg_free(&lm);
    ro__layout_free(&lay);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_frames_answers_and_mismatches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_no_node_sends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_bounds_must_be_the_envs, setup, teardown),
        cmocka_unit_test(test_abi1_recording),
        cmocka_unit_test(test_abi1_shaped_version2_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
