/*
 * Env ABI 2 segments against a welcome's layout (src/wire/segment_view.c,
 * docs/protocol.md "Stream mode"). Frames are packed with protobuf-c: a
 * good segment of a two-agent env (a uint8 [3, 3] tensor "view", an int32
 * [2] tensor "pos", one Discrete(5) entry with its mask, one box float)
 * passes, carried in the frame and as references into shared memory; then
 * each way a node could break the layout is refused with one line that
 * names the tensor: a missing tensor, another dtype, another shape, bytes
 * that do not match the shape, final observations that disagree with
 * final_index, rows that are not whole envs, envs past the node's, a final
 * index outside the segment, a tensor outside the mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rollout.pb-c.h"
#include "runtime/error.h"
#include "wire/segment_view.h"

#define T_ 2
#define ENVS 2
#define AG 2
#define R_ (ENVS * AG) /* rows */
#define K_ 2           /* final observations */
#define MW 5           /* mask bytes per row */
#define MAXT 24
#define FRAME_MAX 16384

static ro_segment_rules_t rules_abi2(void)
{
    ro_segment_rules_t r;
    memset(&r, 0, sizeof r);
    r.unroll = 4;
    r.num_envs = 6;
    r.abi2 = true;
    r.agents = AG;
    r.nobs = 2;
    snprintf(r.obs[0].name, sizeof r.obs[0].name, "view");
    r.obs[0].dtype = 3; /* uint8 */
    r.obs[0].ndim = 2;
    r.obs[0].shape[0] = r.obs[0].shape[1] = 3;
    snprintf(r.obs[1].name, sizeof r.obs[1].name, "pos");
    r.obs[1].dtype = 2; /* int32 */
    r.obs[1].ndim = 1;
    r.obs[1].shape[0] = 2;
    r.ndisc = 1;
    r.nbox = 1;
    r.mask_width = MW;
    return r;
}

typedef struct seg {
    Rollout__V1__Frame frame;
    Rollout__V1__Segment seg;
    Rollout__V1__NamedTensor nt[MAXT];
    Rollout__V1__NamedTensor *ptrs[MAXT];
    uint32_t shapes[MAXT][6];
    char names[MAXT][48];
    uint8_t data[MAXT][1024]; /* each tensor's bytes (zeros, but final_index) */
    uint8_t buf[FRAME_MAX];
    size_t len;
} seg_t;

/* add: tensor name of dtype (element size elem) and shape; its bytes are
 * product(shape) * elem, all zero. Returns its index. */
static int add(seg_t *s, const char *name, uint32_t dtype, size_t elem, uint32_t ndim,
               const uint32_t *shape)
{
    int i = (int)s->seg.n_tensors++;
    assert_true(i < MAXT);
    Rollout__V1__NamedTensor *t = &s->nt[i];
    *t = (Rollout__V1__NamedTensor)ROLLOUT__V1__NAMED_TENSOR__INIT;
    snprintf(s->names[i], sizeof s->names[i], "%s", name);
    t->name = s->names[i];
    t->dtype = (Rollout__V1__DType)dtype;
    size_t bytes = elem;
    for (uint32_t d = 0; d < ndim; d++) {
        s->shapes[i][d] = shape[d];
        bytes *= shape[d];
    }
    assert_true(bytes <= sizeof s->data[i]);
    t->n_shape = ndim;
    t->shape = s->shapes[i];
    t->data.data = s->data[i];
    t->data.len = bytes;
    s->ptrs[i] = t;
    return i;
}

/* An env ABI 2 segment as docs/protocol.md lists it: seq 5, envs 2..3 (4
 * rows), 2 steps, final observations at rows 1 and 6 (flat t * n + j). */
static void seg_good(seg_t *s)
{
    memset(s, 0, sizeof *s);
    rollout__v1__segment__init(&s->seg);
    s->seg.seq = 5;
    s->seg.shard = 1;
    s->seg.first_env = 2;
    s->seg.t = T_;
    s->seg.n = R_;
    s->seg.policy_version_min = 0;
    s->seg.policy_version_max = 0;
    const uint32_t tnv[4] = {T_, R_, 3, 3}, tnp[3] = {T_, R_, 2}, nv[3] = {R_, 3, 3};
    const uint32_t np[2] = {R_, 2}, kv[3] = {K_, 3, 3}, kp[2] = {K_, 2};
    const uint32_t tn1[3] = {T_, R_, 1}, tnm[3] = {T_, R_, MW}, tn[2] = {T_, R_}, tv[1] = {T_};
    const uint32_t k[1] = {K_};
    add(s, "obs/view", 3, 1, 4, tnv);
    add(s, "obs/pos", 2, 4, 3, tnp);
    add(s, "action", 2, 4, 3, tn1);
    add(s, "action_box", 1, 4, 3, tn1);
    add(s, "mask", 3, 1, 3, tnm);
    add(s, "logp", 1, 4, 2, tn);
    add(s, "reward", 1, 4, 2, tn);
    add(s, "terminated", 3, 1, 2, tn);
    add(s, "truncated", 3, 1, 2, tn);
    add(s, "is_first", 3, 1, 2, tn);
    add(s, "episode", 4, 4, 2, tn);
    add(s, "step", 4, 4, 2, tn);
    add(s, "policy_version", 5, 8, 1, tv);
    add(s, "next_obs/view", 3, 1, 3, nv);
    add(s, "next_obs/pos", 2, 4, 2, np);
    int fi = add(s, "final_index", 2, 4, 1, k);
    const int32_t idx[K_] = {1, 6};
    memcpy(s->data[fi], idx, sizeof idx);
    add(s, "final_obs/view", 3, 1, 3, kv);
    add(s, "final_obs/pos", 2, 4, 2, kp);
}

static int tensor_index(const seg_t *s, const char *name)
{
    for (size_t i = 0; i < s->seg.n_tensors; i++)
        if (strcmp(s->names[i], name) == 0)
            return (int)i;
    fail_msg("no tensor %s", name);
    return -1;
}

static void pack(seg_t *s)
{
    s->seg.tensors = s->ptrs;
    s->frame = (Rollout__V1__Frame)ROLLOUT__V1__FRAME__INIT;
    s->frame.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT;
    s->frame.segment = &s->seg;
    s->len = rollout__v1__frame__get_packed_size(&s->frame);
    assert_true(s->len <= FRAME_MAX);
    rollout__v1__frame__pack(&s->frame, s->buf);
}

/* Pack s, read it, and check it against the rules: 0, or the message. */
static int check(seg_t *s, const ro_segment_rules_t *r, char *err, size_t errlen)
{
    pack(s);
    ro_segment_view_t v;
    assert_int_equal(ro__segment_view_parse(s->buf, s->len, &v, err, errlen), 1);
    int rc = ro__segment_view_check(&v, r, err, errlen);
    if (rc) {
        assert_int_equal(rc, RO_EPROTO);
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

static void test_good_segment(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[256];
    ro_segment_rules_t r = rules_abi2();
    seg_good(s);
    assert_int_equal(check(s, &r, err, sizeof err), 0);
    /* No box part, no mask: those tensors are not required. */
    r.nbox = r.mask_width = 0;
    assert_int_equal(check(s, &r, err, sizeof err), 0);
    /* The same segment read with ABI 1 rules is refused (no "obs"). */
    ro_segment_rules_t r1 = {
        .unroll = 4, .num_envs = 6, .obs_dim = 2, .act_dim = 1, .discrete = true};
    assert_int_not_equal(check(s, &r1, err, sizeof err), 0);
    assert_string_equal(err, "segment 5 has no tensor 'obs'");
    free(s);
}

/* Refused: the segment after change(), with a message containing want. */
static void refused(void (*change)(seg_t *), const char *want)
{
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[256];
    ro_segment_rules_t r = rules_abi2();
    seg_good(s);
    change(s);
    assert_int_equal(check(s, &r, err, sizeof err), RO_EPROTO);
    if (!strstr(err, want))
        fail_msg("refused with \"%s\", expected \"%s\"", err, want);
    free(s);
}

static void drop_obs_pos(seg_t *s)
{
    /* Renamed: the layout's "obs/pos" is then missing. */
    snprintf(s->names[tensor_index(s, "obs/pos")], 48, "obs/position");
}
static void view_as_float(seg_t *s)
{
    s->nt[tensor_index(s, "obs/view")].dtype = 1;
}
static void view_shape(seg_t *s)
{
    s->shapes[tensor_index(s, "next_obs/view")][2] = 4;
}
static void pos_bytes(seg_t *s)
{
    s->nt[tensor_index(s, "obs/pos")].data.len -= 4;
}
static void mask_width(seg_t *s)
{
    s->shapes[tensor_index(s, "mask")][2] = MW - 1;
}
static void no_action(seg_t *s)
{
    snprintf(s->names[tensor_index(s, "action")], 48, "actions");
}
static void box_dtype(seg_t *s)
{
    s->nt[tensor_index(s, "action_box")].dtype = 2;
}
static void final_count(seg_t *s)
{
    int i = tensor_index(s, "final_obs/pos");
    s->shapes[i][0] = 1;
    s->nt[i].data.len = 8;
}
static void half_env(seg_t *s)
{
    /* 3 rows of 2-agent envs; every [t, n] tensor follows, so only the
     * rows are wrong. */
    s->seg.n = 3;
}
static void past_envs(seg_t *s)
{
    s->seg.first_env = 5; /* envs 5..6 of 6 */
}
static void final_outside(seg_t *s)
{
    const int32_t bad = T_ * R_;
    memcpy(s->data[tensor_index(s, "final_index")] + 4, &bad, 4);
}

static void test_refusals_name_the_tensor(void **state)
{
    (void)state;
    refused(drop_obs_pos, "segment 5 has no tensor 'obs/pos'");
    refused(view_as_float, "tensor 'obs/view' has dtype 1 and 4 dims, expected 3 and 4");
    refused(view_shape, "tensor 'next_obs/view' dim 2 is 4, expected 3");
    refused(pos_bytes, "tensor 'obs/pos' has 60 bytes for 16 elements");
    refused(mask_width, "tensor 'mask' dim 2 is 4, expected 5");
    refused(no_action, "segment 5 has no tensor 'action'");
    refused(box_dtype, "tensor 'action_box' has dtype 2");
    refused(final_count, "tensor 'final_obs/pos' dim 0 is 1, expected 2");
    refused(half_env, "3 rows from env 2 are not whole envs of 2 agents");
    refused(past_envs, "rows from env 5 are not whole envs of 2 agents of a node of 6 envs");
    refused(final_outside, "final index 8 outside its 2 x 4 steps");
}

/* The same tensors as references into shared memory: each must lie inside
 * the mapping, and is then held to the layout as in a frame. */
static void test_in_memory(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    char err[256];
    ro_segment_rules_t r = rules_abi2();
    seg_good(s);
    static uint8_t mem[MAXT * 1024];
    memset(mem, 0, sizeof mem);
    const int32_t idx[K_] = {1, 6};
    for (size_t i = 0; i < s->seg.n_tensors; i++) {
        s->nt[i].offset = i * 1024;
        if (strcmp(s->names[i], "final_index") == 0)
            memcpy(mem + i * 1024, idx, sizeof idx);
        s->nt[i].data.len = 0;
        s->nt[i].data.data = NULL;
    }
    s->seg.in_memory = true;
    pack(s);
    ro_segment_view_t v;
    assert_int_equal(ro__segment_view_parse(s->buf, s->len, &v, err, sizeof err), 1);
    assert_int_equal(ro__segment_view_resolve(&v, mem, sizeof mem, err, sizeof err), 0);
    assert_int_equal(ro__segment_view_check(&v, &r, err, sizeof err), 0);
    assert_ptr_equal(ro__segment_view_find(&v, "obs/view")->data, mem);
    /* A tensor past the end of the mapping is refused by name. */
    int i = tensor_index(s, "final_obs/pos");
    s->nt[i].offset = sizeof mem - 8; /* needs 16 bytes */
    pack(s);
    assert_int_equal(ro__segment_view_parse(s->buf, s->len, &v, err, sizeof err), 1);
    assert_int_equal(ro__segment_view_resolve(&v, mem, sizeof mem, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "tensor 'final_obs/pos'"));
    assert_non_null(strstr(err, "outside"));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_segment),
        cmocka_unit_test(test_refusals_name_the_tensor),
        cmocka_unit_test(test_in_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
