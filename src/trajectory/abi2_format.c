/*
 * Env ABI 2 in trajectory files: the header's layout and the checks of
 * version 2 rows (abi2_format.h, docs/replay.md).
 */
#include "trajectory/abi2_format.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/varint.h"
#include "wire/dtype.h"

/* The same limits as the node's checks (spaces/layout.c). */
#define MAX_VALUES RO_LAYOUT_MAX_VALUES
#define MAX_ENTRIES RO_LAYOUT_MAX_ENTRIES

static uint32_t elem_size(ro_dtype_t d)
{
    return d == RO_DTYPE_UINT8 ? 1 : 4;
}

/* ---- the header's layout, from a node's ---- */

int ro__traj_layout_msg_init(ro_traj_layout_msg_t *m, const ro_space_layout_t *lay)
{
    memset(m, 0, sizeof *m);
    Rollout__V1__TrajectoryLayout *l = &m->msg;
    rollout__v1__trajectory_layout__init(l);
    l->agents = lay->agents;
    l->mask_width = lay->mask_width;
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        Rollout__V1__NamedTensor *t = &m->t[k];
        rollout__v1__named_tensor__init(t);
        snprintf(m->name[k], sizeof m->name[k], "%s", lay->t[k].name);
        t->name = m->name[k];
        t->dtype = ro__wire_dtype(lay->t[k].dtype);
        memcpy(m->shape[k], lay->t[k].shape, sizeof m->shape[k]);
        t->shape = m->shape[k];
        t->n_shape = lay->t[k].ndim;
        m->tp[k] = t;
    }
    l->tensors = m->tp;
    l->n_tensors = lay->ntensors;
    size_t nvec = 0;
    for (uint32_t i = 0; i < lay->nparts; i++)
        if (lay->part[i].kind == RO_SPACE_MULTI_DISCRETE)
            nvec += lay->part[i].n;
    if (nvec && !(m->nvec = calloc(nvec, sizeof *m->nvec)))
        return RO_ENOMEM;
    size_t at = 0;
    for (uint32_t i = 0; i < lay->nparts; i++) {
        const ro_part_layout_t *pl = &lay->part[i];
        Rollout__V1__TrajectoryActionPart *p = &m->p[i];
        rollout__v1__trajectory_action_part__init(p);
        p->kind = (char *)ro__space_kind_name(pl->kind);
        p->n = pl->kind == RO_SPACE_DISCRETE ? lay->disc_n[pl->first] : pl->n;
        if (pl->kind == RO_SPACE_MULTI_DISCRETE) {
            memcpy(m->nvec + at, lay->disc_n + pl->first, pl->n * sizeof *m->nvec);
            p->nvec = m->nvec + at;
            p->n_nvec = pl->n;
            at += pl->n;
        } else if (pl->kind == RO_SPACE_BOX) {
            memcpy(m->pshape[i], pl->shape, sizeof m->pshape[i]);
            p->shape = m->pshape[i];
            p->n_shape = pl->ndim;
        }
        m->pp[i] = p;
    }
    l->parts = m->pp;
    l->n_parts = lay->nparts;
    for (uint32_t i = 0; i < lay->nmetrics; i++) {
        snprintf(m->metric[i], sizeof m->metric[i], "%s", lay->metric[i]);
        m->metricp[i] = m->metric[i];
    }
    l->metrics = m->metricp;
    l->n_metrics = lay->nmetrics;
    return 0;
}

void ro__traj_layout_msg_free(ro_traj_layout_msg_t *m)
{
    free(m->nvec);
    m->nvec = NULL;
}

/* ---- checking a header's layout ---- */

/* shape_size: the product of 1..4 extents each >= 1, at most MAX_VALUES;
 * 0 if the shape is not one. */
static uint64_t shape_size(const uint32_t *shape, size_t ndim)
{
    if (ndim < 1 || ndim > RO_SPACE_MAX_DIMS)
        return 0;
    uint64_t n = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > MAX_VALUES)
            return 0;
        n *= shape[i];
        if (n > MAX_VALUES)
            return 0;
    }
    return n;
}

static int check_tensors(const Rollout__V1__TrajectoryLayout *l, ro_traj_rows_t *rows, char *why,
                         size_t whylen)
{
    if (l->n_tensors < 1 || l->n_tensors > RO_ENV_MAX_TENSORS)
        return ro__errorf(why, whylen, RO_EBADMSG, "layout has %zu tensors; expected 1..%d",
                          l->n_tensors, RO_ENV_MAX_TENSORS);
    rows->ntensors = (uint32_t)l->n_tensors;
    for (size_t k = 0; k < l->n_tensors; k++) {
        const Rollout__V1__NamedTensor *t = l->tensors[k];
        if (!t || !ro__space_name_ok(t->name))
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "layout tensors[%zu] has no valid name (1..%d of [A-Za-z0-9_])", k,
                              RO_ENV_MAX_NAME - 1);
        for (size_t j = 0; j < k; j++)
            if (strcmp(l->tensors[j]->name, t->name) == 0)
                return ro__errorf(why, whylen, RO_EBADMSG,
                                  "layout tensors[%zu] ('%s') repeats a name", k, t->name);
        ro_dtype_t d = ro__wire_dtype_to_env(t->dtype);
        if (!d)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "layout tensors[%zu] ('%s') has dtype %d; expected uint8, int32 or "
                              "float32",
                              k, t->name, (int)t->dtype);
        uint64_t size = shape_size(t->shape, t->n_shape);
        if (!size)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "layout tensors[%zu] ('%s') has %zu dims or an extent outside 1..%u "
                              "values",
                              k, t->name, t->n_shape, MAX_VALUES);
        if (t->data.len || t->offset)
            return ro__errorf(why, whylen, RO_EBADMSG, "layout tensors[%zu] ('%s') holds data", k,
                              t->name);
        rows->elem[k] = elem_size(d);
        rows->row_bytes[k] = (size_t)size * rows->elem[k];
        rows->obs_bytes += rows->row_bytes[k];
    }
    return 0;
}

/* check_part adds part i's entries to rows, and its mask bytes to *mask
 * (with deep: nvec is read; without, the header was checked before and only
 * the sizes are derived, in constant time). */
static int check_part(const Rollout__V1__TrajectoryActionPart *p, size_t i, ro_traj_rows_t *rows,
                      uint64_t *mask, bool deep, char *why, size_t whylen)
{
    ro_space_kind_t kind = p ? ro__space_kind_of(p->kind) : (ro_space_kind_t)0;
    if (!kind)
        return ro__errorf(why, whylen, RO_EBADMSG,
                          "layout parts[%zu] has no known kind (discrete, multi_discrete, "
                          "multi_binary, box)",
                          i);
    bool fits = p->n >= 1 && p->n <= (kind == RO_SPACE_DISCRETE ? MAX_VALUES : MAX_ENTRIES);
    if (kind == RO_SPACE_MULTI_DISCRETE)
        fits = fits && p->n_nvec == p->n;
    else if (p->n_nvec)
        fits = false;
    if (kind == RO_SPACE_BOX)
        fits = fits && shape_size(p->shape, p->n_shape) == p->n;
    else if (p->n_shape)
        fits = false;
    if (!fits)
        return ro__errorf(why, whylen, RO_EBADMSG,
                          "layout parts[%zu] (%s) has n %u, %zu nvec and %zu dims: inconsistent "
                          "or out of range",
                          i, p->kind, p->n, p->n_nvec, p->n_shape);
    if (kind == RO_SPACE_BOX) {
        rows->nbox += p->n;
        return 0;
    }
    rows->ndisc += kind == RO_SPACE_DISCRETE ? 1 : p->n;
    if (kind == RO_SPACE_DISCRETE)
        *mask += p->n;
    else if (kind == RO_SPACE_MULTI_BINARY)
        *mask += 2ull * p->n;
    for (size_t e = 0; deep && e < p->n_nvec; e++) {
        if (p->nvec[e] < 1 || p->nvec[e] > MAX_VALUES)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "layout parts[%zu] (multi_discrete) has nvec[%zu] = %u; expected "
                              "1..%u",
                              i, e, p->nvec[e], MAX_VALUES);
        *mask += p->nvec[e];
    }
    return 0;
}

/* derive_rows checks (deep) or only sizes (a checked header) a layout. */
static int derive_rows(const Rollout__V1__TrajectoryLayout *l, ro_traj_rows_t *rows, bool deep,
                       char *why, size_t whylen)
{
    memset(rows, 0, sizeof *rows);
    if (l->agents < 1 || l->agents > RO_ENV_MAX_AGENTS)
        return ro__errorf(why, whylen, RO_EBADMSG, "layout agents %u; expected 1..%d", l->agents,
                          RO_ENV_MAX_AGENTS);
    rows->agents = l->agents;
    int rc = check_tensors(l, rows, why, whylen);
    if (rc)
        return rc;
    if (l->n_parts < 1 || l->n_parts > RO_ENV_MAX_PARTS)
        return ro__errorf(why, whylen, RO_EBADMSG, "layout has %zu action parts; expected 1..%d",
                          l->n_parts, RO_ENV_MAX_PARTS);
    uint64_t mask = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        if ((rc = check_part(l->parts[i], i, rows, &mask, deep, why, whylen)) != 0)
            return rc;
    if (rows->ndisc > MAX_ENTRIES || rows->nbox > MAX_VALUES)
        return ro__errorf(why, whylen, RO_EBADMSG,
                          "layout actions have %u discrete entries and %u box floats; at most %u "
                          "and %u",
                          rows->ndisc, rows->nbox, MAX_ENTRIES, MAX_VALUES);
    if (deep && l->mask_width && (l->mask_width != mask || mask > MAX_ENTRIES))
        return ro__errorf(why, whylen, RO_EBADMSG,
                          "layout mask_width %u; the discrete parts take %llu mask bytes",
                          l->mask_width, (unsigned long long)mask);
    rows->mask_width = l->mask_width;
    if (l->n_metrics > RO_ENV_MAX_METRICS)
        return ro__errorf(why, whylen, RO_EBADMSG, "layout has %zu metrics; at most %d",
                          l->n_metrics, RO_ENV_MAX_METRICS);
    for (size_t i = 0; deep && i < l->n_metrics; i++)
        if (!ro__space_name_ok(l->metrics[i]))
            return ro__errorf(why, whylen, RO_EBADMSG, "layout metrics[%zu] is not a valid name",
                              i);
    return 0;
}

int ro__traj_layout_rows(const Rollout__V1__TrajectoryLayout *l, ro_traj_rows_t *rows, char *why,
                         size_t whylen)
{
    return derive_rows(l, rows, true, why, whylen);
}

/* ---- checking a version 2 record ---- */

static int check_row_tensors(const Rollout__V1__TrajectoryLayout *l, const ro_traj_rows_t *rows,
                             const Rollout__V1__TransitionBatch *b, char *why, size_t whylen)
{
    const size_t n = b->n_env;
    if (b->n_tensors != (n ? rows->ntensors : 0))
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu tensors; the layout has %u", b->n_tensors,
                          rows->ntensors);
    for (size_t k = 0; k < b->n_tensors; k++) {
        const Rollout__V1__NamedTensor *t = b->tensors[k], *lt = l->tensors[k];
        if (!t || !t->name || strcmp(t->name, lt->name) != 0 || t->dtype != lt->dtype)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "tensors[%zu] is not the layout's '%s' (name or dtype)", k, lt->name);
        bool shape = t->n_shape == lt->n_shape + 1 && t->shape[0] == n;
        for (size_t d = 0; shape && d < lt->n_shape; d++)
            shape = t->shape[d + 1] == lt->shape[d];
        if (!shape)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "tensors[%zu] ('%s') has a shape other than [rows, layout shape]", k,
                              lt->name);
        if (t->offset || t->data.len / rows->row_bytes[k] != n ||
            t->data.len % rows->row_bytes[k] != 0)
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "tensors[%zu] ('%s') holds %zu bytes; %zu rows take %zu", k, lt->name,
                              t->data.len, n, n * rows->row_bytes[k]);
    }
    return 0;
}

/* Row k starts an env step (agent 0); its agents follow in order, with its
 * env, episode, step and the flags every agent shares (reset, failed). */
static bool group_ok(const Rollout__V1__TransitionBatch *b, size_t k, uint32_t agents)
{
    const uint32_t shared = 8 | 4; /* RO_TRAJ_RESET | RO_TRAJ_FAILED */
    if (k + agents > b->n_env)
        return false;
    for (uint32_t a = 0; a < agents; a++) {
        size_t r = k + a;
        if (b->agent[r] != a || b->env[r] != b->env[k] || b->episode[r] != b->episode[k] ||
            b->step[r] != b->step[k] || (b->flags[r] & shared) != (b->flags[k] & shared))
            return false;
    }
    return true;
}

int ro__traj_validate_rows(const Rollout__V1__TrajectoryHeader *h,
                           const Rollout__V1__TransitionBatch *b, char *why, size_t whylen)
{
    ro_traj_rows_t rows;
    /* The header was checked when the file was opened: sizes only, in
     * constant time per record whatever the layout's nvec. */
    int rc = derive_rows(h->layout, &rows, false, why, whylen);
    if (rc)
        return rc;
    const size_t n = b->n_env;
    if (b->n_agent != n)
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu agent values for %zu rows", b->n_agent, n);
    if (b->n_obs)
        return ro__errorf(why, whylen, RO_EBADMSG, "float obs in a version 2 record");
    if (b->n_action / (rows.ndisc ? rows.ndisc : 1) != (rows.ndisc ? n : 0) ||
        b->n_action % (rows.ndisc ? rows.ndisc : 1) != 0)
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu discrete action values; %zu rows take %zu",
                          b->n_action, n, n * rows.ndisc);
    if (b->n_action_box / (rows.nbox ? rows.nbox : 1) != (rows.nbox ? n : 0) ||
        b->n_action_box % (rows.nbox ? rows.nbox : 1) != 0)
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu box action values; %zu rows take %zu",
                          b->n_action_box, n, n * rows.nbox);
    if (b->mask.len / (rows.mask_width ? rows.mask_width : 1) != (rows.mask_width ? n : 0) ||
        b->mask.len % (rows.mask_width ? rows.mask_width : 1) != 0)
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu mask bytes; %zu rows take %zu", b->mask.len,
                          n, n * rows.mask_width);
    if ((rc = check_row_tensors(h->layout, &rows, b, why, whylen)) != 0)
        return rc;
    if (n % rows.agents != 0)
        return ro__errorf(why, whylen, RO_EBADMSG, "%zu rows are not whole env steps of %u agents",
                          n, rows.agents);
    for (size_t k = 0; k < n; k += rows.agents)
        if (!group_ok(b, k, rows.agents))
            return ro__errorf(why, whylen, RO_EBADMSG,
                              "rows %zu..%zu are not agents 0..%u of one env step", k,
                              k + rows.agents - 1, rows.agents - 1);
    return 0;
}

/* ---- matching a re-created env ---- */

int ro__traj_layout_matches(const Rollout__V1__TrajectoryLayout *l, const ro_space_layout_t *lay,
                            char *why, size_t whylen)
{
    if (l->agents != lay->agents)
        return ro__errorf(why, whylen, RO_EINVAL, "%u agents, the recording has %u", lay->agents,
                          l->agents);
    if (l->n_tensors != lay->ntensors)
        return ro__errorf(why, whylen, RO_EINVAL, "%u observation tensors, the recording has %zu",
                          lay->ntensors, l->n_tensors);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const Rollout__V1__NamedTensor *t = l->tensors[k];
        const ro_tensor_layout_t *lt = &lay->t[k];
        bool same = strcmp(t->name, lt->name) == 0 && t->dtype == ro__wire_dtype(lt->dtype) &&
                    t->n_shape == lt->ndim;
        for (uint32_t d = 0; same && d < lt->ndim; d++)
            same = t->shape[d] == lt->shape[d];
        if (!same)
            return ro__errorf(why, whylen, RO_EINVAL,
                              "observation tensor %u is '%s' (another name, dtype or shape than "
                              "the recording's '%s')",
                              k, lt->name, t->name);
    }
    if (l->n_parts != lay->nparts)
        return ro__errorf(why, whylen, RO_EINVAL, "%u action parts, the recording has %zu",
                          lay->nparts, l->n_parts);
    ro_traj_layout_msg_t mine;
    if (ro__traj_layout_msg_init(&mine, lay) != 0)
        return ro__errorf(why, whylen, RO_ENOMEM, "out of memory");
    int rc = 0;
    for (uint32_t i = 0; i < lay->nparts && !rc; i++) {
        const Rollout__V1__TrajectoryActionPart *a = l->parts[i], *m = mine.pp[i];
        bool same = strcmp(a->kind, m->kind) == 0 && a->n == m->n && a->n_nvec == m->n_nvec &&
                    a->n_shape == m->n_shape &&
                    (!a->n_nvec || !memcmp(a->nvec, m->nvec, a->n_nvec * sizeof *a->nvec)) &&
                    (!a->n_shape || !memcmp(a->shape, m->shape, a->n_shape * sizeof *a->shape));
        if (!same)
            rc = ro__errorf(why, whylen, RO_EINVAL,
                            "action part %u (%s) differs from the recording's (%s, n %u)", i,
                            m->kind, a->kind, a->n);
    }
    ro__traj_layout_msg_free(&mine);
    if (!rc && l->mask_width != lay->mask_width)
        rc = ro__errorf(why, whylen, RO_EINVAL, "a mask of %u bytes, the recording has %u",
                        lay->mask_width, l->mask_width);
    return rc;
}

/* ---- encoding fields 11 to 13 ---- */

static size_t tensor_size(const Rollout__V1__NamedTensor *t)
{
    size_t s = 0, name = t->name ? strlen(t->name) : 0, sh = 0;
    if (name)
        s += 1 + ro__varint_size(name) + name;
    if (t->dtype)
        s += 1 + ro__varint_size((uint64_t)(int64_t)t->dtype);
    for (size_t i = 0; i < t->n_shape; i++)
        sh += ro__varint_size(t->shape[i]);
    if (sh)
        s += 1 + ro__varint_size(sh) + sh;
    if (t->data.len)
        s += 1 + ro__varint_size(t->data.len) + t->data.len;
    if (t->offset)
        s += 1 + ro__varint_size(t->offset);
    return s;
}

static size_t agents_size(const Rollout__V1__TransitionBatch *b)
{
    size_t s = 0;
    for (size_t i = 0; i < b->n_agent; i++)
        s += ro__varint_size(b->agent[i]);
    return s;
}

size_t ro__traj_packed_rows_size(const Rollout__V1__TransitionBatch *b)
{
    size_t s = 0, a = agents_size(b);
    if (a)
        s += 1 + ro__varint_size(a) + a;
    for (size_t k = 0; k < b->n_tensors; k++) {
        size_t t = tensor_size(b->tensors[k]);
        s += 1 + ro__varint_size(t) + t;
    }
    if (b->mask.len)
        s += 1 + ro__varint_size(b->mask.len) + b->mask.len;
    return s;
}

/* A length-delimited field: tag, length, then the caller's body. */
static uint8_t *put_len(uint8_t *p, uint32_t field, size_t len)
{
    *p++ = (uint8_t)(field << 3 | 2);
    return p + ro__varint_put(p, len);
}

static uint8_t *put_tensor(uint8_t *p, const Rollout__V1__NamedTensor *t)
{
    size_t name = t->name ? strlen(t->name) : 0, sh = 0;
    p = put_len(p, 12, tensor_size(t));
    if (name) {
        p = put_len(p, 1, name);
        memcpy(p, t->name, name);
        p += name;
    }
    if (t->dtype) {
        *p++ = 2 << 3;
        p += ro__varint_put(p, (uint64_t)(int64_t)t->dtype);
    }
    for (size_t i = 0; i < t->n_shape; i++)
        sh += ro__varint_size(t->shape[i]);
    if (sh) {
        p = put_len(p, 3, sh);
        for (size_t i = 0; i < t->n_shape; i++)
            p += ro__varint_put(p, t->shape[i]);
    }
    if (t->data.len) {
        p = put_len(p, 4, t->data.len);
        memcpy(p, t->data.data, t->data.len);
        p += t->data.len;
    }
    if (t->offset) {
        *p++ = 5 << 3;
        p += ro__varint_put(p, t->offset);
    }
    return p;
}

size_t ro__traj_pack_rows(const Rollout__V1__TransitionBatch *b, uint8_t *out)
{
    uint8_t *p = out;
    size_t a = agents_size(b);
    if (a) {
        p = put_len(p, 11, a);
        for (size_t i = 0; i < b->n_agent; i++)
            p += ro__varint_put(p, b->agent[i]);
    }
    for (size_t k = 0; k < b->n_tensors; k++)
        p = put_tensor(p, b->tensors[k]);
    if (b->mask.len) {
        p = put_len(p, 13, b->mask.len);
        memcpy(p, b->mask.data, b->mask.len);
        p += b->mask.len;
    }
    return (size_t)(p - out);
}
