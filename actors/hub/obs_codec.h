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

/* Scratch for one Observations frame of up to max_rows envs. One owner. */
typedef struct ro_obs_encoder {
    uint32_t max_rows, obs_dim;
    uint32_t *env;
    uint64_t *step;
    float *obs, *reward, *final_obs;
    protobuf_c_boolean *terminated, *truncated, *episode_start;
    uint32_t *final_index;
    uint32_t *ranges; /* [2 x max_rows]: an in-memory frame's (first, count) pairs */
    /* Env ABI 2 (ro__obs_encoder_init_abi2): the layout, each tensor's
     * rows, the final rows, the mask rows, and the messages' tensors. */
    const struct ro_space_layout *lay;
    uint8_t *tensor[RO_ENV_MAX_TENSORS], *final_tensor[RO_ENV_MAX_TENSORS], *mask;
    ro_obs_tensors_t msgs;
} ro_obs_encoder_t;

/* ro__obs_encoder_init allocates scratch for max_rows envs of obs_dim
 * floats. Returns 0 or RO_ENOMEM (then free it). */
int ro__obs_encoder_init(ro_obs_encoder_t *e, uint32_t max_rows, uint32_t obs_dim);
void ro__obs_encoder_free(ro_obs_encoder_t *e);

/* ro__obs_encode fills o (initialised) with the step batches of the list
 * items (linked through next, at most max_rows envs in all), under seq. o
 * points into the encoder until the next call. */
void ro__obs_encode(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                    Rollout__V1__Observations *o);

/* ro__obs_encode_memory is ro__obs_encode for a learner that maps the
 * node's observation memory mem (laid out as l): the step batches'
 * columns go to their env rows there, o gets only seq and the envs as
 * ranges, in order, one per run of consecutive envs. */
void ro__obs_encode_memory(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                           const ro_seed_mem_layout_t *l, uint8_t *mem,
                           Rollout__V1__Observations *o);

/* ro__actions_apply_memory applies an Actions frame in_memory: each step
 * batch's actions are copied out of the learner's action memory act_mem
 * (laid out as l) at its env rows, then checked (the copy: the learner may
 * write the memory at any time). Returns 0, or a negative code with one
 * line in err (the batches' actions are then not to be used). */
int ro__actions_apply_memory(const Rollout__V1__Actions *a, ro_batch_item_t *items,
                             const ro_space_t *act, const ro_seed_mem_layout_t *l,
                             const uint8_t *act_mem, char *err, size_t errlen);

/* ro__actions_apply checks an Actions frame against the step batches it
 * answers (items, `rows` envs in all, action space act) and writes each
 * env's action into its batch. Returns 0, or a negative code with one
 * line in err (nothing written then). */
int ro__actions_apply(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                      const ro_space_t *act, char *err, size_t errlen);

/* ro__merge_ranges sorts (first, count) pairs by first and joins those
 * that touch: shards become ready in any order, and a frame of consecutive
 * shards is then one range (a VecEnv reads it as one slice). A few dozen
 * pairs at most: an insertion sort. Returns the values left. */
size_t ro__merge_ranges(uint32_t *r, size_t nvalues);

/* The same for an env of env ABI 2 (layout lay, not ABI 1 shaped; the
 * frame's typed tensors, docs/protocol.md "SEED mode and env ABI 2"). */

/* ro__obs_encoder_init_abi2 is ro__obs_encoder_init for rows of lay (lay
 * outlives the encoder): max_rows rows of every tensor, final tensor and
 * mask. 0 or RO_ENOMEM (then free it). */
int ro__obs_encoder_init_abi2(ro_obs_encoder_t *e, uint32_t max_rows,
                              const struct ro_space_layout *lay);

/* ro__obs_encode_abi2 is ro__obs_encode for an ABI 2 encoder: env holds
 * row indices (first x agents + j), and the tensors, final tensors and
 * mask carry the rows. o points into the encoder until the next call. */
void ro__obs_encode_abi2(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                         Rollout__V1__Observations *o);

/* ro__obs_encode_memory_abi2 is ro__obs_encode_memory for an ABI 2
 * encoder: every column to its rows (first x agents + j) of mem (laid out
 * as l, ro__seed_mem_layout_typed); o gets seq and the rows as ranges. */
void ro__obs_encode_memory_abi2(ro_obs_encoder_t *e, ro_batch_item_t *items, uint64_t seq,
                                const ro_seed_mem_layout_t *l, uint8_t *mem,
                                Rollout__V1__Observations *o);

/* ro__actions_apply_memory_abi2 applies an in_memory Actions frame: each
 * batch's rows copied out of act_mem (laid out as l), then checked as
 * ro__actions_apply_abi2 checks them. 0, or a negative code with one line
 * in err (the batches' actions are then not to be used). */
int ro__actions_apply_memory_abi2(const Rollout__V1__Actions *a, ro_batch_item_t *items,
                                  const struct ro_space_layout *lay, const ro_seed_mem_layout_t *l,
                                  const uint8_t *act_mem, char *err, size_t errlen);

/* ro__actions_apply_abi2 checks an Actions frame answering the step
 * batches items (`rows` rows in all) of layout lay (every entry in range
 * and allowed by its row's mask, every box float finite and in bounds)
 * and writes each row's ndisc entries and nbox floats into its batch.
 * Returns 0, or a negative code with one line in err (nothing written). */
int ro__actions_apply_abi2(const Rollout__V1__Actions *a, ro_batch_item_t *items, uint32_t rows,
                           const struct ro_space_layout *lay, char *err, size_t errlen);

#endif
