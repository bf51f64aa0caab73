/*
 * The wire: protobuf's standard length-delimited framing of Frame messages
 * (proto/rollout.proto). A frame is a varint byte count, then that many
 * bytes of one serialized message, so any protobuf library can read the
 * stream.
 *
 * Everything read here is untrusted: the reader bounds the frame size
 * before buffering it and reports malformed input as an error, never a
 * crash.
 */
#ifndef RO_WIRE_H
#define RO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "rollout/env.h"

#define RO_PROTOCOL_VERSION 1u
#define RO_WIRE_DEFAULT_MAX_FRAME (16u << 20)
#define RO_VARINT_MAX 10

typedef Rollout__V1__Frame ro_frame_t;

/* Accumulates stream bytes and cuts them into frames. One owner thread. */
typedef struct ro_frame_reader {
    uint8_t *buf; /* buffered bytes; capacity grows up to max_frame + prefix */
    size_t len;   /* bytes buffered */
    size_t cap;
    size_t max_frame; /* largest accepted frame body */
    uint64_t offset;  /* stream offset of buf[0], for messages */
} ro_frame_reader_t;

int ro__frame_reader_init(ro_frame_reader_t *r, size_t max_frame);
void ro__frame_reader_free(ro_frame_reader_t *r);

/* ro__frame_reader_feed appends n bytes. Returns 0, or RO_ENOMEM. */
int ro__frame_reader_feed(ro_frame_reader_t *r, const void *data, size_t n);

/*
 * ro__frame_reader_next decodes the next complete frame. Returns 1 and sets
 * *out (free it with ro__frame_free), 0 if more bytes are needed, or a
 * negative code with a message in err: RO_EBADMSG for a bad varint or a
 * body that does not decode, RO_EMSGSIZE for a frame over max_frame. After
 * an error the stream cannot be resynchronised: close it.
 */
int ro__frame_reader_next(ro_frame_reader_t *r, ro_frame_t **out, char *err, size_t errlen);

void ro__frame_free(ro_frame_t *f);

/* ro__frame_encode serializes f with its length prefix into a new buffer
 * (*out, free with free()). Returns 0 or RO_ENOMEM. */
int ro__frame_encode(const ro_frame_t *f, uint8_t **out, size_t *len);

/* ro__varint_put writes v as a varint into p (at least RO_VARINT_MAX bytes)
 * and returns the bytes written. */
size_t ro__varint_put(uint8_t *p, uint64_t v);

/* ro__varint_get reads a varint from p[0..n). Returns the bytes read, 0 if
 * more bytes are needed, or -1 if it is malformed (over 10 bytes). */
int ro__varint_get(const uint8_t *p, size_t n, uint64_t *v);

/* ro__wire_space describes an env space in a Space message. sp points into
 * in's bounds and into shape (RO_SPACE_MAX_DIMS entries, the caller's), so
 * both must outlive the packing of the message. */
void ro__wire_space(Rollout__V1__Space *sp, const ro_space_t *in, uint32_t *shape);

/* ro__frame_kind names the body of a frame ("hello", ...), for messages. */
const char *ro__frame_kind(const ro_frame_t *f);

#endif
