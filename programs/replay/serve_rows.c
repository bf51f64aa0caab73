/*
 * rollout-replay --serve's rows (serve_rows.h): recorded rows in, a node's
 * frame out (an obs column or typed tensors); actions in, checked and
 * compared.
 */
#include "replay/serve_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "trajectory/format.h"
#include "wire/checks.h"
#include "wire/obs_frame.h"
#include "wire/typed_checks.h"

/* --serve holds a few arrays per row: this many rows at most. */
#define MAX_ROWS (1u << 24)

/* check_bounds: a header's box bounds, where it carries any, are the
 * env's (trajectory files leave them empty; the welcome's are the env's). */
static int check_bounds(const Rollout__V1__TrajectoryLayout *l, const ro_space_layout_t *lay,
                        char *err, size_t errlen)
{
    for (uint32_t i = 0; i < lay->nparts && i < l->n_parts; i++) {
        const Rollout__V1__TrajectoryActionPart *p = l->parts[i];
        const ro_part_layout_t *pl = &lay->part[i];
        if (!p->n_low && !p->n_high)
            continue;
        bool same = pl->kind == RO_SPACE_BOX && p->n_low == pl->n && p->n_high == pl->n &&
                    memcmp(p->low, lay->box_low + pl->first, pl->n * sizeof(float)) == 0 &&
                    memcmp(p->high, lay->box_high + pl->first, pl->n * sizeof(float)) == 0;
        if (!same)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "the recording's layout parts[%u] carries %zu low and %zu high "
                              "bounds that are not the env's (%s part of %u values)",
                              i, p->n_low, p->n_high,
                              pl->kind == RO_SPACE_BOX ? "a box" : "a discrete", pl->n);
    }
    return 0;
}

int ro__serve_rows_init(ro_serve_rows_t *v, const Rollout__V1__TrajectoryHeader *h,
                        const ro_space_layout_t *lay, const ro_space_t *os, const ro_space_t *as,
                        char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->lay = lay;
    v->agents = lay->agents;
    v->flat_records = h->layout == NULL;
    v->abi1_frames = lay->abi1;
    if (os && as) {
        v->os = *os;
        v->as = *as;
    } else {
        (void)ro__layout_abi1_view(lay, &v->os, &v->as); /* ABI 1 shaped: a node's spaces */
    }
    if ((uint64_t)h->num_envs * lay->agents > MAX_ROWS)
        return ro__errorf(err, errlen, RO_ENOTSUP,
                          "%u envs of %u agents are more than the %u rows --serve carries",
                          h->num_envs, lay->agents, MAX_ROWS);
    v->num_rows = h->num_envs * lay->agents;
    int rc = h->layout ? check_bounds(h->layout, lay, err, errlen) : 0;
    if (rc)
        return rc;
    if (ro__traj_layout_msg_init(&v->lm, lay) != 0)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the welcome's layout");
    for (uint32_t i = 0; i < lay->nparts; i++) { /* the bounds, as a node's welcome has them */
        const ro_part_layout_t *pl = &lay->part[i];
        if (pl->kind != RO_SPACE_BOX)
            continue;
        v->lm.p[i].n_low = v->lm.p[i].n_high = pl->n;
        v->lm.p[i].low = lay->box_low + pl->first;
        v->lm.p[i].high = lay->box_high + pl->first;
    }
    const size_t n = v->num_rows;
    v->at = calloc(n, sizeof *v->at);
    v->at_gen = calloc(n, sizeof *v->at_gen);
    v->steps = calloc(n, sizeof *v->steps);
    v->answered = calloc(n, sizeof *v->answered);
    v->ans_i = calloc(n * lay->ndisc + 1, sizeof *v->ans_i);
    v->ans_f = calloc(n * lay->nbox + 1, sizeof *v->ans_f);
    if (!v->at || !v->at_gen || !v->steps || !v->answered || !v->ans_i || !v->ans_f)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %zu rows", n);
    ro__obs_tensors_init(&v->msgs, lay, 0);
    return 0;
}

/* free_scratch frees the frame's scratch. */
static void free_scratch(ro_serve_rows_t *v)
{
    free(v->row), free(v->src), free(v->fidx), free(v->step), free(v->rew);
    free(v->term), free(v->trunc), free(v->start), free(v->mask);
    for (uint32_t k = 0; k < RO_ENV_MAX_TENSORS; k++)
        free(v->tensor[k]), free(v->fin[k]), v->tensor[k] = v->fin[k] = NULL;
    v->row = v->src = v->fidx = NULL;
    v->step = NULL;
    v->rew = NULL;
    v->term = v->trunc = v->start = NULL;
    v->mask = NULL;
    v->cap = 0;
}

void ro__serve_rows_free(ro_serve_rows_t *v)
{
    free_scratch(v);
    free(v->at), free(v->at_gen), free(v->steps), free(v->answered);
    free(v->ans_i), free(v->ans_f);
    ro__traj_layout_msg_free(&v->lm);
    memset(v, 0, sizeof *v);
}

/* ensure_rows: scratch for n rows of the frame. */
static bool ensure_rows(ro_serve_rows_t *v, size_t n)
{
    if (n <= v->cap)
        return true;
    free_scratch(v);
    const ro_space_layout_t *lay = v->lay;
    v->row = calloc(n, sizeof *v->row);
    v->src = calloc(n, sizeof *v->src);
    v->fidx = calloc(n, sizeof *v->fidx);
    v->step = calloc(n, sizeof *v->step);
    v->rew = calloc(n, sizeof *v->rew);
    v->term = calloc(n, sizeof *v->term);
    v->trunc = calloc(n, sizeof *v->trunc);
    v->start = calloc(n, sizeof *v->start);
    v->mask = calloc(n * lay->mask_width + 1, 1);
    bool ok = v->row && v->src && v->fidx && v->step && v->rew && v->term && v->trunc && v->start &&
              v->mask;
    for (uint32_t k = 0; ok && k < lay->ntensors; k++)
        ok = (v->tensor[k] = malloc(n * lay->t[k].row_bytes)) &&
             (v->fin[k] = malloc(n * lay->t[k].row_bytes));
    if (!ok) {
        free_scratch(v);
        return false;
    }
    v->cap = n;
    return true;
}

/* compare: the learner's last answer for row r against the action the
 * recording shows for r's next step (row k of b). */
static void compare(ro_serve_rows_t *v, const Rollout__V1__TransitionBatch *b, size_t k, uint32_t r)
{
    if (!v->answered[r])
        return;
    v->answered[r] = false;
    v->compared++;
    const ro_space_layout_t *lay = v->lay;
    const size_t di = k * lay->ndisc, dg = (size_t)r * lay->ndisc;
    const size_t fi = k * lay->nbox, fg = (size_t)r * lay->nbox;
    char what[120] = "";
    for (uint32_t j = 0; !what[0] && j < lay->ndisc; j++)
        if (b->action[di + j] != v->ans_i[dg + j])
            snprintf(what, sizeof what, "entry %u: recorded %d, learner %d", j, b->action[di + j],
                     v->ans_i[dg + j]);
    for (uint32_t j = 0; !what[0] && j < lay->nbox; j++)
        if (memcmp(&b->action_box[fi + j], &v->ans_f[fg + j], sizeof(float)) != 0)
            snprintf(what, sizeof what, "box value %u: recorded %.9g, learner %.9g", j,
                     (double)b->action_box[fi + j], (double)v->ans_f[fg + j]);
    if (what[0] && v->mismatches++ == 0)
        snprintf(v->first_mismatch, sizeof v->first_mismatch,
                 "env %u, agent %u, episode %llu, step %u, %s", b->env[k],
                 b->n_agent ? b->agent[k] : 0, (unsigned long long)b->episode[k], b->step[k], what);
}

/* put_obs: row k of b's tensors (a version 1 record: its obs, the one
 * float32 tensor) and mask into position p of the frame. */
static void put_obs(ro_serve_rows_t *v, const Rollout__V1__TransitionBatch *b, size_t k, uint32_t p)
{
    const ro_space_layout_t *lay = v->lay;
    for (uint32_t t = 0; t < lay->ntensors; t++) {
        const size_t rb = lay->t[t].row_bytes;
        const uint8_t *src = v->flat_records ? (const uint8_t *)(const void *)b->obs /* one */
                                             : b->tensors[t]->data.data;
        memcpy(v->tensor[t] + p * rb, src + k * rb, rb);
    }
    const size_t mw = lay->mask_width;
    if (mw)
        memcpy(v->mask + p * mw, b->mask.data + k * mw, mw);
}

/* add_row: a new position of the frame for row r from row k of b. */
static uint32_t add_row(ro_serve_rows_t *v, const Rollout__V1__TransitionBatch *b, size_t k,
                        uint32_t r)
{
    uint32_t p = v->n++;
    v->at[r] = p;
    v->at_gen[r] = v->gen;
    v->row[p] = r;
    put_obs(v, b, k, p);
    return p;
}

/* final_obs: position p's observation (its step's) becomes final. */
static void final_obs(ro_serve_rows_t *v, uint32_t p)
{
    const ro_space_layout_t *lay = v->lay;
    for (uint32_t t = 0; t < lay->ntensors; t++) {
        const size_t rb = lay->t[t].row_bytes;
        memcpy(v->fin[t] + (size_t)v->nfin * rb, v->tensor[t] + (size_t)p * rb, rb);
    }
    v->fidx[v->nfin++] = p;
}

int ro__serve_rows_fill(ro_serve_rows_t *v, const Rollout__V1__TransitionBatch *b, char *err,
                        size_t errlen)
{
    const ro_space_layout_t *lay = v->lay;
    const unsigned long long rec = (unsigned long long)b->record;
    if (!ensure_rows(v, b->n_env + 1))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for a frame of %zu rows",
                          b->n_env);
    v->gen++;
    v->n = v->nfin = 0;
    for (size_t k = 0; k < b->n_env; k++) {
        /* Checked by the reader; a version 1 record names no agents. */
        const uint32_t e = b->env[k], a = b->n_agent ? b->agent[k] : 0, fl = b->flags[k];
        const uint32_t r = e * v->agents + a;
        const bool seen = v->at_gen[r] == v->gen;
        if (!(fl & RO_TRAJ_RESET)) { /* a step: its action answers r's last observation */
            if (seen)
                return ro__errorf(err, errlen, RO_EBADMSG,
                                  "record %llu: env %u agent %u steps twice in one record", rec, e,
                                  a);
            compare(v, b, k, r);
            uint32_t p = add_row(v, b, k, r);
            v->rew[p] = b->reward[k];
            v->term[p] = (fl & RO_TRAJ_TERMINATED) != 0;
            v->trunc[p] = (fl & (RO_TRAJ_TRUNCATED | RO_TRAJ_FAILED)) != 0;
            v->start[p] = 0;
            v->step[p] = ++v->steps[r];
            v->src[p] = (uint32_t)k;
        } else if (seen && !v->start[v->at[r]]) { /* the reset after r's step */
            const uint32_t p = v->at[r];
            if (!(b->flags[v->src[p]] & RO_TRAJ_FAILED)) /* a failed step has no final obs */
                final_obs(v, p);
            put_obs(v, b, k, p);
            v->start[p] = 1;
        } else if (seen) {
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "record %llu: env %u agent %u resets twice in one record", rec, e, a);
        } else { /* a first observation (the start of the run) */
            uint32_t p = add_row(v, b, k, r);
            v->rew[p] = 0;
            v->term[p] = v->trunc[p] = 0;
            v->start[p] = 1;
            v->step[p] = v->steps[r];
        }
    }
    /* The learner answers each row under its mask: one that allows no
     * value of an entry could not be answered (a node never sends one). */
    for (uint32_t p = 0; lay->mask_width && p < v->n; p++) {
        uint32_t entry = 0;
        if (!ro__layout_mask_ok(lay, v->mask + (size_t)p * lay->mask_width, &entry))
            return ro__errorf(err, errlen, RO_EBADMSG,
                              "record %llu: env %u agent %u: its mask allows no value of action "
                              "entry %u, so no learner could answer it",
                              rec, v->row[p] / v->agents, v->row[p] % v->agents, entry);
    }
    return (int)v->n;
}

void ro__serve_rows_frame(ro_serve_rows_t *v, uint64_t seq, Rollout__V1__Observations *o)
{
    const ro_space_layout_t *lay = v->lay;
    const size_t n = v->n;
    ro_obs_cols_t cols = {v->row, v->step, v->rew, v->term, v->trunc, v->start, v->fidx};
    ro__obs_frame_cols(o, seq, &cols, n, v->nfin);
    if (v->abi1_frames) { /* as a node sends an ABI 1 env's: the obs columns */
        const size_t od = lay->obs_width;
        o->n_obs = n * od;
        o->obs = (float *)(void *)v->tensor[0];
        o->n_final_obs = v->nfin * od;
        o->final_obs = (float *)(void *)v->fin[0];
        return;
    }
    ro__obs_frame_tensors(o, &v->msgs, lay, v->tensor, v->fin, v->mask, n, v->nfin);
}

int ro__serve_rows_answer(ro_serve_rows_t *v, const Rollout__V1__Actions *a, char *err,
                          size_t errlen)
{
    const ro_space_layout_t *lay = v->lay;
    int rc = v->abi1_frames ? ro__check_actions(a, v->n, &v->as, err, errlen)
                            : ro__check_actions_typed(a, v->n, lay, err, errlen);
    if (rc == 0 && !v->abi1_frames)
        rc = ro__check_action_rows_typed(lay->ndisc ? a->discrete : NULL, lay->nbox ? a->box : NULL,
                                         lay->mask_width ? v->mask : NULL, v->n, lay, a->seq, 0,
                                         err, errlen);
    if (rc)
        return rc;
    for (uint32_t p = 0; p < v->n; p++) {
        const uint32_t r = v->row[p];
        v->answered[r] = true;
        if (lay->ndisc)
            memcpy(v->ans_i + (size_t)r * lay->ndisc, a->discrete + (size_t)p * lay->ndisc,
                   lay->ndisc * sizeof(int32_t));
        if (lay->nbox)
            memcpy(v->ans_f + (size_t)r * lay->nbox, a->box + (size_t)p * lay->nbox,
                   lay->nbox * sizeof(float));
    }
    return 0;
}
