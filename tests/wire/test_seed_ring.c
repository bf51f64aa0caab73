/*
 * SEED mode's frame ring (src/wire/seed_ring.c). One thread: frames come
 * out as posted, a full ring and a frame with too many ranges are refused,
 * a consumer asleep is never posted to, and one with a frame waiting may
 * not sleep; an answer carries no values. Memory not to be believed (a
 * head past what the ring holds or behind the tail, a slot of more values
 * than it holds, a tail past the head) is refused by name or read as a
 * full ring. Two threads, as node
 * and learner: the producer posts, or sends on a pipe (the socket) what
 * the ring does not take; the consumer takes, sleeps on the pipe and
 * wakes; every frame arrives exactly once and none is stranded in the
 * ring while the consumer sleeps (run under TSan by .ci/run). Every wait
 * is for an event, with one hang guard.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "wire/seed_ring.h"

#define HANG_GUARD_MS 120000

static ro_seed_ring_t *new_ring(void)
{
    ro_seed_ring_t *r = calloc(1, sizeof *r); /* zeroed, as a new memfd */
    assert_non_null(r);
    return r;
}

static void post_ok(ro_seed_ring_t *r, uint64_t seq, uint32_t first, uint32_t count)
{
    const uint32_t v[2] = {first, count};
    assert_int_equal(ro__seed_ring_post(r, seq, v, 2), RO_SEED_RING_POSTED);
}

static void test_post_take_in_order(void **state)
{
    (void)state;
    ro_seed_ring_t *r = new_ring();
    uint64_t tail = 0;
    ro_seed_ring_slot_t s;
    char err[256];
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 0); /* empty */
    /* Around the ring three times, a few frames in it at a time. */
    uint64_t posted = 0;
    for (int round = 0; round < 3 * (int)RO_SEED_RING_SLOTS / 5; round++) {
        for (int k = 0; k < 5; k++, posted++) {
            uint32_t v[6] = {(uint32_t)posted, 1, 100, 2, 200, (uint32_t)k + 1};
            assert_int_equal(ro__seed_ring_post(r, posted + 1, v, 2 + 2 * (size_t)(k % 3)),
                             RO_SEED_RING_POSTED);
        }
        for (uint64_t want = posted - 5; want < posted; want++) {
            assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 1);
            assert_int_equal(s.seq, want + 1);
            assert_int_equal(s.nvalues, 2 + 2 * (want % 5 % 3));
            assert_int_equal(s.values[0], (uint32_t)want);
            assert_int_equal(s.values[1], 1);
        }
        assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 0);
    }
    assert_int_equal(tail, posted);
    free(r);
}

/* An answer: a seq and no values. */
static void test_answers_carry_no_values(void **state)
{
    (void)state;
    ro_seed_ring_t *r = new_ring();
    assert_int_equal(ro__seed_ring_post(r, 12, NULL, 0), RO_SEED_RING_POSTED);
    uint64_t tail = 0;
    ro_seed_ring_slot_t s;
    char err[256];
    assert_int_equal(ro__seed_ring_take(r, "answer", &tail, &s, err, sizeof err), 1);
    assert_int_equal(s.seq, 12);
    assert_int_equal(s.nvalues, 0);
    free(r);
}

static void test_full_and_too_big(void **state)
{
    (void)state;
    ro_seed_ring_t *r = new_ring();
    for (uint32_t i = 0; i < RO_SEED_RING_SLOTS; i++)
        post_ok(r, i + 1, i, 1);
    const uint32_t v[2] = {0, 1};
    assert_int_equal(ro__seed_ring_post(r, 999, v, 2), RO_SEED_RING_FULL);
    uint64_t tail = 0;
    ro_seed_ring_slot_t s;
    char err[256];
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 1);
    post_ok(r, RO_SEED_RING_SLOTS + 1, 7, 1); /* one slot free again */
    uint32_t big[RO_SEED_RING_VALUES + 2] = {0};
    assert_int_equal(ro__seed_ring_post(r, 1000, big, RO_SEED_RING_VALUES + 2),
                     RO_SEED_RING_TOO_BIG);
    free(r);
}

static void test_sleep_and_wake(void **state)
{
    (void)state;
    ro_seed_ring_t *r = new_ring();
    uint64_t tail = 0;
    ro_seed_ring_slot_t s;
    char err[256];
    post_ok(r, 1, 0, 4);
    assert_false(ro__seed_ring_sleep(r, tail)); /* a frame waits: take it first */
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 1);
    assert_true(ro__seed_ring_sleep(r, tail));
    assert_true(ro__seed_ring_sleep(r, tail)); /* already */
    const uint32_t v[2] = {4, 4};
    assert_int_equal(ro__seed_ring_post(r, 2, v, 2), RO_SEED_RING_ASLEEP); /* on the socket */
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err),
                     0); /* not posted */
    ro__seed_ring_wake(r);
    post_ok(r, 3, 8, 4);
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err), 1);
    assert_int_equal(s.seq, 3);
    free(r);
}

static void expect_refused(ro_seed_ring_t *r, uint64_t tail, const char *needle)
{
    ro_seed_ring_slot_t s;
    char err[256] = "";
    int rc = ro__seed_ring_take(r, "frame", &tail, &s, err, sizeof err);
    if (rc != RO_EPROTO || !strstr(err, needle))
        fail_msg("expected RO_EPROTO saying \"%s\", got %d \"%s\"", needle, rc, err);
}

/* The peer's bytes: what the consumer refuses, what the producer reads as
 * a full ring. */
static void test_memory_not_believed(void **state)
{
    (void)state;
    ro_seed_ring_t *r = new_ring();
    atomic_store(&r->head_state, (uint64_t)(RO_SEED_RING_SLOTS + 1) << 1);
    expect_refused(r, 0, "the frame ring says 65 were posted; 0 were taken and it holds 64");
    atomic_store(&r->head_state, (uint64_t)3 << 1);
    expect_refused(r, 5, "the frame ring says 3 were posted; 5 were taken");
    atomic_store(&r->head_state, (uint64_t)1 << 1);
    r->slots[0].seq = 41;
    r->slots[0].nvalues = RO_SEED_RING_VALUES + 1;
    expect_refused(r, 0, "seq 41 in the frame ring has 29 values; a slot holds 28");
    /* What the values say (pairs, inside the envs) is the caller's to
     * check, as a frame's: an odd count comes out as it is. */
    r->slots[0].nvalues = 3;
    ro_seed_ring_slot_t got;
    char err[256];
    uint64_t tail = 0;
    assert_int_equal(ro__seed_ring_take(r, "frame", &tail, &got, err, sizeof err), 1);
    assert_int_equal(got.nvalues, 3);

    /* A tail past the head, or far behind it: no slot is free. */
    ro_seed_ring_t *p = new_ring();
    const uint32_t v[2] = {0, 1};
    atomic_store(&p->tail, 5);
    assert_int_equal(ro__seed_ring_post(p, 1, v, 2), RO_SEED_RING_FULL);
    atomic_store(&p->tail, 0);
    atomic_store(&p->head_state, (uint64_t)RO_SEED_RING_SLOTS << 1);
    assert_int_equal(ro__seed_ring_post(p, 1, v, 2), RO_SEED_RING_FULL);
    free(p);
    free(r);
}

/* Two threads: node (producer) and learner (consumer). */
enum { FRAMES = 200000 };

typedef struct pair {
    ro_seed_ring_t *ring;
    int pipe[2]; /* the socket: frames the ring did not take, as seq */
    uint64_t on_socket, in_ring, sleeps;
} pair_t;

static void *producer(void *arg)
{
    pair_t *p = arg;
    for (uint64_t seq = 1; seq <= FRAMES; seq++) {
        const uint32_t v[2] = {(uint32_t)(seq % 1000), 1};
        if (ro__seed_ring_post(p->ring, seq, v, 2) == RO_SEED_RING_POSTED) {
            p->in_ring++;
            continue;
        }
        p->on_socket++;
        ssize_t n;
        do
            n = write(p->pipe[1], &seq, sizeof seq);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof seq)
            return (void *)1;
    }
    return NULL;
}

static void take_one(uint8_t *seen, uint64_t seq, uint64_t *got, const char *how)
{
    if (seq == 0 || seq > FRAMES || seen[seq])
        fail_msg("frame %llu %s: %s", (unsigned long long)seq, how,
                 seq == 0 || seq > FRAMES ? "never sent" : "already taken");
    seen[seq] = 1;
    (*got)++;
}

static void test_two_threads_lose_nothing(void **state)
{
    (void)state;
    pair_t p = {.ring = new_ring()};
    assert_int_equal(pipe(p.pipe), 0);
    uint8_t *seen = calloc(FRAMES + 1, 1);
    assert_non_null(seen);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, producer, &p), 0);
    uint64_t tail = 0, got = 0;
    char err[256];
    while (got < FRAMES) {
        ro_seed_ring_slot_t s;
        int rc;
        while ((rc = ro__seed_ring_take(p.ring, "frame", &tail, &s, err, sizeof err)) == 1) {
            assert_int_equal(s.nvalues, 2);
            assert_int_equal(s.values[0], (uint32_t)(s.seq % 1000));
            take_one(seen, s.seq, &got, "from the ring");
        }
        if (rc < 0)
            fail_msg("%s", err);
        if (got == FRAMES)
            break;
        /* As the learner's loop: sleep only with nothing in the ring, then
         * block on the socket until a frame comes. */
        if (!ro__seed_ring_sleep(p.ring, tail))
            continue;
        p.sleeps++;
        struct pollfd pfd = {.fd = p.pipe[0], .events = POLLIN};
        int n = poll(&pfd, 1, HANG_GUARD_MS);
        if (n == 0)
            fail_msg("asleep with %llu of %d frames taken: no frame came on the socket within "
                     "the %d s hang guard (a lost wake-up)",
                     (unsigned long long)got, FRAMES, HANG_GUARD_MS / 1000);
        uint64_t seqs[512];
        ssize_t r = read(p.pipe[0], seqs, sizeof seqs);
        assert_true(r > 0 && r % (ssize_t)sizeof(uint64_t) == 0);
        ro__seed_ring_wake(p.ring);
        for (ssize_t i = 0; i < r / (ssize_t)sizeof(uint64_t); i++)
            take_one(seen, seqs[i], &got, "on the socket");
    }
    void *ret;
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_null(ret);
    /* The socket may still hold frames sent while we were awake. */
    uint64_t seq;
    close(p.pipe[1]);
    while (read(p.pipe[0], &seq, sizeof seq) == (ssize_t)sizeof seq)
        take_one(seen, seq, &got, "on the socket, late");
    assert_int_equal(got, FRAMES);
    assert_int_equal(p.in_ring + p.on_socket, FRAMES);
    print_message("%llu frames in the ring, %llu on the socket, %llu sleeps\n",
                  (unsigned long long)p.in_ring, (unsigned long long)p.on_socket,
                  (unsigned long long)p.sleeps);
    close(p.pipe[0]);
    free(seen);
    free(p.ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_take_in_order),
        cmocka_unit_test(test_full_and_too_big),
        cmocka_unit_test(test_sleep_and_wake),
        cmocka_unit_test(test_memory_not_believed),
        cmocka_unit_test(test_two_threads_lose_nothing),
        cmocka_unit_test(test_answers_carry_no_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
