/*
 * Actors: state + a behaviour function + a mailbox.
 *
 * A message embeds its queue link (ro_msg_t) in a larger struct owned by its
 * sender; it travels by pointer, never copied. Sending makes the actor
 * runnable only on the mailbox's empty -> non-empty transition, so an actor
 * is on at most one run queue (or being run by at most one thread) at a time
 * and needs no lock for its own state.
 *
 * Where an actor runs is its "home": a worker run queue (ro_runq_t, see
 * sched.h) or the libuv loop (a uv_async_t; see ro__actor_init_loop).
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
struct ro_runq;

/* A behaviour handles one message on the thread running the actor. */
typedef void (*ro_behaviour_fn)(ro_actor_t *self, ro_msg_t *msg);

struct ro_actor {
    /* Set before the first send, read-only afterwards. */
    ro_behaviour_fn behaviour;
    const char *name;
    struct ro_runq *runq; /* worker home, or NULL for a loop actor */
    uv_async_t *async;    /* loop home: owned by the actor's embedder */
    uint32_t batch;       /* messages handled per run before yielding */

    /* Run-queue link: touched only under the run queue's mutex. */
    ro_actor_t *runq_next;

    ro_mpscq_t mailbox;

    /* Messages pushed minus messages handled. Touched by every sender and by
     * the running thread: its own cache line. Signed: a message can be
     * handled before its sender counts it (see actor.c). */
    alignas(64) atomic_int_fast64_t pending;
};

/* ro__actor_init_worker prepares an actor that runs on worker threads of
 * runq. Before the first send. */
void ro__actor_init_worker(ro_actor_t *a, const char *name, ro_behaviour_fn fn,
                           struct ro_runq *runq, uint32_t batch);

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
