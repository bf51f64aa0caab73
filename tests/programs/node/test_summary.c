/*
 * What a node reports (programs/node/summary.c), on a node record of two
 * shards and two lanes filled by hand, the hub, recorder, scheduler and
 * NUMA read-backs wrapped (-Wl,--wrap) to say what the test sets. The
 * summary adds the shards' steps (steps x envs), episodes, returns and
 * failures and the lanes' batches (mean batch = rows / batches), times the
 * run (0 s when the clock did not move on), names who chose the workers,
 * takes each env metric's mean over the shards that kept it (NaN when no
 * episode reported it), and lists each worker's CPU, node and thread. A
 * remote node's batches are the hub's; a stream node's segments, lag and
 * shard waits come in; a recording's figures and its I/O thread too. The
 * logger's sample sums the shards' and lanes' published counters, the
 * hub's gauges, the ports' waits, the histograms and metrics; the listen
 * address is empty without a hub; placement counts a block misplaced when
 * it is unbound, bound elsewhere or has a page elsewhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/node.h"
#include "node/node_internal.h"

#define ERRLEN 256

/* What the wrapped calls answer. Reset per test. */
static struct {
    ro_hub_stats_t hub;
    ro_recorder_stats_t rec;
    uint64_t steals;
    int pin_errors;
    const void *unbound, *elsewhere, *split; /* blocks: no node, node 1 not 0, a page off */
} w;

void __wrap_ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out);
void __wrap_ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out)
{
    assert_non_null(h);
    *out = w.hub;
}

void __wrap_ro__hub_address(const ro_hub_t *h, char *buf, size_t len);
void __wrap_ro__hub_address(const ro_hub_t *h, char *buf, size_t len)
{
    (void)h;
    snprintf(buf, len, "127.0.0.1:7000");
}

void __wrap_ro__hub_upgrade_address(const ro_hub_t *h, char *buf, size_t len);
void __wrap_ro__hub_upgrade_address(const ro_hub_t *h, char *buf, size_t len)
{
    (void)h;
    snprintf(buf, len, "unix:/run/node.sock");
}

void __wrap_ro__recorder_stats(const ro_recorder_t *r, ro_recorder_stats_t *st);
void __wrap_ro__recorder_stats(const ro_recorder_t *r, ro_recorder_stats_t *st)
{
    (void)r;
    *st = w.rec;
}

void __wrap_ro__recorder_pressure(const ro_recorder_t *r, uint64_t *waits, uint64_t *dropped);
void __wrap_ro__recorder_pressure(const ro_recorder_t *r, uint64_t *waits, uint64_t *dropped)
{
    (void)r;
    *waits = w.rec.waits;
    *dropped = w.rec.dropped_steps;
}

uint64_t __wrap_ro__sched_steals(const ro_sched_t *s);
uint64_t __wrap_ro__sched_steals(const ro_sched_t *s)
{
    (void)s;
    return w.steals;
}

int __wrap_ro__sched_pin_errors(const ro_sched_t *s);
int __wrap_ro__sched_pin_errors(const ro_sched_t *s)
{
    (void)s;
    return w.pin_errors;
}

int __wrap_ro__sched_worker_tid(const ro_sched_t *s, int i);
int __wrap_ro__sched_worker_tid(const ro_sched_t *s, int i)
{
    (void)s;
    return 1000 + i;
}

int __wrap_ro__numa_bound_node(const void *p);
int __wrap_ro__numa_bound_node(const void *p)
{
    return p == w.unbound ? -1 : p == w.elsewhere ? 1 : 0;
}

int __wrap_ro__numa_misplaced(const void *p, size_t bytes, int node);
int __wrap_ro__numa_misplaced(const void *p, size_t bytes, int node)
{
    (void)bytes, (void)node;
    return p == w.split;
}

/* The node record: static, for the alignment the shards' counters ask. */
static struct ro_node node;
static ro_env_shard_t shards[2];
static ro_learner_t lanes[2];
static ro_stream_port_t ports[2];
static ro_worker_plan_t plan[2];
static ro_histo_pub_t histos[4];
static char hub_, recorder_, sched_; /* stand-ins: only the wrapped calls take them */

/* Shard 0: 10 steps of 4 envs, 3 episodes (return 6), 1 failure, metric
 * "goal" 3 over 2 episodes; shard 1: 5 steps of 2 envs, 1 episode (return
 * 2), 2 failures, no metrics kept. Lanes: 4 passes of 40 rows, 6 of 20.
 * Workers on CPUs 3 and 5, groups 0 and 1 (NUMA nodes 0 and 2). */
static int setup(void **state)
{
    (void)state;
    memset(&w, 0, sizeof w);
    memset(&node, 0, sizeof node);
    memset(shards, 0, sizeof shards);
    memset(lanes, 0, sizeof lanes);
    memset(ports, 0, sizeof ports);
    node.shards = shards;
    node.nshards = 2;
    node.lanes = lanes;
    node.nlanes = 2;
    node.sched = (ro_sched_t *)&sched_;
    node.nworkers = 2;
    node.plan = plan;
    plan[0] = (ro_worker_plan_t){.cpu = 3, .group = 0};
    plan[1] = (ro_worker_plan_t){.cpu = 5, .group = 1};
    node.group_nodes[1] = 2;
    node.ngroups = 2;
    shards[0].xchg.steps = 10, shards[0].xchg.n = 4;
    shards[1].xchg.steps = 5, shards[1].xchg.n = 2;
    shards[0].episodes = 3, shards[0].return_sum = 6.0, shards[0].env_failures = 1;
    shards[1].episodes = 1, shards[1].return_sum = 2.0, shards[1].env_failures = 2;
    static double msum[2] = {3.0, 0.0};
    static uint64_t mcount[2] = {2, 0};
    shards[0].metric_sum = msum, shards[0].metric_count = mcount;
    node.layout.nmetrics = 2;
    snprintf(node.layout.metric[0], RO_ENV_MAX_NAME, "goal");
    snprintf(node.layout.metric[1], RO_ENV_MAX_NAME, "fell");
    atomic_store(&lanes[0].batches, 4);
    atomic_store(&lanes[0].rows, 160);
    atomic_store(&lanes[1].batches, 6);
    atomic_store(&lanes[1].rows, 120);
    node.t_start_ns = 1000000000;
    node.t_end_ns = 3500000000;
    node.cfg.seed = 42;
    node.cfg.num_envs = 6;
    ro_policy_spec_t spec = {.kind = RO_POLICY_MLP, .activation = RO_ACT_TANH, .seed = 1};
    spec.hidden[0] = 4;
    spec.nhidden = 1;
    const ro_space_t os = {.kind = RO_SPACE_BOX, .ndim = 1, .shape = {2}};
    const ro_space_t as = {.kind = RO_SPACE_DISCRETE, .n = 2};
    char err[ERRLEN];
    assert_int_equal(ro__policy_new(&node.policy, &spec, &os, &as, err, sizeof err), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ro__policy_free(node.policy);
    return 0;
}

/* A local node: the shards' and lanes' sums, the run's time, the metric
 * means, who chose the workers, each worker's place. */
static void test_summary_local(void **state)
{
    (void)state;
    w.steals = 7;
    w.pin_errors = 1;
    ro_summary_t *s = malloc(sizeof *s);
    assert_non_null(s);
    ro_node_summary(&node, s);
    assert_int_equal(s->seed, 42);
    assert_int_equal(s->steps, 50);
    assert_int_equal(s->episodes, 4);
    assert_true(s->mean_return == 2.0);
    assert_int_equal(s->env_failures, 3);
    assert_int_equal(s->batches, 10);
    assert_true(s->mean_batch == 28.0);
    assert_true(s->seconds == 2.5);
    assert_true(s->sps == 20.0);
    assert_string_equal(s->workers_chosen, "default");
    assert_int_equal(s->threads_expected, 3);
    assert_int_equal(s->steals, 7);
    assert_int_equal(s->pin_errors, 1);
    assert_int_equal(s->agents, 1);
    assert_int_equal(s->nmetrics, 2);
    assert_string_equal(s->metric_name[0], "goal");
    assert_true(s->metric_mean[0] == 1.5);
    assert_int_equal(s->metric_episodes[0], 2);
    assert_true(isnan(s->metric_mean[1])); /* no episode reported it */
    assert_int_equal(s->metric_episodes[1], 0);
    assert_int_equal(s->worker_cpu[1], 5);
    assert_int_equal(s->worker_node[0], 0);
    assert_int_equal(s->worker_node[1], 2);
    assert_int_equal(s->worker_tid[1], 1001);
    assert_string_equal(s->policy, "mlp(4,tanh)");
    assert_false(s->hub.stream || s->recording);
    node.env_step_ns = 800.0;        /* work_probe.c timed the env */
    node.t_end_ns = node.t_start_ns; /* the clock did not move on */
    shards[0].episodes = shards[1].episodes = 0;
    ro_node_summary(&node, s);
    assert_string_equal(s->workers_chosen, "measured");
    assert_true(s->seconds == 0.0 && s->sps == 0.0);
    assert_true(s->mean_return == 0.0);
    node.cfg.workers_given = true;
    ro_node_summary(&node, s);
    assert_string_equal(s->workers_chosen, "flag");
    free(s);
}

/* A remote node: the hub's batches and rows, its learners; the policy is
 * the learners'. */
static void test_summary_remote(void **state)
{
    (void)state;
    node.cfg.learner = RO_LEARNER_REMOTE;
    node.hub = (ro_hub_t *)&hub_;
    w.hub = (ro_hub_stats_t){.batches_sent = 8,
                             .rows_sent = 36,
                             .batches_resent = 1,
                             .attached = 3,
                             .rejected = 1,
                             .upgrades = 2};
    ro_summary_t *s = malloc(sizeof *s);
    assert_non_null(s);
    ro_node_summary(&node, s);
    assert_string_equal(s->policy, "remote");
    assert_int_equal(s->batches, 8);
    assert_true(s->mean_batch == 4.5);
    assert_int_equal(s->hub.batches_resent, 1); /* the hub's counters, as they stood */
    assert_int_equal(s->hub.attached, 3);
    assert_int_equal(s->hub.upgrades, 2);
    assert_int_equal(s->steps, 50);
    w.hub.batches_sent = 0; /* none sent: no mean */
    ro_node_summary(&node, s);
    assert_true(s->mean_batch == 0.0);
    free(s);
}

/* A stream node: the hub's segments and lag, the shards' waits (summed,
 * in seconds); a recording: its figures, and its I/O thread expected. */
static void test_summary_stream_and_recording(void **state)
{
    (void)state;
    node.hub = (ro_hub_t *)&hub_;
    node.ports = ports;
    atomic_store(&ports[0].wait_ns, 1500000000);
    atomic_store(&ports[1].wait_ns, 500000000);
    atomic_store(&ports[0].waits, 3);
    atomic_store(&ports[1].waits, 4);
    w.hub = (ro_hub_stats_t){.stream = true,
                             .attached = 1,
                             .segments_sent = 9,
                             .segments_acked = 7,
                             .segments_resent = 2,
                             .segments_dropped_lag = 1,
                             .segments_unsent_at_stop = 3,
                             .transitions_sent = 90,
                             .transitions_acked = 70,
                             .policy_lag_min = 0,
                             .policy_lag_max = 4,
                             .policy_lag_mean = 1.25};
    node.recorder = (ro_recorder_t *)&recorder_;
    w.rec = (ro_recorder_stats_t){.transitions = 50,
                                  .dropped_steps = 2,
                                  .lost_steps = 3,
                                  .failed = true,
                                  .bytes = 4096,
                                  .files = 2,
                                  .waits = 5,
                                  .snapshots = 6,
                                  .snapshot_failures = 1,
                                  .io_busy_s = 0.25};
    ro_summary_t *s = malloc(sizeof *s);
    assert_non_null(s);
    ro_node_summary(&node, s);
    assert_true(s->hub.stream);
    assert_int_equal(s->hub.segments_sent, 9);
    assert_int_equal(s->hub.segments_unsent_at_stop, 3);
    assert_true(s->hub.policy_lag_mean == 1.25);
    assert_int_equal(s->stream_waits, 7);
    assert_true(s->stream_wait_s == 2.0);
    assert_int_equal(s->batches, 10); /* the local lanes' still */
    assert_true(s->recording && s->record.failed);
    assert_int_equal(s->record.transitions, 50);
    assert_true(s->record.io_busy_s == 0.25);
    assert_int_equal(s->threads_expected, 4); /* loop, 2 workers, the recorder's I/O */
    w.hub.stream = false;                     /* trainers only: counted, no stream figures */
    ro_node_summary(&node, s);
    assert_false(s->hub.stream);
    assert_int_equal(s->stream_waits, 0);
    free(s);
}

/* The logger's sample: published counters summed; a remote node's batches
 * and gauges from the hub; a stream node's too, with the ports' waits;
 * the histograms, metrics and the recording's pressure. */
static void test_sample(void **state)
{
    (void)state;
    atomic_store(&shards[0].steps, 40);
    atomic_store(&shards[1].steps, 10);
    atomic_store(&shards[0].episodes_pub, 3);
    atomic_store(&shards[1].return_pub, 2.5);
    atomic_store(&shards[0].metric_sum_pub[0], 1.0);
    atomic_store(&shards[1].metric_sum_pub[0], 2.0);
    atomic_store(&shards[1].metric_count_pub[0], 2);
    ro_logger_sample_t *s = malloc(sizeof *s);
    assert_non_null(s);
    ro__node_sample(&node, s);
    assert_int_equal(s->steps, 50);
    assert_int_equal(s->episodes, 3);
    assert_true(s->return_sum == 2.5);
    assert_int_equal(s->batches, 10);
    assert_int_equal(s->rows, 280);
    assert_false(s->remote || s->stream || s->histos || s->recording);
    assert_int_equal(s->nmetrics, 2);
    assert_true(s->metric_sum[0] == 3.0);
    assert_int_equal(s->metric_count[0], 2);
    assert_string_equal(s->metric_name[0], "goal");
    node.cfg.learner = RO_LEARNER_REMOTE;
    node.hub = (ro_hub_t *)&hub_;
    node.ports = ports;
    atomic_store(&ports[0].waits, 3);
    atomic_store(&ports[1].waits, 4);
    w.hub = (ro_hub_stats_t){.batches_sent = 8,
                             .rows_sent = 36,
                             .learners = 2,
                             .envs_in_flight = 5,
                             .oldest_wait_ns = 9,
                             .segments_acked = 11,
                             .policy_lag_mean = 0.5};
    node.histos = histos;
    ro__histo_pub_init(histos, 4);
    ro__histo_pub_add(&histos[0], ro__histo_return_edges, ro__histo_return_nedges, 7.0);
    ro__histo_pub_add(&histos[2], ro__histo_return_edges, ro__histo_return_nedges, 9.0);
    ro__histo_pub_add(&histos[3], ro__histo_size_edges, ro__histo_size_nedges, 20.0);
    node.recorder = (ro_recorder_t *)&recorder_;
    w.rec.waits = 6, w.rec.dropped_steps = 1;
    ro__node_sample(&node, s);
    assert_true(s->remote && s->stream && s->histos && s->recording);
    assert_int_equal(s->batches, 8);
    assert_int_equal(s->rows, 36);
    assert_int_equal(s->hub.learners, 2);
    assert_int_equal(s->hub.envs_in_flight, 5);
    assert_int_equal(s->hub.oldest_wait_ns, 9);
    assert_int_equal(s->hub.segments_acked, 11);
    assert_int_equal(s->stream_waits, 7);
    assert_int_equal(s->ret.n, 2);
    assert_true(s->ret.sum == 16.0);
    assert_int_equal(s->len.n, 1);
    assert_int_equal(s->record_waits, 6);
    assert_int_equal(s->record_dropped, 1);
    free(s);
}

/* Where learners attach: nothing without a hub; the hub's two addresses. */
static void test_listen_address(void **state)
{
    (void)state;
    char tcp[64] = "x", local[64] = "x";
    ro_node_listen_address(&node, tcp, sizeof tcp, local, sizeof local);
    assert_string_equal(tcp, "");
    assert_string_equal(local, "");
    node.hub = (ro_hub_t *)&hub_;
    ro_node_listen_address(&node, tcp, sizeof tcp, local, sizeof local);
    assert_string_equal(tcp, "127.0.0.1:7000");
    assert_string_equal(local, "unix:/run/node.sock");
}

/* Placement: a shard block on its node is placed; one bound elsewhere, one
 * with a page elsewhere, a lane's block unbound are not; blocks not on a
 * node (mem_bytes 0, mem_node -1) are not counted at all. */
static void test_check_placement(void **state)
{
    (void)state;
    static char blocks[2][64];
    lanes[0].mem_node = lanes[1].mem_node = -1;
    shards[0].mem = blocks[0], shards[0].mem_bytes = 64, shards[0].mem_node = 0;
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_blocks, 1);
    assert_int_equal(node.mem_misplaced, 0);
    w.elsewhere = blocks[0];
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_misplaced, 1);
    w.elsewhere = NULL;
    w.split = blocks[0];
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_misplaced, 1);
    w.split = NULL;
    /* A lane on node 0: its block and its policy input (2 blocks). */
    lanes[0].mem_node = 0;
    lanes[0].mem = blocks[1], lanes[0].mem_bytes = 64;
    lanes[1].mem_node = -1;
    lanes[0].max_rows = 2, lanes[0].obs_dim = 2;
    assert_int_equal(ro__policy_ws_new(&lanes[0].ws, node.policy, 2), 0);
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_blocks, 3);
    assert_int_equal(node.mem_misplaced, 0);
    w.unbound = blocks[1];
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_misplaced, 1);
    w.unbound = NULL;
    lanes[0].mem = NULL; /* the heap, though a node was asked for */
    ro__node_check_placement(&node);
    assert_int_equal(node.mem_misplaced, 1);
    ro__policy_ws_free(lanes[0].ws);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_summary_local), T(test_summary_remote), T(test_summary_stream_and_recording),
        T(test_sample),        T(test_listen_address), T(test_check_placement),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
