/* lane_state.c: the Lane's frames in and answers out, and the per-env
 * states they move (IN_FLIGHT to READY when a frame comes, back to
 * IN_FLIGHT when its answer goes; lane.h). Every frame's ranges are
 * checked against the node's envs and every env's state before anything
 * changes. */
#include "lane.h"

#include "wire/varint.h"

#include <string.h>

/* Registers a frame of k envs in ranges (npairs pairs, checked) whose envs
 * become `to` (READY: queued for recv(); HANDED: given out already). */
int ro__hp_lane_register(Lane *L, uint64_t seq, const uint32_t *ranges, npy_intp npairs, npy_intp k,
                         int to)
{
    uint32_t *own = PyMem_RawMalloc((size_t)npairs * 2 * sizeof *own);
    if (!own || L->nfree == 0) { /* nfree: a frame holds an env, there are n */
        PyMem_RawFree(own);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(own, ranges, (size_t)npairs * 2 * sizeof *own);
    npy_intp slot = L->free_slots[--L->nfree];
    L->frames[slot] = (lane_frame_t){.seq = seq, .left = k, .npairs = npairs, .ranges = own};
    for (npy_intp i = 0; i < npairs; i++) {
        uint32_t first = ranges[2 * i], count = ranges[2 * i + 1];
        memset(L->state + first, to, count);
        for (uint32_t j = 0; j < count; j++)
            L->frame_of[first + j] = slot;
        if (to != READY)
            continue;
        npy_intp tail = (L->rhead + L->rlen - 1) % L->n;
        if (L->rlen && L->ready[tail][0] + L->ready[tail][1] == first) {
            L->ready[tail][1] += count; /* the usual: one run, frame after frame */
        } else {
            L->ready[(L->rhead + L->rlen) % L->n][0] = first;
            L->ready[(L->rhead + L->rlen) % L->n][1] = count;
            L->rlen++;
        }
    }
    if (to == READY)
        L->nready += k;
    L->nflight -= k;
    return 0;
}

/* Checks a frame's ranges (npairs pairs): each non-empty, inside the
 * node's envs, every env IN_FLIGHT and none twice. Sets *k to the envs.
 * -1 with msg set otherwise; nothing changes either way. */
int ro__hp_lane_check_ranges(Lane *L, uint64_t seq, const uint32_t *rg, npy_intp npairs,
                             npy_intp *k, char *msg, size_t len)
{
    npy_intp total = 0, i, bad = -1;
    if (npairs == 0) {
        snprintf(msg, len, "observations seq %llu: in memory, without ranges",
                 (unsigned long long)seq);
        return -1;
    }
    for (i = 0; i < npairs; i++) {
        npy_intp first = rg[2 * i], count = rg[2 * i + 1];
        if (count < 1 || first >= L->n || count > L->n - first || count > L->n - total) {
            snprintf(msg, len,
                     "observations seq %llu: a range of %zd envs from %zd is empty, not inside "
                     "[0, %zd) or more than %zd envs in all",
                     (unsigned long long)seq, (Py_ssize_t)count, (Py_ssize_t)first,
                     (Py_ssize_t)L->n, (Py_ssize_t)L->n);
            return -1;
        }
        total += count;
    }
    if (npairs == 1) { /* the usual: one run, which cannot hold an env twice */
        const int8_t *st = L->state + rg[0];
        int8_t any = 0;
        for (npy_intp j = 0; j < total; j++)
            any |= st[j]; /* IN_FLIGHT is 0 */
        for (npy_intp j = 0; any && j < total; j++) {
            if (st[j] != IN_FLIGHT) {
                bad = (npy_intp)rg[0] + j;
                break;
            }
        }
        npairs = 0; /* nothing marked */
    }
    /* Marked as they are seen (so that an env twice shows), then restored. */
    for (i = 0; i < npairs && bad < 0; i++) {
        for (uint32_t j = 0; j < rg[2 * i + 1]; j++) {
            npy_intp e = (npy_intp)rg[2 * i] + j;
            if (L->state[e] != IN_FLIGHT) {
                bad = e;
                break;
            }
            L->state[e] = -1;
        }
    }
    for (npy_intp p = 0; p < npairs; p++) {
        for (uint32_t j = 0; j < rg[2 * p + 1]; j++) {
            npy_intp e = (npy_intp)rg[2 * p] + j;
            if (L->state[e] == -1)
                L->state[e] = IN_FLIGHT;
        }
    }
    if (bad >= 0) {
        snprintf(msg, len, "env %zd came again before its action was sent", (Py_ssize_t)bad);
        return -1;
    }
    *k = total;
    return 0;
}

int ro__hp_lane_take_frame(Lane *L, const uint8_t *b, size_t len, char *msg, size_t mlen)
{
    ro_hp_scan_t s;
    int r = ro__hp_scan(b, 0, (Py_ssize_t)len, &s);
    if (r < 0) {
        snprintf(msg, mlen, "malformed observations frame: %s", s.err);
        return BAD;
    }
    if (r == 0 || !s.in_memory)
        return NOT_MINE;
    if (s.seq <= L->last_seq) {
        snprintf(msg, mlen, "observations seq %llu after seq %llu", (unsigned long long)s.seq,
                 (unsigned long long)L->last_seq);
        return BAD;
    }
    if (s.nranges % 2 || s.nranges > 2 * L->n) {
        snprintf(msg, mlen,
                 "observations seq %llu: %zd range values, not (first, count) pairs "
                 "of at most %zd envs",
                 (unsigned long long)s.seq, s.nranges, (Py_ssize_t)L->n);
        return BAD;
    }
    uint32_t stack[64];
    uint32_t *rg = s.nranges <= 64 ? stack : PyMem_RawMalloc((size_t)s.nranges * sizeof *rg);
    if (!rg)
        return NOMEM;
    ro__hp_scan_ranges(b, &s, rg);
    npy_intp k;
    int out = TOOK;
    if (ro__hp_lane_check_ranges(L, s.seq, rg, s.nranges / 2, &k, msg, mlen) < 0)
        out = BAD;
    else if (ro__hp_lane_register(L, s.seq, rg, s.nranges / 2, k, READY) < 0)
        out = NOMEM;
    else
        L->last_seq = s.seq;
    if (rg != stack)
        PyMem_RawFree(rg);
    return out;
}
/* put_varint writes v at p (src/wire/varint.c, the tree's one varint
 * writer) and returns the byte after it. */
static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    return p + ro__varint_put(p, v);
}

/* Appends the answer of frame `slot` (Frame{actions{seq, in_memory}},
 * length-prefixed; wire.actions_in_memory, with Actions.hold listing the
 * frame's envs that L->hold marks) and frees the slot: its envs are in
 * flight again. */
void ro__hp_lane_answer(Lane *L, npy_intp slot)
{
    lane_frame_t *f = &L->frames[slot];
    uint8_t inner[16], *p = inner;
    if (f->seq) {
        *p++ = 0x08;
        p = put_varint(p, f->seq);
    }
    *p++ = 0x20;
    *p++ = 0x01;
    size_t hl = (size_t)(p - inner), hb = 0; /* hb: the hold list's packed bytes */
    for (npy_intp i = 0; L->hold && i < f->npairs; i++)
        for (uint32_t e = f->ranges[2 * i], end = e + f->ranges[2 * i + 1]; e < end; e++)
            hb += L->hold[e] ? ro__varint_size(e) : 0;
    size_t il = hl + (hb ? 1 + ro__varint_size(hb) + hb : 0);
    /* out_cap: ANSWER_MAX + HOLD_HEAD per frame and HOLD_MAX per env (lane.c). */
    uint8_t *o = L->out + L->out_len;
    o = put_varint(o, 1 + ro__varint_size(il) + il); /* the frame: tag, length, inner */
    *o++ = 0x22;
    o = put_varint(o, il);
    memcpy(o, inner, hl);
    o += hl;
    if (hb) {
        *o++ = 0x2a; /* field 5, packed */
        o = put_varint(o, hb);
        for (npy_intp i = 0; i < f->npairs; i++)
            for (uint32_t e = f->ranges[2 * i], end = e + f->ranges[2 * i + 1]; e < end; e++)
                if (L->hold[e])
                    o = put_varint(o, e);
    }
    L->out_len = (size_t)(o - L->out);
    for (npy_intp i = 0; i < f->npairs; i++) {
        uint32_t first = f->ranges[2 * i], count = f->ranges[2 * i + 1];
        memset(L->state + first, IN_FLIGHT, count);
        memset(L->frame_of + first, 0xFF, count * sizeof *L->frame_of); /* -1 */
        L->nflight += count;
    }
    PyMem_RawFree(f->ranges);
    f->ranges = NULL;
    L->free_slots[L->nfree++] = slot;
}
