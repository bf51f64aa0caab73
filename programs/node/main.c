/*
 * rollout-node: run envs on pinned workers against a batched policy.
 *
 * Exit status: 0 on success (including a stop by SIGINT/SIGTERM), 2 for a
 * bad flag, value, env, policy or file named on the command line, 1 for a
 * failure while running (or no fresh seed from the OS).
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "node/config.h"
#include "runtime/flags.h"
#include "runtime/crash_report.h"
#include "runtime/error.h"
#include "runtime/text.h"
#include "node/node.h"
#include "ro_build_config.h"
#include "runtime/shared_mem.h"
#include "runtime/thread_guard.h"

/* The summary's placement fields: what the OS says about CPUs, pins and
 * memory (docs/operations.md, "Checking threads and pinning"). */
static void print_placement_json(const ro_summary_t *s)
{
    printf(",\"numa_node\":%d,\"topology_declared\":%s,\"os_numa_nodes\":%d,\"allowed_cpus\":",
           s->numa_node, s->topology_declared ? "true" : "false", s->os_numa_nodes);
    ro__json_string(stdout, s->allowed_cpus, RO_TEXT_SHOW_MAX);
    printf(",\"affinity_mismatches\":%d,\"mem_blocks\":%d,\"mem_misplaced\":%d,"
           "\"worker_threads\":[",
           s->affinity_mismatches, s->mem_blocks, s->mem_misplaced);
    for (int w = 0; w < s->workers && w < RO_SUMMARY_MAX_WORKERS; w++)
        printf("%s{\"worker\":%d,\"tid\":%d,\"cpu\":%d,\"node\":%d}", w ? "," : "", w,
               s->worker_tid[w], s->worker_cpu[w], s->worker_node[w]);
    printf("]");
}

/* The JSON summary's stream counters, each key beside the field of the
 * hub's counters it reports (all uint64_t). */
#define HUB(field) offsetof(ro_hub_stats_t, field)
static const struct {
    const char *key;
    size_t off;
} stream_json[] = {
    {"stream_segments_sent", HUB(segments_sent)},
    {"stream_segments_acked", HUB(segments_acked)},
    {"stream_segments_resent", HUB(segments_resent)},
    {"stream_segments_dropped_lag", HUB(segments_dropped_lag)},
    {"stream_segments_unsent", HUB(segments_unsent_at_stop)},
    {"stream_transitions_sent", HUB(transitions_sent)},
    {"stream_transitions_acked", HUB(transitions_acked)},
    {"policy_lag_min", HUB(policy_lag_min)},
    {"policy_lag_max", HUB(policy_lag_max)},
};

/* The summary's --learner stream fields. */
static void print_stream_json(const ro_summary_t *s)
{
    for (size_t i = 0; i < sizeof stream_json / sizeof stream_json[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s->hub + stream_json[i].off, sizeof v);
        printf(",\"%s\":%llu", stream_json[i].key, (unsigned long long)v);
    }
    printf(",\"policy_lag_mean\":%.6f,\"stream_waits\":%llu,\"stream_wait_s\":%.6f",
           s->hub.policy_lag_mean, (unsigned long long)s->stream_waits, s->stream_wait_s);
}

/* print_env_metrics: one line with each per-episode metric's mean (env
 * ABI 2), if the env has any. */
static void print_env_metrics(const ro_summary_t *s)
{
    if (!s->nmetrics)
        return;
    fprintf(stderr, "env metrics (mean over episodes):");
    for (uint32_t m = 0; m < s->nmetrics; m++) {
        char shown[64];
        ro__text_log(shown, sizeof shown, s->metric_name[m], 40);
        if (s->metric_episodes[m])
            fprintf(stderr, "%s %s %.4f (%llu)", m ? "," : "", shown, s->metric_mean[m],
                    (unsigned long long)s->metric_episodes[m]);
        else
            fprintf(stderr, "%s %s n/a (0)", m ? "," : "", shown);
    }
    fprintf(stderr, "\n");
}

static void print_summary(const ro_summary_t *s, bool json)
{
    /* No finished episode (or a NaN reward): no mean, n/a and null. */
    double mean_return = s->episodes ? s->mean_return : NAN;
    char mean[32] = "n/a";
    if (isfinite(mean_return))
        snprintf(mean, sizeof mean, "%.3f", mean_return);
    fprintf(stderr,
            "summary: %llu steps in %.2f s = %.0f steps/s | %llu episodes, mean return %s | "
            "mean batch %.1f | threads %d (1 loop + %d workers%s) | env failures %llu | "
            "metrics dropped %llu | seed %llu%s, node index %u\n",
            (unsigned long long)s->steps, s->seconds, s->sps, (unsigned long long)s->episodes, mean,
            s->mean_batch, s->threads, s->workers, s->recording ? " + recorder" : "",
            (unsigned long long)s->env_failures, (unsigned long long)s->dropped_metrics,
            (unsigned long long)s->seed, s->seed_drawn ? " (fresh: --seed repeats it)" : "",
            s->node_index);
    if (s->recording)
        fprintf(stderr,
                "record: %llu transitions, %llu bytes in %u file(s), %llu steps dropped, %llu "
                "waits for the disk\n",
                (unsigned long long)s->record.transitions, (unsigned long long)s->record.bytes,
                s->record.files, (unsigned long long)s->record.dropped_steps,
                (unsigned long long)s->record.waits);
    if (s->record.failed)
        fprintf(stderr, "record: a write failed; %llu steps were not recorded\n",
                (unsigned long long)s->record.lost_steps);
    if (s->hub.stream)
        fprintf(
            stderr,
            "stream: %llu transitions in %llu segments sent, %llu acknowledged, %llu resent, "
            "%llu dropped for lag, %llu unsent | policy lag %llu..%llu (mean %.2f) | shards "
            "waited %.2f s for learners\n",
            (unsigned long long)s->hub.transitions_sent, (unsigned long long)s->hub.segments_sent,
            (unsigned long long)s->hub.segments_acked, (unsigned long long)s->hub.segments_resent,
            (unsigned long long)s->hub.segments_dropped_lag,
            (unsigned long long)s->hub.segments_unsent_at_stop,
            (unsigned long long)s->hub.policy_lag_min, (unsigned long long)s->hub.policy_lag_max,
            s->hub.policy_lag_mean, s->stream_wait_s);
    print_env_metrics(s);
    if (s->mujoco_warnings)
        fprintf(stderr, "mujoco: %llu warnings in the envs' simulations (counted, not printed)\n",
                (unsigned long long)s->mujoco_warnings);
    if (s->pin_errors)
        fprintf(stderr, "warning: %d workers could not be pinned to their CPU\n", s->pin_errors);
    if (!json)
        return;
    /* One line, for scripts; field order is stable. */
    printf("{\"steps\":%llu,\"seconds\":%.6f,\"sps\":%.1f,\"episodes\":%llu,\"mean_return\":",
           (unsigned long long)s->steps, s->seconds, s->sps, (unsigned long long)s->episodes);
    ro__json_double(stdout, mean_return);
    printf(",");
    printf("\"threads\":%d,\"threads_expected\":%d,\"workers\":%d,\"workers_chosen\":\"%s\","
           "\"env_step_ns\":%.1f,\"spin_us\":%u,\"lanes\":%d,\"numa_nodes\":%d,\"cpus\":%d,"
           "\"pin_errors\":%d,\"steals\":%llu,",
           s->threads, s->threads_expected, s->workers, s->workers_chosen, s->env_step_ns,
           s->spin_us, s->lanes, s->numa_nodes, s->cpus, s->pin_errors,
           (unsigned long long)s->steals);
    printf("\"num_envs\":%u,\"shard\":%u,\"batch\":%u,\"batches\":%llu,\"mean_batch\":%.3f,"
           "\"env_failures\":%llu,\"mujoco_warnings\":%llu,\"dropped_metrics\":%llu,",
           s->num_envs, s->shard, s->batch, (unsigned long long)s->batches, s->mean_batch,
           (unsigned long long)s->env_failures, (unsigned long long)s->mujoco_warnings,
           (unsigned long long)s->dropped_metrics);
    /* The MuJoCo the build's MuJoCo envs run on, whatever env ran: null
     * when the build has none (docs/env-api.md). */
    printf("\"env_error\":"); /* a Python env's last failure, its traceback: null if none */
    if (s->env_error[0])
        ro__json_string(stdout, s->env_error, sizeof s->env_error);
    else
        printf("null");
    printf(",\"mujoco_version\":");
    if (s->mujoco_version)
        ro__json_string(stdout, s->mujoco_version, RO_TEXT_SHOW_MAX);
    else
        printf("null");
    printf(",");
    printf("\"learners_attached\":%llu,\"learners_rejected\":%llu,\"learners_upgraded\":%llu,"
           "\"batches_resent\":%llu,\"policy_pushes\":%llu,\"policy_version\":%llu,\"env\":",
           (unsigned long long)s->hub.attached, (unsigned long long)s->hub.rejected,
           (unsigned long long)s->hub.upgrades, (unsigned long long)s->hub.batches_resent,
           (unsigned long long)s->policy_pushes, (unsigned long long)s->policy_version);
    ro__json_string(stdout, s->env, RO_TEXT_SHOW_MAX); /* a plugin's name: escaped */
    printf(",\"policy\":");
    ro__json_string(stdout, s->policy, RO_TEXT_SHOW_MAX);
    /* The seed as a JSON integer: 64 bits, exact for Python's json. */
    printf(",\"seed\":%llu,\"seed_drawn\":%s,\"node_index\":%u", (unsigned long long)s->seed,
           s->seed_drawn ? "true" : "false", s->node_index);
    if (s->recording)
        printf(",\"record_transitions\":%llu,\"record_dropped\":%llu,\"record_bytes\":%llu,"
               "\"record_files\":%u,\"record_waits\":%llu,\"record_io_busy_s\":%.6f,"
               "\"record_failed\":%s,\"record_lost\":%llu",
               (unsigned long long)s->record.transitions,
               (unsigned long long)s->record.dropped_steps, (unsigned long long)s->record.bytes,
               s->record.files, (unsigned long long)s->record.waits, s->record.io_busy_s,
               s->record.failed ? "true" : "false", (unsigned long long)s->record.lost_steps);
    if (s->recording)
        printf(",\"record_snapshots\":%llu,\"record_snapshot_failures\":%llu",
               (unsigned long long)s->record.snapshots,
               (unsigned long long)s->record.snapshot_failures);
    if (s->hub.stream)
        print_stream_json(s);
    print_placement_json(s);
    printf(",\"agents\":%u,\"metrics\":{", s->agents);
    for (uint32_t m = 0; m < s->nmetrics; m++) {
        printf("%s", m ? "," : "");
        ro__json_string(stdout, s->metric_name[m], RO_TEXT_SHOW_MAX);
        printf(":{\"mean\":");
        ro__json_double(stdout, s->metric_mean[m]);
        printf(",\"episodes\":%llu}", (unsigned long long)s->metric_episodes[m]);
    }
    printf("}}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* First, before anything can load OpenBLAS's pool or a plugin. */
    if (ro__threads_single_blas(argv) != 0)
        fprintf(stderr, "rollout-node: warning: could not re-exec with OPENBLAS_NUM_THREADS=1; "
                        "OpenBLAS may keep extra threads\n");

    /* A learner that closes its connection must not kill us with SIGPIPE:
     * the write fails with EPIPE and the session is closed instead. */
    signal(SIGPIPE, SIG_IGN);
    /* The memories we share with learners are reachable as
     * /proc/PID/fd/N by anything that may inspect us: only by root from
     * now on (runtime/shared_mem.h, docs/protocol.md "Who may touch which
     * memory"). After the re-exec above, which would undo it. */
    if (ro__process_private() != 0)
        fprintf(stderr, "rollout-node: warning: could not make the process non-dumpable: "
                        "processes of this user can open its shared memory\n");
    /* An env that crashes gets named before the process goes. */
    ro__crash_report_install();

    ro_config_t cfg;
    char err[512] = "";
    int prc = ro__config_parse(&cfg, argc, argv, err, sizeof err);
    if (prc != 0) {
        fprintf(stderr, "rollout-node: %s\n", err);
        return prc == RO_EIO ? 1 : 2; /* no seed from the OS is no bad flag */
    }
    if (ro__flags_answer(cfg.help, cfg.version, ro__config_usage, "rollout-node", RO_VERSION))
        return 0;

    if (cfg.print_topology) {
        if (ro_node_print_topology(&cfg, stdout, err, sizeof err) != 0) {
            fprintf(stderr, "rollout-node: %s\n", err);
            return 2;
        }
        return 0;
    }

    /* SIGINT, SIGTERM and SIGHUP wait, blocked, until ro_node_run handles
     * them: a stop that comes while the node starts (a launcher that dies:
     * its PR_SET_PDEATHSIG) is then a clean one, the socket file removed. The
     * threads started meanwhile keep them blocked, so they reach the loop. */
    ro_node_stop_signals(SIG_BLOCK);
    ro_node_t *node;
    if (ro_node_new(&node, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "rollout-node: %s\n", err);
        if (cfg.json) { /* scripts read why, as they read the summary */
            fputs("{\"error\":", stdout);
            ro__json_string(stdout, err, sizeof err);
            fputs("}\n", stdout);
        }
        return 2;
    }
    char line[512];
    ro_node_describe(node, line, sizeof line);
    if (!cfg.quiet)
        fprintf(stderr, "rollout-node %s: %s\n", RO_VERSION, line);
    char addr[80], local[128];
    ro_node_listen_address(node, addr, sizeof addr, local, sizeof local);
    if (addr[0]) /* always: scripts read the port when --listen asked for port 0 */
        fprintf(stderr, "rollout-node: listening for learners on %s\n", addr);
    if (local[0] && !cfg.quiet)
        fprintf(stderr,
                "rollout-node: learners on this host move to %s (same-host upgrade; "
                "rollout-learner --no-upgrade stays on TCP)\n",
                local);
    fflush(stderr);

    int rc = ro_node_run(node);
    ro_summary_t s;
    ro_node_summary(node, &s);
    print_summary(&s, cfg.json);
    ro_node_free(node);
    return rc != 0; /* ro_node_run said why */
}
