/*
 * Intrusive multi-producer single-consumer FIFO with a stub node.
 *
 * Producers (any thread) link nodes embedded in their messages; the single
 * consumer (the thread currently running the owning actor) unlinks them.
 * A popped node is fully detached: the consumer may hand it back to its
 * sender, which may push it again at once. No allocation, no lock.
 *
 * The queue is lock-free for producers (one atomic exchange). A pop can see
 * the queue as momentarily empty while a producer is between its exchange
 * and its link store; the caller's counter (see actor.h) tells it that a
 * message is still on its way.
 */
#ifndef RO_MPSCQ_H
#define RO_MPSCQ_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ro_mpscq_node {
    _Atomic(struct ro_mpscq_node *) next;
} ro_mpscq_node_t;

typedef struct ro_mpscq {
    /* Written by every producer: its own cache line. */
    alignas(64) _Atomic(ro_mpscq_node_t *) head;
    /* Consumer only. */
    alignas(64) ro_mpscq_node_t *tail;
    ro_mpscq_node_t stub;
} ro_mpscq_t;

/* ro__mpscq_init makes an empty queue. Before any other call. */
void ro__mpscq_init(ro_mpscq_t *q);

/* ro__mpscq_push appends node. Any thread. The queue owns node until it is
 * popped. */
void ro__mpscq_push(ro_mpscq_t *q, ro_mpscq_node_t *node);

/* ro__mpscq_pop removes the oldest node, or returns NULL if none is fully
 * linked yet. Consumer thread only. */
ro_mpscq_node_t *ro__mpscq_pop(ro_mpscq_t *q);

#endif
