/*
 * rollout-replay --verify: re-creating an env and re-stepping it with the
 * recorded actions, bit for bit (replay_internal.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay_internal.h"
#include "trajectory/format.h"

/* create_env_from makes env i as a node started with h's seed made it. */
static int create_env_from(struct ro_replay *r, const Rollout__V1__TrajectoryHeader *h, uint32_t i)
{
    char err[512] = "";
    void *e;
    if (ro__recorded_env_create(&r->renv, h, i, &e, err, sizeof err) != 0) {
        fprintf(r->o.log, "rollout-replay: %s: creating env %u: %s\n", r->name, i, err);
        return RO_REPLAY_UNUSABLE;
    }
    if (r->renv.kind.vt2) { /* the buffers are sized from the layout: check each instance */
        if (!ro__replay_rows_instance_ok(&r->rows, r->renv.kind.vt2, e, err, sizeof err)) {
            r->renv.kind.vt2->destroy(e);
            fprintf(r->o.log, "rollout-replay: %s: env %u: %s\n", r->name, i, err);
            return RO_REPLAY_UNUSABLE;
        }
        r->envs[i].env = e;
        return RO_REPLAY_OK;
    }
    ro_space_t os, as;
    r->renv.kind.vt->spaces(e, &os, &as);
    bool discrete = as.kind == RO_SPACE_DISCRETE;
    if (ro_space_size(&os) != h->obs_dim || discrete != (strcmp(h->action_kind, "discrete") == 0) ||
        (!discrete && ro_space_size(&as) != h->action_dim)) {
        r->renv.kind.vt->destroy(e);
        fprintf(r->o.log,
                "rollout-replay: %s: env %u's spaces differ from the header's (obs %u floats, "
                "%s actions of %u)\n",
                r->name, i, h->obs_dim, h->action_kind, h->action_dim);
        return RO_REPLAY_UNUSABLE;
    }
    r->discrete = discrete;
    r->act_n = discrete ? as.n : 0;
    r->envs[i].env = e;
    return RO_REPLAY_OK;
}

int ro__replay_create_env(struct ro_replay *r, uint32_t i)
{
    return create_env_from(r, r->hdr, i);
}

/* env_for_reset readies env i for reset entry k: made at its first, and
 * re-made from the record's reseed seed where the entry says the node did
 * (a learner's Reseed: docs/replay.md). */
static int env_for_reset(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    env_state_t *e = &r->envs[b->env[k]];
    if (e->env && !(b->flags[k] & RO_TRAJ_RESEEDED))
        return RO_REPLAY_OK;
    if (!(b->flags[k] & RO_TRAJ_RESEEDED))
        return ro__replay_create_env(r, b->env[k]);
    Rollout__V1__TrajectoryHeader h = *r->hdr;
    h.seed = b->reseed;
    if (e->env)
        ro__recorded_env_destroy(&r->renv, e->env);
    e->env = NULL;
    return create_env_from(r, &h, b->env[k]);
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int diverged(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k,
                    const char *field, double rec, uint32_t rec_bits, double rep, uint32_t rep_bits)
{
    fprintf(r->o.log,
            "rollout-replay: divergence in %s (record %" PRIu64 "): env %u, episode %" PRIu64
            ", step %u, %s: recorded %.9g (0x%08x), replayed %.9g (0x%08x)\n",
            r->name, b->record, b->env[k], b->episode[k], b->step[k], field, rec, rec_bits, rep,
            rep_bits);
    r->diverged = true;
    return RO_REPLAY_FAILED;
}

static bool finite_row(const float *o, uint32_t n, float reward)
{
    bool ok = isfinite(reward);
    for (uint32_t i = 0; i < n; i++)
        ok = ok && isfinite(o[i]);
    return ok;
}

/* Replay entry k against its env. */
/* The first observation value that differs, if any. */
static int compare_obs(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    const float *rec_obs = b->obs + k * r->hdr->obs_dim;
    for (uint32_t d = 0; d < r->hdr->obs_dim; d++)
        if (bits(r->buf[d]) != bits(rec_obs[d])) {
            char field[32];
            snprintf(field, sizeof field, "obs[%u]", d);
            return diverged(r, b, k, field, rec_obs[d], bits(rec_obs[d]), r->buf[d],
                            bits(r->buf[d]));
        }
    return RO_REPLAY_OK;
}

/* verify_rows replays the env step of rows k.. (format version 2). */
static int verify_rows(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    env_state_t *e = &r->envs[b->env[k]];
    bool reset = b->flags[k] & RO_TRAJ_RESET;
    if (reset) {
        int rc = env_for_reset(r, b, k);
        if (rc)
            return rc;
    }
    ro_replay_div_t d;
    const ro_env2_vtable_t *vt2 = r->renv.kind.vt2;
    int div = reset ? ro__replay_rows_reset(&r->rows, vt2, e->env, b, k, &d)
                    : ro__replay_rows_step(&r->rows, vt2, e->env, b, k, &d);
    if (reset)
        r->verified_resets++;
    else
        r->verified_steps += r->agents; /* rows, as the node counts steps */
    if (!div)
        return RO_REPLAY_OK;
    fprintf(r->o.log,
            "rollout-replay: divergence in %s (record %" PRIu64
            "): env %u, agent %u, episode %" PRIu64 ", step %u, %s\n",
            r->name, b->record, b->env[k], d.agent, b->episode[k], b->step[k], d.what);
    r->diverged = true;
    return RO_REPLAY_FAILED;
}

int ro__replay_verify_entry(struct ro_replay *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    if (r->hdr->layout)
        return verify_rows(r, b, k);
    const Rollout__V1__TrajectoryHeader *h = r->hdr;
    uint32_t i = b->env[k], od = h->obs_dim;
    env_state_t *e = &r->envs[i];
    uint32_t flags = b->flags[k];
    if (flags & RO_TRAJ_RESET) {
        int rc = env_for_reset(r, b, k);
        if (rc)
            return rc;
        r->renv.kind.vt->reset(e->env, r->buf);
        r->verified_resets++;
        return compare_obs(r, b, k);
    } else {
        ro_action_t a;
        if (r->discrete) {
            int32_t act = b->action[k];
            if (act < 0 || (uint32_t)act >= r->act_n) {
                fprintf(r->o.log,
                        "rollout-replay: %s (record %" PRIu64 "): env %u, episode %" PRIu64
                        ", step %u: recorded action %d outside [0, %u)\n",
                        r->name, b->record, i, b->episode[k], b->step[k], act, r->act_n);
                r->diverged = true;
                return RO_REPLAY_FAILED;
            }
            a.discrete = act;
        } else {
            a.box = b->action_box + k * h->action_dim;
        }
        ro_step_t st = {0};
        int rc = r->renv.kind.vt->step(e->env, a, r->buf, &st);
        bool failed = rc != 0 || (h->check_finite && !finite_row(r->buf, od, st.reward));
        bool rec_failed = (flags & RO_TRAJ_FAILED) != 0;
        r->verified_steps++;
        if (failed != rec_failed)
            return diverged(r, b, k, "failed", rec_failed, rec_failed, failed, failed);
        if (failed)
            return RO_REPLAY_OK;
        int orc = compare_obs(r, b, k);
        if (orc)
            return orc;
        if (bits(st.reward) != bits(b->reward[k]))
            return diverged(r, b, k, "reward", b->reward[k], bits(b->reward[k]), st.reward,
                            bits(st.reward));
        bool term = st.terminated != 0;
        bool trunc = st.truncated || (h->max_episode_steps && b->step[k] >= h->max_episode_steps);
        bool rec_term = (flags & RO_TRAJ_TERMINATED) != 0;
        bool rec_trunc = (flags & RO_TRAJ_TRUNCATED) != 0;
        if (term != rec_term)
            return diverged(r, b, k, "terminated", rec_term, rec_term, term, term);
        if (trunc != rec_trunc)
            return diverged(r, b, k, "truncated", rec_trunc, rec_trunc, trunc, trunc);
    }
    return RO_REPLAY_OK;
}
