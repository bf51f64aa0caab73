/*
 * rollout-replay's engine, inside (replay.h is its outside): the state of a
 * replay, shared by replay.c (reading and bookkeeping), replay_verify.c
 * (re-stepping the envs) and fork.c (continuing them). Single-threaded.
 */
#ifndef RO_REPLAY_INTERNAL_H
#define RO_REPLAY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "replay/recorded_env.h"
#include "replay/replay_opts.h"
#include "replay/replay_rows.h"
#include "replay/seek.h"

enum phase {
    P_NEW = 0, /* nothing seen yet */
    P_ACTIVE,  /* inside an episode */
    P_ENDED,   /* the episode ended: a reset comes next */
    P_LOST,    /* entries went missing: wait for the next reset */
};

typedef struct env_state {
    void *env; /* verify: the re-created instance */
    uint64_t episode;
    uint32_t step;
    uint8_t phase;
    bool verifiable; /* every entry so far has been replayed */
    bool tracked;    /* the current episode was seen from its reset */
    double ret;
    /* stats */
    uint64_t episodes, steps;
    double ret_sum, ret_min, ret_max;
    uint64_t len_sum, len_min, len_max;
} env_state_t;

struct ro_replay {
    ro_replay_opts_t o;
    Rollout__V1__TrajectoryHeader *hdr; /* the first file's */
    ro_pb_alloc_t hdr_alloc;            /* hdr was decoded with it */
    bool have_hdr;
    uint32_t last_part;
    env_state_t *envs;
    float *buf;
    ro_recorded_env_t renv;
    ro_replay_rows_t rows; /* format version 2: env ABI 2 rows */
    uint32_t agents;       /* rows per env step: 1 for version 1 */
    uint32_t act_n;        /* discrete: number of actions */
    bool discrete;
    bool diverged;
    bool unusable; /* a file or the env could not be used: no verdict of OK */
    uint64_t damaged, cut_short, dropped_shard_steps, unverified_envs;
    uint64_t verified_steps, verified_resets, entries;
    uint32_t files;
    const char *name; /* the file being read */
    uint64_t record;  /* the record being read */
    ro_seek_t seek;   /* --from: the plan, and the steps read before the entry */
    bool dump_on;     /* --from: the entry is at or after STEP */
    bool stopped;     /* --fork: reached opts.until */
    /* --fork: each env's last recorded env step, last_bytes an env: every
     * tensor's rows of its agents in turn (ABI 1: the obs floats), then
     * their mask rows. */
    uint8_t *last_rows;
    size_t last_bytes;
};

/* ro__replay_same_recording tells whether two headers are of files of one
 * recording (its rotated parts): equal in every field but `part`. Used by
 * replay.c and bisect.c. */
bool ro__replay_same_recording(const Rollout__V1__TrajectoryHeader *a,
                               const Rollout__V1__TrajectoryHeader *b);

/* ro__replay_create_env makes env i as the node made it and checks its
 * spaces against the header. RO_REPLAY_OK or RO_REPLAY_UNUSABLE (logged). */
int ro__replay_create_env(struct ro_replay *r, uint32_t i);

/* ro__replay_verify_entry re-steps entry k of b (its env step: every
 * agent's row for version 2) and compares it with the recording;
 * RO_REPLAY_FAILED after logging the first divergence. */
int ro__replay_verify_entry(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k);

#endif
