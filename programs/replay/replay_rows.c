/*
 * rollout-replay's env ABI 2 rows: verify and dump (replay_rows.h).
 */
#include "replay/replay_rows.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "runtime/error.h"
#include "runtime/text.h"
#include "trajectory/format.h"
#include "wire/dtype.h"

int ro__replay_rows_init(ro_replay_rows_t *rr, const Rollout__V1__TrajectoryHeader *h,
                         const ro_space_layout_t *lay)
{
    memset(rr, 0, sizeof *rr);
    char why[160];
    if (ro__traj_layout_rows(h->layout, &rr->rows, why, sizeof why) != 0)
        return RO_EBADMSG; /* the reader checked it: not reached */
    rr->check_finite = h->check_finite;
    rr->max_steps = h->max_episode_steps;
    rr->lay = lay;
    if (!lay)
        return 0;
    const uint32_t A = rr->rows.agents;
    for (uint32_t k = 0; k < rr->rows.ntensors; k++)
        if (!(rr->tensor[k] = calloc(A, rr->rows.row_bytes[k])))
            return RO_ENOMEM;
    rr->mask = calloc((size_t)A * rr->rows.mask_width + 1, 1);
    rr->st = calloc(A, sizeof *rr->st);
    return rr->mask && rr->st ? 0 : RO_ENOMEM;
}

void ro__replay_rows_free(ro_replay_rows_t *rr)
{
    for (uint32_t k = 0; k < RO_ENV_MAX_TENSORS; k++)
        free(rr->tensor[k]);
    free(rr->mask);
    free(rr->st);
    memset(rr, 0, sizeof *rr);
}

bool ro__replay_rows_instance_ok(const ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                                 char *why, size_t whylen)
{
    ro_space_layout_t mine;
    if (ro__env_layout_of(NULL, vt2, env, &mine, why, whylen) != 0)
        return false;
    const ro_space_layout_t *a = &mine, *b = rr->lay;
    bool same = a->agents == b->agents && a->ntensors == b->ntensors &&
                a->obs_bytes == b->obs_bytes && a->ndisc == b->ndisc && a->nbox == b->nbox &&
                a->mask_width == b->mask_width;
    for (uint32_t k = 0; same && k < a->ntensors; k++)
        same = a->t[k].row_bytes == b->t[k].row_bytes;
    for (uint32_t d = 0; same && d < a->ndisc; d++)
        same = a->disc_n[d] == b->disc_n[d];
    ro__layout_free(&mine);
    if (!same)
        snprintf(why, whylen, "it reports other spaces than the first instance");
    return same;
}

/* ---- comparing ---- */

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Element i of a tensor of dtype d at p, written to out for a message. */
static void elem_text(char *out, size_t len, ro_dtype_t d, const uint8_t *p, size_t i)
{
    if (d == RO_DTYPE_UINT8) {
        snprintf(out, len, "%u", p[i]);
    } else if (d == RO_DTYPE_INT32) {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        snprintf(out, len, "%" PRId32, v);
    } else {
        float v;
        memcpy(&v, p + 4 * i, 4);
        snprintf(out, len, "%.9g (0x%08x)", v, bits(v));
    }
}

/* compare_obs: the replayed tensors (and, with mask, the mask) against the
 * recorded rows k.. of b; the first difference into *d. */
static int compare_obs(const ro_replay_rows_t *rr, const Rollout__V1__TransitionBatch *b, size_t k,
                       bool mask, ro_replay_div_t *d)
{
    const uint32_t A = rr->rows.agents;
    for (uint32_t t = 0; t < rr->rows.ntensors; t++) {
        const size_t rb = rr->rows.row_bytes[t], el = rr->rows.elem[t];
        const uint8_t *rec = b->tensors[t]->data.data + k * rb, *rep = rr->tensor[t];
        if (memcmp(rec, rep, A * rb) == 0)
            continue;
        size_t i = 0;
        while (memcmp(rec + i * el, rep + i * el, el) == 0)
            i++;
        const ro_tensor_layout_t *tl = &rr->lay->t[t];
        const size_t per = rb / el;
        char rs[64], ps[64];
        elem_text(rs, sizeof rs, tl->dtype, rec, i);
        elem_text(ps, sizeof ps, tl->dtype, rep, i);
        d->agent = (uint32_t)(i / per);
        snprintf(d->what, sizeof d->what, "obs '%s'[%zu]: recorded %s, replayed %s", tl->name,
                 i % per, rs, ps);
        return 1;
    }
    const size_t mw = rr->rows.mask_width;
    if (!mask || !mw)
        return 0;
    const uint8_t *rec = b->mask.data + k * mw;
    for (size_t i = 0; i < A * mw; i++)
        if (rec[i] != rr->mask[i]) {
            d->agent = (uint32_t)(i / mw);
            snprintf(d->what, sizeof d->what, "mask[%zu]: recorded %u, replayed %u", i % mw, rec[i],
                     rr->mask[i]);
            return 1;
        }
    return 0;
}

static void obs_out(ro_replay_rows_t *rr, void **t, ro_obs_out_t *o)
{
    for (uint32_t k = 0; k < rr->rows.ntensors; k++)
        t[k] = rr->tensor[k];
    o->tensors = t;
    o->mask = rr->rows.mask_width ? rr->mask : NULL;
}

static bool masks_ok(const ro_replay_rows_t *rr)
{
    for (uint32_t a = 0; rr->rows.mask_width && a < rr->rows.agents; a++)
        if (!ro__layout_mask_ok(rr->lay, rr->mask + (size_t)a * rr->rows.mask_width, NULL))
            return false;
    return true;
}

int ro__replay_rows_reset(ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                          const Rollout__V1__TransitionBatch *b, size_t k, ro_replay_div_t *d)
{
    void *t[RO_ENV_MAX_TENSORS];
    ro_obs_out_t o;
    obs_out(rr, t, &o);
    vt2->reset(env, &o);
    /* The node allows every value when a reset's mask corners an entry. */
    if (!masks_ok(rr))
        memset(rr->mask, 1, (size_t)rr->rows.agents * rr->rows.mask_width);
    return compare_obs(rr, b, k, true, d);
}

/* all_finite: the float32 tensors and the rewards of every agent are numbers. */
static bool all_finite(const ro_replay_rows_t *rr)
{
    bool ok = true;
    for (uint32_t a = 0; a < rr->rows.agents; a++)
        ok = ok && isfinite(rr->st[a].reward);
    for (uint32_t t = 0; t < rr->rows.ntensors; t++) {
        if (rr->lay->t[t].dtype != RO_DTYPE_FLOAT32)
            continue;
        const size_t n = rr->rows.agents * rr->rows.row_bytes[t] / 4;
        for (size_t i = 0; ok && i < n; i++) {
            float v;
            memcpy(&v, rr->tensor[t] + 4 * i, 4);
            ok = isfinite(v);
        }
    }
    return ok;
}

/* actions_ok: every recorded discrete entry lies in its space (a file is
 * untrusted; the env is not asked to check). */
static int actions_ok(const ro_replay_rows_t *rr, const Rollout__V1__TransitionBatch *b, size_t k,
                      ro_replay_div_t *d)
{
    const uint32_t nd = rr->rows.ndisc;
    for (uint32_t a = 0; a < rr->rows.agents; a++)
        for (uint32_t e = 0; e < nd; e++) {
            int32_t v = b->action[(k + a) * nd + e];
            if (v < 0 || (uint32_t)v >= rr->lay->disc_n[e]) {
                d->agent = a;
                snprintf(d->what, sizeof d->what,
                         "recorded action entry %u = %" PRId32 " outside [0, %u)", e, v,
                         rr->lay->disc_n[e]);
                return 1;
            }
        }
    return 0;
}

static int flag_div(ro_replay_div_t *d, uint32_t a, const char *field, bool rec, bool rep)
{
    d->agent = a;
    snprintf(d->what, sizeof d->what, "%s: recorded %d, replayed %d", field, rec, rep);
    return 1;
}

int ro__replay_rows_step(ro_replay_rows_t *rr, const ro_env2_vtable_t *vt2, void *env,
                         const Rollout__V1__TransitionBatch *b, size_t k, ro_replay_div_t *d)
{
    const uint32_t A = rr->rows.agents;
    if (actions_ok(rr, b, k, d))
        return 1;
    ro_actions_t act = {
        .discrete = rr->rows.ndisc ? b->action + k * rr->rows.ndisc : NULL,
        .box = rr->rows.nbox ? b->action_box + k * rr->rows.nbox : NULL,
    };
    void *t[RO_ENV_MAX_TENSORS];
    ro_obs_out_t o;
    obs_out(rr, t, &o);
    memset(rr->st, 0, A * sizeof *rr->st);
    int rc = vt2->step(env, &act, &o, rr->st);
    bool failed = rc != 0 || (rr->check_finite && !all_finite(rr)) || !masks_ok(rr);
    bool rec_failed = (b->flags[k] & RO_TRAJ_FAILED) != 0;
    if (failed != rec_failed)
        return flag_div(d, 0, "failed", rec_failed, failed);
    if (failed)
        return 0; /* the recorded reset follows */
    bool end = rr->max_steps && b->step[k] >= rr->max_steps;
    for (uint32_t a = 0; a < A; a++)
        end = end || rr->st[a].terminated || rr->st[a].truncated;
    /* No mask is recorded with a final observation. */
    if (compare_obs(rr, b, k, !end, d))
        return 1;
    for (uint32_t a = 0; a < A; a++) {
        const ro_step_t *s = &rr->st[a];
        float rec = b->reward[k + a];
        uint32_t fl = b->flags[k + a];
        if (bits(s->reward) != bits(rec)) {
            d->agent = a;
            snprintf(d->what, sizeof d->what,
                     "reward: recorded %.9g (0x%08x), replayed %.9g (0x%08x)", rec, bits(rec),
                     s->reward, bits(s->reward));
            return 1;
        }
        bool term = s->terminated != 0, trunc = s->truncated != 0 || (end && !term);
        if (term != ((fl & RO_TRAJ_TERMINATED) != 0))
            return flag_div(d, a, "terminated", !term, term);
        if (trunc != ((fl & RO_TRAJ_TRUNCATED) != 0))
            return flag_div(d, a, "truncated", !trunc, trunc);
    }
    /* The node asks for the episode's metrics before the reset: so does
     * replay, in case the env's state depends on it. */
    if (end && vt2->metric_names && vt2->episode_metrics) {
        float v[RO_ENV_MAX_METRICS];
        for (uint32_t m = 0; m < RO_ENV_MAX_METRICS; m++)
            v[m] = NAN;
        vt2->episode_metrics(env, v);
    }
    return 0;
}

double ro__replay_rows_mean_reward(const ro_replay_rows_t *rr,
                                   const Rollout__V1__TransitionBatch *b, size_t k)
{
    double s = 0.0;
    for (uint32_t a = 0; a < rr->rows.agents; a++)
        s += b->reward[k + a];
    return s / rr->rows.agents;
}

/* ---- dump ---- */

static void put_float(FILE *f, float v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void put_tensor(FILE *f, ro_dtype_t dt, const uint8_t *p, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        if (dt == RO_DTYPE_UINT8) {
            fprintf(f, "%u", p[i]);
        } else if (dt == RO_DTYPE_INT32) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            fprintf(f, "%" PRId32, v);
        } else {
            float v;
            memcpy(&v, p + 4 * i, 4);
            put_float(f, v);
        }
    }
    fputc(']', f);
}

/* put_outcome ends row k's JSON line: its reward and flags, the same in
 * both layouts' dumps. */
static void put_outcome(FILE *f, const Rollout__V1__TransitionBatch *b, size_t k)
{
    uint32_t fl = b->flags[k];
    fputs(",\"reward\":", f);
    put_float(f, b->reward[k]);
    fprintf(f, ",\"terminated\":%s,\"truncated\":%s,\"failed\":%s}\n",
            fl & RO_TRAJ_TERMINATED ? "true" : "false", fl & RO_TRAJ_TRUNCATED ? "true" : "false",
            fl & RO_TRAJ_FAILED ? "true" : "false");
}

void ro__replay_rows_dump(const ro_replay_rows_t *rr, const Rollout__V1__TrajectoryLayout *l,
                          FILE *f, const Rollout__V1__TransitionBatch *b, size_t k)
{
    const ro_traj_rows_t *rw = &rr->rows;
    uint32_t fl = b->flags[k];
    bool reset = fl & RO_TRAJ_RESET;
    fprintf(f,
            "{\"env\":%u,\"agent\":%u,\"episode\":%" PRIu64 ",\"step\":%u,\"reset\":%s,"
            "\"obs\":{",
            b->env[k], b->agent[k], b->episode[k], b->step[k], reset ? "true" : "false");
    for (uint32_t t = 0; t < rw->ntensors; t++) {
        /* Names were checked: [A-Za-z0-9_], nothing to escape. */
        fprintf(f, "%s\"%s\":", t ? "," : "", l->tensors[t]->name);
        put_tensor(f, ro__wire_dtype_to_env(l->tensors[t]->dtype),
                   b->tensors[t]->data.data + k * rw->row_bytes[t], rw->row_bytes[t] / rw->elem[t]);
    }
    fputc('}', f);
    if (rw->mask_width) {
        fputs(",\"mask\":", f);
        put_tensor(f, RO_DTYPE_UINT8, b->mask.data + k * rw->mask_width, rw->mask_width);
    }
    fputs(",\"action\":", f);
    if (reset) {
        fputs("null", f);
    } else {
        fputc('{', f);
        if (rw->ndisc) {
            fputs("\"discrete\":", f);
            put_tensor(f, RO_DTYPE_INT32, (const uint8_t *)(b->action + k * rw->ndisc), rw->ndisc);
        }
        if (rw->nbox) {
            fputs(rw->ndisc ? ",\"box\":" : "\"box\":", f);
            put_tensor(f, RO_DTYPE_FLOAT32, (const uint8_t *)(b->action_box + k * rw->nbox),
                       rw->nbox);
        }
        fputc('}', f);
    }
    put_outcome(f, b, k);
}

bool ro__replay_same_layout(const Rollout__V1__TrajectoryHeader *a,
                            const Rollout__V1__TrajectoryHeader *b)
{
    if (!a->layout || !b->layout)
        return !a->layout == !b->layout;
    size_t na = protobuf_c_message_get_packed_size(&a->layout->base);
    size_t nb = protobuf_c_message_get_packed_size(&b->layout->base);
    if (na != nb)
        return false;
    uint8_t *pa = malloc(na + 1), *pb = malloc(nb + 1);
    bool same = pa && pb;
    if (same) {
        protobuf_c_message_pack(&a->layout->base, pa);
        protobuf_c_message_pack(&b->layout->base, pb);
        same = memcmp(pa, pb, na) == 0;
    }
    free(pa);
    free(pb);
    return same;
}

void ro__replay_dump(const ro_replay_rows_t *rr, const Rollout__V1__TrajectoryHeader *h,
                     uint32_t agents, FILE *f, const Rollout__V1__TransitionBatch *b, size_t k)
{
    if (h->layout) { /* every agent's row of the env step */
        for (uint32_t a = 0; a < agents; a++)
            ro__replay_rows_dump(rr, h->layout, f, b, k + a);
        return;
    }
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
    put_outcome(f, b, k);
}

/* The "all" line's tail: what the envs were seeded from (docs/replay.md). */
static void seed_fields(FILE *f, const Rollout__V1__TrajectoryHeader *h)
{
    if (h)
        fprintf(f, ",\"seed\":%" PRIu64 ",\"node_index\":%" PRIu32, h->seed, h->node_index);
}

/* One --stats line; h: the header for the "all" line, NULL for an env's. */
void ro__replay_stats_line(FILE *f, const char *env, uint64_t eps, uint64_t steps, double rs,
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
