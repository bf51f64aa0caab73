#include "wire/obs_frame.h"

#include <string.h>

#include "wire/dtype.h"

void ro__obs_frame_cols(Rollout__V1__Observations *o, uint64_t seq, const ro_obs_cols_t *c,
                        size_t rows, size_t nfinal)
{
    o->seq = seq;
    o->n_env = o->n_step = o->n_reward = o->n_terminated = o->n_truncated = o->n_episode_start =
        rows;
    o->env = c->env;
    o->step = c->step;
    o->reward = c->reward;
    o->terminated = c->terminated;
    o->truncated = c->truncated;
    o->episode_start = c->episode_start;
    o->n_final_index = nfinal;
    o->final_index = c->final_index;
}

void ro__obs_tensors_init(ro_obs_tensors_t *s, const ro_space_layout_t *lay, uint32_t rows)
{
    for (uint32_t k = 0; k < lay->ntensors; k++)
        for (int f = 0; f < 2; f++) {
            Rollout__V1__NamedTensor *t = &s->t[f][k];
            rollout__v1__named_tensor__init(t);
            t->name = (char *)lay->t[k].name;
            t->dtype = ro__wire_dtype(lay->t[k].dtype);
            s->shape[f][k][0] = rows;
            memcpy(&s->shape[f][k][1], lay->t[k].shape, lay->t[k].ndim * sizeof(uint32_t));
            t->shape = s->shape[f][k];
            t->n_shape = lay->t[k].ndim + 1;
            s->tp[f][k] = t;
        }
}

void ro__obs_frame_tensors(Rollout__V1__Observations *o, ro_obs_tensors_t *s,
                           const ro_space_layout_t *lay, uint8_t *const *tensor,
                           uint8_t *const *final, uint8_t *mask, size_t rows, size_t nfinal)
{
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        const size_t rb = lay->t[k].row_bytes;
        s->shape[0][k][0] = (uint32_t)rows;
        s->t[0][k].data.len = rows * rb;
        s->t[0][k].data.data = tensor[k];
        s->shape[1][k][0] = (uint32_t)nfinal;
        s->t[1][k].data.len = nfinal * rb;
        s->t[1][k].data.data = final[k];
    }
    o->n_tensors = o->n_final_tensors = lay->ntensors;
    o->tensors = s->tp[0];
    o->final_tensors = s->tp[1];
    o->mask.len = rows * lay->mask_width;
    o->mask.data = mask;
}
