/*
 * Actors: state + a behaviour function + a mailbox.
 *
 * A message embeds its queue link (ro_msg_t) in a larger struct owned by its
 * sender; it travels by pointer, never copied. Sending makes the actor
 * runnable only on the mailbox's empty -> non-empty transition, so an actor
 * is on at most one run queue (or being run by at most one thread) at a time
 * and needs no lock for its own state.
 *
 * Where an actor runs is its "home": a worker run queue (scheduler.h:
 * ro__actor_init_worker) or the libuv loop (an ro_loop_home_t; see
 * ro__actor_init_loop). The actor only knows how to make itself runnable
 * there (its schedule function), so this file depends on no scheduler.
 */
#ifndef RO_ACTOR_H
#define RO_ACTOR_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/ilist.h" /* the run-queue link; ro__container_of */
#include "runtime/mpscq.h"

typedef struct ro_msg {
    ro_mpscq_node_t link;
    uint32_t type; /* meaning defined by the receiving actor */
} ro_msg_t;

typedef struct ro_actor ro_actor_t;

/* A behaviour handles one message on the thread running the actor. */
typedef void (*ro_behaviour_fn)(ro_actor_t *self, ro_msg_t *msg);

/* A schedule function puts a runnable actor on its home (a->home): called
 * by the sender whose message made the actor runnable. Any thread. */
typedef void (*ro_schedule_fn)(ro_actor_t *a);

struct ro_actor {
    /* Set before the first send, read-only afterwards. */
    ro_behaviour_fn behaviour;
    const char *name;
    ro_schedule_fn schedule; /* makes the actor runnable at home */
    void *home;              /* a worker's run queue, or an ro_loop_home_t */
    uint32_t batch;          /* messages handled per run before yielding */

    /* Run-queue link: touched only under the run queue's mutex. */
    ro_ilink_t runq_link;

    ro_mpscq_t mailbox;

    /* Messages pushed minus messages handled. Touched by every sender and by
     * the running thread: its own cache line. Signed: a message can be
     * handled before its sender counts it (see actor.c). */
    alignas(64) atomic_int_fast64_t pending;
};

/* ro__actor_init prepares an actor whose home is `home`, made runnable there
 * by `schedule`. Before the first send. Schedulers wrap it (e.g.
 * ro__actor_init_worker in scheduler.h). */
void ro__actor_init(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uint32_t batch,
                    ro_schedule_fn schedule, void *home);

/*
 * A loop actor's home: an eventfd the loop polls, for sends from other
 * threads, and an idle handle, for sends from the loop thread itself. A
 * send that makes the actor runnable from another thread writes the
 * eventfd; the loop reads it and drains the actor. A send from the loop
 * thread (an actor of the loop readying another) starts the idle handle
 * instead: the loop drains the actor on its next turn without a system call
 * or a wake-up, which matters when env actors live on the loop
 * (rollout-node --workers 0).
 * Not a uv_async_t: libuv 1.44's uv_async_send holds its handle "busy"
 * across its write(2), and the loop thread, woken by that very write, spins
 * (997 pauses, then sched_yield) until the sender returns. With a worker
 * sending a batch every few microseconds that spin took 46-56 % of a SEED
 * node's CPU (perf, docs/benchmarks/learners.md). Owned by the caller;
 * valid until the close callbacks of ro__actor_close_loop have run.
 */
typedef struct ro_loop_home {
    uv_poll_t poll;   /* rings from other threads */
    uv_idle_t idle;   /* rings from the loop thread */
    int fd;           /* the eventfd; -1 once closed */
    int open_handles; /* poll and idle not yet closed; loop thread */
    pthread_t thread; /* the loop's thread; read-only after init */
    ro_actor_t *actor;
} ro_loop_home_t;

/* ro__actor_init_loop prepares an actor that runs on `loop`'s thread, with
 * its home in `home`. Returns 0 or a negative errno (as libuv's codes).
 * Loop thread, before the first send. */
int ro__actor_init_loop(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uv_loop_t *loop,
                        ro_loop_home_t *home);

/* ro__actor_close_loop closes a loop actor's home; the loop finishes the
 * close on its next turn. Every thread that sends to the actor must have
 * stopped (joined): a sender can still be ringing after the loop has
 * handled its message. Loop thread. */
void ro__actor_close_loop(ro_loop_home_t *home);

/*
 * ro__actor_send delivers msg to `to`. Any thread. On return the mailbox owns
 * msg until the receiver's behaviour is called with it; then the receiver
 * owns it. Returns true if this send made the actor runnable.
 */
bool ro__actor_send(ro_actor_t *to, ro_msg_t *msg);

/*
 * ro__actor_run handles up to a->batch messages. Called only by the thread
 * that holds the actor (a worker that took it from its run queue, or the
 * loop). Returns true if messages remain: the caller still holds the actor
 * and must run it again (or put it back on its run queue); false if the
 * caller gave the actor up.
 */
bool ro__actor_run(ro_actor_t *a);

#endif
