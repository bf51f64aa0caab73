#include "actors/stream/segment_codec.h"

#include <string.h>

#include "wire/varint.h"

/* Protobuf wire types. */
#define VARINT 0
#define LEN 2

static size_t tag_size(uint32_t field)
{
    return ro__varint_size((uint64_t)field << 3);
}

/* Bytes of a varint field, 0 if it is 0 (proto3 leaves it out). */
static size_t uint_field_size(uint32_t field, uint64_t v)
{
    return v ? tag_size(field) + ro__varint_size(v) : 0;
}

static size_t len_field_size(uint32_t field, size_t len)
{
    return tag_size(field) + ro__varint_size(len) + len;
}

static uint8_t *put_tag(uint8_t *p, uint32_t field, int type)
{
    return p + ro__varint_put(p, (uint64_t)field << 3 | (uint64_t)type);
}

static uint8_t *put_uint_field(uint8_t *p, uint32_t field, uint64_t v)
{
    if (!v)
        return p;
    p = put_tag(p, field, VARINT);
    return p + ro__varint_put(p, v);
}

static uint8_t *put_len(uint8_t *p, uint32_t field, size_t len)
{
    p = put_tag(p, field, LEN);
    return p + ro__varint_put(p, len);
}

/* Where column c lies in the shared memory at base (protocol.md). */
static uint64_t col_offset(const ro_segment_t *s, int c, const void *base)
{
    return (uint64_t)((const char *)s->col[c] - (const char *)base);
}

/* The bytes of NamedTensor c without its data, and the data's length;
 * with base, the tensor refers to its bytes in shared memory instead. */
static size_t tensor_size(const ro_segment_t *s, int c, const void *base, size_t *data)
{
    uint32_t shape[8];
    uint32_t nd = ro__seg_col_shape(s, c, shape);
    size_t packed = 0;
    for (uint32_t d = 0; d < nd; d++)
        packed += ro__varint_size(shape[d]);
    *data = ro__seg_col_bytes(s, c);
    const ro_seg_col_desc_t *desc = &s->lay->col[c];
    size_t head = len_field_size(1, strlen(desc->name)) + uint_field_size(2, desc->dtype) +
                  (packed ? len_field_size(3, packed) : 0);
    if (base)
        return head + uint_field_size(5, col_offset(s, c, base));
    return head + (*data ? len_field_size(4, *data) : 0);
}

static uint8_t *put_tensor_header(uint8_t *p, const ro_segment_t *s, int c, size_t body,
                                  size_t data, const void *base)
{
    uint32_t shape[8];
    uint32_t nd = ro__seg_col_shape(s, c, shape);
    size_t packed = 0;
    for (uint32_t d = 0; d < nd; d++)
        packed += ro__varint_size(shape[d]);
    p = put_len(p, 9, body); /* Segment.tensors */
    const ro_seg_col_desc_t *desc = &s->lay->col[c];
    size_t nl = strlen(desc->name);
    p = put_len(p, 1, nl);
    memcpy(p, desc->name, nl);
    p += nl;
    p = put_uint_field(p, 2, desc->dtype);
    if (packed) {
        p = put_len(p, 3, packed);
        for (uint32_t d = 0; d < nd; d++)
            p += ro__varint_put(p, shape[d]);
    }
    if (base)
        return put_uint_field(p, 5, col_offset(s, c, base));
    if (data)
        p = put_len(p, 4, data); /* the bytes follow, from the segment */
    return p;
}

void ro__seg_wire_build(ro_seg_wire_t *w, const ro_segment_t *s, uint64_t seq, const void *base)
{
    /* Sizes first: every length prefix precedes what it counts. */
    const int ncols = (int)s->lay->ncols;
    size_t body[RO_SEG_MAX_COLS], data[RO_SEG_MAX_COLS];
    size_t seg = uint_field_size(1, seq) + uint_field_size(2, s->shard) +
                 uint_field_size(3, s->shard_seq) + uint_field_size(4, s->first_env) +
                 uint_field_size(5, s->t) + uint_field_size(6, s->n) +
                 uint_field_size(7, s->version_min) + uint_field_size(8, s->version_max) +
                 uint_field_size(10, base != NULL);
    for (int c = 0; c < ncols; c++) {
        body[c] = s->col[c] ? tensor_size(s, c, base, &data[c]) : 0;
        if (s->col[c])
            seg += len_field_size(9, body[c]);
    }
    size_t frame = len_field_size(9, seg); /* Frame.segment */

    uint8_t *p = w->hdr;
    uint8_t *start = p;
    w->nbufs = 0;
    p += ro__varint_put(p, frame); /* the length-delimited framing */
    p = put_len(p, 9, seg);
    p = put_uint_field(p, 1, seq);
    p = put_uint_field(p, 2, s->shard);
    p = put_uint_field(p, 3, s->shard_seq);
    p = put_uint_field(p, 4, s->first_env);
    p = put_uint_field(p, 5, s->t);
    p = put_uint_field(p, 6, s->n);
    p = put_uint_field(p, 7, s->version_min);
    p = put_uint_field(p, 8, s->version_max);
    for (int c = 0; c < ncols; c++) {
        if (!s->col[c])
            continue;
        p = put_tensor_header(p, s, c, body[c], data[c], base);
        if (!data[c] || base)
            continue;
        /* Headers so far in one buffer, then the column where it lies. */
        w->bufs[w->nbufs++] = uv_buf_init((char *)start, (unsigned)(p - start));
        w->bufs[w->nbufs++] = uv_buf_init((char *)s->col[c], (unsigned)data[c]);
        start = p;
    }
    p = put_uint_field(p, 10, base != NULL);
    if (p > start)
        w->bufs[w->nbufs++] = uv_buf_init((char *)start, (unsigned)(p - start));
    w->used = (size_t)(p - w->hdr);
    w->bytes = ro__varint_size(frame) + frame;
}
