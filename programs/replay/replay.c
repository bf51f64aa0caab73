#include "replay/replay.h"
#include "replay/replay_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay/recorded_env.h"
#include "replay/replay_rows.h"
#include "replay/seek.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "runtime/text.h"
#include "trajectory/reader.h"
#include "trajectory/snapshot_index.h"

/* Warnings about envs with missing entries, before only counting them. */
#define MAX_GAP_WARNINGS 8

int ro__replay_new(ro_replay_t **out, const ro_replay_opts_t *o)
{
    ro_replay_t *r = calloc(1, sizeof *r);
    if (!r)
        return RO_ENOMEM;
    r->o = *o;
    r->seek.from = o->from;
    r->seek.by_episode = o->episode_seek;
    r->seek.env = (uint32_t)o->envs.v[0];
    r->seek.episode = o->episodes.v[0];
    r->dump_on = !o->from_set;
    *out = r;
    return 0;
}

void ro__replay_free(ro_replay_t *r)
{
    if (!r)
        return;
    if (r->envs && r->hdr)
        for (uint32_t i = 0; i < r->hdr->num_envs; i++)
            if (r->envs[i].env)
                ro__recorded_env_destroy(&r->renv, r->envs[i].env);
    ro__replay_rows_free(&r->rows);
    ro__seek_free(&r->seek);
    ro__recorded_env_close(&r->renv);
    if (r->hdr)
        rollout__v1__trajectory_header__free_unpacked(r->hdr, &r->hdr_alloc.base);
    free(r->envs);
    free(r->buf);
    free(r->last_rows);
    free(r);
}

/* selected: whether v passes the --env or --episode list f. */
static bool selected(const ro_replay_filter_t *f, uint64_t v)
{
    if (f->n == 0)
        return true;
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i] == v)
            return true;
    return false;
}

/* The env kind and its args, from the first header. */
static int open_env(ro_replay_t *r)
{
    char err[512] = "";
    if (ro__recorded_env_open(&r->renv, r->hdr, r->o.plugin, err, sizeof err) != 0 ||
        ro__recorded_env_check_mujoco(&r->renv, r->hdr, err, sizeof err) != 0) {
        fprintf(r->o.log, "rollout-replay: %s: %s\n", r->name, err);
        return RO_REPLAY_UNUSABLE;
    }
    if (r->hdr->layout) {
        ro__replay_rows_free(&r->rows); /* dump's, without buffers */
        if (ro__replay_rows_init(&r->rows, r->hdr, &r->renv.layout) != 0)
            return RO_REPLAY_UNUSABLE;
        return RO_REPLAY_OK;
    }
    r->buf = malloc((size_t)r->hdr->obs_dim * sizeof(float));
    if (!r->buf)
        return RO_REPLAY_UNUSABLE;
    return RO_REPLAY_OK;
}

static void end_episode(env_state_t *e)
{
    if (!e->tracked)
        return;
    uint64_t len = e->step;
    if (e->episodes == 0 || e->ret < e->ret_min)
        e->ret_min = e->ret;
    if (e->episodes == 0 || e->ret > e->ret_max)
        e->ret_max = e->ret;
    if (e->episodes == 0 || len < e->len_min)
        e->len_min = len;
    if (e->episodes == 0 || len > e->len_max)
        e->len_max = len;
    e->ret_sum += e->ret;
    e->len_sum += len;
    e->episodes++;
}

/* restore loads the env state sn (--from): env sn->env continues from it,
 * at its episode and step, verifiable from there. */
static int restore(ro_replay_t *r, const Rollout__V1__EnvSnapshot *sn)
{
    env_state_t *e = &r->envs[sn->env];
    char err[512] = "";
    int rc = 0;
    if (r->o.verify) {
        if (!e->env && (rc = ro__replay_create_env(r, sn->env)) != 0)
            return rc;
        if (ro__seek_load(&r->renv, r->hdr, e->env, sn, err, sizeof err) != 0) {
            fprintf(r->o.log, "rollout-replay: %s (record %" PRIu64 "): env %u's snapshot: %s\n",
                    r->name, r->record, sn->env, err);
            r->diverged = true;
            return RO_REPLAY_FAILED;
        }
    }
    e->phase = P_ACTIVE;
    e->episode = sn->episode;
    e->step = sn->step;
    e->verifiable = true;
    e->tracked = false; /* its return so far is not known */
    r->seek.restored++;
    return RO_REPLAY_OK;
}

/* seek_batch applies --from to b before its entries: the first record's
 * step count, and the snapshots to load from it. */
static int seek_batch(ro_replay_t *r, const Rollout__V1__TransitionBatch *b)
{
    ro_seek_t *s = &r->seek;
    if (s->base_pending) {
        s->base_pending = false;
        s->gstep = s->base_after - ro__traj_batch_steps(b);
    }
    int rc = RO_REPLAY_OK;
    for (size_t i = 0; i < b->n_snapshots && rc == RO_REPLAY_OK; i++) {
        const Rollout__V1__EnvSnapshot *sn = ro__seek_snapshot(s, b, i);
        if (sn)
            rc = restore(r, sn);
    }
    return rc;
}

static int process_entry(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    uint32_t i = b->env[k];
    env_state_t *e = &r->envs[i];
    uint64_t ep = b->episode[k];
    uint32_t step = b->step[k], fl = b->flags[k];
    bool reset = fl & RO_TRAJ_RESET;
    bool sel = selected(&r->o.envs, i);
    r->entries++;
    if (sel && r->o.dump && selected(&r->o.episodes, ep) && r->dump_on)
        ro__replay_dump(&r->rows, r->hdr, r->agents, r->o.out, b, k);

    /* A learner's Reseed (RESTART) cuts an active episode: the next one follows it. */
    bool follows =
        reset ? (e->phase == P_NEW && ep == 0) ||
                    ((e->phase == P_ENDED || (e->phase == P_ACTIVE && (fl & RO_TRAJ_RESTART))) &&
                     ep == e->episode + 1)
              : e->phase == P_ACTIVE && ep == e->episode && step == e->step + 1;
    if (!follows) {
        if ((e->verifiable || e->phase == P_NEW) && r->o.verify && sel &&
            ++r->unverified_envs <= MAX_GAP_WARNINGS) {
            fprintf(r->o.log,
                    "rollout-replay: warning: %s (record %" PRIu64 "): env %u: entries missing "
                    "before episode %" PRIu64 " step %u (dropped or damaged records, or an "
                    "earlier part not given): not verified from here\n",
                    r->name, b->record, i, ep, step);
            if (r->unverified_envs == MAX_GAP_WARNINGS)
                fprintf(r->o.log, "rollout-replay: warning: (further envs with missing entries "
                                  "are only counted)\n");
        }
        e->verifiable = false;
        e->tracked = false;
        if (!reset) {
            e->phase = P_LOST;
            return RO_REPLAY_OK;
        }
    }
    if (reset) {
        if (e->phase == P_NEW && follows)
            e->verifiable = true;
        e->phase = P_ACTIVE;
        e->episode = ep;
        e->step = 0;
        e->ret = 0;
        e->tracked = true;
    } else {
        e->step = step;
        e->steps += r->agents; /* rows, as the node counts steps */
        e->ret += r->hdr->layout ? ro__replay_rows_mean_reward(&r->rows, b, k) : b->reward[k];
        if (fl & (RO_TRAJ_TERMINATED | RO_TRAJ_TRUNCATED)) {
            e->phase = P_ENDED;
            /* A failed step cuts its episode: not a finished episode (as in the node). */
            if (sel && selected(&r->o.episodes, ep) && !(fl & RO_TRAJ_FAILED))
                end_episode(e);
        }
    }
    if (r->o.verify && sel && e->verifiable)
        return ro__replay_verify_entry(r, b, k);
    return RO_REPLAY_OK;
}

bool ro__replay_same_recording(const Rollout__V1__TrajectoryHeader *a,
                               const Rollout__V1__TrajectoryHeader *b)
{
    return strcmp(a->env, b->env) == 0 && strcmp(a->env_spec, b->env_spec) == 0 &&
           a->seed == b->seed && a->node_index == b->node_index && a->num_envs == b->num_envs &&
           a->obs_dim == b->obs_dim && a->action_dim == b->action_dim &&
           strcmp(a->action_kind, b->action_kind) == 0 &&
           a->start_time_unix_ns == b->start_time_unix_ns &&
           a->max_episode_steps == b->max_episode_steps && a->check_finite == b->check_finite &&
           a->format_version == b->format_version && ro__replay_same_layout(a, b);
}

/* Every --env index must be one of the recording's envs. */
static int check_env_filter(ro_replay_t *r)
{
    for (size_t i = 0; i < r->o.envs.n; i++)
        if (r->o.envs.v[i] >= r->hdr->num_envs) {
            fprintf(r->o.log, "rollout-replay: --env %" PRIu64 ": %s holds envs 0 to %u only\n",
                    r->o.envs.v[i], r->name, r->hdr->num_envs - 1);
            return RO_REPLAY_UNUSABLE;
        }
    return RO_REPLAY_OK;
}

/* seek_plan moves rd to where --from starts reading the first file (if
 * its index allows: else from its start, said on the log). */
static int seek_plan(ro_replay_t *r, ro_traj_reader_t *rd)
{
    bool *want = calloc(r->hdr->num_envs, sizeof *want);
    if (!want)
        return RO_ENOMEM;
    for (uint32_t i = 0; i < r->hdr->num_envs; i++)
        want[i] = selected(&r->o.envs, i);
    /* A fork's envs are those its first record holds states of. */
    bool fork = r->hdr->parent && r->hdr->parent[0];
    int rc = ro__seek_plan(&r->seek, rd, want, fork, r->o.log, r->name);
    free(want);
    if (rc == 0 && r->hdr->part != 0) { /* read from its start, its steps would not count */
        fprintf(r->o.log,
                "rollout-replay: --from: %s is part %u and holds no snapshot of every env "
                "before step %" PRIu64 ": give the parts from PATH on\n",
                r->name, r->hdr->part, r->o.from);
        return RO_EINVAL;
    }
    return rc < 0 ? rc : 0;
}

/* keep_last keeps the env step at entry k of b as its env's last (--fork
 * goes on from it): its observation rows and their mask. */
static void keep_last(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    uint8_t *p = r->last_rows + (size_t)b->env[k] * r->last_bytes;
    if (!r->hdr->layout) {
        memcpy(p, b->obs + k * r->hdr->obs_dim, r->last_bytes);
        return;
    }
    const ro_traj_rows_t *rows = &r->rows.rows;
    for (uint32_t t = 0; t < rows->ntensors; t++) {
        size_t n = r->agents * rows->row_bytes[t];
        memcpy(p, b->tensors[t]->data.data + k * rows->row_bytes[t], n);
        p += n;
    }
    if (rows->mask_width)
        memcpy(p, b->mask.data + k * rows->mask_width, (size_t)r->agents * rows->mask_width);
}

/* One file, its reader open. */
static int feed(ro_replay_t *r, ro_traj_reader_t *rd)
{
    const char *name = r->name;
    int rc = RO_REPLAY_OK;
    if (!r->have_hdr) {
        ro__traj_reader_take_header(rd, &r->hdr, &r->hdr_alloc); /* ours now */
        r->have_hdr = true;
        r->last_part = r->hdr->part;
        r->envs = calloc(r->hdr->num_envs, sizeof *r->envs);
        r->agents = 1;
        /* Version 2: dump and stats need the rows' sizes, not the env. */
        int lrc = r->hdr->layout ? ro__replay_rows_init(&r->rows, r->hdr, NULL) : 0;
        if (r->hdr->layout && !lrc)
            r->agents = r->rows.rows.agents;
        if (!r->envs || lrc) {
            fprintf(r->o.log, "rollout-replay: out of memory\n");
            rc = RO_REPLAY_UNUSABLE;
        } else if ((rc = check_env_filter(r)) == RO_REPLAY_OK && r->o.verify) {
            rc = open_env(r);
        }
        rd->hdr = r->hdr; /* the reader validates batches against it */
        r->last_bytes = r->hdr->layout
                            ? r->agents * (r->rows.rows.obs_bytes + r->rows.rows.mask_width)
                            : (size_t)r->hdr->obs_dim * sizeof(float);
        if (rc == RO_REPLAY_OK && r->o.until_set &&
            !(r->last_rows = calloc(r->hdr->num_envs, r->last_bytes)))
            rc = RO_REPLAY_UNUSABLE;
        /* A fork (rollout-replay --fork) starts from its envs' states: its
         * first record holds them, and it is read from them. */
        if (r->hdr->parent && r->hdr->parent[0] && !r->o.from_set)
            r->o.from_set = true, r->seek.from = r->o.from = 0;
        if (rc == RO_REPLAY_OK && r->o.from_set && seek_plan(r, rd) != 0)
            rc = RO_REPLAY_UNUSABLE;
    } else {
        if (!ro__replay_same_recording(r->hdr, rd->hdr)) {
            fprintf(r->o.log,
                    "rollout-replay: %s is from another recording than the files before it\n",
                    name);
            rc = RO_REPLAY_UNUSABLE;
        } else if (rd->hdr->part != r->last_part + 1) {
            fprintf(r->o.log,
                    "rollout-replay: %s is part %u, expected part %u: give the parts in order "
                    "(PATH PATH.1 PATH.2 ...)\n",
                    name, rd->hdr->part, r->last_part + 1);
            rc = RO_REPLAY_UNUSABLE;
        }
        r->last_part = rd->hdr->part;
    }
    r->files++;
    Rollout__V1__TransitionBatch *b;
    while (rc == RO_REPLAY_OK && !r->stopped) {
        ro_traj_event_t ev = ro__traj_reader_next(rd, &b);
        if (ev == RO_TRAJ_EOF)
            break;
        if (ev == RO_TRAJ_BATCH) {
            r->record = b->record;
            r->dropped_shard_steps += b->dropped;
            if (r->o.from_set)
                rc = seek_batch(r, b);
            /* Version 2: one env step (its agents' rows) at a time. */
            for (size_t k = 0; k < b->n_env && rc == RO_REPLAY_OK && !r->stopped; k += r->agents) {
                if (r->o.until_set && r->seek.gstep >= r->o.until) {
                    r->stopped = true; /* --fork: the envs are where it goes on */
                    break;
                }
                r->dump_on = !r->o.from_set || r->seek.gstep >= r->o.from;
                if (!ro__seek_skip(&r->seek, b, k))
                    rc = process_entry(r, b, k);
                if (r->last_rows) /* skipped entries too: a snapshot follows its record's */
                    keep_last(r, b, k);
                if (!(b->flags[k] & RO_TRAJ_RESET))
                    r->seek.gstep += r->agents;
            }
            ro__traj_batch_free(rd, b);
        } else if (ev == RO_TRAJ_SKIPPED) { /* --from: every entry before its env's snapshot */
            r->record = rd->skim.record;
            r->seek.gstep += rd->skim.steps;
        } else if (ev == RO_TRAJ_CUT_SHORT) {
            r->cut_short++;
            fprintf(r->o.log, "rollout-replay: warning: %s: %s\n", name, rd->msg);
        } else if (ev == RO_TRAJ_CORRUPT || ev == RO_TRAJ_SHRANK) {
            r->damaged++;
            fprintf(r->o.log, "rollout-replay: error: %s: %s\n", name, rd->msg);
        } else {
            fprintf(r->o.log, "rollout-replay: note: %s: %s\n", name, rd->msg);
        }
    }
    if (rd->hdr == r->hdr)
        rd->hdr = NULL;
    ro__traj_reader_close(rd);
    if (rc == RO_REPLAY_UNUSABLE)
        r->unusable = true;
    return rc;
}

int ro__replay_feed(ro_replay_t *r, const char *name, const uint8_t *data, size_t len)
{
    ro_traj_reader_t rd;
    char err[512] = "";
    r->name = name;
    if (ro__traj_reader_open(&rd, data, len, r->o.resync, err, sizeof err) != 0) {
        fprintf(r->o.log, "rollout-replay: %s: %s\n", name, err);
        r->unusable = true;
        return RO_REPLAY_UNUSABLE;
    }
    return feed(r, &rd);
}

int ro__replay_feed_path(ro_replay_t *r, const char *path)
{
    ro_traj_reader_t rd;
    char err[512] = "";
    r->name = path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(r->o.log, "rollout-replay: cannot open %s: %s\n", path, strerror(errno));
        r->unusable = true;
        return RO_REPLAY_UNUSABLE;
    }
    int rc;
    if (ro__traj_reader_open_fd(&rd, fd, r->o.resync, err, sizeof err) != 0) {
        fprintf(r->o.log, "rollout-replay: %s: %s\n", path, err);
        r->unusable = true;
        rc = RO_REPLAY_UNUSABLE;
    } else {
        rc = feed(r, &rd);
    }
    close(fd);
    return rc;
}

bool ro__replay_stopped(const ro_replay_t *r)
{
    return r->stopped;
}

int ro__replay_finish(ro_replay_t *r)
{
    if (r->o.stats && r->hdr && !r->unusable) { /* no partial statistics after a fatal error */
        uint64_t eps = 0, steps = 0, ls = 0, lmin = 0, lmax = 0;
        double rs = 0, rmin = 0, rmax = 0;
        for (uint32_t i = 0; i < r->hdr->num_envs; i++) {
            const env_state_t *e = &r->envs[i];
            if (!selected(&r->o.envs, i) ||
                (e->steps == 0 && e->episodes == 0 && e->phase == P_NEW))
                continue;
            char name[16];
            snprintf(name, sizeof name, "%u", i);
            ro__replay_stats_line(r->o.out, name, e->episodes, e->steps, e->ret_sum, e->ret_min,
                                  e->ret_max, e->len_sum, e->len_min, e->len_max, NULL);
            if (e->episodes) {
                if (eps == 0 || e->ret_min < rmin)
                    rmin = e->ret_min;
                if (eps == 0 || e->ret_max > rmax)
                    rmax = e->ret_max;
                if (eps == 0 || e->len_min < lmin)
                    lmin = e->len_min;
                if (eps == 0 || e->len_max > lmax)
                    lmax = e->len_max;
            }
            eps += e->episodes;
            steps += e->steps;
            rs += e->ret_sum;
            ls += e->len_sum;
        }
        ro__replay_stats_line(r->o.out, "\"all\"", eps, steps, rs, rmin, rmax, ls, lmin, lmax,
                              r->hdr);
    }
    fflush(r->o.out);
    if (r->dropped_shard_steps)
        fprintf(r->o.log,
                "rollout-replay: warning: the recorder dropped %" PRIu64
                " shard steps (--record-full=drop)\n",
                r->dropped_shard_steps);
    int rc = r->unusable                 ? RO_REPLAY_UNUSABLE
             : r->damaged || r->diverged ? RO_REPLAY_FAILED
                                         : RO_REPLAY_OK;
    if (r->o.verify && r->unusable) /* never "OK" after a file or the env could not be used */
        fprintf(r->o.log,
                "rollout-replay: verify not done: %" PRIu64 " steps and %" PRIu64
                " resets replayed before a file or the env could not be used (see above)\n",
                r->verified_steps, r->verified_resets);
    else if (r->o.verify)
        fprintf(r->o.log,
                "rollout-replay: verify %s: %" PRIu64 " steps and %" PRIu64
                " resets replayed%s over %u file(s); %" PRIu64
                " env(s) not verified to the end; %" PRIu64 " damaged record(s); seed %" PRIu64
                ", node index %" PRIu32 "\n",
                rc ? "FAILED" : "OK", r->verified_steps, r->verified_resets,
                r->diverged ? ", the last one diverged" : " bit for bit", r->files,
                r->unverified_envs, r->damaged, r->hdr ? r->hdr->seed : 0,
                r->hdr ? r->hdr->node_index : 0);
    else if (r->damaged)
        fprintf(r->o.log, "rollout-replay: %" PRIu64 " damaged record(s)\n", r->damaged);
    if (r->hdr && r->hdr->parent && r->hdr->parent[0]) {
        char shown[160];
        fprintf(r->o.log, "rollout-replay: it is a fork of %s at step %" PRIu64 "\n",
                ro__text_log(shown, sizeof shown, r->hdr->parent, 120), r->hdr->parent_step);
    }
    if (r->o.verify && r->o.episode_seek)
        fprintf(r->o.log,
                "rollout-replay: --episode %" PRIu64 ":%" PRIu64 ": %" PRIu64
                " env(s) started from snapshots, reading from record %" PRIu64 "\n",
                r->o.envs.v[0], r->o.episodes.v[0], r->seek.restored,
                r->seek.after ? r->seek.start_record : 1);
    else if (r->o.verify && r->o.from_set)
        fprintf(r->o.log,
                "rollout-replay: --from %" PRIu64 ": %" PRIu64
                " env(s) started from snapshots, reading from record %" PRIu64 "\n",
                r->o.from, r->seek.restored, r->seek.after ? r->seek.start_record : 1);
    return rc;
}
