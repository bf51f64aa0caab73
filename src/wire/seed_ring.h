/*
 * SEED mode's frame rings (docs/protocol.md "Frames in a ring"): a node on
 * the learner's host posts its in-memory Observations frames (a seq and
 * the ranges of envs it names) into memory both map, instead of writing
 * them to the socket, while the learner is awake to look; the learner
 * posts its in-memory Actions (a seq) the other way, while the node is.
 *
 * Why: at 256 envs a SEED learner spent 17 % of its time in the recv and
 * write of those 8- to 14-byte frames (perf, after every other system
 * call of its turn was gone): socket buffers allocated, charged to the
 * memory cgroup and freed per message. A slot in shared memory costs a few
 * cache lines.
 *
 * Each ring has one producer and one consumer, loop threads of two
 * processes. head_state counts posted entries in its upper 63 bits; bit 0
 * is the consumer's "asleep": set (by compare-and-swap, only while every
 * posted entry was taken) before its loop may block in epoll_wait, cleared
 * when it wakes. The producer posts by compare-and-swap too, so a post
 * either lands while the consumer is awake (who will see it before it can
 * sleep: its own compare-and-swap would fail) or finds it asleep and is
 * not made: the producer then sends the frame on the socket, which wakes
 * it. No wake-up is lost, and no frame goes both ways.
 *
 * Both sides treat the memory as the peer's bytes: the consumer copies a
 * slot before it checks it and refuses a head that runs ahead of what the
 * ring holds; the producer reads the consumer's tail only to know whether
 * a slot is free, and any tail it cannot believe reads as a full ring.
 */
#ifndef RO_WIRE_SEED_RING_H
#define RO_WIRE_SEED_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RO_SEED_RING_SLOTS 64u  /* frames the ring holds; more in flight go on the socket */
#define RO_SEED_RING_VALUES 28u /* range values a slot holds: 14 (first, count) pairs */

/* One posted frame: Observations { seq, in_memory: true, ranges } (the
 * frame ring), or Actions { seq, in_memory: true } with no values (the
 * answer ring). */
typedef struct ro_seed_ring_slot {
    uint64_t seq;
    uint32_t nvalues;
    uint32_t reserved; /* 0 */
    uint32_t values[RO_SEED_RING_VALUES];
} ro_seed_ring_slot_t;

/* The memory, as both processes map it: each counter on its own cache line. */
typedef struct ro_seed_ring {
    _Atomic uint64_t head_state; /* producer (+2 per post), consumer (bit 0) */
    uint8_t pad0[56];
    _Atomic uint64_t tail; /* consumer: frames taken */
    uint8_t pad1[56];
    ro_seed_ring_slot_t slots[RO_SEED_RING_SLOTS];
} ro_seed_ring_t;

/* The memory a node offers (SeedMemory.ring_bytes): a ring each way. */
typedef struct ro_seed_rings {
    ro_seed_ring_t frames;  /* node -> learner: Observations */
    ro_seed_ring_t answers; /* learner -> node: Actions */
} ro_seed_rings_t;

#define RO_SEED_RING_BYTES sizeof(ro_seed_rings_t)

/* What a post did. */
typedef enum {
    RO_SEED_RING_POSTED = 0, /* in the ring: the consumer is awake and will take it */
    RO_SEED_RING_ASLEEP,     /* not posted: the consumer may be asleep; send it on the socket */
    RO_SEED_RING_FULL,       /* not posted: no free slot (or a tail not to be believed) */
    RO_SEED_RING_TOO_BIG,    /* not posted: more ranges than a slot holds */
} ro_seed_ring_post_t;

/* ro__seed_ring_post: the producer posts frame seq naming nvalues range
 * values. Producer's thread. */
ro_seed_ring_post_t ro__seed_ring_post(ro_seed_ring_t *r, uint64_t seq, const uint32_t *values,
                                       size_t nvalues);

/* ro__seed_ring_take: the consumer takes the next posted entry into *out
 * (a copy, its values checked to fit a slot; what they say is for the
 * caller to check, as a frame's), advancing *tail, its own count, which it
 * also publishes. 1: an entry; 0: none posted; RO_EPROTO with one line in
 * err naming the ring (name): its head or the slot is not to be believed.
 * Consumer's thread. */
int ro__seed_ring_take(ro_seed_ring_t *r, const char *name, uint64_t *tail,
                       ro_seed_ring_slot_t *out, char *err, size_t errlen);

/* ro__seed_ring_sleep: the consumer is about to block. True if it may:
 * every posted frame was taken (tail) and it is now marked asleep, so a
 * post will go on the socket. False: a frame is waiting; take it first.
 * Consumer's thread. */
bool ro__seed_ring_sleep(ro_seed_ring_t *r, uint64_t tail);

/* ro__seed_ring_wake: the consumer is awake again (its loop is past
 * blocking); the producer may post. Consumer's thread. */
void ro__seed_ring_wake(ro_seed_ring_t *r);

#endif
