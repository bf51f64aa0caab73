/*
 * rollout-replay's env ABI 2 rows (programs/replay/replay_rows.c) against a small
 * env of the test's own ("twin": two agents, a uint8 and a float32 tensor, a
 * Discrete(3) and a Box(1) part, a mask): rows recorded from one instance
 * verify against a second, bit for bit; a row changed in any field (a
 * tensor element, the mask, an agent's reward or flags, the failed flag, an
 * action outside its space) is reported with its agent and the field; failed
 * steps (an error, a NaN with --check-finite) verify as the node saw them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay_rows.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"
#include "trajectory/format.h"

#define A 2
#define CELLS 4

typedef struct twin {
    uint32_t t;
} twin_t;

static int twin_create(void **out, const ro_env_arg_t *a, size_t na, uint64_t seed, char *err,
                       size_t errlen)
{
    (void)a, (void)na, (void)err, (void)errlen;
    twin_t *w = calloc(1, sizeof *w);
    w->t = (uint32_t)(seed % 7);
    *out = w;
    return 0;
}

static void twin_spaces(void *env, ro_env_spaces_t *sp)
{
    (void)env;
    static const float lo[1] = {-1.0f}, hi[1] = {1.0f};
    sp->num_agents = A;
    sp->num_obs = 2;
    sp->obs[0] =
        (ro_tensor_space_t){.name = "cells", .dtype = RO_DTYPE_UINT8, .ndim = 1, .shape = {CELLS}};
    sp->obs[1] =
        (ro_tensor_space_t){.name = "v", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {2}};
    sp->num_parts = 2;
    sp->act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    sp->act[1] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {1}, .low = lo, .high = hi};
    sp->action_mask = 1;
}

static void observe(const twin_t *w, const ro_obs_out_t *o, const int32_t *d, const float *b)
{
    for (uint32_t a = 0; a < A; a++) {
        uint8_t *c = (uint8_t *)o->tensors[0] + a * CELLS;
        float *v = (float *)o->tensors[1] + a * 2;
        for (uint32_t i = 0; i < CELLS; i++)
            c[i] = (uint8_t)(i == (w->t + a) % CELLS ? 255 : 0);
        v[0] = (float)w->t * 0.25f + (d ? (float)d[a] : 0.0f);
        v[1] = b ? b[a] * 3.0f : -1.0f;
        for (uint32_t i = 0; i < 3; i++)
            o->mask[a * 3 + i] = (uint8_t)(i != (w->t + a) % 3);
    }
}

static void twin_reset(void *env, const ro_obs_out_t *o)
{
    twin_t *w = env;
    w->t = 0;
    observe(w, o, NULL, NULL);
}

static int twin_step(void *env, const ro_actions_t *act, const ro_obs_out_t *o, ro_step_t *out)
{
    twin_t *w = env;
    if (act->box[0] > 0.9f)
        return -1; /* a failed step (a NaN box value gives a NaN observation) */
    w->t++;
    observe(w, o, act->discrete, act->box);
    for (uint32_t a = 0; a < A; a++) {
        out[a].reward = (float)act->discrete[a] * 0.5f + act->box[a];
        out[a].terminated = a == 0 && w->t == 3;
    }
    return 0;
}

static const char *const no_args[] = {NULL};
static const ro_env2_vtable_t twin_vt = {
    .abi_version = RO_ENV_ABI2_VERSION,
    .size = sizeof(ro_env2_vtable_t),
    .name = "twin",
    .arg_keys = no_args,
    .create = twin_create,
    .spaces = twin_spaces,
    .reset = twin_reset,
    .step = twin_step,
    .destroy = free,
};

/* One env step recorded as rows: what the recorder writes. */
typedef struct rec {
    uint32_t env[A], agent[A], step[A], flags[A];
    uint64_t episode[A];
    float reward[A], box[A], v[A * 2];
    int32_t disc[A];
    uint8_t cells[A * CELLS], mask[A * 3];
    uint32_t s0[2], s1[2];
    Rollout__V1__NamedTensor t[2], *tp[2];
    Rollout__V1__TransitionBatch b;
} rec_t;

typedef struct fixture {
    ro_space_layout_t lay;
    ro_traj_layout_msg_t lm;
    Rollout__V1__TrajectoryHeader h;
    ro_replay_rows_t rr;
    void *recorded, *replayed;
} fixture_t;

static void rec_init(rec_t *r, uint32_t step, uint32_t flags)
{
    memset(r, 0, sizeof *r);
    Rollout__V1__TransitionBatch *b = &r->b;
    rollout__v1__transition_batch__init(b);
    b->record = 1;
    for (uint32_t a = 0; a < A; a++) {
        r->agent[a] = a;
        r->step[a] = step;
        r->flags[a] = flags;
    }
    b->n_env = b->n_agent = b->n_episode = b->n_step = b->n_flags = b->n_reward = A;
    b->env = r->env, b->agent = r->agent, b->episode = r->episode, b->step = r->step;
    b->flags = r->flags, b->reward = r->reward;
    b->action = r->disc, b->n_action = A;
    b->action_box = r->box, b->n_action_box = A;
    b->mask.data = r->mask, b->mask.len = sizeof r->mask;
    r->s0[0] = r->s1[0] = A;
    r->s0[1] = CELLS;
    r->s1[1] = 2;
    const char *names[2] = {"cells", "v"};
    uint8_t *data[2] = {r->cells, (uint8_t *)r->v};
    size_t lens[2] = {sizeof r->cells, sizeof r->v};
    Rollout__V1__DType dt[2] = {ROLLOUT__V1__DTYPE__DTYPE_UINT8, ROLLOUT__V1__DTYPE__DTYPE_FLOAT32};
    uint32_t *shapes[2] = {r->s0, r->s1};
    for (int k = 0; k < 2; k++) {
        rollout__v1__named_tensor__init(&r->t[k]);
        r->t[k].name = (char *)names[k];
        r->t[k].dtype = dt[k];
        r->t[k].shape = shapes[k];
        r->t[k].n_shape = 2;
        r->t[k].data.data = data[k];
        r->t[k].data.len = lens[k];
        r->tp[k] = &r->t[k];
    }
    b->tensors = r->tp;
    b->n_tensors = 2;
}

static ro_obs_out_t out_of(rec_t *r, void **t)
{
    t[0] = r->cells;
    t[1] = r->v;
    return (ro_obs_out_t){.tensors = t, .mask = r->mask};
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    twin_spaces(NULL, &sp);
    char err[256];
    assert_int_equal(ro__layout_from_spaces(&f->lay, &sp, "twin", err, sizeof err), 0);
    assert_int_equal(ro__traj_layout_msg_init(&f->lm, &f->lay), 0);
    rollout__v1__trajectory_header__init(&f->h);
    f->h.magic = RO_TRAJ_HEADER_MAGIC;
    f->h.format_version = RO_TRAJ_FORMAT_VERSION;
    f->h.env = f->h.env_spec = "twin";
    f->h.num_envs = 1;
    f->h.obs_dim = f->lay.obs_width;
    f->h.action_kind = "composite";
    f->h.action_dim = 2;
    f->h.max_record_bytes = 4096;
    f->h.layout = &f->lm.msg;
    assert_int_equal(ro__traj_validate_header(&f->h, err, sizeof err), 0);
    assert_int_equal(ro__replay_rows_init(&f->rr, &f->h, &f->lay), 0);
    twin_create(&f->recorded, NULL, 0, 1, NULL, 0);
    twin_create(&f->replayed, NULL, 0, 1, NULL, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    ro__replay_rows_free(&f->rr);
    ro__traj_layout_msg_free(&f->lm);
    ro__layout_free(&f->lay);
    free(f->recorded);
    free(f->replayed);
    free(f);
    return 0;
}

/* Records the reset and step k of the recorded instance (actions from k). */
static void record_reset(fixture_t *f, rec_t *r)
{
    rec_init(r, 0, RO_TRAJ_RESET);
    void *t[2];
    ro_obs_out_t o = out_of(r, t);
    twin_vt.reset(f->recorded, &o);
}

static void record_step(fixture_t *f, rec_t *r, uint32_t k)
{
    rec_init(r, k, 0);
    for (uint32_t a = 0; a < A; a++) {
        r->disc[a] = (int32_t)((k + a + 1) % 3);
        r->box[a] = 0.125f * (float)k - 0.5f * (float)a;
    }
    void *t[2];
    ro_obs_out_t o = out_of(r, t);
    ro_step_t st[A] = {0};
    assert_int_equal(twin_vt.step(f->recorded, &(ro_actions_t){r->disc, r->box}, &o, st), 0);
    bool end = false;
    for (uint32_t a = 0; a < A; a++)
        end = end || st[a].terminated;
    for (uint32_t a = 0; a < A; a++) {
        r->reward[a] = st[a].reward;
        r->flags[a] = (st[a].terminated ? RO_TRAJ_TERMINATED : 0u) |
                      (end && !st[a].terminated ? RO_TRAJ_TRUNCATED : 0u);
    }
    if (end) /* no mask is recorded with a final observation */
        memset(r->mask, 0, sizeof r->mask);
}

static void test_rows_verify(void **state)
{
    fixture_t *f = *state;
    ro_replay_div_t d;
    rec_t r;
    char why[256];
    record_reset(f, &r);
    assert_int_equal(ro__traj_validate_batch(&f->h, &r.b, why, sizeof why), 0);
    assert_int_equal(ro__replay_rows_reset(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
    for (uint32_t k = 1; k <= 3; k++) {
        record_step(f, &r, k);
        assert_int_equal(ro__traj_validate_batch(&f->h, &r.b, why, sizeof why), 0);
        assert_int_equal(ro__replay_rows_step(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
    }
    assert_true(r.flags[0] & RO_TRAJ_TERMINATED); /* step 3 ends the episode */
    assert_true(r.flags[1] & RO_TRAJ_TRUNCATED);
}

/* Step 2, changed by `c`, is reported as `words` at agent `agent`. */
static void expect_div(fixture_t *f, int c, uint32_t agent, const char *words)
{
    rec_t r;
    ro_replay_div_t d;
    memset(f->recorded, 0, sizeof(twin_t));
    memset(f->replayed, 0, sizeof(twin_t));
    record_reset(f, &r);
    assert_int_equal(ro__replay_rows_reset(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
    record_step(f, &r, 1);
    assert_int_equal(ro__replay_rows_step(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
    record_step(f, &r, 2);
    if (c == 0)
        r.v[3] += 1.0f; /* agent 1, v[1] */
    else if (c == 1)
        r.cells[2] ^= 1; /* agent 0, cells[2] */
    else if (c == 2)
        r.mask[4] ^= 1; /* agent 1, mask[1] */
    else if (c == 3)
        r.reward[1] = -r.reward[1] - 1.0f;
    else if (c == 4)
        r.flags[0] |= RO_TRAJ_TERMINATED;
    else if (c == 5)
        r.flags[0] = r.flags[1] = RO_TRAJ_TRUNCATED | RO_TRAJ_FAILED;
    else
        r.disc[1] = 3; /* Discrete(3) */
    assert_int_equal(ro__replay_rows_step(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 1);
    assert_int_equal(d.agent, agent);
    if (!strstr(d.what, words))
        fail_msg("expected '%s' in '%s'", words, d.what);
}

static void test_rows_divergences(void **state)
{
    fixture_t *f = *state;
    expect_div(f, 0, 1, "obs 'v'[1]: recorded ");
    expect_div(f, 1, 0, "obs 'cells'[2]: recorded 254, replayed 255");
    expect_div(f, 2, 1, "mask[1]: recorded ");
    expect_div(f, 3, 1, "reward: recorded ");
    expect_div(f, 4, 0, "terminated: recorded 1, replayed 0");
    expect_div(f, 5, 0, "failed: recorded 1, replayed 0");
    expect_div(f, 6, 1, "recorded action entry 0 = 3 outside [0, 3)");
}

/* A failed step (the env's error, or a NaN observation with
 * --check-finite) verifies as failed, then the reset that follows it. */
static void test_rows_failures(void **state)
{
    fixture_t *f = *state;
    ro_replay_div_t d;
    rec_t r;
    char why[256];
    f->rr.check_finite = true;
    for (int c = 0; c < 3; c++) {
        record_reset(f, &r);
        assert_int_equal(ro__replay_rows_reset(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
        /* As the recorder writes a failed step: truncated and failed, no
         * reward, zero observation and mask. */
        rec_init(&r, 1, RO_TRAJ_TRUNCATED | RO_TRAJ_FAILED);
        r.box[0] = c == 0 ? 1.0f : 0.0f;
        r.box[1] = c == 0 ? 0.0f : NAN;
        assert_int_equal(ro__traj_validate_batch(&f->h, &r.b, why, sizeof why), 0);
        f->rr.check_finite = c != 2;
        int div = ro__replay_rows_step(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d);
        if (c == 2) { /* without --check-finite a NaN is no failure */
            assert_int_equal(div, 1);
            assert_string_equal(d.what, "failed: recorded 1, replayed 0");
            continue;
        }
        assert_int_equal(div, 0);
        record_reset(f, &r);
        r.episode[0] = r.episode[1] = 1;
        assert_int_equal(ro__replay_rows_reset(&f->rr, &twin_vt, f->replayed, &r.b, 0, &d), 0);
    }
}

/* --dump: one JSON line per row, tensors by name. */
static void test_rows_dump(void **state)
{
    fixture_t *f = *state;
    rec_t r;
    memset(f->recorded, 0, sizeof(twin_t));
    record_reset(f, &r);
    record_step(f, &r, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ro__replay_rows_dump(&f->rr, &f->lm.msg, m, &r.b, 1);
    fclose(m);
    assert_non_null(strstr(buf, "{\"env\":0,\"agent\":1,\"episode\":0,\"step\":1,\"reset\":false,"
                                "\"obs\":{\"cells\":[0,0,255,0],\"v\":[0.25,-1.125]},"
                                "\"mask\":[1,1,0],\"action\":{\"discrete\":[0],\"box\":[-0.375]},"
                                "\"reward\":-0.375,\"terminated\":false,\"truncated\":false,"
                                "\"failed\":false}\n"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_divergences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_dump, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
