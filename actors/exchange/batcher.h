/*
 * Dynamic batching: the one implementation shared by the local learner
 * lanes, the remote-learner hub (one per learner session) and
 * rollout-learner. Items (step batches, received frames) queue up in
 * arrival order; a batch goes when
 *   - `batch` rows are queued (full), or
 *   - nothing else can arrive before it could go (the caller says how many
 *     rows may still come: 0 means every row it serves is waiting), or
 *   - the oldest queued item has waited max_wait (a partial batch).
 * A batch is whole items, taken from the front until it holds at least
 * `batch` rows: the last item may take it past `batch` (by less than one
 * item), so a consumer sizes its buffers for batch + largest item - 1.
 *
 * One owner thread (the actor or loop that holds the batcher); it reads
 * the clock only when the answer depends on it.
 */
#ifndef RO_BATCHER_H
#define RO_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ro_batch_item {
    struct ro_batch_item *next;
    uint32_t rows;
} ro_batch_item_t;

typedef struct ro_batcher {
    ro_batch_item_t *head, **tail;
    uint32_t rows;        /* rows queued */
    uint32_t batch;       /* rows that make a full batch */
    uint64_t max_wait_ns; /* a partial batch goes after this; 0: at once */
    uint64_t oldest_ns;   /* when the oldest queued item started waiting */
} ro_batcher_t;

/* Rows that may still arrive when the caller cannot tell. */
#define RO_BATCHER_UNKNOWN UINT32_MAX

void ro__batcher_init(ro_batcher_t *b, uint32_t batch, uint64_t max_wait_ns);

/* ro__batcher_push queues it (it->rows set) at the back. */
void ro__batcher_push(ro_batcher_t *b, ro_batch_item_t *it);

/* ro__batcher_due tells whether a batch should go now; more: rows that may
 * still arrive before then (0: none; RO_BATCHER_UNKNOWN). */
bool ro__batcher_due(const ro_batcher_t *b, uint32_t more);

/* ro__batcher_take removes one batch from the front (see above) and
 * returns its items, linked through next; *rows gets their rows. The items
 * left behind start their wait again now. NULL if nothing is queued. */
ro_batch_item_t *ro__batcher_take(ro_batcher_t *b, uint32_t *rows);

/* ro__batcher_take_all removes every queued item (a closing session's). */
ro_batch_item_t *ro__batcher_take_all(ro_batcher_t *b, uint32_t *rows);

/* ro__batcher_deadline is when the oldest queued item will have waited
 * max_wait (CLOCK_MONOTONIC ns), for the caller's timer. */
uint64_t ro__batcher_deadline(const ro_batcher_t *b);

#endif
