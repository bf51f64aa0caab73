/*
 * The hub's bookkeeping: its state's allocation, which learner holds which
 * shard, the welcome, the stream-mode settings, the statistics. Calls
 * nothing of learner_hub.c.
 */
#include "actors/hub/hub_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/hub/hub_internal.h"
#include "actors/exchange/messages.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "spaces/layout.h"
#include "trajectory/abi2_format.h"
#include "wire/frame.h"
#include "wire/typed_checks.h"
#include "wire/seed_ring.h"

/* The hub's state, before any handle: ownership, the batch pool, the
 * encoder. On failure *out is still set (or NULL): ro__hub_free it. */
int ro__hub_state_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches,
                      uint32_t nshards, uint32_t num_envs, const ro_space_t *obs,
                      const ro_space_t *act, ro_actor_t *control, const ro_hub_opts_t *o)
{
    *out = NULL;
    ro_hub_t *h = calloc(1, sizeof *h);
    if (!h)
        return RO_ENOMEM;
    *out = h;
    h->o = *o;
    if (o->token) {
        snprintf(h->token, sizeof h->token, "%s", o->token);
        h->has_token = true;
    }
    h->loop = loop;
    h->control = control;
    h->done_msg.type = RO_MSG_LANE_DONE;
    h->batches = batches;
    h->nshards = nshards;
    h->active_shards = nshards;
    h->num_envs = num_envs;
    h->obs_space = obs;
    h->act_space = act;
    h->orphan_tail = &h->orphan_head;
    h->node_id = ro__seed_mix(ro__now_ns(), (uint64_t)getpid(), 77);
    /* Decoded frames are freed as soon as they are handled: a few frames'
     * worth of decoded memory at once is plenty. */
    ro__pb_alloc_init(&h->alloc, 4 * o->max_frame + (1u << 20));
    ro__gate_init(&h->gate, o->max_learners, o->hello_timeout_s);
    h->budget.limit = 2 * o->max_frame;

    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < nshards; i++)
        max_shard = batches[i]->n > max_shard ? batches[i]->n : max_shard;
    /* nshards is 0 when only trainers attach (local learner lanes). */
    h->owner = calloc(nshards + 1, sizeof *h->owner);
    h->active = calloc(nshards + 1, sizeof *h->active);
    h->pool = calloc(nshards + 1, sizeof *h->pool);
    if (!h->owner || !h->active || !h->pool)
        return RO_ENOMEM; /* the caller frees h */
    if (ro__obs_encoder_init(&h->enc, o->batch + max_shard, (uint32_t)ro_space_size(obs),
                             o->layout))
        return RO_ENOMEM;
    for (uint32_t i = 0; i < nshards; i++) {
        h->active[i] = true;
        h->pool[i].next = h->free_batches;
        h->free_batches = &h->pool[i];
    }
    return 0;
}

ro_session_t *ro__hub_least_loaded(ro_hub_t *h)
{
    ro_session_t *best = NULL;
    for (ro_session_t *s = h->sessions; s; s = s->next)
        if (s->attached && !s->trainer && (!best || s->flow.owned_rows < best->flow.owned_rows))
            best = s;
    return best;
}

void ro__hub_set_owner(ro_hub_t *h, uint32_t i, uint32_t rows, ro_session_t *to)
{
    ro_session_t *from = h->owner[i];
    if (from == to)
        return;
    if (from)
        from->flow.owned_rows -= rows;
    if (to)
        to->flow.owned_rows += rows;
    h->owner[i] = to;
}

bool ro__hub_seed_memory(ro_session_t *s, bool ring)
{
    ro_hub_t *h = s->hub;
    char err[300];
    if (h->seed_mem_failed)
        return false;
    if (!h->seed_obs.base) {
        const ro_space_t *act = h->act_space;
        uint32_t width = act->kind == RO_SPACE_DISCRETE ? 1 : (uint32_t)ro_space_size(act);
        if (h->o.layout) /* rows: envs x agents */
            ro__seed_mem_layout_typed(&h->seed_lay, h->num_envs * h->o.layout->agents, h->o.layout);
        else
            ro__seed_mem_layout(&h->seed_lay, h->num_envs, (uint32_t)ro_space_size(h->obs_space),
                                width);
        if (ro__shared_mem_create(&h->seed_obs, "rollout-seed-obs", h->seed_lay.obs_bytes, false,
                                  err, sizeof err) != 0) {
            h->seed_mem_failed = true;
            ro__conn_log(&s->conn,
                         "no shared memory for learners on this host (%s): frames "
                         "carry the observations",
                         err);
            return false;
        }
    }
    if (ro__shared_mem_create(&s->act_mem, "rollout-seed-actions", h->seed_lay.act_bytes, true, err,
                              sizeof err) != 0) {
        ro__conn_log(&s->conn, "no shared memory for its actions (%s): frames carry them", err);
        return false;
    }
    s->flow.mem_layout = &h->seed_lay;
    s->flow.obs_mem = h->seed_obs.base;
    s->flow.act_mem = s->act_mem.base;
    if (ring && ro__shared_mem_create(&s->ring_mem, "rollout-seed-ring", RO_SEED_RING_BYTES, true,
                                      err, sizeof err) != 0)
        ro__conn_log(&s->conn, "no frame rings (%s): every frame on the socket", err);
    else if (ring)
        s->flow.rings = s->ring_mem.base;
    return true;
}

/* welcome_bounds gives a welcome layout's box parts their bounds (the
 * learner's actions must stay inside them). */
static void welcome_bounds(ro_traj_layout_msg_t *m, const ro_space_layout_t *lay)
{
    for (uint32_t i = 0; i < lay->nparts; i++) {
        if (lay->part[i].kind != RO_SPACE_BOX)
            continue;
        m->p[i].n_low = m->p[i].n_high = lay->part[i].n;
        m->p[i].low = lay->box_low + lay->part[i].first;
        m->p[i].high = lay->box_high + lay->part[i].first;
    }
}

/* ro__hub_send_welcome welcomes a session's learner: the env spec, and the
 * mode's settings. A stream or SEED node of an env ABI 2 env that is not
 * ABI 1 shaped sends the env's layout (box parts with their bounds)
 * instead of ABI 1 spaces. Memory it shares goes with the frame, as
 * descriptors over the socket (SCM_RIGHTS); the welcome names each by its
 * place among them (1-based), never by our descriptor's number. */
int ro__hub_send_welcome(ro_session_t *s)
{
    ro_hub_t *h = s->hub;
    const ro_space_layout_t *abi2 = h->segs ? h->segs->lay.space : h->o.layout;
    Rollout__V1__Space os = ROLLOUT__V1__SPACE__INIT, as = ROLLOUT__V1__SPACE__INIT;
    uint32_t oshape[RO_SPACE_MAX_DIMS], ashape[RO_SPACE_MAX_DIMS];
    Rollout__V1__EnvSpec spec = ROLLOUT__V1__ENV_SPEC__INIT;
    ro_traj_layout_msg_t lm;
    memset(&lm, 0, sizeof lm);
    if (abi2 && ro__traj_layout_msg_init(&lm, abi2) != 0)
        return RO_ENOMEM;
    if (abi2)
        welcome_bounds(&lm, abi2);
    if (!abi2) {
        ro__wire_space(&os, h->obs_space, oshape);
        ro__wire_space(&as, h->act_space, ashape);
        spec.observation = &os;
        spec.action = &as;
    }
    spec.env = (char *)h->o.env_name;
    spec.num_envs = h->num_envs;
    spec.max_episode_steps = h->o.max_episode_steps;
    Rollout__V1__Welcome w = ROLLOUT__V1__WELCOME__INIT;
    char cell[24] = "";
    Rollout__V1__SeedMemory sm = ROLLOUT__V1__SEED_MEMORY__INIT;
    ro_seed_mem_msg_t smm;
    int fds[RO_SHARED_FDS_MAX];
    unsigned nfds = 0;
    w.protocol_version = RO_PROTOCOL_VERSION;
    w.node_id = h->node_id;
    w.spec = &spec;
    w.seed = h->o.seed;
    w.node_index = h->o.node_index;
    w.max_frame = (uint32_t)h->o.max_frame;
    if (h->segs) {
        w.mode = "stream";
        w.unroll = h->unroll;
        w.policy_version = h->version_now;
        w.window = s->sflow.window;
        w.layout = abi2 ? &lm.msg : NULL;
        ro__seg_layout_cell(&h->segs->lay, cell, sizeof cell);
        w.recurrent = cell;
        if (s->sflow.shm) {
            fds[nfds++] = s->sflow.shm->fd;
            w.segment_memory_fd = nfds;
            w.segment_memory_bytes = s->sflow.shm->bytes;
        }
    } else {
        w.mode = "seed";
        w.layout = abi2 ? &lm.msg : NULL;
        if (s->flow.obs_mem) { /* observations 1, actions 2, rings 3 */
            fds[nfds++] = h->seed_obs.fd;
            fds[nfds++] = s->act_mem.fd;
        }
        if (s->flow.obs_mem && abi2) {
            ro__seed_mem_to_wire_typed(&h->seed_lay, abi2, 1, 2, &smm, &sm);
            w.seed_memory = &sm;
        } else if (s->flow.obs_mem) {
            ro__seed_mem_to_wire(&h->seed_lay, 1, 2, &sm);
            w.seed_memory = &sm;
        }
        if (w.seed_memory && s->flow.rings) {
            fds[nfds++] = s->ring_mem.fd;
            sm.ring_fd = nfds;
            sm.ring_bytes = s->ring_mem.bytes;
        }
    }
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_WELCOME;
    f.welcome = &w;
    int rc = ro__conn_send_fds(&s->conn, &f, fds, nfds);
    ro__traj_layout_msg_free(&lm);
    return rc;
}

int ro__hub_stream(ro_hub_t *h, struct ro_seg_pool *pool, uint32_t window, uint32_t max_lag)
{
    if (!(h->sst.held = calloc(h->nshards + 1, sizeof *h->sst.held)))
        return RO_ENOMEM;
    h->segs = pool;
    h->unroll = pool->lay.T;
    h->window = window;
    h->max_lag = max_lag;
    h->seg_orphan_tail = &h->seg_orphans;
    return 0;
}

void ro__hub_policy_version(ro_hub_t *h, uint64_t version)
{
    h->version_now = version;
}

ro_actor_t *ro__hub_actor(ro_hub_t *h)
{
    return &h->actor;
}

void ro__hub_address(const ro_hub_t *h, char *buf, size_t len)
{
    snprintf(buf, len, "%s", h->addr);
}

void ro__hub_upgrade_address(const ro_hub_t *h, char *buf, size_t len)
{
    snprintf(buf, len, "%s", h->up_open ? h->up_path : "");
}

void ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out)
{
    *out = h->stats;
    uint64_t now = ro__now_ns();
    /* At most --max-learners sessions and nshards orphans: cheap enough
     * for the logger's once-a-second sample. */
    for (const ro_session_t *s = h->sessions; s; s = s->next) {
        if (s->attached && !s->trainer)
            out->learners++;
        out->envs_in_flight += s->flow.inflight_rows;
        out->envs_unsent += s->flow.pending.rows;
        uint64_t sent = ro__flow_oldest_sent_ns(&s->flow);
        if (sent && now - sent > out->oldest_wait_ns)
            out->oldest_wait_ns = now - sent;
        out->queued_bytes += ro__conn_queued(&s->conn);
    }
    for (const ro_batch_item_t *it = h->orphan_head; it; it = it->next)
        out->envs_unsent += it->rows;
    out->spin_hits = h->spin.hits;
    out->spin_misses = h->spin.misses;
    if (!h->segs)
        return;
    out->stream = true;
    out->segments_sent = h->sst.sent;
    out->segments_acked = h->sst.acked;
    out->segments_dropped_lag = h->sst.dropped_lag;
    out->transitions_sent = h->sst.transitions_sent;
    out->transitions_acked = h->sst.transitions_acked;
    out->policy_lag_min = h->sst.lag_min;
    out->policy_lag_max = h->sst.lag_max;
    out->policy_lag_mean = h->sst.lag_count ? (double)h->sst.lag_sum / (double)h->sst.lag_count : 0;
    for (const ro_session_t *s = h->sessions; s; s = s->next) {
        out->segments_in_flight += s->sflow.sent;
        out->segments_unsent += s->sflow.pending;
        uint64_t sent = ro__sflow_oldest_sent_ns(&s->sflow);
        if (sent && now - sent > out->oldest_wait_ns)
            out->oldest_wait_ns = now - sent;
    }
    for (const ro_segment_t *g = h->seg_orphans; g; g = g->next)
        out->segments_unsent++;
}

void ro__hub_free(ro_hub_t *h)
{
    if (!h)
        return;
    free(h->owner);
    free(h->active);
    free(h->sst.held);
    free(h->pool);
    ro__obs_encoder_free(&h->enc);
    ro__shared_mem_release(&h->seed_obs);
    free(h);
}
