/*
 * The snapshot index: collecting it, and reading it back from a file's
 * end (snapshot_index.h).
 */
#include "trajectory/snapshot_index.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "trajectory/crc32c.h"
#include "wire/pb_alloc.h"

/* A footer record: a prefix byte, record (<= 11 bytes), index_at (10
 * bytes), the CRC: it lies in the file's last FOOTER_MAX bytes. */
#define FOOTER_MAX 32
/* The most bytes one entry takes encoded: 4 varints of 64 bits, 1 of 32. */
#define ENTRY_MAX (4 * 10 + 5)

void ro__traj_index_free(ro_traj_index_t *ix)
{
    free(ix->record);
    free(ix->offset);
    free(ix->steps_after);
    free(ix->env_steps);
    free(ix->env);
    memset(ix, 0, sizeof *ix);
}

/* grow makes room for one more entry. */
static int grow(ro_traj_index_t *ix)
{
    if (ix->n < ix->cap)
        return 0;
    size_t cap = ix->cap ? 2 * ix->cap : 256;
    if (cap > RO_TRAJ_INDEX_MAX)
        cap = RO_TRAJ_INDEX_MAX;
    /* One array after the other; the arrays that grew keep their old
     * entries when one fails. */
    void *p;
#define GROW(arr) ((p = realloc(ix->arr, cap * sizeof *ix->arr)) != NULL && (ix->arr = p, true))
    const bool ok =
        GROW(record) && GROW(offset) && GROW(steps_after) && GROW(env_steps) && GROW(env);
#undef GROW
    if (!ok)
        return RO_ENOMEM;
    ix->cap = cap;
    return 0;
}

int ro__traj_index_add(ro_traj_index_t *ix, uint64_t record, uint64_t offset, uint64_t steps_after,
                       uint32_t env, uint64_t env_steps)
{
    if (ix->n >= RO_TRAJ_INDEX_MAX) {
        ix->truncated = true;
        return 0;
    }
    int rc = grow(ix);
    if (rc)
        return rc;
    size_t k = ix->n++;
    ix->record[k] = record;
    ix->offset[k] = offset;
    ix->steps_after[k] = steps_after;
    ix->env[k] = env;
    ix->env_steps[k] = env_steps;
    return 0;
}

uint64_t ro__traj_batch_steps(const Rollout__V1__TransitionBatch *b)
{
    uint64_t n = 0;
    for (size_t k = 0; k < b->n_flags; k++)
        n += !(b->flags[k] & RO_TRAJ_RESET);
    return n;
}

size_t ro__traj_index_per_record(uint32_t max_record)
{
    size_t room = max_record > 128 ? max_record - 128 : 0; /* tags, lengths, record, steps */
    return room / ENTRY_MAX ? room / ENTRY_MAX : 1;
}

void ro__traj_index_view(const ro_traj_index_t *ix, size_t from, size_t n,
                         Rollout__V1__SnapshotIndex *msg)
{
    rollout__v1__snapshot_index__init(msg);
    msg->n_record = msg->n_offset = msg->n_steps_after = msg->n_env = msg->n_env_steps = n;
    msg->record = n ? ix->record + from : NULL;
    msg->offset = n ? ix->offset + from : NULL;
    msg->steps_after = n ? ix->steps_after + from : NULL;
    msg->env = n ? ix->env + from : NULL;
    msg->env_steps = n ? ix->env_steps + from : NULL;
    msg->steps = ix->steps;
    msg->truncated = ix->truncated;
}

/* ---- reading ---- */

/* read_at copies n bytes of r's input at off into out: 0, or -1 if the
 * input ends first or the read fails. */
static int read_at(const ro_traj_reader_t *r, size_t off, size_t n, uint8_t *out)
{
    if (off > r->len || n > r->len - off)
        return -1;
    if (r->mem) {
        memcpy(out, r->mem + off, n);
        return 0;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(r->fd, out + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

/* record_at decodes the framed record at off (CRC checked) into *b with
 * alloc; *end gets the offset after it. -1 if there is none. */
static int record_at(const ro_traj_reader_t *r, size_t off, uint8_t *buf, ro_pb_alloc_t *alloc,
                     Rollout__V1__TransitionBatch **b, size_t *end)
{
    uint8_t pre[5];
    size_t avail = r->len - off < 5 ? r->len - off : 5;
    uint64_t len;
    if (off >= r->len || read_at(r, off, avail, pre) != 0)
        return -1;
    int h = ro__traj_record_prefix(pre, avail, &len);
    if (h <= 0 || len == 0 || len > r->max_record ||
        read_at(r, off + (size_t)h, (size_t)len + RO_TRAJ_CRC_BYTES, buf) != 0 ||
        ro__crc32c(0, buf, (size_t)len) != ro__traj_get_le32(buf + len))
        return -1;
    *b = rollout__v1__transition_batch__unpack(&alloc->base, (size_t)len, buf);
    *end = off + (size_t)h + (size_t)len + RO_TRAJ_CRC_BYTES;
    return *b ? 0 : -1;
}

/* find_footer finds the footer record that ends the file: *at gets where
 * the index starts, *footer where the footer does. */
static int find_footer(const ro_traj_reader_t *r, ro_pb_alloc_t *alloc, uint64_t *at,
                       size_t *footer)
{
    uint8_t tail[FOOTER_MAX], buf[FOOTER_MAX];
    size_t n = r->len < FOOTER_MAX ? r->len : FOOTER_MAX, base = r->len - n;
    if (read_at(r, base, n, tail) != 0)
        return -1;
    for (size_t s = 0; s + 1 + RO_TRAJ_CRC_BYTES < n; s++) {
        /* A footer is short: its length is one byte. */
        size_t len = tail[s];
        if (len == 0 || len >= 0x80 || s + 1 + len + RO_TRAJ_CRC_BYTES != n)
            continue;
        memcpy(buf, tail + s + 1, len + RO_TRAJ_CRC_BYTES);
        if (ro__crc32c(0, buf, len) != ro__traj_get_le32(buf + len))
            continue;
        Rollout__V1__TransitionBatch *b =
            rollout__v1__transition_batch__unpack(&alloc->base, len, buf);
        bool ok = b && b->index_at && b->n_env == 0 && !b->index && b->index_at < base + s;
        if (ok) {
            *at = b->index_at;
            *footer = base + s;
        }
        if (b)
            rollout__v1__transition_batch__free_unpacked(b, &alloc->base);
        if (ok)
            return 0;
    }
    return -1;
}

/* take appends the entries of one index record, checked against what came
 * before and the header. NULL, or what is wrong. */
static const char *take(ro_traj_index_t *ix, const Rollout__V1__SnapshotIndex *m,
                        const Rollout__V1__TrajectoryHeader *h, uint64_t index_at)
{
    size_t n = m->n_record;
    if (m->n_offset != n || m->n_steps_after != n || m->n_env != n || m->n_env_steps != n)
        return "its columns' lengths differ";
    if (ix->n + n > RO_TRAJ_INDEX_MAX)
        return "more entries than an index holds";
    for (size_t k = 0; k < n; k++) {
        size_t last = ix->n;
        if (m->env[k] >= h->num_envs)
            return "an entry names no env of the recording";
        if (m->offset[k] >= index_at || m->record[k] == 0)
            return "an entry points past the records";
        if (last && (m->record[k] < ix->record[last - 1] || m->offset[k] < ix->offset[last - 1] ||
                     m->steps_after[k] < ix->steps_after[last - 1]))
            return "its entries are out of file order";
        if (ro__traj_index_add(ix, m->record[k], m->offset[k], m->steps_after[k], m->env[k],
                               m->env_steps[k]) != 0)
            return "out of memory";
    }
    ix->steps = m->steps;
    ix->truncated = m->truncated;
    return NULL;
}

int ro__traj_index_load(ro_traj_reader_t *r, ro_traj_index_t *ix, char *err, size_t errlen)
{
    memset(ix, 0, sizeof *ix);
    if (!r->hdr || r->hdr->format_version != RO_TRAJ_FORMAT_SNAPSHOTS)
        return ro__errorf(err, errlen, RO_ENOENT,
                          "it has no snapshots (recorded without --snapshot-every)");
    ro_pb_alloc_t alloc;
    ro__pb_alloc_init(&alloc, 4 * (size_t)r->max_record + (1u << 20));
    uint64_t at;
    size_t footer, off, end;
    if (find_footer(r, &alloc, &at, &footer) != 0)
        return ro__errorf(err, errlen, RO_ENOENT,
                          "no snapshot index at its end (cut short, or the node was killed)");
    uint8_t *buf = malloc((size_t)r->max_record + RO_TRAJ_CRC_BYTES);
    if (!buf)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the snapshot index");
    const char *why = NULL;
    for (off = (size_t)at; !why && off < footer; off = end) {
        Rollout__V1__TransitionBatch *b;
        if (record_at(r, off, buf, &alloc, &b, &end) != 0) {
            why = "an index record is damaged";
            break;
        }
        if (!b->index || b->n_env)
            why = "a record inside the index is no index record";
        else
            why = take(ix, b->index, r->hdr, at);
        rollout__v1__transition_batch__free_unpacked(b, &alloc.base);
    }
    free(buf);
    if (!why && off != footer)
        why = "the index records overrun its footer";
    if (!why)
        return 0;
    ro__traj_index_free(ix);
    return ro__errorf(err, errlen, RO_EBADMSG, "snapshot index (at byte %llu): %s",
                      (unsigned long long)at, why);
}
