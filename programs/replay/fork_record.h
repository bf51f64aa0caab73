/*
 * rollout-replay --fork's run (fork.c drives the envs and the policy) and
 * its records (fork_record.c): one record per round of steps, in the
 * parent's format (an ABI 1 recording's entries, or an ABI 2 one's rows of
 * typed tensors, composite actions and masks), with every forked env's
 * state in the first record and every snapshot_every rounds.
 * Single-threaded.
 */
#ifndef RO_REPLAY_FORK_RECORD_H
#define RO_REPLAY_FORK_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "envs/registry.h"
#include "policy/policy.h"
#include "replay/replay_internal.h"
#include "spaces/layout.h"
#include "trajectory/writer.h"

/* What --fork was asked (cli.c fills it). */
typedef struct ro_fork_opts {
    uint64_t step;      /* STEP: where the replay stopped */
    const char *policy; /* "random" or a PolicyParams file */
    uint64_t steps;     /* env steps to take, over all forked envs */
    const char *out;    /* the new recording */
    const char *parent; /* the recording forked (its first file), for the header */
    bool seed_set;      /* --seed: the new actions' seed (else the recording's) */
    uint64_t seed;
} ro_fork_opts_t;

typedef struct ro_fork_run {
    struct ro_replay *r;
    const ro_fork_opts_t *fo;
    const ro_env_kind_t *kind;
    const ro_space_layout_t *lay; /* the env's: renv's (ABI 2) or lay1 (ABI 1's shim) */
    ro_space_layout_t lay1;
    bool own_lay;
    uint32_t ids0;         /* the first forked env (its instance gives an ABI 1 layout) */
    uint32_t n, A;         /* forked envs; agents (rows) per env */
    uint32_t *ids;         /* [n] env indices */
    uint64_t *episode;     /* [n] */
    uint32_t *step;        /* [n] steps of the current episode */
    ro_rng_t *rng, **rngp; /* [n x A] action streams */
    ro_policy_t *pol;
    ro_policy_ws_t *ws;
    float *state, **statep; /* recurrent policy: [n x A] states (zeros at the fork) */
    uint8_t *first;         /* [n x A] the row's observation starts an episode */
    /* What the envs show now: [n x A] rows of each tensor, and of the mask. */
    uint8_t *obs[RO_ENV_MAX_TENSORS];
    uint8_t *mask;
    int32_t *act_i; /* [n x A x ndisc] the actions chosen */
    float *act_f;   /* [n x A x nbox] */
    ro_step_t *st;  /* [A] one env step's outcomes */
    /* One record's columns: each env's step rows and, after an episode's
     * end, its reset rows (2 x n x A rows at most). */
    uint32_t *c_env, *c_agent, *c_step, *c_flags;
    uint64_t *c_ep;
    float *c_rew, *c_actf;
    int32_t *c_acti;
    uint8_t *c_t[RO_ENV_MAX_TENSORS], *c_mask;
    size_t rows; /* rows in the record being built */
    Rollout__V1__NamedTensor nt[RO_ENV_MAX_TENSORS], *ntp[RO_ENV_MAX_TENSORS];
    uint32_t shape[RO_ENV_MAX_TENSORS][RO_SPACE_MAX_DIMS + 1];
    /* Snapshots: [n] messages and n blobs of blob bytes. */
    uint64_t params; /* the envs' params hash (state blobs) */
    Rollout__V1__EnvSnapshot *sn, **snp;
    uint8_t *blobs;
    size_t blob;
    uint64_t finished; /* episodes ended */
} ro_fork_run_t;

/* ro__fork_fail logs one line ("rollout-replay: --fork: ...") and returns
 * status. */
__attribute__((format(printf, 3, 4))) int ro__fork_fail(ro_fork_run_t *f, int status,
                                                        const char *fmt, ...);

/* ro__fork_record_init allocates one record's columns and the snapshots'
 * room (f's envs, layout and agents known). RO_REPLAY_OK or, logged,
 * RO_REPLAY_UNUSABLE. */
int ro__fork_record_init(ro_fork_run_t *f);
void ro__fork_record_free(ro_fork_run_t *f);

/* ro__fork_record_max bounds one record's bytes (2 x n x A rows, every
 * env's state). */
uint64_t ro__fork_record_max(const ro_fork_run_t *f);

/* ro__fork_record_begin starts an empty record in b; ro__fork_record_end
 * points b's columns at the rows put since. */
void ro__fork_record_begin(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b);
void ro__fork_record_end(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b);

/* ro__fork_put_step puts env j's step rows (the actions in f->act_*, the
 * outcomes in f->st, the observations the step made): failed, its rows
 * are flagged so with zero observations; end, the step ended the episode
 * (no mask is kept with a final observation, as the node). */
void ro__fork_put_step(ro_fork_run_t *f, uint32_t j, bool failed, bool end);

/* ro__fork_put_reset puts env j's reset rows (its observations now). */
void ro__fork_put_reset(ro_fork_run_t *f, uint32_t j);

/* ro__fork_snapshot puts every forked env's state into b (env_steps: its
 * steps since the fork). RO_REPLAY_OK or, logged, RO_REPLAY_FAILED. */
int ro__fork_snapshot(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b, uint64_t env_steps);

#endif
