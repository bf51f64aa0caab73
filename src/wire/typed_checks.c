/*
 * SEED mode's env ABI 2 frames (typed_checks.h): the welcome's layout read
 * back, an Observations frame's typed columns and an Actions frame's
 * composite actions checked.
 */
#include "wire/typed_checks.h"

#include <math.h>
#include <string.h>

#include "runtime/error.h"
#include "wire/checks.h"
#include "wire/dtype.h"

/* part_of reads action part i of a welcome's layout into *a (pointing
 * into the message); *values gets its mask bytes (or box floats). */
static int part_of(const Rollout__V1__TrajectoryActionPart *p, uint32_t i, ro_action_part_t *a,
                   uint64_t *values, char *err, size_t errlen)
{
    const char *k = p->kind ? p->kind : "";
    memset(a, 0, sizeof *a);
    a->n = p->n;
    if (strcmp(k, "discrete") == 0) {
        a->kind = RO_SPACE_DISCRETE;
        *values = p->n;
    } else if (strcmp(k, "multi_binary") == 0) {
        a->kind = RO_SPACE_MULTI_BINARY;
        *values = 2ull * p->n;
    } else if (strcmp(k, "multi_discrete") == 0) {
        a->kind = RO_SPACE_MULTI_DISCRETE;
        if (p->n_nvec != p->n)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "welcome layout parts[%u]: %zu nvec values for n = %u", i, p->n_nvec,
                              p->n);
        a->nvec = p->nvec;
        *values = 0;
        for (size_t j = 0; j < p->n_nvec; j++)
            *values += p->nvec[j];
    } else if (strcmp(k, "box") == 0) {
        a->kind = RO_SPACE_BOX;
        if (p->n_shape < 1 || p->n_shape > RO_SPACE_MAX_DIMS)
            return ro__errorf(err, errlen, RO_EPROTO, "welcome layout parts[%u]: %zu box dims", i,
                              p->n_shape);
        uint64_t size = 1;
        for (size_t d = 0; d < p->n_shape; d++) {
            a->shape[d] = p->shape[d];
            size *= p->shape[d] ? p->shape[d] : 1;
            if (size > RO_LAYOUT_MAX_VALUES)
                return ro__errorf(err, errlen, RO_EPROTO,
                                  "welcome layout parts[%u]: box of over %u floats", i,
                                  RO_LAYOUT_MAX_VALUES);
        }
        a->ndim = (uint32_t)p->n_shape;
        if (p->n_low != size || p->n_high != size)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "welcome layout parts[%u]: box of %llu floats with %zu low and %zu "
                              "high bounds",
                              i, (unsigned long long)size, p->n_low, p->n_high);
        a->low = p->low;
        a->high = p->high;
        *values = size;
    } else {
        return ro__errorf(err, errlen, RO_EPROTO, "welcome layout parts[%u]: kind '%.20s'", i, k);
    }
    return 0;
}

int ro__layout_from_wire(ro_space_layout_t *lay, const Rollout__V1__TrajectoryLayout *l, char *err,
                         size_t errlen)
{
    memset(lay, 0, sizeof *lay);
    if (!l)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome without a layout");
    if (l->agents < 1 || l->agents > RO_ENV_MAX_AGENTS || l->n_tensors < 1 ||
        l->n_tensors > RO_ENV_MAX_TENSORS || l->n_parts < 1 || l->n_parts > RO_ENV_MAX_PARTS ||
        l->n_metrics > RO_ENV_MAX_METRICS)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "welcome layout with %u agents, %zu tensors, %zu action parts, %zu "
                          "metrics",
                          l->agents, l->n_tensors, l->n_parts, l->n_metrics);
    ro_env_spaces_t sp;
    memset(&sp, 0, sizeof sp);
    sp.size = sizeof sp;
    sp.num_agents = l->agents;
    sp.num_obs = (uint32_t)l->n_tensors;
    for (size_t k = 0; k < l->n_tensors; k++) {
        const Rollout__V1__NamedTensor *t = l->tensors[k];
        ro_tensor_space_t *ts = &sp.obs[k];
        if (t->n_shape < 1 || t->n_shape > RO_SPACE_MAX_DIMS || t->data.len ||
            !ro__wire_dtype_to_env(t->dtype))
            return ro__errorf(err, errlen, RO_EPROTO,
                              "welcome layout tensors[%zu]: %zu dims, dtype %d, %zu data bytes", k,
                              t->n_shape, (int)t->dtype, t->data.len);
        ts->name = t->name;
        ts->dtype = ro__wire_dtype_to_env(t->dtype);
        ts->ndim = (uint32_t)t->n_shape;
        memcpy(ts->shape, t->shape, t->n_shape * sizeof *t->shape);
    }
    uint64_t mask = 0, box = 0, ndisc = 0;
    sp.num_parts = (uint32_t)l->n_parts;
    for (size_t i = 0; i < l->n_parts; i++) {
        uint64_t v = 0;
        int rc = part_of(l->parts[i], (uint32_t)i, &sp.act[i], &v, err, errlen);
        if (rc)
            return rc;
        if (sp.act[i].kind == RO_SPACE_BOX)
            box += v;
        else
            mask += v, ndisc += sp.act[i].kind == RO_SPACE_DISCRETE ? 1 : sp.act[i].n;
    }
    if (mask > RO_LAYOUT_MAX_VALUES || box > RO_LAYOUT_MAX_VALUES || ndisc > RO_LAYOUT_MAX_ENTRIES)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "welcome layout: actions of %llu entries, %llu mask bytes, %llu floats",
                          (unsigned long long)ndisc, (unsigned long long)mask,
                          (unsigned long long)box);
    sp.action_mask = l->mask_width != 0;
    char why[240];
    if (ro__layout_from_spaces(lay, &sp, "welcome", why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome layout: %s", why);
    const char *names[RO_ENV_MAX_METRICS + 1] = {0};
    for (size_t m = 0; m < l->n_metrics; m++)
        names[m] = l->metrics[m];
    if (lay->mask_width != l->mask_width) {
        ro__errorf(err, errlen, RO_EPROTO, "welcome layout: mask_width %u, its actions need %u",
                   l->mask_width, lay->mask_width);
    } else if (ro__layout_set_metrics(lay, names, "welcome", why, sizeof why) != 0) {
        ro__errorf(err, errlen, RO_EPROTO, "welcome layout: %s", why);
    } else {
        return 0;
    }
    ro__layout_free(lay);
    memset(lay, 0, sizeof *lay);
    return RO_EPROTO;
}

/* check_tensors: the k-th of `count` tensors (the layout's, in order) of
 * `rows` rows: name, dtype, shape [rows, ...] and bytes. what names the
 * field. */
static int check_tensors(Rollout__V1__NamedTensor *const *ts, size_t count, size_t rows,
                         const ro_space_layout_t *lay, const char *what, uint64_t seq, char *err,
                         size_t errlen)
{
    const unsigned long long s = (unsigned long long)seq;
    if (count != lay->ntensors)
        return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: %zu %s, expected %u", s,
                          count, what, lay->ntensors);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const Rollout__V1__NamedTensor *t = ts[k];
        const ro_tensor_layout_t *tl = &lay->t[k];
        bool ok = t->name && strcmp(t->name, tl->name) == 0 &&
                  t->dtype == ro__wire_dtype(tl->dtype) && t->n_shape == tl->ndim + 1 &&
                  t->shape[0] == rows && !t->offset && t->data.len == rows * tl->row_bytes;
        for (uint32_t d = 0; ok && d < tl->ndim; d++)
            ok = t->shape[d + 1] == tl->shape[d];
        if (!ok)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "observations %llu: %s[%u] is not '%s' (%s, [%zu, ...], %zu bytes)",
                              s, what, k, tl->name, ro__dtype_name(tl->dtype), rows,
                              rows * tl->row_bytes);
    }
    return 0;
}

int ro__check_observations_typed(const Rollout__V1__Observations *o, const ro_space_layout_t *lay,
                                 uint32_t num_rows, char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)o->seq;
    const size_t n = o->n_env;
    if (o->n_ranges && !o->in_memory)
        return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: ranges, but not in memory",
                          seq);
    if (o->in_memory) { /* the columns are in the node's memory: only ranges here */
        uint32_t rows;
        char why[200];
        if (n || o->n_step || o->n_reward || o->n_terminated || o->n_truncated ||
            o->n_episode_start || o->n_obs || o->n_final_index || o->n_final_obs || o->n_tensors ||
            o->n_final_tensors || o->mask.len)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "observations %llu in memory, yet with columns in the frame", seq);
        if (ro__seed_mem_rows(o->ranges, o->n_ranges, num_rows, &rows, why, sizeof why) != 0)
            return ro__errorf(err, errlen, RO_EPROTO, "observations %llu: %s", seq, why);
        return 0;
    }
    if (n == 0 || n > num_rows || o->n_step != n || o->n_reward != n || o->n_terminated != n ||
        o->n_truncated != n || o->n_episode_start != n || o->n_obs || o->n_final_obs ||
        o->n_final_index > n || o->mask.len != n * lay->mask_width)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "observations %llu: inconsistent field lengths for %zu rows", seq, n);
    int rc = ro__check_observation_rows(o, n, num_rows, "row", err, errlen);
    if (rc == 0)
        rc = check_tensors(o->tensors, o->n_tensors, n, lay, "tensors", o->seq, err, errlen);
    if (rc == 0)
        rc = check_tensors(o->final_tensors, o->n_final_tensors, o->n_final_index, lay,
                           "final_tensors", o->seq, err, errlen);
    return rc;
}

int ro__check_action_rows_typed(const int32_t *disc, const float *box, const uint8_t *mask,
                                size_t rows, const ro_space_layout_t *lay, uint64_t seq_,
                                size_t first_row, char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)seq_;
    for (size_t r = 0; r < rows; r++) {
        for (uint32_t e = 0; e < lay->ndisc; e++) {
            const int32_t v = disc[r * lay->ndisc + e];
            if (v < 0 || (uint32_t)v >= lay->disc_n[e])
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "actions for seq %llu: row %zu entry %u is %d, outside [0, %u)",
                                  seq, first_row + r, e, v, lay->disc_n[e]);
            if (mask && !mask[r * lay->mask_width + lay->disc_mask[e] + (uint32_t)v])
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "actions for seq %llu: row %zu entry %u is %d, which its mask "
                                  "forbids",
                                  seq, first_row + r, e, v);
        }
        for (uint32_t j = 0; j < lay->nbox; j++) {
            const float v = box[r * lay->nbox + j], lo = lay->box_low[j], hi = lay->box_high[j];
            if (!isfinite(v) || v < lo || v > hi)
                return ro__errorf(err, errlen, RO_ERANGE,
                                  "actions for seq %llu: row %zu box value %u is %g, outside "
                                  "[%g, %g]",
                                  seq, first_row + r, j, (double)v, (double)lo, (double)hi);
        }
    }
    return 0;
}

int ro__check_actions_typed(const Rollout__V1__Actions *a, size_t rows,
                            const ro_space_layout_t *lay, char *err, size_t errlen)
{
    const unsigned long long seq = (unsigned long long)a->seq;
    if (a->in_memory)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu in memory, but its observations were not", seq);
    if (a->n_discrete != rows * lay->ndisc || a->n_box != rows * lay->nbox)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: %zu discrete and %zu box values, expected %zu "
                          "and %zu",
                          seq, a->n_discrete, a->n_box, rows * lay->ndisc, rows * lay->nbox);
    return 0;
}
