/*
 * A shard's connection to the recorder (recorder_actor.h): the one type the
 * recorder's modules (recorder_actor.c, recorder_chunk.c) and the env actor
 * share.
 */
#ifndef RO_RECORDER_PORT_H
#define RO_RECORDER_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/actor.h"
#include "runtime/grant_pool.h"

struct ro_step_batch;
typedef struct ro_recorder ro_recorder_t;
typedef struct ro_rec_chunk ro_rec_chunk_t;

/* A shard's connection to the recorder. Owned by the recorder; the fields
 * marked "shard" are touched only by the thread running the shard. */
typedef struct ro_rec_port {
    ro_recorder_t *rec;
    const struct ro_step_batch *batch; /* the shard's step, read on its thread */
    void *const *envs;                 /* the shard's envs (snapshots), on its thread */
    uint64_t *episode;                 /* shard: per env, the episode being recorded */
    uint32_t *step;                    /* shard: per env, steps recorded in it */
    uint64_t dropped;                  /* shard: steps dropped since the last chunk */
    bool start;                        /* shard: the capture waiting for a chunk is the reset */
    ro_msg_t resume_msg;               /* recorder -> shard: a chunk is granted */
    ro_pool_waiter_t waiter;           /* in the chunk pool's wait list (its mutex) */
} ro_rec_port_t;

#endif
