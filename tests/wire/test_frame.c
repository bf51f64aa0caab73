/* The wire's frame reader (src/wire/frame.c): a stream of frames cut at every
 * possible point (and fed a byte at a time) yields exactly the frames sent;
 * a length prefix over the limit is refused before any of its body is
 * buffered; malformed prefixes and bodies are errors naming the byte. */
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

#define ERRLEN 256

/* Decodes every test's frames; each test starts it afresh, and every frame
 * it decoded must be given back (alloc.used == 0) when the reader is done. */
static ro_pb_alloc_t alloc;

static ro_pb_alloc_t *fresh_alloc(void)
{
    ro__pb_alloc_init(&alloc, 64u << 20);
    return &alloc;
}

/* A few frames of different kinds and sizes, encoded back to back. */
typedef struct stream {
    uint8_t *bytes;
    size_t len;
    uint8_t *frame[4]; /* each frame's own encoding, to compare */
    size_t frame_len[4];
    size_t n;
} stream_t;

static void append_frame(stream_t *s, const ro_frame_t *f)
{
    uint8_t *b;
    size_t len;
    assert_int_equal(ro__frame_encode(f, &b, &len), 0);
    s->bytes = realloc(s->bytes, s->len + len);
    assert_non_null(s->bytes);
    memcpy(s->bytes + s->len, b, len);
    s->len += len;
    s->frame[s->n] = b;
    s->frame_len[s->n] = len;
    s->n++;
}

static void make_stream(stream_t *s)
{
    memset(s, 0, sizeof *s);
    ro_frame_t f;

    Rollout__V1__Hello hello;
    rollout__v1__frame__init(&f);
    rollout__v1__hello__init(&hello);
    hello.protocol_version = RO_PROTOCOL_VERSION;
    hello.role = "learner";
    hello.name = "test";
    f.body_case = ROLLOUT__V1__FRAME__BODY_HELLO;
    f.hello = &hello;
    append_frame(s, &f);

    /* Over 127 bytes: a two-byte length prefix. */
    Rollout__V1__Observations obs;
    rollout__v1__frame__init(&f);
    rollout__v1__observations__init(&obs);
    uint32_t env[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint64_t step[8] = {0, 1, 2, 3, 300, 301, 302, 303};
    float o[32];
    for (int i = 0; i < 32; i++)
        o[i] = (float)i * 0.25f - 3.0f;
    obs.seq = 1234567;
    obs.n_env = 8;
    obs.env = env;
    obs.n_step = 8;
    obs.step = step;
    obs.n_obs = 32;
    obs.obs = o;
    f.body_case = ROLLOUT__V1__FRAME__BODY_OBSERVATIONS;
    f.observations = &obs;
    append_frame(s, &f);

    /* An empty Frame: a zero-length body. */
    rollout__v1__frame__init(&f);
    append_frame(s, &f);

    Rollout__V1__Goodbye bye;
    rollout__v1__frame__init(&f);
    rollout__v1__goodbye__init(&bye);
    bye.reason = "done";
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &bye;
    append_frame(s, &f);
}

static void free_stream(stream_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->frame[i]);
    free(s->bytes);
}

/* Takes every complete frame out of r, checking each against the next
 * expected one (re-encoded: same bytes as sent). */
static void drain(ro_frame_reader_t *r, const stream_t *s, size_t *got)
{
    char err[ERRLEN];
    ro_frame_t *f;
    int rc;
    while ((rc = ro__frame_reader_next(r, &f, err, sizeof err)) == 1) {
        assert_true(*got < s->n);
        uint8_t *b;
        size_t len;
        assert_int_equal(ro__frame_encode(f, &b, &len), 0);
        assert_int_equal(len, s->frame_len[*got]);
        assert_memory_equal(b, s->frame[*got], len);
        free(b);
        ro__frame_free(r->alloc, f);
        (*got)++;
    }
    assert_int_equal(rc, 0); /* only "more bytes needed", never an error */
}

static void test_every_split_point(void **state)
{
    (void)state;
    stream_t s;
    make_stream(&s);
    for (size_t cut = 0; cut <= s.len; cut++) {
        ro_frame_reader_t r;
        assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, fresh_alloc()), 0);
        size_t got = 0;
        assert_int_equal(ro__frame_reader_feed(&r, s.bytes, cut), 0);
        drain(&r, &s, &got);
        assert_int_equal(ro__frame_reader_feed(&r, s.bytes + cut, s.len - cut), 0);
        drain(&r, &s, &got);
        assert_int_equal(got, s.n);
        assert_int_equal(r.len, 0);
        assert_int_equal(r.offset, s.len);
        ro__frame_reader_free(&r);
        assert_int_equal(alloc.used, 0);
    }
    free_stream(&s);
}

static void test_one_byte_at_a_time(void **state)
{
    (void)state;
    stream_t s;
    make_stream(&s);
    ro_frame_reader_t r;
    assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, fresh_alloc()), 0);
    size_t got = 0;
    for (size_t i = 0; i < s.len; i++) {
        assert_int_equal(ro__frame_reader_feed(&r, s.bytes + i, 1), 0);
        drain(&r, &s, &got);
    }
    assert_int_equal(got, s.n);
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);
    free_stream(&s);
}

/* A partial length prefix, and a partial body, are "more bytes needed". */
static void test_partial_frames_wait(void **state)
{
    (void)state;
    ro_frame_reader_t r;
    char err[ERRLEN];
    ro_frame_t *f = NULL;
    assert_int_equal(ro__frame_reader_init(&r, 1000, fresh_alloc()), 0);
    const uint8_t prefix_start = 0x80 | 0x10; /* a varint that goes on */
    assert_int_equal(ro__frame_reader_feed(&r, &prefix_start, 1), 0);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 0);
    const uint8_t prefix_end = 0x01; /* 0x10 + (1 << 7) = 144 bytes of body */
    assert_int_equal(ro__frame_reader_feed(&r, &prefix_end, 1), 0);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 0);
    assert_null(f);
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);
}

/* A prefix over max_frame is refused as soon as the prefix is complete:
 * the reader never buffers (or allocates for) the body it announces. */
static void test_oversize_prefix_refused_before_its_body(void **state)
{
    (void)state;
    enum { MAX = 4096 };
    ro_frame_reader_t r;
    char err[ERRLEN] = "";
    ro_frame_t *f = NULL;
    uint8_t prefix[RO_VARINT_MAX];
    /* Exactly the limit: still waiting for the body. */
    assert_int_equal(ro__frame_reader_init(&r, MAX, fresh_alloc()), 0);
    size_t k = ro__varint_put(prefix, MAX);
    assert_int_equal(ro__frame_reader_feed(&r, prefix, k), 0);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 0);
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);
    /* One over, and the largest a varint can say. */
    const uint64_t over[] = {MAX + 1, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        assert_int_equal(ro__frame_reader_init(&r, MAX, fresh_alloc()), 0);
        size_t cap = r.cap;
        k = ro__varint_put(prefix, over[i]);
        assert_int_equal(ro__frame_reader_feed(&r, prefix, k), 0);
        assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), RO_EMSGSIZE);
        assert_non_null(strstr(err, "exceeds the limit of 4096"));
        assert_non_null(strstr(err, "at byte 0"));
        assert_int_equal(r.cap, cap); /* nothing grew */
        ro__frame_reader_free(&r);
        assert_int_equal(alloc.used, 0);
    }
    assert_null(f);
}

/* Errors name the stream offset of the frame that caused them. */
static void test_malformed_input(void **state)
{
    (void)state;
    stream_t s;
    make_stream(&s);
    ro_frame_reader_t r;
    char err[ERRLEN] = "";
    ro_frame_t *f = NULL;

    /* A varint of ten continuation bytes. */
    assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, fresh_alloc()), 0);
    assert_int_equal(ro__frame_reader_feed(&r, s.frame[0], s.frame_len[0]), 0);
    uint8_t bad[RO_VARINT_MAX];
    memset(bad, 0xff, sizeof bad);
    assert_int_equal(ro__frame_reader_feed(&r, bad, sizeof bad), 0);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), 1);
    ro__frame_free(r.alloc, f);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), RO_EBADMSG);
    char want[64];
    snprintf(want, sizeof want, "malformed length prefix at byte %zu", s.frame_len[0]);
    assert_string_equal(err, want);
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);

    /* A body that is not a Frame message (a field with wire type 7). */
    assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, fresh_alloc()), 0);
    const uint8_t junk[] = {5, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(ro__frame_reader_feed(&r, junk, sizeof junk), 0);
    assert_int_equal(ro__frame_reader_next(&r, &f, err, sizeof err), RO_EBADMSG);
    assert_non_null(strstr(err, "frame of 5 bytes at byte 0 is not a valid Frame message"));
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);
    free_stream(&s);
}

/* Readers sharing a budget: each holds RO_FRAME_UNCHARGED for free, and
 * what they hold beyond it, together, stays within the budget; a reader
 * that would go over is refused (over_budget) and gives its charge back
 * once its frame is read or it is freed. */
static void test_shared_budget(void **state)
{
    (void)state;
    ro_frame_budget_t budget = {.limit = 3u << 20};
    ro_frame_reader_t a, b, c;
    assert_int_equal(ro__frame_reader_init(&a, 8u << 20, fresh_alloc()), 0);
    assert_int_equal(ro__frame_reader_init(&b, 8u << 20, &alloc), 0);
    assert_int_equal(ro__frame_reader_init(&c, 8u << 20, &alloc), 0);
    ro__frame_reader_set_budget(&a, &budget);
    ro__frame_reader_set_budget(&b, &budget);
    ro__frame_reader_set_budget(&c, &budget);
    /* Small reads: free. */
    assert_non_null(ro__frame_reader_space(&c, 64u << 10));
    assert_int_equal(budget.used, 0);
    /* a grows to 2 MiB (charged 2 MiB - 128 KiB), b then cannot. */
    uint8_t *p = ro__frame_reader_space(&a, 2u << 20);
    assert_non_null(p);
    assert_int_equal(budget.used, (2u << 20) - RO_FRAME_UNCHARGED);
    assert_null(ro__frame_reader_space(&b, 2u << 20));
    assert_true(b.over_budget);
    assert_int_equal(budget.used, (2u << 20) - RO_FRAME_UNCHARGED);
    /* A whole frame read gives the charge back. */
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    g.reason = "bye";
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    uint8_t *enc;
    size_t len;
    assert_int_equal(ro__frame_encode(&f, &enc, &len), 0);
    memcpy(p, enc, len);
    ro__frame_reader_commit(&a, len);
    free(enc);
    ro_frame_t *got = NULL;
    char err[ERRLEN];
    assert_int_equal(ro__frame_reader_next(&a, &got, err, sizeof err), 1);
    ro__frame_free(&alloc, got);
    assert_int_equal(budget.used, 0);
    assert_non_null(ro__frame_reader_space(&b, 2u << 20));
    assert_int_equal(budget.used, (2u << 20) - RO_FRAME_UNCHARGED);
    ro__frame_reader_free(&b);
    assert_int_equal(budget.used, 0);
    ro__frame_reader_free(&a);
    ro__frame_reader_free(&c);
    assert_int_equal(alloc.used, 0);
}

/* A reader with no budget (a learner's link) keeps a large buffer while
 * large frames empty it, so a stream of segments does not grow and shrink
 * it every frame; a small frame that empties it gives the memory back. */
static void test_unbudgeted_reader_keeps_buffer_for_large_frames(void **state)
{
    (void)state;
    ro_frame_reader_t r;
    assert_int_equal(ro__frame_reader_init(&r, RO_WIRE_DEFAULT_MAX_FRAME, fresh_alloc()), 0);
    size_t big = 3 * RO_FRAME_UNCHARGED;
    char *reason = malloc(big);
    assert_non_null(reason);
    memset(reason, 'x', big - 1);
    reason[big - 1] = '\0';
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 2; k++) {
            Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
            g.reason = k == 0 ? reason : "bye";
            ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
            f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
            f.goodbye = &g;
            uint8_t *enc;
            size_t len;
            assert_int_equal(ro__frame_encode(&f, &enc, &len), 0);
            assert_int_equal(ro__frame_reader_feed(&r, enc, len), 0);
            free(enc);
            ro_frame_t *got = NULL;
            char err[ERRLEN];
            assert_int_equal(ro__frame_reader_next(&r, &got, err, sizeof err), 1);
            assert_int_equal(strlen(got->goodbye->reason), k == 0 ? big - 1 : 3);
            ro__frame_free(r.alloc, got);
            if (k == 0) /* emptied by a large frame: kept */
                assert_true(r.cap > big);
            else /* emptied by a small one: given back */
                assert_int_equal(r.cap, 4096);
        }
    }
    free(reason);
    ro__frame_reader_free(&r);
    assert_int_equal(alloc.used, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_one_byte_at_a_time),
        cmocka_unit_test(test_partial_frames_wait),
        cmocka_unit_test(test_oversize_prefix_refused_before_its_body),
        cmocka_unit_test(test_malformed_input),
        cmocka_unit_test(test_shared_budget),
        cmocka_unit_test(test_unbudgeted_reader_keeps_buffer_for_large_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
