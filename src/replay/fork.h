/*
 * rollout-replay --fork STEP (docs/replay.md "Forking"): after a replay
 * that stopped at step STEP (replay_opts.h: until), every env (or those of
 * --env) goes on from its recorded state with another policy, and the new
 * transitions are written to a new recording that names its parent and
 * STEP. Its first record holds each forked env's state, so the fork is
 * itself replayed (--verify) from there. Env ABI 1 envs. Single-threaded.
 */
#ifndef RO_REPLAY_FORK_H
#define RO_REPLAY_FORK_H

#include <stdint.h>

#include "replay/replay_internal.h"

typedef struct ro_fork_opts {
    uint64_t step;      /* STEP: where the replay stopped */
    const char *policy; /* "random" or a PolicyParams file */
    uint64_t steps;     /* env steps to take, over all forked envs */
    const char *out;    /* the new recording */
    const char *parent; /* the recording forked (its first file), for the header */
    bool seed_set;      /* --seed: the new actions' seed (else the recording's) */
    uint64_t seed;
} ro_fork_opts_t;

/*
 * ro__replay_fork runs the fork on r (fed up to the step: stopped, or at
 * the recording's end). Writes what it did, or why it cannot (an env whose
 * state at the step is unknown, an ABI 2 recording, a policy that does
 * not fit the env), on r's log. Returns an exit status (replay_opts.h).
 */
int ro__replay_fork(struct ro_replay *r, const ro_fork_opts_t *fo);

#endif
