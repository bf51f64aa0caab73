/*
 * A bounded pool of buffers shared by actors on several threads, where an
 * actor that finds it empty does not block its worker: it leaves a waiter
 * and returns; whoever gives a buffer back hands it to the oldest waiter
 * and sends that waiter's message, and the actor claims it when the
 * message arrives. The recorder's chunks and the stream's segments use it;
 * it is how backpressure reaches env actors without a thread ever waiting.
 *
 * Any thread. Items and waiters are the caller's, linked intrusively.
 */
#ifndef RO_GRANT_POOL_H
#define RO_GRANT_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/actor.h"

typedef struct ro_pool_item {
    struct ro_pool_item *next; /* under the pool's mutex while in it */
} ro_pool_item_t;

typedef struct ro_pool_waiter {
    struct ro_pool_waiter *next; /* under the pool's mutex */
    ro_pool_item_t *granted;     /* set under the mutex before msg is sent */
    ro_actor_t *to;              /* receives msg when an item is granted */
    ro_msg_t *msg;
} ro_pool_waiter_t;

typedef struct ro_grant_pool {
    pthread_mutex_t mu;
    ro_pool_item_t *free_head;                /* under mu */
    ro_pool_waiter_t *wait_head, **wait_tail; /* under mu */
    uint32_t nfree, nwaiting;                 /* under mu */
} ro_grant_pool_t;

void ro__grant_pool_init(ro_grant_pool_t *p);
void ro__grant_pool_destroy(ro_grant_pool_t *p);

/* ro__grant_pool_take returns a free item; or, if none, queues w (unless w
 * is NULL) and returns NULL: w->msg comes to w->to once an item is
 * granted. A waiter waits for one item at a time. */
ro_pool_item_t *ro__grant_pool_take(ro_grant_pool_t *p, ro_pool_waiter_t *w);

/* ro__grant_pool_claim returns the item granted to w (after its message). */
ro_pool_item_t *ro__grant_pool_claim(ro_grant_pool_t *p, ro_pool_waiter_t *w);

/* ro__grant_pool_give puts items (a list through next) back: to waiters
 * first, oldest first, each sent its message, then to the free list. */
void ro__grant_pool_give(ro_grant_pool_t *p, ro_pool_item_t *list);

/* ro__grant_pool_counts reads how many items are free and how many
 * waiters wait (a consistent pair, for statistics and tests). */
void ro__grant_pool_counts(ro_grant_pool_t *p, uint32_t *nfree, uint32_t *nwaiting);

#endif
