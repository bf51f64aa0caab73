#include "actors/stream/segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exchange/messages.h"
#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "wire/dtype.h"

static const char *const col_names[RO_SEG_NCOLS] = {
    [RO_SEG_OBS] = "obs",
    [RO_SEG_ACTION] = "action",
    [RO_SEG_LOGP] = "logp",
    [RO_SEG_MEAN] = "mean",
    [RO_SEG_LOG_STD] = "log_std",
    [RO_SEG_REWARD] = "reward",
    [RO_SEG_TERMINATED] = "terminated",
    [RO_SEG_TRUNCATED] = "truncated",
    [RO_SEG_IS_FIRST] = "is_first",
    [RO_SEG_EPISODE] = "episode",
    [RO_SEG_STEP] = "step",
    [RO_SEG_POLICY_VERSION] = "policy_version",
    [RO_SEG_NEXT_OBS] = "next_obs",
    [RO_SEG_FINAL_INDEX] = "final_index",
    [RO_SEG_FINAL_OBS] = "final_obs",
    [RO_SEG_STATE_H] = "state/h",
    [RO_SEG_STATE_C] = "state/c",
};

const char *ro__seg_col_name(int c)
{
    return col_names[c];
}

/* SEG_COLS(P) is the ro_seg_cols_t of the enum whose names start with P
 * (enum ro_seg_col: RO_SEG_, enum ro_seg2_col: RO_SEG2_): both enums name
 * the shared columns alike, so which field is which column is written once. */
#define SEG_COLS(P)                                                                                \
    {                                                                                              \
        .obs = P##OBS, .next_obs = P##NEXT_OBS, .final_obs = P##FINAL_OBS, .logp = P##LOGP,        \
        .reward = P##REWARD, .terminated = P##TERMINATED, .truncated = P##TRUNCATED,               \
        .is_first = P##IS_FIRST, .episode = P##EPISODE, .step = P##STEP,                           \
        .version = P##POLICY_VERSION, .final_index = P##FINAL_INDEX, .state_h = P##STATE_H,        \
        .state_c = P##STATE_C,                                                                     \
    }

static const ro_seg_cols_t abi1_cols = SEG_COLS(RO_SEG_), abi2_cols = SEG_COLS(RO_SEG2_);

const ro_seg_cols_t *ro__seg_cols(const ro_seg_layout_t *lay)
{
    return lay->space ? &abi2_cols : &abi1_cols;
}

/* Count of column d's leading elements for t rows of n and k finals. */
static size_t lead_count(const ro_seg_col_desc_t *d, uint32_t t, uint32_t n, uint32_t k)
{
    switch (d->lead) {
    case RO_SEG_LEAD_TN:
        return (size_t)t * n;
    case RO_SEG_LEAD_T:
        return t;
    case RO_SEG_LEAD_N:
        return n;
    default:
        return k;
    }
}

/* Bytes of column c for t rows of n envs and k final observations; 0: the
 * column is absent from this layout. */
static size_t col_bytes(const ro_seg_layout_t *lay, int c, uint32_t t, uint32_t n, uint32_t k)
{
    const ro_seg_col_desc_t *d = &lay->col[c];
    return d->item ? lead_count(d, t, n, k) * d->item : 0;
}

size_t ro__seg_col_bytes(const ro_segment_t *s, int c)
{
    return col_bytes(s->lay, c, s->t, s->n, s->nfinal);
}

uint32_t ro__seg_col_shape(const ro_segment_t *s, int c, uint32_t *shape)
{
    const ro_seg_col_desc_t *d = &s->lay->col[c];
    uint32_t k = 0;
    switch (d->lead) {
    case RO_SEG_LEAD_TN:
        shape[k++] = s->t;
        shape[k++] = s->n;
        break;
    case RO_SEG_LEAD_T:
        shape[k++] = s->t;
        break;
    case RO_SEG_LEAD_N:
        shape[k++] = s->n;
        break;
    default:
        shape[k++] = s->nfinal;
        break;
    }
    for (uint32_t i = 0; i < d->ndim; i++)
        shape[k++] = d->shape[i];
    return k;
}

/* Describe column c: name, dtype, leading dims, the dims after them (nd of
 * shape), and its element size; item bytes per leading element follow. */
static void describe(ro_seg_layout_t *lay, int c, const char *prefix, const char *name,
                     uint8_t dtype, uint8_t lead, uint32_t nd, const uint32_t *shape, size_t elem)
{
    ro_seg_col_desc_t *d = &lay->col[c];
    snprintf(d->name, sizeof d->name, "%s%s", prefix, name);
    d->dtype = dtype;
    d->lead = lead;
    d->ndim = nd;
    d->item = elem;
    for (uint32_t i = 0; i < nd; i++) {
        d->shape[i] = shape[i];
        d->item *= shape[i];
    }
}

/* The columns both ABIs' segments have but the observations and actions:
 * per row its log-probability, reward, flags, episode and step; per step
 * the policy version; per final observation its row. */
static void describe_common(ro_seg_layout_t *lay)
{
    const ro_seg_cols_t *c = ro__seg_cols(lay);
    const uint8_t TN = RO_SEG_LEAD_TN, U8 = RO_DT_UINT8;
    describe(lay, c->logp, "", "logp", RO_DT_FLOAT32, TN, 0, NULL, 4);
    describe(lay, c->reward, "", "reward", RO_DT_FLOAT32, TN, 0, NULL, 4);
    describe(lay, c->terminated, "", "terminated", U8, TN, 0, NULL, 1);
    describe(lay, c->truncated, "", "truncated", U8, TN, 0, NULL, 1);
    describe(lay, c->is_first, "", "is_first", U8, TN, 0, NULL, 1);
    describe(lay, c->episode, "", "episode", RO_DT_UINT32, TN, 0, NULL, 4);
    describe(lay, c->step, "", "step", RO_DT_UINT32, TN, 0, NULL, 4);
    describe(lay, c->version, "", "policy_version", RO_DT_UINT64, RO_SEG_LEAD_T, 0, NULL, 8);
    describe(lay, c->final_index, "", "final_index", RO_DT_INT32, RO_SEG_LEAD_K, 0, NULL, 4);
}

/* Each column at its cache-line-rounded place: the bytes of one segment. */
static void size_layout(ro_seg_layout_t *lay)
{
    size_t total = 0;
    const uint32_t T = lay->T, max_n = lay->max_n;
    for (uint32_t c = 0; c < lay->ncols; c++) {
        /* Room for every row, and a final observation for every step. */
        size_t b = col_bytes(lay, (int)c, T, max_n, T * max_n);
        total += (b + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    }
    lay->bytes = total;
}

void ro__seg_layout(ro_seg_layout_t *lay, uint32_t T, const ro_space_t *obs, const ro_space_t *act,
                    bool gaussian, uint32_t max_n)
{
    memset(lay, 0, sizeof *lay);
    lay->T = T;
    lay->obs_dim = (uint32_t)ro_space_size(obs);
    lay->obs_ndim = obs->ndim;
    for (uint32_t d = 0; d < obs->ndim && d < 4; d++)
        lay->obs_shape[d] = obs->shape[d];
    lay->discrete = act->kind == RO_SPACE_DISCRETE;
    lay->act_dim = (uint32_t)ro_space_size(act);
    lay->gaussian = gaussian && !lay->discrete;
    lay->max_n = max_n;
    lay->ncols = RO_SEG_NCOLS;
    const uint32_t on = lay->obs_ndim < 4 ? lay->obs_ndim : 4, *os = lay->obs_shape;
    const uint32_t ad[1] = {lay->act_dim};
    const uint8_t TN = RO_SEG_LEAD_TN, F = RO_DT_FLOAT32;
    describe(lay, RO_SEG_OBS, "", "obs", F, TN, on, os, 4);
    if (lay->discrete)
        describe(lay, RO_SEG_ACTION, "", "action", RO_DT_INT32, TN, 0, NULL, 4);
    else
        describe(lay, RO_SEG_ACTION, "", "action", F, TN, 1, ad, 4);
    if (lay->gaussian) {
        describe(lay, RO_SEG_MEAN, "", "mean", F, TN, 1, ad, 4);
        describe(lay, RO_SEG_LOG_STD, "", "log_std", F, RO_SEG_LEAD_T, 1, ad, 4);
    }
    describe(lay, RO_SEG_NEXT_OBS, "", "next_obs", F, RO_SEG_LEAD_N, on, os, 4);
    describe(lay, RO_SEG_FINAL_OBS, "", "final_obs", F, RO_SEG_LEAD_K, on, os, 4);
    describe_common(lay);
    size_layout(lay);
}

void ro__seg_layout_typed(ro_seg_layout_t *lay, uint32_t T, const ro_space_layout_t *sp,
                          uint32_t max_rows)
{
    memset(lay, 0, sizeof *lay);
    lay->T = T;
    lay->max_n = max_rows;
    lay->space = sp;
    lay->ncols = RO_SEG2_NCOLS;
    const uint8_t TN = RO_SEG_LEAD_TN, F = RO_DT_FLOAT32, U8 = RO_DT_UINT8;
    for (uint32_t k = 0; k < sp->ntensors; k++) {
        const ro_tensor_layout_t *t = &sp->t[k];
        const uint8_t dt = (uint8_t)ro__wire_dtype(t->dtype); /* RO_DT_* are DType's numbers */
        describe(lay, RO_SEG2_OBS + (int)k, "obs/", t->name, dt, TN, t->ndim, t->shape, t->elem);
        describe(lay, RO_SEG2_NEXT_OBS + (int)k, "next_obs/", t->name, dt, RO_SEG_LEAD_N, t->ndim,
                 t->shape, t->elem);
        describe(lay, RO_SEG2_FINAL_OBS + (int)k, "final_obs/", t->name, dt, RO_SEG_LEAD_K, t->ndim,
                 t->shape, t->elem);
    }
    const uint32_t nd[1] = {sp->ndisc}, nb[1] = {sp->nbox}, mw[1] = {sp->mask_width};
    if (sp->ndisc)
        describe(lay, RO_SEG2_ACTION, "", "action", RO_DT_INT32, TN, 1, nd, 4);
    if (sp->nbox)
        describe(lay, RO_SEG2_ACTION_BOX, "", "action_box", F, TN, 1, nb, 4);
    if (sp->mask_width)
        describe(lay, RO_SEG2_MASK, "", "mask", U8, TN, 1, mw, 1);
    describe_common(lay);
    size_layout(lay);
}

void ro__seg_layout_state(ro_seg_layout_t *lay, uint32_t hid, bool lstm)
{
    const ro_seg_cols_t *c = ro__seg_cols(lay);
    const uint32_t shape[1] = {hid};
    describe(lay, c->state_h, "", "state/h", RO_DT_FLOAT32, RO_SEG_LEAD_N, 1, shape, 4);
    if (lstm)
        describe(lay, c->state_c, "", "state/c", RO_DT_FLOAT32, RO_SEG_LEAD_N, 1, shape, 4);
    size_layout(lay);
}

void ro__seg_layout_cell(const ro_seg_layout_t *lay, char *buf, size_t len)
{
    const ro_seg_cols_t *cols = ro__seg_cols(lay);
    const ro_seg_col_desc_t *h = &lay->col[cols->state_h], *c = &lay->col[cols->state_c];
    if (h->item)
        snprintf(buf, len, "%s:%u", c->item ? "lstm" : "gru", h->shape[0]);
    else if (len)
        buf[0] = 0;
}

int ro__seg_pool_init(ro_seg_pool_t *p, const ro_seg_layout_t *lay, uint32_t nsegs, bool shared)
{
    memset(p, 0, sizeof *p);
    p->lay = *lay;
    ro__grant_pool_init(&p->pool);
    p->segs = calloc(nsegs, sizeof *p->segs);
    char err[256];
    if (nsegs && lay->bytes > SIZE_MAX / nsegs)
        return RO_ENOMEM;
    /* Shared memory when a learner may map it; private memory where the
     * kernel has no memfd (segments then go over the socket only). */
    if (shared && ro__shared_mem_create(&p->shm, "rollout-segments", (size_t)nsegs * lay->bytes,
                                        false, err, sizeof err) == 0)
        p->mem = p->shm.base;
    else
        p->mem = ro__calloc_lines(nsegs, lay->bytes);
    if (!p->segs || !p->mem)
        return RO_ENOMEM;
    p->nsegs = nsegs;
    for (uint32_t i = 0; i < nsegs; i++) {
        ro_segment_t *s = &p->segs[i];
        s->lay = &p->lay;
        s->pool = p;
        s->msg.type = RO_MSG_SEGMENT;
        s->mem = (char *)p->mem + (size_t)i * lay->bytes;
        char *m = s->mem;
        for (int c = 0; c < (int)lay->ncols; c++) {
            size_t b = col_bytes(lay, c, lay->T, lay->max_n, lay->T * lay->max_n);
            s->col[c] = b ? m : NULL;
            m += (b + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
        }
        ro__grant_pool_give(&p->pool, &s->item);
    }
    return 0;
}

void ro__seg_pool_free(ro_seg_pool_t *p)
{
    ro__grant_pool_destroy(&p->pool);
    free(p->segs);
    if (p->shm.base)
        ro__shared_mem_release(&p->shm);
    else
        free(p->mem);
    memset(p, 0, sizeof *p);
}

void ro__seg_pool_give(ro_seg_pool_t *p, ro_segment_t *list)
{
    ro_pool_item_t *items = NULL;
    while (list) {
        ro_segment_t *s = list;
        list = s->next;
        s->next = NULL;
        s->item.next = items;
        items = &s->item;
    }
    ro__grant_pool_give(&p->pool, items);
}
