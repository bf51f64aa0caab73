/*
 * rollout-replay's env ABI 2 rows (trajectory format version 2,
 * docs/replay.md): re-stepping one env step of a recorded env (every agent's
 * row) against a re-created instance, bit for bit on every tensor, the
 * mask, the rewards and the flags, as the node steps it (env_actor.c:
 * max_episode_steps, --check-finite, masks, episode ends of every agent);
 * and the --dump lines of rows. Single-threaded, as replay.h.
 */
#ifndef RO_REPLAY_ROWS_H
#define RO_REPLAY_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rollout.pb-c.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"

typedef struct ro_replay_rows {
    ro_traj_rows_t rows;          /* what the header's layout says a row holds */
    const ro_space_layout_t *lay; /* verify: the re-created env's (the header's), else NULL */
    bool check_finite;
    uint32_t max_steps;
    /* verify: one env step's outputs, every agent's row */
    uint8_t *tensor[RO_ENV_MAX_TENSORS];
    uint8_t *mask;
    ro_step_t *st;
} ro_replay_rows_t;

/* What diverged: the agent row and a description ("reward: recorded 1
 * (0x3f800000), replayed 0 (0x00000000)"). */
typedef struct ro_replay_div {
    uint32_t agent;
    char what[320];
} ro_replay_div_t;

/* ro__replay_rows_init prepares rr for the header h (checked by the
 * reader); lay, the re-created env's layout, only to verify. Returns 0 or
 * RO_ENOMEM. */
int ro__replay_rows_init(ro_replay_rows_t *rr, const Rollout__V1__TrajectoryHeader *h,
                         const ro_space_layout_t *lay);

/* ro__replay_rows_free frees rr's buffers; a zeroed rr is fine. */
void ro__replay_rows_free(ro_replay_rows_t *rr);

/* ro__replay_rows_instance_ok tells whether instance env (of vt2) reports
 * the layout rr verifies with (the buffers are sized from it); why says
 * how it differs. */
bool ro__replay_rows_instance_ok(const ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                                 char *why, size_t whylen);

/* ro__replay_rows_reset resets env and compares with the reset rows k..
 * k+agents-1 of b. Returns 0 if they match, 1 with *d if not. */
int ro__replay_rows_reset(ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                          const Rollout__V1__TransitionBatch *b, size_t k, ro_replay_div_t *d);

/* ro__replay_rows_step steps env with the actions of the step rows k..
 * k+agents-1 of b and compares. Returns 0 if they match, 1 with *d if not
 * (a recorded action outside its space is reported so too, not stepped). */
int ro__replay_rows_step(ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                         const Rollout__V1__TransitionBatch *b, size_t k, ro_replay_div_t *d);

/* ro__replay_rows_dump writes row k of b as one JSON line on f. */
void ro__replay_rows_dump(const ro_replay_rows_t *rr, const Rollout__V1__TrajectoryLayout *l,
                          FILE *f, const Rollout__V1__TransitionBatch *b, size_t k);

/* ro__replay_dump writes the env step at entry k of b as JSON lines on f:
 * one per agent's row (format version 2, through ro__replay_rows_dump),
 * or the entry of an ABI 1 file. */
void ro__replay_dump(const ro_replay_rows_t *rr, const Rollout__V1__TrajectoryHeader *h,
                     uint32_t agents, FILE *f, const Rollout__V1__TransitionBatch *b, size_t k);

/* ro__replay_stats_line writes one --stats line: an env's (h NULL) or,
 * with h, the "all" line that also names the seed and node index. */
void ro__replay_stats_line(FILE *f, const char *env, uint64_t eps, uint64_t steps, double rs,
                           double rmin, double rmax, uint64_t ls, uint64_t lmin, uint64_t lmax,
                           const Rollout__V1__TrajectoryHeader *h);

/* ro__replay_rows_mean_reward is the env step's reward as the node counts
 * it in returns: the mean over the agents of rows k.. k+agents-1. */
double ro__replay_rows_mean_reward(const ro_replay_rows_t *rr,
                                   const Rollout__V1__TransitionBatch *b, size_t k);

/* ro__replay_same_layout tells whether two headers carry the same layout
 * (both none, or equal bytes). */
bool ro__replay_same_layout(const Rollout__V1__TrajectoryHeader *a,
                            const Rollout__V1__TrajectoryHeader *b);

#endif
