/*
 * Untrusted strings made safe to print (src/runtime/text.c): a log line
 * shows control characters and escapes as \xNN (no forged line, no
 * terminal sequence) and is capped; a JSON string is ASCII and parses
 * strictly whatever it held; NaN and infinities are null.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text.h"

static void test_log_escapes_and_caps(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(ro__text_log(out, sizeof out, "plain name-1", 100), "plain name-1");
    assert_string_equal(ro__text_log(out, sizeof out, "a\nb\x1b[2J\\c\x7f\xc3\xa9", 100),
                        "a\\x0ab\\x1b[2J\\\\c\\x7f\\xc3\\xa9");
    assert_string_equal(ro__text_log(out, sizeof out, NULL, 100), "");
    assert_string_equal(ro__text_log(out, sizeof out, "abcdefgh", 4), "abcd...");
    /* What does not fit the buffer is cut, and says so. */
    char small[12];
    assert_string_equal(ro__text_log(small, sizeof small, "0123456789abcdef", 100), "01234...");
    char tiny[16];
    ro__text_log(tiny, sizeof tiny, "\n\n\n\n\n\n", 100);
    assert_true(strlen(tiny) < sizeof tiny);
    assert_null(strchr(tiny, '\n'));
}

static char *json_of(const char *s, size_t max)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ro__json_string(f, s, max);
    fclose(f);
    return buf;
}

static void test_json_string(void **state)
{
    (void)state;
    const struct {
        const char *in, *want;
        size_t max;
    } cases[] = {
        {"cartpole", "\"cartpole\"", 100},
        {"a\"b\\c", "\"a\\\"b\\\\c\"", 100},
        {"line\nbreak\t\x01", "\"line\\u000abreak\\u0009\\u0001\"", 100},
        {"\xff\xfe utf?", "\"\\u00ff\\u00fe utf?\"", 100},
        {"abcdef", "\"abc...\"", 3},
        {NULL, "\"\"", 100},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = json_of(cases[i].in, cases[i].max);
        assert_string_equal(got, cases[i].want);
        for (const char *p = got; *p; p++)
            assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
        free(got);
    }
}

static void test_json_double(void **state)
{
    (void)state;
    const struct {
        double v;
        const char *want;
    } cases[] = {{22.5, "22.5"},     {-0.0, "-0"},        {NAN, "null"},
                 {INFINITY, "null"}, {-INFINITY, "null"}, {1e300, "1.0000000000000001e+300"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ro__json_double(f, cases[i].v);
        fclose(f);
        assert_string_equal(buf, cases[i].want);
        free(buf);
    }
}

/* ro__text_u64 writes exactly the digits snprintf("%llu") would, with no
 * NUL, and returns their end. */
static void test_text_u64(void **state)
{
    (void)state;
    const uint64_t cases[] = {0, 7, 10, 99, 100, 1234567890123ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[RO_TEXT_U64_MAX + 2], want[32];
        memset(got, '#', sizeof got);
        int n = snprintf(want, sizeof want, "%llu", (unsigned long long)cases[i]);
        char *end = ro__text_u64(got, cases[i]);
        assert_int_equal(end - got, n);
        assert_int_equal(*end, '#');
        *end = '\0';
        assert_string_equal(got, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_escapes_and_caps),
        cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_json_double),
        cmocka_unit_test(test_text_u64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
