/*
 * The trajectory file format: record framing, the TransitionBatch encoder
 * and the checks of decoded headers and batches (docs/replay.md).
 */
#include "trajectory/format.h"

#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "trajectory/abi2_format.h"
#include "trajectory/crc32c.h"
#include "wire/varint.h"

size_t ro__traj_frame_size(size_t len)
{
    return ro__varint_size(len) + len + RO_TRAJ_CRC_BYTES;
}

size_t ro__traj_frame(uint8_t *out, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    size_t h = ro__varint_put(out, len);
    protobuf_c_message_pack(m, out + h);
    ro__traj_put_le32(out + h + len, ro__crc32c(0, out + h, len));
    return h + len + RO_TRAJ_CRC_BYTES;
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
        s += ro__varint_size(v[i]);
    return s;
}

static size_t u64s_size(const uint64_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += ro__varint_size(v[i]);
    return s;
}

static size_t i32s_size(const int32_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += ro__varint_size((uint64_t)(int64_t)v[i]); /* negative: 10 bytes */
    return s;
}

/* A packed field of `body` bytes: tag, length, body. */
static size_t field_size(size_t body)
{
    return body ? 1 + ro__varint_size(body) + body : 0;
}

/* Version 3's snapshots: field 14, one length-delimited message each (rare:
 * every K steps of an env), through protobuf-c. */
static size_t snapshots_size(const Rollout__V1__TransitionBatch *b)
{
    size_t s = 0;
    for (size_t i = 0; i < b->n_snapshots; i++)
        s += field_size(protobuf_c_message_get_packed_size(&b->snapshots[i]->base));
    return s;
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
    return (b->record ? 1 + ro__varint_size(b->record) : 0) +
           (b->dropped ? 1 + ro__varint_size(b->dropped) : 0) +
           (b->reseed ? 2 + ro__varint_size(b->reseed) : 0) + field_size(z->env) +
           field_size(z->episode) + field_size(z->step) + field_size(z->flags) +
           field_size(4 * b->n_reward) + field_size(z->action) + field_size(4 * b->n_action_box) +
           field_size(4 * b->n_obs) + ro__traj_packed_rows_size(b) + snapshots_size(b);
}

static uint8_t *put_head(uint8_t *p, uint32_t field, size_t body)
{
    *p++ = (uint8_t)(field << 3 | 2);
    return p + ro__varint_put(p, body);
}

/* put_u32s: a packed field of the n uint32 varints at v, body bytes
 * (u32s_size); nothing for none. */
static uint8_t *put_u32s(uint8_t *p, uint32_t field, size_t body, const uint32_t *v, size_t n)
{
    if (!body)
        return p;
    p = put_head(p, field, body);
    for (size_t i = 0; i < n; i++)
        p += ro__varint_put(p, v[i]);
    return p;
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
        ro__traj_put_le32(p + 4 * i, u);
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
        p += ro__varint_put(p, b->record);
    }
    if (b->dropped) {
        *p++ = 2 << 3;
        p += ro__varint_put(p, b->dropped);
    }
    p = put_u32s(p, 3, z.env, b->env, b->n_env);
    if (z.episode) {
        p = put_head(p, 4, z.episode);
        for (size_t i = 0; i < b->n_episode; i++)
            p += ro__varint_put(p, b->episode[i]);
    }
    p = put_u32s(p, 5, z.step, b->step, b->n_step);
    p = put_u32s(p, 6, z.flags, b->flags, b->n_flags);
    p = put_floats(p, 7, b->reward, b->n_reward);
    if (z.action) {
        p = put_head(p, 8, z.action);
        for (size_t i = 0; i < b->n_action; i++)
            p += ro__varint_put(p, (uint64_t)(int64_t)b->action[i]);
    }
    p = put_floats(p, 9, b->action_box, b->n_action_box);
    p = put_floats(p, 10, b->obs, b->n_obs);
    p += ro__traj_pack_rows(b, p);
    for (size_t i = 0; i < b->n_snapshots; i++) {
        const ProtobufCMessage *m = &b->snapshots[i]->base;
        p = put_head(p, 14, protobuf_c_message_get_packed_size(m));
        p += protobuf_c_message_pack(m, p);
    }
    if (b->reseed) { /* field 17, a varint, last as protobuf-c writes it */
        p += ro__varint_put(p, 17u << 3);
        p += ro__varint_put(p, b->reseed);
    }
    (void)total;
    return (size_t)(p - out);
}

/* The ABI 1 header fields: one float box observation, one action. */
static const char *abi1_fields(const Rollout__V1__TrajectoryHeader *h)
{
    if (h->layout)
        return "a version 1 header with an env ABI 2 layout";
    if (!h->action_kind ||
        (strcmp(h->action_kind, "discrete") != 0 && strcmp(h->action_kind, "box") != 0))
        return "action_kind is neither discrete nor box";
    if (h->action_dim == 0 || h->action_dim > (1u << 16) ||
        (strcmp(h->action_kind, "discrete") == 0 && h->action_dim != 1))
        return "action_dim out of range";
    return NULL;
}

int ro__traj_validate_header(const Rollout__V1__TrajectoryHeader *h, char *err, size_t errlen)
{
    const char *why = NULL;
    bool magic = h->magic && strcmp(h->magic, RO_TRAJ_HEADER_MAGIC) == 0;
    bool v3 = h->format_version == RO_TRAJ_FORMAT_SNAPSHOTS;
    /* Version 3 is version 1 or 2 with snapshots: the layout tells. */
    bool v2 = h->format_version == RO_TRAJ_FORMAT_VERSION || (v3 && h->layout);
    char lwhy[160] = "";
    if (!magic)
        why = "the header has no trajectory magic";
    else if (h->format_version != RO_TRAJ_FORMAT_ABI1 &&
             h->format_version != RO_TRAJ_FORMAT_VERSION && !v3)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "unsupported trajectory format version %u (this build reads versions "
                          "%u to %u; a newer rollout-replay reads it)",
                          h->format_version, RO_TRAJ_FORMAT_ABI1, RO_TRAJ_FORMAT_SNAPSHOTS);
    else if (v3 != (h->snapshot_every != 0))
        why = v3 ? "a version 3 header without snapshot_every"
                 : "snapshot_every in a header of version 1 or 2";
    else if (!h->env || !h->env[0] || !h->env_spec || !h->env_spec[0])
        why = "no env name";
    else if (h->num_envs == 0 || h->num_envs > (1u << 24))
        why = "num_envs out of range";
    else if (h->obs_dim == 0 || h->obs_dim > (1u << 24))
        why = "obs_dim out of range";
    else if (!v2)
        why = abi1_fields(h);
    else if (!h->action_kind || strcmp(h->action_kind, "composite") != 0)
        why = "a version 2 header whose action_kind is not composite";
    else if (!h->layout)
        why = "a version 2 header without its layout";
    else if (ro__traj_layout_rows(h->layout, &(ro_traj_rows_t){0}, lwhy, sizeof lwhy) != 0)
        why = lwhy;
    if (!why && (h->max_record_bytes < 16 || h->max_record_bytes > RO_TRAJ_MAX_RECORD))
        why = "max_record_bytes out of range";
    for (size_t i = 0; !why && i < h->n_env_args; i++)
        if (!h->env_args[i] || !h->env_args[i]->key || !h->env_args[i]->value)
            why = "an env arg without key or value";
    if (!why)
        return 0;
    snprintf(err, errlen, "invalid trajectory header: %s", why);
    return RO_EBADMSG;
}

int ro__traj_validate_batch(const Rollout__V1__TrajectoryHeader *h,
                            const Rollout__V1__TransitionBatch *b, char *err, size_t errlen)
{
    size_t n = b->n_env;
    bool discrete = h->action_kind && strcmp(h->action_kind, "discrete") == 0;
    const char *why = NULL;
    char rwhy[160];
    bool index = b->index || b->index_at; /* version 3: an index or footer record */
    if (index && (n || b->n_snapshots || h->format_version != RO_TRAJ_FORMAT_SNAPSHOTS))
        why = "an index record with entries, or in a file without snapshots";
    else if (n == 0 && b->dropped == 0 && !index && !b->n_snapshots)
        why = "no entries"; /* a fork's first record holds only its envs' states */
    else if (b->n_snapshots && h->format_version != RO_TRAJ_FORMAT_SNAPSHOTS)
        why = "snapshots in a file of format version 1 or 2";
    else if (b->n_snapshots > h->num_envs)
        why = "more snapshots than envs";
    else if (b->n_episode != n || b->n_step != n || b->n_flags != n || b->n_reward != n)
        why = "column lengths differ";
    else if (h->layout) {
        if (ro__traj_validate_rows(h, b, rwhy, sizeof rwhy) != 0)
            why = rwhy;
    } else if (b->n_agent || b->n_tensors || b->mask.len)
        why = "env ABI 2 columns in a version 1 record";
    else if (discrete && (b->n_action != n || b->n_action_box != 0))
        why = "wrong number of discrete actions";
    else if (!discrete && (b->n_action != 0 || b->n_action_box / h->action_dim != n ||
                           b->n_action_box % h->action_dim != 0))
        why = "wrong number of box actions";
    else if (b->n_obs / h->obs_dim != n || b->n_obs % h->obs_dim != 0)
        why = "wrong number of observation values";
    for (size_t k = 0; !why && k < b->n_snapshots; k++)
        if (b->snapshots[k]->env >= h->num_envs || b->snapshots[k]->state.len == 0)
            why = "a snapshot of no env, or without a state";
    for (size_t k = 0; !why && k < n; k++) {
        if (b->env[k] >= h->num_envs)
            why = "env index out of range";
        else if (b->flags[k] > 63)
            why = "unknown flags";
        else if ((b->flags[k] & RO_TRAJ_RESET) &&
                 (b->step[k] != 0 ||
                  (b->flags[k] & ~(uint32_t)(RO_TRAJ_RESTART | RO_TRAJ_RESEEDED)) != RO_TRAJ_RESET))
            why = "a reset entry with a step or flags";
        else if ((b->flags[k] & (RO_TRAJ_RESTART | RO_TRAJ_RESEEDED)) &&
                 (b->flags[k] & (RO_TRAJ_RESTART | RO_TRAJ_RESEEDED | RO_TRAJ_RESET)) !=
                     (RO_TRAJ_RESET | RO_TRAJ_RESTART | (b->flags[k] & RO_TRAJ_RESEEDED)))
            why = "a restart flag outside a reset entry";
        else if (!(b->flags[k] & RO_TRAJ_RESET) && b->step[k] == 0)
            why = "a step entry with step 0";
    }
    if (!why)
        return 0;
    snprintf(err, errlen, "%s", why);
    return RO_EBADMSG;
}

void ro__traj_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t ro__traj_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ro__traj_record_prefix(const uint8_t *p, size_t avail, uint64_t *len)
{
    /* Record lengths fit 32 bits: a longer varint is damage. */
    int h = ro__varint_get(p, avail < 5 ? avail : 5, len);
    if (h == 0 && avail >= 5)
        return -1;
    return h < 0 ? -1 : h;
}

int ro__traj_skim(const uint8_t *p, size_t len,
                  bool (*need)(void *ctx, uint64_t record, uint32_t env), void *ctx,
                  ro_traj_skim_t *out)
{
    memset(out, 0, sizeof *out);
    size_t at = 0;
    while (at < len) {
        uint64_t key, v;
        int h = ro__varint_get(p + at, len - at, &key);
        if (h <= 0)
            return -1;
        at += (size_t)h;
        uint32_t field = (uint32_t)(key >> 3), wire = (uint32_t)(key & 7);
        size_t adv;
        if (wire == 0) { /* varint: record (1) and dropped (2) */
            if ((h = ro__varint_get(p + at, len - at, &v)) <= 0)
                return -1;
            if (field == 1)
                out->record = v;
            adv = (size_t)h;
        } else if (wire == 1 || wire == 5) { /* fixed64 (index_at), fixed32 */
            adv = wire == 1 ? 8 : 4;
            if (adv > len - at)
                return -1;
        } else if (wire == 2) { /* length-delimited: packed columns, messages */
            if ((h = ro__varint_get(p + at, len - at, &v)) <= 0 || v > len - at - (size_t)h)
                return -1;
            const uint8_t *q = p + at + h, *end = q + v;
            out->snapshots |= field == 14;
            /* env (3): is any needed? flags (6): how many steps? */
            while ((field == 3 || field == 6) && q < end) {
                uint64_t x;
                int k = ro__varint_get(q, (size_t)(end - q), &x);
                if (k <= 0)
                    return -1;
                q += k;
                if (field == 6)
                    out->steps += !(x & RO_TRAJ_RESET);
                else if (!out->needed && need)
                    out->needed = x > UINT32_MAX || need(ctx, out->record, (uint32_t)x);
            }
            adv = (size_t)h + (size_t)v;
        } else {
            return -1;
        }
        at += adv;
    }
    return 0;
}
