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

#include "replay/replay_opts.h"

typedef struct ro_replay ro_replay_t;

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

/* ro__replay_stopped tells whether the replay reached opts.until (--fork):
 * no more files are to be fed. */
bool ro__replay_stopped(const ro_replay_t *r);

/* ro__replay_finish writes the statistics and the verdict ("verify OK"
 * only if every file and the env could be used); returns the exit status. */
int ro__replay_finish(ro_replay_t *r);

/* ro__replay_free releases the envs and everything else. */
void ro__replay_free(ro_replay_t *r);

#endif
