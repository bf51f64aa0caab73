#include "runtime/mpscq.h"

void ro__mpscq_init(ro_mpscq_t *q)
{
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->head, &q->stub);
    q->tail = &q->stub;
}

void ro__mpscq_push(ro_mpscq_t *q, ro_mpscq_node_t *node)
{
    /* Relaxed: published by the release store into prev->next below. */
    atomic_store_explicit(&node->next, NULL, memory_order_relaxed);
    /* acq_rel: acquire orders us after the previous producer's node init,
     * release publishes our node's next=NULL to the next producer. */
    ro_mpscq_node_t *prev = atomic_exchange_explicit(&q->head, node, memory_order_acq_rel);
    /* Release: the consumer's acquire load of prev->next then sees the whole
     * message that embeds node. */
    atomic_store_explicit(&prev->next, node, memory_order_release);
}

ro_mpscq_node_t *ro__mpscq_pop(ro_mpscq_t *q)
{
    ro_mpscq_node_t *tail = q->tail;
    /* Acquire pairs with the producer's release store of next. */
    ro_mpscq_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == &q->stub) {
        if (next == NULL)
            return NULL;
        /* Skip the stub: it is not a message. */
        q->tail = next;
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    /* tail is the last linked node. If a producer has already swung head
     * past it, its link is in flight: report empty for now. */
    ro_mpscq_node_t *head = atomic_load_explicit(&q->head, memory_order_acquire);
    if (tail != head)
        return NULL;
    /* Put the stub behind tail so tail can be detached. */
    ro__mpscq_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    return NULL;
}
