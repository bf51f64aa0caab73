/*
 * rollout-replay --fork STEP (docs/replay.md "Forking"): after a replay
 * that stopped at step STEP (replay_opts.h: until), every env (or those of
 * --env) goes on from its recorded state with another policy, and the new
 * transitions are written to a new recording that names its parent and
 * STEP. Its first record holds each forked env's state, so the fork is
 * itself replayed (--verify) from there. Envs of either ABI, with any
 * policy (a recurrent one starts from zeros at the fork). Single-threaded.
 */
#ifndef RO_REPLAY_FORK_H
#define RO_REPLAY_FORK_H

#include <stdint.h>

#include "replay/fork_record.h"
#include "replay/replay_internal.h"

/*
 * ro__replay_fork runs the fork on r (fed up to the step: stopped, or at
 * the recording's end). Writes what it did, or why it cannot (an env whose
 * state at the step is unknown, a policy that does not fit the env), on
 * r's log. Returns an exit status (replay_opts.h).
 */
int ro__replay_fork(struct ro_replay *r, const ro_fork_opts_t *fo);

#endif
