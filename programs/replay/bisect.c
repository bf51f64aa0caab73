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

#include "replay/replay_internal.h"
#include "replay/replay_opts.h"
#include "replay/replay_rows.h"
#include "runtime/error.h"
#include "trajectory/abi2_format.h"
#include "trajectory/snapshot_index.h"

/* One file of a recording: its reader and where its first record is. */
typedef struct part {
    const char *path;
    int fd;
    ro_traj_reader_t rd;
    bool open;
    size_t first_off;
} part_t;

/* One recording (its parts, in order): the snapshots of every part's index
 * in file order, and a cursor over one env's entries. */
typedef struct side {
    part_t *p;
    uint32_t np;
    bool owns;          /* p is this side's to free */
    ro_traj_index_t ix; /* every part's entries (record and offset within their part) */
    uint32_t *ix_part;  /* [ix.n] the part each entry is in */
    uint32_t cur;       /* the part under the cursor */
    Rollout__V1__TransitionBatch *b; /* the batch under the cursor */
    size_t k;
    uint32_t env;
    uint32_t skip_part;    /* the env's entries before (skip_part, skip_through) are ... */
    uint64_t skip_through; /* ... before the start */
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
        ro__traj_batch_free(&s->p[s->cur].rd, s->b);
    s->b = NULL;
    for (uint32_t i = 0; i < s->np; i++) {
        if (s->p[i].open)
            ro__traj_reader_close(&s->p[i].rd);
        if (s->p[i].fd >= 0)
            close(s->p[i].fd);
    }
    if (s->owns)
        free(s->p);
    ro__traj_index_free(&s->ix);
    free(s->ix_part);
}

/* part_open opens one file and checks its header. */
static int part_open(part_t *p, const char *path, FILE *log)
{
    char err[512];
    p->path = path;
    p->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (p->fd < 0) {
        fprintf(log, "rollout-replay: cannot open %s: %s\n", path, strerror(errno));
        return RO_REPLAY_UNUSABLE;
    }
    if (ro__traj_reader_open_fd(&p->rd, p->fd, true, err, sizeof err) != 0) {
        fprintf(log, "rollout-replay: %s: %s\n", path, err);
        return RO_REPLAY_UNUSABLE;
    }
    p->open = true;
    p->first_off = p->rd.off;
    return RO_REPLAY_OK;
}

/* side_index gathers the snapshots of every part's index (a part without
 * one is noted: its envs' entries there are compared, not sought). */
static int side_index(side_t *s, FILE *log)
{
    char err[512];
    for (uint32_t i = 0; i < s->np; i++) {
        ro_traj_index_t ix = {0};
        if (ro__traj_index_load(&s->p[i].rd, &ix, err, sizeof err) != 0) {
            fprintf(log, "rollout-replay: note: %s: %s: its entries are compared from the start\n",
                    s->p[i].path, err);
            continue;
        }
        uint32_t *grown = realloc(s->ix_part, (s->ix.n + ix.n + 1) * sizeof *grown);
        bool ok = grown != NULL;
        if (grown)
            s->ix_part = grown;
        for (size_t k = 0; ok && k < ix.n; k++) {
            s->ix_part[s->ix.n] = i;
            ok = ro__traj_index_add(&s->ix, ix.record[k], ix.offset[k], ix.steps_after[k],
                                    ix.env[k], ix.env_steps[k]) == 0;
        }
        ro__traj_index_free(&ix);
        if (!ok) {
            fprintf(log, "rollout-replay: out of memory\n");
            return RO_REPLAY_UNUSABLE;
        }
    }
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
 * `after` of part `part` (after 0: the recording's start), read from byte
 * off of that part. */
static void cursor_start(side_t *s, uint32_t env, uint32_t part, uint64_t after, size_t off)
{
    if (s->b)
        ro__traj_batch_free(&s->p[s->cur].rd, s->b);
    s->b = NULL;
    s->k = 0;
    s->env = env;
    s->cur = after ? part : 0;
    s->skip_part = s->cur;
    s->skip_through = after;
    part_t *p = &s->p[s->cur];
    ro__traj_reader_seek(&p->rd, after ? off : p->first_off, after ? after : 1);
}

/* next_entry moves s's cursor to env's next entry (its env step's first
 * row), on into the next parts. false at the recording's end. */
static bool next_entry(side_t *s, uint32_t agents)
{
    if (s->b)
        s->k += agents;
    for (;;) {
        while (s->b && s->k < s->b->n_env) {
            bool first_row = !s->b->n_agent || s->b->agent[s->k] == 0;
            bool after = s->cur > s->skip_part || s->b->record > s->skip_through;
            if (s->b->env[s->k] == s->env && first_row && after)
                return true;
            s->k++;
        }
        if (s->b)
            ro__traj_batch_free(&s->p[s->cur].rd, s->b);
        s->b = NULL;
        Rollout__V1__TransitionBatch *b;
        ro_traj_event_t ev;
        while ((ev = ro__traj_reader_next(&s->p[s->cur].rd, &b)) != RO_TRAJ_BATCH)
            if (ev == RO_TRAJ_EOF) {
                if (s->cur + 1 >= s->np)
                    return false;
                part_t *p = &s->p[++s->cur];
                ro__traj_reader_seek(&p->rd, p->first_off, 1);
            }
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

/* scan compares env's entries from after index entry ka of a (kb of b;
 * SIZE_MAX: the start), env_steps counting from `steps`, until they differ
 * or one side ends. */
static void scan(bisect_t *bi, uint32_t env, size_t ka, size_t kb, uint64_t steps, diff_t *d)
{
    uint32_t agents = bi->abi2 ? bi->rows.agents : 1;
    side_t *a = &bi->a, *b = &bi->b;
    if (ka == SIZE_MAX) {
        cursor_start(a, env, 0, 0, 0);
        cursor_start(b, env, 0, 0, 0);
    } else {
        cursor_start(a, env, a->ix_part[ka], a->ix.record[ka], a->ix.offset[ka]);
        cursor_start(b, env, b->ix_part[kb], b->ix.record[kb], b->ix.offset[kb]);
    }
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

/* snapshot_state reads the state of env in the record of index entry k. */
static bool snapshot_state(side_t *s, size_t k, uint32_t env, uint8_t **out, size_t *len)
{
    cursor_start(s, env, 0, 0, 0);
    part_t *p = &s->p[s->ix_part[k]];
    ro__traj_reader_seek(&p->rd, s->ix.offset[k], s->ix.record[k]);
    Rollout__V1__TransitionBatch *b;
    if (ro__traj_reader_next(&p->rd, &b) != RO_TRAJ_BATCH)
        return false;
    bool ok = false;
    for (size_t i = 0; i < b->n_snapshots && !ok; i++)
        if (b->snapshots[i]->env == env && (*out = malloc(b->snapshots[i]->state.len + 1))) {
            *len = b->snapshots[i]->state.len;
            memcpy(*out, b->snapshots[i]->state.data, *len);
            ok = true;
        }
    ro__traj_batch_free(&p->rd, b);
    return ok;
}

/* same_state tells whether both sides hold the same state of env at the
 * matched snapshots ka (of a's index) and kb. */
static bool same_state(bisect_t *bi, size_t ka, size_t kb, uint32_t env)
{
    uint8_t *x = NULL, *y = NULL;
    size_t lx = 0, ly = 0;
    bool same = snapshot_state(&bi->a, ka, env, &x, &lx) &&
                snapshot_state(&bi->b, kb, env, &y, &ly) && lx == ly && memcmp(x, y, lx) == 0;
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
        scan(bi, env, SIZE_MAX, SIZE_MAX, 0, d);
    else
        scan(bi, env, ma[lo], mb[lo], bi->a.ix.env_steps[ma[lo]], d);
    free(ma);
    free(mb);
}

/* open_sides opens every file and splits them into the two recordings:
 * each starts with its part 0, its later parts follow in order. */
static int open_sides(bisect_t *bi, char *const *paths, size_t n)
{
    part_t *all = calloc(n, sizeof *all);
    if (!all) {
        fprintf(bi->log, "rollout-replay: out of memory\n");
        return RO_REPLAY_UNUSABLE;
    }
    for (size_t i = 0; i < n; i++)
        all[i].fd = -1;
    bi->a.p = all; /* a owns the array of every part; b points into it */
    bi->a.owns = true;
    bi->a.np = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        if (part_open(&all[i], paths[i], bi->log) != RO_REPLAY_OK)
            return RO_REPLAY_UNUSABLE;
    size_t starts = 0, at_b = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i].rd.hdr->part == 0 && starts++ == 1)
            at_b = i;
    if (starts != 2 || all[0].rd.hdr->part != 0) {
        fprintf(bi->log,
                "rollout-replay: --bisect takes two recordings, each as its files in order (A.traj "
                "[A.traj.1 ...] B.traj [B.traj.1 ...]): %zu of the files given start one\n",
                starts);
        return RO_REPLAY_UNUSABLE;
    }
    bi->b.p = all + at_b; /* a's array holds them (a reader is not moved) */
    bi->b.np = (uint32_t)(n - at_b);
    bi->a.np = (uint32_t)at_b;
    for (side_t *s = &bi->a; s; s = s == &bi->a ? &bi->b : NULL)
        for (uint32_t i = 1; i < s->np; i++) {
            const Rollout__V1__TrajectoryHeader *h0 = s->p[0].rd.hdr, *h = s->p[i].rd.hdr;
            if (!ro__replay_same_recording(h0, h) || h->part != i) {
                fprintf(bi->log,
                        "rollout-replay: --bisect: %s is not part %u of the recording %s (give "
                        "each recording's parts in order: PATH PATH.1 PATH.2 ...)\n",
                        s->p[i].path, i, s->p[0].path);
                return RO_REPLAY_UNUSABLE;
            }
        }
    return RO_REPLAY_OK;
}

int ro__replay_bisect(char *const *paths, size_t n, FILE *out, FILE *log)
{
    bisect_t bi = {.log = log};
    int rc = open_sides(&bi, paths, n);
    const char *a = bi.a.p ? bi.a.p[0].path : "", *b = bi.b.p ? bi.b.p[0].path : "";
    char why[160];
    if (rc == RO_REPLAY_OK && !same_run(bi.a.p[0].rd.hdr, bi.b.p[0].rd.hdr)) {
        fprintf(log,
                "rollout-replay: --bisect: %s and %s are not recordings of one run (env, args, "
                "episode limit, seed, node index, envs or spaces differ)\n",
                a, b);
        rc = RO_REPLAY_UNUSABLE;
    }
    if (rc == RO_REPLAY_OK)
        rc = side_index(&bi.a, log);
    if (rc == RO_REPLAY_OK)
        rc = side_index(&bi.b, log);
    const Rollout__V1__TrajectoryHeader *h = bi.a.p ? bi.a.p[0].rd.hdr : NULL;
    if (rc == RO_REPLAY_OK && h->layout) {
        bi.abi2 = true;
        if (ro__traj_layout_rows(h->layout, &bi.rows, why, sizeof why) != 0)
            rc = RO_REPLAY_UNUSABLE;
    }
    diff_t best = {0};
    for (uint32_t e = 0; rc == RO_REPLAY_OK && e < h->num_envs; e++) {
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
    side_close(&bi.b); /* first: its parts lie in a's array */
    side_close(&bi.a);
    return rc;
}
