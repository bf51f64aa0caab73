/*
 * Step batches of env ABI 2 envs on the wire (obs_codec.h): rows of typed
 * tensors, final tensors and masks out; composite actions in, checked
 * against the layout and each row's mask.
 */
#include <stdlib.h>
#include <string.h>

#include "actors/obs_codec.h"
#include "actors/step_batch.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/seed_abi2.h"
#include "wire/dtype.h"

int ro__obs_encoder_init_abi2(ro_obs_encoder_t *e, uint32_t max_rows,
                              const struct ro_space_layout *lay)
{
    int rc = ro__obs_encoder_init(e, max_rows, 1);
    if (rc)
        return rc;
    e->lay = lay;
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        e->tensor[k] = malloc((size_t)max_rows * lay->t[k].row_bytes);
        e->final_tensor[k] = malloc((size_t)max_rows * lay->t[k].row_bytes);
        if (!e->tensor[k] || !e->final_tensor[k])
            return RO_ENOMEM;
        for (int f = 0; f < 2; f++) {
            Rollout__V1__NamedTensor *t = &e->nt[f][k];
            rollout__v1__named_tensor__init(t);
            t->name = (char *)lay->t[k].name;
            t->dtype = ro__wire_dtype(lay->t[k].dtype);
            memcpy(&e->shape[f][k][1], lay->t[k].shape, lay->t[k].ndim * sizeof(uint32_t));
            t->shape = e->shape[f][k];
            t->n_shape = lay->t[k].ndim + 1;
            e->ntp[f][k] = t;
        }
    }
    if (lay->mask_width && !(e->mask = malloc((size_t)max_rows * lay->mask_width)))
        return RO_ENOMEM;
    return 0;
}

void ro__obs_encode_abi2(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
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
            e->env[r] = b->first * b->agents + j;
            e->step[r] = b->steps;
            e->reward[r] = b->reward[j];
            e->terminated[r] = b->terminated[j];
            e->truncated[r] = b->truncated[j];
            e->episode_start[r] = b->episode_start[j];
            if (!b->has_final[j])
                continue;
            for (uint32_t k = 0; k < lay->ntensors; k++) {
                const size_t rb = lay->t[k].row_bytes;
                memcpy(e->final_tensor[k] + nfinal * rb, b->final_tensor[k] + j * rb, rb);
            }
            e->final_index[nfinal++] = r;
        }
    }
    o->seq = seq;
    o->n_env = o->n_step = o->n_reward = o->n_terminated = o->n_truncated = o->n_episode_start = r;
    o->env = e->env;
    o->step = e->step;
    o->reward = e->reward;
    o->terminated = e->terminated;
    o->truncated = e->truncated;
    o->episode_start = e->episode_start;
    o->n_final_index = nfinal;
    o->final_index = e->final_index;
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const size_t rb = lay->t[k].row_bytes;
        e->shape[0][k][0] = r;
        e->nt[0][k].data.len = r * rb;
        e->nt[0][k].data.data = e->tensor[k];
        e->shape[1][k][0] = nfinal;
        e->nt[1][k].data.len = nfinal * rb;
        e->nt[1][k].data.data = e->final_tensor[k];
    }
    o->n_tensors = o->n_final_tensors = lay->ntensors;
    o->tensors = e->ntp[0];
    o->final_tensors = e->ntp[1];
    o->mask.len = (size_t)r * lay->mask_width;
    o->mask.data = e->mask;
}

int ro__actions_apply_abi2(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                           const struct ro_space_layout *lay, char *err, size_t errlen)
{
    int rc = ro__check_actions_abi2(a, rows, lay, err, errlen);
    if (rc)
        return rc;
    size_t r = 0;
    for (ro_batch_item_t *it = items; it; it = it->next) {
        const ro_step_batch_t *b = ro__step_batch_of_item(it);
        rc = ro__check_action_rows_abi2(lay->ndisc ? a->discrete + r * lay->ndisc : NULL,
                                        lay->nbox ? a->box + r * lay->nbox : NULL,
                                        lay->mask_width ? b->mask : NULL, b->n, lay, a->seq, r, err,
                                        errlen);
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

void ro__obs_encode_memory_abi2(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                                const ro_seed_mem_layout_t *l, uint8_t *mem,
                                Rollout__V1__Observations *o)
{
    const ro_space_layout_t *lay = e->lay;
    float *reward = (float *)(void *)(mem + l->reward_off);
    uint64_t *step = (uint64_t *)(void *)(mem + l->step_off);
    uint8_t *flags = mem + l->flags_off;
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
        memcpy(reward + f, b->reward, b->n * sizeof(float));
        for (uint32_t j = 0; j < b->n; j++) {
            step[f + j] = b->steps;
            flags[f + j] = ro__seed_mem_flags(b->terminated[j], b->truncated[j],
                                              b->episode_start[j], b->has_final[j]);
            for (uint32_t k = 0; b->has_final[j] && k < lay->ntensors; k++)
                memcpy(mem + l->final_tensor_off[k] + (f + j) * l->row_bytes[k],
                       b->final_tensor[k] + j * l->row_bytes[k], l->row_bytes[k]);
        }
        e->ranges[nr++] = (uint32_t)f;
        e->ranges[nr++] = b->n;
    }
    o->seq = seq;
    o->in_memory = true;
    o->n_ranges = ro__merge_ranges(e->ranges, nr);
    o->ranges = e->ranges;
}

int ro__actions_apply_memory_abi2(const Rollout__V1__Actions *a, ro_batch_item_t *items,
                                  const struct ro_space_layout *lay, const ro_seed_mem_layout_t *l,
                                  const uint8_t *act_mem, char *err, size_t errlen)
{
    if (a->n_discrete || a->n_box)
        return ro__errorf(err, errlen, RO_EPROTO,
                          "actions for seq %llu: in memory, yet %zu values in the frame",
                          (unsigned long long)a->seq, a->n_discrete + a->n_box);
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
        int rc = ro__check_action_rows_abi2(b->act_i, b->act_f, lay->mask_width ? b->mask : NULL,
                                            b->n, lay, a->seq, r, err, errlen);
        if (rc)
            return rc;
        r += b->n;
    }
    return 0;
}
