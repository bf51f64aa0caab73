/*
 * Env ABI 2 in trajectory files (format version 2, docs/replay.md): the
 * header's TrajectoryLayout (what replay needs to re-create and check the
 * env), built from a node's layout and checked when read; and the checks of
 * a version 2 record's rows (agents as rows, typed tensors, composite
 * actions, the mask). Pure functions: any thread. Every check treats the
 * message as untrusted and names the field.
 */
#ifndef RO_TRAJ_ABI2_FORMAT_H
#define RO_TRAJ_ABI2_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "spaces/layout.h"

/* What the rows of a version 2 file hold, derived from a checked layout. */
typedef struct ro_traj_rows {
    uint32_t agents;
    uint32_t ntensors;
    size_t row_bytes[RO_ENV_MAX_TENSORS]; /* bytes of one row of tensor k */
    uint32_t elem[RO_ENV_MAX_TENSORS];    /* bytes of one element of tensor k */
    uint32_t ndisc, nbox;                 /* int32 entries and floats per row */
    uint32_t mask_width;                  /* mask bytes per row */
    size_t obs_bytes;                     /* bytes of one row over every tensor */
} ro_traj_rows_t;

/* The header's layout built from a node's, with the storage it points to.
 * Owns nvec (free with ro__traj_layout_msg_free). */
typedef struct ro_traj_layout_msg {
    Rollout__V1__TrajectoryLayout msg;
    Rollout__V1__NamedTensor t[RO_ENV_MAX_TENSORS];
    Rollout__V1__NamedTensor *tp[RO_ENV_MAX_TENSORS];
    char name[RO_ENV_MAX_TENSORS][RO_ENV_MAX_NAME];
    uint32_t shape[RO_ENV_MAX_TENSORS][RO_SPACE_MAX_DIMS];
    Rollout__V1__TrajectoryActionPart p[RO_ENV_MAX_PARTS];
    Rollout__V1__TrajectoryActionPart *pp[RO_ENV_MAX_PARTS];
    uint32_t pshape[RO_ENV_MAX_PARTS][RO_SPACE_MAX_DIMS];
    uint32_t *nvec; /* every multi-discrete part's counts, back to back */
    char metric[RO_ENV_MAX_METRICS][RO_ENV_MAX_NAME];
    char *metricp[RO_ENV_MAX_METRICS];
} ro_traj_layout_msg_t;

/* ro__traj_layout_msg_init fills m from lay (copied: lay need not outlive
 * m). Returns 0 or RO_ENOMEM; m is then empty. */
int ro__traj_layout_msg_init(ro_traj_layout_msg_t *m, const ro_space_layout_t *lay);

/* ro__traj_layout_msg_free frees what m owns; a zeroed m is fine. */
void ro__traj_layout_msg_free(ro_traj_layout_msg_t *m);

/* ro__traj_layout_rows checks a header's layout (every field of an
 * untrusted file) and derives what its rows hold. 0, or RO_EBADMSG with
 * why naming the field, e.g. "layout tensors[1] ('pos') has 5 dims". */
int ro__traj_layout_rows(const Rollout__V1__TrajectoryLayout *l, ro_traj_rows_t *rows, char *why,
                         size_t whylen);

/* ro__traj_validate_rows checks a decoded version 2 batch against the
 * header's layout (already checked by ro__traj_layout_rows: this call reads
 * only its sizes, in constant time): column lengths, agents in order within
 * each env step, the tensors' names, dtypes, shapes and bytes, the mask. 0
 * or RO_EBADMSG with why. */
int ro__traj_validate_rows(const Rollout__V1__TrajectoryHeader *h,
                           const Rollout__V1__TransitionBatch *b, char *why, size_t whylen);

/* ro__traj_layout_matches tells whether the env replay re-created (lay) has
 * the recorded layout l: agents, tensors (name, dtype, shape), parts (kind,
 * n, nvec, shape) and the mask. 0, or RO_EINVAL with why naming the first
 * difference. */
int ro__traj_layout_matches(const Rollout__V1__TrajectoryLayout *l, const ro_space_layout_t *lay,
                            char *why, size_t whylen);

/* ro__traj_packed_rows_size and ro__traj_pack_rows encode fields 11 to 13
 * of a batch (agent, tensors, mask) as protobuf-c would; the one-pass
 * encoder of format.c appends them. pack returns the bytes written. */
size_t ro__traj_packed_rows_size(const Rollout__V1__TransitionBatch *b);
size_t ro__traj_pack_rows(const Rollout__V1__TransitionBatch *b, uint8_t *out);

#endif
