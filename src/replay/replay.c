#include "replay/replay.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay/recorded_env.h"
#include "replay/replay_rows.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "runtime/text.h"
#include "trajectory/reader.h"

/* Warnings about envs with missing entries, before only counting them. */
#define MAX_GAP_WARNINGS 8

enum phase {
    P_NEW = 0, /* nothing seen yet */
    P_ACTIVE,  /* inside an episode */
    P_ENDED,   /* the episode ended: a reset comes next */
    P_LOST,    /* entries went missing: wait for the next reset */
};

typedef struct env_state {
    void *env; /* verify: the re-created instance */
    uint64_t episode;
    uint32_t step;
    uint8_t phase;
    bool verifiable; /* every entry so far has been replayed */
    bool tracked;    /* the current episode was seen from its reset */
    double ret;
    /* stats */
    uint64_t episodes, steps;
    double ret_sum, ret_min, ret_max;
    uint64_t len_sum, len_min, len_max;
} env_state_t;

struct ro_replay {
    ro_replay_opts_t o;
    Rollout__V1__TrajectoryHeader *hdr; /* the first file's */
    ro_pb_alloc_t hdr_alloc;            /* hdr was decoded with it */
    bool have_hdr;
    uint32_t last_part;
    env_state_t *envs;
    float *buf;
    ro_recorded_env_t renv;
    ro_replay_rows_t rows; /* format version 2: env ABI 2 rows */
    uint32_t agents;       /* rows per env step: 1 for version 1 */
    uint32_t act_n;        /* discrete: number of actions */
    bool discrete;
    bool diverged;
    bool unusable; /* a file or the env could not be used: no verdict of OK */
    uint64_t damaged, cut_short, dropped_shard_steps, unverified_envs;
    uint64_t verified_steps, verified_resets, entries;
    uint32_t files;
    const char *name; /* the file being read */
    uint64_t record;  /* the record being read */
};

int ro__replay_new(ro_replay_t **out, const ro_replay_opts_t *o)
{
    ro_replay_t *r = calloc(1, sizeof *r);
    if (!r)
        return RO_ENOMEM;
    r->o = *o;
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
    ro__recorded_env_close(&r->renv);
    if (r->hdr)
        rollout__v1__trajectory_header__free_unpacked(r->hdr, &r->hdr_alloc.base);
    free(r->envs);
    free(r->buf);
    free(r);
}

static bool selected_env(const ro_replay_t *r, uint32_t env)
{
    if (r->o.nenvs == 0)
        return true;
    for (size_t i = 0; i < r->o.nenvs; i++)
        if (r->o.envs[i] == env)
            return true;
    return false;
}

static bool selected_episode(const ro_replay_t *r, uint64_t ep)
{
    if (r->o.nepisodes == 0)
        return true;
    for (size_t i = 0; i < r->o.nepisodes; i++)
        if (r->o.episodes[i] == ep)
            return true;
    return false;
}

/* The env kind and its args, from the first header. */
static int open_env(ro_replay_t *r)
{
    char err[512] = "";
    if (ro__recorded_env_open(&r->renv, r->hdr, r->o.plugin, err, sizeof err) != 0) {
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

static int create_env(ro_replay_t *r, uint32_t i)
{
    const Rollout__V1__TrajectoryHeader *h = r->hdr;
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

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int diverged(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k,
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
static int compare_obs(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
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
static int verify_rows(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    env_state_t *e = &r->envs[b->env[k]];
    bool reset = b->flags[k] & RO_TRAJ_RESET;
    if (reset && !e->env) {
        int rc = create_env(r, b->env[k]);
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

static int verify_entry(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    if (r->hdr->layout)
        return verify_rows(r, b, k);
    const Rollout__V1__TrajectoryHeader *h = r->hdr;
    uint32_t i = b->env[k], od = h->obs_dim;
    env_state_t *e = &r->envs[i];
    uint32_t flags = b->flags[k];
    if (flags & RO_TRAJ_RESET) {
        if (!e->env) {
            int rc = create_env(r, i);
            if (rc)
                return rc;
        }
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

static void put_float(FILE *f, float v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void dump_entry(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    const Rollout__V1__TrajectoryHeader *h = r->hdr;
    if (h->layout) { /* every agent's row of the env step */
        for (uint32_t a = 0; a < r->agents; a++)
            ro__replay_rows_dump(&r->rows, h->layout, r->o.out, b, k + a);
        return;
    }
    FILE *f = r->o.out;
    uint32_t fl = b->flags[k];
    bool reset = fl & RO_TRAJ_RESET;
    fprintf(f, "{\"env\":%u,\"episode\":%" PRIu64 ",\"step\":%u,\"reset\":%s,\"obs\":[", b->env[k],
            b->episode[k], b->step[k], reset ? "true" : "false");
    for (uint32_t d = 0; d < h->obs_dim; d++) {
        if (d)
            fputc(',', f);
        put_float(f, b->obs[k * h->obs_dim + d]);
    }
    fputs("],\"action\":", f);
    if (reset)
        fputs("null", f);
    else if (b->n_action)
        fprintf(f, "%d", b->action[k]);
    else {
        fputc('[', f);
        for (uint32_t d = 0; d < h->action_dim; d++) {
            if (d)
                fputc(',', f);
            put_float(f, b->action_box[k * h->action_dim + d]);
        }
        fputc(']', f);
    }
    fputs(",\"reward\":", f);
    put_float(f, b->reward[k]);
    fprintf(f, ",\"terminated\":%s,\"truncated\":%s,\"failed\":%s}\n",
            fl & RO_TRAJ_TERMINATED ? "true" : "false", fl & RO_TRAJ_TRUNCATED ? "true" : "false",
            fl & RO_TRAJ_FAILED ? "true" : "false");
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

static int process_entry(ro_replay_t *r, const Rollout__V1__TransitionBatch *b, size_t k)
{
    uint32_t i = b->env[k];
    env_state_t *e = &r->envs[i];
    uint64_t ep = b->episode[k];
    uint32_t step = b->step[k], fl = b->flags[k];
    bool reset = fl & RO_TRAJ_RESET;
    bool sel = selected_env(r, i);
    r->entries++;
    if (sel && r->o.dump && selected_episode(r, ep))
        dump_entry(r, b, k);

    bool follows =
        reset ? (e->phase == P_NEW && ep == 0) || (e->phase == P_ENDED && ep == e->episode + 1)
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
            if (sel && selected_episode(r, ep) && !(fl & RO_TRAJ_FAILED))
                end_episode(e);
        }
    }
    if (r->o.verify && sel && e->verifiable)
        return verify_entry(r, b, k);
    return RO_REPLAY_OK;
}

static bool same_recording(const Rollout__V1__TrajectoryHeader *a,
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
    for (size_t i = 0; i < r->o.nenvs; i++)
        if (r->o.envs[i] >= r->hdr->num_envs) {
            fprintf(r->o.log, "rollout-replay: --env %u: %s holds envs 0 to %u only\n",
                    r->o.envs[i], r->name, r->hdr->num_envs - 1);
            return RO_REPLAY_UNUSABLE;
        }
    return RO_REPLAY_OK;
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
    } else {
        if (!same_recording(r->hdr, rd->hdr)) {
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
    while (rc == RO_REPLAY_OK) {
        ro_traj_event_t ev = ro__traj_reader_next(rd, &b);
        if (ev == RO_TRAJ_EOF)
            break;
        if (ev == RO_TRAJ_BATCH) {
            r->record = b->record;
            r->dropped_shard_steps += b->dropped;
            /* Version 2: one env step (its agents' rows) at a time. */
            for (size_t k = 0; k < b->n_env && rc == RO_REPLAY_OK; k += r->agents)
                rc = process_entry(r, b, k);
            ro__traj_batch_free(rd, b);
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

/* The "all" line's tail: what the envs were seeded from (docs/replay.md). */
static void seed_fields(FILE *f, const Rollout__V1__TrajectoryHeader *h)
{
    if (h)
        fprintf(f, ",\"seed\":%" PRIu64 ",\"node_index\":%" PRIu32, h->seed, h->node_index);
}

/* One --stats line; h: the header for the "all" line, NULL for an env's. */
static void stats_line(FILE *f, const char *env, uint64_t eps, uint64_t steps, double rs,
                       double rmin, double rmax, uint64_t ls, uint64_t lmin, uint64_t lmax,
                       const Rollout__V1__TrajectoryHeader *h)
{
    if (eps == 0) {
        fprintf(f, "{\"env\":%s,\"episodes\":0,\"steps\":%" PRIu64, env, steps);
        seed_fields(f, h);
        fputs("}\n", f);
        return;
    }
    /* Returns are sums of recorded rewards: NaN or infinite ones (an env
     * without --check-finite) are null, not "nan": every line is JSON. */
    fprintf(f, "{\"env\":%s,\"episodes\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"return_mean\":", env,
            eps, steps);
    ro__json_double(f, rs / (double)eps);
    fputs(",\"return_min\":", f);
    ro__json_double(f, rmin);
    fputs(",\"return_max\":", f);
    ro__json_double(f, rmax);
    fprintf(f, ",\"length_mean\":%.17g,\"length_min\":%" PRIu64 ",\"length_max\":%" PRIu64,
            (double)ls / (double)eps, lmin, lmax);
    seed_fields(f, h);
    fputs("}\n", f);
}

int ro__replay_finish(ro_replay_t *r)
{
    if (r->o.stats && r->hdr && !r->unusable) { /* no partial statistics after a fatal error */
        uint64_t eps = 0, steps = 0, ls = 0, lmin = 0, lmax = 0;
        double rs = 0, rmin = 0, rmax = 0;
        for (uint32_t i = 0; i < r->hdr->num_envs; i++) {
            const env_state_t *e = &r->envs[i];
            if (!selected_env(r, i) || (e->steps == 0 && e->episodes == 0 && e->phase == P_NEW))
                continue;
            char name[16];
            snprintf(name, sizeof name, "%u", i);
            stats_line(r->o.out, name, e->episodes, e->steps, e->ret_sum, e->ret_min, e->ret_max,
                       e->len_sum, e->len_min, e->len_max, NULL);
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
        stats_line(r->o.out, "\"all\"", eps, steps, rs, rmin, rmax, ls, lmin, lmax, r->hdr);
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
    return rc;
}
