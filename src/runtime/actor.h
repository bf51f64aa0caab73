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
 * ro__actor_init_worker) or the libuv loop (a uv_async_t; see
 * ro__actor_init_loop). The actor only knows how to make itself runnable
 * there (its schedule function), so this file depends on no scheduler.
 */
#ifndef RO_ACTOR_H
#define RO_ACTOR_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/mpscq.h"

#define ro__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

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
    void *home;              /* a worker's run queue, or the loop's uv_async_t */
    uint32_t batch;          /* messages handled per run before yielding */

    /* Run-queue link: touched only under the run queue's mutex. */
    ro_actor_t *runq_next;

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

/* ro__actor_init_loop prepares an actor that runs on the loop thread. The
 * caller owns `async`, already initialised with uv_async_init() whose
 * callback calls ro__actor_drain(); its data field must point to `a`. */
void ro__actor_init_loop(ro_actor_t *a, const char *name, ro_behaviour_fn fn, uv_async_t *async);

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

/* ro__actor_drain runs a loop actor until it has nothing left. Loop thread;
 * the uv_async_t callback of a loop actor. */
void ro__actor_async_cb(uv_async_t *handle);

#endif
