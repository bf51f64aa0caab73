#include "trajectory/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trajectory/crc32c.h"
#include "runtime/error.h"

#define VARINT_MAX 10
#define CRC_BYTES 4
#define WRITE_BUF (1u << 20)

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Reads a varint of at most 5 bytes (lengths fit 32 bits). Returns the bytes
 * used, 0 if the input ends first, -1 if it is longer than 5 bytes. */
static int get_varint32(const uint8_t *p, size_t avail, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if ((size_t)i >= avail)
            return 0;
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return -1;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t ro__traj_frame_size(size_t len)
{
    return varint_size(len) + len + CRC_BYTES;
}

size_t ro__traj_frame(uint8_t *out, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    size_t h = put_varint(out, len);
    protobuf_c_message_pack(m, out + h);
    put_le32(out + h + len, ro__crc32c(0, out + h, len));
    return h + len + CRC_BYTES;
}

/* ---- TransitionBatch encoder ----
 *
 * The recorder's hot loop: one pass over the columns, no per-field
 * reflection. The bytes are protobuf's standard encoding of the message
 * (proto3: zero scalars and empty repeated fields omitted; repeated fields
 * packed), the same as protobuf_c_message_pack gives; a unit test checks. */

static size_t u32s_size(const uint32_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += varint_size(v[i]);
    return s;
}

static size_t u64s_size(const uint64_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += varint_size(v[i]);
    return s;
}

static size_t i32s_size(const int32_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += varint_size((uint64_t)(int64_t)v[i]); /* negative: 10 bytes */
    return s;
}

/* A packed field of `body` bytes: tag, length, body. */
static size_t field_size(size_t body)
{
    return body ? 1 + varint_size(body) + body : 0;
}

typedef struct batch_sizes {
    size_t env, episode, step, flags, action;
} batch_sizes_t;

static size_t batch_size(const Rollout__V1__TransitionBatch *b, batch_sizes_t *z)
{
    z->env = u32s_size(b->env, b->n_env);
    z->episode = u64s_size(b->episode, b->n_episode);
    z->step = u32s_size(b->step, b->n_step);
    z->flags = u32s_size(b->flags, b->n_flags);
    z->action = i32s_size(b->action, b->n_action);
    return (b->record ? 1 + varint_size(b->record) : 0) +
           (b->dropped ? 1 + varint_size(b->dropped) : 0) + field_size(z->env) +
           field_size(z->episode) + field_size(z->step) + field_size(z->flags) +
           field_size(4 * b->n_reward) + field_size(z->action) + field_size(4 * b->n_action_box) +
           field_size(4 * b->n_obs);
}

static uint8_t *put_head(uint8_t *p, uint32_t field, size_t body)
{
    *p++ = (uint8_t)(field << 3 | 2);
    return p + put_varint(p, body);
}

static uint8_t *put_floats(uint8_t *p, uint32_t field, const float *v, size_t n)
{
    if (!n)
        return p;
    p = put_head(p, field, 4 * n);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, v, 4 * n);
#else
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_le32(p + 4 * i, u);
    }
#endif
    return p + 4 * n;
}

size_t ro__traj_batch_packed_size(const Rollout__V1__TransitionBatch *b)
{
    batch_sizes_t z;
    return batch_size(b, &z);
}

size_t ro__traj_batch_pack(const Rollout__V1__TransitionBatch *b, uint8_t *out)
{
    batch_sizes_t z;
    size_t total = batch_size(b, &z);
    uint8_t *p = out;
    if (b->record) {
        *p++ = 1 << 3;
        p += put_varint(p, b->record);
    }
    if (b->dropped) {
        *p++ = 2 << 3;
        p += put_varint(p, b->dropped);
    }
    if (z.env) {
        p = put_head(p, 3, z.env);
        for (size_t i = 0; i < b->n_env; i++)
            p += put_varint(p, b->env[i]);
    }
    if (z.episode) {
        p = put_head(p, 4, z.episode);
        for (size_t i = 0; i < b->n_episode; i++)
            p += put_varint(p, b->episode[i]);
    }
    if (z.step) {
        p = put_head(p, 5, z.step);
        for (size_t i = 0; i < b->n_step; i++)
            p += put_varint(p, b->step[i]);
    }
    if (z.flags) {
        p = put_head(p, 6, z.flags);
        for (size_t i = 0; i < b->n_flags; i++)
            p += put_varint(p, b->flags[i]);
    }
    p = put_floats(p, 7, b->reward, b->n_reward);
    if (z.action) {
        p = put_head(p, 8, z.action);
        for (size_t i = 0; i < b->n_action; i++)
            p += put_varint(p, (uint64_t)(int64_t)b->action[i]);
    }
    p = put_floats(p, 9, b->action_box, b->n_action_box);
    p = put_floats(p, 10, b->obs, b->n_obs);
    (void)total;
    return (size_t)(p - out);
}

/* ---- writer ---- */

/* Writes all n bytes; *done is how many reached the file, even on error. */
static int write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
    *done = 0;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += k;
        n -= (size_t)k;
        *done += (size_t)k;
    }
    return 0;
}

/* Counts the entries of one lost record (the buffer holds whole frames). */
static void count_lost(ro_traj_writer_t *w, const uint8_t *payload, size_t len)
{
    w->lost_records++;
    Rollout__V1__TransitionBatch *b = rollout__v1__transition_batch__unpack(NULL, len, payload);
    if (!b)
        return; /* out of memory: the record is counted, its entries are not */
    for (size_t k = 0; k < b->n_flags; k++) {
        if (b->flags[k] & RO_TRAJ_RESET)
            w->lost_resets++;
        else
            w->lost_steps++;
    }
    rollout__v1__transition_batch__free_unpacked(b, NULL);
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
        int h = get_varint32(w->buf + pos, w->len - pos, &len);
        if (h <= 0)
            break; /* cannot happen: the buffer holds frames we built */
        size_t framed = (size_t)h + (size_t)len + CRC_BYTES;
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
    int rc = write_all(w->fd, w->buf, w->len, &done);
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
    return rc ? RO_EIO : 0;
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
    size_t need = (size_t)hdr->max_record_bytes + VARINT_MAX + CRC_BYTES;
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
    int rc = ro__traj_writer_flush(w, err, errlen);
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
    uint8_t *out = w->buf + w->len;
    size_t h = put_varint(out, len);
    size_t wrote = ro__traj_batch_pack(b, out + h);
    put_le32(out + h + wrote, ro__crc32c(0, out + h, wrote));
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
    return rc;
}

/* ---- reader ---- */

int ro__traj_validate_header(const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!h->magic || strcmp(h->magic, RO_TRAJ_HEADER_MAGIC) != 0)
        why = "the header has no trajectory magic";
    else if (h->format_version != RO_TRAJ_FORMAT_VERSION)
        why = "unsupported format version";
    else if (!h->env || !h->env[0] || !h->env_spec || !h->env_spec[0])
        why = "no env name";
    else if (h->num_envs == 0 || h->num_envs > (1u << 24))
        why = "num_envs out of range";
    else if (h->obs_dim == 0 || h->obs_dim > (1u << 24))
        why = "obs_dim out of range";
    else if (!h->action_kind ||
             (strcmp(h->action_kind, "discrete") != 0 && strcmp(h->action_kind, "box") != 0))
        why = "action_kind is neither discrete nor box";
    else if (h->action_dim == 0 || h->action_dim > (1u << 16) ||
             (strcmp(h->action_kind, "discrete") == 0 && h->action_dim != 1))
        why = "action_dim out of range";
    else if (h->max_record_bytes < 16 || h->max_record_bytes > RO_TRAJ_MAX_RECORD)
        why = "max_record_bytes out of range";
    for (size_t i = 0; !why && i < h->n_env_args; i++)
        if (!h->env_args[i] || !h->env_args[i]->key || !h->env_args[i]->value)
            why = "an env arg without key or value";
    if (!why)
        return 0;
    if (h->format_version != RO_TRAJ_FORMAT_VERSION && h->magic &&
        strcmp(h->magic, RO_TRAJ_HEADER_MAGIC) == 0)
        snprintf(err, errlen, "unsupported trajectory format version %u (this build reads %u)",
                 h->format_version, RO_TRAJ_FORMAT_VERSION);
    else
        snprintf(err, errlen, "invalid trajectory header: %s", why);
    return RO_EBADMSG;
}

int ro__traj_validate_batch(const Rollout__V1__TrajectoryHeader *h,
                            const Rollout__V1__TransitionBatch *b, char *err, size_t errlen)
{
    size_t n = b->n_env;
    bool discrete = strcmp(h->action_kind, "discrete") == 0;
    const char *why = NULL;
    if (n == 0 && b->dropped == 0)
        why = "no entries";
    else if (b->n_episode != n || b->n_step != n || b->n_flags != n || b->n_reward != n)
        why = "column lengths differ";
    else if (discrete && (b->n_action != n || b->n_action_box != 0))
        why = "wrong number of discrete actions";
    else if (!discrete && (b->n_action != 0 || b->n_action_box / h->action_dim != n ||
                           b->n_action_box % h->action_dim != 0))
        why = "wrong number of box actions";
    else if (b->n_obs / h->obs_dim != n || b->n_obs % h->obs_dim != 0)
        why = "wrong number of observation values";
    for (size_t k = 0; !why && k < n; k++) {
        if (b->env[k] >= h->num_envs)
            why = "env index out of range";
        else if (b->flags[k] > 15)
            why = "unknown flags";
        else if ((b->flags[k] & RO_TRAJ_RESET) && (b->step[k] != 0 || b->flags[k] != RO_TRAJ_RESET))
            why = "a reset entry with a step or flags";
        else if (!(b->flags[k] & RO_TRAJ_RESET) && b->step[k] == 0)
            why = "a step entry with step 0";
    }
    if (!why)
        return 0;
    snprintf(err, errlen, "%s", why);
    return RO_EBADMSG;
}

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
    int h = get_varint32(data + off, len - off, &mlen);
    if (h <= 0 || mlen > (1u << 20) || mlen + CRC_BYTES > len - off - (size_t)h) {
        snprintf(err, errlen, "trajectory header cut short or damaged at byte %zu", off);
        return RO_EBADMSG;
    }
    const uint8_t *p = data + off + h;
    uint32_t crc = ro__crc32c(0, p, mlen), stored = get_le32(p + mlen);
    if (crc != stored) {
        snprintf(err, errlen, "trajectory header (record 0 at byte %zu): CRC mismatch", off);
        return RO_EBADMSG;
    }
    r->hdr = rollout__v1__trajectory_header__unpack(NULL, mlen, p);
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
    r->off = off + (size_t)h + mlen + CRC_BYTES;
    r->next_rec = 1;
    return 0;
}

void ro__traj_reader_close(ro_traj_reader_t *r)
{
    if (r->hdr)
        rollout__v1__trajectory_header__free_unpacked(r->hdr, NULL);
    r->hdr = NULL;
}

void ro__traj_batch_free(Rollout__V1__TransitionBatch *b)
{
    if (b)
        rollout__v1__transition_batch__free_unpacked(b, NULL);
}

/* What is at offset off. */
typedef enum { AT_GOOD, AT_SHORT, AT_BAD } at_kind_t;

typedef struct {
    at_kind_t kind;
    size_t next; /* AT_GOOD: offset after the record */
    Rollout__V1__TransitionBatch *batch;
    char why[160];
} at_t;

static void look_at(const ro_traj_reader_t *r, size_t off, at_t *a)
{
    a->batch = NULL;
    a->why[0] = '\0';
    uint64_t mlen;
    int h = get_varint32(r->data + off, r->len - off, &mlen);
    if (h == 0) {
        a->kind = AT_SHORT;
        return;
    }
    if (h < 0 || mlen == 0 || mlen > r->max_record) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "invalid record length");
        return;
    }
    if (mlen + CRC_BYTES > r->len - off - (size_t)h) {
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
    uint32_t crc = ro__crc32c(0, p, mlen), stored = get_le32(p + mlen);
    if (crc != stored) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "CRC mismatch (stored 0x%08x, computed 0x%08x)", stored,
                 crc);
        return;
    }
    a->batch = rollout__v1__transition_batch__unpack(NULL, mlen, p);
    if (!a->batch) {
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "the record does not decode as a TransitionBatch");
        return;
    }
    char why[128];
    if (ro__traj_validate_batch(r->hdr, a->batch, why, sizeof why) != 0) {
        ro__traj_batch_free(a->batch);
        a->batch = NULL;
        a->kind = AT_BAD;
        snprintf(a->why, sizeof a->why, "invalid record: %s", why);
        return;
    }
    a->kind = AT_GOOD;
    a->next = off + (size_t)h + mlen + CRC_BYTES;
}

/* Scan from r->off for the next valid record. */
static ro_traj_event_t scan(ro_traj_reader_t *r)
{
    for (size_t off = r->off; off < r->len; off++) {
        at_t a;
        look_at(r, off, &a);
        if (a.kind != AT_GOOD)
            continue;
        ro__traj_batch_free(a.batch);
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
            ro__traj_batch_free(a.batch);
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
