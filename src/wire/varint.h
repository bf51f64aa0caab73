/*
 * Protobuf varints: the length prefix of every frame on the wire, of every
 * record in a trajectory file and of a PolicyParams file. The one
 * implementation of them in the tree. Pure functions: any thread.
 */
#ifndef RO_VARINT_H
#define RO_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes a varint of a 64-bit value takes. */
#define RO_VARINT_MAX 10

/* ro__varint_size returns the bytes v takes as a varint (1..10). */
size_t ro__varint_size(uint64_t v);

/* ro__varint_put writes v at p (room for ro__varint_size(v) bytes) and
 * returns the bytes written. */
size_t ro__varint_put(uint8_t *p, uint64_t v);

/*
 * ro__varint_get reads a varint from p[0..n). Returns the bytes read (1..10)
 * and sets *v; 0 if p ends inside the varint; or RO_EBADMSG if it is not a
 * varint: longer than 10 bytes, or a tenth byte that overflows 64 bits.
 * Untrusted input: reads nothing past p[n - 1].
 */
int ro__varint_get(const uint8_t *p, size_t n, uint64_t *v);

#endif
