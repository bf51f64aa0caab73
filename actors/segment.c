#include "actors/segment.h"

#include <stdlib.h>
#include <string.h>

#include "actors/messages.h"
#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/error.h"

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
};

const char *ro__seg_col_name(int c)
{
    return col_names[c];
}

/* Bytes of column c for t rows of n envs and k final observations; 0: the
 * column is absent from this layout. */
static size_t col_bytes(const ro_seg_layout_t *lay, int c, uint32_t t, uint32_t n, uint32_t k)
{
    const size_t tn = (size_t)t * n, od = lay->obs_dim, ad = lay->act_dim;
    switch (c) {
    case RO_SEG_OBS:
        return tn * od * 4;
    case RO_SEG_ACTION:
        return tn * (lay->discrete ? 1 : ad) * 4;
    case RO_SEG_LOGP:
    case RO_SEG_REWARD:
    case RO_SEG_EPISODE:
    case RO_SEG_STEP:
        return tn * 4;
    case RO_SEG_MEAN:
        return lay->gaussian ? tn * ad * 4 : 0;
    case RO_SEG_LOG_STD:
        return lay->gaussian ? (size_t)t * ad * 4 : 0;
    case RO_SEG_TERMINATED:
    case RO_SEG_TRUNCATED:
    case RO_SEG_IS_FIRST:
        return tn;
    case RO_SEG_POLICY_VERSION:
        return (size_t)t * 8;
    case RO_SEG_NEXT_OBS:
        return (size_t)n * od * 4;
    case RO_SEG_FINAL_INDEX:
        return (size_t)k * 4;
    case RO_SEG_FINAL_OBS:
        return (size_t)k * od * 4;
    default:
        return 0;
    }
}

size_t ro__seg_col_bytes(const ro_segment_t *s, int c)
{
    return col_bytes(s->lay, c, s->t, s->n, s->nfinal);
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
    size_t total = 0;
    for (int c = 0; c < RO_SEG_NCOLS; c++) {
        /* Room for every row, and a final observation for every step. */
        size_t b = col_bytes(lay, c, T, max_n, T * max_n);
        total += (b + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    }
    lay->bytes = total;
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
                                        err, sizeof err) == 0)
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
        for (int c = 0; c < RO_SEG_NCOLS; c++) {
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

void ro__stream_port_init(ro_stream_port_t *p, ro_seg_pool_t *pool, ro_actor_t *hub, uint32_t shard,
                          ro_actor_t *env_actor)
{
    memset(p, 0, sizeof *p);
    p->pool = pool;
    p->hub = hub;
    p->shard = shard;
    p->resume_msg.type = RO_MSG_STREAM_RESUME;
    p->waiter.to = env_actor;
    p->waiter.msg = &p->resume_msg;
    atomic_init(&p->wait_ns, 0);
    atomic_init(&p->waits, 0);
}

/* A fresh segment for the port's shard. */
static void start_segment(ro_stream_port_t *p, ro_segment_t *s)
{
    s->shard = p->shard;
    s->shard_seq = p->next_seq++;
    s->t = 0;
    s->nfinal = 0;
    s->last = false;
    s->conn_seq = 0;
    s->acked = false;
    s->next = NULL;
    p->cur = s;
}

bool ro__stream_port_ready(ro_stream_port_t *p)
{
    if (p->cur)
        return true;
    ro_pool_item_t *it = ro__grant_pool_take(&p->pool->pool, &p->waiter);
    if (!it) {
        p->wait_since_ns = ro__now_ns();
        /* Relaxed: a statistic. */
        atomic_fetch_add_explicit(&p->waits, 1, memory_order_relaxed);
        return false;
    }
    start_segment(p, ro__container_of(it, ro_segment_t, item));
    return true;
}

void ro__stream_port_resume(ro_stream_port_t *p)
{
    ro_pool_item_t *it = ro__grant_pool_claim(&p->pool->pool, &p->waiter);
    /* Relaxed: a statistic. */
    atomic_fetch_add_explicit(&p->wait_ns, ro__now_ns() - p->wait_since_ns, memory_order_relaxed);
    start_segment(p, ro__container_of(it, ro_segment_t, item));
}

void ro__stream_capture_action(ro_stream_port_t *p, const ro_step_batch_t *b,
                               const uint64_t *ep_num, const uint32_t *ep_len)
{
    ro_segment_t *s = p->cur;
    const ro_seg_layout_t *lay = s->lay;
    const uint32_t t = s->t, n = b->n;
    const size_t row = (size_t)t * n, od = lay->obs_dim, ad = lay->act_dim;
    if (t == 0) {
        s->first_env = b->first;
        s->n = n;
        s->version_min = s->version_max = b->policy_version;
    }
    memcpy((float *)s->col[RO_SEG_OBS] + row * od, b->obs, n * od * sizeof(float));
    if (lay->discrete)
        memcpy((int32_t *)s->col[RO_SEG_ACTION] + row, b->act_i, n * sizeof(int32_t));
    else
        memcpy((float *)s->col[RO_SEG_ACTION] + row * ad, b->act_f, n * ad * sizeof(float));
    memcpy((float *)s->col[RO_SEG_LOGP] + row, b->logp, n * sizeof(float));
    if (lay->gaussian) {
        memcpy((float *)s->col[RO_SEG_MEAN] + row * ad, b->mean, n * ad * sizeof(float));
        memcpy((float *)s->col[RO_SEG_LOG_STD] + (size_t)t * ad, b->log_std, ad * sizeof(float));
    }
    memcpy((uint8_t *)s->col[RO_SEG_IS_FIRST] + row, b->episode_start, n);
    uint32_t *ep = (uint32_t *)s->col[RO_SEG_EPISODE] + row;
    uint32_t *st = (uint32_t *)s->col[RO_SEG_STEP] + row;
    for (uint32_t j = 0; j < n; j++) {
        ep[j] = (uint32_t)ep_num[j];
        st[j] = ep_len[j];
    }
    ((uint64_t *)s->col[RO_SEG_POLICY_VERSION])[t] = b->policy_version;
    s->version_min = b->policy_version < s->version_min ? b->policy_version : s->version_min;
    s->version_max = b->policy_version > s->version_max ? b->policy_version : s->version_max;
}

/* Hand the segment to the hub (with the observation after its last row). */
static void hand_over(ro_stream_port_t *p, const ro_step_batch_t *b, bool last)
{
    ro_segment_t *s = p->cur;
    p->cur = NULL;
    s->last = last;
    memcpy(s->col[RO_SEG_NEXT_OBS], b->obs, (size_t)b->n * s->lay->obs_dim * sizeof(float));
    ro__actor_send(p->hub, &s->msg);
}

bool ro__stream_capture_outcome(ro_stream_port_t *p, const ro_step_batch_t *b)
{
    ro_segment_t *s = p->cur;
    const uint32_t t = s->t, n = b->n;
    const size_t row = (size_t)t * n, od = s->lay->obs_dim;
    memcpy((float *)s->col[RO_SEG_REWARD] + row, b->reward, n * sizeof(float));
    memcpy((uint8_t *)s->col[RO_SEG_TERMINATED] + row, b->terminated, n);
    memcpy((uint8_t *)s->col[RO_SEG_TRUNCATED] + row, b->truncated, n);
    for (uint32_t j = 0; j < n; j++) {
        if (!b->has_final[j])
            continue;
        ((int32_t *)s->col[RO_SEG_FINAL_INDEX])[s->nfinal] = (int32_t)(row + j);
        memcpy((float *)s->col[RO_SEG_FINAL_OBS] + (size_t)s->nfinal * od, b->final_obs + j * od,
               od * sizeof(float));
        s->nfinal++;
    }
    s->t = t + 1;
    if (s->t < s->lay->T)
        return true;
    hand_over(p, b, false);
    return ro__stream_port_ready(p);
}

void ro__stream_port_finish(ro_stream_port_t *p, const ro_step_batch_t *b)
{
    if (!p->cur)
        return;
    /* Even an empty segment goes: it tells the hub the shard is done (the
     * hub recycles a segment with no rows). */
    if (p->cur->t == 0) {
        p->cur->first_env = b->first;
        p->cur->n = b->n;
        p->cur->version_min = p->cur->version_max = b->policy_version;
    }
    hand_over(p, b, true);
}
