/* Seeded streams (src/runtime/rng.c): the node seed is the run seed itself
 * for node index 0 (recordings from before node indices replay unchanged)
 * and a mix of (run seed, node index) otherwise, and a fresh seed comes from
 * getrandom(2), wrapped here (-Wl,--wrap=getrandom) to count its calls and
 * to make it fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "runtime/error.h"
#include "runtime/rng.h"

/* What the wrapped getrandom does: 0 pass through, else fail with it; a
 * number of EINTRs first; how many calls it saw. */
static int fail_errno;
static int eintr_first;
static int calls;

ssize_t __real_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags)
{
    calls++;
    if (eintr_first > 0) {
        eintr_first--;
        errno = EINTR;
        return -1;
    }
    if (fail_errno) {
        errno = fail_errno;
        return -1;
    }
    return __real_getrandom(buf, len, flags);
}

static int reset_wrap(void **state)
{
    (void)state;
    fail_errno = eintr_first = calls = 0;
    return 0;
}

static void test_node_zero_is_the_run_seed(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, 5, 0x123456789abcdefull, UINT64_MAX};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        assert_true(ro__node_seed(seeds[i], 0) == seeds[i]);
        /* So env j's streams are those of every run before node indices. */
        assert_true(ro__seed_mix(ro__node_seed(seeds[i], 0), 7, RO_STREAM_ENV) ==
                    ro__seed_mix(seeds[i], 7, RO_STREAM_ENV));
    }
}

static void test_other_nodes_mix_the_index(void **state)
{
    (void)state;
    /* The documented derivation, exactly. */
    assert_true(ro__node_seed(42, 3) == ro__seed_mix(42, 3, RO_STREAM_NODE));
    assert_true(ro__node_seed(42, UINT32_MAX) == ro__seed_mix(42, UINT32_MAX, RO_STREAM_NODE));
    /* Nodes 0..63 of one run seed: 64 different node seeds, and their env
     * 0 streams differ too. */
    uint64_t s[64], e[64];
    for (uint32_t k = 0; k < 64; k++) {
        s[k] = ro__node_seed(1, k);
        e[k] = ro__seed_mix(s[k], 0, RO_STREAM_ENV);
    }
    for (int a = 0; a < 64; a++)
        for (int b = a + 1; b < 64; b++) {
            assert_true(s[a] != s[b]);
            assert_true(e[a] != e[b]);
        }
    /* Another run seed, another node seed for the same index. */
    assert_true(ro__node_seed(1, 1) != ro__node_seed(2, 1));
}

static void test_seed_mix_is_fixed(void **state)
{
    (void)state;
    /* Recordings hold only the run seed and node index: the derivation must
     * never change. Values pinned from this implementation (and from a
     * Python copy of splitmix64, docs/replay.md). */
    assert_true(ro__seed_mix(1, 0, RO_STREAM_ENV) == 0x52e79a7e85c58622ull);
    assert_true(ro__node_seed(1, 3) == 0x0f16d8a09eff5a52ull);
    assert_true(ro__seed_mix(ro__node_seed(1, 3), 0, RO_STREAM_ENV) == 0xab27f47ff8547a5dull);
    assert_true(ro__seed_mix(1, 0, RO_STREAM_ENV) != ro__seed_mix(1, 0, RO_STREAM_ACTION));
}

static void test_random_seed(void **state)
{
    (void)state;
    char err[256] = "";
    uint64_t a = 0, b = 0;
    assert_int_equal(ro__random_seed(&a, err, sizeof err), 0);
    assert_int_equal(ro__random_seed(&b, err, sizeof err), 0);
    assert_true(a != b); /* 2^-64 */
    assert_int_equal(calls, 2);
}

static void test_random_seed_retries_eintr(void **state)
{
    (void)state;
    char err[256] = "";
    uint64_t a = 0;
    eintr_first = 2;
    assert_int_equal(ro__random_seed(&a, err, sizeof err), 0);
    assert_int_equal(calls, 3);
}

static void test_random_seed_failure_says_why(void **state)
{
    (void)state;
    char err[256] = "";
    uint64_t a = 77;
    fail_errno = ENOSYS;
    assert_int_equal(ro__random_seed(&a, err, sizeof err), RO_EIO);
    assert_true(a == 77); /* untouched */
    assert_non_null(strstr(err, "getrandom"));
    assert_non_null(strstr(err, strerror(ENOSYS)));
    assert_non_null(strstr(err, "--seed S"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_zero_is_the_run_seed),
        cmocka_unit_test(test_other_nodes_mix_the_index),
        cmocka_unit_test(test_seed_mix_is_fixed),
        cmocka_unit_test_setup(test_random_seed, reset_wrap),
        cmocka_unit_test_setup(test_random_seed_retries_eintr, reset_wrap),
        cmocka_unit_test_setup(test_random_seed_failure_says_why, reset_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
