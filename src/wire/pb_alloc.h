/*
 * A bounded ProtobufCAllocator: protobuf-c unpacks untrusted bytes through
 * it, and it refuses to hold more than `limit` bytes at once. A small
 * frame can decode into much more memory than it takes on the wire (a
 * packed bool becomes 4 bytes, an empty sub-message a whole struct), so
 * without a bound a peer or a file could make us allocate without end.
 *
 * One owner thread (the one that unpacks and frees with it). A message
 * unpacked with an allocator must be freed with the same one.
 */
#ifndef RO_PB_ALLOC_H
#define RO_PB_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

typedef struct ro_pb_alloc {
    ProtobufCAllocator base; /* pass &a->base to *_unpack and *_free_unpacked */
    size_t limit;            /* most bytes held at once */
    size_t used;             /* bytes held now */
    size_t peak;             /* most bytes ever held */
    bool refused;            /* an allocation was refused since the last reset */
} ro_pb_alloc_t;

/* ro__pb_alloc_init prepares an allocator that holds at most limit bytes. */
void ro__pb_alloc_init(ro_pb_alloc_t *a, size_t limit);

/* ro__pb_alloc_move moves an allocator (and the count of what it holds)
 * from *src to *dst, e.g. along with a decoded message changing owner:
 * free that message with dst from then on. */
void ro__pb_alloc_move(ro_pb_alloc_t *dst, ro_pb_alloc_t *src);

/* ro__pb_alloc_refused tells whether an allocation failed for the bound
 * (rather than the message being malformed) since the last call, and
 * clears it: an unpack that returned NULL asks this to word its error. */
bool ro__pb_alloc_refused(ro_pb_alloc_t *a);

/* ro__pb_unpack decodes the n bytes at data (untrusted: a file's, a
 * field's) as a desc message through a, first set to hold at most limit
 * bytes. Returns the message (free it with a), or NULL with one line in
 * err: "NAME: WHAT decodes into more memory than its size allows" or
 * "NAME: WHAT is not a valid MESSAGE message" (WHAT NULL: "NAME: decodes
 * ...", "NAME: not a valid ..."). */
ProtobufCMessage *ro__pb_unpack(ro_pb_alloc_t *a, size_t limit,
                                const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                size_t n, const char *name, const char *what, char *err,
                                size_t errlen);

#endif
