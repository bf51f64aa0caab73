/*
 * rollout-replay's engine: reads trajectory files in order and, per
 * option, re-steps the envs with the recorded actions (verify), writes one
 * JSON object per entry (dump) and gathers episode statistics (stats).
 * See docs/replay.md. Single-threaded.
 */
#ifndef RO_REPLAY_H
#define RO_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RO_REPLAY_MAX_FILTER 64

typedef struct ro_replay_opts {
    bool verify, dump, stats;
    bool resync;        /* skip damaged records (default) or stop at the first */
    const char *plugin; /* the recording's plugin env (never loaded from the header) */
    uint32_t envs[RO_REPLAY_MAX_FILTER];
    size_t nenvs; /* 0 = every env */
    uint64_t episodes[RO_REPLAY_MAX_FILTER];
    size_t nepisodes; /* 0 = every episode (dump and stats) */
    FILE *out;        /* dump and stats */
    FILE *log;        /* warnings, errors, the verdict */
} ro_replay_opts_t;

typedef struct ro_replay ro_replay_t;

/* Exit statuses, as rollout-replay uses them. */
enum {
    RO_REPLAY_OK = 0,       /* read everything; every replayed step matched */
    RO_REPLAY_FAILED = 1,   /* a divergence, or a damaged record */
    RO_REPLAY_UNUSABLE = 2, /* not a trajectory file, another recording, no env */
};

/* ro__replay_new prepares a replay. Returns 0 or RO_ENOMEM. */
int ro__replay_new(ro_replay_t **out, const ro_replay_opts_t *o);

/*
 * ro__replay_feed processes one file (data/len bytes; name for messages).
 * Returns RO_REPLAY_OK to go on, RO_REPLAY_FAILED after a divergence (the
 * first one is reported: stop), or RO_REPLAY_UNUSABLE with a line in the
 * log. Damaged records are reported and remembered for ro__replay_finish.
 */
int ro__replay_feed(ro_replay_t *r, const char *name, const uint8_t *data, size_t len);

/* ro__replay_feed_path is ro__replay_feed for the file at path, read with
 * pread (a file that shrinks meanwhile is an error, not a crash). */
int ro__replay_feed_path(ro_replay_t *r, const char *path);

/* ro__replay_finish writes the statistics and the verdict ("verify OK"
 * only if every file and the env could be used); returns the exit status. */
int ro__replay_finish(ro_replay_t *r);

/* ro__replay_free releases the envs and everything else. */
void ro__replay_free(ro_replay_t *r);

#endif
