/*
 * The flow of segments through one learner session of the hub in stream
 * mode: pending (the session owns their shards) -> sent, at most `window`
 * unacknowledged -> acknowledged by a cumulative SegmentAck, which frees
 * them. A session's segments come back to the hub when it closes (sent
 * ones in order, then pending ones), so that none is lost.
 *
 * Loop thread (the hub's), like everything of the hub.
 */
#ifndef RO_STREAM_FLOW_H
#define RO_STREAM_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/stream/segment.h"
#include "runtime/shared_mem.h"
#include "wire/conn.h"

/* What sending and acknowledging did, for the hub's counters, and where
 * each shard's segments are. Shared by all of a hub's sessions. */
typedef struct ro_sflow_stats {
    uint64_t sent, acked, dropped_lag; /* segments */
    uint64_t transitions_sent, transitions_acked;
    uint64_t lag_sum, lag_count, lag_min, lag_max; /* versions behind at send */
    /* [nshards] segments of each shard held by a session, pending or not
     * yet acknowledged: a shard may move to another learner only at 0, so
     * that its segments reach learners in order. NULL: not counted. */
    uint32_t *held;
} ro_sflow_stats_t;

typedef struct ro_sflow {
    ro_segment_t *pending_head, **pending_tail;
    ro_segment_t *sent_head, **sent_tail; /* in send order */
    uint32_t pending, sent;               /* segments */
    uint32_t window;                      /* most unacknowledged */
    uint32_t max_lag;                     /* 0: any */
    uint64_t next_seq;
    /* The segment memory its learner maps (the pool's, in shared memory):
     * segments go as references into it. NULL: with their bytes. */
    const ro_shared_mem_t *shm;
} ro_sflow_t;

/* ro__sflow_init: segments with their bytes until f->shm is set. */
void ro__sflow_init(ro_sflow_t *f, uint32_t window, uint32_t max_lag);

/* ro__sflow_push queues a segment to send. */
void ro__sflow_push(ro_sflow_t *f, ro_segment_t *s, ro_sflow_stats_t *st);

/*
 * ro__sflow_send sends pending segments on c while the window has room.
 * A segment whose oldest action is more than max_lag versions behind
 * version_now is not sent: it goes to *dropped (give it back). Returns 0 or
 * the connection's error (the caller closes the session; what was being
 * sent is in flight and comes back with ro__sflow_reclaim).
 */
int ro__sflow_send(ro_sflow_t *f, ro_conn_t *c, uint64_t version_now, ro_segment_t **dropped,
                   ro_sflow_stats_t *st);

/* ro__sflow_ack takes an acknowledgement of every segment up to seq: they
 * go back to their pool (once their frame is written). Returns 0, or
 * RO_EPROTO with one line in err for a seq that was never sent. */
int ro__sflow_ack(ro_sflow_t *f, uint64_t seq, ro_sflow_stats_t *st, char *err, size_t errlen);

/* ro__sflow_reclaim empties the session: sent segments in order, then
 * pending ones; *resent counts the sent ones. */
ro_segment_t *ro__sflow_reclaim(ro_sflow_t *f, uint64_t *resent, ro_sflow_stats_t *st);

/* ro__sflow_oldest_sent_ns: when the oldest unacknowledged one went out. */
uint64_t ro__sflow_oldest_sent_ns(const ro_sflow_t *f);

#endif
