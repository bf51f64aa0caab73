#include "wire/frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/varint.h"

int ro__frame_reader_init(ro_frame_reader_t *r, size_t max_frame, ro_pb_alloc_t *alloc)
{
    memset(r, 0, sizeof *r);
    r->max_frame = max_frame;
    r->alloc = alloc;
    r->cap = 4096;
    r->buf = malloc(r->cap);
    return r->buf ? 0 : RO_ENOMEM;
}

/* What a buffer of cap bytes is charged to the budget. */
static size_t charge_of(size_t cap)
{
    return cap > RO_FRAME_UNCHARGED ? cap - RO_FRAME_UNCHARGED : 0;
}

/* Charges the budget for a buffer of cap bytes: false if it has no room. */
static bool charge(ro_frame_reader_t *r, size_t cap)
{
    if (!r->budget)
        return true;
    size_t want = charge_of(cap);
    if (want > r->charged && want - r->charged > r->budget->limit - r->budget->used) {
        r->over_budget = true;
        return false;
    }
    r->budget->used = r->budget->used - r->charged + want;
    r->charged = want;
    return true;
}

void ro__frame_reader_set_budget(ro_frame_reader_t *r, ro_frame_budget_t *budget)
{
    charge(r, 0);
    r->budget = budget;
    charge(r, r->cap); /* the uncharged allowance covers a new reader's buffer */
}

void ro__frame_reader_free(ro_frame_reader_t *r)
{
    free(r->buf);
    r->buf = NULL;
    r->start = r->len = r->cap = 0;
    charge(r, 0);
}

uint8_t *ro__frame_reader_space(ro_frame_reader_t *r, size_t n)
{
    if (r->cap - r->len >= n)
        return r->buf + r->len;
    /* Move what is buffered to the front before growing: decoding never
     * moves bytes, so each byte is moved at most once per refill. */
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->start = 0;
        if (r->cap - r->len >= n)
            return r->buf + r->len;
    }
    /* Never more than one whole frame plus its prefix, plus this read:
     * next() refuses an oversized length before its body arrives. */
    size_t cap = r->cap;
    while (cap - r->len < n)
        cap *= 2;
    if (!charge(r, cap))
        return NULL;
    uint8_t *b = realloc(r->buf, cap);
    if (!b) {
        charge(r, r->cap);
        return NULL;
    }
    r->buf = b;
    r->cap = cap;
    return r->buf + r->len;
}

void ro__frame_reader_commit(ro_frame_reader_t *r, size_t n)
{
    r->len += n;
}

int ro__frame_reader_feed(ro_frame_reader_t *r, const void *data, size_t n)
{
    uint8_t *to = ro__frame_reader_space(r, n);
    if (!to)
        return RO_ENOMEM;
    memcpy(to, data, n);
    ro__frame_reader_commit(r, n);
    return 0;
}

int ro__frame_reader_peek(ro_frame_reader_t *r, const uint8_t **body, size_t *len, char *err,
                          size_t errlen)
{
    const uint8_t *p = r->buf + r->start;
    size_t avail = r->len - r->start;
    uint64_t n;
    int k = ro__varint_get(p, avail, &n);
    if (k < 0)
        return ro__errorf(err, errlen, RO_EBADMSG, "malformed length prefix at byte %llu",
                          (unsigned long long)r->offset);
    if (k == 0)
        return 0;
    if (n > r->max_frame)
        return ro__errorf(err, errlen, RO_EMSGSIZE,
                          "frame of %llu bytes at byte %llu exceeds the limit of %zu",
                          (unsigned long long)n, (unsigned long long)r->offset, r->max_frame);
    if (avail - (size_t)k < n)
        return 0;
    *body = p + k;
    *len = (size_t)n;
    r->peeked = (size_t)k + (size_t)n;
    return 1;
}

/* The peeked (or decoded) frame of used bytes is done with. */
static void consume(ro_frame_reader_t *r, size_t used)
{
    r->start += used;
    r->offset += used;
    r->peeked = 0;
    if (r->start == r->len) {
        r->start = r->len = 0;
        /* Give back memory (and budget) a large frame made us take; but a
         * reader with no budget (a learner's link to its node) keeps it
         * while large frames are what drains it: a stream of segments
         * would otherwise grow and shrink it every frame, and a buffer
         * over glibc's mmap threshold costs page faults each time (a fifth
         * of a stream learner's CPU). What it keeps is at most one frame
         * and a read, as while it reads one. */
        bool streaming = !r->budget && used >= RO_FRAME_KEEP_MIN;
        if (r->cap > RO_FRAME_UNCHARGED && !streaming) {
            uint8_t *b = realloc(r->buf, 4096);
            if (b) {
                r->buf = b;
                r->cap = 4096;
                charge(r, r->cap);
            }
        }
    }
}

void ro__frame_reader_skip(ro_frame_reader_t *r)
{
    consume(r, r->peeked);
}

int ro__frame_reader_next(ro_frame_reader_t *r, ro_frame_t **out, char *err, size_t errlen)
{
    const uint8_t *body;
    size_t len;
    int rc = ro__frame_reader_peek(r, &body, &len, err, errlen);
    if (rc <= 0)
        return rc;
    ro_frame_t *f = rollout__v1__frame__unpack(&r->alloc->base, len, body);
    if (!f) {
        if (ro__pb_alloc_refused(r->alloc))
            return ro__errorf(err, errlen, RO_EMSGSIZE,
                              "frame of %zu bytes at byte %llu decodes into more than the %zu "
                              "bytes allowed",
                              len, (unsigned long long)r->offset, r->alloc->limit);
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "frame of %zu bytes at byte %llu is not a valid Frame message", len,
                          (unsigned long long)r->offset);
    }
    consume(r, r->peeked);
    *out = f;
    return 1;
}

void ro__frame_free(ro_pb_alloc_t *alloc, ro_frame_t *f)
{
    if (f)
        rollout__v1__frame__free_unpacked(f, &alloc->base);
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

size_t ro__frame_encode_into(const ro_frame_t *f, uint8_t *buf, size_t cap)
{
    size_t body = rollout__v1__frame__get_packed_size(f);
    if (body + RO_VARINT_MAX > cap)
        return 0;
    size_t k = ro__varint_put(buf, body);
    rollout__v1__frame__pack(f, buf + k);
    return k + body;
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
    case ROLLOUT__V1__FRAME__BODY_SEGMENT:
        return "segment";
    case ROLLOUT__V1__FRAME__BODY_SEGMENT_ACK:
        return "segment_ack";
    case ROLLOUT__V1__FRAME__BODY_UPGRADE:
        return "upgrade";
    case ROLLOUT__V1__FRAME__BODY_RESEED:
        return "reseed";
    case ROLLOUT__V1__FRAME__BODY_GET_STATE:
        return "get_state";
    case ROLLOUT__V1__FRAME__BODY_SET_STATE:
        return "set_state";
    case ROLLOUT__V1__FRAME__BODY_ENV_STATES:
        return "env_states";
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
