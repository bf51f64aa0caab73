/*
 * rollout-replay --from: the plan from the snapshot index, and loading a
 * recorded env state (seek.h).
 */
#include "replay/seek.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_state.h"
#include "runtime/error.h"
#include "trajectory/snapshot_index.h"

/* before_episode tells whether the snapshot of env in the record at (off,
 * record) was taken before episode ep began (or just as it began): its
 * episode is earlier, or it is ep at step 0. A record that cannot be read
 * counts as not before. */
static bool before_episode(ro_traj_reader_t *rd, uint64_t off, uint64_t record, uint32_t env,
                           uint64_t ep)
{
    Rollout__V1__TransitionBatch *b;
    ro__traj_reader_seek(rd, (size_t)off, record);
    if (ro__traj_reader_next(rd, &b) != RO_TRAJ_BATCH)
        return false;
    bool before = false;
    for (size_t i = 0; i < b->n_snapshots; i++)
        if (b->snapshots[i]->env == env)
            before = b->snapshots[i]->episode < ep ||
                     (b->snapshots[i]->episode == ep && b->snapshots[i]->step == 0);
    ro__traj_batch_free(rd, b);
    return before;
}

/* episode_entry finds, by a binary search over env's index entries (their
 * episodes grow with them), the last one before episode ep; SIZE_MAX if
 * none. */
static size_t episode_entry(ro_traj_reader_t *rd, const ro_traj_index_t *ix, uint32_t env,
                            uint64_t ep)
{
    size_t n = 0, *of = malloc((ix->n + 1) * sizeof *of);
    for (size_t k = 0; of && k < ix->n; k++)
        if (ix->env[k] == env)
            of[n++] = k;
    long lo = -1, hi = (long)n;
    while (of && hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (before_episode(rd, ix->offset[of[mid]], ix->record[of[mid]], env, ep))
            lo = mid;
        else
            hi = mid;
    }
    size_t k = of && lo >= 0 ? of[lo] : SIZE_MAX;
    free(of);
    return k;
}

int ro__seek_plan(ro_seek_t *s, ro_traj_reader_t *rd, const bool *want, bool only_indexed,
                  FILE *log, const char *name)
{
    const uint32_t n = rd->hdr->num_envs;
    const size_t start = rd->off; /* the first record: the file was just opened */
    ro_traj_index_t ix;
    char err[256];
    int rc = ro__traj_index_load(rd, &ix, err, sizeof err);
    if (rc == RO_ENOMEM)
        return rc;
    if (rc) {
        fprintf(log, "rollout-replay: note: %s: %s: reading from its start\n", name, err);
        return 0;
    }
    uint64_t *after = calloc(n, sizeof *after), *off = calloc(n, sizeof *off),
             *steps = calloc(n, sizeof *steps);
    if (!after || !off || !steps) {
        free(after), free(off), free(steps);
        ro__traj_index_free(&ix);
        return RO_ENOMEM;
    }
    bool *named = calloc(n, sizeof *named);
    if (!named) {
        free(after), free(off), free(steps);
        ro__traj_index_free(&ix);
        return RO_ENOMEM;
    }
    for (size_t k = 0; k < ix.n; k++)
        named[ix.env[k]] = true;
    /* The index is in file order: the last fitting entry of an env wins. */
    for (size_t k = 0; !s->by_episode && k < ix.n && ix.steps_after[k] <= s->from; k++) {
        after[ix.env[k]] = ix.record[k];
        off[ix.env[k]] = ix.offset[k];
        steps[ix.env[k]] = ix.steps_after[k];
    }
    size_t k = s->by_episode && s->env < n ? episode_entry(rd, &ix, s->env, s->episode) : SIZE_MAX;
    if (k != SIZE_MAX) {
        after[s->env] = ix.record[k];
        off[s->env] = ix.offset[k];
        steps[s->env] = ix.steps_after[k];
    }
    uint64_t first = UINT64_MAX, first_off = 0, first_steps = 0;
    uint32_t missing = n;
    for (uint32_t e = 0; e < n; e++) {
        if ((want && !want[e]) || (only_indexed && !named[e])) {
            after[e] = UINT64_MAX; /* not asked for: skipped whole */
            continue;
        }
        if (after[e] == 0) {
            missing = e;
            break;
        }
        if (after[e] < first)
            first = after[e], first_off = off[e], first_steps = steps[e];
    }
    free(off);
    free(steps);
    free(named);
    ro__traj_index_free(&ix);
    if (missing < n || first == UINT64_MAX) {
        if (missing < n && s->by_episode)
            fprintf(log,
                    "rollout-replay: note: %s: env %u has no snapshot before episode %" PRIu64
                    " began: reading from its start\n",
                    name, missing, s->episode);
        else if (missing < n)
            fprintf(log,
                    "rollout-replay: note: %s: env %u has no snapshot at or before step %" PRIu64
                    ": reading from its start\n",
                    name, missing, s->from);
        ro__traj_reader_seek(rd, start, 1); /* where the episode search left it */
        free(after);
        return 0;
    }
    s->after = after;
    s->num_envs = n;
    s->base_pending = true;
    s->base_after = first_steps;
    s->start_record = first;
    ro__traj_reader_seek(rd, (size_t)first_off, first);
    /* Records that hold only entries before their envs' snapshots (shards
     * that ran ahead in the file) are passed by undecoded. */
    ro__traj_reader_skim(rd, ro__seek_need, s);
    return 1;
}

const Rollout__V1__EnvSnapshot *ro__seek_snapshot(const ro_seek_t *s,
                                                  const Rollout__V1__TransitionBatch *b, size_t i)
{
    if (!s->after || i >= b->n_snapshots)
        return NULL;
    const Rollout__V1__EnvSnapshot *sn = b->snapshots[i];
    return sn->env < s->num_envs && s->after[sn->env] == b->record ? sn : NULL;
}

int ro__seek_load(const ro_recorded_env_t *e, const Rollout__V1__TrajectoryHeader *h, void *env,
                  const Rollout__V1__EnvSnapshot *sn, char *err, size_t errlen)
{
    uint64_t params =
        ro__env_params_hash(ro__env_kind_name(&e->kind), e->args, e->nargs, h->max_episode_steps);
    return ro__env_state_load(&e->kind, env, params, sn->state.data, sn->state.len, NULL, err,
                              errlen);
}

bool ro__seek_need(void *seek, uint64_t record, uint32_t env)
{
    const ro_seek_t *s = seek;
    return env >= s->num_envs || record > s->after[env];
}

void ro__seek_free(ro_seek_t *s)
{
    free(s->after);
    s->after = NULL;
}
