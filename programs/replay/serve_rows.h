/*
 * rollout-replay --serve's rows, one path for every recording (docs/
 * protocol.md "SEED mode and env ABI 2"): the recorded rows (row = env x
 * agents + agent) taken from a format version 1 recording's flat
 * observations or a version 2 recording's tensors, into the Observations
 * frame a node would send, and the learner's actions checked as a node
 * checks them and compared entry by entry with the recorded ones. An ABI 1
 * env (or a version 2 recording of an env shaped as one: one float32
 * tensor, one agent, one simple action) is served as a node serves it,
 * with an obs column and ABI 1 action checks; any other with typed
 * tensors, masks and composite actions (wire/typed_checks.h). Used by serve.c
 * on its loop thread only.
 */
#ifndef RO_REPLAY_SERVE_ROWS_H
#define RO_REPLAY_SERVE_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"
#include "wire/obs_frame.h"

typedef struct ro_serve_rows {
    const ro_space_layout_t *lay; /* the re-created env's (its bounds too); not owned */
    bool flat_records;            /* a format version 1 recording: rows' obs, not tensors */
    bool abi1_frames;             /* served as an ABI 1 env: obs columns, checked against as */
    ro_space_t os, as;            /* abi1_frames: the env's spaces (the welcome's) */
    uint32_t agents, num_rows;    /* rows: num_envs x agents */
    ro_traj_layout_msg_t lm;      /* the welcome's layout, box bounds included */
    /* The frame in flight: n rows, nfin of them with final tensors. */
    size_t cap; /* rows the scratch holds */
    uint32_t n, nfin;
    uint32_t *row;  /* row indices (env x agents + agent) */
    uint32_t *src;  /* a step position's row in the record */
    uint32_t *fidx; /* the positions with final tensors */
    uint64_t *step;
    float *rew;
    protobuf_c_boolean *term, *trunc, *start;
    uint8_t *tensor[RO_ENV_MAX_TENSORS], *fin[RO_ENV_MAX_TENSORS], *mask;
    ro_obs_tensors_t msgs; /* the frame's tensor messages */
    /* Per row (num_rows): its position in the frame being built (valid
     * where at_gen is the frame's), its steps served, and the learner's
     * answer to its last observation. */
    uint32_t *at;
    uint64_t *at_gen, gen;
    uint64_t *steps;
    bool *answered;
    int32_t *ans_i; /* num_rows x ndisc */
    float *ans_f;   /* num_rows x nbox */
    uint64_t compared, mismatches;
    char first_mismatch[240];
} ro_serve_rows_t;

/*
 * ro__serve_rows_init prepares v for header h (checked by the reader) and
 * lay, the layout of the env re-created as recorded (a version 2 header's
 * must match it); os and as: an ABI 1 env's spaces as one instance reports
 * them (the welcome's, and what actions are checked against), or NULL: for
 * a layout shaped as ABI 1's, its view of them.
 * The welcome's bounds are lay's; a version 2 header whose box parts carry
 * bounds must carry exactly those. 0, or a negative code with err
 * (RO_ENOTSUP for what --serve does not carry, RO_EINVAL for bounds that
 * are not the env's, RO_ENOMEM); free v with ro__serve_rows_free either
 * way.
 */
int ro__serve_rows_init(ro_serve_rows_t *v, const Rollout__V1__TrajectoryHeader *h,
                        const ro_space_layout_t *lay, const ro_space_t *os, const ro_space_t *as,
                        char *err, size_t errlen);

/* ro__serve_rows_free frees what v holds; a zeroed v is fine. */
void ro__serve_rows_free(ro_serve_rows_t *v);

/*
 * ro__serve_rows_fill builds the frame of recorded batch b (checked by the
 * reader): a step row answers its row's last observation (compared with
 * the learner's answer) and goes out; a reset row after its row's step
 * turns that row into an episode start (its last observation into final
 * tensors unless the step failed); another reset row goes out as a first
 * observation. Returns the frame's rows (0: none), or a negative code
 * with err for a record no node would send (a row twice, a mask that
 * allows no action).
 */
int ro__serve_rows_fill(ro_serve_rows_t *v, const Rollout__V1__TransitionBatch *b, char *err,
                        size_t errlen);

/* ro__serve_rows_frame points o (initialised) at the frame fill built, as
 * observations seq; valid until the next fill. */
void ro__serve_rows_frame(ro_serve_rows_t *v, uint64_t seq, Rollout__V1__Observations *o);

/* ro__serve_rows_answer checks a's actions for the frame in flight as a node
 * would (counts, ranges, masks, bounds) and keeps each row's, to compare
 * with its next recorded step. 0, or a negative code with err. */
int ro__serve_rows_answer(ro_serve_rows_t *v, const Rollout__V1__Actions *a, char *err,
                          size_t errlen);

#endif
