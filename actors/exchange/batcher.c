#include "actors/exchange/batcher.h"

#include <stddef.h>

#include "runtime/clock.h"

void ro__batcher_init(ro_batcher_t *b, uint32_t batch, uint64_t max_wait_ns)
{
    b->head = NULL;
    b->tail = &b->head;
    b->rows = 0;
    b->batch = batch ? batch : 1;
    b->max_wait_ns = max_wait_ns;
    b->oldest_ns = 0;
}

void ro__batcher_push(ro_batcher_t *b, ro_batch_item_t *it)
{
    if (!b->head)
        b->oldest_ns = ro__now_ns();
    it->next = NULL;
    *b->tail = it;
    b->tail = &it->next;
    b->rows += it->rows;
}

bool ro__batcher_due(const ro_batcher_t *b, uint32_t more)
{
    if (!b->head)
        return false;
    if (b->rows >= b->batch || more == 0 || b->max_wait_ns == 0)
        return true;
    return ro__now_ns() - b->oldest_ns >= b->max_wait_ns;
}

ro_batch_item_t *ro__batcher_take(ro_batcher_t *b, uint32_t *rows)
{
    ro_batch_item_t *taken = NULL, **tail = &taken;
    uint32_t r = 0;
    while (b->head && r < b->batch) {
        ro_batch_item_t *it = b->head;
        b->head = it->next;
        it->next = NULL;
        *tail = it;
        tail = &it->next;
        r += it->rows;
    }
    if (!b->head)
        b->tail = &b->head;
    b->rows -= r;
    /* What is left arrived after everything taken: its wait starts now. */
    if (b->head)
        b->oldest_ns = ro__now_ns();
    *rows = r;
    return taken;
}

ro_batch_item_t *ro__batcher_take_all(ro_batcher_t *b, uint32_t *rows)
{
    ro_batch_item_t *all = b->head;
    *rows = b->rows;
    b->head = NULL;
    b->tail = &b->head;
    b->rows = 0;
    return all;
}

uint64_t ro__batcher_deadline(const ro_batcher_t *b)
{
    return b->oldest_ns + b->max_wait_ns;
}
