/*
 * The recorder's chunks (actors/recorder/recorder_chunk.c). Env ABI 1: a shard's
 * reset and steps copied into a chunk as the trajectory file's entries (a
 * reset entry per env; per step its action, reward and the observation the
 * step saw: the final one where an episode ended, zeros where the step
 * failed, then the next episode's reset), the port's episode and step
 * counters advanced (also over a dropped step, whose count the next chunk
 * carries), and the chunk seen as a TransitionBatch whose columns are the
 * chunk's. Env ABI 2: the rows are what the header's layout says, and a
 * chunk's batch is a record the readers' own check takes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "actors/recorder/recorder_chunk.h"
#include "actors/exchange/step_batch.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"
#include "trajectory/format.h"
#include "typed_layout_fixture.h"

#define N_ 3
#define OD 2
#define CAP 16

/* A shard of N_ envs (first env 10), discrete actions, and its port. */
typedef struct fixture {
    ro_step_batch_t b;
    float obs[N_ * OD], final_obs[N_ * OD], reward[N_];
    uint8_t term[N_], trunc[N_], start[N_], has_final[N_];
    int32_t act_i[N_];
    uint64_t episode[N_];
    uint32_t step[N_];
    ro_rec_port_t port;
    ro_rec_rows_t rr;
    ro_rec_chunk_t chunk;
    char *mem;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->b.first = 10;
    f->b.n = N_;
    f->b.obs_dim = OD;
    f->b.act_dim = 1;
    f->b.discrete = true;
    f->b.agents = 1;
    f->b.obs = f->obs;
    f->b.final_obs = f->final_obs;
    f->b.reward = f->reward;
    f->b.terminated = f->term;
    f->b.truncated = f->trunc;
    f->b.episode_start = f->start;
    f->b.has_final = f->has_final;
    f->b.act_i = f->act_i;
    f->port.batch = &f->b;
    f->port.episode = f->episode;
    f->port.step = f->step;
    assert_int_equal(ro__rec_rows_init(&f->rr, NULL, OD, 1, true, CAP, NULL, 0), 0);
    f->mem = calloc(1, ro__rec_chunk_bytes(&f->rr));
    assert_non_null(f->mem);
    ro__rec_chunk_carve(&f->rr, &f->chunk, f->mem);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    free(f->mem);
    free(f);
    return 0;
}

/* obs_of: env j's observation values are base + 10 j + component. */
static void set_obs(float *o, float base)
{
    for (uint32_t j = 0; j < N_; j++)
        for (uint32_t d = 0; d < OD; d++)
            o[j * OD + d] = base + 10.0f * (float)j + (float)d;
}

/* A reset: one RESET entry per env at step 0, with its first observation,
 * no action and no reward; the counters untouched. */
static void test_reset_entries(void **state)
{
    fixture_t *f = *state;
    set_obs(f->obs, 100.0f);
    f->reward[0] = 5.0f; /* what a reset must not record */
    f->act_i[0] = 2;
    ro__rec_chunk_fill(&f->rr, &f->port, &f->chunk, true);
    const ro_rec_chunk_t *c = &f->chunk;
    assert_int_equal(c->count, N_);
    assert_int_equal(ro__rec_chunk_steps(c), 0);
    for (uint32_t k = 0; k < N_; k++) {
        assert_int_equal(c->env[k], 10 + k);
        assert_int_equal(c->episode[k], 0);
        assert_int_equal(c->step[k], 0);
        assert_int_equal(c->flags[k], RO_TRAJ_RESET);
        assert_true(c->reward[k] == 0.0f);
        assert_int_equal(c->act_i[k], 0);
        assert_memory_equal(c->obs + k * OD, f->obs + k * OD, OD * sizeof(float));
    }
    assert_int_equal(f->step[0], 0);
    assert_int_equal(f->episode[0], 0);
}

/* A step: env 0 goes on; env 1 terminates (its final observation
 * recorded, then the next episode's reset); env 2's step failed (truncated
 * without a final observation: FAILED, zeros, then the reset). */
static void test_step_entries(void **state)
{
    fixture_t *f = *state;
    set_obs(f->obs, 200.0f);
    set_obs(f->final_obs, 300.0f);
    for (uint32_t j = 0; j < N_; j++) {
        f->reward[j] = 1.5f + (float)j;
        f->act_i[j] = (int32_t)j + 1;
    }
    f->term[1] = 1;
    f->has_final[1] = 1;
    f->trunc[2] = 1;
    f->step[0] = 4; /* env 0 is at its 4th step */
    f->episode[1] = 7;
    ro__rec_chunk_fill(&f->rr, &f->port, &f->chunk, false);
    const ro_rec_chunk_t *c = &f->chunk;
    assert_int_equal(c->count, N_ + 2);
    assert_int_equal(ro__rec_chunk_steps(c), N_);

    /* env 0: step 5 of episode 0, the step's observation. */
    assert_int_equal(c->env[0], 10);
    assert_int_equal(c->step[0], 5);
    assert_int_equal(c->flags[0], 0);
    assert_int_equal(c->act_i[0], 1);
    assert_true(c->reward[0] == 1.5f);
    assert_memory_equal(c->obs, f->obs, OD * sizeof(float));

    /* env 1: its last step of episode 7 with the final observation, then
     * episode 8's reset with the next episode's first one. */
    assert_int_equal(c->env[1], 11);
    assert_int_equal(c->episode[1], 7);
    assert_int_equal(c->step[1], 1);
    assert_int_equal(c->flags[1], RO_TRAJ_TERMINATED);
    assert_memory_equal(c->obs + 1 * OD, f->final_obs + 1 * OD, OD * sizeof(float));
    assert_int_equal(c->env[2], 11);
    assert_int_equal(c->episode[2], 8);
    assert_int_equal(c->flags[2], RO_TRAJ_RESET);
    assert_memory_equal(c->obs + 2 * OD, f->obs + 1 * OD, OD * sizeof(float));

    /* env 2: a failed step, zeros; then the reset. */
    assert_int_equal(c->env[3], 12);
    assert_int_equal(c->flags[3], RO_TRAJ_TRUNCATED | RO_TRAJ_FAILED);
    assert_int_equal(c->act_i[3], 3);
    const float zeros[OD] = {0};
    assert_memory_equal(c->obs + 3 * OD, zeros, sizeof zeros);
    assert_int_equal(c->flags[4], RO_TRAJ_RESET);
    assert_int_equal(c->episode[4], 1);

    /* The counters: env 0 at step 5, envs 1 and 2 in new episodes. */
    assert_int_equal(f->step[0], 5);
    assert_int_equal(f->step[1], 0);
    assert_int_equal(f->episode[1], 8);
    assert_int_equal(f->step[2], 0);
    assert_int_equal(f->episode[2], 1);
}

/* A dropped step advances the counters as a recorded one would; the next
 * chunk says how many were dropped before it, and the port starts over. */
static void test_skip_counts(void **state)
{
    fixture_t *f = *state;
    f->term[0] = 1; /* env 0's episode ended in the dropped step */
    ro__rec_port_skip(&f->port, false);
    ro__rec_port_skip(&f->port, false);
    assert_int_equal(f->port.dropped, 2);
    assert_int_equal(f->episode[0], 2); /* ended in both */
    assert_int_equal(f->step[1], 2);
    f->term[0] = 0;
    ro__rec_chunk_fill(&f->rr, &f->port, &f->chunk, false);
    assert_int_equal(f->chunk.dropped, 2);
    assert_int_equal(f->port.dropped, 0);
    assert_int_equal(f->chunk.step[1], 3);
}

/* The chunk as a TransitionBatch: every column is the chunk's, n rows. */
static void test_batch_view(void **state)
{
    fixture_t *f = *state;
    set_obs(f->obs, 1.0f);
    f->term[2] = 1;
    f->has_final[2] = 1;
    ro__rec_chunk_fill(&f->rr, &f->port, &f->chunk, false);
    ro_rec_batch_t v;
    ro__rec_chunk_batch(&f->rr, &f->chunk, &v);
    const size_t n = f->chunk.count;
    assert_int_equal(n, N_ + 1);
    assert_int_equal(v.b.n_env, n);
    assert_ptr_equal(v.b.env, f->chunk.env);
    assert_int_equal(v.b.n_action, n);
    assert_ptr_equal(v.b.action, f->chunk.act_i);
    assert_int_equal(v.b.n_action_box, 0);
    assert_int_equal(v.b.n_obs, n * OD);
    assert_ptr_equal(v.b.obs, f->chunk.obs);
    assert_int_equal(v.b.n_tensors, 0);
    assert_int_equal(v.b.n_snapshots, 0);
    /* A full chunk's record stays within the bound the writer sizes for. */
    assert_true(rollout__v1__transition_batch__get_packed_size(&v.b) <= ro__rec_max_record(&f->rr));
}

/* Env ABI 2: fixture_typed_layout with two agents. */
#define A2 2
#define E2 2
#define R2 (A2 * E2)

/* An ABI 2 chunk: its rows are the env layout's as the reader derives them
 * from the header's layout, and its batch (a step in which env 1 ends,
 * after a start) passes the reader's check of a version 2 record, its
 * tensors named and shaped as the layout's. */
static void test_abi2_rows_as_the_reader_reads_them(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    fixture_typed_layout(&lay, A2);
    ro_traj_layout_msg_t lm;
    assert_int_equal(ro__traj_layout_msg_init(&lm, &lay), 0);
    ro_rec_rows_t rr;
    char why[256] = "";
    assert_int_equal(ro__rec_rows_init(&rr, &lm.msg, 0, 0, false, 4 * R2, why, sizeof why), 0);
    assert_true(rr.abi2);
    assert_int_equal(rr.row.agents, lay.agents);
    assert_int_equal(rr.row.ntensors, lay.ntensors);
    assert_int_equal(rr.row.ndisc, lay.ndisc);
    assert_int_equal(rr.row.nbox, lay.nbox);
    assert_int_equal(rr.row.mask_width, lay.mask_width);
    for (uint32_t k = 0; k < lay.ntensors; k++)
        assert_int_equal(rr.row.row_bytes[k], lay.t[k].row_bytes);

    uint8_t img[R2 * 6], pos[R2 * 8], fimg[R2 * 6], fpos[R2 * 8], mask[R2 * 9];
    int32_t act_i[R2 * 3];
    float act_f[R2 * 2], reward[R2];
    uint8_t term[R2] = {0}, trunc[R2] = {0}, start[R2] = {0}, has_final[R2] = {0};
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)i, fimg[i] = (uint8_t)(100 + i);
    for (size_t i = 0; i < sizeof pos; i++)
        pos[i] = (uint8_t)(7 * i), fpos[i] = (uint8_t)(200 + i);
    memset(mask, 1, sizeof mask);
    for (uint32_t r = 0; r < R2; r++) {
        act_i[3 * r] = 2, act_i[3 * r + 1] = 1, act_i[3 * r + 2] = 3;
        act_f[2 * r] = 0.5f, act_f[2 * r + 1] = -0.5f;
        reward[r] = (float)r;
    }
    ro_step_batch_t b = {.first = 5, .n = R2, .agents = A2, .act_nbox = 2};
    b.tensor[0] = img, b.tensor[1] = pos;
    b.final_tensor[0] = fimg, b.final_tensor[1] = fpos;
    b.mask = mask;
    b.act_i = act_i, b.act_f = act_f, b.reward = reward;
    b.terminated = term, b.truncated = trunc, b.episode_start = start, b.has_final = has_final;
    uint64_t episode[E2] = {0};
    uint32_t step[E2] = {0};
    ro_rec_port_t port = {.batch = &b, .episode = episode, .step = step};
    char *mem = calloc(1, ro__rec_chunk_bytes(&rr));
    assert_non_null(mem);
    ro_rec_chunk_t c;
    memset(&c, 0, sizeof c);
    ro__rec_chunk_carve(&rr, &c, mem);
    ro__rec_chunk_fill(&rr, &port, &c, true);
    assert_int_equal(c.count, R2); /* every row's reset */
    term[2] = term[3] = 1;         /* env 1's agents end its episode */
    has_final[2] = has_final[3] = 1;
    ro__rec_chunk_fill(&rr, &port, &c, false);
    assert_int_equal(c.count, R2 + A2); /* the step, env 1's next reset */
    assert_int_equal(c.episode[R2], 1);

    ro_rec_batch_t v;
    ro__rec_chunk_batch(&rr, &c, &v);
    Rollout__V1__TrajectoryHeader h;
    rollout__v1__trajectory_header__init(&h);
    h.layout = &lm.msg;
    assert_int_equal(ro__traj_validate_rows(&h, &v.b, why, sizeof why), 0);
    assert_int_equal(v.b.n_tensors, 2);
    assert_string_equal(v.b.tensors[0]->name, "img");
    assert_int_equal(v.b.tensors[0]->n_shape, 3);
    assert_int_equal(v.b.tensors[0]->shape[0], c.count);
    assert_int_equal(v.b.tensors[0]->shape[1], 3);
    assert_int_equal(v.b.tensors[0]->shape[2], 2);
    assert_string_equal(v.b.tensors[1]->name, "pos");
    assert_int_equal(v.b.tensors[1]->dtype, ROLLOUT__V1__DTYPE__DTYPE_INT32);
    /* Env 1, agent 1's step row holds its final observation. */
    const size_t k = 3;
    assert_int_equal(c.env[k], 6);
    assert_int_equal(c.agent[k], 1);
    assert_memory_equal(c.tensor[0] + k * 6, fimg + 3 * 6, 6);
    assert_true(rollout__v1__transition_batch__get_packed_size(&v.b) <= ro__rec_max_record(&rr));
    free(mem);
    ro__traj_layout_msg_free(&lm);
    ro__layout_free(&lay);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reset_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skip_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_view, setup, teardown),
        cmocka_unit_test(test_abi2_rows_as_the_reader_reads_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
