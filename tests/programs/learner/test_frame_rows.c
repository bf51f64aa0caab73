/*
 * rollout-learner's rows of a SEED frame (programs/learner/frame_rows.c),
 * one path for both env ABIs. An ABI 1 frame's obs column is read in place;
 * an env ABI 2 frame's typed tensors are flattened (uint8 as x / 255) with
 * their mask rows after them; a frame in the node's memory is read out of
 * it, its rows' env indices named, and a NaN reward, flags no node sets or
 * a NaN observation refused by name. Steps count once however often a
 * batch is resent; an env's episode counts once for all its agents, with
 * their mean return. Actions go back into the node's action memory at the
 * rows' indices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner/learner.h"
#include "runtime/error.h"

#define ERRLEN 256

typedef struct fixture {
    learner_t *L;
    node_t *n;
    void *obs_mem, *act_mem;
} fixture_t;

/* fx_new: a learner of layout lay (moved in) and a node of rows rows. */
static fixture_t *fx_new(const ro_space_layout_t *lay, bool abi2, uint32_t rows)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->L = calloc(1, sizeof *f->L);
    f->n = calloc(1, sizeof *f->n);
    assert_true(f->L && f->n);
    f->L->lay = *lay;
    f->L->abi2 = abi2;
    f->L->obs_dim = lay->obs_width;
    f->L->act_ndisc = abi2 ? lay->ndisc : 1;
    f->L->act_dim = abi2 ? lay->nbox : 1;
    f->n->num_envs = rows;
    f->n->ep_ret = calloc(rows, sizeof *f->n->ep_ret);
    f->n->next_step = calloc(rows, sizeof *f->n->next_step);
    assert_true(f->n->ep_ret && f->n->next_step);
    return f;
}

static void fx_free(fixture_t *f)
{
    ro__layout_free(&f->L->lay);
    free(f->n->ep_ret);
    free(f->n->next_step);
    free(f->obs_mem);
    free(f->act_mem);
    free(f->n);
    free(f->L);
    free(f);
}

/* pending: room for a frame of rows rows, as serve.c makes it. */
static ro_pending_t *pending(const fixture_t *f, const Rollout__V1__Observations *o, uint32_t rows)
{
    ro_pending_t *p = calloc(1, sizeof *p + ro__learner_rows_bytes(f->L, o, rows));
    assert_non_null(p);
    p->item.rows = rows;
    return p;
}

/* A layout of 2 agents: a uint8 [2] tensor "view", a float32 [1] "pos",
 * a masked Discrete(3). */
static void abi2_layout(ro_space_layout_t *lay)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 2;
    sp.num_obs = 2;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 1, .shape = {2}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "pos", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {1}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    sp.action_mask = 1;
    char err[ERRLEN];
    assert_int_equal(ro__layout_from_spaces(lay, &sp, "t", err, sizeof err), 0);
}

/* An ABI 1 frame: its obs column read in place; steps and a finished
 * episode counted once, a resent frame not again. */
static void test_abi1_frame_in_place(void **state)
{
    (void)state;
    const ro_space_t os = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {3}};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = 2};
    ro_space_layout_t lay;
    char err[ERRLEN];
    assert_int_equal(ro__layout_from_abi1(&lay, &os, &as, "t", err, sizeof err), 0);
    fixture_t *f = fx_new(&lay, false, 4);
    uint32_t env[2] = {1, 3};
    uint64_t step[2] = {5, 5};
    float reward[2] = {1.0f, 2.0f}, obs[6] = {1, 2, 3, 4, 5, 6};
    protobuf_c_boolean term[2] = {0, 1}, trunc[2] = {0, 0}, start[2] = {0, 1};
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.n_env = o.n_step = o.n_reward = o.n_terminated = o.n_truncated = o.n_episode_start = 2;
    o.env = env, o.step = step, o.reward = reward, o.terminated = term, o.truncated = trunc;
    o.episode_start = start, o.obs = obs, o.n_obs = 6;
    assert_int_equal(ro__learner_rows_bytes(f->L, &o, 2), 0); /* nothing copied */
    ro_pending_t *p = pending(f, &o, 2);
    assert_int_equal(ro__learner_take_rows(f->L, f->n, &o, p, err, sizeof err), 0);
    assert_ptr_equal(p->obs, obs);
    assert_ptr_equal(p->env, env);
    assert_null(p->mask);
    assert_int_equal(f->n->steps, 2);
    assert_int_equal(f->L->steps, 2);
    assert_int_equal(f->n->episodes, 1);
    assert_true(f->n->return_sum == 2.0);
    /* The same frame again (a resend after a reconnect): nothing new. */
    assert_int_equal(ro__learner_take_rows(f->L, f->n, &o, p, err, sizeof err), 0);
    assert_int_equal(f->n->steps, 2);
    assert_int_equal(f->n->episodes, 1);
    free(p);
    fx_free(f);
}

/* An env ABI 2 frame: tensors flattened (uint8 / 255, then the float),
 * the mask after them; 2 agents' episode counts once, the mean return. */
static void test_abi2_frame_flattened(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    abi2_layout(&lay);
    fixture_t *f = fx_new(&lay, true, 4);
    uint32_t env[2] = {2, 3}; /* env 1's two agents */
    uint64_t step[2] = {0, 0};
    float reward[2] = {1.0f, 3.0f}, pos[2] = {0.5f, -0.5f};
    uint8_t view[4] = {0, 255, 51, 102}, mask[6] = {1, 1, 0, 0, 1, 1};
    protobuf_c_boolean term[2] = {1, 1}, trunc[2] = {0, 0}, start[2] = {0, 0};
    Rollout__V1__NamedTensor tv = ROLLOUT__V1__NAMED_TENSOR__INIT, tp = tv;
    tv.data.data = view, tv.data.len = sizeof view;
    tp.data.data = (uint8_t *)pos, tp.data.len = sizeof pos;
    Rollout__V1__NamedTensor *ts[2] = {&tv, &tp};
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.n_env = o.n_step = o.n_reward = o.n_terminated = o.n_truncated = o.n_episode_start = 2;
    o.env = env, o.step = step, o.reward = reward, o.terminated = term, o.truncated = trunc;
    o.episode_start = start, o.tensors = ts, o.n_tensors = 2;
    o.mask.data = mask, o.mask.len = sizeof mask;
    ro_pending_t *p = pending(f, &o, 2);
    char err[ERRLEN];
    assert_int_equal(ro__learner_take_rows(f->L, f->n, &o, p, err, sizeof err), 0);
    const float want[6] = {0.0f, 1.0f, 0.5f, 51.0f / 255.0f, 102.0f / 255.0f, -0.5f};
    assert_memory_equal(p->obs, want, sizeof want);
    assert_non_null(p->mask);
    assert_memory_equal(p->mask, mask, sizeof mask);
    assert_int_equal(f->n->steps, 2);
    assert_int_equal(f->n->episodes, 1);  /* on agent 0's row only */
    assert_true(f->n->return_sum == 2.0); /* (1 + 3) / 2 agents */
    free(p);
    fx_free(f);
}

/* mem_fixture: a node's memory for 4 rows of abi2_layout, every row's
 * view (r, r + 1), pos r / 2, reward r, step 7, flags 0, mask all 1. */
static fixture_t *mem_fixture(void)
{
    ro_space_layout_t lay;
    abi2_layout(&lay);
    fixture_t *f = fx_new(&lay, true, 4);
    ro_seed_mem_layout_t *ml = &f->n->seed_lay;
    ro__seed_mem_layout_typed(ml, 4, &f->L->lay);
    f->obs_mem = aligned_alloc(64, ml->obs_bytes);
    f->act_mem = aligned_alloc(64, ml->act_bytes);
    assert_true(f->obs_mem && f->act_mem);
    memset(f->obs_mem, 0, ml->obs_bytes);
    memset(f->act_mem, 0, ml->act_bytes);
    f->n->seed_obs.base = f->obs_mem;
    f->n->seed_act.base = f->act_mem;
    uint8_t *m = f->obs_mem;
    for (uint32_t r = 0; r < 4; r++) {
        m[ml->tensor_off[0] + r * 2] = (uint8_t)r;
        m[ml->tensor_off[0] + r * 2 + 1] = (uint8_t)(r + 1);
        ((float *)(void *)(m + ml->tensor_off[1]))[r] = (float)r / 2.0f;
        ((float *)(void *)(m + ml->reward_off))[r] = (float)r;
        ((uint64_t *)(void *)(m + ml->step_off))[r] = 7;
        memset(m + ml->mask_off + r * 3, 1, 3);
    }
    return f;
}

/* A frame in memory: rows 1 and 2 (one range) read out of it, flattened,
 * their env indices and mask rows after them. */
static void test_memory_rows(void **state)
{
    (void)state;
    fixture_t *f = mem_fixture();
    uint32_t ranges[2] = {1, 2};
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.in_memory = true;
    o.ranges = ranges, o.n_ranges = 2;
    ro_pending_t *p = pending(f, &o, 2);
    char err[ERRLEN];
    assert_int_equal(ro__learner_take_rows(f->L, f->n, &o, p, err, sizeof err), 0);
    assert_int_equal(p->env[0], 1);
    assert_int_equal(p->env[1], 2);
    const float want[6] = {1.0f / 255.0f, 2.0f / 255.0f, 0.5f, 2.0f / 255.0f, 3.0f / 255.0f, 1.0f};
    assert_memory_equal(p->obs, want, sizeof want);
    assert_ptr_equal(p->obs, p->obs_copy); /* a copy: the mapping may go */
    assert_memory_equal(p->mask, ((uint8_t[]){1, 1, 1, 1, 1, 1}), 6);
    assert_int_equal(f->n->steps, 2);
    assert_true(f->n->ep_ret[2] == 2.0);
    free(p);
    fx_free(f);
}

/* What memory holds is checked as it is read: a NaN reward, flags no node
 * sets, a NaN observation, each refused by name; a refused frame counts
 * none of its steps, not even those of the rows before the bad one. */
static void test_memory_refuses_bad_values(void **state)
{
    (void)state;
    uint32_t ranges[2] = {0, 4};
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.in_memory = true;
    o.seq = 9;
    o.ranges = ranges, o.n_ranges = 2;
    char err[ERRLEN];
    for (int bad = 0; bad < 3; bad++) {
        fixture_t *f = mem_fixture();
        const ro_seed_mem_layout_t *ml = &f->n->seed_lay;
        uint8_t *m = f->obs_mem;
        if (bad == 0)
            ((float *)(void *)(m + ml->reward_off))[2] = NAN;
        else if (bad == 1)
            m[ml->flags_off + 3] = 0x40;
        else
            ((float *)(void *)(m + ml->tensor_off[1]))[1] = NAN;
        ro_pending_t *p = pending(f, &o, 4);
        assert_int_equal(ro__learner_take_rows(f->L, f->n, &o, p, err, sizeof err), RO_ERANGE);
        const char *want[3] = {"observations 9 in memory: the reward of env 2 is NaN",
                               "the flags of env 3 are 0x40, bits no node sets",
                               "the observation of env 1 holds NaN (value 2)"};
        assert_non_null(strstr(err, want[bad]));
        assert_int_equal(f->n->steps, 0);
        assert_int_equal(f->L->steps, 0);
        free(p);
        fx_free(f);
    }
}

/* Actions go into the node's action memory at each row's index. */
static void test_write_actions(void **state)
{
    (void)state;
    fixture_t *f = mem_fixture();
    uint32_t env[2] = {3, 0};
    ro_pending_t p = {.item.rows = 2, .env = env};
    const int32_t act[2] = {2, 1};
    ro__learner_write_actions(f->L, f->n, &p, act, NULL);
    const int32_t *col =
        (const int32_t *)(const void *)((uint8_t *)f->act_mem + f->n->seed_lay.act_off);
    assert_int_equal(col[3], 2);
    assert_int_equal(col[0], 1);
    assert_int_equal(col[1], 0); /* untouched */
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abi1_frame_in_place),
        cmocka_unit_test(test_abi2_frame_flattened),
        cmocka_unit_test(test_memory_rows),
        cmocka_unit_test(test_memory_refuses_bad_values),
        cmocka_unit_test(test_write_actions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
