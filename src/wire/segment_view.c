#include "wire/segment_view.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/varint.h"

/* A cursor over untrusted protobuf bytes. */
typedef struct cursor {
    const uint8_t *p, *end;
} cursor_t;

static int get_varint(cursor_t *c, uint64_t *v)
{
    int k = ro__varint_get(c->p, (size_t)(c->end - c->p), v);
    if (k <= 0)
        return -1;
    c->p += k;
    return 0;
}

/* A field: its number and wire type; for a varint its value (x), for a
 * length-delimited one its length (x) and bytes (b). */
typedef struct field {
    uint32_t num, type;
    uint64_t x;
    const uint8_t *b;
} field_t;

/* The next field into f. -1 when malformed. */
static int next_field(cursor_t *c, field_t *f)
{
    uint64_t tag;
    *f = (field_t){0};
    if (get_varint(c, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
        return -1;
    f->num = (uint32_t)(tag >> 3);
    f->type = (uint32_t)(tag & 7);
    switch (f->type) {
    case 0: /* varint */
        return get_varint(c, &f->x);
    case 1: /* fixed64 */
        if (c->end - c->p < 8)
            return -1;
        c->p += 8;
        return 0;
    case 2: /* length-delimited */
        if (get_varint(c, &f->x) || f->x > (uint64_t)(c->end - c->p))
            return -1;
        f->b = c->p;
        c->p += f->x;
        return 0;
    case 5: /* fixed32 */
        if (c->end - c->p < 4)
            return -1;
        c->p += 4;
        return 0;
    default: /* groups are not ours */
        return -1;
    }
}

static int parse_tensor(const uint8_t *p, size_t len, ro_tensor_view_t *t)
{
    memset(t, 0, sizeof *t);
    cursor_t c = {p, p + len};
    field_t fd;
    while (c.p < c.end) {
        if (next_field(&c, &fd))
            return -1;
        if (fd.num == 1 && fd.type == 2) {
            t->name = (const char *)fd.b;
            t->name_len = (size_t)fd.x;
        } else if (fd.num == 2 && fd.type == 0) {
            t->dtype = (uint32_t)fd.x;
        } else if (fd.num == 3 && fd.type == 2) { /* packed shape (the last one wins) */
            cursor_t s = {fd.b, fd.b + fd.x};
            t->ndim = 0;
            while (s.p < s.end) {
                uint64_t d;
                if (t->ndim == RO_VIEW_MAX_DIMS || get_varint(&s, &d) || d > UINT32_MAX)
                    return -1;
                t->shape[t->ndim++] = (uint32_t)d;
            }
        } else if (fd.num == 3 && fd.type == 0) { /* an unpacked shape element */
            if (t->ndim == RO_VIEW_MAX_DIMS || fd.x > UINT32_MAX)
                return -1;
            t->shape[t->ndim++] = (uint32_t)fd.x;
        } else if (fd.num == 4 && fd.type == 2) {
            t->data = fd.b;
            t->bytes = (size_t)fd.x;
        } else if (fd.num == 5 && fd.type == 0) {
            t->offset = fd.x;
        }
    }
    return 0;
}

static int parse_segment(const uint8_t *p, size_t len, ro_segment_view_t *v, char *err,
                         size_t errlen)
{
    cursor_t c = {p, p + len};
    /* The varint fields 1..8, by number: 64-bit ones, the rest 32-bit
     * (clamped). */
    uint64_t *const u64[9] = {
        [1] = &v->seq, [3] = &v->shard_seq, [7] = &v->version_min, [8] = &v->version_max};
    uint32_t *const u32[9] = {[2] = &v->shard, [4] = &v->first_env, [5] = &v->t, [6] = &v->n};
    field_t fd;
    while (c.p < c.end) {
        if (next_field(&c, &fd))
            return ro__errorf(err, errlen, RO_EBADMSG, "a segment that is not valid protobuf");
        if (fd.type == 0 && fd.num <= 8) { /* next_field: num >= 1 */
            if (u64[fd.num])
                *u64[fd.num] = fd.x;
            else
                *u32[fd.num] = fd.x > UINT32_MAX ? UINT32_MAX : (uint32_t)fd.x;
        } else if (fd.num == 10 && fd.type == 0) {
            v->in_memory = fd.x != 0;
        } else if (fd.num == 9 && fd.type == 2) {
            if (v->ntensors == RO_VIEW_MAX_TENSORS)
                return ro__errorf(err, errlen, RO_EBADMSG, "a segment with over %d tensors",
                                  RO_VIEW_MAX_TENSORS);
            if (parse_tensor(fd.b, (size_t)fd.x, &v->tensors[v->ntensors++]))
                return ro__errorf(err, errlen, RO_EBADMSG,
                                  "a segment tensor that is not valid "
                                  "protobuf");
        }
    }
    return 0;
}

int ro__segment_view_parse(const uint8_t *frame, size_t len, ro_segment_view_t *v, char *err,
                           size_t errlen)
{
    memset(v, 0, sizeof *v);
    cursor_t c = {frame, frame + len};
    field_t fd, seg = {0};
    bool other = false;
    while (c.p < c.end) {
        if (next_field(&c, &fd))
            return ro__errorf(err, errlen, RO_EBADMSG, "a frame that is not valid protobuf");
        if (fd.num == 9 && fd.type == 2) { /* Frame.segment (oneof: the last one wins) */
            seg = fd;
            other = false;
        } else if (fd.num >= 1 && fd.num <= 10) {
            other = true;
        }
    }
    if (!seg.b || other)
        return 0;
    int rc = parse_segment(seg.b, (size_t)seg.x, v, err, errlen);
    return rc ? rc : 1;
}

const ro_tensor_view_t *ro__segment_view_find(const ro_segment_view_t *v, const char *name)
{
    size_t n = strlen(name);
    /* The last one wins, as protobuf would have it for a repeated name. */
    for (uint32_t i = v->ntensors; i-- > 0;)
        if (v->tensors[i].name_len == n && memcmp(v->tensors[i].name, name, n) == 0)
            return &v->tensors[i];
    return NULL;
}

static size_t dtype_size(uint32_t dtype)
{
    switch (dtype) {
    case 1: /* float32 */
    case 2: /* int32 */
    case 4: /* uint32 */
        return 4;
    case 3: /* uint8 */
        return 1;
    case 5: /* uint64 */
        return 8;
    default:
        return 0;
    }
}

int ro__segment_view_resolve(ro_segment_view_t *v, const uint8_t *base, size_t size, char *err,
                             size_t errlen)
{
    const unsigned long long seq = (unsigned long long)v->seq;
    if (!v->in_memory)
        return 0;
    if (!base)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu is in shared memory, but none was offered", seq);
    for (uint32_t i = 0; i < v->ntensors; i++) {
        ro_tensor_view_t *t = &v->tensors[i];
        /* Bounded by size at every factor: a shape cannot overflow this. */
        uint64_t bytes = dtype_size(t->dtype);
        for (uint32_t d = 0; d < t->ndim && bytes; d++)
            bytes = t->shape[d] > size / bytes ? UINT64_MAX : bytes * t->shape[d];
        if (t->data || t->offset > size || bytes > size - t->offset)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "segment %llu: tensor '%.*s' at %llu..+%llu is outside the %zu "
                              "bytes of shared memory%s",
                              seq, (int)(t->name_len > 40 ? 40 : t->name_len),
                              t->name ? t->name : "", (unsigned long long)t->offset,
                              (unsigned long long)bytes, size,
                              t->data ? ", or carries bytes as well" : "");
        t->data = base + t->offset;
        t->bytes = (size_t)bytes;
    }
    return 0;
}

/* Tensor name: dtype and shape (dims; 0 in want is "any"); its bytes match. */
static int expect(const ro_segment_view_t *v, const char *name, uint32_t dtype, uint32_t ndim,
                  const uint32_t *want, char *err, size_t errlen)
{
    const ro_tensor_view_t *t = ro__segment_view_find(v, name);
    if (!t)
        return ro__errorf(err, errlen, RO_EPROTO, "segment %llu has no tensor '%s'",
                          (unsigned long long)v->seq, name);
    if (t->dtype != dtype || t->ndim != ndim)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: tensor '%s' has dtype %u and %u dims, expected %u and %u",
                          (unsigned long long)v->seq, name, t->dtype, t->ndim, dtype, ndim);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (want[d] != UINT32_MAX && t->shape[d] != want[d])
            return ro__errorf(err, errlen, RO_EPROTO,
                              "segment %llu: tensor '%s' dim %u is %u, expected %u",
                              (unsigned long long)v->seq, name, d, t->shape[d], want[d]);
        elems *= t->shape[d];
    }
    if (elems * dtype_size(dtype) != t->bytes)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: tensor '%s' has %zu bytes for %llu elements",
                          (unsigned long long)v->seq, name, t->bytes, (unsigned long long)elems);
    return 0;
}

/* The columns of every step, ABI 1 and 2 alike: [t, n] (policy_version
 * [t]). */
static int expect_common(const ro_segment_view_t *v, char *err, size_t errlen)
{
    const uint32_t tn[2] = {v->t, v->n}, tv[1] = {v->t};
    int rc = 0;
    if ((rc = expect(v, "logp", 1, 2, tn, err, errlen)) ||
        (rc = expect(v, "reward", 1, 2, tn, err, errlen)) ||
        (rc = expect(v, "terminated", 3, 2, tn, err, errlen)) ||
        (rc = expect(v, "truncated", 3, 2, tn, err, errlen)) ||
        (rc = expect(v, "is_first", 3, 2, tn, err, errlen)) ||
        (rc = expect(v, "episode", 4, 2, tn, err, errlen)) ||
        (rc = expect(v, "step", 4, 2, tn, err, errlen)) ||
        (rc = expect(v, "policy_version", 5, 1, tv, err, errlen)))
        return rc;
    return 0;
}

/* An ABI 1 segment: obs, action, next_obs and final_obs of the welcome's
 * spaces. Sets *k to the final observations (0: none). */
static int check_abi1(const ro_segment_view_t *v, const ro_segment_rules_t *r, uint32_t *k,
                      char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)v->seq;
    const uint32_t t = v->t, n = v->n, U = UINT32_MAX;
    if (v->first_env >= r->num_envs || n > r->num_envs - v->first_env)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: %u steps of envs %u..+%u (unroll %u, %u envs)", seq, t,
                          v->first_env, n, r->unroll, r->num_envs);
    const uint32_t tn[2] = {t, n}, tno[3] = {t, n, r->obs_dim}, no[2] = {n, r->obs_dim};
    const uint32_t tna[3] = {t, n, r->act_dim}, ku[1] = {U}, ko[2] = {U, r->obs_dim};
    int rc = 0;
    /* Observations are checked flat: a multi-dimensional one has more dims. */
    const ro_tensor_view_t *o = ro__segment_view_find(v, "obs");
    uint32_t od = o && o->ndim >= 3 ? o->ndim : 3;
    if (od != 3)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: observations of %u dims are not read here", seq, od - 2);
    if ((rc = expect(v, "obs", 1, 3, tno, err, errlen)) ||
        (rc = r->discrete ? expect(v, "action", 2, 2, tn, err, errlen)
                          : expect(v, "action", 1, 3, tna, err, errlen)) ||
        (rc = expect_common(v, err, errlen)) || (rc = expect(v, "next_obs", 1, 2, no, err, errlen)))
        return rc;
    const ro_tensor_view_t *fi = ro__segment_view_find(v, "final_index");
    const ro_tensor_view_t *fo = ro__segment_view_find(v, "final_obs");
    *k = 0;
    if (fi || fo) {
        if (!fi || !fo || (rc = expect(v, "final_index", 2, 1, ku, err, errlen)) ||
            (rc = expect(v, "final_obs", 1, 2, ko, err, errlen)) || fi->shape[0] != fo->shape[0])
            return rc ? rc
                      : ro__errorf(err, errlen, RO_EPROTO,
                                   "segment %llu: final_index and final_obs disagree", seq);
        *k = fi->shape[0];
    }
    return 0;
}

/* Tensor "<prefix><name of obs rule o>" with lead leading dims (nlead of
 * them) and then the rule's shape. */
static int expect_obs(const ro_segment_view_t *v, const ro_segment_obs_rule_t *o,
                      const char *prefix, const uint32_t *lead, uint32_t nlead, char *err,
                      size_t errlen)
{
    char name[64];
    uint32_t dims[2 + RO_VIEW_MAX_OBS_DIMS];
    snprintf(name, sizeof name, "%s%s", prefix, o->name);
    for (uint32_t d = 0; d < nlead; d++)
        dims[d] = lead[d];
    for (uint32_t d = 0; d < o->ndim; d++)
        dims[nlead + d] = o->shape[d];
    return expect(v, name, o->dtype, nlead + o->ndim, dims, err, errlen);
}

/* An env ABI 2 segment (docs/protocol.md): n rows of whole envs, each
 * tensor of the layout as obs/, next_obs/ and final_obs/<name>, the
 * actions, the mask. Sets *k to the final observations. */
static int check_abi2(const ro_segment_view_t *v, const ro_segment_rules_t *r, uint32_t *k,
                      char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)v->seq;
    const uint32_t t = v->t, n = v->n, A = r->agents ? r->agents : 1, U = UINT32_MAX;
    if (n % A || v->first_env >= r->num_envs || n / A > r->num_envs - v->first_env)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: %u rows from env %u are not whole envs of %u agents "
                          "of a node of %u envs",
                          seq, n, v->first_env, A, r->num_envs);
    const uint32_t tn[2] = {t, n}, nn[1] = {n}, ku[1] = {U};
    const uint32_t tnd[3] = {t, n, r->ndisc}, tnb[3] = {t, n, r->nbox};
    const uint32_t tnm[3] = {t, n, r->mask_width};
    int rc = 0;
    for (uint32_t i = 0; i < r->nobs; i++)
        if ((rc = expect_obs(v, &r->obs[i], "obs/", tn, 2, err, errlen)) ||
            (rc = expect_obs(v, &r->obs[i], "next_obs/", nn, 1, err, errlen)))
            return rc;
    if ((r->ndisc && (rc = expect(v, "action", 2, 3, tnd, err, errlen))) ||
        (r->nbox && (rc = expect(v, "action_box", 1, 3, tnb, err, errlen))) ||
        (r->mask_width && (rc = expect(v, "mask", 3, 3, tnm, err, errlen))) ||
        (rc = expect_common(v, err, errlen)) ||
        (rc = expect(v, "final_index", 2, 1, ku, err, errlen)))
        return rc;
    *k = ro__segment_view_find(v, "final_index")->shape[0];
    const uint32_t kk[1] = {*k};
    for (uint32_t i = 0; i < r->nobs; i++)
        if ((rc = expect_obs(v, &r->obs[i], "final_obs/", kk, 1, err, errlen)))
            return rc;
    return 0;
}

/* check_state: a recurrent node's state tensors, [n, H] float32 each,
 * finite, and zero in the rows whose first step starts an episode (the
 * node zeroes such a row's state before acting: a learner that starts
 * from it would otherwise carry one episode's memory into the next). */
static int check_state(const ro_segment_view_t *v, const ro_segment_rules_t *r, char *err,
                       size_t errlen)
{
    const uint32_t dims[2] = {v->n, r->state_hid};
    const uint8_t *first = ro__segment_view_find(v, "is_first")->data; /* [t, n]: row 0 */
    for (int c = 0; c < 1 + r->state_lstm; c++) {
        const char *name = c ? "state/c" : "state/h";
        int rc = expect(v, name, 1, 2, dims, err, errlen);
        if (rc)
            return rc;
        const uint8_t *d = ro__segment_view_find(v, name)->data;
        for (size_t i = 0; i < (size_t)v->n * r->state_hid; i++) {
            float x; /* the frame's bytes may be unaligned */
            memcpy(&x, d + 4 * i, sizeof x);
            const uint32_t row = (uint32_t)(i / r->state_hid);
            if (!isfinite(x) || (first[row] && x != 0.0f))
                return ro__errorf(err, errlen, RO_EPROTO, "segment %llu: %s of row %u is %g%s",
                                  (unsigned long long)v->seq, name, row, (double)x,
                                  isfinite(x) ? " but the row starts an episode at step 0"
                                              : "; states must be finite");
        }
    }
    return 0;
}

int ro__segment_view_check(const ro_segment_view_t *v, const ro_segment_rules_t *r, char *err,
                           size_t errlen)
{
    const unsigned long long seq = (unsigned long long)v->seq;
    if (v->t < 1 || v->t > r->unroll || v->n < 1)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "segment %llu: %u steps of envs %u..+%u (unroll %u, %u envs)", seq, v->t,
                          v->first_env, v->n, r->unroll, r->num_envs);
    if (v->version_min > v->version_max)
        return ro__errorf(err, errlen, RO_EPROTO, "segment %llu: policy versions %llu > %llu", seq,
                          (unsigned long long)v->version_min, (unsigned long long)v->version_max);
    const uint32_t t = v->t, n = v->n;
    uint32_t k = 0;
    int rc = r->abi2 ? check_abi2(v, r, &k, err, errlen) : check_abi1(v, r, &k, err, errlen);
    if (rc)
        return rc;
    const ro_tensor_view_t *fi = ro__segment_view_find(v, "final_index");
    for (uint32_t i = 0; i < k; i++) {
        int32_t x;
        memcpy(&x, fi->data + 4 * (size_t)i, 4);
        if (x < 0 || (uint64_t)x >= (uint64_t)t * n)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "segment %llu: final index %d outside its %u x %u steps", seq, x, t,
                              n);
    }
    if (r->state_hid && (rc = check_state(v, r, err, errlen)) != 0)
        return rc;
    const ro_tensor_view_t *pv = ro__segment_view_find(v, "policy_version");
    for (uint32_t i = 0; i < t; i++) {
        uint64_t x;
        memcpy(&x, pv->data + 8 * (size_t)i, 8);
        if (x < v->version_min || x > v->version_max)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "segment %llu: step %u's policy version %llu is outside %llu..%llu",
                              seq, i, (unsigned long long)x, (unsigned long long)v->version_min,
                              (unsigned long long)v->version_max);
    }
    return 0;
}
