/*
 * Step batches on the wire, for the remote-learner hub: the Observations
 * frame that carries a batch of them to a learner, and the Actions frame
 * that answers it, checked and written back into them. Pure data work on
 * the loop thread; no I/O.
 */
#ifndef RO_OBS_CODEC_H
#define RO_OBS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "actors/exchange/batcher.h"
#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "wire/obs_frame.h"
#include "wire/seed_memory.h"

/* Scratch for one Observations frame of up to max_rows rows, in one
 * block (mem). One owner. */
typedef struct ro_obs_encoder {
    uint32_t max_rows, obs_dim;
    ro_obs_cols_t c;        /* the per-row columns, as the frame points at them */
    float *obs, *final_obs; /* ABI 1: [max_rows x obs_dim] each */
    uint32_t *ranges;       /* [2 x max_rows]: an in-memory frame's (first, count) pairs */
    /* Env ABI 2 (ro__obs_encoder_init with a layout): the layout, each tensor's
     * rows, the final rows, the mask rows, and the messages' tensors. */
    const struct ro_space_layout *lay;
    uint8_t *tensor[RO_ENV_MAX_TENSORS], *final_tensor[RO_ENV_MAX_TENSORS], *mask;
    ro_obs_tensors_t msgs;
    void *mem;
} ro_obs_encoder_t;

/* ro__obs_encoder_init allocates scratch for max_rows rows: of obs_dim
 * floats for an ABI 1 env (lay NULL); for an env of env ABI 2 that is not
 * ABI 1 shaped, of every tensor, final tensor and mask of lay (lay outlives
 * the encoder; the frames carry typed tensors, docs/protocol.md "SEED mode
 * and env ABI 2"). Returns 0 or RO_ENOMEM (then free it). */
int ro__obs_encoder_init(ro_obs_encoder_t *e, uint32_t max_rows, uint32_t obs_dim,
                         const struct ro_space_layout *lay);
void ro__obs_encoder_free(ro_obs_encoder_t *e);

/*
 * ro__obs_encode fills o (initialised) with the step batches of the list
 * items (linked through next, at most max_rows rows in all), under seq,
 * in the encoder's ABI. With mem NULL the frame carries the columns and o
 * points into the encoder until the next call. For a learner that maps the
 * node's observation memory mem (laid out as l: ro__seed_mem_layout, or
 * ro__seed_mem_layout_typed for ABI 2), the columns go to their rows there
 * and o gets only seq and the rows as ranges, in order, one per run of
 * consecutive rows.
 */
void ro__obs_encode(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                    const ro_seed_mem_layout_t *l, uint8_t *mem, Rollout__V1__Observations *o);

/*
 * ro__actions_apply checks an Actions frame against the step batches it
 * answers (items, `rows` rows in all) and writes each row's action into its
 * batch: an ABI 1 env's against its action space act; with lay, an ABI 2
 * env's ndisc entries and nbox floats a row, every entry in range and
 * allowed by its row's mask, every box float finite and in bounds. A frame
 * in_memory has its actions in the learner's action memory act_mem (laid
 * out as l): each batch's are copied out first, then checked (the learner
 * may write the memory at any time). Returns 0, or a negative code with one
 * line in err (the batches' actions are then not to be used).
 */
int ro__actions_apply(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                      const ro_space_t *act, const struct ro_space_layout *lay,
                      const ro_seed_mem_layout_t *l, const uint8_t *act_mem, char *err,
                      size_t errlen);

/* ro__merge_ranges sorts (first, count) pairs by first and joins those
 * that touch: shards become ready in any order, and a frame of consecutive
 * shards is then one range (a VecEnv reads it as one slice). A few dozen
 * pairs at most: an insertion sort. Returns the values left. */
size_t ro__merge_ranges(uint32_t *r, size_t nvalues);

#endif
