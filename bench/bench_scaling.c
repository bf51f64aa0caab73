/*
 * Scaling: steps/s with W = 1 .. cores workers, and efficiency(W) =
 * steps/s(W) / (W x steps/s(1)), for burn (50 us per step, a stand-in for
 * a physics engine) and for cartpole + MLP(64,64). The envs are the same at
 * every W (strong scaling). Each repeat runs every W in turn, so a burst of
 * noise hits one sample of each W rather than one W; medians are compared.
 *
 * usage: bench_scaling [--seconds S] [--repeats N] [--max-workers W] [--csv FILE]
 *                      [--quiet-wait S] [--help]
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "runtime/thread_guard.h"

typedef struct scaling_opts {
    double seconds, quiet_wait;
    uint32_t repeats, max_workers;
    const char *csv;
    bool help;
} scaling_opts_t;

#define AT(field) offsetof(scaling_opts_t, field)
static const ro_flag_t scaling_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds), 10, .help = "each run (default 2)"},
    {RO_FLAG_U32, "repeats", "N", AT(repeats), 1, BENCH_MAX_REPEATS,
     .help = "runs of each W; medians (default 3)"},
    {RO_FLAG_U32, "max-workers", "W", AT(max_workers), 1, 1024,
     .help = "largest W (default: allowed CPUs)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "also write the table as CSV"},
    {RO_FLAG_SECONDS, "quiet-wait", "S", AT(quiet_wait), 0, .help = BENCH_QUIET_WAIT_HELP},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    scaling_opts_t o = {.seconds = 2.0, .repeats = 3, .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_scaling",
                "usage: bench_scaling [options]\n\nStrong scaling: steps/s at W = 1 ... allowed "
                "CPUs, and W x steps/s(1)\nover it (docs/benchmarks.md).\n\n",
                scaling_flags, sizeof scaling_flags / sizeof scaling_flags[0], &o, &o.help, argc,
                argv, NULL);
    bench_quiet_wait_s = o.quiet_wait;
    double seconds = o.seconds;
    int repeats = (int)o.repeats, maxw = (int)o.max_workers;
    const char *csv = o.csv;
    int cores = bench_allowed_cpus();
    if (maxw <= 0 || maxw > cores)
        maxw = cores;
    /* Enough envs that every worker has a full lane at the largest W. */
    const bench_node_t cases[] = {
        {"burn", "cost_us=50", RO_POLICY_MLP, (uint32_t)(32 * maxw)},
        {"cartpole", NULL, RO_POLICY_MLP, (uint32_t)(128 * maxw)},
    };
    const char *names[] = {"burn50us+mlp64x64", "cartpole+mlp64x64"};
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (csv && !out) {
        fprintf(stderr, "bench_scaling: cannot write %s\n", csv);
        return 1;
    }
    if (out)
        fprintf(out, "case,workers,cores,num_envs,sps,efficiency,threads,steals,ext_load\n");
    printf("| case | W | envs | steps/s | efficiency | threads |\n|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double sps[64][BENCH_MAX_REPEATS];
        int threads[64] = {0};
        unsigned long long steals[64] = {0};
        double load[64] = {0}; /* CPUs other processes used, mean over repeats */
        for (int r = 0; r < repeats; r++) {
            for (int w = 1; w <= maxw && w <= 64; w++) {
                ro_config_t c;
                char kv[64];
                bench_config(&c, &cases[k], (uint32_t)w, seconds, kv);
                ro_summary_t s;
                double l;
                BENCH_QUIET(s = bench_run(&c), &l);
                load[w - 1] += l / repeats;
                sps[w - 1][r] = s.sps;
                threads[w - 1] = s.threads;
                steals[w - 1] = (unsigned long long)s.steals;
            }
        }
        double base = bench_median(sps[0], repeats);
        for (int w = 1; w <= maxw && w <= 64; w++) {
            double m = w == 1 ? base : bench_median(sps[w - 1], repeats);
            double eff = m / (w * base);
            printf("| %s | %d | %u | %.0f | %.3f | %d |\n", names[k], w, cases[k].num_envs, m, eff,
                   threads[w - 1]);
            if (out)
                fprintf(out, "%s,%d,%d,%u,%.1f,%.4f,%d,%llu,%.3f\n", names[k], w, cores,
                        cases[k].num_envs, m, eff, threads[w - 1], steals[w - 1], load[w - 1]);
        }
        fflush(stdout);
    }
    if (out)
        fclose(out);
    return 0;
}
