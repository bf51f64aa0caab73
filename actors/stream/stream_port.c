#include "actors/stream/stream_port.h"

#include <string.h>

#include "actors/exchange/messages.h"
#include "runtime/clock.h"
#include "spaces/layout.h"

/* The observation tensors of a segment's rows as b holds them: how many,
 * each one's bytes per row, and where b keeps its rows (fin: the final
 * observations). An ABI 1 env's is its one float32 observation. */
typedef struct obs_views {
    uint32_t n;
    size_t row_bytes[RO_ENV_MAX_TENSORS];
    const uint8_t *src[RO_ENV_MAX_TENSORS];
} obs_views_t;

/* view_obs fills v for segment s and batch b. */
static void view_obs(const ro_segment_t *s, const ro_step_batch_t *b, bool fin, obs_views_t *v)
{
    const ro_space_layout_t *sp = s->lay->space;
    if (!sp) {
        v->n = 1;
        v->row_bytes[0] = (size_t)s->lay->obs_dim * sizeof(float);
        v->src[0] = (const uint8_t *)(fin ? b->final_obs : b->obs);
        return;
    }
    v->n = sp->ntensors;
    for (uint32_t k = 0; k < sp->ntensors; k++) {
        v->row_bytes[k] = sp->t[k].row_bytes;
        v->src[k] = fin ? b->final_tensor[k] : b->tensor[k];
    }
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

/* The actions of row t: ABI 1's one column (discrete or box, with a box
 * MLP's mean and log_std), or ABI 2's discrete entries, box floats and the
 * mask they were chosen under. */
static void capture_actions(ro_segment_t *s, const ro_step_batch_t *b, size_t row)
{
    const ro_seg_layout_t *lay = s->lay;
    const ro_space_layout_t *sp = lay->space;
    const size_t n = b->n;
    if (sp) {
        if (sp->ndisc)
            memcpy((int32_t *)s->col[RO_SEG2_ACTION] + row * sp->ndisc, b->act_i,
                   n * sp->ndisc * sizeof(int32_t));
        if (sp->nbox)
            memcpy((float *)s->col[RO_SEG2_ACTION_BOX] + row * sp->nbox, b->act_f,
                   n * sp->nbox * sizeof(float));
        if (sp->mask_width)
            memcpy((uint8_t *)s->col[RO_SEG2_MASK] + row * sp->mask_width, b->mask,
                   n * sp->mask_width);
        return;
    }
    const size_t ad = lay->act_dim;
    if (lay->discrete)
        memcpy((int32_t *)s->col[RO_SEG_ACTION] + row, b->act_i, n * sizeof(int32_t));
    else
        memcpy((float *)s->col[RO_SEG_ACTION] + row * ad, b->act_f, n * ad * sizeof(float));
    if (lay->gaussian) {
        memcpy((float *)s->col[RO_SEG_MEAN] + row * ad, b->mean, n * ad * sizeof(float));
        memcpy((float *)s->col[RO_SEG_LOG_STD] + (size_t)s->t * ad, b->log_std, ad * sizeof(float));
    }
}

void ro__stream_capture_action(ro_stream_port_t *p, const ro_step_batch_t *b,
                               const uint64_t *ep_num, const uint32_t *ep_len)
{
    ro_segment_t *s = p->cur;
    const ro_seg_cols_t *c = ro__seg_cols(s->lay);
    const uint32_t n = b->n, A = s->lay->space ? b->agents : 1; /* rows per env */
    const size_t row = (size_t)s->t * n;
    if (s->t == 0) {
        s->first_env = b->first;
        s->n = n;
        s->version_min = s->version_max = b->policy_version;
    }
    s->version_min = b->policy_version < s->version_min ? b->policy_version : s->version_min;
    s->version_max = b->policy_version > s->version_max ? b->policy_version : s->version_max;
    obs_views_t v;
    view_obs(s, b, false, &v);
    for (uint32_t k = 0; k < v.n; k++)
        memcpy((uint8_t *)s->col[c->obs + (int)k] + row * v.row_bytes[k], v.src[k],
               n * v.row_bytes[k]);
    capture_actions(s, b, row);
    memcpy((float *)s->col[c->logp] + row, b->logp, n * sizeof(float));
    memcpy((uint8_t *)s->col[c->is_first] + row, b->episode_start, n);
    uint32_t *ep = (uint32_t *)s->col[c->episode] + row;
    uint32_t *st = (uint32_t *)s->col[c->step] + row;
    for (uint32_t j = 0; j < n; j++) {
        ep[j] = (uint32_t)ep_num[j / A];
        st[j] = ep_len[j / A];
    }
    ((uint64_t *)s->col[c->version])[s->t] = b->policy_version;
}

void ro__stream_capture_state(ro_stream_port_t *p, const ro_step_batch_t *b)
{
    ro_segment_t *s = p->cur;
    const ro_seg_cols_t *cols = ro__seg_cols(s->lay);
    float *h = s->col[cols->state_h], *c = s->col[cols->state_c];
    if (!h || !b->rstate)
        return;
    const uint32_t hid = s->lay->col[cols->state_h].shape[0];
    for (uint32_t j = 0; j < b->n; j++) {
        const float *row = b->rstate + (size_t)j * b->state_floats;
        const bool zero = b->episode_start[j] != 0; /* the learner will zero it too */
        for (uint32_t k = 0; k < hid; k++)
            h[(size_t)j * hid + k] = zero ? 0.0f : row[k];
        for (uint32_t k = 0; c && k < hid; k++)
            c[(size_t)j * hid + k] = zero ? 0.0f : row[hid + k];
    }
}

/* Hand the segment to the hub (with the observation after its last row). */
static void hand_over(ro_stream_port_t *p, const ro_step_batch_t *b, bool last)
{
    ro_segment_t *s = p->cur;
    p->cur = NULL;
    s->last = last;
    obs_views_t v;
    view_obs(s, b, false, &v);
    for (uint32_t k = 0; k < v.n; k++)
        memcpy(s->col[ro__seg_cols(s->lay)->next_obs + (int)k], v.src[k],
               (size_t)b->n * v.row_bytes[k]);
    ro__actor_send(p->hub, &s->msg);
}

bool ro__stream_capture_outcome(ro_stream_port_t *p, const ro_step_batch_t *b)
{
    ro_segment_t *s = p->cur;
    const ro_seg_cols_t *c = ro__seg_cols(s->lay);
    const uint32_t n = b->n;
    const size_t row = (size_t)s->t * n;
    memcpy((float *)s->col[c->reward] + row, b->reward, n * sizeof(float));
    memcpy((uint8_t *)s->col[c->terminated] + row, b->terminated, n);
    memcpy((uint8_t *)s->col[c->truncated] + row, b->truncated, n);
    obs_views_t v;
    view_obs(s, b, true, &v);
    for (uint32_t j = 0; j < n; j++) {
        if (!b->has_final[j])
            continue;
        ((int32_t *)s->col[c->final_index])[s->nfinal] = (int32_t)(row + j);
        for (uint32_t k = 0; k < v.n; k++)
            memcpy((uint8_t *)s->col[c->final_obs + (int)k] + (size_t)s->nfinal * v.row_bytes[k],
                   v.src[k] + j * v.row_bytes[k], v.row_bytes[k]);
        s->nfinal++;
    }
    s->t++;
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
