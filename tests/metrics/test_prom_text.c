/* Prometheus' text format (src/metrics/prom_text.c): samples with and
 * without labels, label values escaped (a quote, a backslash or a newline
 * in an env's name must not forge a sample), cumulative histogram buckets
 * ending in +Inf with _sum and _count, and NaN as Prometheus spells it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/prom_text.h"

/* Runs fn(f) into a string (the caller frees it). */
static char *text_of(void (*fn)(FILE *f))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void samples(FILE *f)
{
    ro__prom_family(f, "rollout_steps_total", "counter", "Env steps");
    ro__prom_sample(f, "rollout_steps_total", "", 12345678901.0);
    ro__prom_sample(f, "rollout_x", "a=\"1\"", NAN);
    ro__prom_sample(f, "rollout_y", "", -INFINITY);
}

static void test_samples(void **state)
{
    (void)state;
    char *t = text_of(samples);
    assert_string_equal(t, "# HELP rollout_steps_total Env steps\n"
                           "# TYPE rollout_steps_total counter\n"
                           "rollout_steps_total 12345678901\n"
                           "rollout_x{a=\"1\"} NaN\n"
                           "rollout_y -Inf\n");
    free(t);
}

static void test_label_escaping(void **state)
{
    (void)state;
    char lab[128] = "";
    ro__prom_label(lab, sizeof lab, "node_index", "0");
    ro__prom_label(lab, sizeof lab, "env", "a\"b\\c\nd\x01");
    assert_string_equal(lab, "node_index=\"0\",env=\"a\\\"b\\\\c\\nd?\"");
    /* Too little room: cut, still one closed value, never past the end. */
    char small[24] = "";
    ro__prom_label(small, sizeof small, "env", "0123456789abcdefghijklmnop");
    assert_true(strlen(small) < sizeof small);
    assert_int_equal(small[strlen(small) - 1], '"');
    char none[6] = "";
    ro__prom_label(none, sizeof none, "environment", "x");
    assert_string_equal(none, "");
}

static void histo(FILE *f)
{
    static const double edges[] = {1, 10};
    ro_histo_t h;
    ro__histo_init(&h, edges, 2);
    ro__histo_add(&h, 0.5);
    ro__histo_add(&h, 5);
    ro__histo_add(&h, 10);
    ro__histo_add(&h, 50);
    ro__prom_histo(f, "rollout_r", "env=\"e\"", &h);
}

static void test_histogram(void **state)
{
    (void)state;
    char *t = text_of(histo);
    assert_string_equal(t, "rollout_r_bucket{env=\"e\",le=\"1\"} 1\n"
                           "rollout_r_bucket{env=\"e\",le=\"10\"} 3\n"
                           "rollout_r_bucket{env=\"e\",le=\"+Inf\"} 4\n"
                           "rollout_r_sum{env=\"e\"} 65.5\n"
                           "rollout_r_count{env=\"e\"} 4\n");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
