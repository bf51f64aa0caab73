/*
 * A Python env's spec, read and checked (pyenv_spec.h).
 */
#include "envs/pyenv_spec.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "envs/pyenv_proto.h"
#include "runtime/error.h"

/* The wire's and the layout's limits (spaces/layout.h). */
#define MAX_VALUES (1u << 20)
#define MAX_ENTRIES (1u << 16)

/* A cursor over the spec's bytes. */
typedef struct cur {
    const uint8_t *p;
    uint32_t len, at;
} cur_t;

/* take gives the next n bytes, or NULL if the spec is shorter. */
static const uint8_t *take(cur_t *c, uint64_t n)
{
    if (n > c->len - c->at)
        return NULL;
    const uint8_t *r = c->p + c->at;
    c->at += (uint32_t)n;
    return r;
}

static int u32_at(cur_t *c, uint32_t *v)
{
    const uint8_t *b = take(c, 4);
    if (!b)
        return -1;
    memcpy(v, b, 4);
    return 0;
}

/* shape_ok checks ndim and extents; *size gets the product. */
static int shape_ok(uint32_t ndim, const uint32_t *shape, uint32_t *size)
{
    if (ndim < 1 || ndim > RO_SPACE_MAX_DIMS)
        return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 1)
            return 0;
        n *= shape[d];
        if (n > MAX_VALUES)
            return 0;
    }
    *size = (uint32_t)n;
    return 1;
}

/* floats takes n float32s into the next free bounds slot, checking them
 * (no NaN; low <= high is the layout's check). */
static const float *floats(cur_t *c, uint32_t n, float **slot)
{
    const uint8_t *b = take(c, (uint64_t)n * 4);
    if (!b)
        return NULL;
    float *out = *slot;
    memcpy(out, b, (size_t)n * 4);
    for (uint32_t i = 0; i < n; i++)
        if (isnan(out[i]))
            return NULL;
    *slot += n;
    return out;
}

/* What the fixed records add up to: the variable part that follows. */
typedef struct tally {
    uint32_t has_bounds[RO_ENV_MAX_TENSORS]; /* tensor k's bounds follow */
    uint64_t nfloats, nvec;                  /* bound floats, MultiDiscrete nvec entries */
} tally_t;

/* obs_record reads tensor k's fixed record (64 bytes). */
static int obs_record(ro_pyspec_t *s, uint32_t k, const uint8_t *r, tally_t *t, const char *env,
                      char *err, size_t errlen)
{
    if (!memchr(r, 0, RO_ENV_MAX_NAME))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': tensor %u's name is not "
                          "NUL-terminated within %d bytes",
                          env, k, RO_ENV_MAX_NAME);
    memcpy(s->names[k], r, RO_ENV_MAX_NAME);
    uint32_t w[8];
    memcpy(w, r + 32, sizeof w); /* dtype, ndim, pad, shape[4], has_bounds */
    ro_tensor_space_t *ts = &s->sp.obs[k];
    ts->name = s->names[k];
    ts->dtype = (ro_dtype_t)w[0];
    ts->ndim = w[1];
    memcpy(ts->shape, w + 3, sizeof ts->shape);
    uint32_t size;
    if (w[0] < RO_DTYPE_UINT8 || w[0] > RO_DTYPE_FLOAT32 || !shape_ok(w[1], ts->shape, &size) ||
        w[7] > 1)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': tensor %u ('%s') has dtype %u, "
                          "%u dims, bound flag %u: not an env ABI 2 tensor of at most %u "
                          "values",
                          env, k, s->names[k], w[0], w[1], w[7], MAX_VALUES);
    t->has_bounds[k] = w[7];
    t->nfloats += w[7] ? 2ull * size : 0;
    return 0;
}

/* part_record reads action part k's fixed record (32 bytes). */
static int part_record(ro_pyspec_t *s, uint32_t k, const uint8_t *r, tally_t *t, const char *env,
                       char *err, size_t errlen)
{
    uint32_t w[8];
    memcpy(w, r, sizeof w); /* kind, n, ndim, shape[4], pad */
    ro_action_part_t *a = &s->sp.act[k];
    a->kind = (ro_space_kind_t)w[0];
    a->n = w[1];
    uint32_t size = 0;
    bool ok;
    if (w[0] == RO_SPACE_BOX) {
        a->ndim = w[2];
        memcpy(a->shape, w + 3, sizeof a->shape);
        ok = shape_ok(a->ndim, a->shape, &size) && size == w[1];
        t->nfloats += 2ull * size;
    } else if (w[0] == RO_SPACE_DISCRETE) {
        ok = w[1] >= 1 && w[1] <= MAX_VALUES;
    } else {
        ok = (w[0] == RO_SPACE_MULTI_DISCRETE || w[0] == RO_SPACE_MULTI_BINARY) && w[1] >= 1 &&
             w[1] <= MAX_ENTRIES;
        t->nvec += w[0] == RO_SPACE_MULTI_DISCRETE ? w[1] : 0;
    }
    if (!ok)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': action part %u has kind %u, n "
                          "%u, %u dims: not an env ABI 2 action part",
                          env, k, w[0], w[1], w[2]);
    return 0;
}

/* A section of the spec: a count, then that many fixed records. */
typedef struct section {
    uint32_t max;      /* the most records */
    uint32_t rec;      /* bytes a record */
    const char *items; /* what the records are, in messages */
    const char *item;  /* one of them */
    int (*record)(ro_pyspec_t *s, uint32_t k, const uint8_t *r, tally_t *t, const char *env,
                  char *err, size_t errlen);
} section_t;

static const section_t TENSORS = {RO_ENV_MAX_TENSORS, 64, "observation tensors", "tensor",
                                  obs_record};
static const section_t PARTS = {RO_ENV_MAX_PARTS, 32, "action parts", "part", part_record};

/* read_section reads a section's count (1..max) into *n, then its records
 * one by one. */
static int read_section(ro_pyspec_t *s, cur_t *c, const section_t *sec, uint32_t *n, tally_t *t,
                        const char *env, char *err, size_t errlen)
{
    uint32_t count = 0;
    if (u32_at(c, &count) || count < 1 || count > sec->max)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': the worker reports %u %s; expected 1..%u", env, count,
                          sec->items, sec->max);
    *n = count;
    for (uint32_t k = 0; k < count; k++) {
        const uint8_t *r = take(c, sec->rec);
        if (!r)
            return ro__errorf(err, errlen, RO_EINVAL, "env '%s': the spec ends in %s %u", env,
                              sec->item, k);
        int rc = sec->record(s, k, r, t, env, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* row_layout places one env's fields in its row, 8-byte aligned, the row
 * a whole number of cache lines. */
static void row_layout(ro_pyspec_t *s)
{
    uint64_t at = 0;
#define PLACE(field, bytes)                                                                        \
    do {                                                                                           \
        s->field = (uint32_t)at;                                                                   \
        at += ((uint64_t)(bytes) + 7) / 8 * 8;                                                     \
    } while (0)
    PLACE(off_flags, PY_FLAGS);
    PLACE(off_seed, 8);
    PLACE(off_reward, 4);
    PLACE(off_act_i, 4ull * (s->ndisc ? s->ndisc : 1));
    PLACE(off_act_f, 4ull * (s->nbox ? s->nbox : 1));
    for (uint32_t k = 0; k < s->sp.num_obs; k++)
        PLACE(off_obs[k], s->row_bytes[k]);
    for (uint32_t k = 0; k < s->sp.num_obs; k++)
        PLACE(off_reset[k], s->row_bytes[k]);
#undef PLACE
    s->stride = (uint32_t)((at + 63) / 64 * 64);
}

int ro__pyspec_read(ro_pyspec_t *s, const uint8_t *spec, uint32_t len, const char *env, char *err,
                    size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->sp.size = sizeof s->sp;
    s->sp.num_agents = 1;
    if (len > PY_SPEC_MAX)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env '%s': the worker's spec is %u bytes; at "
                          "most %u",
                          env, len, PY_SPEC_MAX);
    cur_t c = {.p = spec, .len = len};
    tally_t sum = {0};
    int rc = read_section(s, &c, &TENSORS, &s->sp.num_obs, &sum, env, err, errlen);
    if (rc == 0)
        rc = read_section(s, &c, &PARTS, &s->sp.num_parts, &sum, env, err, errlen);
    if (rc)
        return rc;
    const uint64_t nfloats = sum.nfloats, nvec = sum.nvec;
    /* The variable part can only be as long as the spec: sizes are bounded. */
    if (nfloats * 4 + nvec * 4 > len - c.at)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': the spec is shorter than its bounds",
                          env);
    s->bounds = malloc((nfloats + 1) * sizeof *s->bounds);
    s->nvec = malloc((nvec + 1) * sizeof *s->nvec);
    s->raw = malloc(len ? len : 1);
    if (!s->bounds || !s->nvec || !s->raw)
        return ro__errorf(err, errlen, RO_ENOMEM, "env '%s': out of memory for its spaces", env);
    memcpy(s->raw, spec, len);
    s->raw_len = len;
    float *slot = s->bounds;
    for (uint32_t k = 0; k < s->sp.num_obs; k++) {
        ro_tensor_space_t *t = &s->sp.obs[k];
        uint32_t size = (uint32_t)ro_tensor_space_size(t);
        s->row_bytes[k] = size * (t->dtype == RO_DTYPE_UINT8 ? 1 : 4);
        if (sum.has_bounds[k] &&
            (!(t->low = floats(&c, size, &slot)) || !(t->high = floats(&c, size, &slot))))
            return ro__errorf(err, errlen, RO_EINVAL, "env '%s': tensor '%s' has NaN bounds", env,
                              t->name);
    }
    uint32_t *nv = s->nvec;
    for (uint32_t k = 0; k < s->sp.num_parts; k++) {
        ro_action_part_t *a = &s->sp.act[k];
        if (a->kind == RO_SPACE_BOX) {
            s->nbox += a->n;
            if (!(a->low = floats(&c, a->n, &slot)) || !(a->high = floats(&c, a->n, &slot)))
                return ro__errorf(err, errlen, RO_EINVAL,
                                  "env '%s': action part %u has NaN "
                                  "bounds",
                                  env, k);
            continue;
        }
        s->ndisc += a->kind == RO_SPACE_DISCRETE ? 1 : a->n;
        if (a->kind == RO_SPACE_MULTI_DISCRETE) {
            const uint8_t *b = take(&c, 4ull * a->n);
            memcpy(nv, b, 4ull * a->n); /* b is there: counted above */
            for (uint32_t i = 0; i < a->n; i++)
                if (nv[i] < 1 || nv[i] > MAX_VALUES)
                    return ro__errorf(err, errlen, RO_EINVAL,
                                      "env '%s': action part %u's "
                                      "nvec[%u] = %u",
                                      env, k, i, nv[i]);
            a->nvec = nv;
            nv += a->n;
        }
    }
    if (s->ndisc > MAX_ENTRIES || s->nbox > MAX_VALUES)
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s': actions of %u entries and %u floats",
                          env, s->ndisc, s->nbox);
    row_layout(s);
    return 0;
}

void ro__pyspec_free(ro_pyspec_t *s)
{
    free(s->bounds);
    free(s->nvec);
    free(s->raw);
    memset(s, 0, sizeof *s);
}
