/*
 * The gate (src/wire/gate.c): connections that have not said hello wait
 * apart, held to RO_HELLO_MAX_FRAME; when every slot is taken the one that
 * waited longest is named to drop (never one already closing, never one
 * that said hello); deadlines are found oldest first; leaving is
 * idempotent. Pure list work: no socket is needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/gate.h"

#define N 40

static ro_conn_t conns[N];

static void reset(void)
{
    memset(conns, 0, sizeof conns);
    for (int i = 0; i < N; i++)
        conns[i].rd.max_frame = 16u << 20;
}

static void test_slots_drop_the_oldest(void **state)
{
    (void)state;
    reset();
    ro_gate_t g;
    ro__gate_init(&g, 2, 5.0); /* 2 slots asked: at least RO_GATE_MIN_SLOTS */
    assert_int_equal(g.slots, RO_GATE_MIN_SLOTS);
    for (uint32_t i = 0; i < RO_GATE_MIN_SLOTS; i++) {
        assert_null(ro__gate_admit(&g, &conns[i], 1000 + i));
        assert_int_equal(conns[i].rd.max_frame, RO_HELLO_MAX_FRAME);
    }
    /* Full: the next one names the oldest. */
    ro_conn_t *c = &conns[RO_GATE_MIN_SLOTS];
    assert_ptr_equal(ro__gate_admit(&g, c, 5000), &conns[0]);
    ro__gate_leave(&g, &conns[0]); /* its owner dropped it */
    ro__gate_leave(&g, &conns[0]); /* idempotent */
    assert_int_equal(g.waiting, RO_GATE_MIN_SLOTS);
    /* One that is closing is on its way out: it does not count, and is
     * never named again: the next oldest is. */
    conns[1].closing = true;
    assert_null(ro__gate_admit(&g, &conns[RO_GATE_MIN_SLOTS + 1], 5001));
    assert_ptr_equal(ro__gate_admit(&g, &conns[RO_GATE_MIN_SLOTS + 2], 5002), &conns[2]);
    ro__gate_leave(&g, &conns[2]);
    /* One says hello: it leaves with its real limit, and frees a slot. */
    ro__gate_pass(&g, &conns[5], 1u << 20);
    assert_false(conns[5].gated);
    assert_int_equal(conns[5].rd.max_frame, 1u << 20);
    assert_null(ro__gate_admit(&g, &conns[RO_GATE_MIN_SLOTS + 3], 5003));
}

static void test_deadlines_oldest_first(void **state)
{
    (void)state;
    reset();
    ro_gate_t g;
    ro__gate_init(&g, 64, 1.0);
    const uint64_t s = 1000000000ull;
    for (int i = 0; i < 4; i++)
        assert_null(ro__gate_admit(&g, &conns[i], (uint64_t)i * s));
    assert_null(ro__gate_expired(&g, s)); /* the first has waited exactly 1 s */
    assert_ptr_equal(ro__gate_expired(&g, 2 * s + 1), &conns[0]);
    ro__gate_leave(&g, &conns[0]);
    assert_ptr_equal(ro__gate_expired(&g, 2 * s + 1), &conns[1]);
    conns[1].closing = true; /* being closed: skipped */
    assert_null(ro__gate_expired(&g, 2 * s + 1));
    assert_ptr_equal(ro__gate_expired(&g, 4 * s), &conns[2]);
    /* No deadline: nothing ever expires. */
    ro_gate_t forever;
    ro__gate_init(&forever, 64, 0);
    reset();
    assert_null(ro__gate_admit(&forever, &conns[0], 0));
    assert_null(ro__gate_expired(&forever, UINT64_MAX));
}

static void test_leave_anywhere_in_the_list(void **state)
{
    (void)state;
    reset();
    ro_gate_t g;
    ro__gate_init(&g, 64, 1.0);
    for (int i = 0; i < 5; i++)
        ro__gate_admit(&g, &conns[i], (uint64_t)i);
    ro__gate_leave(&g, &conns[2]); /* middle */
    ro__gate_leave(&g, &conns[4]); /* newest */
    ro__gate_leave(&g, &conns[0]); /* oldest */
    assert_int_equal(g.waiting, 2);
    assert_ptr_equal(ro__gate_first(&g), &conns[1]);
    assert_ptr_equal(ro__gate_next(&conns[1]), &conns[3]);
    assert_null(ro__gate_next(&conns[3]));
    assert_ptr_equal(g.conns.last, &conns[3].gate_link);
    assert_ptr_equal(conns[3].gate_link.prev, &conns[1].gate_link);
    ro__gate_leave(&g, &conns[1]);
    ro__gate_leave(&g, &conns[3]);
    assert_null(ro__gate_first(&g));
    assert_null(g.conns.last);
    assert_int_equal(g.waiting, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_drop_the_oldest),
        cmocka_unit_test(test_deadlines_oldest_first),
        cmocka_unit_test(test_leave_anywhere_in_the_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
