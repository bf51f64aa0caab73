/*
 * rollout-replay --fork's records (fork_record.h): the rows of each round
 * of steps in the parent's format, and the envs' snapshots.
 */
#include "replay/fork_record.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_state.h"
#include "wire/dtype.h"

int ro__fork_fail(ro_fork_run_t *f, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rollout-replay: --fork: ", f->r->o.log);
    vfprintf(f->r->o.log, fmt, ap);
    fputc('\n', f->r->o.log);
    va_end(ap);
    return status;
}

int ro__fork_record_init(ro_fork_run_t *f)
{
    const ro_space_layout_t *l = f->lay;
    const size_t e = 2 * (size_t)f->n * f->A;
    char err[256];
    const ro_recorded_env_t *re = &f->r->renv;
    f->params = ro__env_params_hash(ro__env_kind_name(&re->kind), re->args, re->nargs,
                                    f->r->hdr->max_episode_steps);
    if (ro__env_state_bytes(&re->kind, f->r->envs[f->ids[0]].env, &f->blob, err, sizeof err))
        return ro__fork_fail(f, RO_REPLAY_UNUSABLE, "%s", err);
    f->c_env = calloc(e, 4), f->c_agent = calloc(e, 4), f->c_step = calloc(e, 4);
    f->c_flags = calloc(e, 4), f->c_ep = calloc(e, 8), f->c_rew = calloc(e, 4);
    f->c_acti = calloc(e * l->ndisc + 1, 4), f->c_actf = calloc(e * l->nbox + 1, 4);
    f->c_mask = calloc(e * l->mask_width + 1, 1);
    f->sn = calloc(f->n, sizeof *f->sn), f->snp = calloc(f->n, sizeof *f->snp);
    f->blobs = calloc(f->n, f->blob);
    bool ok = f->c_env && f->c_agent && f->c_step && f->c_flags && f->c_ep && f->c_rew &&
              f->c_acti && f->c_actf && f->c_mask && f->sn && f->snp && f->blobs;
    for (uint32_t k = 0; k < l->ntensors; k++)
        ok = ok && (f->c_t[k] = calloc(e, l->t[k].row_bytes));
    return ok ? RO_REPLAY_OK : ro__fork_fail(f, RO_REPLAY_UNUSABLE, "out of memory");
}

void ro__fork_record_free(ro_fork_run_t *f)
{
    free(f->c_env), free(f->c_agent), free(f->c_step), free(f->c_flags), free(f->c_ep);
    free(f->c_rew), free(f->c_acti), free(f->c_actf), free(f->c_mask);
    for (uint32_t k = 0; k < RO_ENV_MAX_TENSORS; k++)
        free(f->c_t[k]);
    free(f->sn), free(f->snp), free(f->blobs);
}

uint64_t ro__fork_record_max(const ro_fork_run_t *f)
{
    const ro_space_layout_t *l = f->lay;
    /* A row's columns (varints of at most 10 bytes, floats), its actions,
     * tensors and mask; per record its tensors' names and shapes. */
    uint64_t row = 6 * 10 + 4 + 10ull * l->ndisc + 4ull * l->nbox + l->obs_bytes + l->mask_width;
    uint64_t per_record = 16 * 10 + 64 + (uint64_t)l->ntensors * (RO_ENV_MAX_NAME + 64);
    return 2ull * f->n * f->A * row + per_record + (uint64_t)f->n * (60 + f->blob);
}

void ro__fork_record_begin(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b)
{
    rollout__v1__transition_batch__init(b);
    f->rows = 0;
}

void ro__fork_record_end(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b)
{
    const ro_space_layout_t *l = f->lay;
    const size_t n = f->rows;
    b->n_env = b->n_episode = b->n_step = b->n_flags = b->n_reward = n;
    b->env = f->c_env, b->episode = f->c_ep, b->step = f->c_step, b->flags = f->c_flags;
    b->reward = f->c_rew;
    if (!f->r->hdr->layout) { /* an ABI 1 recording: one float tensor, one action */
        b->n_obs = n * l->t[0].size;
        b->obs = (float *)f->c_t[0];
        if (l->ndisc)
            b->n_action = n, b->action = f->c_acti;
        else
            b->n_action_box = n * l->nbox, b->action_box = f->c_actf;
        return;
    }
    b->n_agent = n, b->agent = f->c_agent;
    b->n_action = n * l->ndisc, b->action = l->ndisc ? f->c_acti : NULL;
    b->n_action_box = n * l->nbox, b->action_box = l->nbox ? f->c_actf : NULL;
    b->mask.len = n * l->mask_width, b->mask.data = l->mask_width ? f->c_mask : NULL;
    if (!n)
        return;
    for (uint32_t k = 0; k < l->ntensors; k++) {
        Rollout__V1__NamedTensor *t = &f->nt[k];
        rollout__v1__named_tensor__init(t);
        t->name = (char *)l->t[k].name;
        t->dtype = ro__wire_dtype(l->t[k].dtype);
        f->shape[k][0] = (uint32_t)n;
        memcpy(&f->shape[k][1], l->t[k].shape, l->t[k].ndim * sizeof(uint32_t));
        t->shape = f->shape[k];
        t->n_shape = l->t[k].ndim + 1;
        t->data.len = n * l->t[k].row_bytes;
        t->data.data = f->c_t[k];
        f->ntp[k] = t;
    }
    b->tensors = f->ntp;
    b->n_tensors = l->ntensors;
}

/* put_rows appends env j's A rows: their columns, actions (none: zeros),
 * observations (none: zeros) and mask (none: zeros). */
static void put_rows(ro_fork_run_t *f, uint32_t j, const uint32_t *flags, const float *reward,
                     bool actions, bool obs, bool mask)
{
    const ro_space_layout_t *l = f->lay;
    const uint32_t A = f->A;
    const size_t k0 = f->rows, row0 = (size_t)j * A;
    for (uint32_t a = 0; a < A; a++) {
        size_t k = k0 + a;
        f->c_env[k] = f->ids[j];
        f->c_agent[k] = a;
        f->c_ep[k] = f->episode[j];
        f->c_step[k] = f->step[j];
        f->c_flags[k] = flags[a];
        f->c_rew[k] = reward[a];
    }
    if (actions) {
        memcpy(f->c_acti + k0 * l->ndisc, f->act_i + row0 * l->ndisc, A * l->ndisc * 4);
        memcpy(f->c_actf + k0 * l->nbox, f->act_f + row0 * l->nbox, A * l->nbox * 4);
    } else {
        memset(f->c_acti + k0 * l->ndisc, 0, A * l->ndisc * 4);
        memset(f->c_actf + k0 * l->nbox, 0, A * l->nbox * 4);
    }
    for (uint32_t t = 0; t < l->ntensors; t++) {
        size_t rb = l->t[t].row_bytes;
        if (obs)
            memcpy(f->c_t[t] + k0 * rb, f->obs[t] + row0 * rb, A * rb);
        else
            memset(f->c_t[t] + k0 * rb, 0, A * rb);
    }
    size_t mw = l->mask_width;
    if (mw && mask)
        memcpy(f->c_mask + k0 * mw, f->mask + row0 * mw, A * mw);
    else if (mw)
        memset(f->c_mask + k0 * mw, 0, A * mw);
    f->rows += A;
}

void ro__fork_put_step(ro_fork_run_t *f, uint32_t j, bool failed, bool end)
{
    const Rollout__V1__TrajectoryHeader *h = f->r->hdr;
    const bool limit = h->max_episode_steps && f->step[j] >= h->max_episode_steps;
    uint32_t flags[RO_ENV_MAX_AGENTS];
    float reward[RO_ENV_MAX_AGENTS];
    for (uint32_t a = 0; a < f->A; a++) {
        const ro_step_t *s = &f->st[a];
        bool term = s->terminated != 0;
        /* An ABI 1 recording counts the limit as truncation whatever the
         * env said; ABI 2 rows truncate every agent that did not
         * terminate when the episode ends (as replay verifies them). */
        bool trunc = h->layout ? s->truncated || (end && !term) : s->truncated || limit;
        flags[a] = failed ? RO_TRAJ_FAILED | RO_TRAJ_TRUNCATED
                          : (term ? RO_TRAJ_TERMINATED : 0u) | (trunc ? RO_TRAJ_TRUNCATED : 0u);
        reward[a] = failed ? 0.0f : s->reward;
    }
    put_rows(f, j, flags, reward, true, !failed, !failed && !end);
}

void ro__fork_put_reset(ro_fork_run_t *f, uint32_t j)
{
    uint32_t flags[RO_ENV_MAX_AGENTS];
    float reward[RO_ENV_MAX_AGENTS];
    for (uint32_t a = 0; a < f->A; a++)
        flags[a] = RO_TRAJ_RESET, reward[a] = 0.0f;
    put_rows(f, j, flags, reward, false, true, true);
}

int ro__fork_snapshot(ro_fork_run_t *f, Rollout__V1__TransitionBatch *b, uint64_t env_steps)
{
    char err[256];
    for (uint32_t j = 0; j < f->n; j++) {
        size_t len;
        uint8_t *blob = f->blobs + (size_t)j * f->blob;
        if (ro__env_state_save(&f->r->renv.kind, f->r->envs[f->ids[j]].env, f->params, f->step[j],
                               blob, f->blob, &len, err, sizeof err))
            return ro__fork_fail(f, RO_REPLAY_FAILED, "env %u: %s", f->ids[j], err);
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
