#include "wire/frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

size_t ro__varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

int ro__varint_get(const uint8_t *p, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < RO_VARINT_MAX; i++) {
        if (i == n)
            return 0;
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return (int)i + 1;
        }
    }
    return -1;
}

int ro__frame_reader_init(ro_frame_reader_t *r, size_t max_frame)
{
    memset(r, 0, sizeof *r);
    r->max_frame = max_frame;
    r->cap = 4096;
    r->buf = malloc(r->cap);
    return r->buf ? 0 : RO_ENOMEM;
}

void ro__frame_reader_free(ro_frame_reader_t *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

int ro__frame_reader_feed(ro_frame_reader_t *r, const void *data, size_t n)
{
    if (r->len + n > r->cap) {
        /* Never more than one whole frame plus its prefix, plus this read:
         * next() rejects an oversized length before its body arrives. */
        size_t cap = r->cap;
        while (cap < r->len + n)
            cap *= 2;
        uint8_t *b = realloc(r->buf, cap);
        if (!b)
            return RO_ENOMEM;
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    return 0;
}

int ro__frame_reader_next(ro_frame_reader_t *r, ro_frame_t **out, char *err, size_t errlen)
{
    uint64_t body;
    int k = ro__varint_get(r->buf, r->len, &body);
    if (k < 0) {
        snprintf(err, errlen, "malformed length prefix at byte %llu",
                 (unsigned long long)r->offset);
        return RO_EBADMSG;
    }
    if (k == 0)
        return 0;
    if (body > r->max_frame) {
        snprintf(err, errlen, "frame of %llu bytes at byte %llu exceeds the limit of %zu",
                 (unsigned long long)body, (unsigned long long)r->offset, r->max_frame);
        return RO_EMSGSIZE;
    }
    if (r->len - (size_t)k < body)
        return 0;
    ro_frame_t *f = rollout__v1__frame__unpack(NULL, (size_t)body, r->buf + k);
    if (!f) {
        snprintf(err, errlen, "frame of %llu bytes at byte %llu is not a valid Frame message",
                 (unsigned long long)body, (unsigned long long)r->offset);
        return RO_EBADMSG;
    }
    size_t used = (size_t)k + (size_t)body;
    memmove(r->buf, r->buf + used, r->len - used);
    r->len -= used;
    r->offset += used;
    /* Give back memory a huge frame made us take. */
    if (r->cap > (1u << 20) && r->len < 4096) {
        uint8_t *b = realloc(r->buf, 4096);
        if (b) {
            r->buf = b;
            r->cap = 4096;
        }
    }
    *out = f;
    return 1;
}

void ro__frame_free(ro_frame_t *f)
{
    if (f)
        rollout__v1__frame__free_unpacked(f, NULL);
}

int ro__frame_encode(const ro_frame_t *f, uint8_t **out, size_t *len)
{
    size_t body = rollout__v1__frame__get_packed_size(f);
    uint8_t *b = malloc(body + RO_VARINT_MAX);
    if (!b)
        return RO_ENOMEM;
    size_t k = ro__varint_put(b, body);
    rollout__v1__frame__pack(f, b + k);
    *out = b;
    *len = k + body;
    return 0;
}

const char *ro__frame_kind(const ro_frame_t *f)
{
    switch (f->body_case) {
    case ROLLOUT__V1__FRAME__BODY_HELLO:
        return "hello";
    case ROLLOUT__V1__FRAME__BODY_WELCOME:
        return "welcome";
    case ROLLOUT__V1__FRAME__BODY_OBSERVATIONS:
        return "observations";
    case ROLLOUT__V1__FRAME__BODY_ACTIONS:
        return "actions";
    case ROLLOUT__V1__FRAME__BODY_ERROR:
        return "error";
    case ROLLOUT__V1__FRAME__BODY_GOODBYE:
        return "goodbye";
    case ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS:
        return "policy_params";
    case ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED:
        return "policy_accepted";
    default:
        return "empty";
    }
}

void ro__wire_space(Rollout__V1__Space *sp, const ro_space_t *in, uint32_t *shape)
{
    if (in->kind == RO_SPACE_DISCRETE) {
        sp->kind = "discrete";
        sp->n = in->n;
        return;
    }
    sp->kind = "box";
    for (uint32_t d = 0; d < in->ndim; d++)
        shape[d] = in->shape[d];
    sp->n_shape = in->ndim;
    sp->shape = shape;
    sp->n_low = sp->n_high = ro_space_size(in);
    sp->low = (float *)in->low;
    sp->high = (float *)in->high;
}
