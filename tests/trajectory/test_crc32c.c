/* CRC-32C (src/trajectory/crc32c.c): the check value, the hardware and
 * table versions agree at every alignment, and an incremental CRC equals a
 * one-shot one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "trajectory/crc32c.h"

static void test_crc_check_value(void **state)
{
    (void)state;
    assert_int_equal(ro__crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ro__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(ro__crc32c(0, "", 0), 0u);
    /* Incremental == one shot; hardware == table, at every alignment. */
    uint8_t buf[1000];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 200; len += 7) {
            uint32_t a = ro__crc32c(0, buf + off, len);
            assert_int_equal(a, ro__crc32c_sw(0, buf + off, len));
            uint32_t b =
                ro__crc32c(ro__crc32c(0, buf + off, len / 2), buf + off + len / 2, len - len / 2);
            assert_int_equal(a, b);
        }
    /* 32 bytes of zeros: RFC 3720 B.4. */
    uint8_t z[32] = {0};
    assert_int_equal(ro__crc32c(0, z, 32), 0x8A9136AAu);
}

/* The CRC of any slice from the CRCs of two prefixes: crc(B) =
 * crc(A || B) ^ shift(crc(A), |B|), for slices of every length. */
static void test_shift_gives_slices(void **state)
{
    (void)state;
    enum { N = 70000 };
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    const size_t cuts[][2] = {{0, 0},   {0, 1}, {3, 4},     {17, 300},     {1, 65536},
                              {100, N}, {N, N}, {255, 511}, {4096, 69999}, {7, 263}};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t a = cuts[i][0], b = cuts[i][1];
        uint32_t fa = ro__crc32c(0, buf, a), fb = ro__crc32c(0, buf, b);
        assert_int_equal(fb ^ ro__crc32c_shift(fa, b - a), ro__crc32c(0, buf + a, b - a));
    }
    assert_int_equal(ro__crc32c_shift(0, 12345), 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_check_value),
        cmocka_unit_test(test_shift_gives_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
