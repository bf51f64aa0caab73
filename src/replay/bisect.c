/*
 * rollout-replay --bisect: the first difference between two recordings of
 * one run (bisect.h).
 */
#include "replay/bisect.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay/replay_opts.h"
#include "replay/replay_rows.h"
#include "runtime/error.h"
#include "trajectory/abi2_format.h"
#include "trajectory/snapshot_index.h"

/* One recording: its reader, index and a cursor over one env's entries. */
typedef struct side {
    const char *path;
    int fd;
    ro_traj_reader_t rd;
    bool open;
    size_t first_off; /* the first record's offset */
    ro_traj_index_t ix;
    Rollout__V1__TransitionBatch *b; /* the batch under the cursor */
    size_t k;
    uint32_t env;
    uint64_t skip_through; /* the env's entries in records up to this one are before the start */
} side_t;

/* A difference: the env step's numbers and what differs. */
typedef struct diff {
    bool found;
    uint32_t env;
    uint64_t env_steps, episode;
    uint32_t step;
    char what[320];
} diff_t;

typedef struct bisect {
    side_t a, b;
    ro_traj_rows_t rows; /* version 2: what a row holds */
    bool abi2;
    FILE *log;
} bisect_t;

static void side_close(side_t *s)
{
    if (s->b)
        ro__traj_batch_free(&s->rd, s->b);
    s->b = NULL;
    if (s->open)
        ro__traj_reader_close(&s->rd);
    ro__traj_index_free(&s->ix);
    if (s->fd >= 0)
        close(s->fd);
}

static int side_open(side_t *s, const char *path, FILE *log)
{
    char err[512];
    memset(s, 0, sizeof *s);
    s->path = path;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        fprintf(log, "rollout-replay: cannot open %s: %s\n", path, strerror(errno));
        return RO_REPLAY_UNUSABLE;
    }
    if (ro__traj_reader_open_fd(&s->rd, s->fd, true, err, sizeof err) != 0) {
        fprintf(log, "rollout-replay: %s: %s\n", path, err);
        return RO_REPLAY_UNUSABLE;
    }
    s->open = true;
    s->first_off = s->rd.off;
    if (ro__traj_index_load(&s->rd, &s->ix, err, sizeof err) != 0)
        fprintf(log, "rollout-replay: note: %s: %s: its entries are compared from the start\n",
                path, err);
    return RO_REPLAY_OK;
}

/* same_run tells whether two headers are of recordings of one run: the
 * same env, args, limit, seed, node index, envs and spaces. */
static bool same_run(const Rollout__V1__TrajectoryHeader *a, const Rollout__V1__TrajectoryHeader *b)
{
    if (strcmp(a->env, b->env) != 0 || a->seed != b->seed || a->node_index != b->node_index ||
        a->num_envs != b->num_envs || a->obs_dim != b->obs_dim || a->action_dim != b->action_dim ||
        strcmp(a->action_kind, b->action_kind) != 0 ||
        a->max_episode_steps != b->max_episode_steps || a->n_env_args != b->n_env_args ||
        !ro__replay_same_layout(a, b))
        return false;
    for (size_t i = 0; i < a->n_env_args; i++)
        if (strcmp(a->env_args[i]->key, b->env_args[i]->key) != 0 ||
            strcmp(a->env_args[i]->value, b->env_args[i]->value) != 0)
            return false;
    return true;
}

/* cursor_start puts s's cursor before env's first entry after record
 * `after` (0: the file's start), read from byte off. */
static void cursor_start(side_t *s, uint32_t env, uint64_t after, size_t off)
{
    if (s->b)
        ro__traj_batch_free(&s->rd, s->b);
    s->b = NULL;
    s->k = 0;
    s->env = env;
    s->skip_through = after;
    ro__traj_reader_seek(&s->rd, after ? off : s->first_off, after ? after : 1);
}

/* next_entry moves s's cursor to env's next entry (its env step's first
 * row). false at the end. */
static bool next_entry(side_t *s, uint32_t agents)
{
    if (s->b)
        s->k += agents;
    for (;;) {
        while (s->b && s->k < s->b->n_env) {
            bool first_row = !s->b->n_agent || s->b->agent[s->k] == 0;
            if (s->b->env[s->k] == s->env && first_row && s->b->record > s->skip_through)
                return true;
            s->k++;
        }
        if (s->b)
            ro__traj_batch_free(&s->rd, s->b);
        s->b = NULL;
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev;
        while ((ev = ro__traj_reader_next(&s->rd, &b)) != RO_TRAJ_BATCH)
            if (ev == RO_TRAJ_EOF)
                return false;
        s->b = b;
        s->k = 0;
    }
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* float_diff says where two float columns first differ (as bits). */
static bool float_diff(const float *x, const float *y, size_t n, const char *field, char *what,
                       size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (fbits(x[i]) != fbits(y[i])) {
            snprintf(what, len, "%s[%zu]: A %.9g (0x%08x), B %.9g (0x%08x)", field, i, x[i],
                     fbits(x[i]), y[i], fbits(y[i]));
            return true;
        }
    return false;
}

/* compare compares the env step at the two cursors; what gets the first
 * field that differs, in the order of cause to effect: the action (chosen
 * from the last observation, which agreed), the observation, the mask, the
 * reward, the flags. */
static bool compare(const bisect_t *bi, const side_t *a, const side_t *b, char *what, size_t len)
{
    const Rollout__V1__TransitionBatch *x = a->b, *y = b->b;
    size_t i = a->k, j = b->k;
    if (x->episode[i] != y->episode[j] || x->step[i] != y->step[j]) {
        snprintf(what, len, "episode and step: A %" PRIu64 "/%u, B %" PRIu64 "/%u", x->episode[i],
                 x->step[i], y->episode[j], y->step[j]);
        return true;
    }
    uint32_t rows = bi->abi2 ? bi->rows.agents : 1;
    for (uint32_t r = 0; r < rows; r++, i++, j++) {
        char field[64];
        uint32_t nd = bi->abi2 ? bi->rows.ndisc : (x->n_action ? 1 : 0);
        uint32_t nb = bi->abi2 ? bi->rows.nbox : (nd ? 0 : (uint32_t)(x->n_action_box / x->n_env));
        for (uint32_t d = 0; d < nd; d++)
            if (x->action[i * nd + d] != y->action[j * nd + d]) {
                snprintf(what, len, "action[%u] (agent %u): A %d, B %d", d, r,
                         x->action[i * nd + d], y->action[j * nd + d]);
                return true;
            }
        if (nb &&
            float_diff(x->action_box + i * nb, y->action_box + j * nb, nb, "action_box", what, len))
            return true;
        if (!bi->abi2) {
            size_t od = x->n_obs / x->n_env;
            if (float_diff(x->obs + i * od, y->obs + j * od, od, "obs", what, len))
                return true;
        }
        for (uint32_t t = 0; bi->abi2 && t < bi->rows.ntensors; t++) {
            size_t rb = bi->rows.row_bytes[t], el = bi->rows.elem[t];
            const uint8_t *p = x->tensors[t]->data.data + i * rb,
                          *q = y->tensors[t]->data.data + j * rb;
            for (size_t e = 0; e < rb; e++)
                if (p[e] != q[e]) {
                    snprintf(field, sizeof field, "%s", x->tensors[t]->name);
                    snprintf(what, len, "obs '%s'[%zu] (agent %u): bytes differ", field, e / el, r);
                    return true;
                }
        }
        size_t mw = bi->abi2 ? bi->rows.mask_width : 0;
        if (mw && memcmp(x->mask.data + i * mw, y->mask.data + j * mw, mw) != 0) {
            snprintf(what, len, "mask (agent %u)", r);
            return true;
        }
        if (float_diff(&x->reward[i], &y->reward[j], 1, "reward", what, len))
            return true;
        if (x->flags[i] != y->flags[j]) {
            snprintf(what, len, "flags (agent %u): A %u, B %u", r, x->flags[i], y->flags[j]);
            return true;
        }
    }
    return false;
}

/* scan compares env's entries from after record ra of a (rb of b; 0: the
 * start), env_steps counting from `steps`, until they differ or one side
 * ends. */
static void scan(bisect_t *bi, uint32_t env, uint64_t ra, size_t oa, uint64_t rb, size_t ob,
                 uint64_t steps, diff_t *d)
{
    uint32_t agents = bi->abi2 ? bi->rows.agents : 1;
    cursor_start(&bi->a, env, ra, oa);
    cursor_start(&bi->b, env, rb, ob);
    char what[320];
    for (;;) {
        bool ha = next_entry(&bi->a, agents), hb = next_entry(&bi->b, agents);
        if (!ha || !hb)
            return; /* one recording is longer: no difference as far as both go */
        if (!(bi->a.b->flags[bi->a.k] & RO_TRAJ_RESET))
            steps++;
        if (compare(bi, &bi->a, &bi->b, what, sizeof what)) {
            d->found = true;
            d->env = env;
            d->env_steps = steps;
            d->episode = bi->a.b->episode[bi->a.k];
            d->step = bi->a.b->step[bi->a.k];
            snprintf(d->what, sizeof d->what, "%s", what);
            return;
        }
    }
}

/* snapshot_state reads the state of env in the record at (record, off). */
static bool snapshot_state(side_t *s, uint64_t record, size_t off, uint32_t env, uint8_t **out,
                           size_t *len)
{
    cursor_start(s, env, 0, 0);
    ro__traj_reader_seek(&s->rd, off, record);
    Rollout__V1__TransitionBatch *b;
    if (ro__traj_reader_next(&s->rd, &b) != RO_TRAJ_BATCH)
        return false;
    bool ok = false;
    for (size_t i = 0; i < b->n_snapshots && !ok; i++)
        if (b->snapshots[i]->env == env && (*out = malloc(b->snapshots[i]->state.len + 1))) {
            *len = b->snapshots[i]->state.len;
            memcpy(*out, b->snapshots[i]->state.data, *len);
            ok = true;
        }
    ro__traj_batch_free(&s->rd, b);
    return ok;
}

/* same_state tells whether both sides hold the same state of env at the
 * matched snapshots ka (of a's index) and kb. */
static bool same_state(bisect_t *bi, size_t ka, size_t kb, uint32_t env)
{
    uint8_t *x = NULL, *y = NULL;
    size_t lx = 0, ly = 0;
    bool same = snapshot_state(&bi->a, bi->a.ix.record[ka], bi->a.ix.offset[ka], env, &x, &lx) &&
                snapshot_state(&bi->b, bi->b.ix.record[kb], bi->b.ix.offset[kb], env, &y, &ly) &&
                lx == ly && memcmp(x, y, lx) == 0;
    free(x);
    free(y);
    return same;
}

/* bisect_env finds env's first difference: a binary search over the
 * snapshots both sides took at the same env steps for the last equal
 * state, then a scan of the entries from there. */
static void bisect_env(bisect_t *bi, uint32_t env, diff_t *d)
{
    size_t na = bi->a.ix.n, nb = bi->b.ix.n, n = 0;
    size_t *ma = malloc((na + 1) * sizeof *ma), *mb = malloc((na + 1) * sizeof *mb);
    /* The matched snapshots: both indexes are in file order, so env steps
     * grow along each. */
    for (size_t i = 0, j = 0; ma && mb && i < na && j < nb;) {
        if (bi->a.ix.env[i] != env) {
            i++;
        } else if (bi->b.ix.env[j] != env || bi->b.ix.env_steps[j] < bi->a.ix.env_steps[i]) {
            j++;
        } else if (bi->b.ix.env_steps[j] > bi->a.ix.env_steps[i]) {
            i++;
        } else {
            ma[n] = i++, mb[n++] = j++;
        }
    }
    long lo = -1, hi = (long)n; /* states agree through lo, differ from hi */
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (same_state(bi, ma[mid], mb[mid], env))
            lo = mid;
        else
            hi = mid;
    }
    if (lo < 0 || !ma || !mb)
        scan(bi, env, 0, 0, 0, 0, 0, d);
    else
        scan(bi, env, bi->a.ix.record[ma[lo]], bi->a.ix.offset[ma[lo]], bi->b.ix.record[mb[lo]],
             bi->b.ix.offset[mb[lo]], bi->a.ix.env_steps[ma[lo]], d);
    free(ma);
    free(mb);
}

int ro__replay_bisect(const char *a, const char *b, FILE *out, FILE *log)
{
    bisect_t bi = {.log = log};
    bi.a.fd = bi.b.fd = -1;
    int rc = side_open(&bi.a, a, log);
    if (rc == RO_REPLAY_OK)
        rc = side_open(&bi.b, b, log);
    char why[160];
    if (rc == RO_REPLAY_OK && !same_run(bi.a.rd.hdr, bi.b.rd.hdr)) {
        fprintf(log,
                "rollout-replay: --bisect: %s and %s are not recordings of one run (env, args, "
                "episode limit, seed, node index, envs or spaces differ)\n",
                a, b);
        rc = RO_REPLAY_UNUSABLE;
    }
    if (rc == RO_REPLAY_OK && bi.a.rd.hdr->layout) {
        bi.abi2 = true;
        if (ro__traj_layout_rows(bi.a.rd.hdr->layout, &bi.rows, why, sizeof why) != 0)
            rc = RO_REPLAY_UNUSABLE;
    }
    diff_t best = {0};
    for (uint32_t e = 0; rc == RO_REPLAY_OK && e < bi.a.rd.hdr->num_envs; e++) {
        diff_t d = {0};
        bisect_env(&bi, e, &d);
        if (d.found && (!best.found || d.env_steps < best.env_steps))
            best = d;
    }
    if (rc == RO_REPLAY_OK && best.found) {
        fprintf(out,
                "first difference: env %u, episode %" PRIu64 ", step %u (the env's step %" PRIu64
                "): %s\n",
                best.env, best.episode, best.step, best.env_steps, best.what);
        rc = RO_REPLAY_FAILED;
    } else if (rc == RO_REPLAY_OK) {
        fprintf(out, "no difference: every env's entries are the same in %s and %s\n", a, b);
    }
    side_close(&bi.a);
    side_close(&bi.b);
    return rc;
}
