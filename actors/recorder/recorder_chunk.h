/*
 * The recorder's chunks (internal to actors/recorder/recorder_actor.c): what one
 * chunk holds, how a shard's step is copied into one on the shard's thread,
 * and the TransitionBatch the I/O thread encodes from one. ABI 1 envs
 * record float observations and one action (format version 1, as before
 * env ABI 2); ABI 2 envs record rows (an agent of an env each) of typed
 * tensors, composite actions and the mask (format version 2,
 * docs/replay.md).
 */
#ifndef RO_RECORDER_CHUNK_H
#define RO_RECORDER_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/recorder/recorder_port.h"
#include "rollout/env.h"
#include "rollout.pb-c.h"
#include "runtime/grant_pool.h"
#include "trajectory/abi2_format.h"

/* What the rows of a recording hold. Read-only after ro__rec_rows_init. */
typedef struct ro_rec_rows {
    bool abi2;
    bool discrete;    /* ABI 1: one int32 action per row */
    uint32_t cap;     /* rows per chunk */
    uint32_t obs_dim; /* ABI 1: floats per observation */
    uint32_t act_dim; /* ABI 1: floats per box action; 1 for discrete */
    /* ABI 2: the header's layout (the recorder's; outlives the rows), whose
     * tensors (name, dtype, shape) the batches carry, and what one row of
     * it holds, as every reader of the file computes it
     * (ro__traj_layout_rows). */
    const Rollout__V1__TrajectoryLayout *layout;
    ro_traj_rows_t row;
    /* --snapshot-every (format version 3): room for snap_cap env states of
     * state_bytes each (env_state.h blobs) per chunk; 0 without. */
    uint32_t snap_cap;
    size_t state_bytes;
} ro_rec_rows_t;

struct ro_rec_chunk {
    ro_pool_item_t item;  /* in the pool while free */
    ro_rec_chunk_t *next; /* the I/O queue's link */
    ro_rec_port_t *port;
    uint32_t count;   /* rows filled */
    uint64_t dropped; /* shard steps dropped just before this one */
    uint64_t reseed;  /* its reset rows flagged RO_TRAJ_RESEEDED: the learner's seed */
    uint32_t *env;
    uint32_t *agent; /* ABI 2 */
    uint64_t *episode;
    uint32_t *step;
    uint32_t *flags;
    float *reward;
    int32_t *act_i;                      /* ABI 1: 1 per row; ABI 2: ndisc per row */
    float *act_f;                        /* ABI 1: act_dim per row; ABI 2: nbox per row */
    float *obs;                          /* ABI 1 */
    uint8_t *tensor[RO_ENV_MAX_TENSORS]; /* ABI 2: row_bytes per row */
    uint8_t *mask;                       /* ABI 2: mask_width per row */
    /* Snapshots: the states of nsnap envs after this chunk's rows. */
    uint32_t nsnap;
    uint32_t *snap_env, *snap_step;
    uint64_t *snap_episode, *snap_env_steps;
    uint8_t *snap_state; /* nsnap x state_bytes */
};

/* A chunk seen as a TransitionBatch: the columns point into the chunk. */
typedef struct ro_rec_batch {
    Rollout__V1__TransitionBatch b;
    Rollout__V1__NamedTensor t[RO_ENV_MAX_TENSORS];
    Rollout__V1__NamedTensor *tp[RO_ENV_MAX_TENSORS];
    uint32_t shape[RO_ENV_MAX_TENSORS][RO_SPACE_MAX_DIMS + 1];
    /* Snapshots: [snap_cap] each, the I/O thread's (ro__rec_chunk_batch). */
    Rollout__V1__EnvSnapshot *snap;
    Rollout__V1__EnvSnapshot **snapp;
} ro_rec_batch_t;

/* ro__rec_rows_init sets rr for an ABI 2 env's recording layout (the
 * header's: it must outlive rr), or (layout NULL) an ABI 1 env's
 * observation floats and action; cap rows per chunk. 0, or a negative code
 * with one line in why if no reader would take the layout. */
int ro__rec_rows_init(ro_rec_rows_t *rr, const Rollout__V1__TrajectoryLayout *layout,
                      uint32_t obs_dim, uint32_t act_dim, bool discrete, uint32_t cap, char *why,
                      size_t whylen);

/* ro__rec_chunk_bytes is the memory of one chunk's columns. */
size_t ro__rec_chunk_bytes(const ro_rec_rows_t *rr);

/* ro__rec_max_record bounds the packed size of a full chunk. */
uint64_t ro__rec_max_record(const ro_rec_rows_t *rr);

/* ro__rec_chunk_carve points c's columns into mem (ro__rec_chunk_bytes). */
void ro__rec_chunk_carve(const ro_rec_rows_t *rr, ro_rec_chunk_t *c, char *mem);

/* ro__rec_chunk_fill copies the shard's step (or, with start, its reset)
 * into c, advancing the port's episode and step counters. The shard's
 * thread. */
void ro__rec_chunk_fill(const ro_rec_rows_t *rr, ro_rec_port_t *p, ro_rec_chunk_t *c, bool start);

/* ro__rec_port_skip advances the port's counters over a dropped step (or
 * start: a reseed's starts new episodes). The shard's thread. */
void ro__rec_port_skip(ro_rec_port_t *p, bool start);

/* ro__rec_chunk_batch views c as a batch in out (record number unset;
 * out->snap and snapp, if rr has snapshots, set by the caller). The I/O
 * thread. */
void ro__rec_chunk_batch(const ro_rec_rows_t *rr, const ro_rec_chunk_t *c, ro_rec_batch_t *out);

/* ro__rec_chunk_steps counts c's step rows (not resets). */
uint32_t ro__rec_chunk_steps(const ro_rec_chunk_t *c);

#endif
