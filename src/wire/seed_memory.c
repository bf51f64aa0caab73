#include "wire/seed_memory.h"

#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/dtype.h"
#include "wire/obs_frame.h"

#define PAGE 4096u
#define LINE 64u

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

/* obs_columns lays out the observation memory of n rows, the one plan of
 * both env ABIs: per tensor (rb[k] bytes a row) its column then its final
 * column, the mask (mask_width bytes a row; none: no room), step, reward
 * and flags, each on a cache line. Writes each tensor's two offsets,
 * *mask_off and the step, reward and flags columns' to l; returns the
 * memory's size, a whole number of pages. An ABI 1 env is one float32
 * tensor of obs_dim values and no mask, so its columns lie where an ABI 2
 * env of that layout has them. */
static uint64_t obs_columns(ro_seed_mem_layout_t *l, uint64_t n, uint32_t ntensors,
                            const uint64_t *rb, uint32_t mask_width, uint64_t *tensor_off,
                            uint64_t *final_off, uint64_t *mask_off)
{
    uint64_t at = 0;
    for (uint32_t k = 0; k < ntensors; k++) {
        tensor_off[k] = at;
        at = round_up(at + n * rb[k], LINE);
        final_off[k] = at;
        at = round_up(at + n * rb[k], LINE);
    }
    *mask_off = at;
    at = round_up(at + n * mask_width, LINE);
    l->step_off = at;
    at = round_up(at + n * sizeof(uint64_t), LINE);
    l->reward_off = at;
    at = round_up(at + n * sizeof(float), LINE);
    l->flags_off = at;
    at = round_up(at + n, LINE);
    return round_up(at, PAGE);
}

void ro__seed_mem_layout(ro_seed_mem_layout_t *l, uint32_t num_envs, uint32_t obs_dim,
                         uint32_t act_width)
{
    memset(l, 0, sizeof *l);
    l->num_envs = num_envs;
    l->obs_dim = obs_dim;
    l->act_width = act_width;
    const uint64_t n = num_envs, rb = (uint64_t)obs_dim * sizeof(float);
    uint64_t no_mask;
    l->obs_bytes = obs_columns(l, n, 1, &rb, 0, &l->obs_off, &l->final_off, &no_mask);
    l->act_off = 0; /* int32 and float32 are both 4 bytes */
    l->act_bytes = round_up(n * act_width * 4, PAGE);
}

void ro__seed_mem_layout_typed(ro_seed_mem_layout_t *l, uint32_t num_rows,
                               const ro_space_layout_t *lay)
{
    memset(l, 0, sizeof *l);
    const uint64_t n = num_rows;
    l->num_envs = num_rows;
    l->ntensors = lay->ntensors;
    l->mask_width = lay->mask_width;
    l->ndisc = lay->ndisc;
    l->nbox = lay->nbox;
    for (uint32_t k = 0; k < lay->ntensors; k++)
        l->row_bytes[k] = lay->t[k].row_bytes;
    l->obs_bytes = obs_columns(l, n, lay->ntensors, l->row_bytes, lay->mask_width, l->tensor_off,
                               l->final_tensor_off, &l->mask_off);
    l->act_off = 0;
    l->act_box_off = round_up(n * lay->ndisc * 4, LINE);
    l->act_bytes = round_up(l->act_box_off + n * lay->nbox * 4 + 1, PAGE);
}

void ro__seed_mem_to_wire(const ro_seed_mem_layout_t *l, uint32_t obs_index, uint32_t act_index,
                          Rollout__V1__SeedMemory *m)
{
    m->obs_fd = obs_index;
    m->obs_bytes = l->obs_bytes;
    m->act_fd = act_index;
    m->act_bytes = l->act_bytes;
    m->obs_offset = l->obs_off;
    m->final_obs_offset = l->final_off;
    m->step_offset = l->step_off;
    m->reward_offset = l->reward_off;
    m->flags_offset = l->flags_off;
    m->act_offset = l->act_off;
}

/* column: a column of `bytes` at off, aligned to `align`, inside a memory
 * of size, taken (its offset into *taken) once checked; name[k] in the
 * message for one of a list (k >= 0). */
static int column(uint64_t off, uint64_t bytes, uint64_t align, uint64_t size, const char *name,
                  int k, uint64_t *taken, char *err, size_t errlen)
{
    if (off % align == 0 && off <= size && bytes <= size - off) {
        *taken = off;
        return 0;
    }
    char what[64];
    if (k >= 0)
        snprintf(what, sizeof what, "%s[%d]", name, k);
    else
        snprintf(what, sizeof what, "%s", name);
    return ro__errorf(err, errlen, RO_EPROTO,
                      "shared memory: the %s column (%llu bytes at %llu) is not inside its "
                      "%llu bytes or not aligned",
                      what, (unsigned long long)bytes, (unsigned long long)off,
                      (unsigned long long)size);
}

/* sizes: the memories a peer offers (m) are no larger than this build lays
 * out for them (want) plus a page each: what a peer may ask us to map. */
static int sizes(const Rollout__V1__SeedMemory *m, const ro_seed_mem_layout_t *want,
                 const char *rows, char *err, size_t errlen)
{
    if (m->obs_bytes == 0 || m->obs_bytes > want->obs_bytes + PAGE || m->act_bytes == 0 ||
        m->act_bytes > want->act_bytes + PAGE)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "shared memory of %llu and %llu bytes offered for %u %s",
                          (unsigned long long)m->obs_bytes, (unsigned long long)m->act_bytes,
                          want->num_envs, rows);
    return 0;
}

/* shared_columns: the columns of both env ABIs' memories, the step,
 * reward and flags of the n rows and their actions (act_row bytes a row,
 * int32 or float32), checked and taken into l with the memories' sizes. */
static int shared_columns(const Rollout__V1__SeedMemory *m, uint64_t n, uint64_t act_row,
                          ro_seed_mem_layout_t *l, char *err, size_t errlen)
{
    const uint64_t ob = m->obs_bytes, ab = m->act_bytes;
    int rc;
    if ((rc = column(m->step_offset, n * 8, 8, ob, "step", -1, &l->step_off, err, errlen)) ||
        (rc = column(m->reward_offset, n * 4, 4, ob, "reward", -1, &l->reward_off, err, errlen)) ||
        (rc = column(m->flags_offset, n, 1, ob, "flags", -1, &l->flags_off, err, errlen)) ||
        (rc = column(m->act_offset, n * act_row, 4, ab, "action", -1, &l->act_off, err, errlen)))
        return rc;
    l->obs_bytes = ob;
    l->act_bytes = ab;
    return 0;
}

int ro__seed_mem_check(const Rollout__V1__SeedMemory *m, uint32_t num_envs, uint32_t obs_dim,
                       uint32_t act_width, ro_seed_mem_layout_t *out, char *err, size_t errlen)
{
    ro_seed_mem_layout_t want;
    ro__seed_mem_layout(&want, num_envs, obs_dim, act_width);
    int rc = sizes(m, &want, "envs", err, errlen);
    if (rc)
        return rc;
    const uint64_t n = num_envs, rows = n * obs_dim * sizeof(float), ob = m->obs_bytes;
    if ((rc = column(m->obs_offset, rows, 4, ob, "obs", -1, &want.obs_off, err, errlen)) ||
        (rc = column(m->final_obs_offset, rows, 4, ob, "final obs", -1, &want.final_off, err,
                     errlen)) ||
        (rc = shared_columns(m, n, (uint64_t)act_width * 4, &want, err, errlen)))
        return rc;
    *out = want;
    return 0;
}

int ro__seed_mem_rows(const uint32_t *ranges, size_t nvalues, uint32_t num_envs, uint32_t *rows,
                      char *err, size_t errlen)
{
    uint64_t total = 0;
    if (nvalues == 0 || nvalues % 2 != 0)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "an in-memory frame's ranges have %zu values, not (first, count) pairs",
                          nvalues);
    for (size_t i = 0; i < nvalues; i += 2) {
        uint32_t first = ranges[i], count = ranges[i + 1];
        if (count == 0 || first >= num_envs || count > num_envs - first)
            return ro__errorf(err, errlen, RO_EPROTO,
                              "an in-memory frame's range of %u envs from %u is empty or not "
                              "inside [0, %u)",
                              count, first, num_envs);
        total += count;
    }
    if (total > num_envs)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "an in-memory frame of %llu envs; the node has %u",
                          (unsigned long long)total, num_envs);
    *rows = (uint32_t)total;
    return 0;
}

void ro__seed_mem_to_wire_typed(const ro_seed_mem_layout_t *l, const ro_space_layout_t *lay,
                                uint32_t obs_index, uint32_t act_index, ro_seed_mem_msg_t *s,
                                Rollout__V1__SeedMemory *m)
{
    ro__seed_mem_to_wire(l, obs_index, act_index, m);
    m->obs_offset = m->final_obs_offset = 0;
    ro__obs_tensors_init(s, lay, l->num_envs);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        s->t[0][k].offset = l->tensor_off[k];
        s->t[1][k].offset = l->final_tensor_off[k];
    }
    m->tensors = s->tp[0];
    m->final_tensors = s->tp[1];
    m->n_tensors = m->n_final_tensors = lay->ntensors;
    m->mask_offset = l->mask_off;
    m->act_box_offset = l->act_box_off;
}

/* mem_tensors: a SeedMemory's tensor list against the layout's. */
static int mem_tensors(Rollout__V1__NamedTensor *const *ts, size_t count, uint32_t num_rows,
                       const ro_space_layout_t *lay, uint64_t size, const char *what, uint64_t *off,
                       char *err, size_t errlen)
{
    if (count != lay->ntensors)
        return ro__errorf(err, errlen, RO_EPROTO, "shared memory: %zu %s, expected %u", count, what,
                          lay->ntensors);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const Rollout__V1__NamedTensor *t = ts[k];
        const ro_tensor_layout_t *tl = &lay->t[k];
        bool ok = t->name && strcmp(t->name, tl->name) == 0 &&
                  t->dtype == ro__wire_dtype(tl->dtype) && t->n_shape == tl->ndim + 1 &&
                  t->shape[0] == num_rows && !t->data.len;
        for (uint32_t d = 0; ok && d < tl->ndim; d++)
            ok = t->shape[d + 1] == tl->shape[d];
        if (!ok)
            return ro__errorf(err, errlen, RO_EPROTO, "shared memory: %s[%u] is not '%s' (%s)",
                              what, k, tl->name, ro__dtype_name(tl->dtype));
        int rc = column(t->offset, (uint64_t)num_rows * tl->row_bytes, tl->elem, size, what, (int)k,
                        &off[k], err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int ro__seed_mem_check_typed(const Rollout__V1__SeedMemory *m, uint32_t num_rows,
                             const ro_space_layout_t *lay, ro_seed_mem_layout_t *out, char *err,
                             size_t errlen)
{
    ro_seed_mem_layout_t want;
    ro__seed_mem_layout_typed(&want, num_rows, lay);
    int rc = sizes(m, &want, "rows", err, errlen);
    if (rc)
        return rc;
    const uint64_t n = num_rows, ob = m->obs_bytes, ab = m->act_bytes;
    if ((rc = mem_tensors(m->tensors, m->n_tensors, num_rows, lay, ob, "tensors", want.tensor_off,
                          err, errlen)) ||
        (rc = mem_tensors(m->final_tensors, m->n_final_tensors, num_rows, lay, ob, "final_tensors",
                          want.final_tensor_off, err, errlen)) ||
        (rc = column(m->mask_offset, n * lay->mask_width, 1, ob, "mask", -1, &want.mask_off, err,
                     errlen)) ||
        (rc = shared_columns(m, n, (uint64_t)lay->ndisc * 4, &want, err, errlen)) ||
        (rc = column(m->act_box_offset, n * lay->nbox * 4, 4, ab, "action box", -1,
                     &want.act_box_off, err, errlen)))
        return rc;
    *out = want;
    return 0;
}
