/*
 * The recorder's chunks: layout, capture and the batch view
 * (recorder_chunk.h).
 */
#include "actors/recorder/recorder_chunk.h"

#include <string.h>

#include "actors/exchange/step_batch.h"
#include "trajectory/abi2_format.h"
#include "trajectory/format.h"

int ro__rec_rows_init(ro_rec_rows_t *rr, const Rollout__V1__TrajectoryLayout *layout,
                      uint32_t obs_dim, uint32_t act_dim, bool discrete, uint32_t cap, char *why,
                      size_t whylen)
{
    memset(rr, 0, sizeof *rr);
    rr->cap = cap;
    rr->obs_dim = obs_dim;
    rr->discrete = discrete;
    rr->act_dim = discrete ? 1 : act_dim;
    if (!layout)
        return 0;
    rr->abi2 = true;
    rr->layout = layout;
    return ro__traj_layout_rows(layout, &rr->row, why, whylen);
}

/* Bytes of one row's columns other than the ABI's own. */
#define ROW_COMMON (8 + 4 + 4 + 4 + 4 + 4)

/* The snapshot columns' bytes, each aligned. */
static size_t snap_bytes(const ro_rec_rows_t *rr)
{
    size_t n = rr->snap_cap;
    return n ? n * (4 + 4 + 8 + 8) + 4 * 8 + (n * rr->state_bytes + 7) / 8 * 8 : 0;
}

size_t ro__rec_chunk_bytes(const ro_rec_rows_t *rr)
{
    size_t e = rr->cap, per;
    if (!rr->abi2)
        return e * (ROW_COMMON + 4 + 4 * (size_t)rr->act_dim + 4 * (size_t)rr->obs_dim) + 64 +
               snap_bytes(rr);
    per = ROW_COMMON + 4 * (size_t)rr->row.ndisc + 4 * (size_t)rr->row.nbox + rr->row.mask_width;
    size_t b = e * per + 64 + snap_bytes(rr);
    for (uint32_t k = 0; k < rr->row.ntensors; k++)
        b += e * rr->row.row_bytes[k] + 64; /* each tensor aligned */
    return b;
}

uint64_t ro__rec_max_record(const ro_rec_rows_t *rr)
{
    /* A snapshot: its tag and length, 4 varints, the state's tag, length
     * and bytes. */
    uint64_t snaps = (uint64_t)rr->snap_cap * (1 + 10 + 5 + 10 + 5 + 10 + 1 + 10 + rr->state_bytes);
    if (!rr->abi2) {
        uint64_t per =
            5 + 10 + 5 + 5 + 4 + (rr->discrete ? 10 : 4ull * rr->act_dim) + 4ull * rr->obs_dim;
        return (uint64_t)rr->cap * per + 10 * 16 + 64 + snaps;
    }
    uint64_t per =
        5 + 5 + 10 + 5 + 5 + 4 + 10ull * rr->row.ndisc + 4ull * rr->row.nbox + rr->row.mask_width;
    uint64_t fixed = 16 * 16 + 64;
    for (uint32_t k = 0; k < rr->row.ntensors; k++) {
        per += rr->row.row_bytes[k];
        fixed += 16 + RO_ENV_MAX_NAME + 4 + 6 * (RO_SPACE_MAX_DIMS + 1) + 16;
    }
    return (uint64_t)rr->cap * per + fixed + snaps;
}

/* The next column of n bytes at *m, kept 8-byte aligned. */
static char *take(char **m, size_t n)
{
    char *at = *m;
    *m += (n + 7) / 8 * 8;
    return at;
}

void ro__rec_chunk_carve(const ro_rec_rows_t *rr, ro_rec_chunk_t *c, char *m)
{
    size_t e = rr->cap;
    if (rr->snap_cap) {
        size_t n = rr->snap_cap;
        c->snap_episode = (uint64_t *)(void *)take(&m, n * 8);
        c->snap_env_steps = (uint64_t *)(void *)take(&m, n * 8);
        c->snap_env = (uint32_t *)(void *)take(&m, n * 4);
        c->snap_step = (uint32_t *)(void *)take(&m, n * 4);
        c->snap_state = (uint8_t *)take(&m, n * rr->state_bytes);
    }
    c->episode = (uint64_t *)(void *)take(&m, e * 8);
    c->env = (uint32_t *)(void *)take(&m, e * 4);
    c->step = (uint32_t *)(void *)take(&m, e * 4);
    c->flags = (uint32_t *)(void *)take(&m, e * 4);
    c->reward = (float *)(void *)take(&m, e * 4);
    if (!rr->abi2) {
        c->act_i = (int32_t *)(void *)take(&m, e * 4);
        c->act_f = (float *)(void *)take(&m, e * 4 * rr->act_dim);
        c->obs = (float *)(void *)take(&m, e * 4 * rr->obs_dim);
        return;
    }
    c->agent = (uint32_t *)(void *)take(&m, e * 4);
    c->act_i = (int32_t *)(void *)take(&m, e * 4 * rr->row.ndisc);
    c->act_f = (float *)(void *)take(&m, e * 4 * rr->row.nbox);
    c->mask = (uint8_t *)take(&m, e * rr->row.mask_width);
    for (uint32_t k = 0; k < rr->row.ntensors; k++)
        c->tensor[k] = (uint8_t *)take(&m, e * rr->row.row_bytes[k]);
}

/* ---- ABI 1: one entry per env ---- */

static void put_entry(const ro_rec_rows_t *rr, ro_rec_chunk_t *c, const ro_step_batch_t *s,
                      uint32_t j, uint64_t ep, uint32_t step, uint32_t flags, const float *obs)
{
    uint32_t k = c->count++;
    c->env[k] = s->first + j;
    c->episode[k] = ep;
    c->step[k] = step;
    c->flags[k] = flags;
    size_t od = rr->obs_dim, ad = rr->act_dim;
    if (flags & RO_TRAJ_RESET) {
        c->reward[k] = 0.0f;
        c->act_i[k] = 0;
        memset(c->act_f + k * ad, 0, ad * sizeof(float));
    } else {
        c->reward[k] = s->reward[j];
        if (rr->discrete)
            c->act_i[k] = s->act_i[j];
        else
            memcpy(c->act_f + k * ad, s->act_f + (size_t)j * ad, ad * sizeof(float));
    }
    if (obs)
        memcpy(c->obs + k * od, obs, od * sizeof(float));
    else
        memset(c->obs + k * od, 0, od * sizeof(float));
}

/* The flags of a start's reset rows: a learner's reseed starts a new
 * episode of every env (env_actor.c), re-created from its seed with one. */
static uint32_t start_flags(ro_rec_port_t *p, ro_rec_chunk_t *c, uint32_t j)
{
    const ro_step_batch_t *s = p->batch;
    if (s->reseed == RO_RESEED_NONE)
        return RO_TRAJ_RESET;
    p->episode[j]++;
    p->step[j] = 0;
    c->reseed = s->reseed_seed;
    return RO_TRAJ_RESET | RO_TRAJ_RESTART | (s->reseed == RO_RESEED_SEED ? RO_TRAJ_RESEEDED : 0u);
}

static void fill_abi1(const ro_rec_rows_t *rr, ro_rec_port_t *p, ro_rec_chunk_t *c, bool start)
{
    const ro_step_batch_t *s = p->batch;
    const size_t od = s->obs_dim;
    for (uint32_t j = 0; j < s->n; j++) {
        const float *o = s->obs + (size_t)j * od;
        if (start) {
            put_entry(rr, c, s, j, p->episode[j], 0, start_flags(p, c, j), o);
            continue;
        }
        if (s->nheld && s->hold[j])
            continue; /* not stepped (NEXT_STEP): nothing happened to record */
        uint32_t flags = (s->terminated[j] ? RO_TRAJ_TERMINATED : 0u) |
                         (s->truncated[j] ? RO_TRAJ_TRUNCATED : 0u);
        bool ended = flags != 0;
        bool failed = s->truncated[j] && !s->has_final[j];
        if (failed)
            flags |= RO_TRAJ_FAILED;
        const float *seen = failed ? NULL : ended ? s->final_obs + (size_t)j * od : o;
        put_entry(rr, c, s, j, p->episode[j], ++p->step[j], flags, seen);
        if (ended) {
            p->episode[j]++;
            p->step[j] = 0;
            put_entry(rr, c, s, j, p->episode[j], 0, RO_TRAJ_RESET, o);
        }
    }
}

/* ---- ABI 2: one row per agent of an env ---- */

/* Where a row's observation comes from: the step's tensors, the final ones
 * (an episode's end), or none (zeros: a failed step). */
enum { SRC_OBS, SRC_FINAL, SRC_NONE };

/* put_row copies row r of the shard (env j, agent a) into c. */
static void put_row(const ro_rec_rows_t *rr, ro_rec_chunk_t *c, const ro_step_batch_t *s,
                    uint32_t j, uint32_t a, uint64_t ep, uint32_t step, uint32_t flags, int src)
{
    const size_t r = (size_t)j * rr->row.agents + a;
    uint32_t k = c->count++;
    c->env[k] = s->first + j;
    c->agent[k] = a;
    c->episode[k] = ep;
    c->step[k] = step;
    c->flags[k] = flags;
    bool reset = flags & RO_TRAJ_RESET;
    c->reward[k] = reset ? 0.0f : s->reward[r];
    if (reset) {
        memset(c->act_i + (size_t)k * rr->row.ndisc, 0, rr->row.ndisc * sizeof(int32_t));
        memset(c->act_f + (size_t)k * rr->row.nbox, 0, rr->row.nbox * sizeof(float));
    } else {
        memcpy(c->act_i + (size_t)k * rr->row.ndisc, s->act_i + r * rr->row.ndisc,
               rr->row.ndisc * sizeof(int32_t));
        memcpy(c->act_f + (size_t)k * rr->row.nbox, s->act_f + r * rr->row.nbox,
               rr->row.nbox * sizeof(float));
    }
    for (uint32_t t = 0; t < rr->row.ntensors; t++) {
        uint8_t *dst = c->tensor[t] + (size_t)k * rr->row.row_bytes[t];
        const uint8_t *from = src == SRC_OBS ? s->tensor[t] : s->final_tensor[t];
        if (src == SRC_NONE)
            memset(dst, 0, rr->row.row_bytes[t]);
        else
            memcpy(dst, from + r * rr->row.row_bytes[t], rr->row.row_bytes[t]);
    }
    /* The mask that came with the observation; the node keeps none with a
     * final observation (nothing acts on it): zeros then. */
    if (rr->row.mask_width) {
        uint8_t *dst = c->mask + (size_t)k * rr->row.mask_width;
        if (src == SRC_OBS && s->mask)
            memcpy(dst, s->mask + r * rr->row.mask_width, rr->row.mask_width);
        else
            memset(dst, 0, rr->row.mask_width);
    }
}

static void fill_abi2(const ro_rec_rows_t *rr, ro_rec_port_t *p, ro_rec_chunk_t *c, bool start)
{
    const ro_step_batch_t *s = p->batch;
    const uint32_t A = rr->row.agents, ne = s->n / A;
    for (uint32_t j = 0; j < ne; j++) {
        const size_t r0 = (size_t)j * A;
        if (start) {
            uint32_t flags = start_flags(p, c, j);
            for (uint32_t a = 0; a < A; a++)
                put_row(rr, c, s, j, a, p->episode[j], 0, flags, SRC_OBS);
            continue;
        }
        if (s->nheld && s->hold[j])
            continue; /* not stepped (NEXT_STEP): nothing happened to record */
        /* The agents of an env end (or fail) together (env_actor.c). */
        bool ended = false;
        for (uint32_t a = 0; a < A; a++)
            ended |= s->terminated[r0 + a] || s->truncated[r0 + a];
        bool failed = s->truncated[r0] && !s->has_final[r0];
        uint32_t step = ++p->step[j];
        for (uint32_t a = 0; a < A; a++) {
            uint32_t flags = (s->terminated[r0 + a] ? RO_TRAJ_TERMINATED : 0u) |
                             (s->truncated[r0 + a] ? RO_TRAJ_TRUNCATED : 0u) |
                             (failed ? RO_TRAJ_FAILED : 0u);
            put_row(rr, c, s, j, a, p->episode[j], step, flags,
                    failed  ? SRC_NONE
                    : ended ? SRC_FINAL
                            : SRC_OBS);
        }
        if (ended) {
            p->episode[j]++;
            p->step[j] = 0;
            for (uint32_t a = 0; a < A; a++)
                put_row(rr, c, s, j, a, p->episode[j], 0, RO_TRAJ_RESET, SRC_OBS);
        }
    }
}

void ro__rec_chunk_fill(const ro_rec_rows_t *rr, ro_rec_port_t *p, ro_rec_chunk_t *c, bool start)
{
    c->port = p;
    c->count = 0;
    c->nsnap = 0;
    c->reseed = 0;
    c->dropped = p->dropped;
    p->dropped = 0;
    if (rr->abi2)
        fill_abi2(rr, p, c, start);
    else
        fill_abi1(rr, p, c, start);
}

void ro__rec_port_skip(ro_rec_port_t *p, bool start)
{
    const ro_step_batch_t *s = p->batch;
    const uint32_t A = s->agents ? s->agents : 1;
    p->dropped++;
    for (uint32_t j = 0; start && s->reseed != RO_RESEED_NONE && j < s->n / A; j++) {
        p->episode[j]++;
        p->step[j] = 0;
    }
    for (uint32_t j = 0; !start && j < s->n / A; j++) {
        if (s->nheld && s->hold[j])
            continue;
        p->step[j]++;
        if (s->terminated[(size_t)j * A] || s->truncated[(size_t)j * A]) {
            p->episode[j]++;
            p->step[j] = 0;
        }
    }
}

void ro__rec_chunk_batch(const ro_rec_rows_t *rr, const ro_rec_chunk_t *c, ro_rec_batch_t *out)
{
    Rollout__V1__TransitionBatch *b = &out->b;
    rollout__v1__transition_batch__init(b);
    const size_t n = c->count;
    b->dropped = c->dropped;
    b->reseed = c->reseed;
    b->n_env = b->n_episode = b->n_step = b->n_flags = b->n_reward = n;
    b->env = c->env;
    b->episode = c->episode;
    b->step = c->step;
    b->flags = c->flags;
    b->reward = c->reward;
    for (uint32_t i = 0; i < c->nsnap; i++) {
        Rollout__V1__EnvSnapshot *sn = &out->snap[i];
        rollout__v1__env_snapshot__init(sn);
        sn->env = c->snap_env[i];
        sn->episode = c->snap_episode[i];
        sn->step = c->snap_step[i];
        sn->env_steps = c->snap_env_steps[i];
        sn->state.len = rr->state_bytes;
        sn->state.data = c->snap_state + (size_t)i * rr->state_bytes;
        out->snapp[i] = sn;
    }
    b->n_snapshots = c->nsnap;
    b->snapshots = c->nsnap ? out->snapp : NULL;
    if (!rr->abi2) {
        if (rr->discrete) {
            b->n_action = n;
            b->action = c->act_i;
        } else {
            b->n_action_box = n * rr->act_dim;
            b->action_box = c->act_f;
        }
        b->n_obs = n * rr->obs_dim;
        b->obs = c->obs;
        return;
    }
    b->n_agent = n;
    b->agent = c->agent;
    b->n_action = n * rr->row.ndisc;
    b->action = rr->row.ndisc ? c->act_i : NULL;
    b->n_action_box = n * rr->row.nbox;
    b->action_box = rr->row.nbox ? c->act_f : NULL;
    b->mask.len = n * rr->row.mask_width;
    b->mask.data = rr->row.mask_width ? c->mask : NULL;
    if (!n)
        return;
    for (uint32_t k = 0; k < rr->row.ntensors; k++) {
        Rollout__V1__NamedTensor *t = &out->t[k];
        rollout__v1__named_tensor__init(t);
        const Rollout__V1__NamedTensor *lt = rr->layout->tensors[k];
        t->name = lt->name;
        t->dtype = lt->dtype;
        out->shape[k][0] = (uint32_t)n;
        memcpy(&out->shape[k][1], lt->shape, lt->n_shape * sizeof(uint32_t));
        t->shape = out->shape[k];
        t->n_shape = lt->n_shape + 1;
        t->data.len = n * rr->row.row_bytes[k];
        t->data.data = c->tensor[k];
        out->tp[k] = t;
    }
    b->tensors = out->tp;
    b->n_tensors = rr->row.ntensors;
}

uint32_t ro__rec_chunk_steps(const ro_rec_chunk_t *c)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->count; k++)
        n += !(c->flags[k] & RO_TRAJ_RESET);
    return n;
}
