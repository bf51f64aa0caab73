/*
 * The spin-or-sleep rule of a waiter (src/runtime/spin_budget.c), as the
 * pure function it is: a history of round trips and spin outcomes in, the
 * next wait's spin budget out. No clock, no thread: each case feeds the
 * samples a waiter would and checks the budgets the rule gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runtime/spin_budget.h"

#define US 1000u
#define CAP (200u * US)

/* wait_hit: one wait that spun and was answered after rtt. */
static void wait_hit(ro_spin_budget_t *s, uint64_t rtt)
{
    uint64_t b = ro__spin_budget_next(s);
    assert_true(b > 0);
    ro__spin_budget_record(s, b, rtt, true);
}

/* wait_miss: one wait that spun, ran out and slept until rtt. */
static void wait_miss(ro_spin_budget_t *s, uint64_t rtt)
{
    uint64_t b = ro__spin_budget_next(s);
    assert_true(b > 0);
    ro__spin_budget_record(s, b, rtt, false);
}

/* wait_blocked: one wait that did not spin (its budget must be 0). */
static void wait_blocked(ro_spin_budget_t *s, uint64_t rtt)
{
    uint64_t b = ro__spin_budget_next(s);
    assert_int_equal(b, 0);
    ro__spin_budget_record(s, b, rtt, false);
}

static void test_cap_0_never_spins(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, 0, RO_SPIN_FIT);
    for (int i = 0; i < 10; i++)
        wait_blocked(&s, 5 * US);
    assert_int_equal(s.blocked, 10);
    assert_int_equal(s.hits + s.misses, 0);
}

static void test_short_round_trips_spin_twice_their_length(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, CAP, RO_SPIN_FIT);
    assert_int_equal(ro__spin_budget_next(&s), CAP); /* no history: up to the cap */
    ro__spin_budget_record(&s, CAP, 40 * US, true);
    assert_int_equal(s.rtt_ns, 40 * US); /* the first sample is the history */
    assert_int_equal(ro__spin_budget_next(&s), 2 * 40 * US + RO_SPIN_SLACK_NS);
    ro__spin_budget_record(&s, 90 * US, 40 * US, true);
    /* A slower answer moves the average by a quarter of the difference. */
    wait_hit(&s, 80 * US);
    assert_int_equal(s.rtt_ns, 50 * US);
    assert_int_equal(ro__spin_budget_next(&s), 2 * 50 * US + RO_SPIN_SLACK_NS);
    ro__spin_budget_record(&s, 110 * US, 50 * US, true);
    /* Round trips near the cap: the budget stops at the cap. */
    for (int i = 0; i < 40; i++)
        wait_hit(&s, 150 * US);
    assert_int_equal(ro__spin_budget_next(&s), CAP);
    assert_int_equal(s.hits, 44);
    assert_int_equal(s.misses, 0);
}

static void test_long_round_trips_block_until_they_shorten(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, CAP, RO_SPIN_FIT);
    ro__spin_budget_record(&s, ro__spin_budget_next(&s), 3000 * US, false); /* a loaded CPU */
    assert_int_equal(s.misses, 1);
    /* Over the cap: the waits block, and still sample the round trip. */
    int blocked = 0;
    while (s.rtt_ns > CAP) {
        wait_blocked(&s, 30 * US);
        blocked++;
    }
    /* 3000 us decays by 3/4 a wait towards 30 us: 10 waits to pass 200. */
    assert_int_equal(blocked, 10);
    assert_int_equal(s.blocked, 10);
    uint64_t b = ro__spin_budget_next(&s); /* short again: spinning is back */
    assert_true(b > 0 && b <= CAP);
    ro__spin_budget_record(&s, b, 30 * US, true);
    assert_int_equal(s.hits, 1);
    /* A sample past a second counts as one second (no overflow of 2 x rtt). */
    wait_hit(&s, UINT64_MAX);
    assert_true(s.rtt_ns <= RO_SPIN_SAMPLE_MAX);
    wait_blocked(&s, 0); /* a zero sample is a sample, not "no history" */
    assert_true(s.rtt_ns > 0);
}

static void test_missing_spins_rest_then_probe(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, CAP, RO_SPIN_FIT);
    wait_hit(&s, 40 * US);
    /* Misses whose round trips stay short (the spin delays the answer it
     * awaits: oversubscribed CPUs). A hit in between clears the streak. */
    for (uint32_t i = 0; i < RO_SPIN_MISS_STREAK - 1; i++)
        wait_miss(&s, 60 * US);
    wait_hit(&s, 40 * US);
    for (uint32_t i = 0; i < RO_SPIN_MISS_STREAK - 1; i++)
        wait_miss(&s, 60 * US);
    assert_int_equal(s.quiet, 0);
    wait_miss(&s, 60 * US); /* the streak's last */
    for (uint32_t i = 0; i < RO_SPIN_REST_MIN; i++)
        wait_blocked(&s, 60 * US);
    /* The rest is over: one probe. It misses: the next rest is twice as
     * long, at once (no streak needed). */
    wait_miss(&s, 60 * US);
    for (uint32_t i = 0; i < 2 * RO_SPIN_REST_MIN; i++)
        wait_blocked(&s, 60 * US);
    wait_miss(&s, 60 * US);
    for (uint32_t i = 0; i < 4 * RO_SPIN_REST_MIN; i++)
        wait_blocked(&s, 60 * US);
    /* This probe is answered: the CPUs are free again; the rest is back
     * to its shortest, the streak cleared. */
    wait_hit(&s, 40 * US);
    assert_int_equal(s.rest, RO_SPIN_REST_MIN);
    for (uint32_t i = 0; i < RO_SPIN_MISS_STREAK; i++)
        wait_miss(&s, 60 * US);
    for (uint32_t i = 0; i < RO_SPIN_REST_MIN; i++)
        wait_blocked(&s, 60 * US);
    wait_hit(&s, 40 * US);
}

static void test_rests_stop_growing_at_the_longest(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, CAP, RO_SPIN_FIT);
    for (uint32_t i = 0; i < RO_SPIN_MISS_STREAK; i++)
        wait_miss(&s, 60 * US);
    uint32_t rest = RO_SPIN_REST_MIN;
    for (int k = 0; k < 12; k++) {
        assert_int_equal(s.quiet, rest);
        for (uint32_t i = 0; i < rest; i++)
            wait_blocked(&s, 60 * US);
        wait_miss(&s, 60 * US);
        rest = rest * 2 > RO_SPIN_REST_MAX ? RO_SPIN_REST_MAX : rest * 2;
    }
    assert_int_equal(s.quiet, RO_SPIN_REST_MAX);
}

static void test_whole_spins_the_cap_and_never_rests(void **state)
{
    (void)state;
    ro_spin_budget_t s;
    ro__spin_budget_init(&s, CAP, RO_SPIN_WHOLE);
    wait_hit(&s, 20 * US);
    assert_int_equal(ro__spin_budget_next(&s), CAP); /* not 2 x 20 us + slack */
    ro__spin_budget_record(&s, CAP, 20 * US, true);
    /* Misses in a row (a slow peer's commands) bring no rest. */
    for (uint32_t i = 0; i < 4 * RO_SPIN_MISS_STREAK; i++)
        wait_miss(&s, 60 * US);
    assert_int_equal(s.quiet, 0);
    assert_int_equal(s.misses, 4 * RO_SPIN_MISS_STREAK);
    /* Waits longer than the cap (an idle caller) block at once, as FIT's. */
    ro__spin_budget_record(&s, ro__spin_budget_next(&s), 3000 * US, false);
    wait_blocked(&s, 3000 * US);
    assert_int_equal(s.blocked, 1);
    while (s.rtt_ns > CAP)
        wait_blocked(&s, 30 * US);
    assert_int_equal(ro__spin_budget_next(&s), CAP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_spins_the_cap_and_never_rests),
        cmocka_unit_test(test_cap_0_never_spins),
        cmocka_unit_test(test_short_round_trips_spin_twice_their_length),
        cmocka_unit_test(test_long_round_trips_block_until_they_shorten),
        cmocka_unit_test(test_missing_spins_rest_then_probe),
        cmocka_unit_test(test_rests_stop_growing_at_the_longest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
