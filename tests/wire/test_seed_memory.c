/*
 * SEED mode's shared-memory layout (src/wire/seed_memory.c): the columns a
 * node lays out are aligned, disjoint and inside their memory, and what a
 * learner accepts from a welcome is exactly that; a column outside its
 * memory, misaligned, or memory larger than the envs need is refused
 * naming it; a frame's ranges are checked against the envs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "runtime/error.h"
#include "wire/seed_memory.h"

static void wire_of(const ro_seed_mem_layout_t *l, Rollout__V1__SeedMemory *m)
{
    Rollout__V1__SeedMemory init = ROLLOUT__V1__SEED_MEMORY__INIT;
    *m = init;
    ro__seed_mem_to_wire(l, 7, 8, m);
}

static void test_layout_is_aligned_disjoint_and_inside(void **state)
{
    (void)state;
    static const uint32_t envs[] = {1, 3, 64, 1000, 4096};
    static const uint32_t dims[] = {1, 4, 17, 7056};
    for (size_t i = 0; i < sizeof envs / sizeof *envs; i++)
        for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
            ro_seed_mem_layout_t l;
            ro__seed_mem_layout(&l, envs[i], dims[k], 3);
            uint64_t n = envs[i], rows = n * dims[k] * 4;
            struct {
                uint64_t off, len, align;
            } col[] = {{l.obs_off, rows, 64},
                       {l.final_off, rows, 64},
                       {l.step_off, n * 8, 64},
                       {l.reward_off, n * 4, 64},
                       {l.flags_off, n, 64}};
            for (size_t a = 0; a < 5; a++) {
                assert_int_equal(col[a].off % col[a].align, 0);
                assert_true(col[a].off + col[a].len <= l.obs_bytes);
                for (size_t b = a + 1; b < 5; b++) /* disjoint */
                    assert_true(col[a].off + col[a].len <= col[b].off ||
                                col[b].off + col[b].len <= col[a].off);
            }
            assert_int_equal(l.obs_bytes % 4096, 0);
            assert_int_equal(l.act_bytes % 4096, 0);
            assert_true(l.act_off + n * 3 * 4 <= l.act_bytes);
        }
}

static void test_learner_accepts_what_the_node_lays_out(void **state)
{
    (void)state;
    ro_seed_mem_layout_t l, got;
    ro__seed_mem_layout(&l, 256, 4, 1);
    Rollout__V1__SeedMemory m;
    wire_of(&l, &m);
    assert_int_equal(m.obs_fd, 7);
    assert_int_equal(m.act_fd, 8);
    char err[256] = "";
    assert_int_equal(ro__seed_mem_check(&m, 256, 4, 1, &got, err, sizeof err), 0);
    assert_memory_equal(&l, &got, sizeof l);
}

static void expect_refused(const Rollout__V1__SeedMemory *m, const char *what)
{
    ro_seed_mem_layout_t got;
    char err[256] = "";
    assert_int_equal(ro__seed_mem_check(m, 256, 4, 1, &got, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, what));
}

static void test_columns_outside_or_misaligned_are_refused(void **state)
{
    (void)state;
    ro_seed_mem_layout_t l;
    ro__seed_mem_layout(&l, 256, 4, 1);
    Rollout__V1__SeedMemory m;
    wire_of(&l, &m);
    m.obs_offset = l.obs_bytes - 8; /* runs past the end */
    expect_refused(&m, "the obs column");
    wire_of(&l, &m);
    m.final_obs_offset = UINT64_MAX - 3; /* no wrap-around */
    expect_refused(&m, "the final obs column");
    wire_of(&l, &m);
    m.step_offset += 4; /* uint64 at a 4-byte offset */
    expect_refused(&m, "the step column");
    wire_of(&l, &m);
    m.reward_offset = l.obs_bytes;
    expect_refused(&m, "the reward column");
    wire_of(&l, &m);
    m.flags_offset = l.obs_bytes;
    expect_refused(&m, "the flags column");
    wire_of(&l, &m);
    m.act_offset = l.act_bytes - 4;
    expect_refused(&m, "the action column");
    /* More memory than 256 envs need: nothing a peer says sizes a mapping. */
    wire_of(&l, &m);
    m.obs_bytes = (uint64_t)1 << 40;
    expect_refused(&m, "shared memory of");
    wire_of(&l, &m);
    m.act_bytes = 0;
    expect_refused(&m, "shared memory of");
}

static void test_frame_ranges(void **state)
{
    (void)state;
    char err[256] = "";
    uint32_t rows = 0;
    const uint32_t ok[] = {0, 32, 64, 32, 96, 160};
    assert_int_equal(ro__seed_mem_rows(ok, 6, 256, &rows, err, sizeof err), 0);
    assert_int_equal(rows, 224);
    const uint32_t odd[] = {0, 32, 64};
    assert_int_equal(ro__seed_mem_rows(odd, 3, 256, &rows, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "not (first, count) pairs"));
    assert_int_equal(ro__seed_mem_rows(ok, 0, 256, &rows, err, sizeof err), RO_EPROTO);
    const uint32_t empty[] = {3, 0};
    assert_int_equal(ro__seed_mem_rows(empty, 2, 256, &rows, err, sizeof err), RO_EPROTO);
    const uint32_t past[] = {250, 7};
    assert_int_equal(ro__seed_mem_rows(past, 2, 256, &rows, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "not inside [0, 256)"));
    const uint32_t wrap[] = {4, UINT32_MAX};
    assert_int_equal(ro__seed_mem_rows(wrap, 2, 256, &rows, err, sizeof err), RO_EPROTO);
    /* Each inside, more than the envs in all (a row twice). */
    const uint32_t twice[] = {0, 200, 100, 100};
    assert_int_equal(ro__seed_mem_rows(twice, 4, 256, &rows, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "the node has 256"));
}

static void test_flags_byte(void **state)
{
    (void)state;
    assert_int_equal(ro__seed_mem_flags(false, false, false, false), 0);
    assert_int_equal(ro__seed_mem_flags(true, false, true, false),
                     RO_SEEDMEM_TERMINATED | RO_SEEDMEM_EPISODE_START);
    assert_int_equal(ro__seed_mem_flags(false, true, false, true),
                     RO_SEEDMEM_TRUNCATED | RO_SEEDMEM_HAS_FINAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_is_aligned_disjoint_and_inside),
        cmocka_unit_test(test_learner_accepts_what_the_node_lays_out),
        cmocka_unit_test(test_columns_outside_or_misaligned_are_refused),
        cmocka_unit_test(test_frame_ranges),
        cmocka_unit_test(test_flags_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
