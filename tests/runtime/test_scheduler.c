/* Actors on the scheduler: an actor never runs on two threads at once, no
 * message is lost, timers fire in deadline order and no earlier than their
 * deadline, loop actors drain, and everything shuts down cleanly. Every wait
 * is on an event (a latch, a flag); the only clock is one hang guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "runtime/actor.h"
#include "runtime/clock.h"
#include "runtime/scheduler.h"

/* A latch the test thread waits on until `target` events happened. */
typedef struct latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t count, target;
} latch_t;

static void latch_init(latch_t *l, uint64_t target)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->count = 0;
    l->target = target;
}

static void latch_add(latch_t *l)
{
    pthread_mutex_lock(&l->mu);
    if (++l->count >= l->target)
        pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* A hang guard, not a speed limit: only a lost event takes this long. */
#define HANG_GUARD_S 120

/* Waits for the target (at most HANG_GUARD_S); returns whether it was
 * reached. */
static int latch_wait(latch_t *l)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += HANG_GUARD_S;
    pthread_mutex_lock(&l->mu);
    int rc = 0;
    while (l->count < l->target && rc == 0)
        rc = pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    int ok = l->count >= l->target;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static ro_sched_t *make_sched(int workers)
{
    ro_worker_plan_t plan[8];
    for (int i = 0; i < workers; i++) {
        plan[i].cpu = -1; /* unpinned: tests must not depend on CPU count */
        plan[i].group = 0;
    }
    int node = 0;
    ro_sched_t *s = NULL;
    assert_int_equal(ro__sched_new(&s, 1, &node, plan, workers), 0);
    assert_int_equal(ro__sched_start(s), 0);
    return s;
}

/* ---- exclusivity: many senders, several workers, one actor ---- */

typedef struct counted {
    ro_actor_t actor;
    atomic_int running;  /* 1 while some thread runs the behaviour */
    uint64_t handled;    /* plain field: only the running thread touches it */
    atomic_int overlaps; /* times two threads ran it at once */
    latch_t *done;
} counted_t;

typedef struct cmsg {
    ro_msg_t msg;
} cmsg_t;

static void counted_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    counted_t *c = ro__container_of(self, counted_t, actor);
    (void)msg;
    if (atomic_exchange(&c->running, 1) != 0)
        atomic_fetch_add(&c->overlaps, 1);
    c->handled++;
    for (volatile int i = 0; i < 20; i++) {
    } /* widen the window a racing run would hit */
    atomic_store(&c->running, 0);
    latch_add(c->done);
}

#define SENDERS 4
#define PER_SENDER 20000

typedef struct sender {
    counted_t *to;
    cmsg_t *msgs;
} sender_t;

static void *send_all(void *p)
{
    sender_t *s = p;
    for (int i = 0; i < PER_SENDER; i++)
        ro__actor_send(&s->to->actor, &s->msgs[i].msg);
    return NULL;
}

static void test_actor_runs_on_one_thread_at_a_time(void **state)
{
    (void)state;
    ro_sched_t *s = make_sched(4);
    latch_t done;
    latch_init(&done, (uint64_t)SENDERS * PER_SENDER);
    counted_t c = {.done = &done};
    atomic_init(&c.running, 0);
    atomic_init(&c.overlaps, 0);
    /* Small batch: the actor is handed between workers often. */
    ro__actor_init_worker(&c.actor, "counted", counted_behaviour, ro__sched_queue(s, 0), 3);

    pthread_t th[SENDERS];
    sender_t snd[SENDERS];
    for (int i = 0; i < SENDERS; i++) {
        snd[i].to = &c;
        snd[i].msgs = calloc(PER_SENDER, sizeof(cmsg_t));
        assert_int_equal(pthread_create(&th[i], NULL, send_all, &snd[i]), 0);
    }
    for (int i = 0; i < SENDERS; i++)
        pthread_join(th[i], NULL);
    assert_true(latch_wait(&done));
    ro__sched_stop(s);
    assert_int_equal(atomic_load(&c.overlaps), 0);
    assert_int_equal(c.handled, (uint64_t)SENDERS * PER_SENDER);
    assert_int_equal(atomic_load(&c.actor.pending), 0);
    for (int i = 0; i < SENDERS; i++)
        free(snd[i].msgs);
    ro__sched_free(s);
}

/* ---- ping-pong: two actors hand one message back and forth ---- */

typedef struct player {
    ro_actor_t actor;
    struct player *peer;
    uint64_t hits;
    uint64_t limit;
    latch_t *done;
} player_t;

static void player_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    player_t *p = ro__container_of(self, player_t, actor);
    p->hits++;
    if (p->hits + p->peer->hits >= p->limit) {
        latch_add(p->done);
        return;
    }
    ro__actor_send(&p->peer->actor, msg);
}

static void test_ping_pong(void **state)
{
    (void)state;
    ro_sched_t *s = make_sched(2);
    latch_t done;
    latch_init(&done, 1);
    player_t a = {.limit = 100000, .done = &done}, b = {.limit = 100000, .done = &done};
    a.peer = &b;
    b.peer = &a;
    ro__actor_init_worker(&a.actor, "a", player_behaviour, ro__sched_queue(s, 0), 8);
    ro__actor_init_worker(&b.actor, "b", player_behaviour, ro__sched_queue(s, 0), 8);
    ro_msg_t ball = {.type = 1};
    ro__actor_send(&a.actor, &ball);
    assert_true(latch_wait(&done));
    ro__sched_stop(s);
    /* Reads after join: hits were written by workers. */
    assert_int_equal(a.hits + b.hits, 100000);
    assert_true(a.hits == b.hits || a.hits == b.hits + 1);
    ro__sched_free(s);
}

/* ---- timers ---- */

typedef struct waiter {
    ro_actor_t actor;
    ro_timer_t timer;
    uint64_t deadline;
    bool early;      /* ran before its deadline */
    int order;       /* position among the fired timers */
    int *next_order; /* one worker runs them all: a plain counter */
    latch_t *done;
} waiter_t;

static void waiter_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    waiter_t *w = ro__container_of(self, waiter_t, actor);
    (void)msg;
    w->early = ro__now_ns() < w->deadline;
    w->order = (*w->next_order)++;
    latch_add(w->done);
}

static void test_timers_fire_in_order_not_early(void **state)
{
    (void)state;
    /* One worker: its queue runs actors in the order the timers delivered
     * them, whatever the load (a worker woken late fires every due timer at
     * once, in deadline order). */
    ro_sched_t *s = make_sched(1);
    latch_t done;
    latch_init(&done, 3);
    waiter_t w[3];
    int next_order = 0;
    uint64_t now = ro__now_ns();
    /* Armed out of order: 30 ms, 10 ms, 20 ms. */
    const uint64_t delays_ms[3] = {30, 10, 20};
    for (int i = 0; i < 3; i++) {
        w[i].done = &done;
        w[i].early = false;
        w[i].order = -1;
        w[i].next_order = &next_order;
        ro__actor_init_worker(&w[i].actor, "waiter", waiter_behaviour, ro__sched_queue(s, 0), 1);
        w[i].timer.target = &w[i].actor;
        w[i].timer.msg.type = 7;
        w[i].deadline = now + delays_ms[i] * 1000000ull;
        ro__runq_arm(ro__sched_queue(s, 0), &w[i].timer, w[i].deadline);
    }
    assert_true(latch_wait(&done));
    ro__sched_stop(s); /* joins the worker: its writes are visible below */
    for (int i = 0; i < 3; i++)
        assert_false(w[i].early);
    assert_int_equal(w[1].order, 0);
    assert_int_equal(w[2].order, 1);
    assert_int_equal(w[0].order, 2);
    ro__sched_free(s);
}

/* ---- loop actors: workers send, the loop drains via uv_async ---- */

typedef struct sink {
    ro_actor_t actor;
    uv_async_t async;
    uint64_t got, want;
} sink_t;

static void sink_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    sink_t *k = ro__container_of(self, sink_t, actor);
    (void)msg;
    if (++k->got == k->want)
        uv_close((uv_handle_t *)&k->async, NULL);
}

typedef struct loop_sender {
    sink_t *to;
    ro_msg_t *msgs;
    int n;
} loop_sender_t;

static void *send_to_loop(void *p)
{
    loop_sender_t *s = p;
    for (int i = 0; i < s->n; i++)
        ro__actor_send(&s->to->actor, &s->msgs[i]);
    return NULL;
}

static void test_loop_actor_drains_everything(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    sink_t k = {.want = 4 * 50000};
    assert_int_equal(uv_async_init(&loop, &k.async, ro__actor_async_cb), 0);
    k.async.data = &k.actor;
    ro__actor_init_loop(&k.actor, "sink", sink_behaviour, &k.async);
    pthread_t th[4];
    loop_sender_t ls[4];
    for (int i = 0; i < 4; i++) {
        ls[i] = (loop_sender_t){.to = &k, .msgs = calloc(50000, sizeof(ro_msg_t)), .n = 50000};
        assert_int_equal(pthread_create(&th[i], NULL, send_to_loop, &ls[i]), 0);
    }
    /* Runs until the sink closes its handle after the last message. */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        free(ls[i].msgs);
    }
    assert_int_equal(k.got, k.want);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- stealing: an idle worker takes work its busy sibling cannot start ---- */

typedef struct blocker {
    ro_actor_t actor;
    atomic_bool *released;
    latch_t *done;
} blocker_t;

/* Spins until another actor (or the test, giving up) releases it. */
static void blocker_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    blocker_t *b = ro__container_of(self, blocker_t, actor);
    (void)msg;
    while (!atomic_load(b->released))
        sched_yield();
    latch_add(b->done);
}

typedef struct releaser {
    ro_actor_t actor;
    atomic_bool *released;
    latch_t *done;
} releaser_t;

static void releaser_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    releaser_t *r = ro__container_of(self, releaser_t, actor);
    (void)msg;
    atomic_store(r->released, true);
    latch_add(r->done);
}

static void test_idle_worker_steals(void **state)
{
    (void)state;
    ro_sched_t *s = make_sched(2);
    latch_t released_by_actor;
    latch_init(&released_by_actor, 1);
    latch_t done;
    latch_init(&done, 1);
    atomic_bool released;
    atomic_init(&released, false);
    blocker_t b = {.released = &released, .done = &done};
    releaser_t r = {.released = &released, .done = &released_by_actor};
    /* Both live on worker 0's queue. */
    ro__actor_init_worker(&b.actor, "blocker", blocker_behaviour, ro__sched_queue(s, 0), 1);
    ro__actor_init_worker(&r.actor, "releaser", releaser_behaviour, ro__sched_queue(s, 0), 1);
    ro_msg_t m1 = {.type = 1}, m2 = {.type = 2};
    ro__actor_send(&b.actor, &m1);
    /* Wait until the blocker runs (someone is busy with it) ... */
    while (atomic_load_explicit(&ro__sched_queue(s, 0)->runs, memory_order_relaxed) +
               atomic_load_explicit(&ro__sched_queue(s, 1)->runs, memory_order_relaxed) ==
           0)
        sched_yield();
    /* ... then ready the releaser: only the other worker can run it. */
    ro__actor_send(&r.actor, &m2);
    int stolen = latch_wait(&released_by_actor);
    if (!stolen) /* free the spinning worker so that stop can join it */
        atomic_store(&released, true);
    assert_true(latch_wait(&done));
    ro__sched_stop(s);
    if (!stolen)
        fail_msg("the idle worker never stole the releaser from its busy sibling's queue");
    assert_true(ro__sched_steals(s) >= 1);
    ro__sched_free(s);
}

/* ---- stop with nothing to do returns promptly; plan validation ---- */

static void test_stop_idle_and_bad_plans(void **state)
{
    (void)state;
    ro_sched_t *s = make_sched(3);
    ro__sched_stop(s);
    assert_int_equal(ro__sched_nworkers(s), 3);
    ro__sched_free(s);

    ro_worker_plan_t bad = {.cpu = -1, .group = 1};
    int node = 0;
    assert_int_not_equal(ro__sched_new(&s, 1, &node, &bad, 1), 0);
    assert_int_not_equal(ro__sched_new(&s, 0, &node, &bad, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_actor_runs_on_one_thread_at_a_time),
        cmocka_unit_test(test_ping_pong),
        cmocka_unit_test(test_timers_fire_in_order_not_early),
        cmocka_unit_test(test_loop_actor_drains_everything),
        cmocka_unit_test(test_idle_worker_steals),
        cmocka_unit_test(test_stop_idle_and_bad_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
