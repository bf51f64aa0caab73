/* Varints (src/wire/varint.c), the length prefix of every frame, trajectory
 * record and weights file: values round-trip at every size boundary with
 * protobuf's exact bytes, a varint cut short asks for more bytes, and one
 * longer than 10 bytes or over 64 bits is malformed. The reader never reads
 * past its input (each case sits in a buffer of exactly its size, so an
 * ASan build catches a byte too far). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/varint.h"

/* get reads n bytes copied into a buffer of exactly n bytes. */
static int get(const uint8_t *p, size_t n, uint64_t *v)
{
    uint8_t *exact = malloc(n ? n : 1);
    assert_non_null(exact);
    if (n)
        memcpy(exact, p, n);
    int rc = ro__varint_get(exact, n, v);
    free(exact);
    return rc;
}

static void test_varint_round_trip(void **state)
{
    (void)state;
    const uint64_t values[] = {0,     1,     127,        128,        300,
                               16383, 16384, 1ull << 32, 1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint8_t b[RO_VARINT_MAX];
        size_t n = ro__varint_put(b, values[i]);
        uint64_t v = 0;
        assert_int_equal(ro__varint_get(b, n, &v), (int)n);
        assert_int_equal(v, values[i]);
        assert_int_equal(ro__varint_get(b, n - 1, &v), 0); /* cut short: more needed */
    }
}

/* Every size boundary: 7 bits per byte, 10 bytes for the top bit. */
static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(ro__varint_size(0), 1);
    for (unsigned k = 1; k < 64; k++) {
        uint64_t top = (1ull << k) - 1; /* k bits */
        size_t want = (k + 6) / 7;
        assert_int_equal(ro__varint_size(top), want);
        assert_int_equal(ro__varint_size(1ull << k), (k + 7) / 7); /* k + 1 bits */
        uint8_t b[RO_VARINT_MAX];
        assert_int_equal(ro__varint_put(b, top), want);
    }
    assert_int_equal(ro__varint_size(UINT64_MAX), RO_VARINT_MAX);
}

/* protobuf's own bytes (the encoding guide's examples). */
static void test_known_bytes(void **state)
{
    (void)state;
    uint8_t b[RO_VARINT_MAX];
    assert_int_equal(ro__varint_put(b, 1), 1);
    assert_int_equal(b[0], 0x01);
    assert_int_equal(ro__varint_put(b, 150), 2);
    assert_memory_equal(b, "\x96\x01", 2);
    assert_int_equal(ro__varint_put(b, 300), 2);
    assert_memory_equal(b, "\xac\x02", 2);
    assert_int_equal(ro__varint_put(b, UINT64_MAX), 10);
    assert_memory_equal(b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
    /* A padded (non-minimal) varint is still a varint, as protobuf reads it. */
    uint64_t v = 7;
    assert_int_equal(get((const uint8_t *)"\x80\x00", 2, &v), 2);
    assert_int_equal(v, 0);
    /* Bytes after the varint are not read. */
    assert_int_equal(get((const uint8_t *)"\x05\xff\xff", 3, &v), 1);
    assert_int_equal(v, 5);
}

/* Every strict prefix of a varint asks for more; nothing is an error. */
static void test_cut_short(void **state)
{
    (void)state;
    const uint64_t values[] = {128, 1ull << 35, 1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint8_t b[RO_VARINT_MAX];
        size_t n = ro__varint_put(b, values[i]);
        for (size_t cut = 0; cut < n; cut++) {
            uint64_t v = 42;
            assert_int_equal(get(b, cut, &v), 0);
            assert_int_equal(v, 42); /* untouched */
        }
    }
}

static void test_malformed(void **state)
{
    (void)state;
    uint64_t v = 42;
    uint8_t b[16];
    /* Ten bytes that all say "more follows": longer than any varint. */
    memset(b, 0x80, sizeof b);
    assert_int_equal(get(b, 10, &v), RO_EBADMSG);
    assert_int_equal(get(b, 16, &v), RO_EBADMSG);
    /* ... but nine of them are only a varint cut short. */
    assert_int_equal(get(b, 9, &v), 0);
    /* A tenth byte carrying more than bit 63 overflows. */
    for (unsigned x = 2; x < 0x80; x++) {
        memset(b, 0xff, 9);
        b[9] = (uint8_t)x;
        assert_int_equal(get(b, 10, &v), RO_EBADMSG);
    }
    /* A tenth byte of 1 is bit 63 exactly. */
    memset(b, 0x80, 9);
    b[9] = 0x01;
    assert_int_equal(get(b, 10, &v), 10);
    assert_int_equal(v, 1ull << 63);
    assert_int_equal(get(b, 10, &v), 10);
    /* Every byte value after nine continuation bytes: decoded or refused,
     * never more than 10 bytes read. */
    for (unsigned x = 0; x < 256; x++) {
        memset(b, 0xff, 9);
        b[9] = (uint8_t)x;
        int rc = get(b, 10, &v);
        assert_true(rc == RO_EBADMSG || (rc == 10 && x <= 1));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint_round_trip), cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_known_bytes),       cmocka_unit_test(test_cut_short),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
