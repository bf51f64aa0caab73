/* Fixed-edge histograms (src/metrics/histo.c): which bucket a value lands
 * in (edges are inclusive upper bounds), NaN and infinities skipped, and a
 * merge equals counting both sets into one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "metrics/histo.h"

static void test_buckets(void **state)
{
    (void)state;
    static const double edges[] = {-1, 0, 10};
    ro_histo_t h;
    ro__histo_init(&h, edges, 3);
    const double v[] = {-5, -1, -0.5, 0, 3, 10, 10.5, 1e300};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        ro__histo_add(&h, v[i]);
    assert_int_equal(h.count[0], 2); /* -5, -1: (-inf, -1] */
    assert_int_equal(h.count[1], 2); /* -0.5, 0 */
    assert_int_equal(h.count[2], 2); /* 3, 10 */
    assert_int_equal(h.count[3], 2); /* 10.5, 1e300: above the last edge */
    assert_int_equal(h.n, 8);
    assert_true(h.min == -5 && h.max == 1e300);
    ro__histo_add(&h, NAN);
    ro__histo_add(&h, INFINITY);
    ro__histo_add(&h, -INFINITY);
    assert_int_equal(h.n, 8);
    assert_int_equal(h.skipped, 3);
    assert_true(isfinite(h.sum));
    ro__histo_reset(&h);
    assert_int_equal(h.n, 0);
    assert_ptr_equal(h.edges, edges);
}

static void test_merge_is_counting_both(void **state)
{
    (void)state;
    ro_histo_t a, b, both;
    ro__histo_init(&a, ro__histo_return_edges, ro__histo_return_nedges);
    ro__histo_init(&b, ro__histo_return_edges, ro__histo_return_nedges);
    ro__histo_init(&both, ro__histo_return_edges, ro__histo_return_nedges);
    for (int i = -3000; i < 3000; i += 7) {
        ro_histo_t *h = i % 2 ? &a : &b;
        ro__histo_add(h, i * 1.5);
        ro__histo_add(&both, i * 1.5);
    }
    ro_histo_t empty;
    ro__histo_init(&empty, ro__histo_return_edges, ro__histo_return_nedges);
    ro__histo_merge(&empty, &a);
    ro__histo_merge(&empty, &b);
    assert_int_equal(empty.n, both.n);
    assert_true(empty.min == both.min && empty.max == both.max);
    for (uint32_t i = 0; i <= both.nedges; i++)
        assert_int_equal(empty.count[i], both.count[i]);
    assert_true(fabs(empty.sum - both.sum) < 1e-6);
    /* The return edges hold Pendulum's and MuJoCo's returns, not just 0..500. */
    assert_true(ro__histo_return_nedges <= RO_HISTO_MAX_EDGES);
    assert_true(ro__histo_size_nedges <= RO_HISTO_MAX_EDGES);
    for (uint32_t i = 1; i < ro__histo_return_nedges; i++)
        assert_true(ro__histo_return_edges[i - 1] < ro__histo_return_edges[i]);
}

/* A shard's published histogram read by another: the same counts as a
 * private one, and an interval's (a later reading less an earlier one)
 * spans the edges of its non-empty buckets. */
static void test_published_and_intervals(void **state)
{
    (void)state;
    static const double edges[] = {0, 10, 100};
    ro_histo_pub_t p;
    ro__histo_pub_init(&p, 1);
    ro_histo_t mine, first, second, iv;
    ro__histo_init(&mine, edges, 3);
    for (int i = 0; i < 5; i++) {
        ro__histo_pub_add(&p, edges, 3, 5.0);
        ro__histo_add(&mine, 5.0);
    }
    ro__histo_pub_add(&p, edges, 3, NAN); /* not counted */
    ro__histo_init(&first, edges, 3);
    ro__histo_pub_read(&first, &p);
    assert_int_equal(first.n, 5);
    assert_int_equal(first.count[1], 5);
    assert_true(first.sum == mine.sum && first.sum_sq == mine.sum_sq);
    ro__histo_pub_add(&p, edges, 3, 50.0);
    ro__histo_pub_add(&p, edges, 3, 500.0);
    ro__histo_init(&second, edges, 3);
    ro__histo_pub_read(&second, &p);
    ro__histo_sub(&iv, &second, &first);
    assert_int_equal(iv.n, 2);
    assert_int_equal(iv.count[1], 0);
    assert_int_equal(iv.count[2], 1);
    assert_int_equal(iv.count[3], 1);
    assert_true(iv.sum == 550.0);
    assert_true(iv.min == 10 && iv.max == 100); /* (10, 100] and the open (100, inf) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_merge_is_counting_both),
        cmocka_unit_test(test_published_and_intervals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
