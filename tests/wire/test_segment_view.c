/*
 * Reading stream-mode Segment frames in place (src/wire/segment_view.c).
 * Frames are packed here with protobuf-c itself (not the node's own
 * encoder), so the reader is checked against protobuf's wire format: a
 * good segment is read with every tensor pointing into the frame's bytes;
 * other frames are left to the usual decoder (a oneof's last field wins);
 * then the untrusted cases: every truncation of a frame, bad tags, groups,
 * over-long varints, lengths past the end, too many tensors or dims, and
 * the rules (steps, envs, versions, each tensor's dtype, shape and byte
 * count, final indices) each refused with one line naming the problem.
 * The reader allocates nothing, whatever a frame claims: malloc, calloc
 * and realloc are wrapped (-Wl,--wrap) and counted around each call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rollout.pb-c.h"
#include "runtime/error.h"
#include "wire/segment_view.h"

#define ERRLEN 256
#define T_ 2
#define N_ 3
#define OD 2
#define K_ 2
#define FRAME_MAX 8192

/* ---- allocations, counted while the reader runs ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
static int counting, allocs;

void *__wrap_malloc(size_t n)
{
    allocs += counting;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    allocs += counting;
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    allocs += counting;
    return __real_realloc(p, n);
}

/* parse and check without allocating. */
static int parse(const uint8_t *b, size_t len, ro_segment_view_t *v, char *err)
{
    err[0] = '\0';
    counting = 1;
    int rc = ro__segment_view_parse(b, len, v, err, ERRLEN);
    counting = 0;
    assert_int_equal(allocs, 0);
    if (rc < 0) {
        assert_int_equal(rc, RO_EBADMSG);
        assert_true(err[0] != '\0');
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

static const ro_segment_rules_t rules = {
    .unroll = 4, .num_envs = 8, .obs_dim = OD, .act_dim = 1, .discrete = true};

static int check(const ro_segment_view_t *v, const ro_segment_rules_t *r, char *err)
{
    err[0] = '\0';
    counting = 1;
    int rc = ro__segment_view_check(v, r, err, ERRLEN);
    counting = 0;
    assert_int_equal(allocs, 0);
    if (rc) {
        assert_int_equal(rc, RO_EPROTO);
        assert_null(strchr(err, '\n'));
    }
    return rc;
}

/* ---- a good segment, packed with protobuf-c ---- */

enum { OBS, ACT, LOGP, REW, TERM, TRUNC, FIRST, EPI, STEP, PV, NEXT, FIDX, FOBS, NT };

typedef struct seg {
    Rollout__V1__Frame frame;
    Rollout__V1__Segment seg;
    Rollout__V1__NamedTensor nt[NT + 40];
    Rollout__V1__NamedTensor *ptrs[NT + 40];
    uint32_t shapes[NT + 40][10];
    float obs[T_ * N_ * OD], act_f[T_ * N_ * 2], f32[T_ * N_], next[N_ * OD], fobs[K_ * OD];
    int32_t act[T_ * N_], fidx[K_];
    uint8_t u8[T_ * N_];
    uint32_t u32[T_ * N_];
    uint64_t pv[T_];
    uint8_t buf[FRAME_MAX];
    size_t len;
} seg_t;

static void tensor(seg_t *s, int i, const char *name, uint32_t dtype, const void *data,
                   size_t bytes, uint32_t ndim, uint32_t d0, uint32_t d1, uint32_t d2)
{
    Rollout__V1__NamedTensor *t = &s->nt[i];
    *t = (Rollout__V1__NamedTensor)ROLLOUT__V1__NAMED_TENSOR__INIT;
    t->name = (char *)name;
    t->dtype = (Rollout__V1__DType)dtype;
    s->shapes[i][0] = d0;
    s->shapes[i][1] = d1;
    s->shapes[i][2] = d2;
    t->n_shape = ndim;
    t->shape = s->shapes[i];
    t->data.data = (uint8_t *)data;
    t->data.len = bytes;
    s->ptrs[i] = t;
}

/* seg_good: seq 7 of shard 1 (#4), envs 2..4, 2 steps of versions 10..11,
 * two final observations; every element a distinct value. */
static void seg_good(seg_t *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < T_ * N_ * OD; i++)
        s->obs[i] = (float)i + 0.5f;
    for (size_t i = 0; i < T_ * N_; i++) {
        s->act[i] = (int32_t)i % 3;
        s->f32[i] = -(float)i;
        s->u8[i] = (uint8_t)(i & 1);
        s->u32[i] = (uint32_t)(100 + i);
    }
    s->pv[0] = 10;
    s->pv[1] = 11;
    s->fidx[0] = 1;
    s->fidx[1] = T_ * N_ - 1;
    tensor(s, OBS, "obs", 1, s->obs, sizeof s->obs, 3, T_, N_, OD);
    tensor(s, ACT, "action", 2, s->act, sizeof s->act, 2, T_, N_, 0);
    tensor(s, LOGP, "logp", 1, s->f32, sizeof s->f32, 2, T_, N_, 0);
    tensor(s, REW, "reward", 1, s->f32, sizeof s->f32, 2, T_, N_, 0);
    tensor(s, TERM, "terminated", 3, s->u8, sizeof s->u8, 2, T_, N_, 0);
    tensor(s, TRUNC, "truncated", 3, s->u8, sizeof s->u8, 2, T_, N_, 0);
    tensor(s, FIRST, "is_first", 3, s->u8, sizeof s->u8, 2, T_, N_, 0);
    tensor(s, EPI, "episode", 4, s->u32, sizeof s->u32, 2, T_, N_, 0);
    tensor(s, STEP, "step", 4, s->u32, sizeof s->u32, 2, T_, N_, 0);
    tensor(s, PV, "policy_version", 5, s->pv, sizeof s->pv, 1, T_, 0, 0);
    tensor(s, NEXT, "next_obs", 1, s->next, sizeof s->next, 2, N_, OD, 0);
    tensor(s, FIDX, "final_index", 2, s->fidx, sizeof s->fidx, 1, K_, 0, 0);
    tensor(s, FOBS, "final_obs", 1, s->fobs, sizeof s->fobs, 2, K_, OD, 0);
    s->seg = (Rollout__V1__Segment)ROLLOUT__V1__SEGMENT__INIT;
    s->seg.seq = 7;
    s->seg.shard = 1;
    s->seg.shard_seq = 4;
    s->seg.first_env = 2;
    s->seg.t = T_;
    s->seg.n = N_;
    s->seg.policy_version_min = 10;
    s->seg.policy_version_max = 11;
    s->seg.n_tensors = NT;
    s->seg.tensors = s->ptrs;
    s->frame = (Rollout__V1__Frame)ROLLOUT__V1__FRAME__INIT;
    s->frame.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT;
    s->frame.segment = &s->seg;
}

static void seg_pack(seg_t *s)
{
    assert_true(rollout__v1__frame__get_packed_size(&s->frame) <= FRAME_MAX);
    s->len = rollout__v1__frame__pack(&s->frame, s->buf);
}

/* A good segment is read in place; its tensors are the bytes packed. */
static void test_good_segment(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    seg_good(s);
    seg_pack(s);
    ro_segment_view_t v;
    char err[ERRLEN];
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(v.seq, 7);
    assert_int_equal(v.shard, 1);
    assert_int_equal(v.shard_seq, 4);
    assert_int_equal(v.first_env, 2);
    assert_int_equal(v.t, T_);
    assert_int_equal(v.n, N_);
    assert_int_equal(v.version_min, 10);
    assert_int_equal(v.version_max, 11);
    assert_int_equal(v.ntensors, NT);
    for (int i = 0; i < NT; i++) {
        const Rollout__V1__NamedTensor *want = &s->nt[i];
        const ro_tensor_view_t *t = ro__segment_view_find(&v, want->name);
        assert_non_null(t);
        assert_ptr_equal(t, &v.tensors[i]);
        assert_int_equal(t->name_len, strlen(want->name));
        assert_int_equal(t->dtype, want->dtype);
        assert_int_equal(t->ndim, want->n_shape);
        for (uint32_t d = 0; d < t->ndim; d++)
            assert_int_equal(t->shape[d], want->shape[d]);
        assert_int_equal(t->bytes, want->data.len);
        assert_true(t->data >= s->buf && t->data + t->bytes <= s->buf + s->len); /* no copy */
        assert_memory_equal(t->data, want->data.data, t->bytes);
    }
    assert_null(ro__segment_view_find(&v, "ob"));
    assert_null(ro__segment_view_find(&v, "obs2"));
    assert_int_equal(check(&v, &rules, err), 0);

    /* A box action: float32 [T, N, act]; the discrete rule refuses it. */
    tensor(s, ACT, "action", 1, s->act_f, sizeof s->act_f, 3, T_, N_, 2);
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    ro_segment_rules_t box = rules;
    box.discrete = false;
    box.act_dim = 2;
    assert_int_equal(check(&v, &box, err), 0);
    assert_int_equal(check(&v, &rules, err), RO_EPROTO);
    assert_string_equal(err, "segment 7: tensor 'action' has dtype 1 and 3 dims, expected 2 and 2");

    /* No final observations at all is fine (no episode ended). */
    seg_good(s);
    s->seg.n_tensors = FIDX;
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &rules, err), 0);
    free(s);
}

/* Other frames go to the usual decoder; a oneof's last field wins. */
static void test_other_frames(void **state)
{
    (void)state;
    ro_segment_view_t v;
    char err[ERRLEN];
    assert_int_equal(parse((const uint8_t *)"", 0, &v, err), 0);
    Rollout__V1__Hello hello = ROLLOUT__V1__HELLO__INIT;
    hello.protocol_version = 1;
    Rollout__V1__Frame f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &hello;
    uint8_t hb[256];
    size_t hlen = rollout__v1__frame__pack(&f, hb);
    assert_int_equal(parse(hb, hlen, &v, err), 0);

    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    seg_good(s);
    seg_pack(s);
    uint8_t *cat = malloc(s->len + hlen);
    assert_non_null(cat);
    memcpy(cat, s->buf, s->len); /* segment, then hello: a hello */
    memcpy(cat + s->len, hb, hlen);
    assert_int_equal(parse(cat, s->len + hlen, &v, err), 0);
    memcpy(cat, hb, hlen); /* hello, then segment: a segment */
    memcpy(cat + hlen, s->buf, s->len);
    assert_int_equal(parse(cat, s->len + hlen, &v, err), 1);
    assert_int_equal(v.seq, 7);
    /* Unknown fields (here 15, a varint) are skipped. */
    uint8_t unk[3] = {15 << 3, 0x05};
    memcpy(cat, unk, 2);
    memcpy(cat + 2, s->buf, s->len);
    assert_int_equal(parse(cat, s->len + 2, &v, err), 1);
    free(cat);
    free(s);
}

/* Every prefix of a good frame: read or refused, never past its end (the
 * prefix is copied to a buffer of its own size, so ASan sees any overrun). */
static void test_truncations(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    seg_good(s);
    seg_pack(s);
    uint32_t refused = 0;
    for (size_t len = 1; len < s->len; len++) {
        uint8_t *p = malloc(len);
        assert_non_null(p);
        memcpy(p, s->buf, len);
        ro_segment_view_t v;
        char err[ERRLEN];
        int rc = parse(p, len, &v, err);
        /* The frame's only field is the segment: cut, it is refused. */
        assert_int_equal(rc, RO_EBADMSG);
        assert_string_equal(err, "a frame that is not valid protobuf");
        refused++;
        free(p);
    }
    assert_int_equal(refused, s->len - 1);
    free(s);
}

static void expect_bad(const uint8_t *b, size_t len, const char *want)
{
    ro_segment_view_t v;
    char err[ERRLEN];
    assert_int_equal(parse(b, len, &v, err), RO_EBADMSG);
    assert_string_equal(err, want);
}

/* Malformed protobuf inside a segment or a tensor. */
static void test_malformed(void **state)
{
    (void)state;
    const char *frame_bad = "a frame that is not valid protobuf";
    const char *seg_bad = "a segment that is not valid protobuf";
    const char *tensor_bad = "a segment tensor that is not valid protobuf";
    /* Field 0; a group (wire type 3); an 11-byte varint; a length past
     * the end; a length over 2^63. */
    expect_bad((const uint8_t[]){0x00, 0x01}, 2, frame_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 3}, 1, frame_bad);
    expect_bad(
        (const uint8_t[]){0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
        12, frame_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 2, 0x05, 0x08}, 3, frame_bad);
    expect_bad(
        (const uint8_t[]){(9 << 3) | 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        11, frame_bad);
    /* Inside the segment: a group; a fixed64 cut short. */
    expect_bad((const uint8_t[]){(9 << 3) | 2, 1, (1 << 3) | 4}, 3, seg_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 2, 3, (1 << 3) | 1, 0, 0}, 5, seg_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 2, 8, (1 << 3) | 1, 0, 0, 0, 0, 0, 0, 0}, 10, seg_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 2, 4, (1 << 3) | 5, 0, 0, 0}, 6, seg_bad);
    /* Inside a tensor: a length past its end; a fixed32 cut short. */
    expect_bad((const uint8_t[]){(9 << 3) | 2, 4, (9 << 3) | 2, 2, (1 << 3) | 2, 9}, 6, tensor_bad);
    expect_bad((const uint8_t[]){(9 << 3) | 2, 4, (9 << 3) | 2, 2, (2 << 3) | 5, 0}, 6, tensor_bad);
    /* Fixed-width fields we do not use are skipped when whole. */
    ro_segment_view_t v;
    char err[ERRLEN];
    const uint8_t fixed[] = {(9 << 3) | 2, 11, (14 << 3) | 1, 1, 2, 3, 4, 5, 6, 7, 8, (1 << 3), 9};
    assert_int_equal(parse(fixed, sizeof fixed, &v, err), 1);
    assert_int_equal(v.seq, 9);
}

/* Bounds on what a frame may make the reader hold: tensors, dims, and
 * 64-bit header values that do not fit 32 bits. */
static void test_bounds(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    seg_good(s);
    ro_segment_view_t v;
    char err[ERRLEN];
    /* 32 tensors are read; a 33rd is refused. */
    for (int i = NT; i < RO_VIEW_MAX_TENSORS; i++)
        tensor(s, i, "extra", 3, s->u8, 1, 1, 1, 0, 0);
    s->seg.n_tensors = RO_VIEW_MAX_TENSORS;
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(v.ntensors, RO_VIEW_MAX_TENSORS);
    assert_int_equal(check(&v, &rules, err), 0);
    tensor(s, RO_VIEW_MAX_TENSORS, "extra", 3, s->u8, 1, 1, 1, 0, 0);
    s->seg.n_tensors = RO_VIEW_MAX_TENSORS + 1;
    seg_pack(s);
    expect_bad(s->buf, s->len, "a segment with over 48 tensors");

    /* 8 dims are read; 9 are refused (packed, and one by one). */
    seg_good(s);
    for (int d = 0; d < 9; d++)
        s->shapes[REW][d] = 1;
    s->nt[REW].n_shape = RO_VIEW_MAX_DIMS;
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(ro__segment_view_find(&v, "reward")->ndim, RO_VIEW_MAX_DIMS);
    s->nt[REW].n_shape = RO_VIEW_MAX_DIMS + 1;
    seg_pack(s);
    expect_bad(s->buf, s->len, "a segment tensor that is not valid protobuf");
    const uint8_t unpacked[] = {(9 << 3) | 2, 20, (9 << 3) | 2, 18, 24, 1, 24, 1, 24, 1, 24, 1,
                                24,           1,  24,           1,  24, 1, 24, 1, 24, 1};
    expect_bad(unpacked, sizeof unpacked, "a segment tensor that is not valid protobuf");
    /* A dim over 2^32 (packed). */
    const uint8_t big_dim[] = {(9 << 3) | 2, 10,   (9 << 3) | 2, 8,    26,   6,
                               0x80,         0x80, 0x80,         0x80, 0x10, 1};
    expect_bad(big_dim, sizeof big_dim, "a segment tensor that is not valid protobuf");

    /* 32-bit header fields over 2^32 read as UINT32_MAX: refused by the
     * rules, not wrapped into range. */
    seg_good(s);
    const uint8_t huge_env[] = {(9 << 3) | 2, 6, (4 << 3), 0x82, 0x80, 0x80, 0x80, 0x10};
    assert_int_equal(parse(huge_env, sizeof huge_env, &v, err), 1);
    assert_int_equal(v.first_env, UINT32_MAX);
    free(s);
}

/* ---- the rules ---- */

typedef void (*spoil_fn)(seg_t *s);

static void expect_refused(spoil_fn spoil, const char *want)
{
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    seg_good(s);
    spoil(s);
    seg_pack(s);
    ro_segment_view_t v;
    char err[ERRLEN];
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &rules, err), RO_EPROTO);
    if (strcmp(err, want) != 0)
        fail_msg("refused with \"%s\", expected \"%s\"", err, want);
    free(s);
}

static void no_steps(seg_t *s)
{
    s->seg.t = 0;
}
static void too_many_steps(seg_t *s)
{
    s->seg.t = 5;
}
static void no_envs(seg_t *s)
{
    s->seg.n = 0;
}
static void envs_past_end(seg_t *s)
{
    s->seg.first_env = 6; /* 6..8 of 8 */
}
static void first_env_huge(seg_t *s)
{
    s->seg.first_env = UINT32_MAX;
    s->seg.n = 2; /* first_env + n wraps in 32 bits */
}
static void versions_reversed(seg_t *s)
{
    s->seg.policy_version_min = 12;
}
static void no_reward(seg_t *s)
{
    s->ptrs[REW] = s->ptrs[--s->seg.n_tensors];
}
static void obs_uint8(seg_t *s)
{
    s->nt[OBS].dtype = 3;
}
static void unknown_dtype(seg_t *s)
{
    s->nt[LOGP].dtype = 9;
}
static void logp_wrong_dim(seg_t *s)
{
    s->shapes[LOGP][1] = 4;
}
static void reward_short(seg_t *s)
{
    s->nt[REW].data.len -= 4;
}
static void reward_long(seg_t *s)
{
    s->nt[REW].data.data = (uint8_t *)s->obs; /* 28 bytes of its 48 */
    s->nt[REW].data.len = 28;
}
static void obs_4d(seg_t *s)
{
    s->nt[OBS].n_shape = 4;
    s->shapes[OBS][3] = 1;
}
static void final_obs_missing(seg_t *s)
{
    s->seg.n_tensors = FOBS;
}
static void final_counts_differ(seg_t *s)
{
    s->shapes[FOBS][0] = 1;
    s->nt[FOBS].data.len = OD * 4;
}
static void final_index_past(seg_t *s)
{
    s->fidx[1] = T_ * N_;
}
static void final_index_negative(seg_t *s)
{
    s->fidx[0] = -1;
}
static void version_outside(seg_t *s)
{
    s->pv[1] = 12;
}
static void shape_claims_huge(seg_t *s)
{
    s->shapes[FOBS][0] = UINT32_MAX; /* elements the bytes do not hold */
    s->shapes[FIDX][0] = UINT32_MAX;
    s->nt[FIDX].data.len = 8;
}
static void last_name_wins(seg_t *s)
{
    /* A second "obs" after the first: the reader takes the last. */
    tensor(s, NT, "obs", 1, s->obs, 4, 3, T_, N_, OD);
    s->seg.n_tensors = NT + 1;
}

static void test_rules(void **state)
{
    (void)state;
    expect_refused(no_steps, "segment 7: 0 steps of envs 2..+3 (unroll 4, 8 envs)");
    expect_refused(too_many_steps, "segment 7: 5 steps of envs 2..+3 (unroll 4, 8 envs)");
    expect_refused(no_envs, "segment 7: 2 steps of envs 2..+0 (unroll 4, 8 envs)");
    expect_refused(envs_past_end, "segment 7: 2 steps of envs 6..+3 (unroll 4, 8 envs)");
    expect_refused(first_env_huge, "segment 7: 2 steps of envs 4294967295..+2 (unroll 4, 8 envs)");
    expect_refused(versions_reversed, "segment 7: policy versions 12 > 11");
    expect_refused(no_reward, "segment 7 has no tensor 'reward'");
    expect_refused(obs_uint8, "segment 7: tensor 'obs' has dtype 3 and 3 dims, expected 1 and 3");
    expect_refused(unknown_dtype,
                   "segment 7: tensor 'logp' has dtype 9 and 2 dims, expected 1 and 2");
    expect_refused(logp_wrong_dim, "segment 7: tensor 'logp' dim 1 is 4, expected 3");
    expect_refused(reward_short, "segment 7: tensor 'reward' has 20 bytes for 6 elements");
    expect_refused(reward_long, "segment 7: tensor 'reward' has 28 bytes for 6 elements");
    expect_refused(obs_4d, "segment 7: observations of 2 dims are not read here");
    expect_refused(final_obs_missing, "segment 7: final_index and final_obs disagree");
    expect_refused(final_counts_differ, "segment 7: final_index and final_obs disagree");
    expect_refused(final_index_past, "segment 7: final index 6 outside its 2 x 3 steps");
    expect_refused(final_index_negative, "segment 7: final index -1 outside its 2 x 3 steps");
    expect_refused(version_outside, "segment 7: step 1's policy version 12 is outside 10..11");
    expect_refused(shape_claims_huge,
                   "segment 7: tensor 'final_index' has 8 bytes for 4294967295 elements");
    expect_refused(last_name_wins, "segment 7: tensor 'obs' has 4 bytes for 12 elements");
}

/* A recurrent node's states (rules.state_hid): [n, H] float32, finite, and
 * zero in the rows whose step 0 starts an episode (is_first row 1 here). */
static void test_state(void **state)
{
    (void)state;
    seg_t *s = malloc(sizeof *s);
    assert_non_null(s);
    float h[N_ * 2] = {0.25f, -1.0f, 0.0f, 0.0f, 3.0f, 0.5f}, c[N_ * 2] = {1, 2, 0, 0, 3, 4};
    ro_segment_rules_t r = rules;
    r.state_hid = 2;
    ro_segment_view_t v;
    char err[ERRLEN];
    seg_good(s);
    tensor(s, NT, "state/h", 1, h, sizeof h, 2, N_, 2, 0);
    tensor(s, NT + 1, "state/c", 1, c, sizeof c, 2, N_, 2, 0);
    s->seg.n_tensors = NT + 2;
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &r, err), 0);
    r.state_lstm = true;
    assert_int_equal(check(&v, &r, err), 0);
    h[3] = 1.5f; /* row 1 starts an episode: its state must be zero */
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &r, err), RO_EPROTO);
    assert_string_equal(err, "segment 7: state/h of row 1 is 1.5 but the row starts an episode "
                             "at step 0");
    assert_int_equal(check(&v, &rules, err), 0); /* a node without a cell: not read */
    h[3] = 0.0f;
    c[5] = NAN;
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &r, err), RO_EPROTO);
    assert_string_equal(err, "segment 7: state/c of row 2 is nan; states must be finite");
    s->seg.n_tensors = NT + 1; /* an LSTM's segment without state/c */
    seg_pack(s);
    assert_int_equal(parse(s->buf, s->len, &v, err), 1);
    assert_int_equal(check(&v, &r, err), RO_EPROTO);
    assert_string_equal(err, "segment 7 has no tensor 'state/c'");
    r.state_hid = 3;
    assert_int_equal(check(&v, &r, err), RO_EPROTO);
    assert_string_equal(err, "segment 7: tensor 'state/h' dim 1 is 2, expected 3");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_segment), cmocka_unit_test(test_other_frames),
        cmocka_unit_test(test_truncations),  cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bounds),       cmocka_unit_test(test_rules),
        cmocka_unit_test(test_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
