/*
 * rollout-replay --from STEP (docs/replay.md "Seeking"): where to start
 * reading a recording with snapshots (format version 3) so that every env
 * starts from its last snapshot at or before step STEP instead of from the
 * recording's first step. STEP counts the recording's steps over all envs,
 * as the summary counts them (rows for env ABI 2). The plan comes from the
 * file's snapshot index (trajectory/snapshot_index.h): no scan. The env
 * states themselves come from the records, checked (envs/env_state.h)
 * before an env sees them. Single-threaded, as replay.h.
 */
#ifndef RO_REPLAY_SEEK_H
#define RO_REPLAY_SEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "replay/recorded_env.h"
#include "rollout.pb-c.h"
#include "trajectory/reader.h"

typedef struct ro_seek {
    uint64_t from; /* STEP */
    /* Per env: skip its entries in records up to after[env], and load its
     * snapshot from record after[env] (0: no snapshot: entries from the
     * start; UINT64_MAX: an env not asked for). NULL: no plan. */
    uint64_t *after;
    uint32_t num_envs;
    uint64_t gstep;      /* steps of the recording before the next entry */
    bool base_pending;   /* gstep comes from the first record read */
    uint64_t base_after; /* that record's steps_after (the index's) */
    uint64_t restored;   /* snapshots loaded */
    uint64_t start_record;
    /* --episode ENV:EPISODE: plan for env `env` alone, from its last
     * snapshot before that episode began (by its snapshots' episode and
     * step, not by steps). */
    bool by_episode;
    uint32_t env;
    uint64_t episode;
} ro_seek_t;

/*
 * ro__seek_plan plans the read of the file rd reads (its header checked)
 * from step s->from: each wanted env (want[env], NULL: all) from its last
 * snapshot whose record ends at or before that step. If every wanted env
 * has one, rd is moved to the earliest of those records and 1 is returned;
 * otherwise (no index, a damaged one, an env without a snapshot early
 * enough) a note goes to log, rd stays at the first record and 0 is
 * returned: the file is read from its start. With only_indexed (a fork's
 * file: rollout-replay --fork), an env the index never names is not
 * wanted. RO_ENOMEM.
 */
int ro__seek_plan(ro_seek_t *s, ro_traj_reader_t *rd, const bool *want, bool only_indexed,
                  FILE *log, const char *name);

/* ro__seek_skip tells whether entry k of b comes before its env's
 * snapshot (the env's state is already past it). */
static inline bool ro__seek_skip(const ro_seek_t *s, const Rollout__V1__TransitionBatch *b,
                                 size_t k)
{
    return s->after && b->record <= s->after[b->env[k]];
}

/* ro__seek_snapshot returns the snapshot of b to load now (its record is
 * its env's planned one), the i-th of b's, or NULL. */
const Rollout__V1__EnvSnapshot *ro__seek_snapshot(const ro_seek_t *s,
                                                  const Rollout__V1__TransitionBatch *b, size_t i);

/*
 * ro__seek_load loads snapshot sn into env (an instance of e made as the
 * node made it): its blob is checked against the recording's env (name, a
 * hash of the header's env args and episode limit, size) before the env
 * sees it. 0, or a negative code with one line in err.
 */
int ro__seek_load(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h, void *env,
                  const Rollout__V1__EnvSnapshot *sn, char *err, size_t errlen);

/* ro__seek_need is the reader's skim filter (reader.h) for a plan: a
 * record is needed if any of its entries comes after its env's snapshot
 * (or names no env of the plan, which decoding then reports). */
bool ro__seek_need(void *seek, uint64_t record, uint32_t env);

/* ro__seek_free frees the plan. */
void ro__seek_free(ro_seek_t *s);

#endif
