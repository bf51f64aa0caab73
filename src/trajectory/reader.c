#include "trajectory/reader.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "trajectory/crc32c.h"

__attribute__((format(printf, 2, 3))) static void say(ro_traj_reader_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

int ro__traj_reader_open(ro_traj_reader_t *r, const uint8_t *data, size_t len, bool resync,
                         char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    /* A header is at most 1 MiB; decoded, its strings and args stay within
     * a few times that. */
    ro__pb_alloc_init(&r->hdr_alloc, 8u << 20);
    r->data = data;
    r->len = len;
    r->resync = resync;
    if (len < RO_TRAJ_MAGIC_LEN || memcmp(data, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN) != 0) {
        snprintf(err, errlen,
                 "not a trajectory file (it does not start with the magic \"ROTRAJ1\")");
        return RO_EBADMSG;
    }
    size_t off = RO_TRAJ_MAGIC_LEN;
    uint64_t mlen;
    int h = ro__traj_record_prefix(data + off, len - off, &mlen);
    if (h <= 0 || mlen > (1u << 20) || mlen + RO_TRAJ_CRC_BYTES > len - off - (size_t)h) {
        snprintf(err, errlen, "trajectory header cut short or damaged at byte %zu", off);
        return RO_EBADMSG;
    }
    const uint8_t *p = data + off + h;
    uint32_t crc = ro__crc32c(0, p, mlen), stored = ro__traj_get_le32(p + mlen);
    if (crc != stored) {
        snprintf(err, errlen, "trajectory header (record 0 at byte %zu): CRC mismatch", off);
        return RO_EBADMSG;
    }
    r->hdr = rollout__v1__trajectory_header__unpack(&r->hdr_alloc.base, mlen, p);
    if (!r->hdr) {
        snprintf(err, errlen, "trajectory header at byte %zu does not decode", off);
        return RO_EBADMSG;
    }
    int rc = ro__traj_validate_header(r->hdr, err, errlen);
    if (rc) {
        ro__traj_reader_close(r);
        return rc;
    }
    r->max_record = r->hdr->max_record_bytes;
    /* A batch decodes into about its size (floats), at most 4 bytes per
     * encoded byte (one-byte varints into 32-bit fields), plus its structs. */
    ro__pb_alloc_init(&r->alloc, 4 * (size_t)r->max_record + (1u << 20));
    r->off = off + (size_t)h + mlen + RO_TRAJ_CRC_BYTES;
    r->next_rec = 1;
    return 0;
}

void ro__traj_reader_take_header(ro_traj_reader_t *r, Rollout__V1__TrajectoryHeader **hdr,
                                 ro_pb_alloc_t *alloc)
{
    *hdr = r->hdr;
    ro__pb_alloc_move(alloc, &r->hdr_alloc);
    r->hdr = NULL;
}

void ro__traj_reader_close(ro_traj_reader_t *r)
{
    if (r->hdr)
        rollout__v1__trajectory_header__free_unpacked(r->hdr, &r->hdr_alloc.base);
    r->hdr = NULL;
}

void ro__traj_batch_free(ro_traj_reader_t *r, Rollout__V1__TransitionBatch *b)
{
    if (b)
        rollout__v1__transition_batch__free_unpacked(b, &r->alloc.base);
}

/* What is at offset off. */
typedef enum { AT_GOOD, AT_SHORT, AT_BAD } at_kind_t;

typedef struct {
    at_kind_t kind;
    size_t next; /* AT_GOOD: offset after the record */
    Rollout__V1__TransitionBatch *batch;
    char why[160];
} at_t;

static void look_at(ro_traj_reader_t *r, size_t off, at_t *a)
{
    a->batch = NULL;
    a->why[0] = '\0';
    uint64_t mlen;
    int h = ro__traj_record_prefix(r->data + off, r->len - off, &mlen);
    if (h == 0) {
        a->kind = AT_SHORT;
        return;
    }
    if (h < 0 || mlen == 0 || mlen > r->max_record) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "invalid record length");
        return;
    }
    if (mlen + RO_TRAJ_CRC_BYTES > r->len - off - (size_t)h) {
        a->kind = AT_SHORT;
        return;
    }
    const uint8_t *p = r->data + off + h;
    /* Every batch starts with field 1 (record >= 1): a cheap test that
     * spares most of the CRCs while scanning damaged bytes. */
    if (p[0] != (1 << 3)) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "the record does not start like a TransitionBatch");
        return;
    }
    uint32_t crc = ro__crc32c(0, p, mlen), stored = ro__traj_get_le32(p + mlen);
    if (crc != stored) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "CRC mismatch (stored 0x%08x, computed 0x%08x)", stored,
                 crc);
        return;
    }
    a->batch = rollout__v1__transition_batch__unpack(&r->alloc.base, mlen, p);
    if (!a->batch) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "the record does not decode as a TransitionBatch");
        return;
    }
    char why[128];
    if (ro__traj_validate_batch(r->hdr, a->batch, why, sizeof why) != 0) {
        ro__traj_batch_free(r, a->batch);
        a->batch = NULL;
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "invalid record: %s", why);
        return;
    }
    a->kind = AT_GOOD;
    a->next = off + (size_t)h + mlen + RO_TRAJ_CRC_BYTES;
}

/* Scan from r->off for the next valid record. */
static ro_traj_event_t scan(ro_traj_reader_t *r)
{
    for (size_t off = r->off; off < r->len; off++) {
        at_t a;
        look_at(r, off, &a);
        if (a.kind != AT_GOOD)
            continue;
        ro__traj_batch_free(r, a.batch);
        r->scanning = false;
        r->off = off;
        say(r, "resynchronised at byte %zu after skipping %zu damaged bytes", off,
            off - r->damage_at);
        return RO_TRAJ_RESYNCED;
    }
    r->done = true;
    say(r, "no valid record after the damage at byte %zu: %zu bytes to the end skipped",
        r->damage_at, r->len - r->damage_at);
    return RO_TRAJ_CORRUPT;
}

ro_traj_event_t ro__traj_reader_next(ro_traj_reader_t *r, Rollout__V1__TransitionBatch **out)
{
    *out = NULL;
    if (r->done || !r->hdr)
        return RO_TRAJ_EOF;
    if (r->scanning)
        return scan(r);
    if (r->off >= r->len) {
        r->done = true;
        return RO_TRAJ_EOF;
    }
    at_t a;
    look_at(r, r->off, &a);
    if (a.kind == AT_GOOD) {
        if (a.batch->record < r->next_rec) {
            /* A valid record out of order: a stale copy, treat as damage. */
            ro__traj_batch_free(r, a.batch);
            a.kind = AT_BAD;
            snprintf(a.why, sizeof a.why, "record number %" PRIu64 " out of order",
                     (uint64_t)r->next_rec);
        } else {
            r->next_rec = a.batch->record + 1;
            r->off = a.next;
            *out = a.batch;
            return RO_TRAJ_BATCH;
        }
    }
    if (a.kind == AT_SHORT) {
        /* Either the writer stopped mid-record, or a damaged length points
         * past the end: a valid record further on tells them apart. */
        if (r->resync) {
            r->damage_at = r->off;
            size_t save = r->off;
            r->off++;
            r->scanning = true;
            ro_traj_event_t ev = scan(r);
            if (ev == RO_TRAJ_RESYNCED) {
                r->scanning = true; /* report the damage first, then resync */
                r->off = save + 1;
                say(r, "record %" PRIu64 " at byte %zu: invalid record length", r->next_rec, save);
                r->next_rec++;
                return RO_TRAJ_CORRUPT;
            }
            r->scanning = false;
            r->off = save;
        }
        r->done = true;
        say(r,
            "the file ends inside record %" PRIu64 " at byte %zu (%zu bytes left): cut short, "
            "every complete record before it was read",
            r->next_rec, r->off, r->len - r->off);
        return RO_TRAJ_CUT_SHORT;
    }
    say(r, "record %" PRIu64 " at byte %zu: %s", r->next_rec, r->off, a.why);
    r->damage_at = r->off;
    r->next_rec++;
    if (r->resync) {
        r->scanning = true;
        r->off++;
    } else {
        r->done = true;
    }
    return RO_TRAJ_CORRUPT;
}
