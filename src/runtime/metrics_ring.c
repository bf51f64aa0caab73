#include "runtime/metrics_ring.h"

#include <stdlib.h>

#include "runtime/error.h"

int ro__metrics_ring_init(ro_metrics_ring_t *r, uint32_t capacity)
{
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        return RO_EINVAL;
    r->cells = aligned_alloc(64, ((sizeof(ro_metric_cell_t) * capacity + 63) / 64) * 64);
    if (!r->cells)
        return RO_ENOMEM;
    for (uint32_t i = 0; i < capacity; i++)
        atomic_init(&r->cells[i].seq, i);
    r->mask = capacity - 1;
    atomic_init(&r->tail, 0);
    r->head = 0;
    atomic_init(&r->dropped, 0);
    return 0;
}

void ro__metrics_ring_free(ro_metrics_ring_t *r)
{
    free(r->cells);
    r->cells = NULL;
}

bool ro__metrics_ring_push(ro_metrics_ring_t *r, const ro_metric_t *rec)
{
    /* Relaxed: the cell's seq (acquire below) is what orders the data. */
    uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        ro_metric_cell_t *c = &r->cells[pos & r->mask];
        /* Acquire pairs with the consumer's release when it freed the cell. */
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            /* Relaxed CAS: claiming the cell orders nothing by itself. */
            if (atomic_compare_exchange_weak_explicit(&r->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                c->rec = *rec;
                /* Release publishes rec to the consumer's acquire load. */
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return true;
            }
            /* pos was reloaded by the failed CAS */
        } else if (dif < 0) {
            /* The cell still holds an unread record from one lap ago: full. */
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed); /* a counter */
            return false;
        } else {
            pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
        }
    }
}

bool ro__metrics_ring_pop(ro_metrics_ring_t *r, ro_metric_t *out)
{
    ro_metric_cell_t *c = &r->cells[r->head & r->mask];
    /* Acquire pairs with the producer's release: rec is complete. */
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (seq != r->head + 1)
        return false;
    *out = c->rec;
    /* Release: our read of rec happens before a producer reuses the cell. */
    atomic_store_explicit(&c->seq, r->head + r->mask + 1, memory_order_release);
    r->head++;
    return true;
}

uint64_t ro__metrics_ring_dropped(ro_metrics_ring_t *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
