/*
 * Scaling: steps/s with W = 1 .. cores workers, and efficiency(W) =
 * steps/s(W) / (W x steps/s(1)), for burn (50 us per step, a stand-in for
 * a physics engine) and for cartpole + MLP(64,64). The envs are the same at
 * every W (strong scaling). Each repeat runs every W in turn, so a burst of
 * noise hits one sample of each W rather than one W; medians are compared.
 *
 * usage: bench_scaling [--seconds S] [--repeats N] [--max-workers W] [--csv FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "runtime/thread_guard.h"

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    double seconds = 2.0;
    int repeats = 3, maxw = 0;
    const char *csv = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = bench_repeats(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-workers"))
            maxw = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--csv"))
            csv = argv[i + 1];
    }
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
