/*
 * rollout-learner's side of a SEED node's frame rings (programs/learner/
 * frame_ring.c), with ring memory the test owns and posts into as the node
 * would (wire/seed_ring.h). Rings offered but not asked for, or of another
 * size, are refused by name; a posted frame comes back as an in-memory
 * Observations frame naming its ranges, a head that runs ahead of the ring
 * as an error naming the frame ring; before the loop may block every live
 * ring is put to sleep (so the node's next post goes on the socket) unless
 * a frame waits, and woken after; answers go into the node's answer ring
 * while the connection is live and there is room, else on the socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "learner/frame_ring.h"
#include "learner/learner.h"
#include "runtime/error.h"

#define ERRLEN 256

typedef struct fixture {
    learner_t *L;
    ro_seed_rings_t *rings[2];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->L = calloc(1, sizeof *f->L);
    assert_non_null(f->L);
    f->L->cfg.nconnect = 2;
    for (int i = 0; i < 2; i++) {
        f->rings[i] = calloc(1, sizeof *f->rings[i]);
        assert_non_null(f->rings[i]);
        node_t *n = &f->L->nodes[i];
        n->rings = f->rings[i];
        n->link.welcomed = true;
        n->link.conn.open = true;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 2; i++)
        free(f->rings[i]);
    free(f->L);
    free(f);
    return 0;
}

/* Rings offered but not asked for, or of another size, are refused; none
 * offered leaves the node without. */
static void test_map_refuses_what_was_not_asked(void **state)
{
    fixture_t *f = *state;
    node_t *n = &f->L->nodes[0];
    char err[ERRLEN];
    Rollout__V1__SeedMemory m = ROLLOUT__V1__SEED_MEMORY__INIT;
    assert_int_equal(ro__learner_ring_map(n, &m, true, err, sizeof err), 0); /* none offered */
    assert_null(n->rings);
    m.ring_bytes = RO_SEED_RING_BYTES;
    assert_int_equal(ro__learner_ring_map(n, &m, false, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "offered frame rings we did not ask for"));
    m.ring_bytes = RO_SEED_RING_BYTES + 64;
    assert_int_equal(ro__learner_ring_map(n, &m, true, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "this learner's are"));
    assert_null(n->rings);
}

/* A posted frame comes back as an in-memory Observations frame with its
 * ranges; an empty ring gives none; a head running ahead is an error
 * naming the frame ring. */
static void test_next_takes_posted_frames(void **state)
{
    fixture_t *f = *state;
    node_t *n = &f->L->nodes[0];
    char err[ERRLEN];
    const uint32_t ranges[4] = {0, 3, 7, 2};
    assert_int_equal(ro__seed_ring_post(&f->rings[0]->frames, 41, ranges, 4), RO_SEED_RING_POSTED);
    Rollout__V1__Observations o;
    ro_seed_ring_slot_t slot;
    assert_int_equal(ro__learner_ring_next(n, &o, &slot, err, sizeof err), 1);
    assert_int_equal(o.seq, 41);
    assert_true(o.in_memory);
    assert_int_equal(o.n_ranges, 4);
    assert_memory_equal(o.ranges, ranges, sizeof ranges);
    assert_int_equal(n->frames_in_ring, 1);
    assert_int_equal(ro__learner_ring_next(n, &o, &slot, err, sizeof err), 0);
    atomic_store(&f->rings[0]->frames.head_state, (uint64_t)(RO_SEED_RING_SLOTS + 9) << 1);
    assert_int_equal(ro__learner_ring_next(n, &o, &slot, err, sizeof err), RO_EPROTO);
    assert_non_null(strstr(err, "frame"));
}

/* Before the loop may block: every live ring asleep, so the node's post is
 * refused (it sends on the socket, which wakes the learner); woken after,
 * posts land again. A waiting frame keeps its ring awake. */
static void test_sleep_and_wake(void **state)
{
    fixture_t *f = *state;
    learner_t *L = f->L;
    assert_true(ro__learner_rings_sleep(L));
    assert_true(L->nodes[0].ring_asleep && L->nodes[1].ring_asleep);
    assert_int_equal(ro__seed_ring_post(&f->rings[1]->frames, 1, NULL, 0), RO_SEED_RING_ASLEEP);
    ro__learner_rings_wake(L);
    assert_false(L->nodes[0].ring_asleep || L->nodes[1].ring_asleep);
    assert_int_equal(ro__seed_ring_post(&f->rings[1]->frames, 2, NULL, 0), RO_SEED_RING_POSTED);
    assert_false(ro__learner_rings_sleep(L)); /* node 1's frame waits: take it first */
    assert_true(L->nodes[0].ring_asleep);
    assert_false(L->nodes[1].ring_asleep);
    ro__learner_rings_wake(L);
    /* A closing connection's ring is left as it is. */
    L->nodes[0].link.conn.closing = true;
    Rollout__V1__Observations o;
    ro_seed_ring_slot_t slot;
    char err[ERRLEN];
    assert_int_equal(ro__learner_ring_next(&L->nodes[1], &o, &slot, err, sizeof err), 1);
    assert_true(ro__learner_rings_sleep(L));
    assert_false(L->nodes[0].ring_asleep);
    assert_true(L->nodes[1].ring_asleep);
}

/* Answers go into the live node's answer ring, counted; a closing
 * connection's, or a full ring, send them on the socket instead. */
static void test_answers_into_the_ring(void **state)
{
    fixture_t *f = *state;
    node_t *n = &f->L->nodes[0];
    assert_true(ro__learner_ring_answer(n, 5));
    assert_int_equal(n->answers_in_ring, 1);
    ro_seed_ring_slot_t slot;
    uint64_t tail = 0;
    char err[ERRLEN];
    assert_int_equal(
        ro__seed_ring_take(&f->rings[0]->answers, "answer", &tail, &slot, err, sizeof err), 1);
    assert_int_equal(slot.seq, 5);
    for (uint32_t k = 0; k < RO_SEED_RING_SLOTS; k++) /* the node takes none: full */
        assert_true(ro__learner_ring_answer(n, 10 + k));
    assert_false(ro__learner_ring_answer(n, 99));
    assert_int_equal(n->answers_in_ring, 1 + RO_SEED_RING_SLOTS);
    node_t *m = &f->L->nodes[1];
    m->link.conn.closing = true;
    assert_false(ro__learner_ring_answer(m, 1));
    assert_int_equal(m->answers_in_ring, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_map_refuses_what_was_not_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_takes_posted_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_and_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_into_the_ring, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
