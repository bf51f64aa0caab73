/*
 * rollout-learner's serving: what the node links report (welcomes, frames,
 * segments, connections going down), batching frames into jobs for the
 * forward-pass lanes and answering them. Calls nothing of main.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "learner/learner.h"
#include "actors/batcher.h"
#include "policy/params.h"
#include "ro_build_config.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/thread_guard.h"
#include "trajectory/abi2_format.h"
#include "learner/frame_ring.h"
#include "wire/checks.h"
#include "wire/seed_abi2.h"
#include "wire/token.h"

static node_t *node_of(ro_link_t *l)
{
    return ro__container_of(l, node_t, link);
}

/* Close the loop's handles once no node is left and no job is out. */
void ro__learner_maybe_finish(learner_t *L)
{
    if (L->finished || L->open_links > 0 || L->fw.jobs_out > 0)
        return;
    L->finished = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++)
        ro__link_release(&L->nodes[i].link);
    uv_close((uv_handle_t *)&L->check, NULL);
    uv_close((uv_handle_t *)&L->prepare, NULL);
    uv_close((uv_handle_t *)&L->kick, NULL);
    ro__loop_spin_close(&L->spin);
    uv_close((uv_handle_t *)&L->wait_timer, NULL);
    uv_close((uv_handle_t *)&L->deadline, NULL);
    uv_close((uv_handle_t *)&L->progress, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
    uv_close((uv_handle_t *)&L->sigterm, NULL);
    ro__forward_close(&L->fw);
}

/* Acknowledge a stream node's segments taken so far (one cumulative ack). */
static void send_ack(node_t *n)
{
    Rollout__V1__SegmentAck a = ROLLOUT__V1__SEGMENT_ACK__INIT;
    a.seq = n->ack_owed;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_SEGMENT_ACK;
    f.segment_ack = &a;
    n->ack_owed = 0;
    ro__link_send(&n->link, &f);
}

void ro__learner_stop_all(learner_t *L, const char *why)
{
    if (L->stopping)
        return;
    L->stopping = true;
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        if (L->nodes[i].ack_owed) /* taken and counted: not to be sent again */
            send_ack(&L->nodes[i]);
        ro__link_stop(&L->nodes[i].link, why);
    }
    ro__learner_maybe_finish(L);
}

void ro__learner_free_pending(ro_batch_item_t *it)
{
    while (it) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        it = it->next;
        ro__frame_free(&p->link->alloc, p->frame);
        free(p);
    }
}

/* A copy of a checked box space's bounds, owned by the learner. */
static int copy_bounds(ro_space_t *sp, float **low, float **high)
{
    if (sp->kind != RO_SPACE_BOX)
        return 0;
    size_t size = ro_space_size(sp);
    *low = malloc(size * sizeof(float));
    *high = malloc(size * sizeof(float));
    if (!*low || !*high)
        return RO_ENOMEM;
    memcpy(*low, sp->low, size * sizeof(float));
    memcpy(*high, sp->high, size * sizeof(float));
    sp->low = *low;
    sp->high = *high;
    return 0;
}

/* The first welcome fixes the spaces and builds the policy; every later one
 * must have the same spaces. */
static int adopt_spec(learner_t *L, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    ro_space_t os, as;
    int rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, errlen);
    if (rc)
        return rc;
    uint32_t od = (uint32_t)ro_space_size(&os), ad = (uint32_t)ro_space_size(&as);
    if (L->have_spec) {
        if (L->abi2 || od != L->obs_dim || (as.kind == RO_SPACE_DISCRETE) != L->discrete ||
            (L->discrete ? as.n != L->act_n : ad != L->act_dim))
            return ro__errorf(err, errlen, RO_EPROTO,
                              "its env spaces differ from the first node's");
        return 0;
    }
    if (copy_bounds(&os, &L->bounds[0], &L->bounds[1]) ||
        copy_bounds(&as, &L->bounds[2], &L->bounds[3]))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the env spaces");
    L->have_spec = true;
    L->obs_dim = od;
    L->act_dim = ad;
    L->act_n = as.n;
    L->act_ndisc = 1;
    L->discrete = as.kind == RO_SPACE_DISCRETE;
    L->obs_space = os;
    L->act_space = as;
    char perr[256] = "";
    if (ro__policy_new(&L->policy, &L->cfg.policy, &L->obs_space, &L->act_space, perr,
                       sizeof perr) != 0) {
        snprintf(L->err, sizeof L->err, "%s", perr);
        L->exit_code = 2;
        ro__learner_stop_all(L, "policy does not fit the env");
        return RO_EINVAL;
    }
    L->fw.policy = L->policy;
    L->fw.obs_dim = L->obs_dim;
    return 0;
}

/* A stream node: nothing to act on; its segments are checked against
 * its spaces and counted. */
/* stream_rules_abi2 makes the segment rules of a stream welcome that
 * carries an env ABI 2 layout (checked: every field of it is the node's
 * word, untrusted). */
static int stream_rules_abi2(const Rollout__V1__Welcome *w, ro_segment_rules_t *r, char *err,
                             size_t errlen)
{
    const Rollout__V1__EnvSpec *spec = w->spec;
    if (w->protocol_version != RO_PROTOCOL_VERSION)
        return ro__errorf(err, errlen, RO_EPROTO, "protocol version %u (this learner speaks %u)",
                          w->protocol_version, RO_PROTOCOL_VERSION);
    if (!spec || spec->num_envs < 1 || spec->num_envs > MAX_NUM_ENVS)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome spec num_envs %u outside [1, %u]",
                          spec ? spec->num_envs : 0, MAX_NUM_ENVS);
    ro_traj_rows_t rows;
    char why[200];
    if (ro__traj_layout_rows(w->layout, &rows, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "welcome %s", why);
    r->abi2 = true;
    r->num_envs = spec->num_envs;
    r->agents = rows.agents;
    r->nobs = rows.ntensors;
    r->ndisc = rows.ndisc;
    r->nbox = rows.nbox;
    r->mask_width = rows.mask_width;
    for (uint32_t k = 0; k < rows.ntensors; k++) {
        const Rollout__V1__NamedTensor *t = w->layout->tensors[k];
        snprintf(r->obs[k].name, sizeof r->obs[k].name, "%s", t->name);
        r->obs[k].dtype = t->dtype;
        r->obs[k].ndim = (uint32_t)t->n_shape;
        for (size_t d = 0; d < t->n_shape; d++)
            r->obs[k].shape[d] = t->shape[d];
    }
    return 0;
}

static int welcome_stream(node_t *n, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    ro_segment_rules_t rules;
    memset(&rules, 0, sizeof rules); /* compared bytewise on a reconnect */
    int rc;
    if (w->layout) {
        if ((rc = stream_rules_abi2(w, &rules, err, errlen)) != 0)
            return rc;
    } else {
        ro_space_t os, as;
        if ((rc = ro__check_welcome(w, MAX_NUM_ENVS, &os, &as, err, errlen)) != 0)
            return rc;
        rules.num_envs = w->spec->num_envs;
        rules.obs_dim = (uint32_t)ro_space_size(&os);
        rules.act_dim = (uint32_t)ro_space_size(&as);
        rules.discrete = as.kind == RO_SPACE_DISCRETE;
    }
    if (w->unroll < 1 || w->unroll > 1u << 16)
        return ro__errorf(err, errlen, RO_EPROTO, "a stream node with unroll %u", w->unroll);
    rules.unroll = w->unroll;
    n->ack_owed = 0;
    n->ack_every = w->window / 2 ? w->window / 2 : 1;
    if (n->stream) { /* a reconnect: the same node goes on, a restarted one over */
        if (memcmp(&rules, &n->rx.rules, sizeof rules) != 0)
            return ro__errorf(err, errlen, RO_EPROTO, "came back with other spaces or envs");
        if (w->node_id != n->link.node_id)
            ro__stream_rx_restart(&n->rx);
    } else {
        n->stream = true;
        n->num_envs = rules.num_envs;
        if (ro__stream_rx_init(&n->rx, &rules) != 0)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %u envs", rules.num_envs);
    }
    /* This connection's segments: in the node's memory, if it offered it. */
    ro__shared_mem_release(&n->rx.shm);
    if (!w->segment_memory_fd)
        return 0;
    if (!n->link.peer_pid)
        return ro__errorf(err, errlen, RO_EPROTO, "offered shared memory we did not ask for");
    char why[300];
    if (ro__shared_mem_map_peer(&n->rx.shm, n->link.peer_pid, w->segment_memory_fd,
                                w->segment_memory_bytes, why, sizeof why) != 0)
        return ro__errorf(err, errlen, RO_EPROTO, "cannot map the node's segment memory: %s", why);
    return 0;
}

/* This connection's SEED memory, if the node offered it (we asked only
 * where we can map it): checked against the spaces, then mapped. */
static int map_seed_memory(learner_t *L, node_t *n, const Rollout__V1__Welcome *w, uint32_t rows,
                           char *err, size_t errlen)
{
    ro__shared_mem_release(&n->seed_obs);
    ro__shared_mem_release(&n->seed_act);
    (void)ro__learner_ring_map(n, NULL, false, err, errlen); /* releases it */
    const Rollout__V1__SeedMemory *m = w->seed_memory;
    if (!m)
        return 0;
    if (!n->link.peer_pid)
        return ro__errorf(err, errlen, RO_EPROTO, "offered shared memory we did not ask for");
    int rc = L->abi2 ? ro__seed_mem_check_abi2(m, rows, &L->lay, &n->seed_lay, err, errlen)
                     : ro__seed_mem_check(m, rows, L->obs_dim, L->discrete ? 1 : L->act_dim,
                                          &n->seed_lay, err, errlen);
    if (rc)
        return rc;
    char why[300];
    if (ro__shared_mem_map_peer(&n->seed_obs, n->link.peer_pid, m->obs_fd, m->obs_bytes, why,
                                sizeof why) != 0 ||
        ro__shared_mem_map_peer_rw(&n->seed_act, n->link.peer_pid, m->act_fd, m->act_bytes, why,
                                   sizeof why) != 0) {
        ro__shared_mem_release(&n->seed_obs);
        return ro__errorf(err, errlen, RO_EPROTO, "cannot map the node's memory: %s", why);
    }
    return ro__learner_ring_map(n, m, n->link.o.seed_ring, err, errlen);
}

static int on_welcome(ro_link_t *l, const Rollout__V1__Welcome *w, char *err, size_t errlen)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    if (!L->welcomed_any) { /* steps/s count from here, not from a wait for a node to start */
        L->welcomed_any = true;
        L->t0 = ro__now_ns();
    }
    if (!L->push && w->mode && strcmp(w->mode, "stream") == 0) {
        int rc = welcome_stream(n, w, err, errlen);
        L->threads = ro__thread_count();
        return rc;
    }
    if (L->push) { /* --push-policy: the weights, then wait for the answer */
        ro_frame_t out = ROLLOUT__V1__FRAME__INIT;
        out.body_case = ROLLOUT__V1__FRAME__BODY_POLICY_PARAMS;
        out.policy_params = L->push;
        if (ro__conn_send(&l->conn, &out) != 0)
            return ro__errorf(err, errlen, RO_EIO, "could not send the policy");
        return 0;
    }
    uint32_t envs = 0;
    int rc = w->layout ? ro__learner_adopt_layout(L, w, &envs, err, errlen)
                       : adopt_spec(L, w, err, errlen);
    if (rc == RO_EINVAL && w->layout)
        ro__learner_stop_all(L, "policy does not fit the env");
    if (rc)
        return rc;
    if (!w->layout)
        envs = w->spec->num_envs; /* ABI 2: rows, envs x agents */
    if ((rc = map_seed_memory(L, n, w, envs, err, errlen)) != 0)
        return rc;
    if (l->attached) {
        /* A reconnect: the sampling streams go on (a lane may still hold a
         * job with some of them); a restarted node starts its envs over. */
        if (envs != n->num_envs)
            return ro__errorf(err, errlen, RO_EPROTO, "came back with %u envs, had %u", envs,
                              n->num_envs);
        if (w->node_id != l->node_id) {
            memset(n->ep_ret, 0, n->num_envs * sizeof *n->ep_ret);
            memset(n->next_step, 0, n->num_envs * sizeof *n->next_step);
        }
    } else {
        n->num_envs = envs;
        n->rngs = calloc(envs, sizeof *n->rngs);
        n->ep_ret = calloc(envs, sizeof *n->ep_ret);
        n->next_step = calloc(envs, sizeof *n->next_step);
        if (!n->rngs || !n->ep_ret || !n->next_step)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %u envs", envs);
        uint64_t seed = L->cfg.policy.seed ^ ((uint64_t)l->o.index << 32);
        for (uint32_t e = 0; e < envs; e++)
            ro__rng_init(&n->rngs[e], ro__seed_mix(seed, e, RO_STREAM_ACTION));
    }
    L->threads = ro__thread_count();
    return 0;
}

/* Steps and episode returns. A batch sent again after a reconnect repeats
 * (env, step) pairs already counted: those are skipped, so every env step
 * is counted once however often it was served. Steps are rows (env ABI 2:
 * agent steps, as the node's summary counts them); an episode is an env's,
 * which ends for all its agents at once (env-api.md): it counts once, on
 * agent 0's row, and its return is the agents' mean, as the node counts
 * it. */
static void count_step(learner_t *L, node_t *n, uint32_t e, uint64_t step, float reward, bool done)
{
    if (step < n->next_step[e])
        return;
    n->next_step[e] = step + 1;
    n->steps++;
    L->steps++;
    n->ep_ret[e] += reward;
    if (done) {
        const uint32_t agents = L->abi2 && L->lay.agents ? L->lay.agents : 1;
        n->episodes += e % agents == 0;
        n->return_sum += n->ep_ret[e] / agents;
        n->ep_ret[e] = 0.0;
    }
}

/* A frame's rows into p: its env indices and observations, counted. A
 * frame in memory is read out of it here, on arrival (ranges checked). */
static void take_rows(learner_t *L, node_t *n, const Rollout__V1__Observations *o, ro_pending_t *p)
{
    if (!o->in_memory) {
        for (size_t i = 0; i < o->n_env; i++)
            count_step(L, n, o->env[i], o->step[i], o->reward[i],
                       o->terminated[i] || o->truncated[i]);
        p->env = o->env;
        p->obs = o->obs;
        p->mask = NULL;
        if (L->abi2) /* typed tensors, flattened here; the mask beside them */
            ro__learner_rows_abi2(L, o, p);
        return;
    }
    p->mask = NULL;
    const uint8_t *mem = n->seed_obs.base;
    const ro_seed_mem_layout_t *lay = &n->seed_lay;
    const size_t od = L->obs_dim;
    const float *obs = (const float *)(mem + lay->obs_off);
    const float *reward = (const float *)(mem + lay->reward_off);
    const uint64_t *step = (const uint64_t *)(mem + lay->step_off);
    const uint8_t *flags = mem + lay->flags_off;
    uint32_t *env = (uint32_t *)(p->obs_copy + (size_t)p->item.rows * od);
    size_t r = 0;
    for (size_t k = 0; k < o->n_ranges; k += 2) {
        const uint32_t first = o->ranges[k], count = o->ranges[k + 1];
        if (!L->abi2) /* ABI 2: flattened below */
            memcpy(p->obs_copy + r * od, obs + (size_t)first * od,
                   (size_t)count * od * sizeof(float));
        for (uint32_t e = first; e < first + count; e++, r++) {
            env[r] = e;
            count_step(L, n, e, step[e], reward[e],
                       (flags[e] & (RO_SEEDMEM_TERMINATED | RO_SEEDMEM_TRUNCATED)) != 0);
        }
    }
    p->env = env;
    p->obs = p->obs_copy;
    if (L->abi2) /* the rows' tensors flattened, their mask after env */
        ro__learner_rows_memory_abi2(L, n, o, p, (uint8_t *)(env + p->item.rows));
}

/* An Observations frame, from the socket (f) or the ring (f NULL: o is
 * the caller's), checked and pending for a forward pass; true if taken
 * (then f is the pending frame's to free). */
static bool take_observations(learner_t *L, ro_link_t *l, const Rollout__V1__Observations *o,
                              ro_frame_t *f)
{
    node_t *n = node_of(l);
    char err[256];
    ro__loop_spin_answered(&L->spin);
    if ((L->abi2 ? ro__check_observations_abi2(o, &L->lay, n->num_envs, err, sizeof err)
                 : ro__check_observations(o, L->obs_dim, n->num_envs, err, sizeof err)) != 0) {
        ro__link_fail(l, "%s", err);
        return false;
    }
    if (o->in_memory && !n->seed_obs.base) {
        ro__link_fail(l, "observations %llu in memory, but no shared memory was agreed",
                      (unsigned long long)o->seq);
        return false;
    }
    uint32_t rows = (uint32_t)o->n_env;
    if (o->in_memory) /* checked: the ranges add up to at most num_envs */
        (void)ro__seed_mem_rows(o->ranges, o->n_ranges, n->num_envs, &rows, err, sizeof err);
    const size_t row_bytes = L->obs_dim * sizeof(float) + sizeof(uint32_t);
    const size_t abi2_bytes =
        L->obs_dim * sizeof(float) + L->lay.mask_width + (o->in_memory ? sizeof(uint32_t) : 0);
    const size_t extra = L->abi2 ? rows * abi2_bytes : o->in_memory ? rows * row_bytes : 0;
    ro_pending_t *p = malloc(sizeof *p + extra);
    if (!p) {
        ro__link_fail(l, "out of memory");
        return false;
    }
    p->frame = f;
    p->seq = o->seq;
    p->in_memory = o->in_memory;
    p->link = l;
    p->gen = l->gen;
    p->item.rows = rows;
    take_rows(L, n, o, p);
    n->frames++;
    n->frames_in_memory += o->in_memory;
    ro__batcher_push(&L->pending, &p->item);
    return true;
}

static void on_frame(ro_link_t *l, ro_frame_t *f, bool *keep)
{
    learner_t *L = l->o.owner;
    char err[256];
    if (L->push && f->body_case == ROLLOUT__V1__FRAME__BODY_POLICY_ACCEPTED) {
        L->pushed++;
        ro__conn_goodbye(&l->conn, "policy pushed");
        snprintf(err, sizeof err, "accepted policy version %llu",
                 (unsigned long long)f->policy_accepted->version);
        ro__link_close(l, err, true);
        return;
    }
    if (L->push || f->body_case != ROLLOUT__V1__FRAME__BODY_OBSERVATIONS) {
        ro__link_fail(l, "unexpected %s frame from a node", ro__frame_kind(f));
        return;
    }
    if (L->stopping)
        return;
    *keep = take_observations(L, l, f->observations, f);
}

/* The frames n's node posted in its ring, taken as if they had come on
 * the socket; a ring not to be believed fails the link. */
static void drain_ring(learner_t *L, node_t *n)
{
    Rollout__V1__Observations o;
    ro_seed_ring_slot_t slot;
    char err[256];
    while (!L->stopping && ro__learner_ring_live(n)) {
        int rc = ro__learner_ring_next(n, &o, &slot, err, sizeof err);
        if (rc < 0)
            ro__link_fail(&n->link, "%s", err);
        if (rc <= 0 || !take_observations(L, &n->link, &o, NULL))
            return;
    }
}

/* A connection went down: its frames not yet in a job are void (the node
 * keeps them for its next learner, us again after a reconnect). */
static void on_down(ro_link_t *l)
{
    learner_t *L = l->o.owner;
    uint32_t rows;
    ro_batch_item_t *all = ro__batcher_take_all(&L->pending, &rows), *mine = NULL;
    while (all) {
        ro_batch_item_t *next = all->next;
        ro_pending_t *p = ro__container_of(all, ro_pending_t, item);
        if (p->link == l) {
            all->next = mine;
            mine = all;
        } else {
            ro__batcher_push(&L->pending, all);
        }
        all = next;
    }
    ro__learner_free_pending(mine);
    if (l->failed && L->exit_code == 0)
        L->exit_code = 1;
    if (l->done) {
        L->open_links--;
        ro__learner_maybe_finish(L);
    }
}

/* A stream node's segment, read in place: counted, then acknowledged: at
 * once when half the window is owed, else after this turn of the loop has
 * read what came (ro__learner_on_check), so that one ack covers a read's
 * worth of segments and the node's loop wakes once for them. */
static bool on_raw(ro_link_t *l, const uint8_t *body, size_t len)
{
    learner_t *L = l->o.owner;
    node_t *n = node_of(l);
    if (!n->stream || L->stopping)
        return false;
    uint64_t before = n->rx.steps, ack;
    char err[256];
    int rc = ro__stream_rx_frame(&n->rx, body, len, &ack, err, sizeof err);
    if (rc < 0)
        ro__link_fail(l, "%s", err);
    if (rc <= 0)
        return rc < 0;
    L->steps += n->rx.steps - before;
    n->steps = n->rx.steps;
    n->episodes = n->rx.episodes;
    n->return_sum = n->rx.return_sum;
    L->batches++;
    if (n->ack_owed == 0)
        n->first_owed = ack;
    n->ack_owed = ack;
    if (ack - n->first_owed + 1 >= n->ack_every)
        send_ack(n);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        ro__learner_stop_all(L, "step budget reached");
    return true;
}

const ro_link_ops_t ro__learner_link_ops = {
    .on_welcome = on_welcome,
    .on_frame = on_frame,
    .on_raw = on_raw,
    .on_down = on_down,
};

/* A frame's actions into the node's action memory, at its env rows. */
static void write_actions(const learner_t *L, node_t *n, const ro_pending_t *p,
                          const int32_t *act_i, const float *act_f)
{
    uint8_t *col = (uint8_t *)n->seed_act.base + n->seed_lay.act_off;
    if (L->discrete) {
        int32_t *dst = (int32_t *)col;
        for (size_t i = 0; i < p->item.rows; i++)
            dst[p->env[i]] = act_i[i];
        return;
    }
    const size_t ad = L->act_dim;
    float *dst = (float *)col;
    for (size_t i = 0; i < p->item.rows; i++)
        memcpy(dst + (size_t)p->env[i] * ad, act_f + i * ad, ad * sizeof(float));
}

/* Back from a lane: one Actions frame per Observations frame of the job. */
void ro__learner_job_done(void *ctx, ro_job_t *j)
{
    learner_t *L = ctx;
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        Rollout__V1__Actions a = ROLLOUT__V1__ACTIONS__INIT;
        a.seq = p->seq;
        node_t *n = node_of(p->link);
        const bool current = !j->failed && p->gen == p->link->gen;
        if (p->in_memory && current && L->abi2) { /* every row's entries and floats */
            ro__learner_write_actions_abi2(L, n, p, j->act_i + (size_t)r * L->act_ndisc,
                                           j->act_f + (size_t)r * L->act_dim);
            a.in_memory = true;
        } else if (p->in_memory && current) { /* this connection's memory: mapped */
            write_actions(L, n, p, j->act_i + r, j->act_f + (size_t)r * L->act_dim);
            a.in_memory = true;
        } else if (L->abi2) { /* every row's entries and floats, in order */
            a.n_discrete = (size_t)it->rows * L->act_ndisc;
            a.discrete = j->act_i + (size_t)r * L->act_ndisc;
            a.n_box = (size_t)it->rows * L->act_dim;
            a.box = j->act_f + (size_t)r * L->act_dim;
        } else if (L->discrete) {
            a.n_discrete = it->rows;
            a.discrete = j->act_i + r;
        } else {
            a.n_box = (size_t)it->rows * L->act_dim;
            a.box = j->act_f + (size_t)r * L->act_dim;
        }
        ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
        f.body_case = ROLLOUT__V1__FRAME__BODY_ACTIONS;
        f.actions = &a;
        /* A node that went away keeps these observations for its next
         * learner; a connection made since (a reconnect) is not the one they
         * came on. Steps were counted on arrival (take_rows). */
        if (current) {
            ro__link_send(p->link, &f);
            ro__loop_spin_arm(&L->spin); /* the envs' next observations come soon */
        }
        r += it->rows;
    }
    ro__learner_free_pending(j->frames);
    free(j->rowrng);
    free(j->act_i);
    free(j->act_f);
    free(j->mask);
    free(j);
    if (L->cfg.steps && L->steps >= L->cfg.steps)
        ro__learner_stop_all(L, "step budget reached");
    ro__learner_maybe_finish(L);
}

/* One batch of pending frames into a job for the next lane. */
static void submit_batch(learner_t *L)
{
    ro_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(L->err, sizeof L->err, "out of memory for a batch");
        L->exit_code = 1;
        ro__learner_stop_all(L, "out of memory");
        return;
    }
    j->frames = ro__batcher_take(&L->pending, &j->rows);
    j->rowrng = calloc(j->rows, sizeof *j->rowrng);
    /* + 1: an ABI 2 action may have no discrete entries, or no floats. */
    j->act_i = calloc((size_t)j->rows * L->act_ndisc + 1, sizeof *j->act_i);
    j->act_f = calloc((size_t)j->rows * L->act_dim + 1, sizeof *j->act_f);
    const size_t mw = L->abi2 ? L->lay.mask_width : 0;
    j->mask = mw ? malloc((size_t)j->rows * mw) : NULL;
    j->failed = !j->rowrng || !j->act_i || !j->act_f || (mw && !j->mask); /* resent */
    uint32_t r = 0;
    for (ro_batch_item_t *it = j->frames; it && !j->failed; it = it->next) {
        ro_pending_t *p = ro__container_of(it, ro_pending_t, item);
        for (size_t i = 0; i < it->rows; i++)
            j->rowrng[r + i] = &node_of(p->link)->rngs[p->env[i]];
        if (mw)
            memcpy(j->mask + (size_t)r * mw, p->mask, (size_t)it->rows * mw);
        r += it->rows;
    }
    L->batches++;
    if (j->failed) {
        L->fw.jobs_out++; /* as if a lane had it: on_job_done counts it back */
        ro__actor_send(&L->fw.done, &j->msg);
    } else {
        ro__forward_submit(&L->fw, j);
    }
}

static void on_wait_timer(uv_timer_t *t);

/* After each turn of the loop: run what is due. */
static void flush(learner_t *L)
{
    while (!L->stopping && ro__batcher_due(&L->pending, RO_BATCHER_UNKNOWN))
        submit_batch(L);
    if (L->pending.rows > 0 && !L->stopping && !L->wait_armed) {
        L->wait_armed = true;
        uv_timer_start(&L->wait_timer, on_wait_timer, (L->cfg.max_wait_us + 999) / 1000, 0);
    }
}

static void on_wait_timer(uv_timer_t *t)
{
    learner_t *L = t->data;
    L->wait_armed = false;
    flush(L);
}

/* Rounds of reading at once per turn of the loop (below): enough for a
 * pipeline of SEED frames to go on without the loop, few enough that its
 * timers and signals still come round every few hundred microseconds. */
#define READ_NOW_ROUNDS 16

void ro__learner_on_check(uv_check_t *h)
{
    learner_t *L = h->data;
    ro__learner_rings_wake(L);
    for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
        if (L->nodes[i].ack_owed)
            send_ack(&L->nodes[i]);
        drain_ring(L, &L->nodes[i]);
    }
    flush(L);
    /* The answers just sent; a SEED node's next frame has usually come
     * while we computed: take it now, from the ring or the socket, rather
     * than after another turn of the loop and its epoll_wait (perf: 1.5
     * epoll_wait and 10-15 % of the learner's time in the loop's system
     * calls per frame at 256 envs). */
    for (int round = 0; round < READ_NOW_ROUNDS && !L->stopping; round++) {
        uint32_t before = L->pending.rows;
        size_t got = 0;
        for (uint32_t i = 0; i < L->cfg.nconnect; i++) {
            node_t *n = &L->nodes[i];
            drain_ring(L, n);
            if (n->link.welcomed && !n->stream)
                got += ro__conn_read_now(&n->link.conn);
        }
        if (got == 0 && L->pending.rows == before)
            break;
        flush(L);
    }
}

static void on_kick(uv_idle_t *h)
{
    uv_idle_stop(h);
}

void ro__learner_on_prepare(uv_prepare_t *h)
{
    learner_t *L = h->data;
    /* Only if the loop may block (no idle handle, no spin): a ring marked
     * asleep makes its node send on the socket, which costs it a wake-up. */
    for (int round = 0; round < READ_NOW_ROUNDS; round++) {
        if (L->stopping || uv_backend_timeout(&L->loop) == 0 || ro__learner_rings_sleep(L))
            return;
        for (uint32_t i = 0; i < L->cfg.nconnect; i++) /* frames came: take them first */
            drain_ring(L, &L->nodes[i]);
        flush(L);
    }
    /* They keep coming: one more turn without blocking, then try again. */
    uv_idle_start(&L->kick, on_kick);
}
