/*
 * Env ABI 2 in trajectory files (src/trajectory/abi2_format.c): the header's
 * layout built from a node's layout and checked back; version 2 records
 * (agents as rows, typed tensors, composite actions, the mask) encoded by
 * the one-pass encoder exactly as protobuf-c would, read back whole by the
 * reader, and refused field by field when inconsistent; format versions (1
 * and 2 read, a newer one refused by number); a re-created env's layout
 * matched against the recorded one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "spaces/layout.h"
#include "traj_fixture.h"
#include "typed_layout_fixture.h"
#include "trajectory/abi2_format.h"

#define A 2          /* agents */
#define E 2          /* envs per batch */
#define ROWS (A * E) /* rows per batch */

/* A version 2 header and the layout it carries. */
typedef struct v2_file {
    fixture_file_t f;
    ro_space_layout_t lay;
    ro_traj_layout_msg_t lm;
} v2_file_t;

static void make_v2(v2_file_t *v)
{
    make_header(&v->f);
    fixture_typed_layout(&v->lay, A);
    assert_int_equal(ro__traj_layout_msg_init(&v->lm, &v->lay), 0);
    v->f.hdr.format_version = RO_TRAJ_FORMAT_VERSION;
    v->f.hdr.layout = &v->lm.msg;
    v->f.hdr.action_kind = "composite";
    v->f.hdr.action_dim = 5;
    v->f.hdr.num_envs = 8;
    v->f.hdr.max_record_bytes = 8192;
}

static void free_v2(v2_file_t *v)
{
    ro__traj_layout_msg_free(&v->lm);
    ro__layout_free(&v->lay);
}

/* One record of E env steps, A rows each, every value derived from i. */
typedef struct rows_data {
    uint32_t env[ROWS], agent[ROWS], step[ROWS], flags[ROWS];
    uint64_t episode[ROWS];
    float reward[ROWS], box[ROWS * 2];
    int32_t disc[ROWS * 3];
    uint8_t img[ROWS * 6], mask[ROWS * 9];
    int32_t pos[ROWS * 2];
    uint32_t shape0[3], shape1[2];
    Rollout__V1__NamedTensor t[2];
    Rollout__V1__NamedTensor *tp[2];
    Rollout__V1__TransitionBatch b;
} rows_data_t;

static void make_rows(rows_data_t *d, uint32_t i)
{
    memset(d, 0, sizeof *d);
    for (uint32_t k = 0; k < ROWS; k++) {
        d->env[k] = (i + k / A) % 8;
        d->agent[k] = k % A;
        d->episode[k] = i / 3;
        d->step[k] = i + 1;
        d->flags[k] = k % A ? RO_TRAJ_TRUNCATED : RO_TRAJ_TERMINATED;
        d->reward[k] = (float)i - 0.5f * (float)k;
        d->box[2 * k] = -(float)k;
        d->box[2 * k + 1] = 1e-3f * (float)i;
        d->disc[3 * k] = (int32_t)(k % 3);
        d->disc[3 * k + 1] = (int32_t)(i % 2);
        d->disc[3 * k + 2] = (int32_t)(k % 4);
        d->pos[2 * k] = -(int32_t)i;
        d->pos[2 * k + 1] = (int32_t)(k * 1000000);
    }
    for (uint32_t j = 0; j < sizeof d->img; j++)
        d->img[j] = (uint8_t)(i * 7 + j);
    for (uint32_t j = 0; j < sizeof d->mask; j++)
        d->mask[j] = (uint8_t)((i + j) % 2);
    Rollout__V1__TransitionBatch *b = &d->b;
    rollout__v1__transition_batch__init(b);
    b->record = i + 1;
    b->n_env = b->n_agent = b->n_episode = b->n_step = b->n_flags = b->n_reward = ROWS;
    b->env = d->env;
    b->agent = d->agent;
    b->episode = d->episode;
    b->step = d->step;
    b->flags = d->flags;
    b->reward = d->reward;
    b->action = d->disc;
    b->n_action = ROWS * 3;
    b->action_box = d->box;
    b->n_action_box = ROWS * 2;
    b->mask.data = d->mask;
    b->mask.len = sizeof d->mask;
    uint32_t s0[3] = {ROWS, 3, 2}, s1[2] = {ROWS, 2};
    memcpy(d->shape0, s0, sizeof s0);
    memcpy(d->shape1, s1, sizeof s1);
    for (int k = 0; k < 2; k++) {
        rollout__v1__named_tensor__init(&d->t[k]);
        d->tp[k] = &d->t[k];
    }
    d->t[0].name = "img";
    d->t[0].dtype = ROLLOUT__V1__DTYPE__DTYPE_UINT8;
    d->t[0].shape = d->shape0;
    d->t[0].n_shape = 3;
    d->t[0].data.data = d->img;
    d->t[0].data.len = sizeof d->img;
    d->t[1].name = "pos";
    d->t[1].dtype = ROLLOUT__V1__DTYPE__DTYPE_INT32;
    d->t[1].shape = d->shape1;
    d->t[1].n_shape = 2;
    d->t[1].data.data = (uint8_t *)d->pos;
    d->t[1].data.len = sizeof d->pos;
    b->tensors = d->tp;
    b->n_tensors = 2;
}

static void test_layout_header_roundtrip(void **state)
{
    (void)state;
    v2_file_t v;
    make_v2(&v);
    ro_traj_rows_t rows;
    char why[256] = "";
    assert_int_equal(ro__traj_layout_rows(&v.lm.msg, &rows, why, sizeof why), 0);
    assert_int_equal(rows.agents, A);
    assert_int_equal(rows.ntensors, 2);
    assert_int_equal(rows.row_bytes[0], 6);
    assert_int_equal(rows.row_bytes[1], 8);
    assert_int_equal(rows.ndisc, 3);
    assert_int_equal(rows.nbox, 2);
    assert_int_equal(rows.mask_width, 3 + 2 + 4);
    assert_string_equal(v.lm.msg.parts[0]->kind, "discrete");
    assert_int_equal(v.lm.msg.parts[0]->n, 3);
    assert_string_equal(v.lm.msg.parts[1]->kind, "multi_discrete");
    assert_int_equal(v.lm.msg.parts[1]->nvec[1], 4);
    assert_string_equal(v.lm.msg.parts[2]->kind, "box");
    /* Packed and unpacked, the header is what it was, and valid. */
    uint8_t buf[4096];
    size_t n = protobuf_c_message_pack(&v.f.hdr.base, buf);
    Rollout__V1__TrajectoryHeader *h = rollout__v1__trajectory_header__unpack(NULL, n, buf);
    assert_non_null(h);
    assert_int_equal(ro__traj_validate_header(h, why, sizeof why), 0);
    /* The same env matches; one with 3 agents does not, and says so. */
    assert_int_equal(ro__traj_layout_matches(h->layout, &v.lay, why, sizeof why), 0);
    ro_space_layout_t other;
    fixture_typed_layout(&other, 3);
    assert_int_equal(ro__traj_layout_matches(h->layout, &other, why, sizeof why), RO_EINVAL);
    assert_non_null(strstr(why, "3 agents, the recording has 2"));
    ro__layout_free(&other);
    rollout__v1__trajectory_header__free_unpacked(h, NULL);
    free_v2(&v);
}

/* Format versions: 1, 2 and 3 (either with snapshots) read, each with its
 * own fields; newer refused. */
static void test_versions(void **state)
{
    (void)state;
    char err[256];
    v2_file_t v;
    make_v2(&v);
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), 0);
    v.f.hdr.format_version = 4;
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
    assert_string_equal(err, "unsupported trajectory format version 4 (this build reads versions "
                             "1 to 3; a newer rollout-replay reads it)");
    v.f.hdr.format_version = RO_TRAJ_FORMAT_SNAPSHOTS; /* snapshots say how often */
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
    assert_string_equal(err, "invalid trajectory header: a version 3 header without "
                             "snapshot_every");
    v.f.hdr.snapshot_every = 100;
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), 0);
    v.f.hdr.format_version = RO_TRAJ_FORMAT_VERSION;
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
    assert_string_equal(err, "invalid trajectory header: snapshot_every in a header of version "
                             "1 or 2");
    v.f.hdr.snapshot_every = 0;
    v.f.hdr.format_version = RO_TRAJ_FORMAT_ABI1; /* with a layout */
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "a version 1 header with an env ABI 2 layout"));
    v.f.hdr.format_version = RO_TRAJ_FORMAT_VERSION;
    v.f.hdr.layout = NULL;
    assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "without its layout"));
    fixture_file_t f1;
    make_header(&f1);
    assert_int_equal(ro__traj_validate_header(&f1.hdr, err, sizeof err), 0);
    f1.hdr.format_version = RO_TRAJ_FORMAT_SNAPSHOTS; /* ABI 1 with snapshots */
    f1.hdr.snapshot_every = 1;
    assert_int_equal(ro__traj_validate_header(&f1.hdr, err, sizeof err), 0);
    free_v2(&v);
}

/* A damaged layout is refused naming the field. */
static void test_bad_layouts(void **state)
{
    (void)state;
    char why[256];
    ro_traj_rows_t rows;
    static const char *const words[] = {"agents 0",     "dtype 9",    "repeats a name",
                                        "nvec[1] = 0",  "mask_width", "dims or an extent",
                                        "no known kind"};
    for (int c = 0; c < 7; c++) {
        v2_file_t v;
        make_v2(&v);
        Rollout__V1__TrajectoryLayout *l = &v.lm.msg;
        uint32_t zero_nvec[2] = {2, 0};
        if (c == 0)
            l->agents = 0;
        else if (c == 1)
            l->tensors[1]->dtype = 9;
        else if (c == 2)
            l->tensors[1]->name = "img";
        else if (c == 3)
            l->parts[1]->nvec = zero_nvec;
        else if (c == 4)
            l->mask_width = 4;
        else if (c == 5)
            l->tensors[0]->n_shape = 5;
        else
            l->parts[2]->kind = "torus";
        assert_int_equal(ro__traj_layout_rows(l, &rows, why, sizeof why), RO_EBADMSG);
        assert_non_null(strstr(why, words[c]));
        char err[320];
        assert_int_equal(ro__traj_validate_header(&v.f.hdr, err, sizeof err), RO_EBADMSG);
        assert_non_null(strstr(err, "invalid trajectory header: layout"));
        free_v2(&v);
    }
}

/* The one-pass encoder writes version 2 rows as protobuf-c does. */
static void test_encoder_matches_protobuf_c(void **state)
{
    (void)state;
    uint8_t a[8192], b2[8192];
    for (uint32_t i = 0; i < 50; i++) {
        rows_data_t d;
        make_rows(&d, i * 40503u);
        if (i % 7 == 0)
            d.b.mask.len = 0;
        if (i % 5 == 0)
            d.t[1].name = ""; /* omitted, as any empty string */
        size_t n = protobuf_c_message_get_packed_size(&d.b.base);
        assert_int_equal(ro__traj_batch_packed_size(&d.b), n);
        assert_int_equal(protobuf_c_message_pack(&d.b.base, a), n);
        assert_int_equal(ro__traj_batch_pack(&d.b, b2), n);
        assert_memory_equal(a, b2, n);
    }
}

/* A file of version 2 records written by the writer reads back whole. */
static void test_write_and_read_back(void **state)
{
    (void)state;
    v2_file_t v;
    make_v2(&v);
    char path[] = "/tmp/ro_test_abi2_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ro_traj_writer_t w;
    char err[ERRLEN];
    assert_int_equal(ro__traj_writer_open(&w, path, &v.f.hdr, 0, err, sizeof err), 0);
    for (uint32_t i = 0; i < 20; i++) {
        rows_data_t d;
        make_rows(&d, i);
        assert_int_equal(ro__traj_writer_append(&w, &d.b, err, sizeof err), 0);
    }
    assert_int_equal(ro__traj_writer_close(&w, err, sizeof err), 0);
    size_t len;
    uint8_t *data = slurp(path, &len);
    unlink(path);
    ro_traj_reader_t r;
    assert_int_equal(ro__traj_reader_open(&r, data, len, true, err, sizeof err), 0);
    assert_non_null(r.hdr->layout);
    assert_int_equal(r.hdr->layout->agents, A);
    uint32_t got = 0;
    Rollout__V1__TransitionBatch *b;
    while (ro__traj_reader_next(&r, &b) == RO_TRAJ_BATCH) {
        rows_data_t d;
        make_rows(&d, got);
        assert_int_equal(b->n_env, ROWS);
        assert_memory_equal(b->agent, d.agent, sizeof d.agent);
        assert_memory_equal(b->action, d.disc, sizeof d.disc);
        assert_memory_equal(b->action_box, d.box, sizeof d.box);
        assert_int_equal(b->mask.len, sizeof d.mask);
        assert_memory_equal(b->mask.data, d.mask, sizeof d.mask);
        assert_string_equal(b->tensors[1]->name, "pos");
        assert_memory_equal(b->tensors[0]->data.data, d.img, sizeof d.img);
        assert_memory_equal(b->tensors[1]->data.data, d.pos, sizeof d.pos);
        ro__traj_batch_free(&r, b);
        got++;
    }
    assert_int_equal(got, 20);
    ro__traj_reader_close(&r);
    free(data);
    free_v2(&v);
}

/* Version 2 records whose CRC is right but whose rows are not. */
static void test_invalid_rows(void **state)
{
    (void)state;
    v2_file_t v;
    make_v2(&v);
    static const char *const words[] = {
        "agent values",       "not agents 0..1", "tensors; the layout", "is not the layout's",
        "a shape other than", "holds 23 bytes",  "mask bytes",          "discrete action",
        "box action",         "float obs",       "whole env steps",     "not agents 0..1",
    };
    for (int c = 0; c < 12; c++) {
        rows_data_t d;
        make_rows(&d, 3);
        float obs[ROWS] = {0};
        if (c == 0)
            d.b.n_agent = ROWS - 1;
        else if (c == 1)
            d.agent[1] = 0;
        else if (c == 2)
            d.b.n_tensors = 1;
        else if (c == 3)
            d.t[1].dtype = ROLLOUT__V1__DTYPE__DTYPE_FLOAT32;
        else if (c == 4)
            d.shape0[2] = 3;
        else if (c == 5)
            d.t[0].data.len = 23;
        else if (c == 6)
            d.b.mask.len--;
        else if (c == 7)
            d.b.n_action--;
        else if (c == 8)
            d.b.n_action_box = 0;
        else if (c == 9)
            d.b.obs = obs, d.b.n_obs = ROWS;
        else if (c == 10) { /* 3 rows: not whole steps of 2 agents */
            d.b.n_env = d.b.n_agent = d.b.n_episode = d.b.n_step = d.b.n_flags = d.b.n_reward = 3;
            d.b.n_action = 9, d.b.n_action_box = 6, d.b.mask.len = 27;
            d.shape0[0] = d.shape1[0] = 3, d.t[0].data.len = 18, d.t[1].data.len = 24;
        } else
            d.step[1] = 99; /* agent 1 of another step */
        char why[256] = "";
        assert_int_equal(ro__traj_validate_batch(&v.f.hdr, &d.b, why, sizeof why), RO_EBADMSG);
        assert_non_null(strstr(why, words[c]));
    }
    /* ABI 2 columns in a version 1 record. */
    fixture_file_t f1;
    make_header(&f1);
    batch_data_t d1;
    make_batch(&d1, 1);
    uint32_t agent[ENVS] = {0};
    d1.b.agent = agent;
    d1.b.n_agent = ENVS;
    char why[256];
    assert_int_equal(ro__traj_validate_batch(&f1.hdr, &d1.b, why, sizeof why), RO_EBADMSG);
    assert_string_equal(why, "env ABI 2 columns in a version 1 record");
    free_v2(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_header_roundtrip),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_bad_layouts),
        cmocka_unit_test(test_encoder_matches_protobuf_c),
        cmocka_unit_test(test_write_and_read_back),
        cmocka_unit_test(test_invalid_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
