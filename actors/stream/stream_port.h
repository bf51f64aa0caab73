/*
 * A shard's stream port (docs/protocol.md "Stream mode"): the env actor's
 * side of stream mode. It fills the shard's segment being written
 * (segment.h), one row per step (capture before and after each step), hands
 * it to the stream hub when T rows are in, and takes the next from the
 * node's segment pool, waiting for a grant without blocking its worker when
 * none is free.
 *
 * Both env ABIs take the same path: an ABI 1 segment is one float32
 * observation tensor with the ABI 1 column numbers (ro__seg_cols,
 * segment.h, says where each column lies).
 */
#ifndef RO_STREAM_PORT_H
#define RO_STREAM_PORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "actors/exchange/step_batch.h"
#include "actors/stream/segment.h"
#include "runtime/actor.h"
#include "runtime/grant_pool.h"

/* A shard's connection to the stream: its segment being filled. Owned by
 * the env actor (its thread), but for `waiter` (the pool's mutex) and the
 * statistics (relaxed atomics). */
typedef struct ro_stream_port {
    ro_seg_pool_t *pool;
    ro_actor_t *hub; /* receives full segments */
    uint32_t shard;
    ro_segment_t *cur; /* being filled; NULL while waiting for a grant */
    uint64_t next_seq; /* shard_seq of the next segment */
    ro_pool_waiter_t waiter;
    ro_msg_t resume_msg; /* pool -> env actor: a segment is granted */
    uint64_t wait_since_ns;
    _Atomic uint64_t wait_ns; /* time the shard waited for segments (relaxed) */
    _Atomic uint64_t waits;   /* how often (relaxed) */
} ro_stream_port_t;

/* ro__stream_capture_state copies the rows' recurrent states (b->rstate,
 * state_floats each: h, then an LSTM's c) into the segment being filled,
 * before its first step goes to the learner; zeros for a row whose
 * episode starts there. Env actor's thread, with a segment at row 0. */
void ro__stream_capture_state(ro_stream_port_t *p, const ro_step_batch_t *b);

/* ro__stream_port_init ties a shard's port to the pool and the hub;
 * env_actor receives the grants. Main thread. */
void ro__stream_port_init(ro_stream_port_t *p, ro_seg_pool_t *pool, ro_actor_t *hub, uint32_t shard,
                          ro_actor_t *env_actor);

/* ro__stream_port_ready makes sure the port has a segment to fill: true if
 * it has; false if the shard must wait for RO_MSG_STREAM_RESUME, then call
 * ro__stream_port_resume. The env actor's thread. */
bool ro__stream_port_ready(ro_stream_port_t *p);
void ro__stream_port_resume(ro_stream_port_t *p);

/* ro__stream_capture_action records row t's observation, action and its
 * statistics (b as the learner answered it), is_first, and the env
 * counters ep_num/ep_len (per env; an env ABI 2 env's rows take their
 * env's). ABI 2: every tensor, the discrete entries and box floats, the
 * mask the actions were chosen under. Before the env actor steps. */
void ro__stream_capture_action(ro_stream_port_t *p, const ro_step_batch_t *b,
                               const uint64_t *ep_num, const uint32_t *ep_len);

/* ro__stream_capture_outcome records what the step did (rewards, flags,
 * final observations) and, when T rows are in, hands the segment to the
 * hub. Returns as ro__stream_port_ready for the next segment. After the
 * step. */
bool ro__stream_capture_outcome(ro_stream_port_t *p, const ro_step_batch_t *b);

/* ro__stream_port_finish hands the segment being filled to the hub as the
 * shard's last, even with no rows (the hub counts the shard done and
 * recycles it). The shard's last step. */
void ro__stream_port_finish(ro_stream_port_t *p, const ro_step_batch_t *b);

#endif
