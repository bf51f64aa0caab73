/*
 * The learner's checks of SEED frames of an env ABI 2 env
 * (wire/typed_checks.c): a good Observations frame of 2 rows (a uint8 [2, 2]
 * and a float32 [3] tensor, a Discrete(3) masked action) passes; each way
 * of getting it wrong (a tensor's name, dtype, shape or bytes, a final
 * tensor, the mask's length, a row index, obs values beside the tensors,
 * columns beside an in-memory frame's ranges) is refused naming the field;
 * the shared memory's typed columns are laid out and checked. A welcome's
 * layout with a bad part kind, nvec, or too many tensors is refused;
 * actions are checked entry by entry against the mask.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/typed_checks.h"

#define N 2

typedef struct frame {
    Rollout__V1__Observations o;
    Rollout__V1__NamedTensor t[2], ft[2];
    Rollout__V1__NamedTensor *tp[2], *ftp[2];
    uint32_t shape[2][3], fshape[2][3];
    uint32_t env[N], final_index[1];
    uint64_t step[N];
    float reward[N];
    protobuf_c_boolean flags[3][N];
    uint8_t view[N * 4], fview[4], mask[N * 3];
    float vec[N * 3], fvec[3];
} frame_t;

static void make_layout(ro_space_layout_t *lay)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_obs = 2;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {2, 2}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "vec", .dtype = RO_DTYPE_FLOAT32, .ndim = 1, .shape = {3}};
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 3};
    sp.action_mask = 1;
    char err[256];
    assert_int_equal(ro__layout_from_spaces(lay, &sp, "t", err, sizeof err), 0);
}

static void tensor(Rollout__V1__NamedTensor *t, uint32_t *shape, const char *name,
                   Rollout__V1__DType dt, uint32_t rows, const uint32_t *dims, size_t ndims,
                   void *data, size_t bytes)
{
    rollout__v1__named_tensor__init(t);
    t->name = (char *)name;
    t->dtype = dt;
    shape[0] = rows;
    memcpy(shape + 1, dims, ndims * sizeof *dims);
    t->shape = shape;
    t->n_shape = ndims + 1;
    t->data.data = data;
    t->data.len = bytes;
}

static void make_frame(frame_t *f)
{
    memset(f, 0, sizeof *f);
    Rollout__V1__Observations *o = &f->o;
    rollout__v1__observations__init(o);
    o->seq = 4;
    o->n_env = o->n_step = o->n_reward = o->n_terminated = o->n_truncated = o->n_episode_start = N;
    f->env[0] = 0;
    f->env[1] = 3;
    o->env = f->env;
    o->step = f->step;
    o->reward = f->reward;
    o->terminated = f->flags[0];
    o->truncated = f->flags[1];
    o->episode_start = f->flags[2];
    const uint32_t d0[2] = {2, 2}, d1[1] = {3};
    const Rollout__V1__DType u8 = ROLLOUT__V1__DTYPE__DTYPE_UINT8,
                             f32 = ROLLOUT__V1__DTYPE__DTYPE_FLOAT32;
    tensor(&f->t[0], f->shape[0], "view", u8, N, d0, 2, f->view, sizeof f->view);
    tensor(&f->t[1], f->shape[1], "vec", f32, N, d1, 1, f->vec, sizeof f->vec);
    tensor(&f->ft[0], f->fshape[0], "view", u8, 1, d0, 2, f->fview, sizeof f->fview);
    tensor(&f->ft[1], f->fshape[1], "vec", f32, 1, d1, 1, f->fvec, sizeof f->fvec);
    for (int k = 0; k < 2; k++) {
        f->tp[k] = &f->t[k];
        f->ftp[k] = &f->ft[k];
    }
    o->tensors = f->tp;
    o->n_tensors = 2;
    o->final_tensors = f->ftp;
    o->n_final_tensors = 2;
    f->final_index[0] = 1;
    o->final_index = f->final_index;
    o->n_final_index = 1;
    o->mask.data = f->mask;
    o->mask.len = sizeof f->mask;
}

static void refused(const frame_t *f, const ro_space_layout_t *lay, const char *says)
{
    char err[256] = "";
    assert_int_equal(ro__check_observations_typed(&f->o, lay, 4, err, sizeof err), RO_EPROTO);
    if (!strstr(err, says))
        fail_msg("'%s' does not say '%s'", err, says);
}

static void test_observations(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    make_layout(&lay);
    frame_t f;
    char err[256];
    make_frame(&f);
    assert_int_equal(ro__check_observations_typed(&f.o, &lay, 4, err, sizeof err), 0);

    f.t[0].name = "other";
    refused(&f, &lay, "tensors[0] is not 'view' (uint8, [2, ...], 8 bytes)");
    make_frame(&f);
    f.t[1].dtype = ROLLOUT__V1__DTYPE__DTYPE_INT32;
    refused(&f, &lay, "tensors[1] is not 'vec'");
    make_frame(&f);
    f.shape[0][2] = 3;
    refused(&f, &lay, "tensors[0]");
    make_frame(&f);
    f.t[1].data.len -= 1;
    refused(&f, &lay, "tensors[1]");
    make_frame(&f);
    f.t[0].offset = 8;
    refused(&f, &lay, "tensors[0]");
    make_frame(&f);
    f.fshape[1][0] = 2;
    refused(&f, &lay, "final_tensors[1]");
    make_frame(&f);
    f.o.n_final_tensors = 1;
    refused(&f, &lay, "1 final_tensors, expected 2");
    make_frame(&f);
    f.o.mask.len = 5;
    refused(&f, &lay, "inconsistent field lengths for 2 rows");
    make_frame(&f);
    f.env[1] = 4;
    refused(&f, &lay, "row 4 outside [0, 4)");
    make_frame(&f);
    f.final_index[0] = 2;
    refused(&f, &lay, "final_index 2 outside the batch");
    make_frame(&f);
    f.o.n_obs = 2 * 7;
    f.o.obs = f.vec;
    refused(&f, &lay, "inconsistent field lengths");
    make_frame(&f);
    f.o.in_memory = true;
    refused(&f, &lay, "in memory, yet with columns in the frame");
    /* In memory: row ranges only. */
    Rollout__V1__Observations m = ROLLOUT__V1__OBSERVATIONS__INIT;
    uint32_t ranges[4] = {0, 2, 3, 1};
    m.in_memory = true;
    m.ranges = ranges;
    m.n_ranges = 4;
    assert_int_equal(ro__check_observations_typed(&m, &lay, 4, err, sizeof err), 0);
    ranges[3] = 2; /* rows 3 and 4 of 4 */
    assert_int_equal(ro__check_observations_typed(&m, &lay, 4, err, sizeof err), RO_EPROTO);
    m.in_memory = false;
    assert_int_equal(ro__check_observations_typed(&m, &lay, 4, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "ranges, but not in memory"));
    ro__layout_free(&lay);
}

static void test_shared_memory(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    make_layout(&lay);
    ro_seed_mem_layout_t l, got;
    ro__seed_mem_layout_typed(&l, 6, &lay);
    assert_int_equal(l.num_envs, 6);
    assert_int_equal(l.ntensors, 2);
    assert_true(l.final_tensor_off[0] >= l.tensor_off[0] + 6 * 4);
    assert_true(l.mask_off >= l.final_tensor_off[1] + 6 * 12);
    assert_true(l.flags_off + 6 <= l.obs_bytes);
    assert_true(l.act_box_off >= 6 * 4);
    Rollout__V1__SeedMemory m = ROLLOUT__V1__SEED_MEMORY__INIT;
    ro_seed_mem_msg_t s;
    ro__seed_mem_to_wire_typed(&l, &lay, 3, 4, &s, &m);
    char err[256];
    assert_int_equal(ro__seed_mem_check_typed(&m, 6, &lay, &got, err, sizeof err), 0);
    assert_int_equal(got.tensor_off[1], l.tensor_off[1]);
    assert_int_equal(got.final_tensor_off[0], l.final_tensor_off[0]);
    assert_int_equal(got.mask_off, l.mask_off);
    /* More rows than the memory holds, a column past its end, a renamed
     * tensor, an oversized memory: refused, naming what. */
    assert_int_equal(ro__seed_mem_check_typed(&m, 7, &lay, &got, err, sizeof err), RO_EPROTO);
    s.t[1][1].offset = m.obs_bytes - 4;
    assert_int_equal(ro__seed_mem_check_typed(&m, 6, &lay, &got, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "final_tensors[1] column"));
    s.t[1][1].offset = l.final_tensor_off[1];
    s.t[0][0].name = "other";
    assert_int_equal(ro__seed_mem_check_typed(&m, 6, &lay, &got, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "tensors[0] is not 'view'"));
    s.t[0][0].name = "view";
    m.act_offset = m.act_bytes - 8; /* 6 entries need 24 bytes */
    assert_int_equal(ro__seed_mem_check_typed(&m, 6, &lay, &got, err, sizeof err), RO_EPROTO);
    m.act_offset = l.act_off;
    m.obs_bytes += 2 * 4096;
    assert_int_equal(ro__seed_mem_check_typed(&m, 6, &lay, &got, err, sizeof err), RO_EPROTO);
    ro__layout_free(&lay);
}

static void test_actions(void **state)
{
    (void)state;
    ro_space_layout_t lay;
    make_layout(&lay);
    char err[256];
    const uint8_t mask[2 * 3] = {1, 0, 1, 0, 0, 1};
    const int32_t good[2] = {2, 2}, masked[2] = {0, 0}, out[2] = {3, 2};
    assert_int_equal(ro__check_action_rows_typed(good, NULL, mask, 2, &lay, 1, 0, err, sizeof err),
                     0);
    assert_int_equal(
        ro__check_action_rows_typed(masked, NULL, mask, 2, &lay, 1, 10, err, sizeof err),
        RO_ERANGE);
    assert_non_null(strstr(err, "row 11 entry 0 is 0, which its mask forbids"));
    assert_int_equal(ro__check_action_rows_typed(out, NULL, NULL, 2, &lay, 1, 0, err, sizeof err),
                     RO_ERANGE);
    assert_non_null(strstr(err, "row 0 entry 0 is 3, outside [0, 3)"));
    Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
    a.n_discrete = 2;
    assert_int_equal(ro__check_actions_typed(&a, 2, &lay, err, sizeof err), 0);
    assert_int_equal(ro__check_actions_typed(&a, 3, &lay, err, sizeof err), RO_EPROTO);
    a.n_box = 1;
    assert_int_equal(ro__check_actions_typed(&a, 2, &lay, err, sizeof err), RO_EPROTO);
    ro__layout_free(&lay);
}

static void test_welcome_layout(void **state)
{
    (void)state;
    Rollout__V1__TrajectoryLayout l = ROLLOUT__V1__TRAJECTORY_LAYOUT__INIT;
    Rollout__V1__NamedTensor t = ROLLOUT__V1__NAMED_TENSOR__INIT, *tp[9];
    Rollout__V1__TrajectoryActionPart p = ROLLOUT__V1__TRAJECTORY_ACTION_PART__INIT, *pp = &p;
    uint32_t shape[1] = {4}, nv[2] = {2, 3};
    t.name = "obs";
    t.dtype = ROLLOUT__V1__DTYPE__DTYPE_FLOAT32;
    t.shape = shape;
    t.n_shape = 1;
    for (int i = 0; i < 9; i++)
        tp[i] = &t;
    l.agents = 1;
    l.tensors = tp;
    l.n_tensors = 1;
    l.parts = &pp;
    l.n_parts = 1;
    p.kind = "multi_discrete";
    p.n = 2;
    p.nvec = nv;
    p.n_nvec = 2;
    ro_space_layout_t lay;
    char err[256];
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), 0);
    assert_int_equal(lay.ndisc, 2);
    assert_int_equal(lay.disc_n[1], 3);
    ro__layout_free(&lay);
    p.n_nvec = 1;
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "parts[0]: 1 nvec values for n = 2"));
    p.n_nvec = 2;
    p.kind = "tuple";
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "kind 'tuple'"));
    p.kind = "discrete";
    p.n = 0;
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), RO_EPROTO);
    p.n = 3;
    l.n_tensors = 9;
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "9 tensors"));
    l.n_tensors = 1;
    l.agents = 0;
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), RO_EPROTO);
    l.agents = 1;
    assert_int_equal(ro__layout_from_wire(&lay, &l, err, sizeof err), 0);
    ro__layout_free(&lay);
    assert_int_equal(ro__layout_from_wire(&lay, NULL, err, sizeof err), RO_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_observations),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_welcome_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
