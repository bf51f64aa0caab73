#include "actors/hub/obs_codec.h"

#include <stdlib.h>
#include <string.h>

#include "actors/exchange/step_batch.h"
#include "runtime/alloc.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/checks.h"
#include "wire/typed_checks.h"

/* CARVE points p at count elements of the block being carved (mem, off). */
#define CARVE(p, count) ((p) = ro__carve(mem, &off, (count) * sizeof *(p)))

/* carve points the encoder's arrays into mem (NULL: only sizes them) and
 * returns the bytes they take: the per-row columns both ABIs' frames have,
 * the in-memory ranges, then ABI 1's observations or ABI 2's tensors, final
 * tensors and mask. */
static size_t carve(ro_obs_encoder_t *e, uint8_t *mem)
{
    const size_t n = e->max_rows, od = e->obs_dim;
    const ro_space_layout_t *lay = e->lay;
    size_t off = 0;
    CARVE(e->c.env, n);
    CARVE(e->c.step, n);
    CARVE(e->c.reward, n);
    CARVE(e->c.terminated, n);
    CARVE(e->c.truncated, n);
    CARVE(e->c.episode_start, n);
    CARVE(e->c.final_index, n);
    CARVE(e->ranges, 2 * n);
    if (!lay) {
        CARVE(e->obs, n * od);
        CARVE(e->final_obs, n * od);
        return off;
    }
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        CARVE(e->tensor[k], n * lay->t[k].row_bytes);
        CARVE(e->final_tensor[k], n * lay->t[k].row_bytes);
    }
    if (lay->mask_width)
        CARVE(e->mask, n * lay->mask_width);
    return off;
}
#undef CARVE

int ro__obs_encoder_init(ro_obs_encoder_t *e, uint32_t max_rows, uint32_t obs_dim,
                         const struct ro_space_layout *lay)
{
    memset(e, 0, sizeof *e);
    e->max_rows = max_rows;
    e->obs_dim = obs_dim;
    e->lay = lay;
    if (!(e->mem = ro__calloc_lines(carve(e, NULL), 1)))
        return RO_ENOMEM;
    carve(e, e->mem);
    if (lay)
        ro__obs_tensors_init(&e->msgs, lay, 0);
    return 0;
}

void ro__obs_encoder_free(ro_obs_encoder_t *e)
{
    free(e->mem);
    memset(e, 0, sizeof *e);
}

/* put_row writes row j of step batch b as the frame's row r: the columns
 * both env ABIs share. The env column holds ABI 1's env index, ABI 2's row
 * index (first x agents + j; an ABI 1 batch has one agent). */
static void put_row(ro_obs_encoder_t *e, const ro_step_batch_t *b, uint32_t j, uint32_t r)
{
    e->c.env[r] = b->first * (b->agents ? b->agents : 1) + j;
    e->c.step[r] = b->steps;
    e->c.reward[r] = b->reward[j];
    e->c.terminated[r] = b->terminated[j];
    e->c.truncated[r] = b->truncated[j];
    e->c.episode_start[r] = b->episode_start[j];
}

/* encode_flat: the frame of ABI 1 batches, their observations as floats. */
static void encode_flat(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                        Rollout__V1__Observations *o)
{
    const size_t od = e->obs_dim;
    uint32_t r = 0, nfinal = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        memcpy(e->obs + r * od, b->obs, b->n * od * sizeof(float));
        for (uint32_t j = 0; j < b->n; j++, r++) {
            put_row(e, b, j, r);
            if (b->has_final[j]) {
                memcpy(e->final_obs + nfinal * od, b->final_obs + j * od, od * sizeof(float));
                e->c.final_index[nfinal++] = r;
            }
        }
    }
    ro__obs_frame_cols(o, seq, &e->c, r, nfinal);
    o->n_obs = r * od;
    o->obs = e->obs;
    o->n_final_obs = nfinal * od;
    o->final_obs = e->final_obs;
}

/* apply_flat: a frame's actions for ABI 1 batches, checked against act. */
static int apply_flat(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                      const ro_space_t *act, char *err, size_t errlen)
{
    int rc = ro__check_actions(a, rows, act, err, errlen);
    if (rc)
        return rc;
    const bool discrete = act->kind == RO_SPACE_DISCRETE;
    const size_t ad = ro_space_size(act);
    size_t r = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        if (discrete)
            memcpy(b->act_i, a->discrete + r, b->n * sizeof(int32_t));
        else
            memcpy(b->act_f, a->box + r * ad, (size_t)b->n * ad * sizeof(float));
        r += b->n;
    }
    return 0;
}

size_t ro__merge_ranges(uint32_t *r, size_t nvalues)
{
    for (size_t i = 2; i < nvalues; i += 2) {
        uint32_t first = r[i], count = r[i + 1];
        size_t j = i;
        for (; j > 0 && r[j - 2] > first; j -= 2) {
            r[j] = r[j - 2];
            r[j + 1] = r[j - 1];
        }
        r[j] = first;
        r[j + 1] = count;
    }
    size_t out = 0;
    for (size_t i = 0; i < nvalues; i += 2) {
        if (out > 0 && r[out - 2] + r[out - 1] == r[i]) {
            r[out - 1] += r[i + 1];
        } else {
            r[out++] = r[i];
            r[out++] = r[i + 1];
        }
    }
    return out;
}

/* put_steps writes step batch b's rewards, step counts and flags at rows
 * f.. of the SEED memory mem (laid out as l): the columns both env ABIs
 * share. */
static void put_steps(const ro_step_batch_t *b, size_t f, const ro_seed_mem_layout_t *l,
                      uint8_t *mem)
{
    float *reward = (float *)(void *)(mem + l->reward_off);
    uint64_t *step = (uint64_t *)(void *)(mem + l->step_off);
    uint8_t *flags = mem + l->flags_off;
    memcpy(reward + f, b->reward, b->n * sizeof(float));
    for (uint32_t j = 0; j < b->n; j++) {
        step[f + j] = b->steps;
        flags[f + j] = ro__seed_mem_flags(b->terminated[j], b->truncated[j], b->episode_start[j],
                                          b->has_final[j]);
    }
}

/* memory_frame finishes an in_memory Observations frame o: seq, and the
 * nr entries of (first, count) pairs in e->ranges merged into runs. */
static void memory_frame(ro_obs_encoder_t *e, size_t nr, uint64_t seq, Rollout__V1__Observations *o)
{
    o->seq = seq;
    o->in_memory = true;
    o->n_ranges = ro__merge_ranges(e->ranges, nr);
    o->ranges = e->ranges;
}

/* encode_memory_flat: ABI 1 batches' columns into the observation memory. */
static void encode_memory_flat(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                               const ro_seed_mem_layout_t *l, uint8_t *mem,
                               Rollout__V1__Observations *o)
{
    const size_t od = e->obs_dim, row = od * sizeof(float);
    float *obs = (float *)(mem + l->obs_off), *fin = (float *)(mem + l->final_off);
    size_t nr = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        const size_t f = b->first;
        memcpy(obs + f * od, b->obs, b->n * row);
        put_steps(b, f, l, mem);
        for (uint32_t j = 0; j < b->n; j++)
            if (b->has_final[j])
                memcpy(fin + (f + j) * od, b->final_obs + j * od, row);
        e->ranges[nr++] = b->first;
        e->ranges[nr++] = b->n;
    }
    memory_frame(e, nr, seq, o);
}

/* apply_memory_flat: ABI 1 actions out of the action memory, checked. */
static int apply_memory_flat(const Rollout__V1__Actions *a, ro_batch_item_t *items,
                             const ro_space_t *act, const ro_seed_mem_layout_t *l,
                             const uint8_t *act_mem, char *err, size_t errlen)
{
    const bool discrete = act->kind == RO_SPACE_DISCRETE;
    const size_t w = l->act_width;
    const uint8_t *col = act_mem + l->act_off;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        void *dst = discrete ? (void *)b->act_i : (void *)b->act_f;
        memcpy(dst, col + (size_t)b->first * w * 4, (size_t)b->n * w * 4);
        int rc = ro__check_action_values(b->act_i, b->act_f, b->n, act, a->seq, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* Env ABI 2: rows of typed tensors, final tensors and masks out;
 * composite actions in, checked against the layout and each row's mask. */

/* encode_typed: the frame of ABI 2 batches, their rows as typed tensors. */
static void encode_typed(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                         Rollout__V1__Observations *o)
{
    const ro_space_layout_t *lay = e->lay;
    uint32_t r = 0, nfinal = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        for (uint32_t k = 0; k < lay->ntensors; k++)
            memcpy(e->tensor[k] + (size_t)r * lay->t[k].row_bytes, b->tensor[k],
                   (size_t)b->n * lay->t[k].row_bytes);
        if (lay->mask_width)
            memcpy(e->mask + (size_t)r * lay->mask_width, b->mask, (size_t)b->n * lay->mask_width);
        for (uint32_t j = 0; j < b->n; j++, r++) {
            put_row(e, b, j, r);
            if (!b->has_final[j])
                continue;
            for (uint32_t k = 0; k < lay->ntensors; k++) {
                const size_t rb = lay->t[k].row_bytes;
                memcpy(e->final_tensor[k] + nfinal * rb, b->final_tensor[k] + j * rb, rb);
            }
            e->c.final_index[nfinal++] = r;
        }
    }
    ro__obs_frame_cols(o, seq, &e->c, r, nfinal);
    ro__obs_frame_tensors(o, &e->msgs, lay, e->tensor, e->final_tensor, e->mask, r, nfinal);
}

/* apply_typed: a frame's actions for ABI 2 batches, each row checked
 * against lay and its mask before any is written. */
static int apply_typed(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                       const struct ro_space_layout *lay, char *err, size_t errlen)
{
    int rc = ro__check_actions_typed(a, rows, lay, err, errlen);
    if (rc)
        return rc;
    size_t r = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        rc = ro__check_action_rows_typed(lay->ndisc ? a->discrete + r * lay->ndisc : NULL,
                                         lay->nbox ? a->box + r * lay->nbox : NULL,
                                         lay->mask_width ? b->mask : NULL, b->n, lay, a->seq, r,
                                         err, errlen);
        if (rc)
            return rc;
        r += b->n;
    }
    r = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        if (lay->ndisc)
            memcpy(b->act_i, a->discrete + r * lay->ndisc, (size_t)b->n * lay->ndisc * 4);
        if (lay->nbox)
            memcpy(b->act_f, a->box + r * lay->nbox, (size_t)b->n * lay->nbox * 4);
        r += b->n;
    }
    return 0;
}

/* encode_memory_typed: ABI 2 batches' rows into the observation memory
 * (laid out by ro__seed_mem_layout_typed). */
static void encode_memory_typed(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                                const ro_seed_mem_layout_t *l, uint8_t *mem,
                                Rollout__V1__Observations *o)
{
    const ro_space_layout_t *lay = e->lay;
    size_t nr = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        const size_t f = (size_t)b->first * b->agents; /* its first row */
        for (uint32_t k = 0; k < lay->ntensors; k++)
            memcpy(mem + l->tensor_off[k] + f * l->row_bytes[k], b->tensor[k],
                   b->n * l->row_bytes[k]);
        if (lay->mask_width)
            memcpy(mem + l->mask_off + f * lay->mask_width, b->mask,
                   (size_t)b->n * lay->mask_width);
        put_steps(b, f, l, mem);
        for (uint32_t j = 0; j < b->n; j++)
            for (uint32_t k = 0; b->has_final[j] && k < lay->ntensors; k++)
                memcpy(mem + l->final_tensor_off[k] + (f + j) * l->row_bytes[k],
                       b->final_tensor[k] + j * l->row_bytes[k], l->row_bytes[k]);
        e->ranges[nr++] = (uint32_t)f;
        e->ranges[nr++] = b->n;
    }
    memory_frame(e, nr, seq, o);
}

/* apply_memory_typed: ABI 2 rows out of the action memory, checked as
 * apply_typed checks them. */
static int apply_memory_typed(const Rollout__V1__Actions *a, ro_batch_item_t *items,
                              const struct ro_space_layout *lay, const ro_seed_mem_layout_t *l,
                              const uint8_t *act_mem, char *err, size_t errlen)
{
    size_t r = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        ro_step_batch_t *b = ro__step_batch_of_item(it);
        const size_t f = (size_t)b->first * b->agents;
        /* Copied first: the learner may write its memory at any time. */
        if (lay->ndisc)
            memcpy(b->act_i, act_mem + l->act_off + f * lay->ndisc * 4,
                   (size_t)b->n * lay->ndisc * 4);
        if (lay->nbox)
            memcpy(b->act_f, act_mem + l->act_box_off + f * lay->nbox * 4,
                   (size_t)b->n * lay->nbox * 4);
        int rc = ro__check_action_rows_typed(b->act_i, b->act_f, lay->mask_width ? b->mask : NULL,
                                             b->n, lay, a->seq, r, err, errlen);
        if (rc)
            return rc;
        r += b->n;
    }
    return 0;
}

void ro__obs_encode(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                    const ro_seed_mem_layout_t *l, uint8_t *mem, Rollout__V1__Observations *o)
{
    if (mem && e->lay)
        encode_memory_typed(e, items, seq, l, mem, o);
    else if (mem)
        encode_memory_flat(e, items, seq, l, mem, o);
    else if (e->lay)
        encode_typed(e, items, seq, o);
    else
        encode_flat(e, items, seq, o);
}

int ro__actions_apply(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                      const ro_space_t *act, const struct ro_space_layout *lay,
                      const ro_seed_mem_layout_t *l, const uint8_t *act_mem, char *err,
                      size_t errlen)
{
    if (!a->in_memory)
        return lay ? apply_typed(a, items, rows, lay, err, errlen)
                   : apply_flat(a, items, rows, act, err, errlen);
    if (a->n_discrete || a->n_box)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: in memory, yet %zu values in the frame",
                          (unsigned long long)a->seq, a->n_discrete + a->n_box);
    return lay ? apply_memory_typed(a, items, lay, l, act_mem, err, errlen)
               : apply_memory_flat(a, items, act, l, act_mem, err, errlen);
}
