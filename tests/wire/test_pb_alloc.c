/* The bounded protobuf-c allocator (src/wire/pb_alloc.c): a frame decodes
 * within its limit and gives every byte back when freed; one that would
 * decode into more (packed bools: 1 byte on the wire, 4 in memory) is
 * refused, leaves nothing allocated, and ro__pb_alloc_refused says so once;
 * the frame reader and ro__pb_unpack word that refusal as a size error;
 * moving the allocator moves the count with the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/frame.h"
#include "wire/pb_alloc.h"
#include "wire/varint.h"

#define NBOOLS 1000

/* An Observations frame of NBOOLS packed bools (without its length
 * prefix): about NBOOLS bytes that decode into 4 x NBOOLS. */
static uint8_t *bools_frame(size_t *len)
{
    static protobuf_c_boolean flags[NBOOLS];
    for (size_t i = 0; i < NBOOLS; i++)
        flags[i] = i % 3 == 0;
    Rollout__V1__Observations o = ROLLOUT__V1__OBSERVATIONS__INIT;
    o.seq = 9;
    o.n_terminated = NBOOLS;
    o.terminated = flags;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &o;
    *len = rollout__v1__frame__get_packed_size(&f);
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    assert_int_equal(rollout__v1__frame__pack(&f, b), *len);
    return b;
}

static void check_decoded(const ro_frame_t *f)
{
    assert_int_equal(f->body_case, ROLLOUT__V1__FRAME__BODY_OBSERVATIONS);
    assert_int_equal(f->observations->seq, 9);
    assert_int_equal(f->observations->n_terminated, NBOOLS);
    for (size_t i = 0; i < NBOOLS; i++)
        assert_int_equal(f->observations->terminated[i], i % 3 == 0);
}

/* Within the limit: decoded, counted, and all of it given back. */
static void test_decodes_within_limit(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = bools_frame(&len);
    assert_true(len < NBOOLS + 32);
    ro_pb_alloc_t a;
    ro__pb_alloc_init(&a, 1u << 20);
    ro_frame_t *f = rollout__v1__frame__unpack(&a.base, len, b);
    assert_non_null(f);
    check_decoded(f);
    assert_true(a.used >= 4 * NBOOLS); /* the bools, as protobuf_c_boolean */
    assert_true(a.peak >= a.used);
    assert_false(ro__pb_alloc_refused(&a));
    ro__frame_free(&a, f);
    assert_int_equal(a.used, 0);
    free(b);
}

/* The limit is exact: the peak a frame needs is enough, a byte less is
 * refused (protobuf-c allocates in the same order every time). */
static void test_refused_over_limit(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = bools_frame(&len);
    ro_pb_alloc_t a;
    ro__pb_alloc_init(&a, 1u << 20);
    ro_frame_t *f = rollout__v1__frame__unpack(&a.base, len, b);
    assert_non_null(f);
    ro__frame_free(&a, f);
    const size_t need = a.peak;
    assert_true(need > len); /* it decodes into more than it takes on the wire */

    ro__pb_alloc_init(&a, need);
    f = rollout__v1__frame__unpack(&a.base, len, b);
    assert_non_null(f);
    check_decoded(f);
    ro__frame_free(&a, f);
    assert_int_equal(a.used, 0);
    assert_false(ro__pb_alloc_refused(&a));

    const size_t limits[] = {need - 1, need / 2, len, 64, 0};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        ro__pb_alloc_init(&a, limits[i]);
        assert_null(rollout__v1__frame__unpack(&a.base, len, b));
        assert_int_equal(a.used, 0); /* what it had taken is given back */
        assert_true(ro__pb_alloc_refused(&a));
        assert_false(ro__pb_alloc_refused(&a)); /* said once, then cleared */
    }
    free(b);
}

/* Malformed bytes fail as malformed, not as refused. */
static void test_malformed_is_not_refused(void **state)
{
    (void)state;
    ro_pb_alloc_t a;
    ro__pb_alloc_init(&a, 1u << 20);
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    assert_null(rollout__v1__frame__unpack(&a.base, sizeof junk, junk));
    assert_false(ro__pb_alloc_refused(&a));
    assert_int_equal(a.used, 0);
    /* A size no block could have is refused, not wrapped around. */
    assert_null(a.base.alloc(a.base.allocator_data, SIZE_MAX - 4));
    assert_true(ro__pb_alloc_refused(&a));
    assert_int_equal(a.used, 0);
    a.base.free(a.base.allocator_data, NULL); /* freeing nothing is fine */
    assert_int_equal(a.used, 0);
}

/* Through the frame reader: the refusal is a size error naming the limit. */
static void test_frame_reader_words_it(void **state)
{
    (void)state;
    size_t len;
    uint8_t *body = bools_frame(&len);
    ro_frame_t fr = ROLLOUT__V1__FRAME__INIT;
    uint8_t *unused;
    size_t unused_len;
    assert_int_equal(ro__frame_encode(&fr, &unused, &unused_len), 0); /* an empty frame */
    ro_pb_alloc_t a;
    ro__pb_alloc_init(&a, 2 * NBOOLS); /* more than the frame's bytes, less than it decodes into */
    ro_frame_reader_t r;
    assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, &a), 0);
    uint8_t prefix[RO_VARINT_MAX];
    size_t k = ro__varint_put(prefix, len);
    assert_int_equal(ro__frame_reader_feed(&r, unused, unused_len), 0);
    assert_int_equal(ro__frame_reader_feed(&r, prefix, k), 0);
    assert_int_equal(ro__frame_reader_feed(&r, body, len), 0);
    ro_frame_t *f = NULL;
    char err[256] = "";
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 1); /* the empty one fits */
    ro__frame_free(&a, f);
    f = NULL;
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), RO_EMSGSIZE);
    assert_null(f);
    char want[128];
    snprintf(want, sizeof want,
             "frame of %zu bytes at byte %zu decodes into more than the %u bytes", len, unused_len,
             2 * NBOOLS);
    if (!strstr(err, want))
        fail_msg("\"%s\" does not say \"%s\"", err, want);
    assert_false(ro__pb_alloc_refused(&a)); /* the reader asked, which cleared it */
    assert_int_equal(a.used, 0);
    ro__frame_reader_free(&r);
    free(unused);
    free(body);
}

/* ro__pb_unpack: within its limit the message; over it, or malformed, NULL
 * and a line that names the file and what of it, and says which. */
static void test_unpack_words_it(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = bools_frame(&len);
    ro_pb_alloc_t a;
    char err[256] = "";
    ProtobufCMessage *m = ro__pb_unpack(&a, 1u << 20, &rollout__v1__frame__descriptor, b, len,
                                        "f.bin", NULL, err, sizeof err);
    assert_non_null(m);
    check_decoded((const ro_frame_t *)m);
    assert_int_equal(a.limit, 1u << 20);
    ro__frame_free(&a, (ro_frame_t *)m);
    assert_int_equal(a.used, 0);
    assert_null(ro__pb_unpack(&a, 2 * NBOOLS, &rollout__v1__frame__descriptor, b, len, "f.bin",
                              NULL, err, sizeof err));
    assert_string_equal(err, "f.bin: decodes into more memory than its size allows");
    assert_int_equal(a.used, 0);
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    assert_null(ro__pb_unpack(&a, 1u << 20, &rollout__v1__frame__descriptor, junk, sizeof junk,
                              "f.bin", "layout", err, sizeof err));
    assert_string_equal(err, "f.bin: layout is not a valid Frame message");
    assert_null(ro__pb_unpack(&a, 2 * NBOOLS, &rollout__v1__frame__descriptor, b, len, "f.bin",
                              "layout", err, sizeof err));
    assert_string_equal(err, "f.bin: layout decodes into more memory than its size allows");
    assert_null(ro__pb_unpack(&a, 1u << 20, &rollout__v1__frame__descriptor, junk, sizeof junk,
                              "f.bin", NULL, err, sizeof err));
    assert_string_equal(err, "f.bin: not a valid Frame message");
    free(b);
}

/* Moving the allocator moves the count: the message is freed through the
 * new one, and the old one starts from nothing. */
static void test_move(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = bools_frame(&len);
    ro_pb_alloc_t a, moved;
    ro__pb_alloc_init(&a, 1u << 20);
    ro_frame_t *f = rollout__v1__frame__unpack(&a.base, len, b);
    assert_non_null(f);
    const size_t held = a.used;
    assert_true(held > 0);
    ro__pb_alloc_move(&moved, &a);
    assert_int_equal(a.used, 0);
    assert_int_equal(moved.used, held);
    assert_int_equal(moved.limit, 1u << 20);
    assert_ptr_equal(moved.base.allocator_data, &moved);
    /* The old one still works, counting only what it decodes now. */
    ro_frame_t *g = rollout__v1__frame__unpack(&a.base, len, b);
    assert_non_null(g);
    assert_int_equal(a.used, held);
    ro__frame_free(&a, g);
    assert_int_equal(a.used, 0);
    check_decoded(f);
    ro__frame_free(&moved, f);
    assert_int_equal(moved.used, 0);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decodes_within_limit),
        cmocka_unit_test(test_refused_over_limit),
        cmocka_unit_test(test_unpack_words_it),
        cmocka_unit_test(test_malformed_is_not_refused),
        cmocka_unit_test(test_frame_reader_words_it),
        cmocka_unit_test(test_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
