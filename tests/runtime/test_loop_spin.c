/*
 * Bounded, adaptive loop spinning (src/runtime/loop_spin.c): an armed wait
 * keeps the loop polling (uv_run never blocks) until the answer comes or
 * the cap runs out; 8 spins in a row that run out make the next 256 waits
 * sleep at once, then spinning is tried again; an answer while spinning
 * resets the count; cap 0 never spins. Nothing here reads a clock: each
 * test waits for the counters the spinner keeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <uv.h>

#include "runtime/loop_spin.h"

/* Run the loop until the armed spin ran out (a miss was counted). */
static void run_until_miss(uv_loop_t *loop, ro_loop_spin_t *s)
{
    uint64_t before = s->misses;
    while (s->misses == before)
        uv_run(loop, UV_RUN_NOWAIT);
    assert_false(s->spinning);
}

static void close_loop(uv_loop_t *loop, ro_loop_spin_t *s)
{
    ro__loop_spin_close(s);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_armed_loop_polls_until_answered(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_loop_spin_t s;
    ro__loop_spin_init(&s, &loop, 100000);             /* far longer than this test */
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0); /* nothing active */
    ro__loop_spin_arm(&s);
    assert_true(s.spinning);
    /* With no other handle, a loop that would sleep forever returns at once
     * from each turn, still alive: it polls. */
    for (int i = 0; i < 100; i++)
        assert_int_not_equal(uv_run(&loop, UV_RUN_ONCE), 0);
    ro__loop_spin_arm(&s); /* already waiting: goes on */
    ro__loop_spin_answered(&s);
    assert_false(s.spinning);
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.misses, 0);
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0); /* nothing active again */
    ro__loop_spin_answered(&s);                        /* nothing armed: no-op */
    assert_int_equal(s.hits, 1);
    close_loop(&loop, &s);
}

static void test_misses_make_it_sleep_then_try_again(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_loop_spin_t s;
    ro__loop_spin_init(&s, &loop, 1); /* 1 us: every spin runs out */
    for (int i = 0; i < 7; i++) {
        ro__loop_spin_arm(&s);
        run_until_miss(&loop, &s);
        ro__loop_spin_answered(&s); /* late: not a hit */
    }
    assert_int_equal(s.misses, 7);
    assert_int_equal(s.hits, 0);
    /* An answer while spinning resets the streak: 7 more misses do not
     * stop it either. */
    ro__loop_spin_arm(&s);
    ro__loop_spin_answered(&s);
    assert_int_equal(s.hits, 1);
    for (int i = 0; i < 7; i++) {
        ro__loop_spin_arm(&s);
        run_until_miss(&loop, &s);
        ro__loop_spin_answered(&s);
    }
    ro__loop_spin_arm(&s);
    assert_true(s.spinning);
    run_until_miss(&loop, &s); /* the 8th in a row */
    ro__loop_spin_answered(&s);
    /* Now 256 waits sleep at once. */
    for (int i = 0; i < 256; i++) {
        ro__loop_spin_arm(&s);
        assert_false(s.spinning);
        assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
        ro__loop_spin_answered(&s);
    }
    ro__loop_spin_arm(&s); /* and then it tries again */
    assert_true(s.spinning);
    ro__loop_spin_answered(&s);
    assert_int_equal(s.hits, 2);
    close_loop(&loop, &s);
}

static void test_cap_0_never_spins(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    ro_loop_spin_t s;
    ro__loop_spin_init(&s, &loop, 0);
    ro__loop_spin_arm(&s);
    assert_false(s.spinning);
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
    ro__loop_spin_answered(&s);
    assert_int_equal(s.hits + s.misses, 0);
    close_loop(&loop, &s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_armed_loop_polls_until_answered),
        cmocka_unit_test(test_misses_make_it_sleep_then_try_again),
        cmocka_unit_test(test_cap_0_never_spins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
