/*
 * The hub's side of its SEED learners' answer rings (actors/hub/hub_ring.c)
 * on a real libuv loop, without sockets: sessions are hub records whose
 * ring memory the test owns and posts into as the learner would
 * (wire/seed_ring.h). A turn of the loop hands every posted answer to the
 * hub's callback, in order, as an in-memory Actions frame; a ring whose head
 * runs ahead of what it holds is reported by name; a session unlisted by
 * what an answer did, or closing, is not read further; and between the
 * loop's prepare and check phases (where it may block) every ring is
 * marked asleep, so a learner's post is refused and goes on the socket,
 * then the ring is woken again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "actors/hub/hub_ring.h"
#include "wire/seed_ring.h"

#define MAX_SEEN 16
#define NSESSIONS 2

typedef struct fixture {
    uv_loop_t loop;
    ro_hub_t *hub;
    ro_session_t *s[NSESSIONS];
    ro_seed_rings_t *rings[NSESSIONS];
    /* What the hub's callback got, in order. */
    uint32_t nseen;
    ro_session_t *seen_s[MAX_SEEN];
    uint64_t seen_seq[MAX_SEEN];
    bool seen_in_memory[MAX_SEEN];
    uint32_t nbad;
    char bad[256];
    /* The callback unlists its session after this many answers (0: never),
     * as failing a session does. */
    uint32_t unlist_after;
    /* The probe, run in the loop's poll phase (after prepare, before check). */
    uv_async_t probe;
    ro_seed_ring_post_t probe_post;
    bool probe_ran;
    uint32_t probe_nseen; /* answers the hub had when the probe ran */
} fixture_t;

static fixture_t *F; /* the callback's view of the running test */

/* on_answer records what the hub hands it. */
static void on_answer(ro_session_t *s, const Rollout__V1__Actions *a, const char *bad)
{
    if (!a) { /* the hub fails the session: unlisted */
        F->nbad++;
        snprintf(F->bad, sizeof F->bad, "%s", bad);
        s->listed = false;
        return;
    }
    assert_true(F->nseen < MAX_SEEN);
    F->seen_s[F->nseen] = s;
    F->seen_seq[F->nseen] = a->seq;
    F->seen_in_memory[F->nseen] = a->in_memory;
    F->nseen++;
    if (F->unlist_after && F->nseen == F->unlist_after)
        s->listed = false;
}

/* on_probe posts answer 99 into session 0's ring while the loop is
 * between its prepare and check phases. */
static void on_probe(uv_async_t *a)
{
    fixture_t *f = a->data;
    f->probe_post = ro__seed_ring_post(&f->rings[0]->answers, 99, NULL, 0);
    f->probe_ran = true;
    f->probe_nseen = f->nseen;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->hub = calloc(1, sizeof *f->hub);
    assert_non_null(f->hub);
    f->hub->loop = &f->loop;
    /* Listed in order s[0], s[1]: live sessions with rings. */
    for (int i = NSESSIONS - 1; i >= 0; i--) {
        f->rings[i] = calloc(1, sizeof *f->rings[i]);
        f->s[i] = calloc(1, sizeof *f->s[i]);
        assert_non_null(f->rings[i]);
        assert_non_null(f->s[i]);
        f->s[i]->hub = f->hub;
        f->s[i]->listed = true;
        f->s[i]->conn.open = true;
        f->s[i]->flow.rings = f->rings[i];
        f->s[i]->next = f->hub->sessions;
        f->hub->sessions = f->s[i];
    }
    ro__hub_ring_start(f->hub, on_answer);
    F = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    ro__hub_ring_close(f->hub);
    if (f->probe.data)
        uv_close((uv_handle_t *)&f->probe, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* the close callbacks */
    assert_int_equal(uv_loop_close(&f->loop), 0);
    for (int i = 0; i < NSESSIONS; i++) {
        free(f->s[i]);
        free(f->rings[i]);
    }
    free(f->hub);
    free(f);
    F = NULL;
    return 0;
}

/* post posts answers seq first .. first + n - 1 into session i's ring; the
 * hub is awake (no turn of the loop has marked it asleep). */
static void post(fixture_t *f, int i, uint64_t first, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        assert_int_equal(ro__seed_ring_post(&f->rings[i]->answers, first + k, NULL, 0),
                         RO_SEED_RING_POSTED);
}

/* Every posted answer reaches the hub in one turn, in each ring's order,
 * as an in-memory Actions frame, and the session's tail counts them. */
static void test_turn_takes_every_answer_in_order(void **state)
{
    fixture_t *f = *state;
    post(f, 0, 1, 3);
    post(f, 1, 10, 2);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 5);
    assert_int_equal(f->nbad, 0);
    const uint64_t want[5] = {1, 2, 3, 10, 11};
    for (uint32_t k = 0; k < 5; k++) {
        assert_int_equal(f->seen_seq[k], want[k]);
        assert_ptr_equal(f->seen_s[k], f->s[k < 3 ? 0 : 1]);
        assert_true(f->seen_in_memory[k]);
    }
    assert_int_equal(f->s[0]->answers_tail, 3);
    assert_int_equal(f->s[1]->answers_tail, 2);
    /* Nothing new: another turn hands nothing again. */
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 5);
}

/* While the loop may block, the rings are asleep: a learner's post is
 * refused (it sends on the socket, which wakes the loop); after the loop's
 * turn the rings are awake again and posts land. */
static void test_rings_sleep_while_the_loop_may_block(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(uv_async_init(&f->loop, &f->probe, on_probe), 0);
    f->probe.data = f;
    uv_run(&f->loop, UV_RUN_NOWAIT); /* the loop's first turn, as the hub's always had */
    assert_int_equal(uv_async_send(&f->probe), 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_true(f->probe_ran);
    assert_int_equal(f->probe_post, RO_SEED_RING_ASLEEP);
    assert_int_equal(f->nseen, 0);         /* the refused post is not in the ring */
    assert_false(f->s[0]->answers_asleep); /* woken by the check phase */
    post(f, 0, 100, 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 1);
    assert_int_equal(f->seen_seq[0], 100);
}

/* An answer waiting when the loop is about to block is taken first: the
 * ring is not put to sleep under it, and it reaches the hub in that turn. */
static void test_waiting_answer_keeps_the_ring_awake(void **state)
{
    fixture_t *f = *state;
    uv_run(&f->loop, UV_RUN_NOWAIT); /* a turn: asleep, then woken */
    post(f, 1, 7, 1);
    assert_int_equal(uv_async_init(&f->loop, &f->probe, on_probe), 0);
    f->probe.data = f;
    assert_int_equal(uv_async_send(&f->probe), 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_true(f->probe_ran);
    assert_int_equal(f->probe_nseen, 1); /* taken before the loop could block */
    assert_int_equal(f->probe_post, RO_SEED_RING_ASLEEP);
    assert_int_equal(f->nseen, 1);
    assert_int_equal(f->seen_seq[0], 7);
    assert_ptr_equal(f->seen_s[0], f->s[1]);
}

/* A head that claims more posts than the ring holds is not believed: the
 * hub hears why, naming the answer ring, and is handed no answer. */
static void test_head_running_ahead_is_reported(void **state)
{
    fixture_t *f = *state;
    atomic_store(&f->rings[0]->answers.head_state, (uint64_t)(RO_SEED_RING_SLOTS + 5) << 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 0);
    assert_int_equal(f->nbad, 1); /* failed once, then unlisted: not read again */
    assert_non_null(strstr(f->bad, "answer"));
    post(f, 1, 4, 1); /* the other session still is */
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 1);
    assert_int_equal(f->seen_seq[0], 4);
}

/* A session that an answer unlists (the hub failed it) is read no further;
 * the other sessions still are. */
static void test_unlisted_session_is_not_read_further(void **state)
{
    fixture_t *f = *state;
    f->unlist_after = 1;
    post(f, 0, 1, 3);
    post(f, 1, 10, 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 2);
    assert_int_equal(f->seen_seq[0], 1);
    assert_ptr_equal(f->seen_s[1], f->s[1]);
    assert_int_equal(f->seen_seq[1], 10);
    assert_int_equal(f->s[0]->answers_tail, 1); /* 2 and 3 stay untaken */
}

/* A closing connection's ring is not read, nor put to sleep. */
static void test_closing_session_is_left_alone(void **state)
{
    fixture_t *f = *state;
    f->s[0]->conn.closing = true;
    post(f, 0, 1, 2);
    post(f, 1, 5, 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nseen, 1);
    assert_int_equal(f->seen_seq[0], 5);
    assert_int_equal(f->s[0]->answers_tail, 0);
    /* Never marked asleep: a post still lands. */
    assert_int_equal(ro__seed_ring_post(&f->rings[0]->answers, 3, NULL, 0), RO_SEED_RING_POSTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_turn_takes_every_answer_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rings_sleep_while_the_loop_may_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiting_answer_keeps_the_ring_awake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_running_ahead_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unlisted_session_is_not_read_further, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closing_session_is_left_alone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
