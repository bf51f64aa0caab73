/*
 * rollout-replay's options and exit statuses (replay.h's engine, and its
 * inside, replay_internal.h).
 */
#ifndef RO_REPLAY_OPTS_H
#define RO_REPLAY_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RO_REPLAY_MAX_FILTER 64

/* A --env or --episode list: the values a row must have one of. */
typedef struct ro_replay_filter {
    uint64_t v[RO_REPLAY_MAX_FILTER];
    size_t n; /* 0 = every value */
} ro_replay_filter_t;

typedef struct ro_replay_opts {
    bool verify, dump, stats;
    bool resync;                 /* skip damaged records (default) or stop at the first */
    const char *plugin;          /* the recording's plugin env (never loaded from the header) */
    ro_replay_filter_t envs;     /* env indices (below 2^32) */
    ro_replay_filter_t episodes; /* dump and stats */
    bool from_set;               /* --from STEP: start every env at its last snapshot before */
    uint64_t from;
    /* --episode ENV:EPISODE: env ENV from its last snapshot before episode
     * EPISODE (envs.v[0] and episodes.v[0] hold them; from_set, from 0). */
    bool episode_seek;
    /* --fork STEP: stop before the entry at step `until`, keeping each
     * env's last observation (fork.h continues from there). */
    bool until_set;
    uint64_t until;
    FILE *out; /* dump and stats */
    FILE *log; /* warnings, errors, the verdict */
} ro_replay_opts_t;

/* Exit statuses, as rollout-replay uses them. */
enum {
    RO_REPLAY_OK = 0,       /* read everything; every replayed step matched */
    RO_REPLAY_FAILED = 1,   /* a divergence, or a damaged record */
    RO_REPLAY_UNUSABLE = 2, /* not a trajectory file, another recording, no env */
};

#endif
