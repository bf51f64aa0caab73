/*
 * rollout-replay --fork's records (programs/replay/fork_record.c), filled
 * as fork.c fills them, on real envs re-created from a header: CartPole
 * (an ABI 1 recording) and the gridworld plugin (env ABI 2: 2 agents, 3
 * tensors, a mask). A step's rows hold the env indices, episode, step,
 * actions, the outcome's reward and flags and the observations after it; a
 * reset's rows are flagged so, without reward or actions; a failed step's
 * rows are flagged failed and truncated with zero observations. An ABI 1
 * recording truncates at the episode limit whatever the env said; an ABI 2
 * episode's end truncates every agent that did not terminate and keeps no
 * mask with the final observation. The record's columns are the parent's
 * format (ABI 1: obs and one action column; ABI 2: agents, typed tensors
 * of n rows, composite actions, the mask). Snapshots carry every forked
 * env's state; a record of the most rows with snapshots stays within
 * ro__fork_record_max. An env without state support is refused at init,
 * logged as --fork's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "replay/fork_record.h"
#include "trajectory/abi2_format.h"
#include "trajectory/format.h"
#include "wire/dtype.h"

#define ERRLEN 512
#define ENVS 4
#define N 2 /* forked envs: 1 and 3 */

typedef struct fixture {
    struct ro_replay r;
    Rollout__V1__TrajectoryHeader h;
    ro_traj_layout_msg_t m;
    env_state_t envs[ENVS];
    ro_fork_run_t f;
    uint32_t ids[N];
    uint64_t episode[N];
    uint32_t step[N];
    ro_step_t st[2];
    int32_t act_i[N * 2];
    float act_f[1];
    uint8_t obs[3][256], mask[N * 2 * 8]; /* [N x A] rows */
    char *log;
    size_t loglen;
} fixture_t;

/* fx_new: envs 1 and 3 of env (plugin: NULL for a built-in) forked, as
 * fork.c sets them up, their record's room made. */
static fixture_t *fx_new(const char *env, const char *plugin)
{
    fixture_t *x = calloc(1, sizeof *x);
    assert_non_null(x);
    char err[ERRLEN];
    rollout__v1__trajectory_header__init(&x->h);
    x->h.env = x->h.env_spec = (char *)env;
    x->h.seed = 5;
    x->h.num_envs = ENVS;
    x->h.max_episode_steps = 50;
    ro_env_kind_t k;
    if (plugin) { /* the recorded layout: the plugin's own */
        assert_int_equal(ro__env_open(&k, plugin, err, sizeof err), 0);
        ro_space_layout_t lay;
        assert_int_equal(ro__env_kind_layout(&k, NULL, 0, 1, &lay, err, sizeof err), 0);
        assert_int_equal(ro__traj_layout_msg_init(&x->m, &lay), 0);
        ro__layout_free(&lay);
        ro__env_close(&k);
        x->h.layout = &x->m.msg;
    }
    struct ro_replay *r = &x->r;
    r->hdr = &x->h;
    r->envs = x->envs;
    r->o.log = open_memstream(&x->log, &x->loglen);
    assert_non_null(r->o.log);
    assert_int_equal(ro__recorded_env_open(&r->renv, &x->h, plugin, err, sizeof err), 0);
    ro_fork_run_t *f = &x->f;
    *f = (ro_fork_run_t){.r = r, .kind = &r->renv.kind, .n = N, .ids = x->ids};
    x->ids[0] = 1, x->ids[1] = 3;
    for (uint32_t j = 0; j < N; j++)
        assert_int_equal(ro__recorded_env_create(&r->renv, &x->h, x->ids[j],
                                                 &x->envs[x->ids[j]].env, err, sizeof err),
                         0);
    if (plugin) {
        f->lay = &r->renv.layout;
    } else {
        assert_int_equal(
            ro__env_layout_of(r->renv.kind.vt, NULL, x->envs[1].env, &f->lay1, err, sizeof err), 0);
        f->own_lay = true;
        f->lay = &f->lay1;
    }
    f->A = f->lay->agents;
    f->episode = x->episode, f->step = x->step, f->st = x->st;
    f->act_i = x->act_i, f->act_f = x->act_f, f->mask = x->mask;
    for (uint32_t t = 0; t < f->lay->ntensors; t++) {
        assert_true(f->lay->t[t].row_bytes * N * f->A <= sizeof x->obs[t]);
        f->obs[t] = x->obs[t];
    }
    return x;
}

static void fx_free(fixture_t *x)
{
    ro__fork_record_free(&x->f);
    if (x->f.own_lay)
        ro__layout_free(&x->f.lay1);
    for (uint32_t j = 0; j < N; j++)
        ro__recorded_env_destroy(&x->r.renv, x->envs[x->ids[j]].env);
    ro__recorded_env_close(&x->r.renv);
    ro__traj_layout_msg_free(&x->m);
    fclose(x->r.o.log);
    free(x->log);
    free(x);
}

/* CartPole (ABI 1): a step, a terminating step and its reset; then a step
 * at the episode limit and a failed step. */
static void test_abi1_rows(void **state)
{
    (void)state;
    fixture_t *x = fx_new("cartpole", NULL);
    ro_fork_run_t *f = &x->f;
    assert_int_equal(ro__fork_record_init(f), RO_REPLAY_OK);
    float *obs = (float *)(void *)x->obs[0];
    for (int i = 0; i < 8; i++)
        obs[i] = (float)(i + 1); /* env 1: 1..4, env 3: 5..8 */
    x->episode[0] = 7, x->step[0] = 3, x->episode[1] = 2, x->step[1] = 9;
    x->act_i[0] = 1, x->act_i[1] = 1;
    Rollout__V1__TransitionBatch b;
    ro__fork_record_begin(f, &b);
    x->st[0] = (ro_step_t){.reward = 1.5f};
    ro__fork_put_step(f, 0, false, false);
    x->st[0] = (ro_step_t){.reward = 2.0f, .terminated = 1};
    ro__fork_put_step(f, 1, false, true);
    obs[4] = 9.0f; /* env 3 reset: its new first observation */
    x->episode[1] = 3, x->step[1] = 0;
    ro__fork_put_reset(f, 1);
    ro__fork_record_end(f, &b);
    assert_int_equal(b.n_env, 3);
    assert_memory_equal(b.env, ((uint32_t[]){1, 3, 3}), 12);
    assert_memory_equal(b.episode, ((uint64_t[]){7, 2, 3}), 24);
    assert_memory_equal(b.step, ((uint32_t[]){3, 9, 0}), 12);
    assert_memory_equal(b.flags, ((uint32_t[]){0, RO_TRAJ_TERMINATED, RO_TRAJ_RESET}), 12);
    assert_memory_equal(b.reward, ((float[]){1.5f, 2.0f, 0.0f}), 12);
    assert_int_equal(b.n_action, 3);
    assert_memory_equal(b.action, ((int32_t[]){1, 1, 0}), 12); /* none at a reset */
    assert_int_equal(b.n_obs, 12);
    assert_memory_equal(b.obs, ((float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 6, 7, 8}), 48);
    assert_int_equal(b.n_agent + b.n_tensors + b.n_action_box, 0);
    /* The episode limit truncates an ABI 1 episode; a failed step is
     * flagged so, without reward or observation. */
    ro__fork_record_begin(f, &b);
    x->step[0] = 50;
    x->st[0] = (ro_step_t){.reward = 1.0f};
    ro__fork_put_step(f, 0, false, true);
    x->step[1] = 4;
    x->st[0] = (ro_step_t){.reward = 3.0f};
    ro__fork_put_step(f, 1, true, true);
    ro__fork_record_end(f, &b);
    assert_memory_equal(b.flags,
                        ((uint32_t[]){RO_TRAJ_TRUNCATED, RO_TRAJ_FAILED | RO_TRAJ_TRUNCATED}), 8);
    assert_memory_equal(b.reward, ((float[]){1.0f, 0.0f}), 8);
    assert_memory_equal(b.obs + 4, ((float[]){0, 0, 0, 0}), 16);
    assert_int_equal(b.action[1], 1); /* the action chosen is kept */
    fx_free(x);
}

/* gridworld (ABI 2, 2 agents): agent rows, the end of an episode
 * truncating the agent that did not terminate (no mask kept), a reset's
 * rows with the mask; the typed tensors hold n rows. */
static void test_abi2_rows(void **state)
{
    (void)state;
    fixture_t *x = fx_new("gridworld", RO_GRIDWORLD_PATH);
    ro_fork_run_t *f = &x->f;
    const ro_space_layout_t *l = f->lay;
    assert_int_equal(f->A, 2);
    assert_int_equal(l->ntensors, 3);
    assert_int_equal(l->ndisc, 1);
    assert_int_equal(l->mask_width, 5);
    assert_int_equal(ro__fork_record_init(f), RO_REPLAY_OK);
    for (uint32_t t = 0; t < 3; t++)
        for (size_t i = 0; i < 4 * l->t[t].row_bytes; i++)
            x->obs[t][i] = (uint8_t)(16 * t + i + 1);
    memset(x->mask, 1, sizeof x->mask);
    for (int i = 0; i < 4; i++)
        x->act_i[i] = i + 1;
    Rollout__V1__TransitionBatch b;
    ro__fork_record_begin(f, &b);
    ro__fork_record_end(f, &b); /* an empty record: no tensors */
    assert_int_equal(b.n_env + b.n_tensors, 0);
    ro__fork_record_begin(f, &b);
    x->st[0] = (ro_step_t){.reward = 1.0f}, x->st[1] = (ro_step_t){.reward = 2.0f};
    ro__fork_put_step(f, 0, false, false);
    x->st[0] = (ro_step_t){.reward = 5.0f, .terminated = 1}, x->st[1] = (ro_step_t){0};
    ro__fork_put_step(f, 1, false, true);
    ro__fork_put_reset(f, 1);
    ro__fork_record_end(f, &b);
    assert_int_equal(b.n_env, 6);
    assert_memory_equal(b.env, ((uint32_t[]){1, 1, 3, 3, 3, 3}), 24);
    assert_memory_equal(b.agent, ((uint32_t[]){0, 1, 0, 1, 0, 1}), 24);
    assert_memory_equal(
        b.flags,
        ((uint32_t[]){0, 0, RO_TRAJ_TERMINATED, RO_TRAJ_TRUNCATED, RO_TRAJ_RESET, RO_TRAJ_RESET}),
        24);
    assert_memory_equal(b.reward, ((float[]){1, 2, 5, 0, 0, 0}), 24);
    assert_int_equal(b.n_action, 6);
    assert_memory_equal(b.action, ((int32_t[]){1, 2, 3, 4, 0, 0}), 24);
    assert_int_equal(b.mask.len, 30);
    for (size_t i = 0; i < 30; i++) /* rows 2, 3: the episode's end */
        assert_int_equal(b.mask.data[i], i / 5 == 2 || i / 5 == 3 ? 0 : 1);
    assert_int_equal(b.n_tensors, 3);
    for (uint32_t t = 0; t < 3; t++) {
        const Rollout__V1__NamedTensor *nt = b.tensors[t];
        const size_t rb = l->t[t].row_bytes;
        assert_string_equal(nt->name, l->t[t].name);
        assert_int_equal(nt->dtype, ro__wire_dtype(l->t[t].dtype));
        assert_int_equal(nt->n_shape, l->t[t].ndim + 1);
        assert_int_equal(nt->shape[0], 6);
        assert_int_equal(nt->data.len, 6 * rb);
        assert_memory_equal(nt->data.data, x->obs[t], 4 * rb); /* env 1, then env 3's step */
        assert_memory_equal(nt->data.data + 4 * rb, x->obs[t] + 2 * rb, 2 * rb); /* its reset */
    }
    fx_free(x);
}

/* Snapshots carry every forked env's state; a record of the most rows,
 * the largest numbers and the snapshots stays within the bound. */
static void check_bound(const char *env, const char *plugin)
{
    fixture_t *x = fx_new(env, plugin);
    ro_fork_run_t *f = &x->f;
    assert_int_equal(ro__fork_record_init(f), RO_REPLAY_OK);
    assert_true(f->blob > 0);
    memset(x->act_i, 0xff, sizeof x->act_i); /* -1: ten bytes as a varint */
    x->episode[0] = x->episode[1] = UINT64_MAX;
    x->step[0] = x->step[1] = UINT32_MAX;
    Rollout__V1__TransitionBatch b;
    ro__fork_record_begin(f, &b);
    for (uint32_t j = 0; j < N; j++) {
        ro__fork_put_step(f, j, false, true);
        ro__fork_put_reset(f, j);
    }
    ro__fork_record_end(f, &b);
    assert_int_equal(b.n_env, 2 * N * f->A);
    assert_int_equal(ro__fork_snapshot(f, &b, UINT64_MAX), RO_REPLAY_OK);
    assert_int_equal(b.n_snapshots, N);
    for (uint32_t j = 0; j < N; j++) {
        assert_int_equal(b.snapshots[j]->env, x->ids[j]);
        assert_int_equal(b.snapshots[j]->episode, UINT64_MAX);
        assert_int_equal(b.snapshots[j]->env_steps, UINT64_MAX);
        assert_true(b.snapshots[j]->state.len > 0 && b.snapshots[j]->state.len <= f->blob);
    }
    b.record = UINT64_MAX;
    assert_true(ro__traj_batch_packed_size(&b) <= ro__fork_record_max(f));
    fflush(x->r.o.log);
    assert_int_equal(x->loglen, 0); /* nothing failed */
    fx_free(x);
}

static void test_snapshots_within_bound(void **state)
{
    (void)state;
    check_bound("cartpole", NULL);
    check_bound("gridworld", RO_GRIDWORLD_PATH);
}

/* An env kind without state support: refused at init, in --fork's words. */
static void test_no_state_support(void **state)
{
    (void)state;
    fixture_t *x = fx_new("cartpole", NULL);
    const ro_env_state_ops_t ops = x->r.renv.kind.state;
    x->r.renv.kind.state = (ro_env_state_ops_t){0}; /* as a plugin without the symbol */
    assert_int_equal(ro__fork_record_init(&x->f), RO_REPLAY_UNUSABLE);
    x->r.renv.kind.state = ops;
    fflush(x->r.o.log);
    assert_non_null(strstr(x->log, "rollout-replay: --fork: "));
    assert_non_null(strstr(x->log, "env 'cartpole' has no state support"));
    assert_int_equal(ro__fork_fail(&x->f, RO_REPLAY_FAILED, "env %u: %s", 3u, "gone"),
                     RO_REPLAY_FAILED);
    fflush(x->r.o.log);
    assert_non_null(strstr(x->log, "\nrollout-replay: --fork: env 3: gone\n"));
    fx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abi1_rows),
        cmocka_unit_test(test_abi2_rows),
        cmocka_unit_test(test_snapshots_within_bound),
        cmocka_unit_test(test_no_state_support),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
