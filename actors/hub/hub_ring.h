/*
 * The remote-learner hub's side of its SEED learners' answer rings
 * (wire/seed_ring.h, docs/protocol.md "Frames in a ring"): each turn of
 * the loop takes the answers posted there, and before the loop may block
 * every ring is marked asleep (answers posted meanwhile taken first), so
 * that learners send on the socket, which wakes it. The answers go to the
 * hub through a callback: this file calls nothing of learner_hub.c. Loop
 * thread.
 */
#ifndef RO_HUB_RING_H
#define RO_HUB_RING_H

#include "actors/hub/hub_internal.h"

/* ro__hub_ring_start prepares h's handles; on_answer gets every answer
 * taken from a ring (bad NULL), or why a session's ring is not to be
 * believed (a NULL; the session must be failed). Cannot fail. */
void ro__hub_ring_start(ro_hub_t *h, ro_hub_answer_fn on_answer);

/* ro__hub_ring_close closes them (with the hub's other handles). */
void ro__hub_ring_close(ro_hub_t *h);

#endif
