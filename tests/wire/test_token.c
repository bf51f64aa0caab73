/*
 * Token files (src/wire/token.c): one line of 1 to RO_TOKEN_MAX bytes, its
 * trailing whitespace trimmed; a second line, a control character, an
 * empty or too long file are refused with one line naming the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "tmpdir_fixture.h"
#include "wire/token.h"

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("token");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove();
}

static int read_token(const char *content, size_t len, char *out, char *err)
{
    char path[300];
    snprintf(path, sizeof path, "%s/token", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(content, 1, len, f), len);
    fclose(f);
    return ro__token_read(path, out, RO_TOKEN_MAX + 2, err, 256);
}

static void test_one_line(void **state)
{
    (void)state;
    char tok[RO_TOKEN_MAX + 2], err[256];
    assert_int_equal(read_token("s3cret\n", 7, tok, err), 0);
    assert_string_equal(tok, "s3cret");
    assert_int_equal(read_token("s3cret \t\r\n", 10, tok, err), 0);
    assert_string_equal(tok, "s3cret");
    assert_int_equal(read_token("with space", 10, tok, err), 0);
    assert_string_equal(tok, "with space");
}

static void test_refused(void **state)
{
    (void)state;
    char tok[RO_TOKEN_MAX + 2], err[256];
    const char *bad[] = {"first\nsecond\n", "first\r\nsecond", "a\x1b[2Jb", "\n", "", "a\0b"};
    size_t lens[] = {13, 14, 7, 1, 0, 3};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(read_token(bad[i], lens[i], tok, err), RO_EINVAL);
        assert_non_null(strstr(err, "expected one line of 1 to 254 characters"));
        assert_non_null(strstr(err, "--token-file '"));
    }
    char big[RO_TOKEN_MAX + 2];
    memset(big, 'x', sizeof big);
    assert_int_equal(read_token(big, sizeof big, tok, err), RO_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_line),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
