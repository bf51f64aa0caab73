/*
 * What a node reports: the logger's samples while it runs, where its
 * buffers are, and the summary at the end.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_kind.h"
#include "envs/mujoco/mj_registry.h"
#include "node/node.h"
#include "node/node_internal.h"
#include "runtime/numa_mem.h"

void ro__node_sample(void *ctx, ro_logger_sample_t *out)
{
    ro_node_t *n = ctx;
    memset(out, 0, sizeof *out);
    /* Relaxed reads of statistics written by workers. */
    for (uint32_t i = 0; i < n->nshards; i++) {
        const ro_env_shard_t *sh = &n->shards[i];
        out->steps += atomic_load_explicit(&sh->steps, memory_order_relaxed);
        out->episodes += atomic_load_explicit(&sh->episodes_pub, memory_order_relaxed);
        out->return_sum += atomic_load_explicit(&sh->return_pub, memory_order_relaxed);
    }
    for (uint32_t i = 0; n->lanes && i < n->nlanes; i++) {
        out->batches += atomic_load_explicit(&n->lanes[i].batches, memory_order_relaxed);
        out->rows += atomic_load_explicit(&n->lanes[i].rows, memory_order_relaxed);
    }
    out->remote = n->cfg.learner == RO_LEARNER_REMOTE;
    out->stream = n->ports != NULL;
    if (out->remote || out->stream) {
        /* The logger samples on the loop thread, the hub's thread. */
        ro__hub_stats(n->hub, &out->hub);
        if (out->remote) { /* the learners' forward passes, not the lanes' */
            out->batches = out->hub.batches_sent;
            out->rows = out->hub.rows_sent;
        }
    }
    for (uint32_t i = 0; out->stream && i < n->nshards; i++) /* relaxed: statistics */
        out->stream_waits += atomic_load_explicit(&n->ports[i].waits, memory_order_relaxed);
    if (n->histos) {
        out->histos = true;
        ro__histo_init(&out->ret, ro__histo_return_edges, ro__histo_return_nedges);
        ro__histo_init(&out->len, ro__histo_size_edges, ro__histo_size_nedges);
        for (uint32_t i = 0; i < n->nshards; i++) {
            ro__histo_pub_read(&out->ret, &n->histos[2 * i]);
            ro__histo_pub_read(&out->len, &n->histos[2 * i + 1]);
        }
    }
    if (n->policy) /* switched on this thread (policy_swap.c) */
        out->policy_version = ro__policy_version(n->policy);
    out->nmetrics = n->layout.nmetrics;
    out->metric_name = n->layout.metric;
    for (uint32_t i = 0; i < n->nshards; i++) /* relaxed: statistics */
        for (uint32_t m = 0; m < out->nmetrics; m++) {
            const ro_env_shard_t *sh = &n->shards[i];
            out->metric_sum[m] +=
                atomic_load_explicit(&sh->metric_sum_pub[m], memory_order_relaxed);
            out->metric_count[m] +=
                atomic_load_explicit(&sh->metric_count_pub[m], memory_order_relaxed);
        }
    if (n->recorder) {
        out->recording = true;
        ro__recorder_pressure(n->recorder, &out->record_waits, &out->record_dropped);
    }
}

/* Reads back where the shards' and lanes' buffers are: each block must be
 * bound to its node and have every page there. */
void ro__node_check_placement(ro_node_t *n)
{
    n->mem_blocks = n->mem_misplaced = 0;
    for (uint32_t i = 0; i < n->nshards; i++) {
        const ro_env_shard_t *sh = &n->shards[i];
        if (!sh->mem_bytes)
            continue;
        n->mem_blocks++;
        n->mem_misplaced += ro__numa_bound_node(sh->mem) != sh->mem_node ||
                            ro__numa_misplaced(sh->mem, sh->mem_bytes, sh->mem_node) != 0;
    }
    for (uint32_t l = 0; n->lanes && l < n->nlanes; l++) {
        const ro_learner_t *ln = &n->lanes[l];
        if (ln->mem_node < 0)
            continue;
        const float *in = ro__policy_ws_input(ln->ws);
        size_t in_bytes = (size_t)ln->max_rows * ln->obs_dim * sizeof(float);
        n->mem_blocks += 2;
        n->mem_misplaced += !ln->mem || ro__numa_bound_node(ln->mem) != ln->mem_node ||
                            ro__numa_misplaced(ln->mem, ln->mem_bytes, ln->mem_node) != 0;
        n->mem_misplaced += ro__numa_bound_node(in) != ln->mem_node ||
                            ro__numa_misplaced(in, in_bytes, ln->mem_node) != 0;
    }
}

/* stream_waits: --learner stream: how often and how long the shards
 * waited for a free segment. */
static void stream_waits(const ro_node_t *n, ro_summary_t *s)
{
    uint64_t wait_ns = 0;
    for (uint32_t i = 0; i < n->nshards; i++) {
        /* Relaxed: statistics; the workers are joined. */
        wait_ns += atomic_load_explicit(&n->ports[i].wait_ns, memory_order_relaxed);
        s->stream_waits += atomic_load_explicit(&n->ports[i].waits, memory_order_relaxed);
    }
    s->stream_wait_s = (double)wait_ns * 1e-9;
}

/* env_metrics: each per-episode metric's mean over the shards (read after
 * the workers stopped: their writes happen-before the join). */
static void env_metrics(const ro_node_t *n, ro_summary_t *s)
{
    s->agents = n->layout.agents ? n->layout.agents : 1;
    s->nmetrics = n->layout.nmetrics;
    for (uint32_t m = 0; m < s->nmetrics; m++) {
        double sum = 0.0;
        uint64_t cnt = 0;
        for (uint32_t i = 0; i < n->nshards; i++) {
            if (!n->shards[i].metric_sum)
                continue;
            sum += n->shards[i].metric_sum[m];
            cnt += n->shards[i].metric_count[m];
        }
        snprintf(s->metric_name[m], sizeof s->metric_name[m], "%s", n->layout.metric[m]);
        s->metric_mean[m] = cnt ? sum / (double)cnt : NAN;
        s->metric_episodes[m] = cnt;
    }
}

void ro_node_summary(const ro_node_t *n, ro_summary_t *s)
{
    memset(s, 0, sizeof *s);
    s->seed = n->cfg.seed;
    s->seed_drawn = n->cfg.seed_drawn;
    s->node_index = n->cfg.node_index;
    double return_sum = 0;
    for (uint32_t i = 0; i < n->nshards; i++) {
        const ro_env_shard_t *sh = &n->shards[i];
        s->steps += sh->xchg.steps * sh->xchg.n;
        s->episodes += sh->episodes;
        return_sum += sh->return_sum;
        s->env_failures += sh->env_failures;
    }
    for (uint32_t i = 0; n->lanes && i < n->nlanes; i++) {
        s->batches += atomic_load_explicit(&n->lanes[i].batches, memory_order_relaxed);
        s->mean_batch += (double)atomic_load_explicit(&n->lanes[i].rows, memory_order_relaxed);
    }
    s->mean_batch = s->batches ? s->mean_batch / (double)s->batches : 0.0;
    s->mujoco_warnings = ro__mj_warning_count();
    s->mujoco_version = ro__mj_version();
    ro__env_kind_last_error(&n->kind, s->env_error, sizeof s->env_error);
    s->mean_return = s->episodes ? return_sum / (double)s->episodes : 0.0;
    s->seconds = n->t_end_ns > n->t_start_ns ? (double)(n->t_end_ns - n->t_start_ns) * 1e-9 : 0;
    s->sps = s->seconds > 0 ? (double)s->steps / s->seconds : 0;
    for (uint32_t l = 0; n->rings && l < n->nlanes; l++)
        s->dropped_metrics += ro__metrics_ring_dropped(&n->rings[l]);
    s->threads = n->threads_seen;
    s->threads_expected = 1 + n->nworkers + (n->recorder != NULL); /* + the recorder's I/O thread */
    if (n->recorder) {
        s->recording = true;
        ro__recorder_stats(n->recorder, &s->record);
    }
    s->workers = n->nworkers;
    s->workers_chosen = n->cfg.workers_given ? "flag" : n->env_step_ns > 0 ? "measured" : "default";
    s->env_step_ns = n->env_step_ns;
    s->spin_us = n->cfg.spin_us;
    s->lanes = (int)n->nlanes;
    s->numa_nodes = n->ngroups;
    s->steals = ro__sched_steals(n->sched);
    s->cpus = n->topo.ncpus;
    s->pin_errors = ro__sched_pin_errors(n->sched);
    s->num_envs = n->cfg.num_envs;
    s->shard = n->shard_size;
    s->batch = n->batch;
    snprintf(s->env, sizeof s->env, "%s", ro__env_kind_name(&n->kind));
    env_metrics(n, s);
    if (n->hub) /* learners, trainers or stream learners attach: count them */
        ro__hub_stats(n->hub, &s->hub);
    if (n->cfg.learner == RO_LEARNER_REMOTE) {
        snprintf(s->policy, sizeof s->policy, "remote");
        s->batches = s->hub.batches_sent;
        s->mean_batch =
            s->hub.batches_sent ? (double)s->hub.rows_sent / (double)s->hub.batches_sent : 0.0;
    } else {
        ro__policy_describe(n->policy, s->policy, sizeof s->policy);
        s->policy_pushes = n->policy_pushes;
        s->policy_version = ro__policy_version(n->policy);
    }
    if (s->hub.stream)
        stream_waits(n, s);
    s->numa_node = n->cfg.numa_node;
    s->topology_declared = n->topo.fake;
    s->os_numa_nodes = ro__topology_os_nodes();
    snprintf(s->allowed_cpus, sizeof s->allowed_cpus, "%s", n->allowed_cpus);
    s->affinity_mismatches = n->affinity_mismatches;
    s->mem_blocks = n->mem_blocks;
    s->mem_misplaced = n->mem_misplaced;
    for (int w = 0; w < n->nworkers && w < RO_SUMMARY_MAX_WORKERS; w++) {
        s->worker_cpu[w] = n->plan[w].cpu;
        s->worker_node[w] = n->group_nodes[n->plan[w].group];
        s->worker_tid[w] = ro__sched_worker_tid(n->sched, w);
    }
}

void ro_node_listen_address(const ro_node_t *n, char *buf, size_t len, char *local,
                            size_t local_len)
{
    snprintf(buf, len, "%s", "");
    snprintf(local, local_len, "%s", "");
    if (!n->hub)
        return;
    ro__hub_address(n->hub, buf, len);
    ro__hub_upgrade_address(n->hub, local, local_len);
}
