#include "trajectory/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/io.h"
#include "trajectory/crc32c.h"
#include "wire/pb_alloc.h"
#include "wire/varint.h"

#define WRITE_BUF (1u << 20)

/* Counts the entries of one lost record (the buffer holds whole frames). */
static void count_lost(ro_traj_writer_t *w, const uint8_t *payload, size_t len)
{
    w->lost_records++;
    ro_pb_alloc_t alloc; /* our own bytes, but bounded like any decoding */
    ro__pb_alloc_init(&alloc, 4 * len + (1u << 20));
    Rollout__V1__TransitionBatch *b =
        rollout__v1__transition_batch__unpack(&alloc.base, len, payload);
    if (!b)
        return; /* out of memory: the record is counted, its entries are not */
    for (size_t k = 0; k < b->n_flags; k++) {
        if (b->flags[k] & RO_TRAJ_RESET)
            w->lost_resets++;
        else
            w->lost_steps++;
    }
    rollout__v1__transition_batch__free_unpacked(b, &alloc.base);
}

/*
 * A write of the buffer failed after `done` of its bytes reached the file.
 * Cut the file back to the end of the last frame written whole, so that it
 * ends on a record boundary (a torn tail would read as damage), and count
 * the records that did not make it. Returns 0 or the ftruncate error.
 */
static int cut_to_whole_records(ro_traj_writer_t *w, size_t done)
{
    uint64_t start = w->file_bytes - w->len; /* file offset of buf[0] */
    uint64_t lost_before = w->lost_records;
    size_t pos = 0, keep = 0;
    bool header = start == 0; /* the buffer begins with the magic and header */
    if (header)
        pos = RO_TRAJ_MAGIC_LEN;
    keep = done >= pos ? pos : 0;
    while (pos < w->len) {
        uint64_t len = 0;
        int h = ro__traj_record_prefix(w->buf + pos, w->len - pos, &len);
        if (h <= 0)
            break; /* cannot happen: the buffer holds frames we built */
        size_t framed = (size_t)h + (size_t)len + RO_TRAJ_CRC_BYTES;
        bool whole = keep == pos && pos + framed <= done;
        if (!header && !whole)
            count_lost(w, w->buf + pos + h, (size_t)len);
        if (whole)
            keep = pos + framed;
        header = false;
        pos += framed;
    }
    /* Without its header the file is empty rather than torn. */
    if (start == 0 && keep <= RO_TRAJ_MAGIC_LEN)
        keep = 0;
    uint64_t cut = w->file_bytes - (start + keep);
    uint64_t lost = w->lost_records - lost_before;
    w->file_bytes -= cut;
    w->total_bytes -= cut;
    w->file_records -= lost;
    w->batches -= lost;
    struct stat st;
    if (fstat(w->fd, &st) == 0 && !S_ISREG(st.st_mode))
        return 0; /* a device or pipe: nothing to cut */
    if (ftruncate(w->fd, (off_t)(start + keep)) != 0)
        return -errno;
    lseek(w->fd, (off_t)(start + keep), SEEK_SET);
    return 0;
}

int ro__traj_writer_flush(ro_traj_writer_t *w, char *err, size_t errlen)
{
    if (w->len == 0)
        return 0;
    size_t done;
    int rc = ro__write_all(w->fd, w->buf, w->len, &done);
    if (rc) {
        int trc = cut_to_whole_records(w, done);
        if (trc)
            snprintf(err, errlen,
                     "writing %s (part %u): %s; cutting it back to its last whole record also "
                     "failed: %s",
                     w->path, w->part, strerror(-rc), strerror(-trc));
        else
            snprintf(err, errlen,
                     "writing %s (part %u): %s; the file ends after its last whole record "
                     "(%" PRIu64 " records, %" PRIu64 " bytes)",
                     w->path, w->part, strerror(-rc), w->file_records, w->file_bytes);
    }
    w->len = 0;
    if (rc)
        w->broken = true;
    return rc ? RO_EIO : 0;
}

/* put_record frames b (protobuf-c's encoder: index records are rare) at
 * the buffer's end, flushing first if it is full. */
static int put_record(ro_traj_writer_t *w, Rollout__V1__TransitionBatch *b, char *err,
                      size_t errlen)
{
    b->record = w->file_records + 1;
    size_t framed = ro__traj_frame_size(protobuf_c_message_get_packed_size(&b->base));
    if (w->cap - w->len < framed) {
        int rc = ro__traj_writer_flush(w, err, errlen);
        if (rc)
            return rc;
    }
    w->len += ro__traj_frame(w->buf + w->len, &b->base);
    w->file_bytes += framed;
    w->total_bytes += framed;
    w->file_records++;
    return 0;
}

/* write_index ends a version 3 part: its index records (each at most
 * max_record_bytes), then the footer that says where they start. */
static int write_index(ro_traj_writer_t *w, char *err, size_t errlen)
{
    if (!w->hdr->snapshot_every || w->broken)
        return 0;
    uint64_t at = w->file_bytes;
    size_t per = ro__traj_index_per_record(w->hdr->max_record_bytes);
    int rc = 0;
    for (size_t from = 0; rc == 0 && (from < w->index.n || from == 0); from += per) {
        size_t n = w->index.n - from < per ? w->index.n - from : per;
        Rollout__V1__SnapshotIndex ix;
        ro__traj_index_view(&w->index, from, n, &ix);
        Rollout__V1__TransitionBatch b;
        rollout__v1__transition_batch__init(&b);
        b.index = &ix;
        rc = put_record(w, &b, err, errlen);
    }
    if (rc == 0) {
        Rollout__V1__TransitionBatch b;
        rollout__v1__transition_batch__init(&b);
        b.index_at = at;
        rc = put_record(w, &b, err, errlen);
    }
    ro__traj_index_free(&w->index);
    return rc;
}

static int open_part(ro_traj_writer_t *w, char *err, size_t errlen)
{
    char name[4096];
    if (w->part == 0)
        snprintf(name, sizeof name, "%s", w->path);
    else
        snprintf(name, sizeof name, "%s.%u", w->path, w->part);
    w->fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", name, strerror(errno));
        return RO_EIO;
    }
    w->hdr->part = w->part;
    memcpy(w->buf, RO_TRAJ_MAGIC, RO_TRAJ_MAGIC_LEN);
    w->len = RO_TRAJ_MAGIC_LEN;
    w->len += ro__traj_frame(w->buf + w->len, &w->hdr->base);
    w->file_bytes = w->len;
    w->total_bytes += w->len;
    w->file_records = 0;
    return 0;
}

int ro__traj_writer_open(ro_traj_writer_t *w, const char *path, Rollout__V1__TrajectoryHeader *hdr,
                         uint64_t max_bytes, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->path = path;
    w->hdr = hdr;
    w->max_bytes = max_bytes;
    size_t hdr_size = ro__traj_frame_size(protobuf_c_message_get_packed_size(&hdr->base));
    w->cap = WRITE_BUF;
    size_t need = (size_t)hdr->max_record_bytes + RO_VARINT_MAX + RO_TRAJ_CRC_BYTES;
    if (need < hdr_size + RO_TRAJ_MAGIC_LEN)
        need = hdr_size + RO_TRAJ_MAGIC_LEN;
    if (w->cap < need)
        w->cap = need;
    w->buf = malloc(w->cap);
    if (!w->buf) {
        snprintf(err, errlen, "out of memory for the recorder's write buffer");
        return RO_ENOMEM;
    }
    int rc = open_part(w, err, errlen);
    if (rc) {
        free(w->buf);
        w->buf = NULL;
    }
    return rc;
}

static int rotate(ro_traj_writer_t *w, char *err, size_t errlen)
{
    int rc = write_index(w, err, errlen);
    if (rc == 0)
        rc = ro__traj_writer_flush(w, err, errlen);
    if (rc)
        return rc;
    if (close(w->fd) != 0) {
        w->fd = -1;
        snprintf(err, errlen, "closing %s (part %u): %s", w->path, w->part, strerror(errno));
        return RO_EIO;
    }
    w->fd = -1;
    w->part++;
    return open_part(w, err, errlen);
}

int ro__traj_writer_append(ro_traj_writer_t *w, Rollout__V1__TransitionBatch *b, char *err,
                           size_t errlen)
{
    if (w->fd < 0)
        return RO_EINVAL;
    b->record = w->file_records + 1;
    size_t len = ro__traj_batch_packed_size(b);
    if (len > w->hdr->max_record_bytes) {
        snprintf(err, errlen, "a record of %zu bytes exceeds the header's %u", len,
                 w->hdr->max_record_bytes);
        return RO_ERANGE;
    }
    size_t framed = ro__traj_frame_size(len);
    if (w->max_bytes && w->file_records > 0 && w->file_bytes + framed > w->max_bytes) {
        int rc = rotate(w, err, errlen);
        if (rc)
            return rc;
        b->record = 1;
        /* The record number may have shrunk the payload: size it again. */
        len = ro__traj_batch_packed_size(b);
        framed = ro__traj_frame_size(len);
    }
    if (w->cap - w->len < framed) {
        int rc = ro__traj_writer_flush(w, err, errlen);
        if (rc)
            return rc;
    }
    if (w->hdr->snapshot_every) {
        w->steps += ro__traj_batch_steps(b);
        for (size_t i = 0; i < b->n_snapshots; i++)
            if (ro__traj_index_add(&w->index, b->record, w->file_bytes, w->steps,
                                   b->snapshots[i]->env, b->snapshots[i]->env_steps) != 0)
                w->index.truncated = true; /* out of memory: the index misses it */
        w->index.steps = w->steps;
    }
    uint8_t *out = w->buf + w->len;
    size_t h = ro__varint_put(out, len);
    size_t wrote = ro__traj_batch_pack(b, out + h);
    ro__traj_put_le32(out + h + wrote, ro__crc32c(0, out + h, wrote));
    w->len += framed;
    w->file_bytes += framed;
    w->total_bytes += framed;
    w->file_records++;
    w->batches++;
    return 0;
}

int ro__traj_writer_close(ro_traj_writer_t *w, char *err, size_t errlen)
{
    int rc = 0;
    if (w->fd >= 0) {
        rc = write_index(w, err, errlen);
        if (rc == 0)
            rc = ro__traj_writer_flush(w, err, errlen);
        if (fsync(w->fd) != 0 && rc == 0 && errno != EINVAL) {
            snprintf(err, errlen, "fsync %s: %s", w->path, strerror(errno));
            rc = RO_EIO;
        }
        if (close(w->fd) != 0 && rc == 0) {
            snprintf(err, errlen, "closing %s: %s", w->path, strerror(errno));
            rc = RO_EIO;
        }
        w->fd = -1;
    }
    free(w->buf);
    w->buf = NULL;
    ro__traj_index_free(&w->index);
    return rc;
}
