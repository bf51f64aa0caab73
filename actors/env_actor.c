#include "env_actor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "learner_actor.h"
#include "messages.h"

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
        .env = s->first + j,
        .episode = s->ep_num[j],
        .value = value,
        .length = len,
        .terminated = term,
        .truncated = trunc,
        .t_ns = ro__now_ns(),
    };
    /* Never blocks: a full ring drops and counts. */
    ro__metrics_ring_push(s->ring, &m);
}

static void begin_episode(ro_env_shard_t *s, uint32_t j, float *o)
{
    s->vt->reset(s->envs[j], o);
    s->episode_start[j] = 1;
    s->ep_len[j] = 0;
    s->ep_return[j] = 0.0;
}

static void reset_all(ro_env_shard_t *s)
{
    for (uint32_t j = 0; j < s->n; j++) {
        begin_episode(s, j, s->obs + (size_t)j * s->obs_dim);
        s->reward[j] = 0.0f;
        s->terminated[j] = s->truncated[j] = s->has_final[j] = 0;
    }
}

/* A failed or non-finite step: the episode is cut (truncated, with no final
 * observation), counted, and the env starts over. */
static void fail_env(ro_env_shard_t *s, uint32_t j, float *o)
{
    s->env_failures++;
    push_metric(s, RO_METRIC_ENV_FAIL, j, 0.0, s->ep_len[j] + 1, false, true);
    s->ep_num[j]++;
    s->reward[j] = 0.0f;
    s->terminated[j] = 0;
    s->truncated[j] = 1;
    s->has_final[j] = 0;
    begin_episode(s, j, o);
}

static void step_all(ro_env_shard_t *s)
{
    const size_t od = s->obs_dim;
    for (uint32_t j = 0; j < s->n; j++) {
        float *o = s->obs + j * od;
        ro_action_t a;
        if (s->discrete)
            a.discrete = s->act_i[j];
        else
            a.box = s->act_f + (size_t)j * s->act_dim;
        ro_step_t st = {0};
        int rc = s->vt->step(s->envs[j], a, o, &st);
        if (rc != 0 || (s->check_finite && !row_finite(o, s->obs_dim, st.reward))) {
            fail_env(s, j, o);
            continue;
        }
        s->ep_len[j]++;
        s->ep_return[j] += st.reward;
        bool trunc = st.truncated || (s->max_steps && s->ep_len[j] >= s->max_steps);
        s->reward[j] = st.reward;
        s->terminated[j] = st.terminated != 0;
        s->truncated[j] = trunc;
        if (st.terminated || trunc) {
            memcpy(s->final_obs + j * od, o, od * sizeof(float));
            s->has_final[j] = 1;
            push_metric(s, RO_METRIC_EPISODE, j, s->ep_return[j], s->ep_len[j],
                        st.terminated != 0, trunc);
            s->episodes++;
            s->return_sum += s->ep_return[j];
            s->ep_num[j]++;
            begin_episode(s, j, o);
        } else {
            s->has_final[j] = 0;
            s->episode_start[j] = 0;
        }
    }
    s->steps_done++;
    /* Relaxed: a statistic; the loop reads it for throughput only. */
    atomic_store_explicit(&s->steps, s->steps_done * s->n, memory_order_relaxed);
}

static void env_actor_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_env_shard_t *s = ro__container_of(self, ro_env_shard_t, actor);
    if (msg->type == RO_MSG_START)
        reset_all(s);
    else
        step_all(s);

    /* Relaxed: the flag carries no data; we only need to see it eventually. */
    bool stop = atomic_load_explicit(s->stopping, memory_order_relaxed);
    bool quota_done = s->quota != NO_QUOTA && s->steps_done >= s->quota;
    s->ready_msg.type = (stop || quota_done) ? RO_MSG_SHARD_DONE : RO_MSG_OBS_READY;
    ro__actor_send(&s->learner->actor, &s->ready_msg);
}

int ro__env_shard_init(ro_env_shard_t *s, const ro_env_vtable_t *vt, const ro_env_arg_t *args,
                       size_t nargs, uint32_t first, uint32_t n, uint64_t seed, char *err,
                       size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->vt = vt;
    s->first = first;
    s->n = n;
    s->envs = calloc(n, sizeof *s->envs);
    s->ep_len = calloc(n, sizeof *s->ep_len);
    s->ep_return = calloc(n, sizeof *s->ep_return);
    s->ep_num = calloc(n, sizeof *s->ep_num);
    s->act_rng = calloc(n, sizeof *s->act_rng);
    if (!s->envs || !s->ep_len || !s->ep_return || !s->ep_num || !s->act_rng)
        goto nomem;

    ro_space_t os, as;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t idx = (uint64_t)first + j;
        int rc = vt->create(&s->envs[j], args, nargs, ro__seed_mix(seed, idx, RO_STREAM_ENV), err,
                            errlen);
        if (rc != 0) {
            ro__env_shard_destroy(s);
            return rc;
        }
        ro__rng_init(&s->act_rng[j], ro__seed_mix(seed, idx, RO_STREAM_ACTION));
    }
    vt->spaces(s->envs[0], &os, &as);
    s->obs_dim = (uint32_t)ro_space_size(&os);
    s->discrete = as.kind == RO_SPACE_DISCRETE;
    s->act_dim = (uint32_t)ro_space_size(&as);

    size_t od = s->obs_dim;
    s->obs = calloc(n * od, sizeof(float));
    s->final_obs = calloc(n * od, sizeof(float));
    s->reward = calloc(n, sizeof(float));
    s->terminated = calloc(n, 1);
    s->truncated = calloc(n, 1);
    s->episode_start = calloc(n, 1);
    s->has_final = calloc(n, 1);
    s->act_i = calloc(n, sizeof(int32_t));
    s->act_f = calloc((size_t)n * s->act_dim, sizeof(float));
    if (!s->obs || !s->final_obs || !s->reward || !s->terminated || !s->truncated ||
        !s->episode_start || !s->has_final || !s->act_i || !s->act_f)
        goto nomem;
    s->ready_msg.type = RO_MSG_OBS_READY;
    s->act_msg.type = RO_MSG_START;
    atomic_init(&s->steps, 0);
    return 0;
nomem:
    snprintf(err, errlen, "out of memory creating envs %u..%u", first, first + n - 1);
    ro__env_shard_destroy(s);
    return RO_ENOMEM;
}

void ro__env_shard_wire(ro_env_shard_t *s, const ro_env_shard_wiring_t *w)
{
    s->learner = w->learner;
    s->ring = w->ring;
    s->stopping = w->stopping;
    s->max_steps = w->max_steps;
    s->quota = w->quota;
    s->check_finite = w->check_finite;
    /* A few messages per run: a shard never has more than one queued. */
    ro__actor_init_worker(&s->actor, "env", env_actor_behaviour, w->runq, 4);
}

void ro__env_shard_destroy(ro_env_shard_t *s)
{
    if (s->envs)
        for (uint32_t j = 0; j < s->n; j++)
            if (s->envs[j])
                s->vt->destroy(s->envs[j]);
    free(s->envs);
    free(s->ep_len);
    free(s->ep_return);
    free(s->ep_num);
    free(s->act_rng);
    free(s->obs);
    free(s->final_obs);
    free(s->reward);
    free(s->terminated);
    free(s->truncated);
    free(s->episode_start);
    free(s->has_final);
    free(s->act_i);
    free(s->act_f);
    memset(s, 0, sizeof *s);
}

void ro__env_shard_start(ro_env_shard_t *s)
{
    s->act_msg.type = RO_MSG_START;
    ro__actor_send(&s->actor, &s->act_msg);
}
