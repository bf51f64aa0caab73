/* vec_step.c: one step and one reset of the vector engine's envs, as jobs
 * over parts of the envs (vec.h). Each part touches only its own envs'
 * rows, so parts run on any thread of the pool. */
#include "vecenv/vec_step.h"

#include <math.h>
#include <string.h>

#include "envs/env_ops.h"
#include "runtime/rng.h"

/* rows_of points t at env j's rows of every observation tensor of bufs. */
static void rows_of(const ro_vec_t *v, uint8_t *const *bufs, uint32_t j, void **t)
{
    for (uint32_t k = 0; k < v->lay.ntensors; k++)
        t[k] = bufs[k] + (size_t)j * v->lay.t[k].row_bytes;
}

static uint8_t *mask_of(const ro_vec_t *v, uint32_t j)
{
    return v->mask ? v->mask + (size_t)j * v->lay.mask_width : NULL;
}

/* finite tells whether env j's float32 tensors and reward are finite. */
static bool row_ok(const ro_vec_t *v, void *const *t, float reward)
{
    int bad = !isfinite(reward);
    for (uint32_t k = 0; k < v->lay.ntensors; k++) {
        if (v->lay.t[k].dtype != RO_DTYPE_FLOAT32)
            continue;
        const float *x = t[k];
        /* One pass with no early exit: it vectorises. */
        for (uint32_t i = 0; i < v->lay.t[k].size; i++)
            bad |= !isfinite(x[i]);
    }
    return !bad;
}

/* begin resets env j into t: a new episode. A reset whose mask leaves an
 * entry no value broke the env's contract: every value is allowed and the
 * env counts as failed. */
static void begin(ro_vec_t *v, uint32_t j, void *const *t)
{
    uint8_t *m = mask_of(v, j);
    ro__env_reset(&v->kind, v->envs[j], t, m);
    uint32_t entry;
    if (m && !ro__layout_mask_ok(&v->lay, m, &entry)) {
        memset(m, 1, v->lay.mask_width);
        v->failed[j] = 1;
    }
    v->ep_len[j] = 0;
}

/* step_begin points t at env j's rows and readies its step: true when the
 * env steps now (its parts follow), false when this step was its NEXT_STEP
 * reset (done). */
static bool step_begin(ro_vec_t *v, uint32_t j, void **t)
{
    rows_of(v, v->obs, j, t);
    v->failed[j] = 0;
    if (!v->ended[j])
        return true;
    begin(v, j, t); /* NEXT_STEP: this step is the reset */
    v->ended[j] = 0;
    v->reward[j] = 0.0;
    v->terminated[j] = v->truncated[j] = 0;
    return false;
}

/* step_end writes env j's outcome of a step that returned rc with st. */
static void step_end(ro_vec_t *v, uint32_t j, void *const *t, int rc, const ro_step_t *st)
{
    const ro_space_layout_t *L = &v->lay;
    uint32_t entry;
    if (rc != 0 || (v->check_finite && !row_ok(v, t, st->reward)) ||
        (v->mask && !ro__layout_mask_ok(L, mask_of(v, j), &entry))) {
        /* Cut: counted, truncated, and started over in this step (its
         * observation, and under SAME_STEP its final one, are the next
         * episode's first). */
        begin(v, j, t);
        v->failed[j] = 1;
        v->reward[j] = 0.0;
        v->terminated[j] = 0;
        v->truncated[j] = 1;
        if (v->mode == RO_AUTORESET_SAME_STEP) {
            void *f[RO_ENV_MAX_TENSORS];
            rows_of(v, v->final_obs, j, f);
            for (uint32_t k = 0; k < L->ntensors; k++)
                memcpy(f[k], t[k], L->t[k].row_bytes);
        } else {
            v->ended[j] = 1;
        }
        return;
    }
    v->ep_len[j]++;
    const bool trunc = st->truncated || (v->max_steps && v->ep_len[j] >= v->max_steps);
    v->reward[j] = st->reward;
    v->terminated[j] = st->terminated != 0;
    v->truncated[j] = trunc;
    if (!st->terminated && !trunc)
        return;
    if (v->mode != RO_AUTORESET_SAME_STEP) {
        v->ended[j] = 1;
        return;
    }
    void *f[RO_ENV_MAX_TENSORS];
    rows_of(v, v->final_obs, j, f);
    for (uint32_t k = 0; k < L->ntensors; k++)
        memcpy(f[k], t[k], L->t[k].row_bytes);
    begin(v, j, t);
}

bool ro__vec_step_env_part(void *ctx, uint32_t j, uint32_t part)
{
    ro_vec_t *v = ctx;
    const ro_space_layout_t *L = &v->lay;
    void *t[RO_ENV_MAX_TENSORS];
    if (part == 0) {
        if (!step_begin(v, j, t))
            return false;
    } else {
        rows_of(v, v->obs, j, t);
    }
    ro_step_t st;
    int rc = ro__env_step_part(
        &v->kind, v->envs[j], part, L->ndisc ? v->act_i + (size_t)j * L->ndisc : NULL,
        L->nbox ? v->act_f + (size_t)j * L->nbox : NULL, t, mask_of(v, j), &st, 1);
    if (rc > 0)
        return true;
    step_end(v, j, t, rc, &st);
    return false;
}

/* step_one steps env j whole: its parts in order. */
static void step_one(ro_vec_t *v, uint32_t j)
{
    for (uint32_t part = 0; ro__vec_step_env_part(v, j, part); part++)
        continue;
}

void ro__vec_step_part(void *ctx, uint32_t b, uint32_t e)
{
    ro_vec_t *v = ctx;
    const ro_space_layout_t *L = &v->lay;
    /* A Python env's part goes to its processes at once (not its NEXT_STEP
     * resets); step_one then reads each env's outcome. */
    ro__env_step_group(&v->kind, v->envs + b, e - b,
                       L->ndisc ? v->act_i + (size_t)b * L->ndisc : NULL,
                       L->nbox ? v->act_f + (size_t)b * L->nbox : NULL, v->ended + b);
    for (uint32_t j = b; j < e; j++)
        step_one(v, j);
}

void ro__vec_step_ids_groups_part(void *ctx, uint32_t b, uint32_t e)
{
    ro_vec_t *v = ctx;
    const ro_space_layout_t *L = &v->lay;
    for (uint32_t g = b; g < e; g++) {
        const uint32_t lo = g * v->group, hi = lo + v->group, at = lo;
        uint32_t m = 0;
        for (uint32_t i = 0; i < v->njob; i++) {
            const uint32_t id = v->job_ids[i];
            if (id < lo || id >= hi)
                continue;
            v->py_ids[at + m] = id;
            v->py_envs[at + m] = v->envs[id];
            v->py_skip[at + m] = v->ended[id];
            if (L->ndisc)
                memcpy(v->py_act_i + (size_t)(at + m) * L->ndisc, v->act_i + (size_t)id * L->ndisc,
                       L->ndisc * sizeof *v->act_i);
            if (L->nbox)
                memcpy(v->py_act_f + (size_t)(at + m) * L->nbox, v->act_f + (size_t)id * L->nbox,
                       L->nbox * sizeof *v->act_f);
            m++;
        }
        ro__env_step_group(&v->kind, v->py_envs + at, m,
                           L->ndisc ? v->py_act_i + (size_t)at * L->ndisc : NULL,
                           L->nbox ? v->py_act_f + (size_t)at * L->nbox : NULL, v->py_skip + at);
        for (uint32_t i = 0; i < m; i++)
            step_one(v, v->py_ids[at + i]);
    }
}

void ro__vec_step_ids_part(void *ctx, uint32_t b, uint32_t e)
{
    ro_vec_t *v = ctx;
    for (uint32_t i = b; i < e; i++)
        step_one(v, v->job_ids[i]);
}

void ro__vec_reset_part(void *ctx, uint32_t b, uint32_t e)
{
    ro_vec_t *v = ctx;
    for (uint32_t j = b; j < e; j++) {
        v->failed[j] = 0;
        if (v->reset_mask && !v->reset_mask[j])
            continue;
        if (v->seeds && (!v->reseed || v->reseed[j])) {
            void *fresh;
            char err[8];
            if (ro__env_create(&v->kind, &fresh, v->args, v->nargs,
                               ro__seed_mix(v->seeds[j], j, RO_STREAM_ENV), j, err, sizeof err)) {
                v->failed[j] = 2; /* the owner re-creates it to name the error */
                continue;
            }
            ro__env_destroy(&v->kind, v->envs[j]);
            v->envs[j] = fresh;
        }
        void *t[RO_ENV_MAX_TENSORS];
        rows_of(v, v->obs, j, t);
        begin(v, j, t);
        v->ended[j] = 0;
        v->reward[j] = 0.0;
        v->terminated[j] = v->truncated[j] = 0;
    }
}
