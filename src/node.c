#include "node.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "alloc.h"
#include "clock.h"
#include "env_actor.h"
#include "env_registry.h"
#include "error.h"
#include "flags.h"
#include "learner_actor.h"
#include "logger_actor.h"
#include "messages.h"
#include "numa_mem.h"
#include "metrics_ring.h"
#include "policy.h"
#include "policy_params.h"
#include "remote_learner.h"
#include "recorder_actor.h"
#include "scheduler.h"
#include "thread_guard.h"
#include "topology.h"
#include "wire.h"
#include "ro_build_config.h"

#if RO_HAVE_NUMA
#include <numa.h>
#endif

/* Metric records buffered between drains, split over the lanes' rings (at
 * least RING_MIN each): 12 MiB, drained every 50 ms, absorb 5 M records/s. */
#define RING_TOTAL (1u << 18)
#define RING_MIN (1u << 12)

struct ro_node {
    /* Main/loop thread only, unless noted. */
    ro_config_t cfg;
    ro_topology_t topo;
    ro_worker_plan_t *plan;
    int nworkers;
    int ngroups; /* NUMA nodes with workers */
    int group_nodes[RO_TOPO_MAX_NODES];
    ro_sched_t *sched;

    ro_env_kind_t kind;
    ro_env_arg_t env_args[RO_MAX_ENV_ARGS];
    size_t nenv_args;
    uint32_t max_steps;
    uint32_t shard_size;
    uint32_t batch;

    ro_policy_t *policy;
    ro_env_shard_t *shards; /* nshards */
    uint32_t nshards;
    ro_learner_t *lanes; /* nlanes local learner lanes (none with --learner remote) */
    uint32_t nlanes;     /* env groups: one per worker */
    ro_remote_t *remote; /* --learner remote: the hub serving TCP learners */
    char token[256];
    ro_space_t obs_space, act_space; /* for the hub's welcome and pushed policies */
    /* A pushed policy being switched to (loop thread only). */
    ro_policy_t *swap_next;
    uint32_t swaps_pending;
    bool swap_failed;
    ro_policy_t *retired[8]; /* policies a lane may still use after a failed switch */
    uint32_t nretired;
    uint64_t policy_pushes;

    ro_metrics_ring_t *rings; /* one per lane: its shards' episode records */
    ro_logger_t logger;
    ro_recorder_t *recorder; /* --record, or NULL */
    int record_rc;

    uv_loop_t loop;
    uv_async_t control_async;
    ro_actor_t control; /* loop actor: receives RO_MSG_LANE_DONE */
    uv_signal_t sigint, sigterm;
    uv_timer_t deadline;
    uint32_t lanes_done;
    uint32_t learners_expected; /* LANE_DONE messages that end the run */

    /* Set by the loop (signal, deadline); read by env actors on workers. */
    atomic_bool stopping;
    int signals; /* SIGINT/SIGTERM received; loop thread */

    uint64_t t_start_ns, t_end_ns;
    char allowed_cpus[256];  /* the allowed set after any --numa-node binding */
    int affinity_mismatches; /* read back from the OS while the workers ran */
    int mem_blocks, mem_misplaced;
    int threads_seen;
    int logger_rc;
    bool ran;
    bool loop_inited;
};

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void sample_counters(void *ctx, ro_logger_sample_t *out)
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
    if (n->remote) {
        /* The logger samples on the loop thread, the hub's thread. */
        ro_remote_stats_t rs;
        ro__remote_stats(n->remote, &rs);
        out->batches = rs.batches_sent;
        out->rows = rs.rows_sent;
        out->remote = true;
        out->learners = rs.learners;
        out->envs_in_flight = rs.envs_in_flight;
        out->envs_unsent = rs.envs_unsent;
        out->oldest_wait_ns = rs.oldest_wait_ns;
        out->queued_bytes = rs.queued_bytes;
        out->batches_resent = rs.batches_resent;
    }
    if (n->recorder) {
        out->recording = true;
        ro__recorder_pressure(n->recorder, &out->record_waits, &out->record_dropped);
    }
}

static void request_stop(ro_node_t *n)
{
    /* Relaxed: env actors only need to see it eventually; it guards no data. */
    atomic_store_explicit(&n->stopping, true, memory_order_relaxed);
    if (n->remote)
        ro__remote_stop(n->remote); /* envs waiting for learners finish now */
}

/* A second SIGINT/SIGTERM means the operator will not wait for the clean
 * stop, e.g. a recording draining to a stalled disk: leave at once, as the
 * signal would have. Runs as the signal handler itself (write and _exit are
 * async-signal-safe), so it works while the loop thread waits, for
 * instance in ro__recorder_finish for a write that does not return. */
static void on_second_signal(int signum)
{
    static const char msg[] = "rollout-node: second signal: exiting without finishing the "
                              "steps in flight or flushing files\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(128 + signum);
}

/* The first SIGINT/SIGTERM stops the run cleanly (every step in flight
 * finished and recorded, metrics flushed). */
static void on_signal(uv_signal_t *h, int signum)
{
    ro_node_t *n = h->data;
    if (n->signals++ > 0) /* both reached the loop before the handler below was in place */
        on_second_signal(signum);
    /* From now on the kernel calls on_second_signal directly, in place of
     * libuv's handler (which only wakes the loop); closing the uv_signal
     * handles at shutdown restores the default action. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_second_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        fprintf(stderr,
                "rollout-node: warning: a second signal may not end the clean stop: "
                "sigaction: %s\n",
                strerror(errno));
    if (!n->cfg.quiet)
        fprintf(stderr,
                "rollout-node: %s: finishing the steps in flight and flushing files (a second "
                "signal exits at once)\n",
                signum == SIGINT ? "SIGINT" : "SIGTERM");
    request_stop(n);
}

static void on_deadline(uv_timer_t *t)
{
    request_stop(t->data);
}

/* Every lane is done: every env finished its last step and nothing is in
 * flight. Stop the workers, flush the logger, close the loop's handles. */
static void shutdown_node(ro_node_t *n)
{
    n->t_end_ns = ro__now_ns();
    int t = ro__thread_count();
    if (t > n->threads_seen)
        n->threads_seen = t;
    /* Pins read back again while the workers still exist. */
    int bad = ro__sched_check_affinity(n->sched);
    if (bad > n->affinity_mismatches)
        n->affinity_mismatches = bad;
    ro__sched_stop(n->sched);
    if (n->remote) {
        ro__remote_stop(n->remote); /* goodbye to every learner */
        ro__remote_close(n->remote);
    }
    n->logger_rc = ro__logger_finish(&n->logger);
    if (n->logger_rc)
        fprintf(stderr, "rollout-node: could not write the metrics file %s (disk full or I/O error)\n",
                n->cfg.metrics);
    if (n->recorder) {
        /* Every shard has handed over its last step: write it all. */
        char err[512] = "";
        n->record_rc = ro__recorder_finish(n->recorder, err, sizeof err);
        if (n->record_rc)
            fprintf(stderr, "rollout-node: %s\n", err);
    }
    uv_close((uv_handle_t *)&n->control_async, NULL);
    uv_close((uv_handle_t *)&n->sigint, NULL);
    uv_close((uv_handle_t *)&n->sigterm, NULL);
    uv_close((uv_handle_t *)&n->deadline, NULL);
}

static void control_behaviour(ro_actor_t *self, ro_msg_t *msg)
{
    ro_node_t *n = ro__container_of(self, ro_node_t, control);
    if (msg->type == RO_MSG_POLICY_DONE) {
        ro_learner_t *l = ro__container_of(msg, ro_learner_t, swap_done_msg);
        n->swap_failed |= !l->swap_ok;
        if (--n->swaps_pending > 0)
            return;
        if (n->swap_failed && n->nretired < 8) {
            /* Out of memory in some lane: it still runs the old policy. */
            fprintf(stderr, "rollout-node: a learner lane could not switch policies (out of "
                            "memory); it keeps the old one\n");
            n->retired[n->nretired++] = n->policy;
        } else {
            ro__policy_free(n->policy);
        }
        n->policy = n->swap_next;
        n->swap_next = NULL;
        n->swap_failed = false;
        n->policy_pushes++;
        return;
    }
    if (msg->type == RO_MSG_RECORD_FAILED) {
        request_stop(n); /* --record-error stop; finish reports the error */
        return;
    }
    if (msg->type == RO_MSG_LANE_DONE && ++n->lanes_done == n->learners_expected)
        shutdown_node(n);
}

/* NUMA nodes the kernel has (1 without libnuma). */
static int os_numa_nodes(void)
{
#if RO_HAVE_NUMA
    if (numa_available() >= 0)
        return numa_num_configured_nodes();
#endif
    return 1;
}

/* Topology and the worker plan; refuses more workers than CPUs. */
static int plan_workers(ro_node_t *n, char *err, size_t errlen)
{
    int rc = ro__topology_load(&n->topo, n->cfg.topology, "--topology", err, errlen);
    if (rc)
        return rc;
    /* --numa-node: this node's CPUs and memory only, from here on. */
    if (n->cfg.numa_node >= 0 &&
        ((rc = ro__topology_restrict(&n->topo, n->cfg.numa_node, err, errlen)) ||
         (rc = ro__topology_bind(&n->topo, n->cfg.numa_node, err, errlen))))
        return rc;
    n->nworkers = n->cfg.workers ? (int)n->cfg.workers : n->topo.ncpus;
    n->plan = calloc((size_t)n->nworkers, sizeof *n->plan);
    if (!n->plan)
        return RO_ENOMEM;
    rc = ro__topology_plan(&n->topo, n->nworkers, n->cfg.overcommit, n->plan, n->group_nodes,
                           &n->ngroups);
    if (rc == RO_ERANGE)
        snprintf(err, errlen,
                 "--workers %d: only %d CPUs are allowed for this process; more workers than "
                 "CPUs oversubscribe them (use --overcommit to insist)",
                 n->nworkers, n->topo.ncpus);
    return rc;
}

/* The real NUMA node whose memory lane l's worker uses, or -1 (none). */
static int lane_mem_node(const ro_node_t *n, uint32_t l)
{
    int k = ro__topology_find(&n->topo, n->group_nodes[n->plan[l].group]);
    return k >= 0 ? n->topo.nodes[k].mem_node : -1;
}

/* Reads back where the shards' and lanes' buffers are: each block must be
 * bound to its node and have every page there. */
static void check_placement(ro_node_t *n)
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

int ro_node_print_topology(const ro_config_t *cfg, FILE *f, char *err, size_t errlen)
{
    ro_node_t *n = ro__calloc_lines(1, sizeof *n);
    if (!n)
        return RO_ENOMEM;
    n->cfg = *cfg;
    int rc = plan_workers(n, err, errlen);
    if (rc == 0)
        ro__topology_print(f, &n->topo, n->plan, n->nworkers, n->group_nodes, n->ngroups);
    ro__topology_free(&n->topo);
    free(n->plan);
    free(n);
    return rc;
}

static int open_env(ro_node_t *n, char *err, size_t errlen)
{
    int rc = ro__env_open(&n->kind, n->cfg.env, err, errlen);
    if (rc)
        return rc;
    return ro__env_check_args(n->kind.vt, n->cfg.env_args, n->cfg.nenv_args, n->env_args,
                              &n->nenv_args, &n->max_steps, err, errlen);
}

/* Envs are split into one contiguous range per lane, each range into
 * shards of shard_size (the last one may be smaller). */
static int make_shards(ro_node_t *n, char *err, size_t errlen)
{
    uint32_t envs = n->cfg.num_envs;
    n->nlanes = (uint32_t)n->nworkers < envs ? (uint32_t)n->nworkers : envs;
    uint32_t per_lane_max = (envs + n->nlanes - 1) / n->nlanes;
    uint32_t k = n->cfg.shard;
    if (k == 0) {
        /* Four shards per lane keep every worker fed while a lane's forward
         * pass runs; 32 envs amortise the dispatch of one message. */
        k = per_lane_max / 4;
        k = k < 1 ? 1 : k > 32 ? 32 : k;
    }
    if (k > per_lane_max)
        k = per_lane_max;
    n->shard_size = k;

    uint32_t total = 0;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        uint32_t lane_envs = envs / n->nlanes + (l < envs % n->nlanes);
        total += (lane_envs + k - 1) / k;
    }
    n->shards = ro__calloc_lines(total, sizeof *n->shards);
    if (!n->shards)
        return RO_ENOMEM;
    uint32_t first = 0;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        uint32_t lane_end = first + envs / n->nlanes + (l < envs % n->nlanes);
        while (first < lane_end) {
            uint32_t cnt = lane_end - first < k ? lane_end - first : k;
            /* On the node of lane l's worker, which steps and reads it. */
            int rc =
                ro__env_shard_init_on(&n->shards[n->nshards], n->kind.vt, n->env_args, n->nenv_args,
                                      first, cnt, n->cfg.seed, lane_mem_node(n, l), err, errlen);
            if (rc)
                return rc;
            n->nshards++;
            first += cnt;
        }
    }
    return 0;
}

static int make_rings(ro_node_t *n)
{
    n->rings = ro__calloc_lines(n->nlanes, sizeof *n->rings);
    if (!n->rings)
        return RO_ENOMEM;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        uint32_t cap = RING_TOTAL;
        while (cap > RING_MIN && cap / 2 >= RING_TOTAL / n->nlanes)
            cap /= 2;
        int rc = ro__metrics_ring_init(&n->rings[l], cap);
        if (rc)
            return rc;
    }
    return 0;
}

static int make_policy(ro_node_t *n, char *err, size_t errlen)
{
    if (n->cfg.remote)
        return 0; /* the learners hold the policy */
    ro_space_t os, as;
    n->kind.vt->spaces(n->shards[0].envs[0], &os, &as);
    ro_policy_spec_t spec = n->cfg.policy;
    spec.seed = n->cfg.seed;
    int rc = ro__policy_new(&n->policy, &spec, &os, &as, err, errlen);
    if (rc)
        return rc;
    if (n->cfg.save_policy)
        rc = ro__policy_save(n->policy, n->cfg.save_policy, err, errlen);
    return rc;
}

/* A trainer pushed weights: validate them against the env, build the
 * policy, and hand it to every lane; the old one is freed once all have
 * switched (control_behaviour). Loop thread. */
static int on_policy_push(void *ctx, const Rollout__V1__PolicyParams *msg, char *err, size_t errlen)
{
    ro_node_t *n = ctx;
    if (n->swap_next || n->nretired == 8) {
        snprintf(err, errlen, "a policy update is still being applied; push again later");
        return RO_EINVAL;
    }
    size_t body = rollout__v1__policy_params__get_packed_size(msg);
    uint8_t *buf = malloc(body + RO_VARINT_MAX);
    if (!buf)
        return RO_ENOMEM;
    size_t k = ro__varint_put(buf, body);
    rollout__v1__policy_params__pack(msg, buf + k);
    char label[64];
    snprintf(label, sizeof label, "pushed policy v%llu", (unsigned long long)msg->version);
    ro_policy_params_t pp;
    int rc = ro__policy_params_decode(&pp, buf, k + body, label, err, errlen);
    free(buf);
    if (rc)
        return rc;
    ro_policy_t *next;
    rc = ro__policy_new_from_params(&next, &pp, n->cfg.policy.gemm, &n->obs_space, &n->act_space,
                                    label, err, errlen);
    ro__policy_params_free(&pp);
    if (rc)
        return rc;
    n->swap_next = next;
    n->swaps_pending = n->nlanes;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        n->lanes[l].swap_to = next;
        ro__actor_send(&n->lanes[l].actor, &n->lanes[l].swap_msg);
    }
    return 0;
}

/* --token-file: read the secret, and say so if other users can read it too. */
static int load_token(ro_node_t *n, char *err, size_t errlen)
{
    if (!n->cfg.token_file)
        return 0;
    int rc = ro__flag_token_file(n->cfg.token_file, n->token, sizeof n->token, err, errlen);
    char warn[512];
    if (rc == 0 && ro__flag_token_file_exposed(n->cfg.token_file, warn, sizeof warn))
        fprintf(stderr, "rollout-node: warning: %s\n", warn);
    return rc;
}

/* --listen with local lanes: trainers may push policies. */
static int make_trainer_listener(ro_node_t *n, char *err, size_t errlen)
{
    int rc = load_token(n, err, errlen);
    if (rc)
        return rc;
    ro_remote_opts_t o = {
        .listen = n->cfg.listen,
        .token = n->cfg.token_file ? n->token : NULL,
        .batch = 1,
        .max_frame = n->cfg.max_frame,
        .max_learners = n->cfg.max_learners,
        .hello_timeout_s = n->cfg.hello_timeout,
        .env_name = n->kind.vt->name,
        .seed = n->cfg.seed,
        .max_episode_steps = n->max_steps,
        .on_policy = on_policy_push,
        .ctx = n,
    };
    return ro__remote_new(&n->remote, &n->loop, NULL, 0, n->cfg.num_envs, &n->obs_space,
                          &n->act_space, &n->control, &o, err, errlen);
}

/* --learner remote: the hub takes the lanes' place; shards of env group l
 * still live on worker l's queue. */
static int make_remote(ro_node_t *n, char *err, size_t errlen)
{
    int trc = load_token(n, err, errlen);
    if (trc)
        return trc;
    n->batch = n->cfg.batch ? n->cfg.batch : (n->cfg.num_envs + 1) / 2;
    if (n->batch < n->shard_size)
        n->batch = n->shard_size;
    ro_remote_opts_t o = {
        .listen = n->cfg.listen ? n->cfg.listen : "127.0.0.1:5555",
        .token = n->cfg.token_file ? n->token : NULL,
        .batch = n->batch,
        .max_wait_us = n->cfg.max_wait_us,
        .max_frame = n->cfg.max_frame,
        .max_learners = n->cfg.max_learners,
        .learner_timeout_s = n->cfg.learner_timeout,
        .hello_timeout_s = n->cfg.hello_timeout,
        .env_name = n->kind.vt->name,
        .seed = n->cfg.seed,
        .max_episode_steps = n->max_steps,
        .learners = true,
    };
    int rc = ro__remote_new(&n->remote, &n->loop, n->shards, n->nshards, n->cfg.num_envs,
                            &n->obs_space, &n->act_space, &n->control, &o, err, errlen);
    if (rc)
        return rc;
    n->learners_expected = 1;
    return 0;
}

static int make_lanes(ro_node_t *n, char *err, size_t errlen)
{
    /* Spaces point into env 0 of shard 0, alive until the envs are destroyed. */
    n->kind.vt->spaces(n->shards[0].envs[0], &n->obs_space, &n->act_space);
    int rc = ro__sched_new(&n->sched, n->ngroups, n->group_nodes, n->plan, n->nworkers);
    if (rc)
        return rc;
    if (n->cfg.remote) {
        if ((rc = make_remote(n, err, errlen)))
            return rc;
    } else {
        n->lanes = ro__calloc_lines(n->nlanes, sizeof *n->lanes);
        if (!n->lanes)
            return RO_ENOMEM;
        n->learners_expected = n->nlanes;
    }

    uint32_t s = 0;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        /* Lane l and its shards live on worker l's queue: they talk only to
         * each other, so their data stays in one CPU's caches (and on its
         * NUMA node); idle workers of the node steal when loads differ. */
        ro_runq_t *q = ro__sched_queue(n->sched, (int)l);
        uint32_t first_shard = s, rows = 0;
        uint32_t lane_end = n->shards[s].first;
        lane_end += n->cfg.num_envs / n->nlanes + (l < n->cfg.num_envs % n->nlanes);
        while (s < n->nshards && n->shards[s].first < lane_end)
            rows += n->shards[s++].n;
        uint32_t batch = n->cfg.batch;
        if (batch == 0) {
            /* Half a lane: one half steps while the other is in its forward
             * pass, so the lane's worker never waits on itself. */
            batch = (rows + 1) / 2;
        }
        if (batch < n->shard_size)
            batch = n->shard_size;
        if (n->lanes) {
            if (l == 0)
                n->batch = batch;
            rc = ro__learner_init_on(&n->lanes[l], n->policy, q, &n->control, batch,
                                     n->cfg.max_wait_us, s - first_shard, rows, n->shard_size,
                                     n->shards[0].discrete, lane_mem_node(n, l));
            if (rc) {
                snprintf(err, errlen, "cannot allocate the learner's batch buffers");
                return rc;
            }
        }
        for (uint32_t i = first_shard; i < s; i++) {
            ro_env_shard_wiring_t w = {
                .runq = q,
                .learner = n->lanes ? &n->lanes[l].actor : ro__remote_actor(n->remote),
                .ring = &n->rings[l],
                .stopping = &n->stopping,
                .max_steps = n->max_steps,
                .quota = n->cfg.steps ? (n->cfg.steps + n->cfg.num_envs - 1) / n->cfg.num_envs : 0,
                .check_finite = n->cfg.check_finite,
                .record_episodes = n->cfg.metrics != NULL,
            };
            ro__env_shard_wire(&n->shards[i], &w);
        }
    }
    if (!n->cfg.remote && n->cfg.listen)
        return make_trainer_listener(n, err, errlen);
    return 0;
}

/* --record: the trajectory file's header, the chunk pool, and one port
 * per shard. */
static int make_recorder(ro_node_t *n, char *err, size_t errlen)
{
    if (!n->cfg.record)
        return 0;
    char pol[128];
    if (n->cfg.remote)
        snprintf(pol, sizeof pol, "remote learners");
    else
        ro__policy_describe(n->policy, pol, sizeof pol);
    char desc[192];
    snprintf(desc, sizeof desc, "%s: %s", n->cfg.policy_arg, pol);
    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < n->nshards; i++)
        max_shard = n->shards[i].n > max_shard ? n->shards[i].n : max_shard;
    const ro_env_shard_t *s0 = &n->shards[0];
    ro_recorder_opts_t o = {
        .path = n->cfg.record,
        .max_bytes = n->cfg.record_max_bytes,
        .drop = n->cfg.record_drop,
        .keep_going = n->cfg.record_keep_going,
        .on_error = &n->control,
        .vt = n->kind.vt,
        .env_spec = n->cfg.env,
        .env_args = n->env_args,
        .nenv_args = n->nenv_args,
        .max_episode_steps = n->max_steps,
        .seed = n->cfg.seed,
        .num_envs = n->cfg.num_envs,
        .policy = desc,
        .check_finite = n->cfg.check_finite,
        .obs_dim = s0->obs_dim,
        .act_dim = s0->act_dim,
        .discrete = s0->discrete,
        .nshards = n->nshards,
        .max_shard = max_shard,
    };
    int rc = ro__recorder_new(&n->recorder, &o, err, errlen);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < n->nshards; i++)
        n->shards[i].rec = ro__recorder_port(n->recorder, i, &n->shards[i]);
    return 0;
}

static int make_loop(ro_node_t *n, char *err, size_t errlen)
{
    uv_loop_init(&n->loop);
    n->loop_inited = true;
    uv_async_init(&n->loop, &n->control_async, ro__actor_async_cb);
    n->control_async.data = &n->control;
    ro__actor_init_loop(&n->control, "control", control_behaviour, &n->control_async);
    uv_signal_init(&n->loop, &n->sigint);
    uv_signal_init(&n->loop, &n->sigterm);
    n->sigint.data = n->sigterm.data = n;
    uv_timer_init(&n->loop, &n->deadline);
    n->deadline.data = n;
    ro_logger_opts_t lo = {
        .metrics_path = n->cfg.metrics,
        .interval_s = n->cfg.metrics_interval,
        .quiet = n->cfg.quiet,
        .sample = sample_counters,
        .sample_ctx = n,
    };
    return ro__logger_init(&n->logger, &n->loop, n->rings, n->nlanes, &lo, err, errlen);
}

int ro_node_new(ro_node_t **out, const ro_config_t *cfg, char *err, size_t errlen)
{
    ro_node_t *n = ro__calloc_lines(1, sizeof *n);
    if (!n)
        return RO_ENOMEM;
    n->cfg = *cfg;
    atomic_init(&n->stopping, false);
    int rc;
    if ((rc = plan_workers(n, err, errlen)) || (rc = open_env(n, err, errlen)) ||
        (rc = make_shards(n, err, errlen)) || (rc = make_rings(n)) ||
        (rc = make_policy(n, err, errlen)) || (rc = make_loop(n, err, errlen)) ||
        (rc = make_lanes(n, err, errlen)) || (rc = make_recorder(n, err, errlen))) {
        if (err[0] == '\0')
            snprintf(err, errlen, "start-up failed: %s", ro_strerror(rc));
        ro_node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

void ro_node_describe(const ro_node_t *n, char *buf, size_t len)
{
    char pol[128];
    if (n->cfg.remote) {
        char addr[80];
        ro__remote_address(n->remote, addr, sizeof addr);
        snprintf(pol, sizeof pol, "remote learners on %s", addr);
    } else {
        ro__policy_describe(n->policy, pol, sizeof pol);
    }
    char cpus[256] = "";
    size_t off = 0;
    for (int i = 0; i < n->nworkers && off + 8 < sizeof cpus; i++)
        off +=
            (size_t)snprintf(cpus + off, sizeof cpus - off, "%s%d", i ? "," : "", n->plan[i].cpu);
    snprintf(buf, len,
             "env %s x%u | policy %s | %d workers on CPUs %s, %d NUMA node(s) | %u lanes, "
             "shards of %u, batch %u, max-wait %llu us | seed %llu",
             n->kind.vt->name, n->cfg.num_envs, pol, n->nworkers, cpus, n->ngroups, n->nlanes,
             n->shard_size, n->batch, (unsigned long long)n->cfg.max_wait_us,
             (unsigned long long)n->cfg.seed);
}

void ro_node_listen_address(const ro_node_t *n, char *buf, size_t len)
{
    if (n->remote)
        ro__remote_address(n->remote, buf, len);
    else if (len)
        buf[0] = '\0';
}

/* Once the workers have pinned themselves: read back their CPU masks and
 * the buffers' pages from the OS, and say what runs where. */
static void report_start(ro_node_t *n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpus[CPU_SETSIZE], ncpus = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                cpus[ncpus++] = c;
    ro__topology_cpulist(cpus, ncpus, n->allowed_cpus, sizeof n->allowed_cpus);
    ro__sched_wait_pinned(n->sched);
    n->affinity_mismatches = ro__sched_check_affinity(n->sched);
    check_placement(n);
    if (n->cfg.quiet)
        return;
    fprintf(stderr,
            "rollout-node: running: %d threads (1 loop + %d workers, read from /proc/self/task), "
            "allowed CPUs %s, %d NUMA node(s) in use of %d%s%s; pinning %s; %d buffers "
            "node-local%s\n",
            ro__thread_count(), n->nworkers, n->allowed_cpus, n->ngroups, os_numa_nodes(),
            n->topo.fake ? " (declared)" : "", n->cfg.numa_node >= 0 ? ", bound" : "",
            n->affinity_mismatches ? "MISMATCH" : "verified", n->mem_blocks - n->mem_misplaced,
            n->mem_misplaced ? " (SOME MISPLACED)" : "");
}

int ro_node_run(ro_node_t *n)
{
    if (n->ran)
        return RO_EINVAL;
    n->ran = true;
    uv_signal_start(&n->sigint, on_signal, SIGINT);
    uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    if (n->cfg.seconds > 0)
        uv_timer_start(&n->deadline, on_deadline, (uint64_t)(n->cfg.seconds * 1000.0), 0);
    if (n->recorder) {
        char err[256];
        int rrc = ro__recorder_start(n->recorder, err, sizeof err);
        if (rrc) {
            fprintf(stderr, "rollout-node: %s\n", err);
            return rrc;
        }
    }
    int rc = ro__sched_start(n->sched);
    if (rc) {
        fprintf(stderr, "rollout-node: cannot start the worker threads: %s\n", ro_strerror(rc));
        return rc;
    }
    report_start(n);
    n->t_start_ns = ro__now_ns();
    ro__logger_start(&n->logger);
    for (uint32_t i = 0; i < n->nshards; i++)
        ro__env_shard_start(&n->shards[i]);
    n->threads_seen = ro__thread_count();
    uv_run(&n->loop, UV_RUN_DEFAULT);
    return n->logger_rc ? n->logger_rc : n->record_rc;
}

void ro_node_summary(const ro_node_t *n, ro_summary_t *s)
{
    memset(s, 0, sizeof *s);
    double return_sum = 0;
    for (uint32_t i = 0; i < n->nshards; i++) {
        const ro_env_shard_t *sh = &n->shards[i];
        s->steps += sh->steps_done * sh->n;
        s->episodes += sh->episodes;
        return_sum += sh->return_sum;
        s->env_failures += sh->env_failures;
    }
    for (uint32_t i = 0; n->lanes && i < n->nlanes; i++) {
        s->batches += atomic_load_explicit(&n->lanes[i].batches, memory_order_relaxed);
        s->mean_batch += (double)atomic_load_explicit(&n->lanes[i].rows, memory_order_relaxed);
    }
    s->mean_batch = s->batches ? s->mean_batch / (double)s->batches : 0.0;
    s->mean_return = s->episodes ? return_sum / (double)s->episodes : 0.0;
    s->seconds = n->t_end_ns > n->t_start_ns ? (double)(n->t_end_ns - n->t_start_ns) * 1e-9 : 0;
    s->sps = s->seconds > 0 ? (double)s->steps / s->seconds : 0;
    for (uint32_t l = 0; n->rings && l < n->nlanes; l++)
        s->dropped_metrics += ro__metrics_ring_dropped(&n->rings[l]);
    s->threads = n->threads_seen;
    s->threads_expected = 1 + n->nworkers + (n->recorder != NULL); /* + the recorder's I/O thread */
    if (n->recorder) {
        ro_recorder_stats_t rs;
        ro__recorder_stats(n->recorder, &rs);
        s->recording = true;
        s->record_transitions = rs.transitions;
        s->record_dropped = rs.dropped_steps;
        s->record_lost = rs.lost_steps;
        s->record_failed = rs.failed;
        s->record_bytes = rs.bytes;
        s->record_files = rs.files;
        s->record_waits = rs.waits;
        s->record_io_busy_s = rs.io_busy_s;
    }
    s->workers = n->nworkers;
    s->lanes = (int)n->nlanes;
    s->numa_nodes = n->ngroups;
    s->steals = ro__sched_steals(n->sched);
    s->cpus = n->topo.ncpus;
    s->pin_errors = ro__sched_pin_errors(n->sched);
    s->num_envs = n->cfg.num_envs;
    s->shard = n->shard_size;
    s->batch = n->batch;
    snprintf(s->env, sizeof s->env, "%s", n->kind.vt->name);
    if (n->cfg.remote) {
        snprintf(s->policy, sizeof s->policy, "remote");
        ro_remote_stats_t rs;
        ro__remote_stats(n->remote, &rs);
        s->learners_attached = rs.attached;
        s->learners_rejected = rs.rejected;
        s->batches = rs.batches_sent;
        s->batches_resent = rs.batches_resent;
        s->mean_batch = rs.batches_sent ? (double)rs.rows_sent / (double)rs.batches_sent : 0.0;
    } else {
        ro__policy_describe(n->policy, s->policy, sizeof s->policy);
        s->policy_pushes = n->policy_pushes;
        s->policy_version = ro__policy_version(n->policy);
        if (n->remote) { /* trainers may attach: count the bad ones */
            ro_remote_stats_t rs;
            ro__remote_stats(n->remote, &rs);
            s->learners_rejected = rs.rejected;
        }
    }
    s->numa_node = n->cfg.numa_node;
    s->topology_declared = n->topo.fake;
    s->os_numa_nodes = os_numa_nodes();
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

void ro_node_free(ro_node_t *n)
{
    if (!n)
        return;
    if (n->sched) {
        ro__sched_stop(n->sched);
        ro__sched_free(n->sched);
    }
    if (n->lanes)
        for (uint32_t l = 0; l < n->nlanes; l++)
            ro__learner_destroy(&n->lanes[l]);
    free(n->lanes);
    ro__recorder_free(n->recorder);
    for (uint32_t i = 0; i < n->nshards; i++)
        ro__env_shard_destroy(&n->shards[i]);
    /* A shard that failed half-way cleaned itself up. */
    free(n->shards);
    ro__policy_free(n->policy);
    ro__policy_free(n->swap_next);
    for (uint32_t i = 0; i < n->nretired; i++)
        ro__policy_free(n->retired[i]);
    if (n->kind.vt)
        ro__env_close(&n->kind);
    if (n->rings)
        for (uint32_t l = 0; l < n->nlanes; l++)
            ro__metrics_ring_free(&n->rings[l]);
    free(n->rings);
    if (n->loop_inited) {
        /* Close whatever is still open (a start-up failure, or a run that
         * never got to shutdown_node), then let the loop finish the closes. */
        uv_walk(&n->loop, close_handle, NULL);
        uv_run(&n->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&n->loop) != 0)
            fprintf(stderr, "rollout: warning: a loop handle was left open\n");
    }
    ro__remote_free(n->remote); /* its handles are closed now */
    ro__topology_free(&n->topo);
    free(n->plan);
    free(n);
}
