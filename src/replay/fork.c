/*
 * rollout-replay --fork: continuing a recording's envs with another policy
 * into a new recording (fork.h).
 */
#include "replay/fork.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envs/env_kind.h"
#include "envs/env_state.h"
#include "policy/policy.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "trajectory/writer.h"

/* The default snapshot interval of a fork of a recording without one. */
#define FORK_SNAPSHOT_EVERY 10000

/* What a fork holds while it runs. */
typedef struct fork_run {
    struct ro_replay *r;
    const ro_fork_opts_t *fo;
    const ro_env_vtable_t *vt;
    uint32_t n, od, ad;    /* forked envs; obs floats; action floats (1: discrete) */
    uint32_t *ids;         /* [n] env indices */
    uint64_t *episode;     /* [n] */
    uint32_t *step;        /* [n] steps of the current episode */
    uint64_t params;       /* the envs' params hash (state blobs) */
    ro_rng_t *rng, **rngp; /* [n] action streams */
    ro_policy_t *pol;
    ro_policy_ws_t *ws;
    bool discrete;
    /* One record's columns: each env's step and, after an episode end, its reset. */
    uint32_t *c_env, *c_step, *c_flags;
    uint64_t *c_ep;
    float *c_rew, *c_obs, *c_actf;
    int32_t *c_acti, *act_i;
    float *act_f, *obs;
    /* Snapshots: [n] messages and n blobs of blob bytes. */
    Rollout__V1__EnvSnapshot *sn, **snp;
    uint8_t *blobs;
    size_t blob;
    uint64_t finished; /* episodes ended */
} fork_run_t;

static void fork_free(fork_run_t *f)
{
    ro__policy_ws_free(f->ws);
    ro__policy_free(f->pol);
    free(f->ids), free(f->episode), free(f->step), free(f->rng), free(f->rngp);
    free(f->c_env), free(f->c_step), free(f->c_flags), free(f->c_ep), free(f->c_rew);
    free(f->c_obs), free(f->c_actf), free(f->c_acti), free(f->act_i), free(f->act_f);
    free(f->obs), free(f->sn), free(f->snp), free(f->blobs);
}

/* fail logs one line and returns the exit status. */
__attribute__((format(printf, 3, 4))) static int fail(fork_run_t *f, int status, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rollout-replay: --fork: ", f->r->o.log);
    vfprintf(f->r->o.log, fmt, ap);
    fputc('\n', f->r->o.log);
    va_end(ap);
    return status;
}

/* pick_envs takes the envs to fork (--env, or all) and where each stands:
 * its state must be known at the step (replayed bit for bit up to it). An
 * env whose episode just ended is reset first, as the node would. */
static int pick_envs(fork_run_t *f)
{
    struct ro_replay *r = f->r;
    const uint32_t all = r->hdr->num_envs;
    f->n = r->o.nenvs ? (uint32_t)r->o.nenvs : all;
    f->ids = calloc(f->n, sizeof *f->ids);
    f->episode = calloc(f->n, sizeof *f->episode);
    f->step = calloc(f->n, sizeof *f->step);
    f->obs = calloc((size_t)f->n * f->od, sizeof *f->obs);
    if (!f->ids || !f->episode || !f->step || !f->obs)
        return fail(f, RO_REPLAY_UNUSABLE, "out of memory");
    for (uint32_t j = 0; j < f->n; j++) {
        uint32_t i = r->o.nenvs ? r->o.envs[j] : j;
        env_state_t *e = &r->envs[i];
        if (!e->env || !e->verifiable || (e->phase != P_ACTIVE && e->phase != P_ENDED))
            return fail(f, RO_REPLAY_UNUSABLE,
                        "env %u's state at step %" PRIu64 " is not known (it has no snapshot "
                        "before it and was not replayed from its start, or entries are missing)",
                        i, f->fo->step);
        f->ids[j] = i;
        float *o = f->obs + (size_t)j * f->od;
        if (e->phase == P_ENDED) {
            f->vt->reset(e->env, o);
            f->episode[j] = e->episode + 1;
            f->step[j] = 0;
        } else {
            memcpy(o, r->last_obs + (size_t)i * f->od, f->od * sizeof(float));
            f->episode[j] = e->episode;
            f->step[j] = e->step;
        }
    }
    return RO_REPLAY_OK;
}

/* make_policy builds the fork's policy for the env's spaces, and each
 * env's action stream from (seed, STEP, env index). */
static int make_policy(fork_run_t *f)
{
    ro_space_t os, as;
    f->vt->spaces(f->r->envs[f->ids[0]].env, &os, &as);
    f->discrete = as.kind == RO_SPACE_DISCRETE;
    f->ad = f->discrete ? 1 : (uint32_t)ro_space_size(&as);
    ro_policy_spec_t spec = {.kind = RO_POLICY_RANDOM};
    if (strcmp(f->fo->policy, "random") != 0) {
        spec.kind = RO_POLICY_MLP;
        spec.params_path = f->fo->policy;
    }
    char err[512] = "";
    if (ro__policy_new(&f->pol, &spec, &os, &as, err, sizeof err) != 0 ||
        ro__policy_ws_new(&f->ws, f->pol, f->n) != 0)
        return fail(f, RO_REPLAY_UNUSABLE, "--policy %s: %s", f->fo->policy,
                    err[0] ? err : "out of memory");
    if (ro__policy_state_floats(f->pol))
        return fail(f, RO_REPLAY_UNUSABLE,
                    "--policy %s is recurrent: a fork starts without the state it would have "
                    "had, and forks with a feed-forward policy only",
                    f->fo->policy);
    uint64_t seed = f->fo->seed_set ? f->fo->seed : f->r->hdr->seed;
    uint64_t fork_seed = ro__seed_mix(seed, f->fo->step, RO_STREAM_ACTION);
    f->rng = calloc(f->n, sizeof *f->rng);
    f->rngp = calloc(f->n, sizeof *f->rngp);
    if (!f->rng || !f->rngp)
        return fail(f, RO_REPLAY_UNUSABLE, "out of memory");
    for (uint32_t j = 0; j < f->n; j++) {
        ro__rng_init(&f->rng[j], ro__seed_mix(fork_seed, f->ids[j], RO_STREAM_ACTION));
        f->rngp[j] = &f->rng[j];
    }
    return RO_REPLAY_OK;
}

/* make_columns allocates one record's columns (2 entries per env) and the
 * snapshots' room. */
static int make_columns(fork_run_t *f)
{
    const size_t e = 2 * (size_t)f->n;
    char err[256];
    const ro_recorded_env_t *re = &f->r->renv;
    f->params = ro__env_params_hash(ro__env_kind_name(&re->kind), re->args, re->nargs,
                                    f->r->hdr->max_episode_steps);
    if (ro__env_state_bytes(&re->kind, f->r->envs[f->ids[0]].env, &f->blob, err, sizeof err))
        return fail(f, RO_REPLAY_UNUSABLE, "%s", err);
    f->c_env = calloc(e, 4), f->c_step = calloc(e, 4), f->c_flags = calloc(e, 4);
    f->c_ep = calloc(e, 8), f->c_rew = calloc(e, 4), f->c_acti = calloc(e, 4);
    f->c_obs = calloc(e * f->od, 4), f->c_actf = calloc(e * f->ad, 4);
    f->act_i = calloc(f->n, 4), f->act_f = calloc((size_t)f->n * f->ad, 4);
    f->sn = calloc(f->n, sizeof *f->sn), f->snp = calloc(f->n, sizeof *f->snp);
    f->blobs = calloc(f->n, f->blob);
    if (!f->c_env || !f->c_step || !f->c_flags || !f->c_ep || !f->c_rew || !f->c_acti ||
        !f->c_obs || !f->c_actf || !f->act_i || !f->act_f || !f->sn || !f->snp || !f->blobs)
        return fail(f, RO_REPLAY_UNUSABLE, "out of memory");
    return RO_REPLAY_OK;
}

/* snapshot puts every forked env's state into b (env_steps: its steps
 * since the fork). */
static int snapshot(fork_run_t *f, Rollout__V1__TransitionBatch *b, uint64_t env_steps)
{
    char err[256];
    for (uint32_t j = 0; j < f->n; j++) {
        size_t len;
        uint8_t *blob = f->blobs + (size_t)j * f->blob;
        if (ro__env_state_save(&f->r->renv.kind, f->r->envs[f->ids[j]].env, f->params, f->step[j],
                               blob, f->blob, &len, err, sizeof err))
            return fail(f, RO_REPLAY_FAILED, "env %u: %s", f->ids[j], err);
        rollout__v1__env_snapshot__init(&f->sn[j]);
        f->sn[j] = (Rollout__V1__EnvSnapshot){.base = f->sn[j].base,
                                              .env = f->ids[j],
                                              .episode = f->episode[j],
                                              .step = f->step[j],
                                              .env_steps = env_steps,
                                              .state = {.len = len, .data = blob}};
        f->snp[j] = &f->sn[j];
    }
    b->snapshots = f->snp;
    b->n_snapshots = f->n;
    return RO_REPLAY_OK;
}

/* put appends one entry to b's columns. */
static void put(fork_run_t *f, Rollout__V1__TransitionBatch *b, uint32_t j, uint32_t flags,
                float reward, const float *obs)
{
    size_t k = b->n_env++;
    f->c_env[k] = f->ids[j];
    f->c_ep[k] = f->episode[j];
    f->c_step[k] = f->step[j];
    f->c_flags[k] = flags;
    f->c_rew[k] = reward;
    bool reset = flags & RO_TRAJ_RESET;
    if (f->discrete)
        f->c_acti[k] = reset ? 0 : f->act_i[j];
    else if (reset)
        memset(f->c_actf + k * f->ad, 0, f->ad * sizeof(float));
    else
        memcpy(f->c_actf + k * f->ad, f->act_f + (size_t)j * f->ad, f->ad * sizeof(float));
    if (obs)
        memcpy(f->c_obs + k * f->od, obs, f->od * sizeof(float));
    else
        memset(f->c_obs + k * f->od, 0, f->od * sizeof(float));
}

/* round steps every forked env once with the policy's actions into b,
 * resetting those whose episode ends (auto-reset, as the node). */
static void round_of_steps(fork_run_t *f, Rollout__V1__TransitionBatch *b)
{
    const Rollout__V1__TrajectoryHeader *h = f->r->hdr;
    memcpy(ro__policy_ws_input(f->ws), f->obs, (size_t)f->n * f->od * sizeof(float));
    ro__policy_act(f->pol, f->ws, f->n, f->rngp, f->act_i, f->act_f, NULL, NULL);
    for (uint32_t j = 0; j < f->n; j++) {
        void *env = f->r->envs[f->ids[j]].env;
        float *o = f->obs + (size_t)j * f->od;
        ro_action_t a;
        if (f->discrete)
            a.discrete = f->act_i[j];
        else
            a.box = f->act_f + (size_t)j * f->ad;
        ro_step_t st = {0};
        int rc = f->vt->step(env, a, o, &st);
        bool failed = rc != 0;
        for (uint32_t d = 0; !failed && h->check_finite && d < f->od; d++)
            failed = !isfinite(o[d]);
        failed = failed || (h->check_finite && !isfinite(st.reward));
        f->step[j]++;
        bool trunc = st.truncated || (h->max_episode_steps && f->step[j] >= h->max_episode_steps);
        uint32_t flags =
            failed ? RO_TRAJ_FAILED | RO_TRAJ_TRUNCATED
                   : (st.terminated ? RO_TRAJ_TERMINATED : 0u) | (trunc ? RO_TRAJ_TRUNCATED : 0u);
        put(f, b, j, flags, failed ? 0.0f : st.reward, failed ? NULL : o);
        if (flags) {
            f->finished += !failed;
            f->vt->reset(env, o);
            f->episode[j]++;
            f->step[j] = 0;
            put(f, b, j, RO_TRAJ_RESET, 0.0f, o);
        }
    }
}

/* header makes the fork's header from its parent's. */
static void header(fork_run_t *f, Rollout__V1__TrajectoryHeader *h, char *desc, size_t desclen)
{
    const Rollout__V1__TrajectoryHeader *p = f->r->hdr;
    *h = *p;
    h->format_version = RO_TRAJ_FORMAT_SNAPSHOTS;
    h->snapshot_every = p->snapshot_every ? p->snapshot_every : FORK_SNAPSHOT_EVERY;
    h->parent = (char *)f->fo->parent;
    h->parent_step = f->fo->step;
    h->part = 0;
    char pol[128];
    ro__policy_describe(f->pol, pol, sizeof pol);
    snprintf(desc, desclen, "fork: %s", pol);
    h->policy = desc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_time_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    /* Two entries per env a record, and every env's state. */
    uint64_t per = 5 + 10 + 5 + 5 + 4 + (f->discrete ? 10 : 4ull * f->ad) + 4ull * f->od;
    uint64_t max = 2ull * f->n * per + 10 * 16 + 64 + (uint64_t)f->n * (60 + f->blob);
    h->max_record_bytes = (uint32_t)(max < RO_TRAJ_MAX_RECORD ? max : RO_TRAJ_MAX_RECORD);
}

/* run writes the fork: its envs' states, then rounds of steps until
 * fo->steps, with every env's state each snapshot_every rounds. */
static int run(fork_run_t *f)
{
    Rollout__V1__TrajectoryHeader h;
    char desc[160], err[512] = "";
    header(f, &h, desc, sizeof desc);
    if ((uint64_t)h.max_record_bytes * 1 >= RO_TRAJ_MAX_RECORD)
        return fail(f, RO_REPLAY_UNUSABLE, "too many envs for one record: give fewer with --env");
    ro_traj_writer_t w;
    if (ro__traj_writer_open(&w, f->fo->out, &h, 0, err, sizeof err))
        return fail(f, RO_REPLAY_UNUSABLE, "%s", err);
    Rollout__V1__TransitionBatch b;
    rollout__v1__transition_batch__init(&b);
    int rc = snapshot(f, &b, 0);
    if (rc == RO_REPLAY_OK && ro__traj_writer_append(&w, &b, err, sizeof err))
        rc = fail(f, RO_REPLAY_FAILED, "%s", err);
    uint64_t taken = 0, rounds = 0;
    while (rc == RO_REPLAY_OK && taken < f->fo->steps) {
        rollout__v1__transition_batch__init(&b);
        b.env = f->c_env, b.episode = f->c_ep, b.step = f->c_step, b.flags = f->c_flags;
        b.reward = f->c_rew, b.obs = f->c_obs;
        round_of_steps(f, &b);
        taken += f->n;
        rounds++;
        b.n_episode = b.n_step = b.n_flags = b.n_reward = b.n_env;
        b.n_obs = b.n_env * f->od;
        if (f->discrete)
            b.action = f->c_acti, b.n_action = b.n_env;
        else
            b.action_box = f->c_actf, b.n_action_box = b.n_env * f->ad;
        if (rounds % h.snapshot_every == 0)
            rc = snapshot(f, &b, rounds);
        if (rc == RO_REPLAY_OK && ro__traj_writer_append(&w, &b, err, sizeof err))
            rc = fail(f, RO_REPLAY_FAILED, "%s", err);
    }
    int crc = ro__traj_writer_close(&w, err, sizeof err);
    if (rc == RO_REPLAY_OK && crc)
        rc = fail(f, RO_REPLAY_FAILED, "%s", err);
    if (rc == RO_REPLAY_OK)
        fprintf(f->r->o.log,
                "rollout-replay: fork: %" PRIu64 " steps of %u env(s) from step %" PRIu64
                " of %s with %s into %s (%" PRIu64 " episodes finished)\n",
                taken, f->n, f->fo->step, f->fo->parent, desc + 6, f->fo->out, f->finished);
    return rc;
}

int ro__replay_fork(struct ro_replay *r, const ro_fork_opts_t *fo)
{
    fork_run_t f = {.r = r, .fo = fo};
    int rc;
    if (r->unusable || r->diverged || !r->hdr)
        rc = fail(&f, RO_REPLAY_FAILED, "the recording did not replay up to step %" PRIu64,
                  fo->step);
    else if (r->hdr->layout)
        rc = fail(&f, RO_REPLAY_UNUSABLE,
                  "env ABI 2 recordings (format version 2) cannot be forked yet");
    else {
        f.vt = r->renv.kind.vt;
        f.od = r->hdr->obs_dim;
        rc = pick_envs(&f);
        if (rc == RO_REPLAY_OK)
            rc = make_policy(&f);
        if (rc == RO_REPLAY_OK)
            rc = make_columns(&f);
        if (rc == RO_REPLAY_OK)
            rc = run(&f);
    }
    fork_free(&f);
    return rc;
}
