/*
 * SEED frames of an env ABI 2 env (actors/hub/obs_codec.c through
 * actors/hub/session_flow.c, checked by wire/typed_checks.c): a layout of 2
 * agents, a uint8 and an int32 tensor, a MultiDiscrete [3, 2] and a Box of
 * 2 in [-1, 1], and an action mask. The encoded Observations frame goes
 * through protobuf and back and passes the learner's checks with every
 * row, final row and mask byte where it belongs; the welcome's layout reads
 * back into the same layout; an Actions frame with a masked entry, an
 * entry out of range, a NaN or out-of-bounds float, or the wrong count
 * changes nothing; a good one writes every row's entries and floats. In
 * shared memory, every column lands at its rows and the actions come back
 * from the action memory, checked against the masks as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "actors/hub/obs_codec.h"
#include "actors/hub/session_flow.h"
#include "actors/exchange/step_batch.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"
#include "wire/typed_checks.h"
#include "wire/seed_memory.h"

#define SHARDS 2
#define ENVS 2 /* per shard */
#define AGENTS 2
#define ROWS (ENVS * AGENTS)
#define MASKW 5 /* 3 + 2 */
#define FOREVER_NS (UINT64_MAX / 4)

typedef struct fixture {
    ro_space_layout_t lay;
    ro_step_batch_t b[SHARDS];
    ro_sent_batch_t pool_mem[SHARDS];
    ro_sent_batch_t *pool;
    ro_obs_encoder_t enc;
    ro_conn_t conn; /* never opened: sends fail, the batch stays in flight */
    ro_flow_t flow;
} fixture_t;

static const float lo[2] = {-1, -1}, hi[2] = {1, 1};
static const uint32_t nvec[2] = {3, 2};

static void make_layout(ro_space_layout_t *lay)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = AGENTS;
    sp.num_obs = 2;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {3, 3}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "pos", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp.num_parts = 2;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_MULTI_DISCRETE, .n = 2, .nvec = nvec};
    sp.act[1] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    sp.action_mask = 1;
    char err[256];
    assert_int_equal(ro__layout_from_spaces(lay, &sp, "test", err, sizeof err), 0);
    assert_int_equal(lay->ndisc, 2);
    assert_int_equal(lay->nbox, 2);
    assert_int_equal(lay->mask_width, MASKW);
}

/* Row r (global) of batch b: known bytes; every env's second agent has
 * entry 0's value 2 masked; env 1 of each shard ended an episode. */
static void fill(ro_step_batch_t *b, uint64_t steps)
{
    b->steps = steps;
    for (uint32_t j = 0; j < b->n; j++) {
        const uint32_t r = b->first * AGENTS + j;
        for (uint32_t k = 0; k < 9; k++) {
            b->tensor[0][j * 9 + k] = (uint8_t)(r * 10 + k);
            b->final_tensor[0][j * 9 + k] = (uint8_t)(200 + r);
        }
        int32_t pos[2] = {(int32_t)r, -(int32_t)r};
        memcpy(b->tensor[1] + j * 8, pos, 8);
        pos[0] = 1000 + (int32_t)r;
        memcpy(b->final_tensor[1] + j * 8, pos, 8);
        memset(b->mask + j * MASKW, 1, MASKW);
        if (j % AGENTS == 1)
            b->mask[j * MASKW + 2] = 0;
        b->reward[j] = (float)r + 0.5f;
        b->has_final[j] = j / AGENTS == 1;
        b->truncated[j] = b->has_final[j];
        b->terminated[j] = 0;
        b->episode_start[j] = b->has_final[j];
    }
}

static int setup(void **state)
{
    fixture_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    make_layout(&t->lay);
    for (uint32_t i = 0; i < SHARDS; i++) {
        ro_step_batch_t *b = &t->b[i];
        b->index = i;
        b->first = i * ENVS;
        b->agents = AGENTS;
        b->n = ROWS;
        b->item.rows = ROWS;
        b->layout = &t->lay;
        b->act_ndisc = 2;
        b->act_nbox = 2;
        for (int k = 0; k < 2; k++) {
            b->tensor[k] = calloc(ROWS, t->lay.t[k].row_bytes);
            b->final_tensor[k] = calloc(ROWS, t->lay.t[k].row_bytes);
        }
        b->mask = calloc(ROWS, MASKW);
        b->reward = calloc(ROWS, sizeof(float));
        b->terminated = calloc(ROWS, 1);
        b->truncated = calloc(ROWS, 1);
        b->episode_start = calloc(ROWS, 1);
        b->has_final = calloc(ROWS, 1);
        b->act_i = calloc(ROWS * 2, sizeof(int32_t));
        b->act_f = calloc(ROWS * 2, sizeof(float));
        fill(b, 7);
        t->pool_mem[i].next = t->pool;
        t->pool = &t->pool_mem[i];
    }
    assert_int_equal(ro__obs_encoder_init(&t->enc, SHARDS * ROWS, 1, &t->lay), 0);
    ro__flow_init(&t->flow, SHARDS * ROWS, FOREVER_NS);
    t->flow.owned_rows = SHARDS * ROWS;
    t->flow.layout = &t->lay;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *t = *state;
    for (uint32_t i = 0; i < SHARDS; i++) {
        ro_step_batch_t *b = &t->b[i];
        for (int k = 0; k < 2; k++) {
            free(b->tensor[k]);
            free(b->final_tensor[k]);
        }
        free(b->mask);
        free(b->reward);
        free(b->terminated);
        free(b->truncated);
        free(b->episode_start);
        free(b->has_final);
        free(b->act_i);
        free(b->act_f);
    }
    ro__obs_encoder_free(&t->enc);
    ro__layout_free(&t->lay);
    free(t);
    return 0;
}

/* Both shards as one frame, through protobuf: what a learner decodes. */
static Rollout__V1__Observations *encode_decode(fixture_t *t)
{
    t->b[1].item.next = NULL;
    t->b[0].item.next = &t->b[1].item;
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__obs_encode(&t->enc, &t->b[0].item, 9, NULL, NULL, &o);
    size_t len = rollout__v1__observations__get_packed_size(&o);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    rollout__v1__observations__pack(&o, buf);
    Rollout__V1__Observations *d = rollout__v1__observations__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(d);
    return d;
}

static void test_observations_carry_every_row(void **state)
{
    fixture_t *t = *state;
    Rollout__V1__Observations *o = encode_decode(t);
    char err[256];
    const uint32_t nrows = SHARDS * ROWS;
    assert_int_equal(ro__check_observations_typed(o, &t->lay, nrows, err, sizeof err), 0);
    assert_int_equal(o->n_env, nrows);
    assert_int_equal(o->n_obs, 0);
    assert_int_equal(o->n_tensors, 2);
    assert_string_equal(o->tensors[0]->name, "view");
    assert_int_equal(o->tensors[0]->dtype, ROLLOUT__V1__DTYPE__DTYPE_UINT8);
    assert_int_equal(o->tensors[0]->n_shape, 3);
    assert_int_equal(o->tensors[0]->shape[0], nrows);
    assert_int_equal(o->tensors[1]->dtype, ROLLOUT__V1__DTYPE__DTYPE_INT32);
    for (uint32_t r = 0; r < nrows; r++) {
        assert_int_equal(o->env[r], r); /* rows: env x agents + agent */
        assert_int_equal(o->step[r], 7);
        assert_true(o->reward[r] == (float)r + 0.5f);
        assert_int_equal(o->tensors[0]->data.data[r * 9 + 4], r * 10 + 4);
        int32_t pos[2];
        memcpy(pos, o->tensors[1]->data.data + r * 8, 8);
        assert_int_equal(pos[0], (int32_t)r);
        assert_int_equal(pos[1], -(int32_t)r);
        assert_int_equal(o->mask.data[r * MASKW + 2], r % AGENTS == 1 ? 0 : 1);
    }
    /* Env 1 of each shard ended: rows 2, 3, 6, 7 carry final tensors. */
    assert_int_equal(o->n_final_index, 4);
    const uint32_t fin[4] = {2, 3, 6, 7};
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(o->final_index[i], fin[i]);
        assert_int_equal(o->final_tensors[0]->data.data[i * 9], 200 + fin[i]);
        int32_t pos[2];
        memcpy(pos, o->final_tensors[1]->data.data + i * 8, 8);
        assert_int_equal(pos[0], 1000 + (int32_t)fin[i]);
    }
    assert_int_equal(o->final_tensors[0]->shape[0], 4);
    /* Fewer rows than the node has: a row index past them is refused. */
    assert_int_equal(ro__check_observations_typed(o, &t->lay, nrows - 1, err, sizeof err),
                     RO_EPROTO);
    rollout__v1__observations__free_unpacked(o, NULL);
}

static void test_welcome_layout_reads_back(void **state)
{
    fixture_t *t = *state;
    ro_traj_layout_msg_t m;
    assert_int_equal(ro__traj_layout_msg_init(&m, &t->lay), 0);
    /* The hub gives box parts their bounds. */
    m.p[1].n_low = m.p[1].n_high = 2;
    m.p[1].low = (float *)lo;
    m.p[1].high = (float *)hi;
    ro_space_layout_t back;
    char err[256];
    assert_int_equal(ro__layout_from_wire(&back, &m.msg, err, sizeof err), 0);
    assert_int_equal(back.agents, AGENTS);
    assert_int_equal(back.obs_width, t->lay.obs_width);
    assert_int_equal(back.ndisc, 2);
    assert_int_equal(back.disc_n[0], 3);
    assert_int_equal(back.disc_n[1], 2);
    assert_int_equal(back.nbox, 2);
    assert_true(back.box_low[1] == -1.0f && back.box_high[1] == 1.0f);
    assert_int_equal(back.mask_width, MASKW);
    ro__layout_free(&back);
    /* Without the bounds, or with the wrong mask width, it is refused. */
    m.p[1].n_low = m.p[1].n_high = 0;
    assert_int_equal(ro__layout_from_wire(&back, &m.msg, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "parts[1]"));
    m.p[1].n_low = m.p[1].n_high = 2;
    m.msg.mask_width = 4;
    assert_int_equal(ro__layout_from_wire(&back, &m.msg, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "mask_width 4"));
    ro__traj_layout_msg_free(&m);
}

/* Sends both shards (the send fails: in flight as seq 1). */
static void send_all(fixture_t *t)
{
    for (uint32_t i = 0; i < SHARDS; i++)
        ro__batcher_push(&t->flow.pending, &t->b[i].item);
    uint32_t rows = 0;
    assert_int_equal(ro__flow_send(&t->flow, &t->pool, &t->enc, &t->conn, &rows), RO_EIO);
    assert_int_equal(rows, SHARDS * ROWS);
}

static void test_actions_checked_then_written(void **state)
{
    fixture_t *t = *state;
    send_all(t);
    enum { N = SHARDS * ROWS };
    int32_t disc[N * 2];
    float box[N * 2];
    for (uint32_t r = 0; r < N; r++) {
        disc[r * 2] = (int32_t)(r % 2 == 1 ? 1 : 2); /* value 2 only where allowed */
        disc[r * 2 + 1] = (int32_t)(r % 2);
        box[r * 2] = 0.5f;
        box[r * 2 + 1] = -1.0f;
    }
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 1;
    a.n_discrete = N * 2;
    a.discrete = disc;
    a.n_box = N * 2;
    a.box = box;
    char err[256];
    struct {
        int32_t *d;
        int32_t dv;
        float *f;
        float fv;
        const char *says;
    } bad[] = {
        {&disc[3 * 2], 2, NULL, 0, "row 3 entry 0 is 2, which its mask forbids"},
        {&disc[5 * 2 + 1], 2, NULL, 0, "row 5 entry 1 is 2, outside [0, 2)"},
        {&disc[0], -1, NULL, 0, "row 0 entry 0 is -1"},
        {NULL, 0, &box[6 * 2 + 1], NAN, "row 6 box value 1 is nan"},
        {NULL, 0, &box[1], 1.5f, "row 0 box value 1 is 1.5, outside [-1, 1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t dkeep = bad[i].d ? *bad[i].d : 0;
        float fkeep = bad[i].f ? *bad[i].f : 0;
        if (bad[i].d)
            *bad[i].d = bad[i].dv;
        if (bad[i].f)
            *bad[i].f = bad[i].fv;
        assert_null(ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err));
        assert_non_null(strstr(err, bad[i].says));
        if (bad[i].d)
            *bad[i].d = dkeep;
        if (bad[i].f)
            *bad[i].f = fkeep;
        assert_int_equal(t->b[1].act_i[0], 0); /* nothing written */
    }
    a.n_box = N * 2 - 1; /* a float short */
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err));
    assert_non_null(strstr(err, "expected 16 and 16"));
    a.n_box = N * 2;
    a.in_memory = true;
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err));
    a.in_memory = false;
    assert_int_equal(t->flow.inflight_rows, N);

    ro_batch_item_t *it = ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err);
    assert_non_null(it);
    assert_int_equal(t->flow.inflight_rows, 0);
    for (uint32_t i = 0; i < SHARDS; i++)
        for (uint32_t j = 0; j < ROWS; j++) {
            const uint32_t r = i * ROWS + j;
            assert_int_equal(t->b[i].act_i[j * 2], disc[r * 2]);
            assert_int_equal(t->b[i].act_i[j * 2 + 1], disc[r * 2 + 1]);
            assert_true(t->b[i].act_f[j * 2] == 0.5f && t->b[i].act_f[j * 2 + 1] == -1.0f);
        }
}

/* In shared memory: each shard's rows at first x agents + j of the
 * observation memory, the frame only ranges of rows; the actions read back
 * from the action memory at the same rows and checked against the masks. */
static void test_memory_rows(void **state)
{
    fixture_t *t = *state;
    ro_seed_mem_layout_t l;
    const uint32_t nrows = SHARDS * ROWS;
    ro__seed_mem_layout_typed(&l, nrows, &t->lay);
    uint8_t *obs = calloc(1, l.obs_bytes), *act = calloc(1, l.act_bytes);
    assert_true(obs && act);
    t->flow.mem_layout = &l;
    t->flow.obs_mem = obs;
    t->flow.act_mem = act;
    /* Shard 1 first: the ranges come out sorted and joined. */
    t->b[0].item.next = NULL;
    t->b[1].item.next = &t->b[0].item;
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    ro__obs_encode(&t->enc, &t->b[1].item, 3, &l, obs, &o);
    assert_true(o.in_memory);
    assert_int_equal(o.n_ranges, 2);
    assert_int_equal(o.ranges[0], 0);
    assert_int_equal(o.ranges[1], nrows);
    assert_int_equal(o.n_env, 0);
    char err[256];
    assert_int_equal(ro__check_observations_typed(&o, &t->lay, nrows, err, sizeof err), 0);
    for (uint32_t r = 0; r < nrows; r++) {
        assert_int_equal(obs[l.tensor_off[0] + r * 9 + 4], r * 10 + 4);
        int32_t pos[2];
        memcpy(pos, obs + l.tensor_off[1] + r * 8, 8);
        assert_int_equal(pos[1], -(int32_t)r);
        assert_int_equal(obs[l.mask_off + r * MASKW + 2], r % AGENTS == 1 ? 0 : 1);
        const uint8_t fl = obs[l.flags_off + r];
        const bool fin = (r / AGENTS) % ENVS == 1;
        assert_int_equal((fl & RO_SEEDMEM_HAS_FINAL) != 0, fin);
        if (fin)
            assert_int_equal(obs[l.final_tensor_off[0] + r * 9], 200 + r);
    }
    send_all(t); /* seq 1, in memory */
    int32_t *disc = (int32_t *)(void *)(act + l.act_off);
    float *box = (float *)(void *)(act + l.act_box_off);
    for (uint32_t r = 0; r < nrows; r++) {
        disc[r * 2] = 2; /* masked for every second agent */
        disc[r * 2 + 1] = 1;
        box[r * 2] = box[r * 2 + 1] = 0.25f;
    }
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.seq = 1;
    a.in_memory = true;
    assert_null(ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err));
    assert_non_null(strstr(err, "row 1 entry 0 is 2, which its mask forbids"));
    for (uint32_t r = 1; r < nrows; r += 2)
        disc[r * 2] = 0;
    assert_non_null(ro__flow_answer(&t->flow, &t->pool, &a, NULL, err, sizeof err));
    assert_int_equal(t->b[1].act_i[0], 2);
    assert_int_equal(t->b[1].act_i[2], 0);
    assert_int_equal(t->b[1].act_i[3], 1);
    assert_true(t->b[1].act_f[3] == 0.25f);
    free(obs);
    free(act);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_observations_carry_every_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_welcome_layout_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_actions_checked_then_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
