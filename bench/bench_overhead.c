/*
 * Overheads, as ratios within one run:
 *  - logger on (--metrics to a file: a throughput line with the interval's
 *    mean return a second, the default) vs off, and the same with
 *    --metrics-episodes (plus one line per finished episode) vs off;
 *  - observation validation (--check-finite) on vs off;
 * each for cartpole + MLP(64,64) (an episode every ~20 steps: the most
 * records) and pendulum + MLP (200-step episodes). On and off alternate,
 * `repeats` times each, and the medians are compared.
 *  - a sweep of --batch and --max-wait-us for cartpole + MLP.
 * Every row carries the thread count read from /proc/self/task, and the
 * on / off ratio also in CPU time: steps per CPU-second of the process
 * (every thread: the logger runs on the loop thread), which other
 * processes on a shared machine do not move.
 *
 * usage: bench_overhead [--seconds S] [--repeats N] [--csv FILE]
 *                       [--batch-csv FILE] [--metrics-file PATH] [--quiet-wait S] [--help]
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "runtime/thread_guard.h"

typedef enum { FEAT_LOGGER, FEAT_LOGGER_EPISODES, FEAT_CHECK_FINITE } feature_t;

static void apply(ro_config_t *c, feature_t f, bool on, const char *metrics_path)
{
    if (!on)
        return;
    if (f == FEAT_LOGGER || f == FEAT_LOGGER_EPISODES) {
        c->metrics = metrics_path;
        c->metrics_episodes = f == FEAT_LOGGER_EPISODES;
    } else
        c->check_finite = true;
}

typedef struct overhead_opts {
    double seconds, quiet_wait;
    uint32_t repeats;
    const char *csv, *batch_csv, *metrics_file;
    bool help;
} overhead_opts_t;

#define AT(field) offsetof(overhead_opts_t, field)
static const ro_flag_t overhead_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds), 10, .help = "each run (default 2)"},
    {RO_FLAG_U32, "repeats", "N", AT(repeats), 1, BENCH_MAX_REPEATS,
     .help = "runs of each side, alternating; medians (default 5)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "the on/off table as CSV"},
    {RO_FLAG_STRING, "batch-csv", "FILE", AT(batch_csv), .help = "the batch sweep as CSV"},
    {RO_FLAG_STRING, "metrics-file", "FILE", AT(metrics_file),
     .help = "where the logger's runs write (default\n/tmp/rollout-bench-metrics-PID.jsonl)"},
    {RO_FLAG_SECONDS, "quiet-wait", "S", AT(quiet_wait), 0, .help = BENCH_QUIET_WAIT_HELP},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    overhead_opts_t o = {.seconds = 2.0, .repeats = 5, .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_overhead",
                "usage: bench_overhead [options]\n\nThe logger and --check-finite on / off, and "
                "steps/s over --batch and\n--max-wait-us (docs/benchmarks.md).\n\n",
                overhead_flags, sizeof overhead_flags / sizeof overhead_flags[0], &o, &o.help, argc,
                argv, NULL);
    bench_quiet_wait_s = o.quiet_wait;
    double seconds = o.seconds;
    int repeats = (int)o.repeats;
    const char *csv = o.csv, *batch_csv = o.batch_csv;
    char metrics_path[256];
    if (o.metrics_file)
        snprintf(metrics_path, sizeof metrics_path, "%s", o.metrics_file);
    else
        snprintf(metrics_path, sizeof metrics_path, "/tmp/rollout-bench-metrics-%d.jsonl",
                 (int)getpid());
    const uint32_t W = (uint32_t)bench_allowed_cpus();
    const bench_node_t cartpole = {"cartpole", NULL, RO_POLICY_MLP, 256};
    const bench_node_t pendulum = {"pendulum", NULL, RO_POLICY_MLP, 256};
    struct {
        const char *feature, *name;
        feature_t f;
        const bench_node_t *b;
    } pairs[] = {
        {"logger", "cartpole+mlp64x64", FEAT_LOGGER, &cartpole},
        {"logger", "pendulum+mlp64x64", FEAT_LOGGER, &pendulum},
        {"logger_episodes", "cartpole+mlp64x64", FEAT_LOGGER_EPISODES, &cartpole},
        {"logger_episodes", "pendulum+mlp64x64", FEAT_LOGGER_EPISODES, &pendulum},
        {"check_finite", "cartpole+mlp64x64", FEAT_CHECK_FINITE, &cartpole},
        {"check_finite", "pendulum+mlp64x64", FEAT_CHECK_FINITE, &pendulum},
    };

    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (out)
        fprintf(out, "feature,case,workers,sps_off,sps_on,ratio,threads_off,threads_on,"
                     "dropped_metrics,ext_load,cpu_sps_off,cpu_sps_on,cpu_ratio\n");
    printf("| feature | case | W | off steps/s | on steps/s | on / off | on / off, CPU time | "
           "threads off/on |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        double off[BENCH_MAX_REPEATS], on[BENCH_MAX_REPEATS];
        /* Steps per CPU-second of the whole process (workers and loop, so
         * the logger's own work counts): what load does not move. */
        double cpu_off[BENCH_MAX_REPEATS], cpu_on[BENCH_MAX_REPEATS];
        ro_summary_t s_off = {0}, s_on = {0};
        double load = 0; /* CPUs other processes used, mean over samples */
        for (int r = 0; r < repeats; r++) {
            for (int side = 0; side < 2; side++) {
                /* Alternate which side goes first: no side always runs on a
                 * warmer machine. */
                bool is_on = (side ^ (r & 1)) != 0;
                ro_config_t c;
                char kv[64];
                bench_config(&c, pairs[k].b, W, seconds, kv);
                apply(&c, pairs[k].f, is_on, metrics_path);
                ro_summary_t s;
                double l, c0 = 0;
                BENCH_QUIET((c0 = bench_cpu_s(RUSAGE_SELF), s = bench_run(&c)), &l);
                const double cpu_sps = (double)s.steps / (bench_cpu_s(RUSAGE_SELF) - c0);
                load += l / (2 * repeats);
                /* Gone before the next run: truncating a large file there
                 * would free its blocks while that run measures. */
                unlink(metrics_path);
                if (is_on) {
                    on[r] = s.sps;
                    cpu_on[r] = cpu_sps;
                    s_on = s;
                } else {
                    off[r] = s.sps;
                    cpu_off[r] = cpu_sps;
                    s_off = s;
                }
            }
        }
        unlink(metrics_path);
        double m_off = bench_median(off, repeats), m_on = bench_median(on, repeats);
        double c_off = bench_median(cpu_off, repeats), c_on = bench_median(cpu_on, repeats);
        printf("| %s | %s | %u | %.0f | %.0f | %.3f | %.3f | %d/%d |\n", pairs[k].feature,
               pairs[k].name, W, m_off, m_on, m_on / m_off, c_on / c_off, s_off.threads,
               s_on.threads);
        if (out)
            fprintf(out, "%s,%s,%u,%.1f,%.1f,%.4f,%d,%d,%llu,%.3f,%.1f,%.1f,%.4f\n",
                    pairs[k].feature, pairs[k].name, W, m_off, m_on, m_on / m_off, s_off.threads,
                    s_on.threads, (unsigned long long)s_on.dropped_metrics, load, c_off, c_on,
                    c_on / c_off);
        fflush(stdout);
    }
    if (out)
        fclose(out);

    /* Batch size and max-wait: cartpole + MLP, every allowed CPU. Below
     * the default shard (32 envs) the shard shrinks with the batch, or the
     * batch could not be smaller than one shard. */
    const uint32_t batches[] = {8, 16, 32, 64, 128};
    const uint64_t waits[] = {0, 100, 1000, 10000};
    FILE *bout = batch_csv ? fopen(batch_csv, "w") : NULL;
    if (bout)
        fprintf(bout, "batch,max_wait_us,shard,workers,sps,mean_batch,threads,ext_load\n");
    printf("\n| batch | max-wait us | shard | steps/s | mean batch | threads |\n"
           "|---|---|---|---|---|---|\n");
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        for (size_t w = 0; w < sizeof waits / sizeof waits[0]; w++) {
            /* The full grid at two waits; the other waits at batch 64. */
            if ((waits[w] == 100 || waits[w] == 10000) && batches[b] != 64)
                continue;
            double sps[BENCH_MAX_REPEATS];
            ro_summary_t s = {0};
            double load = 0;
            for (int r = 0; r < repeats; r++) {
                ro_config_t c;
                char kv[64];
                bench_config(&c, &cartpole, W, seconds, kv);
                c.batch = batches[b];
                c.max_wait_us = waits[w];
                c.shard = batches[b] < 32 ? batches[b] : 0;
                double l;
                BENCH_QUIET(s = bench_run(&c), &l);
                load += l / repeats;
                sps[r] = s.sps;
            }
            double m = bench_median(sps, repeats);
            printf("| %u | %llu | %u | %.0f | %.1f | %d |\n", s.batch, (unsigned long long)waits[w],
                   s.shard, m, s.mean_batch, s.threads);
            if (bout)
                fprintf(bout, "%u,%llu,%u,%u,%.1f,%.2f,%d,%.3f\n", s.batch,
                        (unsigned long long)waits[w], s.shard, W, m, s.mean_batch, s.threads, load);
            fflush(stdout);
        }
    }
    if (bout)
        fclose(bout);
    return 0;
}
