/*
 * SEED mode's shared memory (docs/protocol.md "Observations in shared
 * memory"): where a node puts the observation columns of its envs for a
 * learner on the same host, and where that learner writes its actions.
 *
 * Two memories, both sealed memfds of the node (runtime/shared_mem.h),
 * handed to the learner with its welcome: the observation memory, one per
 * node, sealed against writes by anyone but the node; and one action
 * memory per connection, which only its learner gets and maps read-write. Every
 * column has one row per env of the node, indexed by env index, so a frame
 * needs to name only its envs, as ranges (Observations.ranges: a frame is
 * a few shards of consecutive envs), and a row is never moved.
 * The node writes a frame's rows before sending it and does not touch them
 * again until the frame is answered; the learner writes its actions for
 * those rows before sending the answer. The socket orders the two.
 *
 * This file is the layout and its checks, pure functions shared by the
 * node (which lays the memory out) and rollout-learner (which checks what a
 * welcome says against its size).
 */
#ifndef RO_WIRE_SEED_MEMORY_H
#define RO_WIRE_SEED_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "spaces/layout.h"
#include "wire/obs_frame.h"

/* The bits of the flags column. */
enum {
    RO_SEEDMEM_TERMINATED = 1,
    RO_SEEDMEM_TRUNCATED = 2,
    RO_SEEDMEM_EPISODE_START = 4,
    RO_SEEDMEM_HAS_FINAL = 8,
};

/* Where every column lies, in bytes from the start of its memory. */
typedef struct ro_seed_mem_layout {
    uint32_t num_envs;
    uint32_t obs_dim;   /* floats per observation */
    uint32_t act_width; /* values per action: 1 (discrete, int32) or the box's size (float32) */
    uint64_t obs_off, final_off, step_off, reward_off, flags_off, obs_bytes;
    uint64_t act_off, act_bytes;
    /* Env ABI 2 (typed_checks.h): num_envs counts rows; per tensor its row
     * bytes and columns; the mask; the box floats' column (act_off then
     * holds ndisc int32 entries a row). ntensors 0 for ABI 1. */
    uint32_t ntensors, mask_width, ndisc, nbox;
    uint64_t row_bytes[RO_ENV_MAX_TENSORS];
    uint64_t tensor_off[RO_ENV_MAX_TENSORS], final_tensor_off[RO_ENV_MAX_TENSORS];
    uint64_t mask_off, act_box_off;
} ro_seed_mem_layout_t;

/* ro__seed_mem_layout lays out num_envs rows of obs_dim floats and
 * act_width action values, each column on a cache line, each memory a
 * whole number of pages. */
void ro__seed_mem_layout(ro_seed_mem_layout_t *l, uint32_t num_envs, uint32_t obs_dim,
                         uint32_t act_width);

/* ro__seed_mem_to_wire describes l in m (initialised by the caller), and
 * the two memories by their places (1-based) among the descriptors that go
 * with the welcome (runtime/shared_mem.h). */
void ro__seed_mem_to_wire(const ro_seed_mem_layout_t *l, uint32_t obs_index, uint32_t act_index,
                          Rollout__V1__SeedMemory *m);

/* ro__seed_mem_check reads what a node said of its memory (untrusted) for
 * num_envs envs of obs_dim floats and act_width action values: every
 * column inside its memory, aligned for its type, the memories no larger
 * than this needs plus a page each. Fills out. RO_EPROTO with one line in
 * err naming the column otherwise. */
int ro__seed_mem_check(const Rollout__V1__SeedMemory *m, uint32_t num_envs, uint32_t obs_dim,
                       uint32_t act_width, ro_seed_mem_layout_t *out, char *err, size_t errlen);

/* ro__seed_mem_rows checks an in-memory frame's ranges ((first, count)
 * pairs, nvalues values) against num_envs: whole pairs, each non-empty and
 * inside, at most num_envs rows in all (*rows gets them). RO_EPROTO with one
 * line in err otherwise. */
int ro__seed_mem_rows(const uint32_t *ranges, size_t nvalues, uint32_t num_envs, uint32_t *rows,
                      char *err, size_t errlen);

/* ro__seed_mem_flags packs one env's flags column byte. */
static inline uint8_t ro__seed_mem_flags(bool terminated, bool truncated, bool episode_start,
                                         bool has_final)
{
    return (uint8_t)((terminated ? RO_SEEDMEM_TERMINATED : 0) |
                     (truncated ? RO_SEEDMEM_TRUNCATED : 0) |
                     (episode_start ? RO_SEEDMEM_EPISODE_START : 0) |
                     (has_final ? RO_SEEDMEM_HAS_FINAL : 0));
}

/* Env ABI 2: the same memory for num_rows rows of layout lay (an env of A
 * agents is A rows). The columns lie where ro__seed_mem_layout puts an ABI 1
 * env's: one plan for both. */

/* ro__seed_mem_layout_typed lays out every column of num_rows rows (each on
 * a cache line; each memory a whole number of pages). */
void ro__seed_mem_layout_typed(ro_seed_mem_layout_t *l, uint32_t num_rows,
                               const ro_space_layout_t *lay);

/* The SeedMemory message's typed columns, with the storage they point to:
 * the tensor messages of obs_frame.h, their offsets set. */
typedef ro_obs_tensors_t ro_seed_mem_msg_t;

/* ro__seed_mem_to_wire_typed is ro__seed_mem_to_wire for an ABI 2 layout
 * l of lay: m (initialised) points into s and lay until they go. */
void ro__seed_mem_to_wire_typed(const ro_seed_mem_layout_t *l, const ro_space_layout_t *lay,
                                uint32_t obs_index, uint32_t act_index, ro_seed_mem_msg_t *s,
                                Rollout__V1__SeedMemory *m);

/* ro__seed_mem_check_typed is ro__seed_mem_check for num_rows rows of
 * layout lay: sizes no larger than this build lays out plus a page each,
 * every column (one per tensor and final tensor, named and typed as the
 * layout's, shape [num_rows, ...]; step, reward, flags, mask, the two
 * action columns) inside its memory and aligned. Fills out. RO_EPROTO
 * naming the column otherwise. */
int ro__seed_mem_check_typed(const Rollout__V1__SeedMemory *m, uint32_t num_rows,
                             const ro_space_layout_t *lay, ro_seed_mem_layout_t *out, char *err,
                             size_t errlen);

#endif
