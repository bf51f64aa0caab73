/* Tests of the remote learner's state table (src/policy/state_table.c):
 * which state a row's step starts from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "policy/state_table.h"

#define F 3

/* step runs row's step k: takes its input into in, "computes" out = in +
 * 1 + k, and commits it if answered. */
static void step(ro_state_table_t *t, uint32_t row, uint64_t k, bool first, bool answered,
                 float *in)
{
    float out[F];
    ro__state_table_take(t, row, k, first, in);
    for (int i = 0; i < F; i++)
        out[i] = in[i] + 1.0f + (float)k;
    if (answered)
        ro__state_table_commit(t, row, k, in, out);
}

static void test_rule(void **state)
{
    (void)state;
    ro_state_table_t t;
    assert_int_equal(ro__state_table_init(&t, 4, F), 0);
    float in[F];
    const float zero[F] = {0};
    step(&t, 1, 0, true, true, in); /* an episode starts: zeros */
    assert_memory_equal(in, zero, sizeof in);
    step(&t, 1, 1, false, true, in); /* the next step: what step 0 left (1) */
    assert_true(in[0] == 1.0f && in[2] == 1.0f);
    step(&t, 1, 2, false, true, in); /* 1 + 1 + 1 = 3 */
    assert_true(in[0] == 3.0f);
    step(&t, 1, 2, false, true, in); /* step 2 again (a lost answer): from what it started from */
    assert_true(in[0] == 3.0f);
    step(&t, 1, 3, false, false, in); /* 3 + 1 + 2 = 6; not answered (an old connection's) */
    assert_true(in[0] == 6.0f);
    step(&t, 1, 3, false, true, in); /* so step 3 again starts from the same state */
    assert_true(in[0] == 6.0f);
    assert_int_equal(t.resets, 0);
    step(&t, 1, 9, false, true, in); /* steps 4..8 went elsewhere: no stale state, a reset */
    assert_memory_equal(in, zero, sizeof in);
    assert_int_equal(t.resets, 1);
    step(&t, 1, 10, true, true, in); /* an episode start: zeros, not a reset */
    assert_memory_equal(in, zero, sizeof in);
    step(&t, 2, 5, false, true, in); /* a row never served, mid-episode */
    assert_memory_equal(in, zero, sizeof in);
    assert_int_equal(t.resets, 2);
    ro__state_table_clear(&t); /* the node restarted */
    step(&t, 1, 11, false, true, in);
    assert_memory_equal(in, zero, sizeof in);
    assert_int_equal(t.resets, 3);
    step(&t, 0, 0, false, true, in); /* rows are apart: row 0 untouched so far */
    assert_memory_equal(in, zero, sizeof in);
    ro__state_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rule)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
