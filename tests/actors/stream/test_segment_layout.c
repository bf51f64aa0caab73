/*
 * Stream mode's segment layout (actors/stream/segment.c): the size and cache-line
 * placement of each column, which columns a discrete, box or Gaussian
 * policy has, the bytes a column holds for t rows and k final
 * observations, the pool's segments (each on its own lines, all free at
 * first), and the columns' names on the wire. The filling of segments is
 * test_segment.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "actors/exchange/messages.h"
#include "actors/stream/segment.h"
#include "runtime/alloc.h"

/* ---- spaces ---- */

static ro_space_t box(uint32_t ndim, uint32_t d0, uint32_t d1)
{
    ro_space_t s = {.kind = RO_SPACE_BOX, .ndim = ndim};
    s.shape[0] = d0;
    s.shape[1] = d1;
    return s;
}

static ro_space_t discrete(uint32_t n)
{
    return (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = n};
}

/* ---- layout ---- */

/* check_placement wants every segment of the pool to have column c at
 * offset off[c] of its memory (SIZE_MAX: absent), segments lay.bytes
 * apart, all on cache lines. */
static void check_placement(const ro_seg_pool_t *p, const size_t *off)
{
    for (uint32_t i = 0; i < p->nsegs; i++) {
        const ro_segment_t *s = &p->segs[i];
        assert_ptr_equal(s->mem, (const char *)p->mem + (size_t)i * p->lay.bytes);
        assert_int_equal((uintptr_t)s->mem % RO_CACHE_LINE, 0);
        assert_ptr_equal(s->lay, &p->lay);
        assert_ptr_equal(s->pool, p);
        assert_int_equal(s->msg.type, RO_MSG_SEGMENT);
        for (int c = 0; c < RO_SEG_NCOLS; c++) {
            if (off[c] == SIZE_MAX) {
                assert_null(s->col[c]);
                continue;
            }
            assert_ptr_equal(s->col[c], (const char *)s->mem + off[c]);
        }
    }
    uint32_t nfree, nwaiting;
    ro__grant_pool_counts((ro_grant_pool_t *)&p->pool, &nfree, &nwaiting);
    assert_int_equal(nfree, p->nsegs);
    assert_int_equal(nwaiting, 0);
}

static void test_layout_discrete(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 4, 0), act = discrete(3);
    ro_seg_layout_t lay;
    /* A Gaussian asked for a discrete space: no mean, no log_std. */
    ro__seg_layout(&lay, 5, &obs, &act, true, 3);
    assert_int_equal(lay.T, 5);
    assert_int_equal(lay.obs_dim, 4);
    assert_int_equal(lay.act_dim, 1);
    assert_int_equal(lay.obs_ndim, 1);
    assert_int_equal(lay.obs_shape[0], 4);
    assert_true(lay.discrete);
    assert_false(lay.gaussian);
    assert_int_equal(lay.max_n, 3);
    /* Each column for 5 x 3 rows (and 15 final observations), rounded up
     * to 64 bytes: obs 240 -> 256, final_obs 240 -> 256, the 11 others
     * (60 bytes or fewer) 64 each. */
    assert_int_equal(lay.bytes, 256 + 11 * 64 + 256);
    const size_t A = SIZE_MAX;
    const size_t off[RO_SEG_NCOLS] = {0,   256, 320, A,   A,   384, 448, 512, 576,
                                      640, 704, 768, 832, 896, 960, A,   A};
    ro_seg_pool_t p;
    assert_int_equal(ro__seg_pool_init(&p, &lay, 3, false), 0);
    check_placement(&p, off);

    /* Bytes held now: t rows of n envs, k final observations. */
    ro_segment_t *s = &p.segs[1];
    s->t = 2;
    s->n = 3;
    s->nfinal = 1;
    const size_t want[RO_SEG_NCOLS] = {96, 24, 24, 0, 0, 24, 6, 6, 6, 24, 24, 16, 48, 4, 16, 0, 0};
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_int_equal(ro__seg_col_bytes(s, c), want[c]);
    s->t = 0;
    s->nfinal = 0;
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_int_equal(ro__seg_col_bytes(s, c), c == RO_SEG_NEXT_OBS ? 48 : 0);
    ro__seg_pool_free(&p);
}

static void test_layout_box_gaussian(void **state)
{
    (void)state;
    ro_space_t obs = box(2, 2, 3), act = box(1, 2, 0);
    ro_seg_layout_t lay;
    ro__seg_layout(&lay, 3, &obs, &act, true, 3);
    assert_int_equal(lay.obs_dim, 6);
    assert_int_equal(lay.obs_ndim, 2);
    assert_int_equal(lay.obs_shape[0], 2);
    assert_int_equal(lay.obs_shape[1], 3);
    assert_int_equal(lay.act_dim, 2);
    assert_false(lay.discrete);
    assert_true(lay.gaussian);
    /* 3 x 3 rows: obs 216 -> 256, action 72 -> 128, logp 36 -> 64, mean
     * 72 -> 128, log_std 24 -> 64, reward .. policy_version 64 each (7),
     * next_obs 72 -> 128, final_index 36 -> 64, final_obs 216 -> 256. */
    assert_int_equal(lay.bytes, 256 + 128 + 64 + 128 + 64 + 7 * 64 + 128 + 64 + 256);
    const size_t A = SIZE_MAX;
    const size_t off[RO_SEG_NCOLS] = {0,   256, 384,  448,  576,  640,  704, 768, 832,
                                      896, 960, 1024, 1088, 1216, 1280, A,   A};
    ro_seg_pool_t p;
    assert_int_equal(ro__seg_pool_init(&p, &lay, 2, false), 0);
    check_placement(&p, off);
    ro_segment_t *s = &p.segs[0];
    s->t = 3;
    s->n = 2;
    s->nfinal = 2;
    const size_t want[RO_SEG_NCOLS] = {144, 48, 24, 48, 24, 24, 6, 6, 6,
                                       24,  24, 24, 48, 8,  48, 0, 0};
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_int_equal(ro__seg_col_bytes(s, c), want[c]);
    ro__seg_pool_free(&p);

    /* The same box without a Gaussian policy: no mean, no log_std. */
    ro__seg_layout(&lay, 3, &obs, &act, false, 3);
    assert_false(lay.gaussian);
    assert_int_equal(lay.bytes, 256 + 128 + 64 + 7 * 64 + 128 + 64 + 256);
    const size_t off2[RO_SEG_NCOLS] = {0,   256, 384, A,   A,    448,  512, 576, 640,
                                       704, 768, 832, 896, 1024, 1088, A,   A};
    assert_int_equal(ro__seg_pool_init(&p, &lay, 1, false), 0);
    check_placement(&p, off2);
    ro__seg_pool_free(&p);
}

static void test_column_names(void **state)
{
    (void)state;
    static const char *const names[RO_SEG_NCOLS] = {
        "obs",        "action",      "logp",      "mean",    "log_std", "reward",
        "terminated", "truncated",   "is_first",  "episode", "step",    "policy_version",
        "next_obs",   "final_index", "final_obs", "state/h", "state/c",
    };
    for (int c = 0; c < RO_SEG_NCOLS; c++)
        assert_string_equal(ro__seg_col_name(c), names[c]);
}

/* A recurrent policy's state columns: [n, H] each, after the others; a
 * GRU has no state/c. */
static void test_state_columns(void **state)
{
    (void)state;
    ro_space_t obs = box(1, 4, 0), act = discrete(3);
    ro_seg_layout_t lay;
    char cell[16];
    ro__seg_layout(&lay, 5, &obs, &act, false, 3);
    const size_t plain = lay.bytes;
    ro__seg_layout_cell(&lay, cell, sizeof cell);
    assert_string_equal(cell, "");
    ro__seg_layout_state(&lay, 5, true); /* 3 rows x 5 floats: 60 -> 64 bytes each */
    assert_int_equal(lay.bytes, plain + 2 * 64);
    ro__seg_layout_cell(&lay, cell, sizeof cell);
    assert_string_equal(cell, "lstm:5");
    ro_seg_pool_t p;
    assert_int_equal(ro__seg_pool_init(&p, &lay, 1, false), 0);
    ro_segment_t *s = &p.segs[0];
    assert_ptr_equal(s->col[RO_SEG_STATE_H], (char *)s->mem + plain);
    assert_ptr_equal(s->col[RO_SEG_STATE_C], (char *)s->mem + plain + 64);
    s->n = 2;
    uint32_t shape[4];
    assert_int_equal(ro__seg_col_shape(s, RO_SEG_STATE_C, shape), 2);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 5);
    assert_int_equal(ro__seg_col_bytes(s, RO_SEG_STATE_H), 40);
    ro__seg_pool_free(&p);
    ro__seg_layout(&lay, 5, &obs, &act, false, 3);
    ro__seg_layout_state(&lay, 7, false);
    assert_int_equal(lay.bytes, plain + 128); /* 3 x 7 x 4 = 84 -> 128 */
    ro__seg_layout_cell(&lay, cell, sizeof cell);
    assert_string_equal(cell, "gru:7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_discrete),
        cmocka_unit_test(test_layout_box_gaussian),
        cmocka_unit_test(test_column_names),
        cmocka_unit_test(test_state_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
