/*
 * The wire: protobuf's standard length-delimited framing of Frame messages
 * (proto/rollout.proto). A frame is a varint byte count, then that many
 * bytes of one serialized message, so any protobuf library can read the
 * stream.
 *
 * Everything read here is untrusted: the reader refuses a length prefix
 * over its limit before buffering the body, decodes through a bounded
 * allocator, and reports malformed input as an error, never a crash.
 */
#ifndef RO_FRAME_H
#define RO_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "wire/pb_alloc.h"

#define RO_PROTOCOL_VERSION 1u
#define RO_WIRE_DEFAULT_MAX_FRAME (16u << 20)

typedef Rollout__V1__Frame ro_frame_t;

/* The buffer bytes a reader holds without charging its budget: enough for
 * every small frame and a socket read (conn.h). */
#define RO_FRAME_UNCHARGED (128u << 10)

/* A reader with no budget keeps a buffer grown past RO_FRAME_UNCHARGED
 * while the frames that empty it are at least this large (frame.c). */
#define RO_FRAME_KEEP_MIN (32u << 10)

/*
 * A byte budget shared by several readers (e.g. every connection of a
 * node): what their buffers hold beyond RO_FRAME_UNCHARGED each, together,
 * stays within limit. So many peers each sending part of a large frame
 * cannot make us hold many large buffers at once. One owner thread.
 */
typedef struct ro_frame_budget {
    size_t limit; /* most bytes charged at once */
    size_t used;  /* bytes charged now */
} ro_frame_budget_t;

/* Accumulates stream bytes and cuts them into frames. One owner thread. */
typedef struct ro_frame_reader {
    uint8_t *buf;              /* bytes [start, len) are buffered, not yet decoded */
    size_t start;              /* first buffered byte */
    size_t len;                /* end of the buffered bytes */
    size_t cap;                /* grows up to one frame, its prefix and one read */
    size_t max_frame;          /* largest accepted frame body; the owner may change it */
    uint64_t offset;           /* stream offset of buf[start], for messages */
    size_t peeked;             /* bytes of the frame peek found (prefix included) */
    ro_pb_alloc_t *alloc;      /* decodes; the caller's, shared by whatever it reads */
    ro_frame_budget_t *budget; /* charged for cap over RO_FRAME_UNCHARGED, or NULL */
    size_t charged;            /* what this reader holds of budget->used */
    bool over_budget;          /* space() failed for the budget (not for malloc) */
} ro_frame_reader_t;

/* ro__frame_reader_init prepares a reader that decodes with alloc (which
 * must outlive every frame it decoded). Returns 0 or RO_ENOMEM. */
int ro__frame_reader_init(ro_frame_reader_t *r, size_t max_frame, ro_pb_alloc_t *alloc);

/* ro__frame_reader_set_budget makes r charge budget (which must outlive it)
 * for its buffer from now on; NULL: no budget. */
void ro__frame_reader_set_budget(ro_frame_reader_t *r, ro_frame_budget_t *budget);
/* ro__frame_reader_free frees the buffer and gives its charge back. */
void ro__frame_reader_free(ro_frame_reader_t *r);

/* ro__frame_reader_space returns where the next n bytes read from the
 * stream may be written (room for at least n), so that a socket reads
 * straight into the reader; then ro__frame_reader_commit(r, got). Returns
 * NULL if out of memory, or if the buffer would take the budget over its
 * limit (r->over_budget is then set). */
uint8_t *ro__frame_reader_space(ro_frame_reader_t *r, size_t n);
void ro__frame_reader_commit(ro_frame_reader_t *r, size_t n);

/* ro__frame_reader_feed appends n bytes. Returns 0, or RO_ENOMEM. */
int ro__frame_reader_feed(ro_frame_reader_t *r, const void *data, size_t n);

/*
 * ro__frame_reader_next decodes the next complete frame. Returns 1 and sets
 * *out (free it with ro__frame_free and the reader's allocator), 0 if more
 * bytes are needed, or a negative code with a message in err: RO_EBADMSG
 * for a bad varint or a body that does not decode, RO_EMSGSIZE for a frame
 * over max_frame (refused from its prefix alone) or one that decodes into
 * more than the allocator may hold. After an error the stream cannot be
 * resynchronised: close it.
 */
int ro__frame_reader_next(ro_frame_reader_t *r, ro_frame_t **out, char *err, size_t errlen);

/* ro__frame_reader_peek finds the next complete frame without decoding it:
 * returns 1 with *body, *len pointing into the reader (valid until the next
 * call on it), 0 if more bytes are needed, or a negative code as next().
 * ro__frame_reader_skip then consumes it. For frames read in place
 * (stream-mode segments: wire/segment_view.h). */
int ro__frame_reader_peek(ro_frame_reader_t *r, const uint8_t **body, size_t *len, char *err,
                          size_t errlen);
void ro__frame_reader_skip(ro_frame_reader_t *r);

/* ro__frame_free frees a frame decoded with alloc. */
void ro__frame_free(ro_pb_alloc_t *alloc, ro_frame_t *f);

/* ro__frame_encode serializes f with its length prefix into a new buffer
 * (*out, free with free()). Returns 0 or RO_ENOMEM. */
int ro__frame_encode(const ro_frame_t *f, uint8_t **out, size_t *len);

/* ro__frame_encode_into serializes f with its length prefix into buf (cap
 * bytes; a frame needs its packed size + RO_VARINT_MAX). Returns the
 * length, or 0 if f does not fit. */
size_t ro__frame_encode_into(const ro_frame_t *f, uint8_t *buf, size_t cap);

/* ro__wire_space describes an env space in a Space message. sp points into
 * in's bounds and into shape (RO_SPACE_MAX_DIMS entries, the caller's), so
 * both must outlive the packing of the message. */
void ro__wire_space(Rollout__V1__Space *sp, const ro_space_t *in, uint32_t *shape);

/* ro__frame_kind names the body of a frame ("hello", ...), for messages. */
const char *ro__frame_kind(const ro_frame_t *f);

#endif
