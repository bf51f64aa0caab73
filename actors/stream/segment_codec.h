/*
 * A segment on the wire: Frame{segment: Segment{..., tensors}} in
 * protobuf's own encoding, laid out as buffers for one vectored write: the
 * small headers in a scratch of the write, each column's bytes where they
 * lie in the segment (no copy); or, to a learner that maps the segment
 * memory, the headers alone with each column's offset in that memory. The bytes are those
 * protobuf-c would pack for the same message (tests/actors/stream/test_segment_codec.c checks it).
 */
#ifndef RO_SEGMENT_CODEC_H
#define RO_SEGMENT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "actors/stream/segment.h"

/* Buffers of one segment's frame: at most a prefix plus a header and the
 * data of each column. */
#define RO_SEG_WIRE_BUFS (1 + 2 * RO_SEG_MAX_COLS)

typedef struct ro_seg_wire {
    uv_buf_t bufs[RO_SEG_WIRE_BUFS];
    unsigned nbufs;
    size_t bytes;      /* the whole frame, length prefix included */
    size_t used;       /* of hdr */
    uint8_t hdr[6144]; /* RO_SEG_MAX_COLS headers of at most ~100 bytes, and the segment's */
} ro_seg_wire_t;

/* ro__seg_wire_build lays out s as a frame with connection sequence seq.
 * w->bufs point into w->hdr and into s. With base (the shared memory that
 * holds s, runtime/shared_mem.h), the frame refers to the columns by
 * their offset from base instead (Segment.in_memory): one small buffer,
 * in w->hdr. */
void ro__seg_wire_build(ro_seg_wire_t *w, const ro_segment_t *s, uint64_t seq, const void *base);

#endif
