/*
 * Env ABI 2 segments from the node's side (actors/stream/segment.c,
 * actors/stream/segment_codec.c) to the learner's (wire/segment_view.c): the
 * layout of a two-agent env with a uint8 [3, 3] tensor "view", an int32 [2]
 * tensor "pos", a Discrete(5) part with its mask and a Box [2] part has the
 * columns docs/protocol.md lists (names, dtypes, shapes, in wire order);
 * a segment of it goes on the wire as protobuf-c decodes it, each tensor's
 * bytes the column's, and a learner holding the same layout reads it back
 * and accepts it, carried in the frame and as references into the pool's
 * shared memory. An ABI 1 layout keeps its fifteen columns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/stream/segment.h"
#include "actors/stream/segment_codec.h"
#include "rollout.pb-c.h"
#include "spaces/layout.h"
#include "wire/segment_view.h"
#include "wire/varint.h"

#define T_ 4
#define ROWS 4 /* 2 envs of 2 agents */

typedef struct fixture {
    ro_space_layout_t space;
    ro_seg_layout_t lay;
    ro_seg_pool_t pool;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    static const float lo[2] = {-1, -1}, hi[2] = {1, 1};
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 2;
    sp.num_obs = 2;
    sp.obs[0] =
        (ro_tensor_space_t){.name = "view", .dtype = RO_DTYPE_UINT8, .ndim = 2, .shape = {3, 3}};
    sp.obs[1] =
        (ro_tensor_space_t){.name = "pos", .dtype = RO_DTYPE_INT32, .ndim = 1, .shape = {2}};
    sp.num_parts = 2;
    sp.act[0] = (ro_action_part_t){.kind = RO_SPACE_DISCRETE, .n = 5};
    sp.act[1] =
        (ro_action_part_t){.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    sp.action_mask = 1;
    char err[256];
    assert_int_equal(ro__layout_from_spaces(&f->space, &sp, "test", err, sizeof err), 0);
    ro__seg_layout_typed(&f->lay, T_, &f->space, ROWS);
    assert_int_equal(ro__seg_pool_init(&f->pool, &f->lay, 2, true), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    ro__seg_pool_free(&f->pool);
    ro__layout_free(&f->space);
    free(f);
    return 0;
}

/* The rules a learner derives from the welcome's layout of this env. */
static ro_segment_rules_t rules_of(const ro_space_layout_t *sp)
{
    ro_segment_rules_t r;
    memset(&r, 0, sizeof r);
    r.unroll = T_;
    r.num_envs = 2;
    r.abi2 = true;
    r.agents = sp->agents;
    r.nobs = sp->ntensors;
    for (uint32_t k = 0; k < sp->ntensors; k++) {
        snprintf(r.obs[k].name, sizeof r.obs[k].name, "%s", sp->t[k].name);
        r.obs[k].dtype = sp->t[k].dtype == RO_DTYPE_UINT8   ? 3
                         : sp->t[k].dtype == RO_DTYPE_INT32 ? 2
                                                            : 1;
        r.obs[k].ndim = sp->t[k].ndim;
        memcpy(r.obs[k].shape, sp->t[k].shape, sizeof r.obs[k].shape);
    }
    r.ndisc = sp->ndisc;
    r.nbox = sp->nbox;
    r.mask_width = sp->mask_width;
    return r;
}

static void test_columns(void **state)
{
    fixture_t *f = *state;
    static const struct {
        const char *name;
        uint8_t dtype;
        size_t item;
    } want[] = {
        {"obs/view", RO_DT_UINT8, 9},
        {"obs/pos", RO_DT_INT32, 8},
        {"action", RO_DT_INT32, 4},
        {"action_box", RO_DT_FLOAT32, 8},
        {"mask", RO_DT_UINT8, 5},
        {"logp", RO_DT_FLOAT32, 4},
        {"reward", RO_DT_FLOAT32, 4},
        {"terminated", RO_DT_UINT8, 1},
        {"truncated", RO_DT_UINT8, 1},
        {"is_first", RO_DT_UINT8, 1},
        {"episode", RO_DT_UINT32, 4},
        {"step", RO_DT_UINT32, 4},
        {"policy_version", RO_DT_UINT64, 8},
        {"next_obs/view", RO_DT_UINT8, 9},
        {"next_obs/pos", RO_DT_INT32, 8},
        {"final_index", RO_DT_INT32, 4},
        {"final_obs/view", RO_DT_UINT8, 9},
        {"final_obs/pos", RO_DT_INT32, 8},
    };
    size_t w = 0;
    for (uint32_t c = 0; c < f->lay.ncols; c++) {
        const ro_seg_col_desc_t *d = &f->lay.col[c];
        if (!d->item)
            continue;
        assert_true(w < sizeof want / sizeof want[0]);
        assert_string_equal(d->name, want[w].name);
        assert_int_equal(d->dtype, want[w].dtype);
        assert_int_equal(d->item, want[w].item);
        w++;
    }
    assert_int_equal(w, sizeof want / sizeof want[0]);
    /* An ABI 1 layout: its fifteen columns, as before (no state columns). */
    static const float lo[2] = {-1, -1}, hi[2] = {1, 1};
    ro_space_t obs = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}, .low = lo, .high = hi};
    ro_space_t act = {.kind = RO_SPACE_DISCRETE, .n = 3};
    ro_seg_layout_t l1;
    ro__seg_layout(&l1, T_, &obs, &act, false, 3);
    assert_int_equal(l1.ncols, RO_SEG_NCOLS);
    assert_null(l1.space);
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_string_equal(l1.col[c].name,
                            c == RO_SEG_MEAN || c == RO_SEG_LOG_STD || c >= RO_SEG_STATE_H
                                ? ""
                                : ro__seg_col_name(c));
}

/* A full segment: every byte a value of its own; final observations at
 * rows 1 and 6 (flat t * n + j); policy versions 3..4. */
static ro_segment_t *filled(fixture_t *f)
{
    ro_segment_t *s = &f->pool.segs[1];
    s->t = T_;
    s->n = ROWS;
    s->first_env = 0;
    s->shard = 0;
    s->shard_seq = 9;
    s->nfinal = 2;
    s->version_min = 3;
    s->version_max = 4;
    for (uint32_t c = 0; c < f->lay.ncols; c++) {
        uint8_t *p = s->col[c];
        for (size_t i = 0; p && i < ro__seg_col_bytes(s, (int)c); i++)
            p[i] = (uint8_t)(c * 37 + i * 11 + 1);
    }
    const int32_t idx[2] = {1, 6};
    memcpy(s->col[RO_SEG2_FINAL_INDEX], idx, sizeof idx);
    for (uint32_t t = 0; t < T_; t++)
        ((uint64_t *)s->col[RO_SEG2_POLICY_VERSION])[t] = 3 + t % 2;
    return s;
}

/* Join the wire buffers of s into one frame (prefix stripped: *body). */
static uint8_t *wire(const ro_segment_t *s, const void *base, size_t *body)
{
    ro_seg_wire_t *w = malloc(sizeof *w);
    assert_non_null(w);
    ro__seg_wire_build(w, s, 12, base);
    assert_true(w->nbufs <= RO_SEG_WIRE_BUFS && w->used <= sizeof w->hdr);
    uint8_t *got = malloc(w->bytes), *p = got;
    assert_non_null(got);
    for (unsigned i = 0; i < w->nbufs; i++) {
        memcpy(p, w->bufs[i].base, w->bufs[i].len);
        p += w->bufs[i].len;
    }
    assert_int_equal((size_t)(p - got), w->bytes);
    uint64_t len;
    int pre = ro__varint_get(got, w->bytes, &len);
    assert_true(pre > 0 && (size_t)pre + len == w->bytes);
    memmove(got, got + pre, (size_t)len);
    *body = (size_t)len;
    free(w);
    return got;
}

static void round_trip(fixture_t *f, bool in_memory)
{
    ro_segment_t *s = filled(f);
    const void *base = in_memory ? f->pool.shm.base : NULL;
    if (in_memory && !base)
        skip(); /* no memfd on this kernel */
    size_t len;
    uint8_t *frame = wire(s, base, &len);
    /* protobuf-c reads it: every column in order, named, typed, shaped. */
    Rollout__V1__Frame *pf = rollout__v1__frame__unpack(NULL, len, frame);
    assert_non_null(pf);
    Rollout__V1__Segment *seg = pf->segment;
    assert_non_null(seg);
    assert_int_equal(seg->n, ROWS);
    assert_int_equal(seg->in_memory, in_memory);
    size_t i = 0;
    for (uint32_t c = 0; c < f->lay.ncols; c++) {
        if (!s->col[c])
            continue;
        assert_true(i < seg->n_tensors);
        const Rollout__V1__NamedTensor *t = seg->tensors[i++];
        assert_string_equal(t->name, f->lay.col[c].name);
        assert_int_equal(t->dtype, f->lay.col[c].dtype);
        uint32_t shape[8];
        uint32_t nd = ro__seg_col_shape(s, (int)c, shape);
        assert_int_equal(t->n_shape, nd);
        assert_memory_equal(t->shape, shape, nd * sizeof *shape);
        if (in_memory)
            assert_int_equal(t->offset, (uint64_t)((char *)s->col[c] - (char *)base));
        else
            assert_memory_equal(t->data.data, s->col[c], ro__seg_col_bytes(s, (int)c));
    }
    assert_int_equal(i, seg->n_tensors);
    rollout__v1__frame__free_unpacked(pf, NULL);
    /* The learner with the same layout accepts it. */
    ro_segment_view_t v;
    char err[256];
    ro_segment_rules_t r = rules_of(&f->space);
    assert_int_equal(ro__segment_view_parse(frame, len, &v, err, sizeof err), 1);
    assert_int_equal(
        ro__segment_view_resolve(&v, base, in_memory ? f->pool.shm.bytes : 0, err, sizeof err), 0);
    if (ro__segment_view_check(&v, &r, err, sizeof err) != 0)
        fail_msg("refused: %s", err);
    const ro_tensor_view_t *view = ro__segment_view_find(&v, "final_obs/view");
    assert_non_null(view);
    assert_int_equal(view->bytes, 2 * 9);
    assert_memory_equal(view->data, s->col[RO_SEG2_FINAL_OBS], 2 * 9);
    /* ... and not with another agent count. */
    r.agents = 3;
    assert_int_not_equal(ro__segment_view_check(&v, &r, err, sizeof err), 0);
    free(frame);
}

static void test_round_trip_in_frame(void **state)
{
    round_trip(*state, false);
}

static void test_round_trip_in_memory(void **state)
{
    round_trip(*state, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_columns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_in_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_in_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
