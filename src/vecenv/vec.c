/* vec.c: the vector engine's life: envs, buffers, threads, resets and
 * steps (vec.h); the per-env work is in vec_step.c. */
#include "vecenv/vec.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/env_ops.h"
#include "envs/env_state.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "vecenv/vec_async.h"
#include "vecenv/vec_step.h"

/* Steps of the probe instance that measure an env step's cost. */
#define PROBE_STEPS 256
/* Helpers pay for themselves when the work they take off the caller is
 * worth more than this (a wake and a wait, with margin), in ns. */
#define HANDOFF_NS 20000.0
/* The most envs per thread whose steps go in parts (see ro__vec_new). */
#define PARTS_ENVS_PER_THREAD 8u

static void *zalloc(size_t n)
{
    /* Cache-line aligned, so rows of different parts never share a line
     * at a buffer's start. */
    size_t sz = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, sz ? sz : 64);
    if (p)
        memset(p, 0, sz ? sz : 64);
    return p;
}

static int copy_args(ro_vec_t *v, const ro_env_arg_t *args, size_t n)
{
    v->args = calloc(n ? n : 1, sizeof *v->args);
    if (!v->args)
        return RO_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        v->args[i].key = strdup(args[i].key);
        v->args[i].value = strdup(args[i].value);
        v->nargs = i + 1;
        if (!v->args[i].key || !v->args[i].value)
            return RO_ENOMEM;
    }
    return 0;
}

/* probe_cost measures one env step of the kind on an instance of its own
 * (the lows of box actions, the first value of discrete ones), in ns. */
static double probe_cost(ro_vec_t *v, char *err, size_t errlen)
{
    void *env;
    if (v->kind.py) /* its own process: a step costs a hand-off anyway */
        return 1e9;
    if (ro__env_create(&v->kind, &env, v->args, v->nargs, ro__seed_mix(0, 0, RO_STREAM_ENV), 0, err,
                       errlen))
        return -1.0;
    const ro_space_layout_t *L = &v->lay;
    size_t bytes = 0;
    for (uint32_t k = 0; k < L->ntensors; k++)
        bytes += L->t[k].row_bytes;
    uint8_t *buf = zalloc(bytes + L->mask_width + (L->ndisc + L->nbox + 1) * 4);
    if (!buf) {
        ro__env_destroy(&v->kind, env);
        return -1.0;
    }
    void *t[RO_ENV_MAX_TENSORS];
    size_t off = 0;
    for (uint32_t k = 0; k < L->ntensors; k++, off += L->t[k - 1].row_bytes)
        t[k] = buf + off;
    uint8_t *mask = L->mask_width ? buf + bytes : NULL;
    int32_t *disc = (int32_t *)(buf + ((bytes + L->mask_width + 3) & ~(size_t)3));
    float *box = (float *)(disc + L->ndisc);
    for (uint32_t i = 0; i < L->nbox; i++)
        box[i] = isfinite(L->box_low[i]) ? L->box_low[i] : 0.0f;
    ro__env_reset(&v->kind, env, t, mask);
    ro_step_t st;
    uint32_t len = 0;
    uint64_t t0 = ro__now_ns();
    for (int i = 0; i < PROBE_STEPS; i++) {
        int rc = ro__env_step(&v->kind, env, L->ndisc ? disc : NULL, L->nbox ? box : NULL, t, mask,
                              &st, 1);
        if (rc || st.terminated || st.truncated || (v->max_steps && ++len >= v->max_steps)) {
            ro__env_reset(&v->kind, env, t, mask);
            len = 0;
        }
    }
    double ns = (double)(ro__now_ns() - t0) / PROBE_STEPS;
    free(buf);
    ro__env_destroy(&v->kind, env);
    return ns;
}

static uint32_t allowed_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? (uint32_t)n : 1;
}

/* choose_threads: the caller alone unless a step of every env is worth
 * more than a hand-off to helpers over every allowed CPU. */
static uint32_t choose_threads(const ro_vec_t *v, int asked)
{
    if (asked > 0)
        return (uint32_t)asked < v->n ? (uint32_t)asked : v->n;
    uint32_t cpus = allowed_cpus();
    if (cpus > v->n)
        cpus = v->n;
    if (cpus < 2)
        return 1;
    double saved = v->step_cost_ns * v->n * (1.0 - 1.0 / cpus);
    return saved > HANDOFF_NS ? cpus : 1;
}

static int alloc_buffers(ro_vec_t *v)
{
    const ro_space_layout_t *L = &v->lay;
    const size_t n = v->n;
    for (uint32_t k = 0; k < L->ntensors; k++) {
        v->obs[k] = zalloc(n * L->t[k].row_bytes);
        v->final_obs[k] = zalloc(n * L->t[k].row_bytes);
        if (!v->obs[k] || !v->final_obs[k])
            return RO_ENOMEM;
    }
    if (L->mask_width && !(v->mask = zalloc(n * L->mask_width)))
        return RO_ENOMEM;
    v->reward = zalloc(n * sizeof *v->reward);
    v->terminated = zalloc(n);
    v->truncated = zalloc(n);
    v->failed = zalloc(n);
    v->ended = zalloc(n);
    v->act_i = zalloc(n * (L->ndisc ? L->ndisc : 1) * sizeof *v->act_i);
    v->act_f = zalloc(n * (L->nbox ? L->nbox : 1) * sizeof *v->act_f);
    v->envs = zalloc(n * sizeof *v->envs);
    v->ep_len = zalloc(n * sizeof *v->ep_len);
    v->ready = zalloc(n * sizeof *v->ready);
    v->pending = zalloc(n * sizeof *v->pending);
    v->job_ids = zalloc(n * sizeof *v->job_ids);
    v->where = zalloc(n);
    if (!v->ready || !v->pending || !v->job_ids || !v->where)
        return RO_ENOMEM;
    if (v->group) {
        v->py_ids = zalloc(n * sizeof *v->py_ids);
        v->py_envs = zalloc(n * sizeof *v->py_envs);
        v->py_act_i = zalloc(n * (L->ndisc ? L->ndisc : 1) * sizeof *v->py_act_i);
        v->py_act_f = zalloc(n * (L->nbox ? L->nbox : 1) * sizeof *v->py_act_f);
        v->py_skip = zalloc(n);
        if (!v->py_ids || !v->py_envs || !v->py_act_i || !v->py_act_f || !v->py_skip)
            return RO_ENOMEM;
    }
    if (!v->reward || !v->terminated || !v->truncated || !v->failed || !v->ended || !v->act_i ||
        !v->act_f || !v->envs || !v->ep_len)
        return RO_ENOMEM;
    return 0;
}

int ro__vec_new(ro_vec_t **out, const ro_vec_config_t *cfg, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->num_envs < 1 || cfg->num_envs > RO_VEC_MAX_ENVS)
        return ro__errorf(err, errlen, RO_EINVAL, "num_envs %u: expected 1..%u", cfg->num_envs,
                          RO_VEC_MAX_ENVS);
    if (cfg->autoreset > RO_AUTORESET_DISABLED)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "autoreset mode %d is not one of NEXT_STEP, "
                          "SAME_STEP, DISABLED",
                          (int)cfg->autoreset);
    if (cfg->nargs > RO_MAX_ENV_ARGS)
        return ro__errorf(err, errlen, RO_EINVAL, "%zu env args: at most %d", cfg->nargs,
                          RO_MAX_ENV_ARGS);
    ro_vec_t *v = calloc(1, sizeof *v);
    if (!v)
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory");
    v->n = cfg->num_envs;
    v->mode = cfg->autoreset;
    v->check_finite = cfg->check_finite;
    int rc = ro__env_open(&v->kind, cfg->env, err, errlen);
    if (rc) {
        free(v);
        return rc;
    }
    ro_env_arg_t checked[RO_MAX_ENV_ARGS];
    size_t nchecked = 0;
    rc = ro__env_kind_check_args(&v->kind, cfg->args, cfg->nargs, checked, &nchecked, &v->max_steps,
                                 err, errlen);
    if (rc)
        goto fail;
    if ((rc = copy_args(v, checked, nchecked))) {
        ro__errorf(err, errlen, rc, "out of memory");
        goto fail;
    }
    /* A Python env: one worker process per thread the engine would use. */
    uint32_t procs = cfg->threads > 0 ? (uint32_t)cfg->threads : allowed_cpus();
    if ((rc = ro__env_kind_pool(&v->kind, v->args, v->nargs, v->n, procs, 0, err, errlen)))
        goto fail;
    v->group = ro__env_kind_group(&v->kind);
    rc = ro__env_kind_layout(&v->kind, v->args, v->nargs, ro__seed_mix(cfg->seed, 0, RO_STREAM_ENV),
                             &v->lay, err, errlen);
    if (rc)
        goto fail;
    if (v->lay.agents != 1) {
        rc = ro__errorf(err, errlen, RO_ENOTSUP,
                        "env '%s' has %u agents: a Gymnasium vector env takes single-agent envs "
                        "(serve it from a rollout-node to rollout_client.Client instead)",
                        ro__env_kind_name(&v->kind), v->lay.agents);
        goto fail;
    }
    if ((rc = alloc_buffers(v))) {
        ro__errorf(err, errlen, rc, "out of memory for %u envs", v->n);
        goto fail;
    }
    for (uint32_t i = 0; i < v->n; i++)
        if ((rc = ro__env_create(&v->kind, &v->envs[i], v->args, v->nargs,
                                 ro__seed_mix(cfg->seed, i, RO_STREAM_ENV), i, err, errlen)))
            goto fail;
    v->step_cost_ns = probe_cost(v, err, errlen);
    if (v->step_cost_ns < 0) {
        rc = RO_EINVAL;
        goto fail;
    }
    v->threads = choose_threads(v, cfg->threads);
    v->batch = cfg->batch_size ? cfg->batch_size : v->n;
    if (v->batch > v->n) {
        rc = ro__errorf(err, errlen, RO_EINVAL, "batch_size %u: at most num_envs (%u)", v->batch,
                        v->n);
        goto fail;
    }
    if ((rc = ro__vec_pool_start(&v->pool, v->threads - 1, err, errlen)))
        goto fail;
    /* An env whose step runs in parts (MuJoCo's), with few envs per
     * thread: a step's job goes part by part (vec_pool.h), so it does not
     * end with one thread running a whole env step while the others wait.
     * With many envs per thread that tail is a small share of the step, and
     * parts cost more than it saves (two envs' frames alternate in a
     * thread's caches: 1-4% slower at 512 envs a thread, measured). */
    v->in_parts = v->kind.step_part && v->threads > 1 && v->n <= PARTS_ENVS_PER_THREAD * v->threads;
    if (v->in_parts && (rc = ro__vec_pool_reserve_parts(&v->pool, v->n, err, errlen)))
        goto fail;
    /* Costly envs (MuJoCo's) one to a chunk: a step ends with one env,
     * not a chunk of them, in flight on the last thread. */
    ro__vec_pool_set_cost(&v->pool, v->step_cost_ns);
    *out = v;
    return 0;
fail:
    ro__vec_free(v);
    return rc < 0 ? rc : RO_EINVAL;
}

int ro__vec_reset(ro_vec_t *v, const uint64_t *seeds, const uint8_t *has_seed, const uint8_t *mask,
                  char *err, size_t errlen)
{
    ro__vec_async_drop(v); /* a job still stepping finishes first */
    v->seeds = seeds;
    v->reseed = has_seed;
    v->reset_mask = mask;
    ro__vec_pool_run(&v->pool, ro__vec_reset_part, v, v->n);
    v->seeds = NULL;
    v->reseed = v->reset_mask = NULL;
    for (uint32_t j = 0; j < v->n; j++) {
        if (v->failed[j] != 2)
            continue;
        void *probe = NULL; /* again, for create()'s message */
        int rc = ro__env_create(&v->kind, &probe, v->args, v->nargs,
                                ro__seed_mix(seeds[j], j, RO_STREAM_ENV), j, err, errlen);
        ro__env_destroy(&v->kind, probe);
        char why[256];
        snprintf(why, sizeof why, "%s", rc ? err : "it failed once and not again");
        return ro__errorf(err, errlen, rc ? rc : RO_EINVAL, "reset: env %u with seed %llu: %s", j,
                          (unsigned long long)seeds[j], why);
    }
    for (uint32_t j = 0; j < v->n; j++)
        v->failures += v->failed[j];
    ro__vec_async_start(v);
    return 0;
}

int ro__vec_step(ro_vec_t *v, char *err, size_t errlen)
{
    if (v->njob || v->npending)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "step() while envs step asynchronously (send() without recv()): use "
                          "one or the other after a reset");
    if (v->mode == RO_AUTORESET_DISABLED) {
        const uint8_t *e = memchr(v->ended, 1, v->n);
        if (e)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "env %zu ended and was not reset (autoreset DISABLED): reset it "
                              "with reset(options={'reset_mask': mask})",
                              (size_t)(e - v->ended));
    }
    if (v->group) /* a Python env: every process's command posted, then each waited for */
        ro__vec_step_part(v, 0, v->n);
    else if (v->in_parts)
        ro__vec_pool_run_parts(&v->pool, ro__vec_step_env_part, v, v->n);
    else
        ro__vec_pool_run(&v->pool, ro__vec_step_part, v, v->n);
    /* Failures are rare: one pass over n bytes finds them. */
    if (memchr(v->failed, 1, v->n))
        for (uint32_t j = 0; j < v->n; j++)
            v->failures += v->failed[j];
    ro__vec_async_start(v); /* every env's results are in: a recv may follow */
    return 0;
}

static int state_ready(ro_vec_t *v, uint32_t j, char *err, size_t errlen)
{
    if (j >= v->n)
        return ro__errorf(err, errlen, RO_EINVAL, "env %u: there are %u envs", j, v->n);
    if (v->njob || v->npending)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env states while envs step asynchronously: recv() them first");
    return 0;
}

static uint64_t params_of(const ro_vec_t *v)
{
    return ro__env_params_hash(ro__env_kind_name(&v->kind), v->args, v->nargs, v->max_steps);
}

int ro__vec_state_bytes(ro_vec_t *v, uint32_t j, size_t *out, char *err, size_t errlen)
{
    int rc = state_ready(v, j, err, errlen);
    return rc ? rc : ro__env_state_bytes(&v->kind, v->envs[j], out, err, errlen);
}

int ro__vec_get_state(ro_vec_t *v, uint32_t j, void *buf, size_t cap, size_t *len, char *err,
                      size_t errlen)
{
    int rc = state_ready(v, j, err, errlen);
    return rc ? rc
              : ro__env_state_save(&v->kind, v->envs[j], params_of(v), v->ep_len[j], buf, cap, len,
                                   err, errlen);
}

int ro__vec_set_state(ro_vec_t *v, uint32_t j, const void *blob, size_t len, char *err,
                      size_t errlen)
{
    int rc = state_ready(v, j, err, errlen);
    if (rc)
        return rc;
    uint64_t elapsed = 0;
    rc = ro__env_state_load(&v->kind, v->envs[j], params_of(v), blob, len, &elapsed, err, errlen);
    if (rc == RO_EBADMSG || rc == RO_ENOTSUP)
        return rc; /* nothing was loaded */
    if (rc) {      /* the env refused the bytes: start it over, as a failed step */
        void *t[RO_ENV_MAX_TENSORS];
        for (uint32_t k = 0; k < v->lay.ntensors; k++)
            t[k] = v->obs[k] + (size_t)j * v->lay.t[k].row_bytes;
        ro__env_reset(&v->kind, v->envs[j], t,
                      v->mask ? v->mask + (size_t)j * v->lay.mask_width : NULL);
        v->ep_len[j] = 0;
        return rc;
    }
    v->ep_len[j] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed;
    v->ended[j] = 0;
    v->terminated[j] = v->truncated[j] = 0;
    return 0;
}

void ro__vec_free(ro_vec_t *v)
{
    if (!v)
        return;
    ro__vec_pool_stop(&v->pool);
    if (v->envs)
        for (uint32_t i = 0; i < v->n; i++)
            ro__env_destroy(&v->kind, v->envs[i]);
    for (uint32_t k = 0; k < RO_ENV_MAX_TENSORS; k++) {
        free(v->obs[k]);
        free(v->final_obs[k]);
    }
    free(v->mask);
    free(v->reward);
    free(v->terminated);
    free(v->truncated);
    free(v->failed);
    free(v->ended);
    free(v->act_i);
    free(v->act_f);
    free(v->envs);
    free(v->ep_len);
    free(v->ready);
    free(v->pending);
    free(v->job_ids);
    free(v->py_ids);
    free(v->py_envs);
    free(v->py_act_i);
    free(v->py_act_f);
    free(v->py_skip);
    free(v->where);
    for (size_t i = 0; i < v->nargs; i++) {
        free((char *)v->args[i].key);
        free((char *)v->args[i].value);
    }
    free(v->args);
    ro__layout_free(&v->lay);
    ro__env_close(&v->kind);
    free(v);
}
