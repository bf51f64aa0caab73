/*
 * rollout-learner's serving of SEED nodes (programs/learner/serve.c), driven
 * through its links' callbacks and loop handlers with what it calls below
 * wrapped (learner_serve_fixture.h). Two nodes' Observations frames (one in
 * the node's memory) batch into one job, and each node is answered with its
 * own rows' actions under its frame's seq (in memory: written there); an
 * answer for a connection since replaced, or from a failed job, is not
 * sent. A connection going down voids only its own frames, and a SEED
 * node's goodbye steps replace what its frames counted. Bad frames fail
 * their link by name (an unexpected kind, bad lengths, an env out of range,
 * memory not agreed, a NaN reward in memory, no memory), and so does a
 * frame ring not to be believed; --push-policy takes a PolicyAccepted and
 * nothing else. Ring frames are taken at each check and before the loop
 * blocks, and sockets read at once after answering, each a bounded number
 * of rounds. Every frame taken is freed (the fixture's teardown checks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "learner_serve_fixture.h"

/* Two nodes' frames, one in memory, make one job of 4 rows (each row's
 * own sampling stream); each node's answer holds its rows' actions under
 * its seq, node 0's written into its memory. */
static void test_batch_across_nodes_answered(void **state)
{
    fixture_t *f = *state;
    learner_t *L = f->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    assert_true(give_obs(n0, 11, 1, 2, true)); /* envs 1 and 2 */
    ro__learner_on_check(&L->check);
    assert_int_equal(w.njobs, 0); /* 2 of 4 rows: waits, on a timer */
    assert_true(L->wait_armed && uv_is_active((uv_handle_t *)&L->wait_timer));
    obs_msg_t m;
    obs_init(&m, 5, 0, 2, false);
    m.env[1] = 3; /* envs 0 and 3 */
    assert_true(give(n1, obs_frame(n1, &m)));
    ro__learner_on_check(&L->check);
    assert_int_equal(w.njobs, 1);
    ro_job_t *j = w.jobs[0];
    assert_int_equal(j->rows, 4);
    assert_ptr_equal(j->rowrng[0], &n0->rngs[1]);
    assert_ptr_equal(j->rowrng[1], &n0->rngs[2]);
    assert_ptr_equal(j->rowrng[2], &n1->rngs[0]);
    assert_ptr_equal(j->rowrng[3], &n1->rngs[3]);
    assert_int_equal(L->batches, 1);
    assert_int_equal(L->steps, 4);
    assert_int_equal(n0->frames_in_memory, 1);
    assert_int_equal(n1->frames, 1);
    answer(L, 0, (const int32_t[]){2, 1, 0, 2});
    assert_int_equal(w.nev, 2);
    const event_t *e = ev(0, EV_SEND, &n0->link, NULL);
    assert_true(e->body == ROLLOUT__V1__FRAME__BODY_ACTIONS && e->seq == 11 && e->in_memory);
    assert_int_equal(e->ndisc, 0);
    const int32_t *col =
        (const int32_t *)(const void *)((uint8_t *)f->act_mem + n0->seed_lay.act_off);
    assert_memory_equal(col, ((int32_t[]){0, 2, 1, 0}), 4 * sizeof(int32_t));
    e = ev(1, EV_SEND, &n1->link, NULL);
    assert_true(e->seq == 5 && !e->in_memory);
    assert_int_equal(e->ndisc, 2);
    assert_memory_equal(e->disc, ((int32_t[]){0, 2}), 2 * sizeof(int32_t));
}

/* An answer for a connection since replaced (a reconnect), or from a job
 * that failed, is not sent (the node sends those frames again). */
static void test_stale_or_failed_answers_not_sent(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n1 = &L->nodes[1];
    for (uint64_t seq = 1; seq <= 3; seq++) {
        assert_true(give_obs(n1, seq, 0, ENVS, false));
        ro__learner_on_check(&L->check);
        assert_int_equal(w.njobs, seq);
        if (seq == 1)
            n1->link.gen++;
        if (seq == 2)
            w.jobs[1]->failed = true;
        answer(L, (uint32_t)seq - 1, (const int32_t[]){1, 1, 1, 1});
    }
    assert_int_equal(w.nev, 1); /* seq 3's only */
    assert_int_equal(ev(0, EV_SEND, &n1->link, NULL)->seq, 3);
}

/* A connection going down voids its own pending frames, not another's; a
 * SEED node's goodbye steps replace its count; a failed, done link makes
 * exit 1 and is no longer open. */
static void test_down_voids_own_frames(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    assert_true(give_obs(n0, 1, 0, 2, false));
    assert_true(give_obs(n1, 1, 0, 1, false));
    assert_int_equal(L->steps, 3);
    n0->link.has_goodbye_steps = true;
    n0->link.goodbye_steps = 1; /* its second row's frame was never stepped */
    ro__learner_link_ops.on_down(&n0->link);
    assert_int_equal(L->pending.rows, 1);
    ro_pending_t *p = ro__container_of(L->pending.head, ro_pending_t, item);
    assert_ptr_equal(p->link, &n1->link);
    assert_int_equal(n0->link.alloc.used, 0);
    assert_int_equal(n0->steps, 1);
    assert_int_equal(L->steps, 2);
    assert_false(n0->link.has_goodbye_steps);
    assert_int_equal(L->open_links, NODES);
    assert_int_equal(L->exit_code, 0);
    n1->stream = true; /* a stream node's steps are its segments' */
    n1->link.has_goodbye_steps = true;
    n1->link.goodbye_steps = 50;
    n1->link.failed = n1->link.done = true;
    ro__learner_link_ops.on_down(&n1->link);
    assert_int_equal(L->pending.rows, 0);
    assert_int_equal(L->steps, 2);
    assert_int_equal(L->exit_code, 1);
    assert_int_equal(L->open_links, NODES - 1);
    assert_false(L->finished);
}

/* Each bad frame fails its link by name, and nothing of it is kept. */
static void test_bad_frames_fail_the_link(void **state)
{
    fixture_t *f = *state;
    learner_t *L = f->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    const ro_seed_mem_layout_t *ml = &n0->seed_lay;
    ((float *)(void *)((uint8_t *)f->obs_mem + ml->reward_off))[1] = NAN;
    const char *want[] = {
        "unexpected policy_accepted frame from a node",
        "observations 2: inconsistent field lengths",
        "observations 3: env 9 outside [0, 4)",
        "observations 4 in memory, but no shared memory was agreed",
        "observations 5 in memory: the reward of env 1 is NaN",
        "out of memory",
    };
    for (uint32_t k = 0; k < 6; k++) {
        node_t *n = k == 4 ? n0 : n1;
        obs_msg_t m;
        obs_init(&m, k + 1, 0, 2, k == 3 || k == 4);
        m.o.n_obs -= k == 1;
        m.env[1] = k == 2 ? 9 : m.env[1];
        ro_frame_t *fr = obs_frame(n, &m);
        if (k == 0) {
            Rollout__V1__PolicyAccepted pa = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
            ro_frame_t a = ROLLOUT__V1__FRAME__INIT;
            a.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
            a.policy_accepted = &pa;
            ro__frame_free(&n->link.alloc, fr);
            fr = decoded(n, &a);
        }
        w.fail_malloc = k == 5;
        assert_false(give(n, fr));
        assert_int_equal(w.fail_malloc, 0);
        ev(k, EV_FAIL, &n->link, want[k]);
    }
    assert_int_equal(w.nev, 6);
    assert_int_equal(L->pending.rows, 0);
    assert_int_equal(n0->frames + n1->frames, 0);
    L->stopping = true; /* stopping: frames are dropped, quietly */
    assert_false(give_obs(n1, 7, 0, 2, false));
    assert_int_equal(w.nev, 6);
    assert_int_equal(L->pending.rows, 0);
}

/* --push-policy: a node's PolicyAccepted counts, says goodbye and closes
 * the link for good; any other frame fails it. */
static void test_push(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n0 = &L->nodes[0], *n1 = &L->nodes[1];
    Rollout__V1__PolicyParams params = ROLLOUT__V1__POLICY_PARAMS__INIT;
    L->push = &params;
    Rollout__V1__PolicyAccepted pa = ROLLOUT__V1__POLICY_ACCEPTED__INIT;
    pa.version = 9;
    ro_frame_t a = ROLLOUT__V1__FRAME__INIT;
    a.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED;
    a.policy_accepted = &pa;
    assert_false(give(n0, decoded(n0, &a)));
    assert_int_equal(L->pushed, 1);
    ev(0, EV_GOODBYE, &n0->link, "policy pushed");
    assert_true(ev(1, EV_CLOSE, &n0->link, "accepted policy version 9")->final);
    assert_false(give_obs(n1, 1, 0, 2, false));
    ev(2, EV_FAIL, &n1->link, "unexpected observations frame from a node");
    assert_int_equal(L->pushed, 1);
    assert_int_equal(L->pending.rows, 0);
    L->push = NULL;
}

/* Frames posted in a node's ring are taken at each check and before the
 * loop may block (a bounded number of rounds, then one turn without
 * blocking); a ring not to be believed fails the link. */
static void test_ring_frames(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n0 = &L->nodes[0];
    w.ring_node = n0;
    w.ring_len = 3;
    w.ring_rc[0] = w.ring_rc[1] = w.ring_rc[2] = 1;
    memcpy(w.ring_ranges, ((uint32_t[3][2]){{0, 1}, {3, 1}, {2, 1}}), sizeof(uint32_t[3][2]));
    ro__learner_on_check(&L->check);
    assert_int_equal(w.ring_at, 3);
    assert_int_equal(n0->frames_in_memory, 3);
    assert_int_equal(L->pending.rows, 3);
    for (ro_batch_item_t *it = L->pending.head; it; it = it->next)
        assert_null(ro__container_of(it, ro_pending_t, item)->frame);
    w.ring_len = 4; /* one more before the loop blocks: taken, and a batch goes */
    w.ring_rc[3] = 1;
    w.ring_ranges[3][0] = 1, w.ring_ranges[3][1] = 1;
    w.sleep_false = 1;
    ro__learner_on_prepare(&L->prepare);
    assert_int_equal(w.sleeps, 2);
    assert_int_equal(w.njobs, 1);
    assert_false(uv_is_active((uv_handle_t *)&L->kick));
    answer(L, 0, NULL);
    w.sleep_false = 1000; /* frames keep coming: 16 rounds, then a turn without blocking */
    ro__learner_on_prepare(&L->prepare);
    assert_int_equal(w.sleeps, 2 + 16);
    assert_true(uv_is_active((uv_handle_t *)&L->kick));
    ro__learner_on_prepare(&L->prepare); /* the loop will not block: nothing to mark */
    assert_int_equal(w.sleeps, 2 + 16);
    w.ring_len = 5;
    w.ring_rc[4] = RO_EPROTO;
    ro__learner_on_check(&L->check);
    ev(w.nev - 1, EV_FAIL, &n0->link, "frame ring: tail 9 is past head 3");
    assert_int_equal(L->pending.rows, 0);
}

/* After answering, what the sockets hold is read at once: a frame read
 * then goes in this check's batch; reading stops when nothing came, and
 * after 16 rounds at most. Stream nodes are not read so. */
static void test_read_now(void **state)
{
    learner_t *L = ((fixture_t *)*state)->L;
    node_t *n1 = &L->nodes[1];
    ro__learner_on_check(&L->check); /* nothing there: one round, both nodes */
    assert_int_equal(w.read_nows, 2);
    obs_msg_t m;
    obs_init(&m, 1, 0, ENVS, false);
    w.delivered = obs_frame(n1, &m);
    w.read_bytes = 64; /* and more keeps coming */
    L->nodes[0].stream = true;
    w.read_nows = 0;
    ro__learner_on_check(&L->check);
    assert_null(w.delivered);
    assert_int_equal(w.njobs, 1);
    assert_int_equal(w.read_nows, 16);
    answer(L, 0, NULL);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_batch_across_nodes_answered),
        T(test_stale_or_failed_answers_not_sent),
        T(test_down_voids_own_frames),
        T(test_bad_frames_fail_the_link),
        T(test_push),
        T(test_ring_frames),
        T(test_read_now),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
