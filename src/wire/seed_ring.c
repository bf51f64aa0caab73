#include "wire/seed_ring.h"

#include <string.h>

#include "runtime/error.h"

/* The counters are shared between processes: they must be lock-free, so
 * that an atomic operation is the same instruction on both sides. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(sizeof(ro_seed_ring_slot_t) == 128, "a slot is two cache lines");

#define ASLEEP 1u

ro_seed_ring_post_t ro__seed_ring_post(ro_seed_ring_t *r, uint64_t seq, const uint32_t *values,
                                       size_t nvalues)
{
    if (nvalues > RO_SEED_RING_VALUES)
        return RO_SEED_RING_TOO_BIG;
    /* Relaxed: bit 0 is re-read by the compare-and-swap below, which is
     * what decides. */
    const uint64_t hs = atomic_load_explicit(&r->head_state, memory_order_relaxed);
    if (hs & ASLEEP)
        return RO_SEED_RING_ASLEEP;
    const uint64_t head = hs >> 1;
    /* Acquire: the consumer's copy of a slot (before its release of tail)
     * is done before we write that slot again. */
    const uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (tail > head || head - tail >= RO_SEED_RING_SLOTS)
        return RO_SEED_RING_FULL;
    ro_seed_ring_slot_t *s = &r->slots[head % RO_SEED_RING_SLOTS];
    s->seq = seq;
    s->nvalues = (uint32_t)nvalues;
    s->reserved = 0;
    if (nvalues) /* an answer has none (and may pass NULL) */
        memcpy(s->values, values, nvalues * sizeof *values);
    /* Release: the slot's contents before the count that publishes it. A
     * failure means the consumer set its bit (or scribbled on the word):
     * the frame is not posted, and goes on the socket. */
    uint64_t expected = hs;
    if (atomic_compare_exchange_strong_explicit(&r->head_state, &expected, hs + 2,
                                                memory_order_release, memory_order_relaxed))
        return RO_SEED_RING_POSTED;
    return (expected & ASLEEP) ? RO_SEED_RING_ASLEEP : RO_SEED_RING_FULL;
}

int ro__seed_ring_take(ro_seed_ring_t *r, const char *name, uint64_t *tail,
                       ro_seed_ring_slot_t *out, char *err, size_t errlen)
{
    /* Acquire: pairs with the post's release, so the slot is written. */
    const uint64_t head = atomic_load_explicit(&r->head_state, memory_order_acquire) >> 1;
    const uint64_t t = *tail;
    if (head == t)
        return 0;
    if (head < t || head - t > RO_SEED_RING_SLOTS)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "the %s ring says %llu were posted; %llu were taken and it holds %u",
                          name, (unsigned long long)head, (unsigned long long)t,
                          RO_SEED_RING_SLOTS);
    memcpy(out, &r->slots[t % RO_SEED_RING_SLOTS], sizeof *out);
    *tail = t + 1;
    /* Release: our copy is done before the producer may reuse the slot. */
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    if (out->nvalues > RO_SEED_RING_VALUES)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "seq %llu in the %s ring has %u values; a slot holds %u",
                          (unsigned long long)out->seq, name, out->nvalues, RO_SEED_RING_VALUES);
    return 1;
}

bool ro__seed_ring_sleep(ro_seed_ring_t *r, uint64_t tail)
{
    uint64_t hs = atomic_load_explicit(&r->head_state, memory_order_acquire);
    if ((hs >> 1) != tail)
        return false; /* a frame is waiting */
    if (hs & ASLEEP)
        return true;
    /* Acq_rel: a post that this beats sees the bit (its compare-and-swap
     * fails); one that beat this made ours fail, and we take its frame. */
    return atomic_compare_exchange_strong_explicit(&r->head_state, &hs, hs | ASLEEP,
                                                   memory_order_acq_rel, memory_order_acquire);
}

void ro__seed_ring_wake(ro_seed_ring_t *r)
{
    /* Relaxed: only the bit changes; what was posted is read through
     * ro__seed_ring_take's acquire. */
    atomic_fetch_and_explicit(&r->head_state, ~(uint64_t)ASLEEP, memory_order_relaxed);
}
