/*
 * rollout-learner against a stream node (--learner stream): every segment
 * is read in place (wire/segment_view.h), checked (an env ABI 2 node's
 * against its welcome's layout), and counted: steps (rows: for env ABI 2,
 * agent steps, as the node counts them), episodes and returns per node
 * (per env), each shard's segments in order (a segment
 * sent again after a reconnect is counted once), policy versions ordered.
 * Loop thread.
 */
#ifndef RO_STREAM_RX_H
#define RO_STREAM_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/histo.h"
#include "runtime/shared_mem.h"
#include "wire/segment_view.h"

typedef struct ro_stream_rx {
    ro_segment_rules_t rules;
    uint64_t *next_seq; /* [num_envs] per shard: the shard_seq expected next (a shard has an env) */
    double *ep_ret;     /* [num_envs] running returns */
    uint64_t steps, episodes, segments, duplicates;
    uint64_t in_memory; /* segments read in the node's shared memory */
    uint64_t gaps;      /* segments missing between two of a shard's (a shard that moved here) */
    double return_sum;
    uint64_t version_min, version_max; /* over every segment */
    ro_histo_t *returns; /* finished episodes' returns go here too (the owner's; NULL: not) */
    /* The node's segment memory this connection maps (its welcome offered
     * it), or zeroed: segments then carry their bytes. */
    ro_shared_mem_t shm;
} ro_stream_rx_t;

/* ro__stream_rx_init prepares for a node's segments. 0 or RO_ENOMEM. */
int ro__stream_rx_init(ro_stream_rx_t *rx, const ro_segment_rules_t *rules);
void ro__stream_rx_free(ro_stream_rx_t *rx);

/* ro__stream_rx_restart forgets the episodes in progress (a restarted
 * node: a new node id). */
void ro__stream_rx_restart(ro_stream_rx_t *rx);

/*
 * ro__stream_rx_frame takes a frame's bytes. Returns 0 if it is not a
 * segment (decode it as usual); 1 if it was a segment, with *ack set to
 * the seq to acknowledge; or a negative code with one line in err (a
 * malformed or inconsistent segment: the node broke the protocol).
 */
int ro__stream_rx_frame(ro_stream_rx_t *rx, const uint8_t *body, size_t len, uint64_t *ack,
                        char *err, size_t errlen);

#endif
