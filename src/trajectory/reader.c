#include "trajectory/reader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"
#include "trajectory/crc32c.h"

/* A header is at most this long (a few strings and args). */
#define MAX_HEADER (1u << 20)
/* The smallest window of a file input. */
#define MIN_WINDOW (1u << 20)
/* Bytes around a record: its prefix (at most 5) and its CRC, with room. */
#define FRAMING 16

__attribute__((format(printf, 2, 3))) static void say(ro_traj_reader_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* ---------- the input: memory, or a file through a window ---------- */

/* The window holds the input from off on (as much as fits). A file that
 * turns out shorter than at open shrank: its end is where the read ended. */
static int fill(ro_traj_reader_t *r, size_t off)
{
    if (r->mem) /* the window is all of it: nothing to read */
        return 0;
    r->cp_have = 0; /* the resync checkpoints were the old window's */
    size_t want = r->len - off < r->buf_cap ? r->len - off : r->buf_cap, got = 0;
    while (got < want) {
        ssize_t n = pread(r->fd, r->buf + got, want - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return RO_EIO;
        if (n == 0) { /* the file is shorter than it was */
            r->shrank = true;
            r->len = off + got;
            break;
        }
        got += (size_t)n;
    }
    r->win = r->buf;
    r->win_off = off;
    r->win_len = got;
    return 0;
}

/* Bytes [off, off + n) of the input, contiguous, or NULL if the input ends
 * (or a read fails) before. n is at most a record with its framing. */
static const uint8_t *at(ro_traj_reader_t *r, size_t off, size_t n)
{
    if (off > r->len || n > r->len - off)
        return NULL;
    if (off < r->win_off || off + n > r->win_off + r->win_len) {
        if (fill(r, off) != 0 || n > r->win_len)
            return NULL;
    }
    return r->win + (off - r->win_off);
}

/* ---------- opening ---------- */

static int open_header(ro_traj_reader_t *r, char *err, size_t errlen)
{
    ro__pb_alloc_init(&r->hdr_alloc, 8u << 20); /* a header of 1 MiB decodes into less */
    const uint8_t *magic = at(r, 0, RO_TRAJ_MAGIC_LEN);
    if (!magic || memcmp(magic, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN) != 0)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "not a trajectory file (it does not start with the magic \"ROTRAJ1\")");
    size_t off = RO_TRAJ_MAGIC_LEN;
    uint64_t mlen;
    size_t avail = r->len - off < 5 ? r->len - off : 5;
    const uint8_t *p = at(r, off, avail);
    int h = p ? ro__traj_record_prefix(p, avail, &mlen) : 0;
    if (h <= 0 || mlen > MAX_HEADER || !(p = at(r, off, (size_t)h + mlen + RO_TRAJ_CRC_BYTES)))
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "trajectory header cut short or damaged at byte %zu", off);
    p += h;
    uint32_t crc = ro__crc32c(0, p, mlen), stored = ro__traj_get_le32(p + mlen);
    if (crc != stored)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "trajectory header (record 0 at byte %zu): CRC mismatch", off);
    r->hdr = rollout__v1__trajectory_header__unpack(&r->hdr_alloc.base, mlen, p);
    if (!r->hdr)
        return ro__errorf(err, errlen, RO_EBADMSG, "trajectory header at byte %zu does not decode",
                          off);
    int rc = ro__traj_validate_header(r->hdr, err, errlen);
    if (rc)
        return rc;
    r->max_record = r->hdr->max_record_bytes;
    /* A batch decodes into about its size (floats), at most 4 bytes per
     * encoded byte (one-byte varints into 32-bit fields), plus its structs. */
    ro__pb_alloc_init(&r->alloc, 4 * (size_t)r->max_record + (1u << 20));
    r->off = off + (size_t)h + mlen + RO_TRAJ_CRC_BYTES;
    r->next_rec = 1;
    return 0;
}

/* The window of a file: a record and what resync needs past it, twice, so
 * that each refill moves on by at least half of it. */
static size_t window_for(const ro_traj_reader_t *r)
{
    size_t w = 2 * ((size_t)r->max_record + FRAMING + RO_TRAJ_CP);
    if (w < MIN_WINDOW)
        w = MIN_WINDOW;
    return w < r->len ? w : r->len;
}

static int open_common(ro_traj_reader_t *r, char *err, size_t errlen)
{
    int rc = open_header(r, err, errlen);
    if (rc == 0 && !r->mem) {
        size_t cap = window_for(r);
        uint8_t *b = cap > r->buf_cap ? realloc(r->buf, cap) : r->buf;
        if (!b)
            rc =
                ro__errorf(err, errlen, RO_ENOMEM, "out of memory for a %zu-byte read window", cap);
        else {
            r->buf = b;
            r->buf_cap = cap;
            r->win_len = 0; /* refill from the new buffer */
        }
    }
    if (rc == 0 && r->shrank)
        rc = ro__errorf(err, errlen, RO_EIO, "the file shrank while its header was read");
    if (rc)
        ro__traj_reader_close(r);
    return rc;
}

int ro__traj_reader_open(ro_traj_reader_t *r, const uint8_t *data, size_t len, bool resync,
                         char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->mem = data ? data : (const uint8_t *)"";
    r->len = r->len_at_open = len;
    r->resync = resync;
    r->win = r->mem;
    r->win_len = len;
    return open_common(r, err, errlen);
}

int ro__traj_reader_open_fd(ro_traj_reader_t *r, int fd, bool resync, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->resync = resync;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return ro__errorf(err, errlen, RO_EIO, "not a regular file");
    r->len = r->len_at_open = (size_t)st.st_size;
    /* Enough for the header; the window grows to its size once the
     * header says how long a record may be. */
    r->buf_cap = MAX_HEADER + FRAMING + RO_TRAJ_MAGIC_LEN < r->len
                     ? MAX_HEADER + FRAMING + RO_TRAJ_MAGIC_LEN
                     : r->len;
    r->buf = malloc(r->buf_cap ? r->buf_cap : 1);
    if (!r->buf)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory");
    if (fill(r, 0) != 0) {
        ro__traj_reader_close(r);
        return ro__errorf(err, errlen, RO_EIO, "cannot read it: %s", strerror(errno));
    }
    return open_common(r, err, errlen);
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
    free(r->buf);
    r->buf = NULL;
    r->buf_cap = 0;
    free(r->cp);
    r->cp = NULL;
    r->cp_cap = r->cp_have = 0;
}

void ro__traj_batch_free(ro_traj_reader_t *r, Rollout__V1__TransitionBatch *b)
{
    if (b)
        rollout__v1__transition_batch__free_unpacked(b, &r->alloc.base);
}

/* ---------- records ---------- */

/* What is at offset off. */
typedef enum { AT_GOOD, AT_SHORT, AT_BAD, AT_SKIP } at_kind_t;

typedef struct {
    at_kind_t kind;
    size_t end; /* AT_GOOD, or a record whose CRC holds: offset after it */
    Rollout__V1__TransitionBatch *batch;
    char why[160];
} at_t;

/* The prefix at off: the record's length in *mlen and the prefix's bytes,
 * 0 if the input ends inside it or the record, -1 if it cannot be a record. */
static int frame_at(ro_traj_reader_t *r, size_t off, uint64_t *mlen)
{
    size_t avail = r->len - off < 5 ? r->len - off : 5;
    const uint8_t *p = at(r, off, avail);
    if (!p)
        return 0;
    int h = ro__traj_record_prefix(p, avail, mlen);
    if (h <= 0)
        return h;
    if (*mlen == 0 || *mlen > r->max_record)
        return -1;
    if (*mlen + RO_TRAJ_CRC_BYTES > r->len - off - (size_t)h)
        return 0;
    return h;
}

/* Decodes and validates the record of mlen bytes at p (its CRC checked). */
static void decode_at(ro_traj_reader_t *r, const uint8_t *p, uint64_t mlen, at_t *a)
{
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
}

static void look_at(ro_traj_reader_t *r, size_t off, at_t *a)
{
    a->batch = NULL;
    a->why[0] = '\0';
    a->end = 0;
    uint64_t mlen;
    int h = frame_at(r, off, &mlen);
    if (h == 0) {
        a->kind = AT_SHORT;
        return;
    }
    if (h < 0) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "invalid record length");
        return;
    }
    const uint8_t *p = at(r, off, (size_t)h + mlen + RO_TRAJ_CRC_BYTES);
    if (!p) { /* the file shrank under us */
        a->kind = AT_SHORT;
        return;
    }
    p += h;
    /* Every batch starts with field 1 (record >= 1). */
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
    a->end = off + (size_t)h + mlen + RO_TRAJ_CRC_BYTES;
    /* With a skim filter, a record nothing needs is passed by undecoded
     * (one that does not skim well is decoded, and judged as any). */
    if (r->need && ro__traj_skim(p, mlen, r->need, r->need_ctx, &r->skim) == 0 && !r->skim.needed &&
        !r->skim.snapshots) {
        a->kind = AT_SKIP;
        return;
    }
    decode_at(r, p, mlen, a);
}

/* ---------- resync, linear ---------- */

/* The CRC of the input from cp_base to pos (in the window, >= cp_base):
 * from the checkpoint before pos, every RO_TRAJ_CP bytes, computed once. */
static int crc_to(ro_traj_reader_t *r, size_t pos, uint32_t *out)
{
    size_t k = (pos - r->cp_base) / RO_TRAJ_CP;
    if (k >= r->cp_cap) {
        size_t cap = r->win_len / RO_TRAJ_CP + 2;
        uint32_t *cp = realloc(r->cp, cap * sizeof *cp);
        if (!cp || k >= cap) {
            if (cp)
                r->cp = cp;
            return RO_ENOMEM;
        }
        r->cp = cp;
        r->cp_cap = cap;
    }
    if (r->cp_have == 0) {
        r->cp[0] = 0; /* the CRC of nothing */
        r->cp_have = 1;
    }
    const uint8_t *base = r->win + (r->cp_base - r->win_off);
    for (; r->cp_have <= k; r->cp_have++)
        r->cp[r->cp_have] =
            ro__crc32c(r->cp[r->cp_have - 1], base + (r->cp_have - 1) * RO_TRAJ_CP, RO_TRAJ_CP);
    *out = ro__crc32c(r->cp[k], base + k * RO_TRAJ_CP, pos - r->cp_base - k * RO_TRAJ_CP);
    return 0;
}

/* Whether the record of mlen bytes at off (prefix h bytes) has a matching
 * CRC, tested in constant time: crc(B) = crc(A || B) ^ shift(crc(A), |B|). */
static bool crc_holds(ro_traj_reader_t *r, size_t off, int h, uint64_t mlen)
{
    size_t a = off + (size_t)h, b = a + mlen, end = b + RO_TRAJ_CRC_BYTES;
    if (off < r->win_off || end > r->win_off + r->win_len) {
        if (!at(r, off, end - off))
            return false;
    }
    if (r->cp_have == 0 || r->cp_base < r->win_off || r->cp_base > off)
        r->cp_base = off, r->cp_have = 0; /* checkpoints start at the scan's place */
    uint32_t fa, fb;
    if (crc_to(r, a, &fa) != 0 || crc_to(r, b, &fb) != 0) /* out of memory: the slow way */
        return ro__crc32c(0, r->win + (a - r->win_off), mlen) ==
               ro__traj_get_le32(r->win + (b - r->win_off));
    return (fb ^ ro__crc32c_shift(fa, mlen)) == ro__traj_get_le32(r->win + (b - r->win_off));
}

/*
 * The next valid record at or after from, or the input's end. Each offset
 * costs its prefix and one constant-time CRC test; a record whose CRC holds
 * is decoded, and if it is not valid its bytes are skipped whole (a false
 * CRC match in damaged bytes is a 2^-32 chance: this is a crafted record).
 * So the work is linear in the bytes scanned.
 */
static size_t find_valid(ro_traj_reader_t *r, size_t from)
{
    r->cp_have = 0;
    for (size_t off = from; off < r->len; off++) {
        uint64_t mlen;
        int h = frame_at(r, off, &mlen);
        if (h <= 0)
            continue;
        const uint8_t *first = at(r, off + (size_t)h, 1);
        if (!first || first[0] != (1 << 3) || !crc_holds(r, off, h, mlen))
            continue;
        at_t a;
        const uint8_t *p = at(r, off, (size_t)h + mlen + RO_TRAJ_CRC_BYTES);
        if (!p)
            continue;
        decode_at(r, p + h, mlen, &a);
        if (a.kind == AT_GOOD) {
            ro__traj_batch_free(r, a.batch);
            return off;
        }
        off += (size_t)h + mlen + RO_TRAJ_CRC_BYTES - 1;
    }
    return r->len;
}

/* Resynchronised at off, or nothing valid is left after the damage. */
static ro_traj_event_t resynced(ro_traj_reader_t *r, size_t off)
{
    r->scanning = false;
    if (off >= r->len) {
        r->done = true;
        say(r, "no valid record after the damage at byte %zu: %zu bytes to the end skipped",
            r->damage_at, r->len - r->damage_at);
        return RO_TRAJ_CORRUPT;
    }
    r->off = off;
    say(r, "resynchronised at byte %zu after skipping %zu damaged bytes", off, off - r->damage_at);
    return RO_TRAJ_RESYNCED;
}

/* The end of the input: the file shrank (an error), or a plain end. */
static ro_traj_event_t at_end(ro_traj_reader_t *r, ro_traj_event_t otherwise)
{
    r->done = true;
    if (!r->shrank)
        return otherwise;
    say(r,
        "the file shrank from %zu to %zu bytes while it was read: every complete record "
        "before byte %zu was read, the rest is lost",
        r->len_at_open, r->len, r->off < r->len ? r->off : r->len);
    return RO_TRAJ_SHRANK;
}

ro_traj_event_t ro__traj_reader_next(ro_traj_reader_t *r, Rollout__V1__TransitionBatch **out)
{
    *out = NULL;
    if (r->done || !r->hdr)
        return RO_TRAJ_EOF;
    if (r->scanning) {
        size_t found = r->resync_at ? r->resync_at : find_valid(r, r->off);
        r->resync_at = 0;
        if (found >= r->len && r->shrank)
            return at_end(r, RO_TRAJ_EOF);
        return resynced(r, found);
    }
    if (r->off >= r->len)
        return at_end(r, RO_TRAJ_EOF);
    at_t a;
    look_at(r, r->off, &a);
    if (a.kind == AT_SKIP && r->skim.record > r->last_read) {
        r->last_read = r->skim.record;
        r->next_rec = r->skim.record + 1;
        r->off = a.end;
        return RO_TRAJ_SKIPPED;
    }
    if (a.kind == AT_SKIP) { /* a stale copy: damage as a whole, as below */
        snprintf(a.why, sizeof a.why,
                 "record number %" PRIu64 " out of order (the last one read was %" PRIu64 ")",
                 r->skim.record, r->last_read);
        a.kind = AT_BAD;
    }
    if (a.kind == AT_GOOD) {
        /* After damage, any number of records may be lost: the next valid
         * one only has to come after the last one read. */
        if (a.batch->record > r->last_read) {
            r->last_read = a.batch->record;
            r->next_rec = a.batch->record + 1;
            r->off = a.end;
            /* Version 3's index and footer records hold no entries: a
             * reader going through the file passes them by. */
            if (a.batch->index || a.batch->index_at) {
                ro__traj_batch_free(r, a.batch);
                return ro__traj_reader_next(r, out);
            }
            *out = a.batch;
            return RO_TRAJ_BATCH;
        }
        /* A valid record out of order: a stale copy, damage as a whole. */
        snprintf(a.why, sizeof a.why,
                 "record number %" PRIu64 " out of order (the last one read was %" PRIu64 ")",
                 a.batch->record, r->last_read);
        ro__traj_batch_free(r, a.batch);
        a.kind = AT_BAD;
    }
    if (a.kind == AT_SHORT) {
        if (r->shrank)
            return at_end(r, RO_TRAJ_EOF);
        /* Either the writer stopped mid-record, or a damaged length points
         * past the end: a valid record further on tells them apart. */
        size_t found = r->resync ? find_valid(r, r->off + 1) : r->len;
        if (found < r->len) {
            say(r, "record %" PRIu64 " at byte %zu: invalid record length", r->next_rec, r->off);
            r->damage_at = r->off;
            r->next_rec++;
            r->scanning = true;
            r->resync_at = found; /* report the damage first, then resync there */
            return RO_TRAJ_CORRUPT;
        }
        if (r->shrank)
            return at_end(r, RO_TRAJ_EOF);
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
        /* A record whose CRC holds but that is not valid (or is a stale
         * copy) is skipped whole: a valid one cannot hide inside it. */
        r->off = a.end ? a.end : r->off + 1;
    } else {
        r->done = true;
    }
    return RO_TRAJ_CORRUPT;
}

void ro__traj_reader_seek(ro_traj_reader_t *r, size_t off, uint64_t record)
{
    r->off = off < r->len ? off : r->len;
    r->last_read = record ? record - 1 : 0;
    r->next_rec = record;
    r->done = r->scanning = false;
    r->resync_at = 0;
}

void ro__traj_reader_skim(ro_traj_reader_t *r,
                          bool (*need)(void *ctx, uint64_t record, uint32_t env), void *ctx)
{
    r->need = need;
    r->need_ctx = ctx;
}
