/*
 * The Observations frame (proto/rollout.proto), filled in one place for
 * every sender: the node's hub (actors/hub/obs_codec.c) and rollout-replay
 * --serve, env ABI 1 and ABI 2 alike. A sender keeps its rows in columns
 * of its own; these point a frame at them. The typed tensors' messages
 * (names, dtypes, shapes from an env's layout) are made here too, for a
 * frame and for a welcome's SeedMemory (seed_memory.h). Pure data work:
 * any thread.
 */
#ifndef RO_WIRE_OBS_FRAME_H
#define RO_WIRE_OBS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "spaces/layout.h"

/* The per-row columns of one frame: a sender's arrays, rows long
 * (final_index: the rows with a final observation). */
typedef struct ro_obs_cols {
    uint32_t *env; /* env indices (ABI 2: row indices, env x agents + agent) */
    uint64_t *step;
    float *reward;
    protobuf_c_boolean *terminated, *truncated, *episode_start;
    uint32_t *final_index;
} ro_obs_cols_t;

/* ro__obs_frame_cols points o (initialised) at c's first rows rows and
 * nfinal final indices, under seq. */
void ro__obs_frame_cols(Rollout__V1__Observations *o, uint64_t seq, const ro_obs_cols_t *c,
                        size_t rows, size_t nfinal);

/* Two lists of an env ABI 2 layout's tensor messages: [0] the tensors,
 * [1] the final ones, with the shapes they point to. */
typedef struct ro_obs_tensors {
    Rollout__V1__NamedTensor t[2][RO_ENV_MAX_TENSORS];
    Rollout__V1__NamedTensor *tp[2][RO_ENV_MAX_TENSORS];
    uint32_t shape[2][RO_ENV_MAX_TENSORS][RO_SPACE_MAX_DIMS + 1];
} ro_obs_tensors_t;

/* ro__obs_tensors_init names, types and shapes both lists after lay's
 * tensors ([rows, the tensor's dims...]), no data yet. They point into s
 * and lay until those go. */
void ro__obs_tensors_init(ro_obs_tensors_t *s, const ro_space_layout_t *lay, uint32_t rows);

/* ro__obs_frame_tensors points o's tensors, final tensors and mask at
 * rows rows of tensor[k] and nfinal of final[k] (each lay->t[k].row_bytes
 * a row) and rows of mask (lay->mask_width a row). s was made by
 * ro__obs_tensors_init for lay. */
void ro__obs_frame_tensors(Rollout__V1__Observations *o, ro_obs_tensors_t *s,
                           const ro_space_layout_t *lay, uint8_t *const *tensor,
                           uint8_t *const *final, uint8_t *mask, size_t rows, size_t nfinal);

#endif
