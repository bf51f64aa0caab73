/*
 * Building and reading the layout of an env's spaces (layout.h): the
 * checks of an ABI 2 env's spaces, the ABI 1 shim, the flattening of
 * observation rows and the mask check.
 */
#include "spaces/layout.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* fail writes "env 'name': ..." into err and returns RO_EINVAL. */
__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen,
                                                      const char *env_name, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "env '%s': ", env_name);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return RO_EINVAL;
}

const char *ro__dtype_name(ro_dtype_t d)
{
    static const char *const names[] = {
        [RO_DTYPE_UINT8] = "uint8", [RO_DTYPE_INT32] = "int32", [RO_DTYPE_FLOAT32] = "float32"};
    return (unsigned)d < sizeof names / sizeof names[0] && names[d] ? names[d] : "?";
}

/* The part kinds, in the order of their values. */
static const ro_space_kind_t part_kinds[] = {RO_SPACE_DISCRETE, RO_SPACE_MULTI_DISCRETE,
                                             RO_SPACE_MULTI_BINARY, RO_SPACE_BOX};

const char *ro__space_kind_name(ro_space_kind_t k)
{
    switch (k) {
    case RO_SPACE_DISCRETE:
        return "discrete";
    case RO_SPACE_MULTI_DISCRETE:
        return "multi_discrete";
    case RO_SPACE_MULTI_BINARY:
        return "multi_binary";
    case RO_SPACE_BOX:
        return "box";
    }
    return NULL;
}

ro_space_kind_t ro__space_kind_of(const char *name)
{
    for (size_t i = 0; name && i < sizeof part_kinds / sizeof part_kinds[0]; i++)
        if (strcmp(name, ro__space_kind_name(part_kinds[i])) == 0)
            return part_kinds[i];
    return (ro_space_kind_t)0;
}

bool ro__space_name_ok(const char *s)
{
    if (!s || !s[0])
        return false;
    size_t i = 0;
    for (; s[i]; i++) {
        char c = s[i];
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok || i + 1 >= RO_ENV_MAX_NAME)
            return false;
    }
    return true;
}

/* check_shape: 1..RO_SPACE_MAX_DIMS dims, each >= 1, at most
 * RO_LAYOUT_MAX_VALUES in all; *size gets the product. */
static int check_shape(uint32_t ndim, const uint32_t *shape, const char *what, const char *env,
                       uint32_t *size, char *err, size_t errlen)
{
    if (ndim < 1 || ndim > RO_SPACE_MAX_DIMS)
        return fail(err, errlen, env, "%s has %u dims; expected 1..%d", what, ndim,
                    RO_SPACE_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 1 || n * shape[d] > RO_LAYOUT_MAX_VALUES)
            return fail(err, errlen, env,
                        "%s has shape[%u] = %u; expected at least 1 and at most %u values in all",
                        what, d, shape[d], RO_LAYOUT_MAX_VALUES);
        n *= shape[d];
    }
    *size = (uint32_t)n;
    return 0;
}

/* check_bounds: low <= high everywhere (no NaN); both or neither given
 * unless both are required. */
static int check_bounds(const float *low, const float *high, uint32_t size, bool required,
                        const char *what, const char *env, char *err, size_t errlen)
{
    if (!low != !high || (required && !low))
        return fail(err, errlen, env, "%s's %s bounds are NULL%s", what, !low ? "low" : "high",
                    required ? "" : " (give both or neither)");
    for (uint32_t i = 0; low && i < size; i++)
        if (!(low[i] <= high[i])) /* also NaN */
            return fail(err, errlen, env, "%s's bounds [%g, %g] at %u are not a range", what,
                        (double)low[i], (double)high[i], i);
    return 0;
}

/* copy_bounds allocates [2 x size] floats: the given bounds, or fill. */
static int copy_bounds(float **low, float **high, const float *lo, const float *hi, uint32_t size,
                       float fill_lo, float fill_hi)
{
    *low = malloc(2 * (size_t)size * sizeof(float));
    if (!*low)
        return RO_ENOMEM;
    *high = *low + size;
    for (uint32_t i = 0; i < size; i++) {
        (*low)[i] = lo ? lo[i] : fill_lo;
        (*high)[i] = hi ? hi[i] : fill_hi;
    }
    return 0;
}

static int add_tensor(ro_space_layout_t *lay, uint32_t k, const ro_tensor_space_t *ts,
                      const char *env, char *err, size_t errlen)
{
    char what[64];
    snprintf(what, sizeof what, "obs[%u]", k);
    if (!ro__space_name_ok(ts->name))
        return fail(err, errlen, env,
                    "%s has name %s%s%s; expected 1..%d characters of [A-Za-z0-9_]", what,
                    ts->name ? "'" : "", ts->name ? ts->name : "NULL", ts->name ? "'" : "",
                    RO_ENV_MAX_NAME - 1);
    snprintf(what, sizeof what, "obs[%u] ('%s')", k, ts->name);
    for (uint32_t j = 0; j < k; j++)
        if (strcmp(lay->t[j].name, ts->name) == 0)
            return fail(err, errlen, env, "%s has the name of obs[%u]", what, j);
    if (ts->dtype != RO_DTYPE_UINT8 && ts->dtype != RO_DTYPE_INT32 && ts->dtype != RO_DTYPE_FLOAT32)
        return fail(err, errlen, env,
                    "%s has dtype %d; expected uint8 (1), int32 (2) or float32 (3)", what,
                    (int)ts->dtype);
    ro_tensor_layout_t *t = &lay->t[k];
    int rc = check_shape(ts->ndim, ts->shape, what, env, &t->size, err, errlen);
    if (rc == 0)
        rc = check_bounds(ts->low, ts->high, t->size, false, what, env, err, errlen);
    if (rc)
        return rc;
    snprintf(t->name, sizeof t->name, "%s", ts->name);
    t->dtype = ts->dtype;
    t->ndim = ts->ndim;
    memcpy(t->shape, ts->shape, sizeof t->shape);
    t->elem = ts->dtype == RO_DTYPE_UINT8 ? 1 : 4;
    t->row_bytes = (size_t)t->size * t->elem;
    t->flat_off = lay->obs_width;
    if ((uint64_t)lay->obs_width + t->size > RO_LAYOUT_MAX_VALUES)
        return fail(err, errlen, env, "the observation tensors hold more than %u values in all",
                    RO_LAYOUT_MAX_VALUES);
    lay->obs_width += t->size;
    lay->obs_bytes += t->row_bytes;
    bool u8 = ts->dtype == RO_DTYPE_UINT8;
    if (copy_bounds(&t->low, &t->high, ts->low, ts->high, t->size, u8 ? 0.0f : -INFINITY,
                    u8 ? 255.0f : INFINITY))
        return RO_ENOMEM;
    return 0;
}

/* check_part validates action part i and counts what it adds to a row. */
static int check_part(const ro_action_part_t *a, uint32_t i, const char *env, uint32_t *ndisc,
                      uint32_t *nbox, uint32_t *nmask, char *err, size_t errlen)
{
    char what[48];
    snprintf(what, sizeof what, "act[%u]", i);
    switch (a->kind) {
    case RO_SPACE_DISCRETE:
        if (a->n < 1 || a->n > RO_LAYOUT_MAX_VALUES)
            return fail(err, errlen, env, "%s (Discrete) has n = %u; expected 1..%u", what, a->n,
                        RO_LAYOUT_MAX_VALUES);
        *ndisc += 1;
        *nmask += a->n;
        return 0;
    case RO_SPACE_MULTI_DISCRETE:
    case RO_SPACE_MULTI_BINARY: {
        const char *k = a->kind == RO_SPACE_MULTI_BINARY ? "MultiBinary" : "MultiDiscrete";
        if (a->n < 1 || a->n > RO_LAYOUT_MAX_ENTRIES)
            return fail(err, errlen, env, "%s (%s) has n = %u entries; expected 1..%u", what, k,
                        a->n, RO_LAYOUT_MAX_ENTRIES);
        if (a->kind == RO_SPACE_MULTI_DISCRETE && !a->nvec)
            return fail(err, errlen, env, "%s (MultiDiscrete) has nvec NULL", what);
        for (uint32_t j = 0; a->kind == RO_SPACE_MULTI_DISCRETE && j < a->n; j++)
            if (a->nvec[j] < 1 || a->nvec[j] > RO_LAYOUT_MAX_VALUES)
                return fail(err, errlen, env,
                            "%s (MultiDiscrete) has nvec[%u] = %u; expected 1..%u", what, j,
                            a->nvec[j], RO_LAYOUT_MAX_VALUES);
        *ndisc += a->n;
        for (uint32_t j = 0; j < a->n; j++)
            *nmask += a->kind == RO_SPACE_MULTI_BINARY ? 2 : a->nvec[j];
        return 0;
    }
    case RO_SPACE_BOX: {
        uint32_t size = 0;
        int rc = check_shape(a->ndim, a->shape, what, env, &size, err, errlen);
        if (rc == 0)
            rc = check_bounds(a->low, a->high, size, true, what, env, err, errlen);
        *nbox += size;
        return rc;
    }
    }
    return fail(err, errlen, env,
                "%s has kind %d; expected Discrete (1), Box (2), MultiDiscrete (3) or "
                "MultiBinary (4)",
                what, (int)a->kind);
}

/* build_parts fills the per-entry arrays from parts already checked. */
static int build_parts(ro_space_layout_t *lay, const ro_env_spaces_t *sp)
{
    lay->disc_n = calloc(3 * (size_t)lay->ndisc + 1, sizeof(uint32_t));
    lay->box_head = calloc((size_t)lay->nbox + 1, sizeof(uint32_t));
    lay->box_low = calloc(2 * (size_t)lay->nbox + 1, sizeof(float));
    if (!lay->disc_n || !lay->box_head || !lay->box_low)
        return RO_ENOMEM;
    lay->disc_head = lay->disc_n + lay->ndisc;
    lay->disc_mask = lay->disc_head + lay->ndisc;
    lay->box_high = lay->box_low + lay->nbox;
    uint32_t d = 0, b = 0, head = 0, mask = 0;
    for (uint32_t i = 0; i < lay->nparts; i++) {
        const ro_action_part_t *a = &sp->act[i];
        ro_part_layout_t *p = &lay->part[i];
        p->kind = a->kind;
        p->head_off = head;
        if (a->kind == RO_SPACE_BOX) {
            p->ndim = a->ndim;
            memcpy(p->shape, a->shape, sizeof p->shape);
            p->n = 1;
            for (uint32_t k = 0; k < a->ndim; k++)
                p->n *= a->shape[k];
            p->first = b;
            for (uint32_t k = 0; k < p->n; k++, b++) {
                lay->box_head[b] = head++;
                lay->box_low[b] = a->low[k];
                lay->box_high[b] = a->high[k];
            }
            continue;
        }
        p->n = a->kind == RO_SPACE_DISCRETE ? 1 : a->n;
        p->first = d;
        for (uint32_t k = 0; k < p->n; k++, d++) {
            uint32_t n = a->kind == RO_SPACE_DISCRETE       ? a->n
                         : a->kind == RO_SPACE_MULTI_BINARY ? 2
                                                            : a->nvec[k];
            lay->disc_n[d] = n;
            lay->disc_head[d] = head;
            lay->disc_mask[d] = mask;
            head += n;
            mask += n;
        }
    }
    lay->head_width = head;
    return 0;
}

int ro__layout_from_spaces(ro_space_layout_t *lay, const ro_env_spaces_t *sp, const char *env_name,
                           char *err, size_t errlen)
{
    memset(lay, 0, sizeof *lay);
    const char *env = env_name ? env_name : "?";
    lay->agents = sp->num_agents ? sp->num_agents : 1;
    if (lay->agents > RO_ENV_MAX_AGENTS)
        return fail(err, errlen, env, "num_agents is %u; expected 1..%d", sp->num_agents,
                    RO_ENV_MAX_AGENTS);
    if (sp->num_obs < 1 || sp->num_obs > RO_ENV_MAX_TENSORS)
        return fail(err, errlen, env, "num_obs is %u; expected 1..%d observation tensors",
                    sp->num_obs, RO_ENV_MAX_TENSORS);
    if (sp->num_parts < 1 || sp->num_parts > RO_ENV_MAX_PARTS)
        return fail(err, errlen, env, "num_parts is %u; expected 1..%d action parts", sp->num_parts,
                    RO_ENV_MAX_PARTS);
    if (sp->action_mask > 1)
        return fail(err, errlen, env, "action_mask is %u; expected 0 or 1", sp->action_mask);
    int rc = 0;
    lay->ntensors = sp->num_obs;
    for (uint32_t k = 0; k < sp->num_obs && rc == 0; k++)
        rc = add_tensor(lay, k, &sp->obs[k], env, err, errlen);
    uint32_t nmask = 0;
    for (uint32_t i = 0; i < sp->num_parts && rc == 0; i++)
        rc = check_part(&sp->act[i], i, env, &lay->ndisc, &lay->nbox, &nmask, err, errlen);
    if (rc == 0 && (lay->ndisc > RO_LAYOUT_MAX_ENTRIES || nmask > RO_LAYOUT_MAX_VALUES ||
                    lay->nbox > RO_LAYOUT_MAX_VALUES))
        rc = fail(err, errlen, env,
                  "the action has %u discrete entries, %u discrete values and %u box floats; "
                  "expected at most %u, %u and %u",
                  lay->ndisc, nmask, lay->nbox, RO_LAYOUT_MAX_ENTRIES, RO_LAYOUT_MAX_VALUES,
                  RO_LAYOUT_MAX_VALUES);
    if (rc == 0 && sp->action_mask && lay->ndisc == 0)
        rc = fail(err, errlen, env, "action_mask is 1 but no action part is discrete");
    lay->nparts = sp->num_parts;
    if (rc == 0 && (rc = build_parts(lay, sp)) == RO_ENOMEM)
        fail(err, errlen, env, "out of memory for the layout of its spaces");
    if (rc) {
        ro__layout_free(lay);
        return rc;
    }
    lay->mask_width = sp->action_mask ? nmask : 0;
    lay->plain_obs = lay->ntensors == 1 && lay->t[0].dtype == RO_DTYPE_FLOAT32;
    lay->simple_act = lay->nparts == 1 && !lay->mask_width &&
                      (lay->part[0].kind == RO_SPACE_DISCRETE || lay->part[0].kind == RO_SPACE_BOX);
    lay->abi1 = lay->plain_obs && lay->agents == 1 && lay->simple_act;
    return 0;
}

int ro__layout_from_abi1(ro_space_layout_t *lay, const ro_space_t *obs, const ro_space_t *act,
                         const char *env_name, char *err, size_t errlen)
{
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = 1;
    sp.num_obs = 1;
    sp.obs[0] = (ro_tensor_space_t){.name = "obs",
                                    .dtype = RO_DTYPE_FLOAT32,
                                    .ndim = obs->ndim,
                                    .low = obs->low,
                                    .high = obs->high};
    memcpy(sp.obs[0].shape, obs->shape, sizeof obs->shape);
    sp.num_parts = 1;
    sp.act[0] = (ro_action_part_t){
        .kind = act->kind, .n = act->n, .ndim = act->ndim, .low = act->low, .high = act->high};
    memcpy(sp.act[0].shape, act->shape, sizeof act->shape);
    return ro__layout_from_spaces(lay, &sp, env_name, err, errlen);
}

int ro__layout_set_metrics(ro_space_layout_t *lay, const char *const *names, const char *env_name,
                           char *err, size_t errlen)
{
    lay->nmetrics = 0;
    for (uint32_t i = 0; names && names[i]; i++) {
        if (i >= RO_ENV_MAX_METRICS)
            return fail(err, errlen, env_name, "metric_names lists more than %d metrics",
                        RO_ENV_MAX_METRICS);
        if (!ro__space_name_ok(names[i]))
            return fail(err, errlen, env_name,
                        "metric_names[%u] is '%s'; expected 1..%d characters of [A-Za-z0-9_]", i,
                        names[i], RO_ENV_MAX_NAME - 1);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(lay->metric[j], names[i]) == 0)
                return fail(err, errlen, env_name, "metric_names[%u] ('%s') is listed twice", i,
                            names[i]);
        snprintf(lay->metric[i], sizeof lay->metric[i], "%s", names[i]);
        lay->nmetrics = i + 1;
    }
    return 0;
}

void ro__layout_free(ro_space_layout_t *lay)
{
    for (uint32_t k = 0; k < RO_ENV_MAX_TENSORS; k++)
        free(lay->t[k].low); /* high lives in the same block */
    free(lay->disc_n);
    free(lay->box_head);
    free(lay->box_low);
    memset(lay, 0, sizeof *lay);
}

bool ro__layout_abi1_view(const ro_space_layout_t *lay, ro_space_t *obs, ro_space_t *act)
{
    if (!lay->abi1)
        return false;
    const ro_tensor_layout_t *t = &lay->t[0];
    *obs = (ro_space_t){.kind = RO_SPACE_BOX, .ndim = t->ndim, .low = t->low, .high = t->high};
    memcpy(obs->shape, t->shape, sizeof obs->shape);
    const ro_part_layout_t *p = &lay->part[0];
    if (p->kind == RO_SPACE_DISCRETE) {
        *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = lay->disc_n[0]};
        return true;
    }
    *act = (ro_space_t){
        .kind = RO_SPACE_BOX, .ndim = p->ndim, .low = lay->box_low, .high = lay->box_high};
    memcpy(act->shape, p->shape, sizeof act->shape);
    return true;
}

/* has_dtype: some observation tensor of lay is of dtype d. */
static bool has_dtype(const ro_space_layout_t *lay, ro_dtype_t d)
{
    for (uint32_t k = 0; k < lay->ntensors; k++)
        if (lay->t[k].dtype == d)
            return true;
    return false;
}

/* has_kind: some action part of lay is of kind k. */
static bool has_kind(const ro_space_layout_t *lay, ro_space_kind_t k)
{
    for (uint32_t i = 0; i < lay->nparts; i++)
        if (lay->part[i].kind == k)
            return true;
    return false;
}

void ro__layout_abi2_features(const ro_space_layout_t *lay, char *buf, size_t len)
{
    const char *item[8];
    char agents[32], tensors[40];
    int n = 0;
    if (lay->agents > 1) {
        snprintf(agents, sizeof agents, "%u agents", lay->agents);
        item[n++] = agents;
    }
    if (lay->ntensors > 1) {
        snprintf(tensors, sizeof tensors, "%u observation tensors", lay->ntensors);
        item[n++] = tensors;
    }
    if (has_dtype(lay, RO_DTYPE_UINT8))
        item[n++] = "uint8 observations";
    if (has_dtype(lay, RO_DTYPE_INT32))
        item[n++] = "int32 observations";
    if (lay->nparts > 1)
        item[n++] = "a Tuple action";
    if (has_kind(lay, RO_SPACE_MULTI_DISCRETE))
        item[n++] = "a MultiDiscrete action";
    if (has_kind(lay, RO_SPACE_MULTI_BINARY))
        item[n++] = "a MultiBinary action";
    if (lay->mask_width)
        item[n++] = "an action mask";
    size_t pos = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < n && pos < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " and " : ", ";
        int w = snprintf(buf + pos, len - pos, "%s%s", sep, item[i]);
        pos = w < 0 ? len : pos + (size_t)w;
    }
}

void ro__layout_flatten(const ro_space_layout_t *lay, const uint8_t *const *tensors, uint32_t nrows,
                        float *out)
{
    const size_t w = lay->obs_width;
    if (lay->ntensors == 1 && lay->t[0].dtype == RO_DTYPE_FLOAT32) { /* rows already flat */
        memcpy(out, tensors[0], (size_t)nrows * lay->t[0].row_bytes);
        return;
    }
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const ro_tensor_layout_t *t = &lay->t[k];
        const uint8_t *src = tensors[k];
        float *dst = out + t->flat_off;
        for (uint32_t r = 0; r < nrows; r++, dst += w, src += t->row_bytes) {
            if (t->dtype == RO_DTYPE_FLOAT32) {
                memcpy(dst, src, t->row_bytes);
            } else if (t->dtype == RO_DTYPE_UINT8) {
                /* x / 255 exactly rounded (a division, not a multiply by
                 * a rounded 1/255): the input any other program computes. */
                for (uint32_t i = 0; i < t->size; i++)
                    dst[i] = (float)src[i] / 255.0f;
            } else {
                const int32_t *v = (const int32_t *)(const void *)src;
                for (uint32_t i = 0; i < t->size; i++)
                    dst[i] = (float)v[i];
            }
        }
    }
}

bool ro__layout_mask_ok(const ro_space_layout_t *lay, const uint8_t *mask_row, uint32_t *entry)
{
    for (uint32_t d = 0; d < lay->ndisc; d++) {
        const uint8_t *m = mask_row + lay->disc_mask[d];
        uint8_t any = 0;
        for (uint32_t j = 0; j < lay->disc_n[d]; j++)
            any |= m[j];
        if (!any) {
            if (entry)
                *entry = d;
            return false;
        }
    }
    return true;
}
