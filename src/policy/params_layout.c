/*
 * The PolicyLayout of format-2 weights files (params_layout.h): written
 * from an env's layout, checked on its own when a file or a push is
 * decoded, and checked against the env's layout when a policy is built.
 */
#include "policy/params_layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/pb_alloc.h"
#include "rollout.pb-c.h"

/* part_label is the env-facing name of a part's kind, for messages. */
static const char *part_label(ro_space_kind_t k)
{
    return k == RO_SPACE_MULTI_DISCRETE ? "MultiDiscrete"
           : k == RO_SPACE_MULTI_BINARY ? "MultiBinary"
           : k == RO_SPACE_BOX          ? "Box"
                                        : "Discrete";
}

/* divisor is what a flattened value of dtype d is divided by. */
static float divisor(ro_dtype_t d)
{
    return d == RO_DTYPE_UINT8 ? 255.0f : 1.0f;
}

int ro__policy_layout_pack(const ro_space_layout_t *lay, uint8_t **buf, size_t *len)
{
    Rollout__V1__PolicyLayout m;
    rollout__v1__policy_layout__init(&m);
    Rollout__V1__PolicyInput in[RO_ENV_MAX_TENSORS], *inp[RO_ENV_MAX_TENSORS];
    char *parts[RO_ENV_MAX_PARTS];
    const size_t nheads = (size_t)lay->ndisc + lay->nbox;
    Rollout__V1__PolicyHead *heads = calloc(nheads + 1, sizeof *heads);
    Rollout__V1__PolicyHead **hp = calloc(nheads + 1, sizeof *hp);
    int rc = heads && hp ? 0 : RO_ENOMEM;
    for (uint32_t k = 0; rc == 0 && k < lay->ntensors; k++) {
        const ro_tensor_layout_t *t = &lay->t[k];
        rollout__v1__policy_input__init(&in[k]);
        in[k].name = (char *)t->name;
        in[k].dtype = (char *)ro__dtype_name(t->dtype);
        in[k].n_shape = t->ndim;
        in[k].shape = (uint32_t *)t->shape;
        in[k].divide_by = divisor(t->dtype);
        in[k].offset = t->flat_off;
        inp[k] = &in[k];
    }
    size_t h = 0;
    for (uint32_t i = 0; rc == 0 && i < lay->nparts; i++) {
        const ro_part_layout_t *part = &lay->part[i];
        parts[i] = (char *)ro__space_kind_name(part->kind);
        for (uint32_t e = part->first; e < part->first + part->n; e++, h++) {
            const bool box = part->kind == RO_SPACE_BOX;
            rollout__v1__policy_head__init(&heads[h]);
            heads[h].kind = box ? (char *)"gaussian" : (char *)"categorical";
            heads[h].part = i;
            heads[h].offset = box ? lay->box_head[e] : lay->disc_head[e];
            heads[h].width = box ? 1 : lay->disc_n[e];
            hp[h] = &heads[h];
        }
    }
    m.n_inputs = lay->ntensors;
    m.inputs = inp;
    m.n_parts = lay->nparts;
    m.parts = parts;
    m.n_heads = h;
    m.heads = hp;
    m.mask_width = lay->mask_width;
    if (rc == 0) {
        *len = rollout__v1__policy_layout__get_packed_size(&m);
        *buf = malloc(*len ? *len : 1);
        if (*buf)
            rollout__v1__policy_layout__pack(&m, *buf);
        else
            rc = RO_ENOMEM;
    }
    free(heads);
    free(hp);
    return rc;
}

/* unpack decodes p's layout through a (bounded) allocator a. */
static int unpack(Rollout__V1__PolicyLayout **out, ro_pb_alloc_t *a, const ro_params_view_t *p,
                  const char *name, char *err, size_t errlen)
{
    if (p->layout_len > RO_POLICY_LAYOUT_MAX)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: layout is %zu bytes; at most %zu", name,
                          p->layout_len, RO_POLICY_LAYOUT_MAX);
    /* A head is a few bytes packed and a 48-byte struct unpacked. */
    *out = (Rollout__V1__PolicyLayout *)ro__pb_unpack(
        a, 32 * p->layout_len + (64u << 10), &rollout__v1__policy_layout__descriptor, p->layout,
        p->layout_len, name, "layout", err, errlen);
    return *out ? 0 : RO_EBADMSG;
}

/* validate_inputs: the inputs tile [0, obs_dim) in order. */
static int validate_inputs(const ro_params_view_t *p, const Rollout__V1__PolicyLayout *m,
                           const char *name, char *err, size_t errlen)
{
    if (m->n_inputs < 1 || m->n_inputs > RO_ENV_MAX_TENSORS)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout.inputs has %zu tensors; expected 1..%d", name, m->n_inputs,
                          RO_ENV_MAX_TENSORS);
    uint64_t at = 0;
    for (size_t k = 0; k < m->n_inputs; k++) {
        const Rollout__V1__PolicyInput *in = m->inputs[k];
        const char *dt = in->dtype ? in->dtype : "";
        const float want = strcmp(dt, "uint8") == 0 ? 255.0f : 1.0f;
        if (strcmp(dt, "uint8") && strcmp(dt, "int32") && strcmp(dt, "float32"))
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.inputs[%zu].dtype is not uint8, int32 or float32", name,
                              k);
        if (!in->name || !in->name[0] || strlen(in->name) >= RO_ENV_MAX_NAME)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.inputs[%zu].name must be 1..%d characters", name, k,
                              RO_ENV_MAX_NAME - 1);
        if (in->n_shape > RO_SPACE_MAX_DIMS)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.inputs[%zu].shape has %zu dimensions; at most %d", name,
                              k, in->n_shape, RO_SPACE_MAX_DIMS);
        if (in->divide_by != want)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.inputs[%zu].divide_by is %g; a %s input is divided by %g",
                              name, k, (double)in->divide_by, dt, (double)want);
        uint64_t size = 1;
        for (size_t d = 0; d < in->n_shape; d++)
            size =
                size * in->shape[d] <= p->obs_dim ? size * in->shape[d] : (uint64_t)p->obs_dim + 1;
        if (in->offset != at || size == 0 || at + size > p->obs_dim)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.inputs[%zu] does not follow the previous input inside "
                              "obs_dim %u (offset %u)",
                              name, k, p->obs_dim, in->offset);
        at += size;
    }
    if (at != p->obs_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout.inputs cover %llu floats but obs_dim is %u", name,
                          (unsigned long long)at, p->obs_dim);
    return 0;
}

/* validate_heads: the heads tile [0, action_dim) in part order, each of
 * its part's kind; the Gaussian ones are nlog_std; the mask is bounded. */
static int validate_heads(const ro_params_view_t *p, const Rollout__V1__PolicyLayout *m,
                          const char *name, char *err, size_t errlen)
{
    if (m->n_parts < 1 || m->n_parts > RO_ENV_MAX_PARTS)
        return ro__errorf(err, errlen, RO_EBADMSG, "%s: layout.parts has %zu parts; expected 1..%d",
                          name, m->n_parts, RO_ENV_MAX_PARTS);
    for (size_t i = 0; i < m->n_parts; i++)
        if (!ro__space_kind_of(m->parts[i]))
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.parts[%zu] is not discrete, multi_discrete, "
                              "multi_binary or box",
                              name, i);
    if (m->n_heads < 1 || m->n_heads > p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout.heads has %zu heads; expected 1..%u (action_dim)", name,
                          m->n_heads, p->action_dim);
    uint64_t at = 0;
    uint32_t part = 0, gauss = 0;
    for (size_t h = 0; h < m->n_heads; h++) {
        const Rollout__V1__PolicyHead *hd = m->heads[h];
        const bool g = hd->kind && strcmp(hd->kind, "gaussian") == 0;
        if (!g && (!hd->kind || strcmp(hd->kind, "categorical")))
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.heads[%zu].kind is not categorical or gaussian", name, h);
        if (hd->part < part || hd->part >= m->n_parts)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.heads[%zu].part is %u; expected %u..%zu in order", name,
                              h, hd->part, part, m->n_parts - 1);
        part = hd->part;
        if (g != (ro__space_kind_of(m->parts[part]) == RO_SPACE_BOX))
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.heads[%zu] is %s but part %u is %s", name, h, hd->kind,
                              part, m->parts[part]);
        if (hd->width < 1 || (g && hd->width != 1) || hd->offset != at ||
            at + hd->width > p->action_dim)
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "%s: layout.heads[%zu] (offset %u, width %u) does not follow the "
                              "previous head inside action_dim %u",
                              name, h, hd->offset, hd->width, p->action_dim);
        at += hd->width;
        gauss += g;
    }
    if (at != p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout.heads cover %llu outputs but action_dim is %u", name,
                          (unsigned long long)at, p->action_dim);
    if (p->composite && gauss != p->nlog_std)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: log_std has %u values but layout.heads has %u Gaussian heads", name,
                          p->nlog_std, gauss);
    if (m->mask_width > RO_LAYOUT_MAX_ENTRIES * 2u + p->action_dim)
        return ro__errorf(err, errlen, RO_EBADMSG,
                          "%s: layout.mask_width is %u, over the head's %u", name, m->mask_width,
                          p->action_dim);
    return 0;
}

/* shape_str writes "[84,84]" into buf. */
static const char *shape_str(const uint32_t *shape, size_t n, char *buf, size_t len)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < n && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ",%u" : "%u", shape[i]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
    return buf;
}

/* check_inputs compares the file's inputs with the env's tensors. */
static int check_inputs(const Rollout__V1__PolicyLayout *m, const ro_space_layout_t *lay,
                        const char *name, char *err, size_t errlen)
{
    char a[64], b[64];
    if (m->n_inputs != lay->ntensors)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: layout.inputs has %zu tensors but the env has %u", name, m->n_inputs,
                          lay->ntensors);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const Rollout__V1__PolicyInput *in = m->inputs[k];
        const ro_tensor_layout_t *t = &lay->t[k];
        if (strcmp(in->name, t->name))
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: input %u is '%s' but the env's tensor %u is '%s'", name, k,
                              in->name, k, t->name);
        if (strcmp(in->dtype, ro__dtype_name(t->dtype)))
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: input %u ('%s') is %s but the env's is %s", name, k, t->name,
                              in->dtype, ro__dtype_name(t->dtype));
        if (in->n_shape != t->ndim || memcmp(in->shape, t->shape, t->ndim * sizeof(uint32_t)))
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: input %u ('%s') has shape %s but the env's is %s", name, k,
                              t->name, shape_str(in->shape, in->n_shape, a, sizeof a),
                              shape_str(t->shape, t->ndim, b, sizeof b));
    }
    return 0;
}

/* check_actions compares the file's parts and heads with the env's. */
static int check_actions(const Rollout__V1__PolicyLayout *m, const ro_space_layout_t *lay,
                         const char *name, char *err, size_t errlen)
{
    if (m->n_parts != lay->nparts)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: layout.parts has %zu action parts but the env's action has %u", name,
                          m->n_parts, lay->nparts);
    size_t h = 0;
    for (uint32_t i = 0; i < lay->nparts; i++) {
        const ro_part_layout_t *part = &lay->part[i];
        if (ro__space_kind_of(m->parts[i]) != part->kind)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s: action part %u is %s but the env's is %s", name, i, m->parts[i],
                              ro__space_kind_name(part->kind));
        for (uint32_t e = 0; e < part->n; e++, h++) {
            if (h >= m->n_heads || m->heads[h]->part != i)
                return ro__errorf(err, errlen, RO_EINVAL,
                                  "%s: action part %u (%s) has fewer heads than the env's %u "
                                  "%s",
                                  name, i, part_label(part->kind), part->n,
                                  part->kind == RO_SPACE_BOX ? "floats" : "entries");
            const uint32_t want = part->kind == RO_SPACE_BOX ? 1 : lay->disc_n[part->first + e];
            if (m->heads[h]->width != want)
                return ro__errorf(err, errlen, RO_EINVAL,
                                  "%s: head %zu has %u logits, the env's %s entry %u (part %u) "
                                  "has %u values",
                                  name, h, m->heads[h]->width, part_label(part->kind), e, i, want);
        }
    }
    if (h != m->n_heads)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: layout.heads has %zu heads but the env's action has %zu", name,
                          m->n_heads, h);
    if (m->mask_width != lay->mask_width)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: layout.mask_width is %u but the env's action mask has %u bytes",
                          name, m->mask_width, lay->mask_width);
    return 0;
}

/* examine unpacks p's layout and checks it: on its own (lay NULL), or
 * against the env's layout lay. */
static int examine(const ro_params_view_t *p, const ro_space_layout_t *lay, const char *name,
                   char *err, size_t errlen)
{
    Rollout__V1__PolicyLayout *m = NULL;
    ro_pb_alloc_t a;
    int rc = unpack(&m, &a, p, name, err, errlen);
    if (rc == 0)
        rc = lay ? check_inputs(m, lay, name, err, errlen)
                 : validate_inputs(p, m, name, err, errlen);
    if (rc == 0)
        rc = lay ? check_actions(m, lay, name, err, errlen)
                 : validate_heads(p, m, name, err, errlen);
    if (m)
        rollout__v1__policy_layout__free_unpacked(m, &a.base);
    return rc;
}

int ro__policy_layout_validate(ro_params_view_t v, const char *name, char *err, size_t errlen)
{
    return examine(&v, NULL, name, err, errlen);
}

int ro__policy_layout_check(ro_params_view_t v, const ro_space_layout_t *lay, const char *name,
                            char *err, size_t errlen)
{
    const ro_params_view_t *p = &v;
    const bool env_composite = !lay->simple_act;
    if (p->composite && !env_composite)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_kind is \"composite\" but the env's action is one "
                          "unmasked Discrete or Box",
                          name);
    if (!p->composite && env_composite)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_kind is one plain head (format %d) but the env's action is "
                          "composite (MultiDiscrete, MultiBinary, a Tuple or masked)",
                          name, p->layout ? 2 : 1);
    if (p->obs_dim != lay->obs_width)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: obs_dim is %u but the env's flattened row has %u floats", name,
                          p->obs_dim, lay->obs_width);
    if (p->composite && p->action_dim != lay->head_width)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s: action_dim is %u but the env's action needs %u head outputs", name,
                          p->action_dim, lay->head_width);
    if (!p->layout)
        return 0; /* format 1: obs_dim and the head were all it recorded */
    return examine(p, lay, name, err, errlen);
}
