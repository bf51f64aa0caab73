/*
 * MuJoCo envs (issue 17), as ratios within one run of this program:
 *
 *  - efficiency: a node with 1 worker, 64 envs and the random policy, over a
 *    raw single-thread loop on the same shared model: 64 mjData, uniform
 *    random controls, mj_step x frame_skip per env step (ant: then
 *    mj_rnePostConstraint, as Gymnasium and the env do), and the env's own
 *    termination test and reset (mj_resetData, the same noise, mj_forward)
 *    so both sides simulate the same states; no observations, rewards,
 *    actors or messages. Target >= 0.9.
 *  - scaling: steps/s with 2 workers (64 envs each) over 2 x steps/s with 1
 *    (64 envs), random policy. Target >= 0.95.
 *  - hopper + MLP(64,64): node steps/s with 1 and 2 workers, and where one
 *    env step's CPU time goes: the raw loop's time per env step (env) and
 *    the policy's forward pass and sampling per row at the node's batch size
 *    (policy), each measured alone on one thread.
 *
 * Each figure's two sides alternate, `repeats` times, and medians are
 * compared; a sample taken while other processes used the CPUs is retried
 * (bench_util.h). Beside each throughput ratio, the same ratio of CPU
 * time per env step (getrusage of this process, every thread): other
 * processes on a shared machine take CPU time away from a sample, and
 * change its CPU time per step much less (by the cost of being
 * preempted: kernel time, caches refilled).
 *
 * usage: bench_mujoco [options] (--help lists them)
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "mj_raw.h"
#include "runtime/clock.h"
#include "envs/registry.h"
#include "envs/mujoco/mj_envs.h"
#include "policy/policy.h"
#include "runtime/rng.h"
#include "runtime/flags.h"
#include "runtime/thread_guard.h"

#define RAW_ENVS 64

/* Rows per second of the MLP(64,64) forward pass and Gaussian sampling for
 * env's spaces at batch B, on one thread. */
static double policy_rows(const char *env, uint32_t B, double seconds)
{
    ro_env_kind_t kind;
    void *probe;
    bench_mj_probe("bench_mujoco", env, &kind, &probe);
    char err[256];
    ro_space_t os, as;
    kind.vt->spaces(probe, &os, &as);
    ro_policy_spec_t spec = {
        .kind = RO_POLICY_MLP, .hidden = {64, 64}, .nhidden = 2, .activation = RO_ACT_TANH};
    ro_policy_t *p;
    ro_policy_ws_t *ws;
    if (ro__policy_new(&p, &spec, &os, &as, err, sizeof err) || ro__policy_ws_new(&ws, p, B)) {
        fprintf(stderr, "bench_mujoco: %s\n", err);
        exit(1);
    }
    ro_rng_t *rng = calloc(B, sizeof *rng), **rows = calloc(B, sizeof *rows);
    float *af = calloc((size_t)B * as.shape[0], sizeof *af);
    float *in = ro__policy_ws_input(ws);
    for (uint32_t i = 0; i < B; i++) {
        ro__rng_init(&rng[i], i);
        rows[i] = &rng[i];
        kind.vt->reset(probe, in + (size_t)i * os.shape[0]);
    }
    uint64_t n = 0, t0 = ro__now_ns(), now = t0;
    const uint64_t deadline = t0 + (uint64_t)(seconds * 1e9);
    while (now < deadline) {
        for (int k = 0; k < 64; k++)
            ro__policy_act(p, ws, B, rows, NULL, af, NULL, NULL);
        n += 64ull * B;
        now = ro__now_ns();
    }
    free(rng);
    free(rows);
    free(af);
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    kind.vt->destroy(probe);
    ro__env_close(&kind);
    return (double)n / ((double)(now - t0) * 1e-9);
}

/* node runs an in-process node; *cpu gets its CPU seconds per env step
 * (every thread, set-up and tear-down included). */
static ro_summary_t node(const char *env, ro_policy_kind_t pol, uint32_t envs, uint32_t w,
                         double seconds, double *cpu)
{
    const bench_node_t b = {env, NULL, pol, envs};
    ro_config_t c;
    char kv[64];
    bench_config(&c, &b, w, seconds, kv);
    const double c0 = bench_cpu_s(RUSAGE_SELF);
    ro_summary_t s = bench_run(&c);
    *cpu = (bench_cpu_s(RUSAGE_SELF) - c0) / (double)(s.steps ? s.steps : 1);
    return s;
}

static const char *const env_names[] = {"hopper", "walker2d",          "half_cheetah",
                                        "ant",    "inverted_pendulum", NULL};

typedef struct mujoco_opts {
    double seconds, quiet_wait;
    uint32_t repeats, raw_envs, raw_threads;
    const char *csv;
    int env; /* an index into env_names, or -1: all */
    bool help;
} mujoco_opts_t;

#define AT(field) offsetof(mujoco_opts_t, field)
static const ro_flag_t mujoco_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds), 10, .help = "each run (default 2)"},
    {RO_FLAG_U32, "repeats", "N", AT(repeats), 1, BENCH_MAX_REPEATS,
     .help = "runs of each side, alternating; medians (default 3)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "also write the table as CSV"},
    {RO_FLAG_CHOICE, "env", "NAME", AT(env), .choices = env_names,
     .help = "only this env's figures (the MLP ones only for hopper)"},
    {RO_FLAG_SECONDS, "quiet-wait", "S", AT(quiet_wait), 0, .help = BENCH_QUIET_WAIT_HELP},
    {RO_FLAG_U32, "raw-envs", "N", AT(raw_envs), 1, 1u << 16,
     .help = "only the raw loop, over N simulations of --env, once: prints\n"
             "\"raw STEPS_PER_S CPU_S_PER_STEP\" (bench_gym.py's reference)"},
    {RO_FLAG_U32, "raw-threads", "T", AT(raw_threads), 1, 256,
     .help = "with --raw-envs: T pinned threads, N/T simulations each,\n"
             "a barrier after every step of all (a synchronous step's least cost)"},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    mujoco_opts_t o = {.seconds = 2.0,
                       .repeats = 3,
                       .raw_threads = 1,
                       .env = -1,
                       .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_mujoco",
                "usage: bench_mujoco [options]\n\nThe MuJoCo envs: a node over a raw mj_step loop "
                "(1 worker), W=2 scaling,\nhopper + MLP(64,64) (docs/benchmarks.md).\n\n",
                mujoco_flags, sizeof mujoco_flags / sizeof mujoco_flags[0], &o, &o.help, argc, argv,
                NULL);
    bench_quiet_wait_s = o.quiet_wait;
    const double seconds = o.seconds;
    const int repeats = (int)o.repeats;
    const char *csv = o.csv, *only = o.env >= 0 ? env_names[o.env] : NULL;
    if (o.raw_envs > 0) {
        /* The machine's limit for N envs of one kind on one core: the
         * same simulations, states and memory as N envs, nothing else. */
        double cpu = 0;
        const double sps =
            bench_mj_raw(only ? only : "hopper", o.raw_envs, o.raw_threads, seconds, &cpu);
        printf("raw %.1f %.9f\n", sps, cpu);
        return 0;
    }
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (csv && !out) {
        fprintf(stderr, "bench_mujoco: cannot write %s\n", csv);
        return 1;
    }
    if (out)
        fprintf(out, "figure,env,policy,workers,num_envs,base_sps,sps,ratio,min_ratio,max_ratio,"
                     "env_share,threads,ext_load,cpu_ratio\n");
    const int cpus = bench_allowed_cpus();
    printf("| figure | env | W | envs | base steps/s | steps/s | ratio (min..max) | CPU-time ratio "
           "| threads |\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t k = 0; env_names[k] != NULL; k++) {
        const char *env = env_names[k];
        if (only && strcmp(only, env) != 0)
            continue;
        /* efficiency: node(W=1, random) / raw loop, alternating */
        double raw[BENCH_MAX_REPEATS], one[BENCH_MAX_REPEATS], two[BENCH_MAX_REPEATS];
        double eff[BENCH_MAX_REPEATS], scal[BENCH_MAX_REPEATS], load = 0, l;
        /* CPU seconds per env step of each side: other processes take CPU
         * time from a sample, much less from its CPU time per step. */
        double c_raw[BENCH_MAX_REPEATS], c_one[BENCH_MAX_REPEATS], c_two[BENCH_MAX_REPEATS];
        double c_eff[BENCH_MAX_REPEATS], c_scal[BENCH_MAX_REPEATS];
        ro_summary_t s1 = {0}, s2 = {0};
        for (int r = 0; r < repeats; r++) {
            BENCH_QUIET(raw[r] = bench_mj_raw(env, RAW_ENVS, 1, seconds, &c_raw[r]), &l);
            load += l / (3 * repeats);
            BENCH_QUIET(s1 = node(env, RO_POLICY_RANDOM, RAW_ENVS, 1, seconds, &c_one[r]), &l);
            load += l / (3 * repeats);
            one[r] = s1.sps;
            eff[r] = one[r] / raw[r];
            c_eff[r] = c_raw[r] / c_one[r];
            if (cpus >= 2) {
                BENCH_QUIET(s2 = node(env, RO_POLICY_RANDOM, 2 * RAW_ENVS, 2, seconds, &c_two[r]),
                            &l);
                load += l / (3 * repeats);
                two[r] = s2.sps;
                scal[r] = two[r] / (2 * one[r]);
                c_scal[r] = c_one[r] / c_two[r];
            }
        }
        double e_min = eff[0], e_max = eff[0], s_min = scal[0], s_max = scal[0];
        for (int r = 1; r < repeats; r++) {
            e_min = eff[r] < e_min ? eff[r] : e_min;
            e_max = eff[r] > e_max ? eff[r] : e_max;
            s_min = scal[r] < s_min ? scal[r] : s_min;
            s_max = scal[r] > s_max ? scal[r] : s_max;
        }
        double m_raw = bench_median(raw, repeats), m_one = bench_median(one, repeats);
        double m_eff = bench_median(eff, repeats), mc_eff = bench_median(c_eff, repeats);
        printf("| efficiency | %s | 1 | %d | %.0f | %.0f | %.3f (%.3f..%.3f) | %.3f | %d |\n", env,
               RAW_ENVS, m_raw, m_one, m_eff, e_min, e_max, mc_eff, s1.threads);
        if (out)
            fprintf(out, "efficiency,%s,random,1,%d,%.1f,%.1f,%.4f,%.4f,%.4f,,%d,%.3f,%.4f\n", env,
                    RAW_ENVS, m_raw, m_one, m_eff, e_min, e_max, s1.threads, load, mc_eff);
        if (cpus >= 2) {
            double m_two = bench_median(two, repeats), m_s = bench_median(scal, repeats);
            double mc_s = bench_median(c_scal, repeats);
            printf("| scaling | %s | 2 | %d | %.0f | %.0f | %.3f (%.3f..%.3f) | %.3f | %d |\n", env,
                   2 * RAW_ENVS, 2 * m_one, m_two, m_s, s_min, s_max, mc_s, s2.threads);
            if (out)
                fprintf(out, "scaling,%s,random,2,%d,%.1f,%.1f,%.4f,%.4f,%.4f,,%d,%.3f,%.4f\n", env,
                        2 * RAW_ENVS, 2 * m_one, m_two, m_s, s_min, s_max, s2.threads, load, mc_s);
        }
        fflush(stdout);
    }

    /* hopper + MLP(64,64): node steps/s at W = 1 and 2; env vs policy. */
    for (int w = 1; w <= (cpus >= 2 ? 2 : 1) && (!only || !strcmp(only, "hopper")); w++) {
        double sps[BENCH_MAX_REPEATS], env_t[BENCH_MAX_REPEATS], pol_t[BENCH_MAX_REPEATS];
        double load = 0, l;
        ro_summary_t s = {0};
        for (int r = 0; r < repeats; r++) {
            double unused;
            BENCH_QUIET(s = node("hopper", RO_POLICY_MLP, (uint32_t)(RAW_ENVS * w), (uint32_t)w,
                                 seconds, &unused),
                        &l);
            load += l / (3 * repeats);
            sps[r] = s.sps;
            double rs = 0, ps = 0;
            BENCH_QUIET(rs = bench_mj_raw("hopper", RAW_ENVS, 1, seconds, &unused), &l);
            load += l / (3 * repeats);
            BENCH_QUIET(ps = policy_rows("hopper", s.batch ? s.batch : 1, seconds), &l);
            load += l / (3 * repeats);
            env_t[r] = 1.0 / rs;
            pol_t[r] = 1.0 / ps;
        }
        double m = bench_median(sps, repeats), te = bench_median(env_t, repeats);
        double tp = bench_median(pol_t, repeats);
        double ideal = w / (te + tp), share = te / (te + tp);
        printf("| hopper+mlp64x64 | hopper | %d | %d | %.0f (ideal) | %.0f | %.3f | %d |\n", w,
               RAW_ENVS * w, ideal, m, m / ideal, s.threads);
        printf("  per env step, one thread: env %.2f us, policy %.2f us (batch %u): env share "
               "%.1f%%\n",
               te * 1e6, tp * 1e6, s.batch, 100 * share);
        if (out)
            fprintf(out, "mlp,hopper,mlp64x64,%d,%d,%.1f,%.1f,%.4f,,,%.4f,%d,%.3f,\n", w,
                    RAW_ENVS * w, ideal, m, m / ideal, share, s.threads, load);
    }
    if (out)
        fclose(out);
    return 0;
}
