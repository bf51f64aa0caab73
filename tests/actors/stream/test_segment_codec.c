/*
 * A segment on the wire (actors/stream/segment_codec.c): the buffers
 * ro__seg_wire_build lays out, joined, are byte for byte a varint length
 * prefix and what protobuf-c packs for the same Frame{segment} (the names,
 * dtypes and shapes docs/protocol.md lists, each column's bytes as they
 * lie), for discrete and Gaussian box policies, a multi-dimensional
 * observation, segments with and without final observations, zero header
 * fields (which proto3 leaves out) and large ones. The column buffers point
 * into the segment (no copy), and protobuf-c decodes the frame back. The
 * same segment as references into shared memory (in_memory, each
 * tensor's offset) is one header buffer, again as protobuf-c packs it, and
 * wire/segment_view resolves its tensors to the columns themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "actors/stream/segment.h"
#include "actors/stream/segment_codec.h"
#include "rollout.pb-c.h"
#include "wire/segment_view.h"
#include "wire/varint.h"

/* Every byte of every column a value of its own. */
static void fill_columns(ro_segment_t *s)
{
    for (int c = 0; c < RO_SEG_NCOLS; c++) {
        if (!s->col[c])
            continue;
        uint8_t *p = s->col[c];
        size_t n = ro__seg_col_bytes(s, c);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(c * 37 + i * 11 + 1);
    }
}

/* expected packs, with protobuf-c, the frame the segment should be. */
static size_t expected(const ro_segment_t *s, uint64_t seq, const void *base, uint8_t **out)
{
    const ro_seg_layout_t *lay = s->lay;
    static const uint32_t dtypes[RO_SEG_NCOLS] = {1, 0, 1, 1, 1, 1, 3, 3, 3, 4, 4, 5, 1, 2, 1};
    Rollout__V1__NamedTensor nt[RO_SEG_NCOLS], *ptrs[RO_SEG_NCOLS];
    uint32_t shapes[RO_SEG_NCOLS][8];
    size_t n = 0;
    for (int c = 0; c < RO_SEG_NCOLS; c++) {
        if (!s->col[c])
            continue;
        Rollout__V1__NamedTensor *t = &nt[n];
        *t = (Rollout__V1__NamedTensor)ROLLOUT__V1__NAMED_TENSOR__INIT;
        t->name = (char *)ro__seg_col_name(c);
        t->dtype = c == RO_SEG_ACTION ? (lay->discrete ? 2 : 1) : dtypes[c];
        uint32_t *sh = shapes[n], k = 0;
        if (c == RO_SEG_NEXT_OBS) {
            sh[k++] = s->n;
        } else if (c == RO_SEG_FINAL_INDEX || c == RO_SEG_FINAL_OBS) {
            sh[k++] = s->nfinal;
        } else {
            sh[k++] = s->t;
            if (c != RO_SEG_LOG_STD && c != RO_SEG_POLICY_VERSION)
                sh[k++] = s->n;
        }
        if (c == RO_SEG_OBS || c == RO_SEG_NEXT_OBS || c == RO_SEG_FINAL_OBS)
            for (uint32_t d = 0; d < lay->obs_ndim; d++)
                sh[k++] = lay->obs_shape[d];
        if (c == RO_SEG_MEAN || c == RO_SEG_LOG_STD || (c == RO_SEG_ACTION && !lay->discrete))
            sh[k++] = lay->act_dim;
        t->n_shape = k;
        t->shape = sh;
        if (base) {
            t->offset = (uint64_t)((const char *)s->col[c] - (const char *)base);
        } else {
            t->data.data = s->col[c];
            t->data.len = ro__seg_col_bytes(s, c);
        }
        ptrs[n++] = t;
    }
    Rollout__V1__Segment seg = ROLLOUT__V1__SEGMENT__INIT;
    seg.seq = seq;
    seg.shard = s->shard;
    seg.shard_seq = s->shard_seq;
    seg.first_env = s->first_env;
    seg.t = s->t;
    seg.n = s->n;
    seg.policy_version_min = s->version_min;
    seg.policy_version_max = s->version_max;
    seg.n_tensors = n;
    seg.tensors = ptrs;
    seg.in_memory = base != NULL;
    Rollout__V1__Frame f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT;
    f.segment = &seg;
    size_t body = rollout__v1__frame__get_packed_size(&f);
    uint8_t *buf = malloc(body + 10);
    assert_non_null(buf);
    size_t pre = (size_t)ro__varint_put(buf, body);
    assert_int_equal(rollout__v1__frame__pack(&f, buf + pre), body);
    *out = buf;
    return pre + body;
}

/* A reference frame's tensors resolve to the columns where they lie. */
static void check_view(const ro_segment_t *s, const uint8_t *frame, size_t len, const void *base,
                       size_t size)
{
    ro_segment_view_t v;
    char err[256];
    assert_int_equal(ro__segment_view_parse(frame, len, &v, err, sizeof err), 1);
    assert_true(v.in_memory);
    assert_int_equal(ro__segment_view_resolve(&v, base, size, err, sizeof err), 0);
    for (int c = 0; c < RO_SEG_NCOLS; c++) {
        if (!s->col[c])
            continue;
        const ro_tensor_view_t *t = ro__segment_view_find(&v, ro__seg_col_name(c));
        assert_non_null(t);
        assert_ptr_equal(t->data, s->col[c]);
        assert_int_equal(t->bytes, ro__seg_col_bytes(s, c));
    }
    /* Memory that ends before the last column is refused, naming it. */
    ro_segment_view_t v2;
    assert_int_equal(ro__segment_view_parse(frame, len, &v2, err, sizeof err), 1);
    size_t last = 0;
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        if (s->col[c] && ro__seg_col_bytes(s, c)) {
            size_t end =
                (size_t)((const char *)s->col[c] - (const char *)base) + ro__seg_col_bytes(s, c);
            last = end > last ? end : last;
        }
    assert_int_equal(ro__segment_view_resolve(&v2, base, last - 1, err, sizeof err), -EPROTO);
    assert_non_null(strstr(err, "outside"));
    /* ... and so is a reference frame where no memory was mapped. */
    assert_int_equal(ro__segment_view_parse(frame, len, &v2, err, sizeof err), 1);
    assert_int_equal(ro__segment_view_resolve(&v2, NULL, 0, err, sizeof err), -EPROTO);
}

/* check_wire builds s's frame (with base: as references into the memory
 * at base) and wants it as protobuf-c packs it. */
static void check_wire(const ro_segment_t *s, uint64_t seq, const void *base, size_t size)
{
    ro_seg_wire_t *w = malloc(sizeof *w);
    assert_non_null(w);
    ro__seg_wire_build(w, s, seq, base);
    if (base) /* the headers alone */
        assert_true(w->nbufs == 1 && (const uint8_t *)w->bufs[0].base == w->hdr);
    assert_true(w->nbufs <= RO_SEG_WIRE_BUFS);
    assert_true(w->used <= sizeof w->hdr);
    uint8_t *got = malloc(w->bytes), *p = got;
    assert_non_null(got);
    size_t total = 0;
    for (unsigned i = 0; i < w->nbufs; i++) {
        const uint8_t *b = (const uint8_t *)w->bufs[i].base;
        const size_t len = w->bufs[i].len;
        /* Each buffer is a piece of the headers or a whole column where
         * it lies. */
        bool in_hdr = b >= w->hdr && b + len <= w->hdr + sizeof w->hdr;
        bool is_col = false;
        for (int c = 0; c < RO_SEG_NCOLS && !in_hdr; c++)
            is_col |= b == s->col[c] && len == ro__seg_col_bytes(s, c);
        assert_true(in_hdr || is_col);
        assert_true(total + len <= w->bytes);
        memcpy(p, b, len);
        p += len;
        total += len;
    }
    assert_int_equal(total, w->bytes);
    uint8_t *want;
    size_t wlen = expected(s, seq, base, &want);
    assert_int_equal(w->bytes, wlen);
    assert_memory_equal(got, want, wlen);

    /* protobuf-c reads it back. */
    uint64_t body;
    int pre = ro__varint_get(got, total, &body);
    assert_true(pre > 0 && (size_t)pre + body == total);
    Rollout__V1__Frame *f = rollout__v1__frame__unpack(NULL, body, got + pre);
    assert_non_null(f);
    assert_int_equal(f->body_case, ROLLOUT__V1__FRAME__BODY_SEGMENT);
    assert_int_equal(f->segment->seq, seq);
    assert_int_equal(f->segment->t, s->t);
    assert_int_equal(f->segment->in_memory, base != NULL);
    rollout__v1__frame__free_unpacked(f, NULL);
    if (base)
        check_view(s, got + pre, (size_t)body, base, size);
    free(want);
    free(got);
    free(w);
}

static void run_case(const ro_space_t *obs, const ro_space_t *act, bool gaussian, uint32_t t,
                     uint32_t n, uint32_t nfinal, uint64_t seq, uint64_t vmin, uint64_t vmax)
{
    ro_seg_layout_t lay;
    ro__seg_layout(&lay, 4, obs, act, gaussian, 3);
    ro_seg_pool_t pool;
    assert_int_equal(ro__seg_pool_init(&pool, &lay, 1, false), 0);
    ro_segment_t *s = &pool.segs[0];
    s->shard = 2;
    s->shard_seq = 1ull << 40;
    s->first_env = 6;
    s->t = t;
    s->n = n;
    s->nfinal = nfinal;
    s->version_min = vmin;
    s->version_max = vmax;
    fill_columns(s);
    check_wire(s, seq, NULL, 0);
    check_wire(s, seq, pool.mem, lay.bytes);
    /* Zero header fields are left out, as proto3 does. */
    s->shard = 0;
    s->shard_seq = 0;
    s->first_env = 0;
    check_wire(s, seq, NULL, 0);
    check_wire(s, seq, pool.mem, lay.bytes);
    ro__seg_pool_free(&pool);
}

static void test_discrete(void **state)
{
    (void)state;
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {4}};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 3};
    run_case(&obs, &act, false, 4, 3, 5, 1, 0, 0);   /* versions 0: left out */
    run_case(&obs, &act, false, 4, 3, 0, 300, 7, 9); /* no final observations */
    run_case(&obs, &act, false, 1, 2, 2, UINT64_MAX, 1ull << 35, UINT64_MAX);
}

static void test_box_gaussian(void **state)
{
    (void)state;
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 2, .shape = {2, 3}};
    ro_space_t act = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}};
    run_case(&obs, &act, true, 4, 3, 12, 5, 3, 4);
    run_case(&obs, &act, true, 2, 1, 0, 128, 1, 1);
    run_case(&obs, &act, false, 3, 3, 1, 16384, 2, 2); /* no mean, no log_std */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discrete),
        cmocka_unit_test(test_box_gaussian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
