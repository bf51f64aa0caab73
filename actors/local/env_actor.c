#include "actors/local/env_actor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/crash_report.h"
#include "runtime/error.h"
#include "actors/exchange/messages.h"
#include "actors/local/env_state_port.h"
#include "actors/recorder/recorder_actor.h"
#include "actors/stream/stream_port.h"
#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/registry.h"
#include "spaces/layout.h"
#include "runtime/numa_mem.h"
#include "runtime/scheduler.h"

/* Below this many steps per env the shard checks nothing for a quota. */
#define NO_QUOTA 0

static bool row_finite(const float *o, uint32_t dim, float reward)
{
    /* One pass with no early exit so the compiler can vectorize it. */
    int bad = !isfinite(reward);
    for (uint32_t i = 0; i < dim; i++)
        bad |= !isfinite(o[i]);
    return !bad;
}

static void push_metric(ro_env_shard_t *s, uint32_t kind, uint32_t j, double value, uint32_t len,
                        bool term, bool trunc, uint64_t t_ns)
{
    ro_metric_t m = {
        .kind = kind,
        .env = s->xchg.first + j,
        .episode = s->ep_num[j],
        .value = value,
        .length = len,
        .terminated = term,
        .truncated = trunc,
        .t_ns = t_ns,
        .policy_first = s->ep_policy[j],
        .policy_last = s->xchg.policy_version, /* the version that chose this step's action */
    };
    /* Never blocks: a full ring drops and counts. */
    ro__metrics_ring_push(s->rules.ring, &m);
}

/* env j's episode into the shard's histograms (--tensorboard, --prometheus). */
static void count_episode(ro_env_shard_t *s, uint32_t j)
{
    ro__histo_pub_add(&s->rules.histos[0], ro__histo_return_edges, ro__histo_return_nedges,
                      s->ep_return[j]);
    ro__histo_pub_add(&s->rules.histos[1], ro__histo_size_edges, ro__histo_size_nedges,
                      s->ep_len[j]);
}

static void begin_episode(ro_env_shard_t *s, uint32_t j, float *o)
{
    ro__crash_ctx.what = "reset";
    s->vt->reset(s->envs[j], o);
    s->xchg.episode_start[j] = 1;
    s->ep_len[j] = 0;
    s->ep_return[j] = 0.0;
}

static void reset_flat(ro_env_shard_t *s)
{
    ro__crash_ctx.env_name = s->vt->name;
    ro_step_batch_t *b = &s->xchg;
    for (uint32_t j = 0; j < b->n; j++) {
        ro__crash_ctx.env = b->first + j;
        ro__crash_ctx.episode = s->ep_num[j];
        ro__crash_ctx.step = 0;
        begin_episode(s, j, b->obs + (size_t)j * b->obs_dim);
        b->reward[j] = 0.0f;
        b->terminated[j] = b->truncated[j] = b->has_final[j] = 0;
    }
    ro__crash_ctx.env_name = NULL;
}

/* A failed or non-finite step: the episode is cut (truncated, with no final
 * observation), counted, and the env starts over. */
static void fail_env(ro_env_shard_t *s, uint32_t j, float *o)
{
    s->env_failures++;
    push_metric(s, RO_METRIC_ENV_FAIL, j, 0.0, s->ep_len[j] + 1, false, true, ro__now_ns());
    s->ep_num[j]++;
    s->xchg.reward[j] = 0.0f;
    s->xchg.terminated[j] = 0;
    s->xchg.truncated[j] = 1;
    s->xchg.has_final[j] = 0;
    begin_episode(s, j, o);
}

static void step_flat(ro_env_shard_t *s)
{
    ro_step_batch_t *b = &s->xchg;
    const size_t od = b->obs_dim;
    const uint8_t *hold = b->nheld ? b->hold : NULL; /* NULL: every env steps */
    /* For the crash report: a few stores per step, no branch, no syscall. */
    ro_crash_ctx_t *cx = &ro__crash_ctx;
    cx->env_name = s->vt->name;
    uint64_t t_ns = 0; /* read once a shard step, when an episode ends */
    for (uint32_t j = 0; j < b->n; j++) {
        float *o = b->obs + j * od;
        if (hold && hold[j]) { /* the learner's NEXT_STEP: the same observation again */
            b->reward[j] = 0.0f;
            b->terminated[j] = b->truncated[j] = b->has_final[j] = 0;
            continue;
        }
        cx->what = "step";
        cx->env = b->first + j;
        cx->episode = s->ep_num[j];
        cx->step = s->ep_len[j] + 1;
        if (s->ep_len[j] == 0) /* the episode's first action */
            s->ep_policy[j] = b->policy_version;
        ro_action_t a;
        if (b->discrete)
            a.discrete = b->act_i[j];
        else
            a.box = b->act_f + (size_t)j * b->act_dim;
        ro_step_t st = {0};
        int rc = s->vt->step(s->envs[j], a, o, &st);
        if (rc != 0 || (s->rules.check_finite && !row_finite(o, b->obs_dim, st.reward))) {
            fail_env(s, j, o);
            continue;
        }
        s->ep_len[j]++;
        s->ep_return[j] += st.reward;
        bool trunc = st.truncated || (s->rules.max_steps && s->ep_len[j] >= s->rules.max_steps);
        b->reward[j] = st.reward;
        b->terminated[j] = st.terminated != 0;
        b->truncated[j] = trunc;
        if (st.terminated || trunc) {
            memcpy(b->final_obs + j * od, o, od * sizeof(float));
            b->has_final[j] = 1;
            if (s->rules.record_episodes) {
                t_ns = t_ns ? t_ns : ro__now_ns();
                push_metric(s, RO_METRIC_EPISODE, j, s->ep_return[j], s->ep_len[j],
                            st.terminated != 0, trunc, t_ns);
            }
            s->episodes++;
            s->return_sum += s->ep_return[j];
            if (s->rules.histos)
                count_episode(s, j);
            s->ep_num[j]++;
            begin_episode(s, j, o);
        } else {
            b->has_final[j] = 0;
            b->episode_start[j] = 0;
        }
    }
    cx->env_name = NULL;
    b->steps++;
    /* Relaxed: statistics; the loop reads them for throughput only. */
    atomic_store_explicit(&s->steps, b->steps * b->n, memory_order_relaxed);
    atomic_store_explicit(&s->episodes_pub, s->episodes, memory_order_relaxed);
    atomic_store_explicit(&s->return_pub, s->return_sum, memory_order_relaxed);
}

/* --- Env ABI 2: typed tensors, several agents, masks, metrics --- */

/* obs_out_of points o at env j's rows of every tensor and of the mask. */
static void obs_out_of(const ro_step_batch_t *b, uint32_t j, void **t, ro_obs_out_t *o)
{
    const ro_space_layout_t *lay = b->layout;
    const size_t r0 = (size_t)j * b->agents;
    for (uint32_t k = 0; k < lay->ntensors; k++)
        t[k] = b->tensor[k] + r0 * lay->t[k].row_bytes;
    o->tensors = t;
    o->mask = b->mask ? b->mask + r0 * lay->mask_width : NULL;
}

/* mask_ok tells whether env j's mask rows leave every discrete entry of
 * every agent a value to take (the policy must never be cornered). */
static bool mask_ok(const ro_step_batch_t *b, uint32_t j)
{
    const ro_space_layout_t *lay = b->layout;
    for (uint32_t a = 0; b->mask && a < b->agents; a++)
        if (!ro__layout_mask_ok(lay, b->mask + ((size_t)j * b->agents + a) * lay->mask_width, NULL))
            return false;
    return true;
}

/* finite_rows: env j's float32 tensors and rewards hold numbers. */
static bool finite_rows(const ro_step_batch_t *b, uint32_t j, const ro_step_t *st)
{
    const ro_space_layout_t *lay = b->layout;
    int bad = 0;
    for (uint32_t a = 0; a < b->agents; a++)
        bad |= !isfinite(st[a].reward);
    for (uint32_t k = 0; k < lay->ntensors; k++) {
        if (lay->t[k].dtype != RO_DTYPE_FLOAT32)
            continue;
        const size_t cnt = (size_t)lay->t[k].size * b->agents;
        const float *o =
            (const float *)(void *)(b->tensor[k] + (size_t)j * b->agents * lay->t[k].row_bytes);
        for (size_t i = 0; i < cnt; i++)
            bad |= !isfinite(o[i]);
    }
    return !bad;
}

/* begin_typed_episode resets env j (every agent). A reset whose mask corners an
 * entry counts as a failure and allows every value of that env's rows:
 * the env broke its contract, and retrying could loop forever. */
static void begin_typed_episode(ro_env_shard_t *s, uint32_t j)
{
    ro_step_batch_t *b = &s->xchg;
    void *t[RO_ENV_MAX_TENSORS];
    ro_obs_out_t o;
    obs_out_of(b, j, t, &o);
    ro__crash_ctx.what = "reset";
    s->vt2->reset(s->envs[j], &o);
    if (!mask_ok(b, j)) {
        s->env_failures++;
        memset(o.mask, 1, (size_t)b->agents * b->layout->mask_width);
    }
    memset(b->episode_start + (size_t)j * b->agents, 1, b->agents);
    s->ep_len[j] = 0;
    s->ep_return[j] = 0.0;
}

static void reset_typed(ro_env_shard_t *s)
{
    ro_step_batch_t *b = &s->xchg;
    ro__crash_ctx.env_name = s->vt2->name;
    for (uint32_t j = 0; j < b->n / b->agents; j++) {
        ro__crash_ctx.env = b->first + j;
        ro__crash_ctx.episode = s->ep_num[j];
        ro__crash_ctx.step = 0;
        begin_typed_episode(s, j);
    }
    memset(b->reward, 0, b->n * sizeof *b->reward);
    memset(b->terminated, 0, b->n);
    memset(b->truncated, 0, b->n);
    memset(b->has_final, 0, b->n);
    ro__crash_ctx.env_name = NULL;
}

/* end_rows writes env j's per-row outcome: every row ends (end) or none. */
static void end_rows(ro_step_batch_t *b, uint32_t j, const ro_step_t *st, bool end)
{
    for (uint32_t a = 0; a < b->agents; a++) {
        const size_t r = (size_t)j * b->agents + a;
        b->reward[r] = st[a].reward;
        b->terminated[r] = st[a].terminated != 0;
        /* The episode ends for all: those that did not terminate are cut. */
        b->truncated[r] = st[a].truncated != 0 || (end && !st[a].terminated);
        b->has_final[r] = end;
        b->episode_start[r] = 0; /* begin_typed_episode sets it after an end */
    }
}

/* metrics_of adds env j's per-episode metrics to the shard's sums. */
static void metrics_of(ro_env_shard_t *s, uint32_t j)
{
    const uint32_t nm = s->xchg.layout->nmetrics;
    if (!nm)
        return;
    float v[RO_ENV_MAX_METRICS];
    for (uint32_t m = 0; m < nm; m++)
        v[m] = NAN; /* not reported, unless the env writes it */
    ro__crash_ctx.what = "episode_metrics";
    s->vt2->episode_metrics(s->envs[j], v);
    for (uint32_t m = 0; m < nm; m++)
        if (isfinite(v[m])) {
            s->metric_sum[m] += v[m];
            s->metric_count[m]++;
            /* Relaxed: statistics for the logger's lines, as steps. */
            atomic_store_explicit(&s->metric_sum_pub[m], s->metric_sum[m], memory_order_relaxed);
            atomic_store_explicit(&s->metric_count_pub[m], s->metric_count[m],
                                  memory_order_relaxed);
        }
}

static void step_typed(ro_env_shard_t *s)
{
    ro_step_batch_t *b = &s->xchg;
    const ro_space_layout_t *lay = b->layout;
    const uint32_t A = b->agents, ne = b->n / A;
    const uint8_t *hold = b->nheld ? b->hold : NULL; /* NULL: every env steps */
    ro_crash_ctx_t *cx = &ro__crash_ctx;
    cx->env_name = s->vt2->name;
    uint64_t t_ns = 0;
    ro_step_t *st = s->agent_steps;
    /* A Python env's shard goes to its worker process at once (one wake
     * each way), but the envs held; each step() below then reads its env's
     * outcome. */
    ro__env_step_group(&s->kind, s->envs, ne, lay->ndisc ? b->act_i : NULL,
                       lay->nbox ? b->act_f : NULL, hold);
    for (uint32_t j = 0; j < ne; j++) {
        const size_t r0 = (size_t)j * A;
        if (hold && hold[j]) { /* the learner's NEXT_STEP: the same observation again */
            memset(b->reward + r0, 0, A * sizeof *b->reward);
            memset(b->terminated + r0, 0, A);
            memset(b->truncated + r0, 0, A);
            memset(b->has_final + r0, 0, A);
            continue;
        }
        cx->what = "step";
        cx->env = b->first + j;
        cx->episode = s->ep_num[j];
        cx->step = s->ep_len[j] + 1;
        if (s->ep_len[j] == 0)
            s->ep_policy[j] = b->policy_version;
        ro_actions_t act = {
            .discrete = lay->ndisc ? b->act_i + r0 * lay->ndisc : NULL,
            .box = lay->nbox ? b->act_f + r0 * lay->nbox : NULL,
        };
        void *t[RO_ENV_MAX_TENSORS];
        ro_obs_out_t o;
        obs_out_of(b, j, t, &o);
        memset(st, 0, A * sizeof *st);
        int rc = s->vt2->step(s->envs[j], &act, &o, st);
        if (rc != 0 || (s->rules.check_finite && !finite_rows(b, j, st)) || !mask_ok(b, j)) {
            s->env_failures++;
            push_metric(s, RO_METRIC_ENV_FAIL, j, 0.0, s->ep_len[j] + 1, false, true, ro__now_ns());
            s->ep_num[j]++;
            for (uint32_t a = 0; a < A; a++) { /* cut, with no final observation */
                b->reward[r0 + a] = 0.0f;
                b->terminated[r0 + a] = b->has_final[r0 + a] = 0;
                b->truncated[r0 + a] = 1;
            }
            begin_typed_episode(s, j);
            continue;
        }
        s->ep_len[j]++;
        bool end = s->rules.max_steps && s->ep_len[j] >= s->rules.max_steps, term = false;
        double rsum = 0.0;
        for (uint32_t a = 0; a < A; a++) {
            rsum += st[a].reward;
            term |= st[a].terminated != 0;
            end |= st[a].terminated || st[a].truncated;
        }
        s->ep_return[j] += rsum / A; /* an env's return: its agents' mean */
        end_rows(b, j, st, end);
        if (!end)
            continue;
        for (uint32_t k = 0; k < lay->ntensors; k++)
            memcpy(b->final_tensor[k] + r0 * lay->t[k].row_bytes, t[k], A * lay->t[k].row_bytes);
        metrics_of(s, j);
        if (s->rules.record_episodes) {
            t_ns = t_ns ? t_ns : ro__now_ns();
            push_metric(s, RO_METRIC_EPISODE, j, s->ep_return[j], s->ep_len[j], term, !term, t_ns);
        }
        s->episodes++;
        s->return_sum += s->ep_return[j];
        if (s->rules.histos)
            count_episode(s, j);
        s->ep_num[j]++;
        begin_typed_episode(s, j);
    }
    cx->env_name = NULL;
    b->steps++;
    /* Relaxed: statistics, as step_flat. */
    atomic_store_explicit(&s->steps, b->steps * b->n, memory_order_relaxed);
    atomic_store_explicit(&s->episodes_pub, s->episodes, memory_order_relaxed);
    atomic_store_explicit(&s->return_pub, s->return_sum, memory_order_relaxed);
}

/* reset_envs resets every env of the shard, through its ABI's table: at
 * the start and after a reseed. */
static void reset_envs(ro_env_shard_t *s)
{
    if (s->vt2)
        reset_typed(s);
    else
        reset_flat(s);
}

/* A learner's reseed (hub_reseed.c) instead of a step: every env starts a
 * new episode (the one it was in is left unfinished, as a recording then
 * shows), re-created first from (the learner's seed, --node-index, its
 * index) when the reseed has a seed, exactly as a node started with that
 * --seed creates it, or from (its own seed, its index) with per-env seeds
 * (RO_RESEED_ENVS), as make_vec creates env i of a seed list; then the
 * envs are reset as at the start. An env that cannot be re-created keeps
 * its instance and counts as an env failure. */
static void reseed_all(ro_env_shard_t *s)
{
    ro_step_batch_t *b = &s->xchg;
    const uint32_t A = b->agents ? b->agents : 1, ne = b->n / A;
    const uint64_t node_seed = ro__node_seed(b->reseed_seed, s->rules.node_index);
    const bool own = b->reseed == RO_RESEED_ENVS;
    ro__crash_ctx.what = "create";
    for (uint32_t j = 0; j < ne; j++) {
        s->ep_num[j]++;
        if (own ? !b->reseed_has[j] : b->reseed != RO_RESEED_SEED)
            continue;
        const uint64_t idx = (uint64_t)b->first + j;
        const uint64_t base = own ? b->reseed_env[j] : node_seed;
        const uint64_t es = ro__seed_mix(base, idx, RO_STREAM_ENV);
        char err[160];
        void *e = NULL;
        if (ro__env_create(&s->kind, &e, s->args, s->nargs, es, (uint32_t)idx, err, sizeof err)) {
            s->env_failures++;
            continue;
        }
        ro__env_destroy(&s->kind, s->envs[j]);
        s->envs[j] = e;
        for (uint32_t a = 0; a < A; a++)
            ro__rng_init(&b->act_rng[(size_t)j * A + a],
                         ro__seed_mix(base, idx * A + a, RO_STREAM_ACTION));
    }
    reset_envs(s);
}

/* The step (or reset) goes to the learner, or the shard is done. */
static void offer(ro_env_shard_t *s)
{
    /* Relaxed: the flag carries no data; we only need to see it eventually. */
    bool stop = atomic_load_explicit(s->rules.stopping, memory_order_relaxed);
    bool done = stop || (s->rules.quota != NO_QUOTA && s->xchg.steps >= s->rules.quota);
    if (done && s->stream)
        ro__stream_port_finish(s->stream, &s->xchg);
    else if (s->stream && s->xchg.rstate && s->stream->cur && s->stream->cur->t == 0)
        ro__stream_capture_state(s->stream, &s->xchg); /* before the learner moves it on */
    ro__step_batch_offer(&s->xchg, done ? RO_MSG_SHARD_DONE : RO_MSG_OBS_READY);
}

/* --learner stream: the step's outcome into the shard's segment (the reset:
 * a segment to fill first). Returns false if the shard must wait for a
 * segment (RO_MSG_STREAM_RESUME comes later). */
static bool stream_step(ro_env_shard_t *s, bool start)
{
    if (!s->stream)
        return true;
    return start ? ro__stream_port_ready(s->stream)
                 : ro__stream_capture_outcome(s->stream, &s->xchg);
}

/* After a step or the reset: the recorder, then the stream, may make the
 * shard wait for a buffer (without blocking its worker); then it offers. */
static void after_step(ro_env_shard_t *s, bool start)
{
    s->after_start = start;
    if (__builtin_expect(s->rec != NULL, 0) && !ro__recorder_capture(s->rec, start))
        return; /* no free chunk: RO_MSG_RECORD_RESUME comes later */
    if (stream_step(s, start))
        offer(s);
}

static void env_actor_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_env_shard_t *s = ro__container_of(self, ro_env_shard_t, actor);
    switch (msg->type) {
    case RO_MSG_ACTIONS:
        if (s->stream)
            ro__stream_capture_action(s->stream, &s->xchg, s->ep_num, s->ep_len);
        if (s->vt2)
            step_typed(s);
        else
            step_flat(s);
        after_step(s, false);
        break;
    case RO_MSG_RESEED:
        reseed_all(s);
        after_step(s, true);
        break;
    case RO_MSG_START:
        reset_envs(s);
        after_step(s, true);
        break;
    case RO_MSG_STOP: /* no actions will come: the node is stopping */
        if (s->stream)
            ro__stream_port_finish(s->stream, &s->xchg);
        ro__step_batch_offer(&s->xchg, RO_MSG_SHARD_DONE);
        break;
    case RO_MSG_RECORD_RESUME:
        ro__recorder_resume(s->rec);
        if (stream_step(s, s->after_start))
            offer(s);
        break;
    case RO_MSG_STREAM_RESUME:
        ro__stream_port_resume(s->stream);
        offer(s);
        break;
    default:
        break;
    }
}

int ro__env_shard_wire(ro_env_shard_t *s, const ro_env_shard_wiring_t *w)
{
    s->xchg.index = w->index;
    s->xchg.learner = w->learner;
    s->xchg.env = &s->actor;
    s->rules = w->rules;
    ro__env_state_port_wire(s);
    if (!w->runq)
        return ro__actor_init_loop(&s->actor, "env", env_actor_behaviour, w->loop, w->home);
    /* A few messages per run: a shard never has more than one queued. */
    ro__actor_init_worker(&s->actor, "env", env_actor_behaviour, w->runq, 4);
    return 0;
}

void ro__env_shard_start(ro_env_shard_t *s)
{
    s->xchg.to_env.type = RO_MSG_START;
    ro__actor_send(&s->actor, &s->xchg.to_env);
}
