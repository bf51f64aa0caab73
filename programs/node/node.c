#include "node/node.h"
#include "node/node_internal.h"

#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "runtime/alloc.h"
#include "runtime/clock.h"
#include "actors/local/env_actor.h"
#include "envs/env_kind.h"
#include "envs/registry.h"
#include "envs/mujoco/mj_registry.h"
#include "runtime/error.h"
#include "wire/token.h"
#include "actors/local/learner_actor.h"
#include "actors/logger/logger_actor.h"
#include "actors/exchange/messages.h"
#include "runtime/numa_mem.h"
#include "runtime/rng.h"
#include "runtime/metrics_ring.h"
#include "policy/policy.h"
#include "policy/params.h"
#include "actors/hub/learner_hub.h"
#include "actors/recorder/recorder_actor.h"
#include "runtime/scheduler.h"
#include "runtime/thread_guard.h"
#include "runtime/topology.h"
#include "wire/frame.h"
#include "ro_build_config.h"

/* Metric records buffered between drains, split over the lanes' rings (at
 * least RING_MIN each): 12 MiB, drained every 50 ms, absorb 5 M records/s. */
#define RING_TOTAL (1u << 18)
#define RING_MIN (1u << 12)
/* --learner stream: segments per shard, and the most memory they take. */
#define STREAM_SEGS_PER_SHARD 4
#define STREAM_POOL_BYTES (128u << 20)

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
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
    ro__node_choose_workers(n); /* with the CPUs known: it may put the envs on the loop */
    n->nworkers = n->cfg.envs_on_loop ? 0 : n->cfg.workers ? (int)n->cfg.workers : n->topo.ncpus;
    /* --workers 0: no worker, but the envs' memory still has a place (the
     * first CPU's node), planned as if for one worker. */
    int planned = n->nworkers ? n->nworkers : 1;
    n->plan = calloc((size_t)planned, sizeof *n->plan);
    if (!n->plan)
        return RO_ENOMEM;
    rc = ro__topology_plan(&n->topo, planned, n->cfg.overcommit, n->plan, n->group_nodes,
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
    rc = ro__env_kind_check_args(&n->kind, n->cfg.env_args, n->cfg.nenv_args, n->env_args,
                                 &n->nenv_args, &n->max_steps, err, errlen);
    if (rc == 0) /* a Python env's processes: one per worker (0: per allowed CPU) by default */
        rc = ro__env_kind_pool(&n->kind, n->env_args, n->nenv_args, n->cfg.num_envs,
                               n->cfg.env_procs ? n->cfg.env_procs : n->cfg.workers,
                               n->cfg.env_timeout_s * 1000u, err, errlen);
    if (rc || !n->kind.vt2)
        return rc; /* ABI 1: the layout comes from shard 0's first env (make_layout) */
    /* ABI 2: the shards are sized from the layout: it comes first, from env 0's instance. */
    uint64_t seed = ro__seed_mix(ro__node_seed(n->cfg.seed, n->cfg.node_index), 0, RO_STREAM_ENV);
    return ro__env_kind_layout(&n->kind, n->env_args, n->nenv_args, seed, &n->layout, err, errlen);
}

/* make_layout: an ABI 1 env's layout, through the shim, from the spaces of
 * shard 0's first env (checked there). */
static int make_layout(ro_node_t *n, char *err, size_t errlen)
{
    if (n->kind.vt2)
        return 0;
    return ro__env_layout_of(n->kind.vt, NULL, n->shards[0].envs[0], &n->layout, err, errlen);
}

/* Envs are split into one contiguous range per lane, each range into
 * shards of shard_size (the last one may be smaller). */
static int make_shards(ro_node_t *n, char *err, size_t errlen)
{
    uint32_t envs = n->cfg.num_envs;
    /* --workers 0: one lane, the loop's. */
    n->nlanes = (uint32_t)n->nworkers < envs ? (uint32_t)n->nworkers : envs;
    if (n->nlanes == 0)
        n->nlanes = 1;
    uint32_t per_lane_max = (envs + n->nlanes - 1) / n->nlanes;
    uint32_t k = n->cfg.shard;
    /* A shard lives in one lane and a forward pass takes whole shards: a
     * --shard that cannot be honoured is refused, not shrunk. */
    if (k > per_lane_max)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--shard %u: larger than a lane's %u envs (%u envs over %u lanes, one "
                          "per worker); give at most %u",
                          k, per_lane_max, envs, n->nlanes, per_lane_max);
    if (k && n->cfg.batch && k > n->cfg.batch)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "--shard %u: larger than --batch %u (a forward pass takes whole shards)",
                          k, n->cfg.batch);
    if (k == 0) {
        /* Four shards per lane keep every worker fed while a lane's forward pass runs; 32 envs
         * amortise the dispatch of one message. Stream mode: a segment every --unroll steps costs
         * the loop a wake-up and the learner a frame and an ack: up to 128 envs (a quarter of the
         * per-segment work; docs/benchmarks.md). A Python env's lane is one shard (its process
         * steps it while the actor waits). A smaller --batch caps k: the batch is as asked. */
        uint32_t cap = n->kind.py ? UINT32_MAX : n->cfg.learner == RO_LEARNER_STREAM ? 128 : 32;
        k = n->kind.py ? per_lane_max : per_lane_max / 4;
        k = k < 1 ? 1 : k > cap ? cap : k;
        if (n->cfg.batch && k > n->cfg.batch)
            k = n->cfg.batch;
    }
    n->shard_size = k;

    uint32_t total = 0;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        uint32_t lane_envs = envs / n->nlanes + (l < envs % n->nlanes);
        total += (lane_envs + k - 1) / k;
    }
    n->shards = ro__calloc_lines(total, sizeof *n->shards);
    if (!n->shards)
        return RO_ENOMEM;
    /* Env i's streams derive from this node's seed (runtime/rng.h): the run
     * seed itself at node index 0, a mix of the two otherwise. */
    uint64_t node_seed = ro__node_seed(n->cfg.seed, n->cfg.node_index);
    uint32_t first = 0;
    for (uint32_t l = 0; l < n->nlanes; l++) {
        uint32_t lane_end = first + envs / n->nlanes + (l < envs % n->nlanes);
        while (first < lane_end) {
            uint32_t cnt = lane_end - first < k ? lane_end - first : k;
            /* On the node of lane l's worker, which steps and reads it. */
            int rc = ro__env_shard_init_kind(
                &n->shards[n->nshards], &n->kind, n->kind.vt2 ? &n->layout : NULL, n->env_args,
                n->nenv_args, first, cnt, node_seed, lane_mem_node(n, l), err, errlen);
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
    if (n->cfg.tensorboard || n->cfg.prometheus) {
        n->histos = ro__calloc_lines(2 * (size_t)n->nshards, sizeof *n->histos);
        if (!n->histos)
            return RO_ENOMEM;
        ro__histo_pub_init(n->histos, 2 * (size_t)n->nshards);
    }
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
    if (n->cfg.learner == RO_LEARNER_REMOTE)
        return 0; /* the learners hold the policy */
    ro_policy_spec_t spec = n->cfg.policy;
    /* The run seed, not the node's: nodes started with one --seed act with
     * the same initial weights (one policy, many nodes' experience). */
    spec.seed = n->cfg.seed;
    int rc;
    if (n->kind.vt2) {
        rc = ro__policy_new_layout(&n->policy, &spec, &n->layout, err, errlen);
    } else {
        ro_space_t os, as; /* the layout's copies, as make_lanes' */
        ro__layout_abi1_view(&n->layout, &os, &as);
        rc = ro__policy_new(&n->policy, &spec, &os, &as, err, errlen);
    }
    if (rc)
        return rc;
    /* A recurrent policy: a state per env row, kept with the rows. */
    for (uint32_t i = 0; i < n->nshards; i++)
        if (ro__env_shard_want_state(&n->shards[i], ro__policy_state_floats(n->policy)) < 0)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the recurrent states");
    if (n->cfg.save_policy)
        rc = ro__policy_save(n->policy, n->cfg.save_policy, err, errlen);
    return rc;
}

/* --token-file: read the secret, and say so if other users can read it too. */
static int load_token(ro_node_t *n, char *err, size_t errlen)
{
    if (!n->cfg.token_file)
        return 0;
    int rc = ro__token_read(n->cfg.token_file, n->token, sizeof n->token, err, errlen);
    char warn[512];
    if (rc == 0 && ro__token_exposed(n->cfg.token_file, warn, sizeof warn))
        fprintf(stderr, "rollout-node: warning: %s\n", warn);
    return rc;
}

/* hub_opts: what every hub of the node takes from it, whoever attaches:
 * the peers' limits, the token (read here), the env's name and seeds,
 * pushes to ro__node_policy_push (the caller clears on_policy where none
 * are taken). 0, or a negative code with one line in err. */
static int hub_opts(ro_node_t *n, ro_hub_opts_t *o, char *err, size_t errlen)
{
    int rc = load_token(n, err, errlen);
    if (rc)
        return rc;
    *o = (ro_hub_opts_t){
        .listen = n->cfg.listen,
        .token = n->cfg.token_file ? n->token : NULL,
        .max_frame = n->cfg.max_frame,
        .max_learners = n->cfg.max_learners,
        .hello_timeout_s = n->cfg.hello_timeout,
        .env_name = ro__env_kind_name(&n->kind),
        .seed = n->cfg.seed,
        .node_index = n->cfg.node_index,
        .max_episode_steps = n->max_steps,
        .on_policy = ro__node_policy_push,
        .ctx = n,
    };
    return 0;
}

/* --listen with local lanes: trainers may push policies. */
static int make_trainer_listener(ro_node_t *n, char *err, size_t errlen)
{
    ro_hub_opts_t o;
    int rc = hub_opts(n, &o, err, errlen);
    if (rc)
        return rc;
    o.batch = 1;
    /* An env ABI 2 env: trainers are welcomed with its layout, and their
     * pushes must be format-2 weights of it (policy_swap.c). */
    o.layout = n->layout.abi1 ? NULL : &n->layout;
    return ro__hub_new(&n->hub, &n->loop, NULL, 0, n->cfg.num_envs, &n->obs_space, &n->act_space,
                       &n->control, &o, err, errlen);
}

/* The hub serving learners over TCP: with --learner remote in the lanes'
 * place (shards of env group l still live on worker l's queue), with
 * --learner stream beside the lanes, taking their segments. */
static int make_hub(ro_node_t *n, char *err, size_t errlen)
{
    ro_hub_opts_t o;
    int rc = hub_opts(n, &o, err, errlen);
    if (rc)
        return rc;
    n->batch = n->cfg.batch ? n->cfg.batch : (n->cfg.num_envs + 1) / 2;
    if (n->batch < n->shard_size)
        n->batch = n->shard_size;
    bool stream = n->cfg.learner == RO_LEARNER_STREAM;
    if (!o.listen)
        o.listen = "127.0.0.1:5555";
    o.batch = n->batch;
    o.max_wait_us = n->cfg.max_wait_us;
    o.learner_timeout_s = n->cfg.learner_timeout;
    o.spin_us = n->cfg.spin_us;
    o.learners = true;
    o.recording = n->cfg.record != NULL;
    /* SEED learners of an env ABI 2 env get its layout and typed frames. */
    o.layout = !stream && !n->layout.abi1 ? &n->layout : NULL;
    /* Stream learners (and trainers) push the weights the lanes act with;
     * SEED learners push none. */
    if (!stream)
        o.on_policy = NULL;
    n->batches = calloc(n->nshards, sizeof *n->batches);
    if (!n->batches)
        return RO_ENOMEM;
    for (uint32_t i = 0; i < n->nshards; i++)
        n->batches[i] = &n->shards[i].xchg;
    rc = ro__hub_new(&n->hub, &n->loop, n->batches, n->nshards, n->cfg.num_envs, &n->obs_space,
                     &n->act_space, &n->control, &o, err, errlen);
    if (rc)
        return rc;
    n->learners_expected = stream ? n->learners_expected + 1 : 1;
    return 0;
}

/* --learner stream: the segment pool, a port per shard, lanes that report
 * their actions' log-probabilities; the hub takes the segments. */
static int make_stream(ro_node_t *n, char *err, size_t errlen)
{
    int rc = make_hub(n, err, errlen);
    if (rc)
        return rc;
    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < n->nshards; i++)
        max_shard = n->shards[i].xchg.n > max_shard ? n->shards[i].xchg.n : max_shard;
    ro_seg_layout_t lay; /* an ABI 2 env's segments carry its own tensors */
    if (n->layout.abi1)
        ro__seg_layout(&lay, n->cfg.unroll, &n->obs_space, &n->act_space,
                       ro__policy_log_std(n->policy) != NULL, max_shard);
    else
        ro__seg_layout_typed(&lay, n->cfg.unroll, &n->layout, max_shard);
    uint32_t hid; /* a recurrent policy: each row's state at the segment's start */
    const ro_cell_t cell = ro__policy_cell(n->policy, &hid);
    if (cell)
        ro__seg_layout_state(&lay, hid, cell == RO_CELL_LSTM);
    /* One being filled and a few in flight per shard, within a memory cap:
     * when learners fall behind, shards wait for segments (backpressure). */
    uint64_t nsegs = (uint64_t)STREAM_SEGS_PER_SHARD * n->nshards;
    if (nsegs * lay.bytes > STREAM_POOL_BYTES)
        nsegs = STREAM_POOL_BYTES / lay.bytes;
    if (nsegs < (uint64_t)n->nshards + 1)
        nsegs = n->nshards + 1;
    if (nsegs * lay.bytes > 4 * (uint64_t)STREAM_POOL_BYTES)
        return ro__errorf(err, errlen, RO_ERANGE,
                          "--unroll %u: a segment of %u steps of %u envs takes %zu bytes; use a "
                          "smaller --unroll or --shard",
                          n->cfg.unroll, n->cfg.unroll, max_shard, lay.bytes);
    if (ro__seg_pool_init(&n->segs, &lay, (uint32_t)nsegs, true) != 0 ||
        !(n->ports = calloc(n->nshards, sizeof *n->ports)))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for %llu stream segments",
                          (unsigned long long)nsegs);
    if (ro__hub_stream(n->hub, &n->segs, n->cfg.stream_window, (uint32_t)n->cfg.max_policy_lag))
        return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the stream hub");
    ro__hub_policy_version(n->hub, ro__policy_version(n->policy));
    for (uint32_t i = 0; i < n->nshards; i++) {
        ro__stream_port_init(&n->ports[i], &n->segs, ro__hub_actor(n->hub), i, &n->shards[i].actor);
        n->shards[i].stream = &n->ports[i];
    }
    for (uint32_t l = 0; l < n->nlanes; l++)
        if (ro__learner_want_stats(&n->lanes[l]) != 0)
            return ro__errorf(err, errlen, RO_ENOMEM, "out of memory for the lanes' statistics");
    return 0;
}

static int make_lanes(ro_node_t *n, char *err, size_t errlen)
{
    /* Spaces point into the layout, which owns copies of the bounds: never
     * into an env, which a reseed (Frame{reseed}) destroys and re-creates
     * while the hub checks actions against these bounds. An ABI 2 env that
     * is not ABI 1 shaped leaves them zero (the modes that read them refuse
     * it). */
    ro__layout_abi1_view(&n->layout, &n->obs_space, &n->act_space);
    /* Shards, batches and lanes count rows: an env of A agents is A rows. */
    const uint32_t shard_rows = n->shard_size * n->layout.agents;
    const uint64_t total_rows = (uint64_t)n->cfg.num_envs * n->layout.agents;
    int rc = ro__sched_new(&n->sched, n->ngroups, n->group_nodes, n->plan, n->nworkers);
    if (rc)
        return rc;
    if (n->cfg.learner == RO_LEARNER_REMOTE) {
        if ((rc = make_hub(n, err, errlen)))
            return rc;
        if (n->nworkers == 0 && !(n->shard_homes = calloc(n->nshards, sizeof *n->shard_homes)))
            return RO_ENOMEM;
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
        ro_runq_t *q = n->nworkers ? ro__sched_queue(n->sched, (int)l) : NULL;
        uint32_t first_shard = s, rows = 0;
        uint32_t lane_end = n->shards[s].xchg.first;
        lane_end += n->cfg.num_envs / n->nlanes + (l < n->cfg.num_envs % n->nlanes);
        while (s < n->nshards && n->shards[s].xchg.first < lane_end)
            rows += n->shards[s++].xchg.n;
        uint32_t batch = n->cfg.batch;
        if (batch == 0) {
            /* Half a lane: one half steps while the other is in its forward
             * pass, so the lane's worker never waits on itself. */
            batch = (rows + 1) / 2;
        }
        if (batch < shard_rows)
            batch = shard_rows;
        if (n->lanes) {
            if (l == 0)
                n->batch = batch;
            rc = ro__learner_init_on(&n->lanes[l], n->policy, q, &n->control, batch,
                                     n->cfg.max_wait_us, s - first_shard, rows, shard_rows,
                                     n->shards[0].xchg.discrete, lane_mem_node(n, l));
            if (rc) {
                snprintf(err, errlen, "cannot allocate the learner's batch buffers");
                return rc;
            }
        }
        for (uint32_t i = first_shard; i < s; i++) {
            ro_env_shard_wiring_t w = {
                .index = i,
                .runq = q,
                .loop = &n->loop,
                .home = q ? NULL : &n->shard_homes[i],
                .learner = n->lanes ? &n->lanes[l].actor : ro__hub_actor(n->hub),
                .rules =
                    {
                        .ring = &n->rings[l],
                        .stopping = &n->stopping,
                        .max_steps = n->max_steps,
                        /* --steps counts rows (agent steps): per env, steps / rows. */
                        .quota = n->cfg.steps ? (n->cfg.steps + total_rows - 1) / total_rows : 0,
                        .check_finite = n->cfg.check_finite,
                        /* --metrics-episodes: a line per episode (else per interval). */
                        .record_episodes = n->cfg.metrics != NULL && n->cfg.metrics_episodes,
                        .histos = n->histos ? &n->histos[2 * i] : NULL,
                        .node_index = n->cfg.node_index,
                    },
            };
            if ((rc = ro__env_shard_wire(&n->shards[i], &w)) != 0)
                return ro__errorf(err, errlen, RO_EIO, "cannot put env shard %u on the loop: %s", i,
                                  uv_strerror(rc));
            n->nshard_homes += !q;
        }
    }
    if (n->cfg.learner == RO_LEARNER_STREAM)
        return make_stream(n, err, errlen);
    if (n->cfg.learner == RO_LEARNER_LOCAL && n->cfg.listen)
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
    if (n->cfg.learner == RO_LEARNER_REMOTE)
        snprintf(pol, sizeof pol, "remote learners");
    else
        ro__policy_describe(n->policy, pol, sizeof pol);
    char desc[192];
    snprintf(desc, sizeof desc, "%s: %s", n->cfg.policy_arg, pol);
    uint32_t max_shard = 0;
    for (uint32_t i = 0; i < n->nshards; i++)
        max_shard = n->shards[i].xchg.n > max_shard ? n->shards[i].xchg.n : max_shard;
    const ro_env_shard_t *s0 = &n->shards[0];
    ro_recorder_opts_t o = {
        .path = n->cfg.record,
        .max_bytes = n->cfg.record_max_bytes,
        .drop = n->cfg.record_full == RO_RECORD_DROP,
        .keep_going = n->cfg.record_error == RO_RECORD_CONTINUE,
        .on_error = &n->control,
        .kind = &n->kind,
        /* ABI 2 envs record rows of typed tensors (format version 2). */
        .layout = n->kind.vt2 ? &n->layout : NULL,
        .env_spec = n->cfg.env,
        .env_args = n->env_args,
        .nenv_args = n->nenv_args,
        .max_episode_steps = n->max_steps,
        .seed = n->cfg.seed,
        .node_index = n->cfg.node_index,
        .num_envs = n->cfg.num_envs,
        .policy = desc,
        .check_finite = n->cfg.check_finite,
        /* A built-in MuJoCo env's physics depends on MuJoCo's version. */
        .mujoco_version = ro__mj_version_of(n->kind.vt),
        .obs_dim = s0->xchg.obs_dim,
        .act_dim = s0->xchg.act_dim,
        .discrete = s0->xchg.discrete,
        .nshards = n->nshards,
        .max_shard = max_shard,
        .snapshot_every = n->cfg.snapshot_every,
        .probe = s0->envs[0],
    };
    int rc = ro__recorder_new(&n->recorder, &o, err, errlen);
    for (uint32_t i = 0; rc == 0 && i < n->nshards; i++)
        n->shards[i].rec = ro__recorder_port(n->recorder, i, &n->shards[i].xchg, n->shards[i].envs);
    return rc;
}

static int make_loop(ro_node_t *n, char *err, size_t errlen)
{
    int rc = uv_loop_init(&n->loop);
    if (rc)
        return ro__errorf(err, errlen, RO_EIO, "cannot start the event loop: %s", uv_strerror(rc));
    n->loop_inited = true;
    if ((rc = ro__actor_init_loop(&n->control, "control", ro__node_control, &n->loop,
                                  &n->control_home)) ||
        (rc = uv_signal_init(&n->loop, &n->sigint)) || (rc = uv_signal_init(&n->loop, &n->sigterm)))
        return ro__errorf(err, errlen, RO_EIO, "cannot set up the event loop: %s", uv_strerror(rc));
    n->sigint.data = n->sigterm.data = n;
    uv_timer_init(&n->loop, &n->deadline); /* cannot fail */
    n->deadline.data = n;
    ro_logger_opts_t lo = {
        .metrics_path = n->cfg.metrics,
        .interval_s = n->cfg.metrics_interval,
        .throughput_only = n->cfg.metrics_throughput_only,
        .episode_lines = n->cfg.metrics_episodes,
        .tensorboard = n->cfg.tensorboard,
        .prometheus = n->cfg.prometheus,
        .node_index = n->cfg.node_index,
        .numa_node = n->cfg.numa_node,
        .env = ro__env_kind_name(&n->kind),
        .quiet = n->cfg.quiet,
        .sample = ro__node_sample,
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
    if ((rc = open_env(n, err, errlen)) || (rc = plan_workers(n, err, errlen)) ||
        (rc = make_shards(n, err, errlen)) || (rc = make_layout(n, err, errlen)) ||
        (rc = make_rings(n)) || (rc = make_policy(n, err, errlen)) ||
        (rc = make_loop(n, err, errlen)) || (rc = make_lanes(n, err, errlen)) ||
        (rc = make_recorder(n, err, errlen))) {
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
    if (n->cfg.learner == RO_LEARNER_REMOTE) {
        char addr[80];
        ro__hub_address(n->hub, addr, sizeof addr);
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
             "env %s x%u | policy %s | %d workers%s%s%s, %d NUMA node(s) | %u lanes, "
             "shards of %u, batch %u, max-wait %llu us | seed %llu%s, node index %u",
             ro__env_kind_name(&n->kind), n->cfg.num_envs, pol, n->nworkers,
             n->nworkers ? " on CPUs " : "", cpus, n->threads_why, n->ngroups, n->nlanes,
             n->shard_size, n->batch, (unsigned long long)n->cfg.max_wait_us,
             (unsigned long long)n->cfg.seed, n->cfg.seed_drawn ? " (fresh)" : "",
             n->cfg.node_index);
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
    ro__policy_free(n->swap_queued);
    for (uint32_t i = 0; i < n->nretired; i++)
        ro__policy_free(n->retired[i]);
    ro__layout_free(&n->layout); /* after the policies and shards that read it */
    ro__env_close(&n->kind);
    if (n->rings)
        for (uint32_t l = 0; l < n->nlanes; l++)
            ro__metrics_ring_free(&n->rings[l]);
    free(n->rings);
    free(n->histos);
    if (n->loop_inited) {
        ro__logger_abandon(&n->logger); /* a start-up failure: nothing was run */
        ro__node_close_shard_homes(n);
        /* Close whatever is still open (a start-up failure, or a run that
         * never got to shutdown_node), then let the loop finish the closes. */
        uv_walk(&n->loop, close_handle, NULL);
        uv_run(&n->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&n->loop) != 0)
            fprintf(stderr, "rollout: warning: a loop handle was left open\n");
    }
    ro__hub_free(n->hub); /* its handles are closed now */
    free(n->batches);
    free(n->shard_homes);
    free(n->ports);
    if (n->segs.segs)
        ro__seg_pool_free(&n->segs);
    ro__topology_free(&n->topo);
    free(n->plan);
    free(n);
}
