#include "actors/env_actor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "runtime/crash_report.h"
#include "runtime/error.h"
#include "actors/messages.h"
#include "actors/recorder_actor.h"
#include "envs/registry.h"
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
                        bool term, bool trunc)
{
    ro_metric_t m = {
        .kind = kind,
        .env = s->xchg.first + j,
        .episode = s->ep_num[j],
        .value = value,
        .length = len,
        .terminated = term,
        .truncated = trunc,
        .t_ns = ro__now_ns(),
        .policy_first = s->ep_policy[j],
        .policy_last = s->xchg.policy_version, /* the version that chose this step's action */
    };
    /* Never blocks: a full ring drops and counts. */
    ro__metrics_ring_push(s->ring, &m);
}

static void begin_episode(ro_env_shard_t *s, uint32_t j, float *o)
{
    ro__crash_ctx.what = "reset";
    s->vt->reset(s->envs[j], o);
    s->xchg.episode_start[j] = 1;
    s->ep_len[j] = 0;
    s->ep_return[j] = 0.0;
}

static void reset_all(ro_env_shard_t *s)
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
    push_metric(s, RO_METRIC_ENV_FAIL, j, 0.0, s->ep_len[j] + 1, false, true);
    s->ep_num[j]++;
    s->xchg.reward[j] = 0.0f;
    s->xchg.terminated[j] = 0;
    s->xchg.truncated[j] = 1;
    s->xchg.has_final[j] = 0;
    begin_episode(s, j, o);
}

static void step_all(ro_env_shard_t *s)
{
    ro_step_batch_t *b = &s->xchg;
    const size_t od = b->obs_dim;
    /* For the crash report: a few stores per step, no branch, no syscall. */
    ro_crash_ctx_t *cx = &ro__crash_ctx;
    cx->env_name = s->vt->name;
    for (uint32_t j = 0; j < b->n; j++) {
        float *o = b->obs + j * od;
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
        if (rc != 0 || (s->check_finite && !row_finite(o, b->obs_dim, st.reward))) {
            fail_env(s, j, o);
            continue;
        }
        s->ep_len[j]++;
        s->ep_return[j] += st.reward;
        bool trunc = st.truncated || (s->max_steps && s->ep_len[j] >= s->max_steps);
        b->reward[j] = st.reward;
        b->terminated[j] = st.terminated != 0;
        b->truncated[j] = trunc;
        if (st.terminated || trunc) {
            memcpy(b->final_obs + j * od, o, od * sizeof(float));
            b->has_final[j] = 1;
            if (s->record_episodes)
                push_metric(s, RO_METRIC_EPISODE, j, s->ep_return[j], s->ep_len[j],
                            st.terminated != 0, trunc);
            s->episodes++;
            s->return_sum += s->ep_return[j];
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

/* --record: step (or reset) as usual, then hand the shard's entries to the
 * recorder. Returns false if the shard must wait for a chunk. */
static bool record_step(ro_env_shard_t *s, ro_msg_t *msg)
{
    if (msg->type == RO_MSG_RECORD_RESUME) {
        ro__recorder_resume(s->rec);
        return true;
    }
    bool start = msg->type == RO_MSG_START;
    if (start)
        reset_all(s);
    else
        step_all(s);
    return ro__recorder_capture(s->rec, start);
}

static void env_actor_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_env_shard_t *s = ro__container_of(self, ro_env_shard_t, actor);
    if (msg->type == RO_MSG_STOP) { /* no actions will come: the node is stopping */
        ro__step_batch_offer(&s->xchg, RO_MSG_SHARD_DONE);
        return;
    }
    if (__builtin_expect(s->rec != NULL, 0)) {
        if (!record_step(s, msg))
            return; /* no free chunk: RO_MSG_RECORD_RESUME comes later */
    } else if (msg->type == RO_MSG_START)
        reset_all(s);
    else
        step_all(s);

    /* Relaxed: the flag carries no data; we only need to see it eventually. */
    bool stop = atomic_load_explicit(s->stopping, memory_order_relaxed);
    bool quota_done = s->quota != NO_QUOTA && s->xchg.steps >= s->quota;
    ro__step_batch_offer(&s->xchg, (stop || quota_done) ? RO_MSG_SHARD_DONE : RO_MSG_OBS_READY);
}

/* Reserve the next array of `bytes` in a block, on its own cache line: no
 * two arrays (nor two shards' arrays) share a line. Returns its offset. */
static size_t carve(size_t *off, size_t bytes)
{
    size_t at = *off;
    *off += (bytes + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    return at;
}

/* All of a shard's per-env arrays live in one cache-line-aligned block,
 * allocated (and first touched) once. With mem == NULL, only returns its
 * size; otherwise also points the arrays into mem. */
static size_t layout(ro_env_shard_t *s, char *mem)
{
    ro_step_batch_t *b = &s->xchg;
    const size_t n = b->n, od = b->obs_dim;
    size_t off = 0, at[15];
    at[0] = carve(&off, n * sizeof(void *));
    at[1] = carve(&off, n * sizeof(uint32_t));
    at[2] = carve(&off, n * sizeof(double));
    at[3] = carve(&off, n * sizeof(uint64_t));
    at[4] = carve(&off, n * sizeof(ro_rng_t));
    at[5] = carve(&off, n * od * sizeof(float));
    at[6] = carve(&off, n * od * sizeof(float));
    at[7] = carve(&off, n * sizeof(float));
    at[8] = carve(&off, n);
    at[9] = carve(&off, n);
    at[10] = carve(&off, n);
    at[11] = carve(&off, n);
    at[12] = carve(&off, n * sizeof(int32_t));
    at[13] = carve(&off, n * b->act_dim * sizeof(float));
    at[14] = carve(&off, n * sizeof(uint64_t));
    if (mem) {
        s->envs = (void **)(mem + at[0]);
        s->ep_len = (uint32_t *)(mem + at[1]);
        s->ep_return = (double *)(mem + at[2]);
        s->ep_num = (uint64_t *)(mem + at[3]);
        b->act_rng = (ro_rng_t *)(mem + at[4]);
        b->obs = (float *)(mem + at[5]);
        b->final_obs = (float *)(mem + at[6]);
        b->reward = (float *)(mem + at[7]);
        b->terminated = (uint8_t *)(mem + at[8]);
        b->truncated = (uint8_t *)(mem + at[9]);
        b->episode_start = (uint8_t *)(mem + at[10]);
        b->has_final = (uint8_t *)(mem + at[11]);
        b->act_i = (int32_t *)(mem + at[12]);
        b->act_f = (float *)(mem + at[13]);
        s->ep_policy = (uint64_t *)(mem + at[14]);
    }
    return off;
}

int ro__env_shard_init(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                       size_t nargs, uint32_t first, uint32_t n, uint64_t seed, char *err,
                       size_t errlen)
{
    return ro__env_shard_init_on(s, vt, args, nargs, first, n, seed, -1, err, errlen);
}

int ro__env_shard_init_on(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                          size_t nargs, uint32_t first, uint32_t n, uint64_t seed, int mem_node,
                          char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->vt = vt;
    ro_step_batch_t *b = &s->xchg;
    b->first = first;
    b->n = n;
    b->item.rows = n;

    /* One probe instance tells the spaces, hence the buffer sizes. */
    void *probe;
    int rc = vt->create(&probe, args, nargs, ro__seed_mix(seed, first, RO_STREAM_ENV), err, errlen);
    if (rc != 0)
        return rc;
    ro_space_t os = {0}, as = {0};
    vt->spaces(probe, &os, &as);
    /* Checked before anything sizes a buffer or reads a bound from them: a
     * plugin's NULL bounds or bad shape is one clear error, in every mode. */
    if ((rc = ro__env_check_spaces(vt, &os, &as, err, errlen)) != 0) {
        vt->destroy(probe);
        return rc;
    }
    b->obs_dim = (uint32_t)ro_space_size(&os);
    b->discrete = as.kind == RO_SPACE_DISCRETE;
    b->act_dim = (uint32_t)ro_space_size(&as);

    /* On the node of the worker that steps the shard (and the lane that
     * reads it), placed and touched now; else cache-line-aligned heap. */
    s->mem_node = mem_node;
    if (mem_node >= 0) {
        s->mem_bytes = layout(s, NULL);
        s->mem = ro__numa_alloc(s->mem_bytes, mem_node);
    } else {
        s->mem = ro__calloc_lines(1, layout(s, NULL));
    }
    if (!s->mem) {
        vt->destroy(probe);
        snprintf(err, errlen, "out of memory creating envs %u..%u", first, first + n - 1);
        return RO_ENOMEM;
    }
    layout(s, s->mem);
    s->envs[0] = probe;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t idx = (uint64_t)first + j;
        if (j > 0) {
            rc = vt->create(&s->envs[j], args, nargs, ro__seed_mix(seed, idx, RO_STREAM_ENV), err,
                            errlen);
            if (rc != 0) {
                ro__env_shard_destroy(s);
                return rc;
            }
        }
        ro__rng_init(&b->act_rng[j], ro__seed_mix(seed, idx, RO_STREAM_ACTION));
    }
    atomic_init(&s->steps, 0);
    atomic_init(&s->episodes_pub, 0);
    atomic_init(&s->return_pub, 0.0);
    return 0;
}

void ro__env_shard_wire(ro_env_shard_t *s, const ro_env_shard_wiring_t *w)
{
    s->xchg.index = w->index;
    s->xchg.learner = w->learner;
    s->xchg.env = &s->actor;
    s->ring = w->ring;
    s->stopping = w->stopping;
    s->max_steps = w->max_steps;
    s->quota = w->quota;
    s->check_finite = w->check_finite;
    s->record_episodes = w->record_episodes;
    /* A few messages per run: a shard never has more than one queued. */
    ro__actor_init_worker(&s->actor, "env", env_actor_behaviour, w->runq, 4);
}

void ro__env_shard_destroy(ro_env_shard_t *s)
{
    if (s->envs)
        for (uint32_t j = 0; j < s->xchg.n; j++)
            if (s->envs[j])
                s->vt->destroy(s->envs[j]);
    if (s->mem_bytes)
        ro__numa_free(s->mem, s->mem_bytes);
    else
        free(s->mem);
    memset(s, 0, sizeof *s);
}

void ro__env_shard_start(ro_env_shard_t *s)
{
    s->xchg.to_env.type = RO_MSG_START;
    ro__actor_send(&s->actor, &s->xchg.to_env);
}
