/*
 * rollout-learner's side of a SEED node's frame rings (wire/seed_ring.h,
 * docs/protocol.md "Frames in a ring"): mapping them, taking the node's
 * frames as Observations, marking that ring asleep before the loop may
 * block, and posting our answers in the other. serve.c drives it; this
 * file calls nothing of serve.c. Loop thread.
 */
#ifndef RO_LEARNER_FRAME_RING_H
#define RO_LEARNER_FRAME_RING_H

#include <stdbool.h>
#include <stddef.h>

#include "learner/learner.h"
#include "wire/seed_ring.h"

/* ro__learner_ring_map maps the ring a SEED welcome's memory offers
 * (releasing n's previous one): none if it offers none; RO_EPROTO with one
 * line in err if we did not ask (asked) or it is not the size this
 * learner's ring is, or cannot be mapped. */
int ro__learner_ring_map(node_t *n, const Rollout__V1__SeedMemory *m, bool asked, char *err,
                         size_t errlen);

/* ro__learner_ring_live: n has a ring and a connection that takes frames. */
bool ro__learner_ring_live(const node_t *n);

/* ro__learner_ring_next takes n's next posted frame into *o, whose ranges
 * point into *slot (the caller's): 1; 0 if none; RO_EPROTO with one line in
 * err if the ring is not to be believed. */
int ro__learner_ring_next(node_t *n, Rollout__V1__Observations *o, ro_seed_ring_slot_t *slot,
                          char *err, size_t errlen);

/* ro__learner_rings_sleep marks every live ring asleep, before the loop may
 * block: true if all are; false if a frame is waiting in one (take it,
 * then try again). */
bool ro__learner_rings_sleep(learner_t *L);

/* ro__learner_rings_wake: the loop is past blocking; the nodes may post. */
void ro__learner_rings_wake(learner_t *L);

/* ro__learner_ring_answer posts the in-memory answer to frame seq in n's
 * answer ring (its actions written before): true; false if the node may
 * be asleep, or has no ring, the ring is full: send it on the socket. */
bool ro__learner_ring_answer(node_t *n, uint64_t seq);

#endif
