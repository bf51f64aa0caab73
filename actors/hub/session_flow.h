/*
 * The flow of step batches through one learner session of the hub:
 * pending (batched by the one batcher) -> sent in an Observations frame
 * (in flight, under a sequence number) -> answered by the matching Actions
 * frame. The hub decides which session a step batch goes to; this keeps
 * the session's accounts and frames. A session's batches come back to the
 * hub when it closes (in the order they were sent, then the pending ones),
 * so that none is lost: an unanswered batch is only ever parked in its own
 * step batches, never copied.
 *
 * Loop thread (the hub's), like everything of the hub.
 */
#ifndef RO_SESSION_FLOW_H
#define RO_SESSION_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/exchange/batcher.h"
#include "actors/hub/obs_codec.h"
#include "wire/conn.h"
#include "wire/seed_memory.h"

/* One Observations frame awaiting its Actions. From a pool the hub sizes to
 * its shards: a frame holds at least one, so there are never more. */
typedef struct ro_sent_batch {
    uint64_t seq;
    uint64_t sent_ns; /* for the learner timeout */
    uint32_t rows;
    ro_batch_item_t *items; /* its step batches */
    struct ro_sent_batch *next;
} ro_sent_batch_t;

typedef struct ro_flow {
    ro_batcher_t pending; /* ready, not yet sent */
    ro_sent_batch_t *inflight_head, **inflight_tail;
    uint32_t inflight_rows;
    uint32_t owned_rows; /* envs of the active shards the session holds */
    uint64_t next_seq;
    /* A learner on this host that maps the node's memory (SEED mode,
     * wire/seed_memory.h): the observation memory, its layout and the
     * session's action memory; NULL: frames carry the columns. */
    const ro_seed_mem_layout_t *mem_layout;
    uint8_t *obs_mem;
    const uint8_t *act_mem;
    /* The learner takes frames from a ring in shared memory while it is
     * awake, and posts its answers in another (wire/seed_ring.h); NULL:
     * every frame on the socket. */
    struct ro_seed_rings *rings;
    /* An env of env ABI 2 that is not ABI 1 shaped (spaces/layout.h): its
     * frames carry typed tensors and composite actions; NULL for ABI 1. */
    const struct ro_space_layout *layout;
    /* Why the last ro__flow_answer returned NULL: RO_ERANGE for a value
     * outside the space, RO_EPROTO for the rest (the code sent back). */
    int error;
} ro_flow_t;

void ro__flow_init(ro_flow_t *f, uint32_t batch, uint64_t max_wait_ns);

/* ro__flow_due tells whether a batch should be sent now: full, every
 * owned env waiting (pending or in flight), or max-wait. */
bool ro__flow_due(const ro_flow_t *f);

/*
 * ro__flow_send takes one batch of pending step batches, encodes it with
 * enc (its columns into the observation memory, if the flow has one) under the next sequence number
 * (sent batch from *pool) and sends it on c, or posts it in the flow's ring. The batch is in flight
 * even when the send fails (returns the conn's error): the caller closes the session, whose close
 * returns it. *rows gets its envs.
 */
int ro__flow_send(ro_flow_t *f, ro_sent_batch_t **pool, ro_obs_encoder_t *enc, ro_conn_t *c,
                  uint32_t *rows);

/*
 * ro__flow_answer applies an Actions frame: finds the in-flight batch with
 * its seq, checks the actions against it (act) and writes them into its
 * step batches, which it returns (the caller sends them back to stepping);
 * with a layout, against it and the rows' masks (act unused).
 * The sent batch goes back to *pool. On a bad frame returns NULL with one
 * line in err and its code in f->error (the batch stays in flight).
 */
ro_batch_item_t *ro__flow_answer(ro_flow_t *f, ro_sent_batch_t **pool,
                                 const Rollout__V1__Actions *a, const ro_space_t *act, char *err,
                                 size_t errlen);

/* ro__flow_take_awaiting takes every step batch of the frames awaiting the
 * learner's answer (oldest frame first), linked through next: those frames
 * are answered (the learner's Reseed). */
ro_batch_item_t *ro__flow_take_awaiting(ro_flow_t *f, ro_sent_batch_t **pool, uint64_t *frames);

/* ro__flow_reclaim empties the session: every step batch in flight (oldest
 * frame first), then every pending one, linked through next. *resent
 * counts the frames that were in flight. */
ro_batch_item_t *ro__flow_reclaim(ro_flow_t *f, ro_sent_batch_t **pool, uint64_t *resent);

/* ro__flow_oldest_sent_ns is when the oldest unanswered frame went out; 0
 * if none. */
uint64_t ro__flow_oldest_sent_ns(const ro_flow_t *f);

#endif
