/*
 * Engine efficiency: node steps/s / (raw single-thread loop steps/s x cores
 * used), all measured in one run of this program.
 *
 * The raw loop is the least work one thread can do for the same result:
 * one forward pass over a batch of B envs, then step each env (with the same
 * auto-reset and time limit), with no actors, messages or threads. B is the
 * batch the node's learner lanes use, so both sides run the same sgemm
 * shapes. The node runs in this process with the same env, policy and
 * seeds, W workers, for a fixed time.
 *
 * Each side runs `repeats` times, alternating, and the medians are compared,
 * so a burst of noise on a shared machine moves one sample, not the ratio.
 *
 * usage: bench_engine [--seconds S] [--workers W] [--repeats N] [--csv FILE]
 *                     [--quiet-wait S] [--help]
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "runtime/clock.h"
#include "node/config.h"
#include "envs/registry.h"
#include "node/node.h"
#include "policy/policy.h"
#include "runtime/rng.h"
#include "runtime/thread_guard.h"
#include "runtime/topology.h"

typedef struct bench_case {
    const char *name;
    const char *env;
    const char *env_arg; /* "key=value" or NULL */
    ro_policy_kind_t policy;
    uint32_t num_envs;
} bench_case_t;

/* Steps per second of the raw loop over B envs, run for `seconds`. */
static double raw_loop(const bench_case_t *bc, uint32_t B, double seconds)
{
    ro_env_kind_t kind;
    char err[256];
    if (ro__env_open(&kind, bc->env, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    ro_env_arg_t in[1], args[1];
    size_t nin = 0, nargs = 0;
    char kv[64];
    if (bc->env_arg) {
        snprintf(kv, sizeof kv, "%s", bc->env_arg);
        char *eq = strchr(kv, '=');
        *eq = '\0';
        in[0].key = kv;
        in[0].value = eq + 1;
        nin = 1;
    }
    uint32_t max_steps;
    ro__env_check_args(kind.vt, in, nin, args, &nargs, &max_steps, err, sizeof err);

    void **envs = calloc(B, sizeof *envs);
    ro_rng_t *rng = calloc(B, sizeof *rng);
    ro_rng_t **rows = calloc(B, sizeof *rows);
    uint32_t *len = calloc(B, sizeof *len);
    for (uint32_t i = 0; i < B; i++) {
        kind.vt->create(&envs[i], args, nargs, ro__seed_mix(1, i, RO_STREAM_ENV), err, sizeof err);
        ro__rng_init(&rng[i], ro__seed_mix(1, i, RO_STREAM_ACTION));
        rows[i] = &rng[i];
    }
    ro_space_t os, as;
    kind.vt->spaces(envs[0], &os, &as);
    ro_policy_spec_t spec = {
        .kind = bc->policy, .hidden = {64, 64}, .nhidden = 2, .activation = RO_ACT_TANH, .seed = 1};
    ro_policy_t *p;
    if (ro__policy_new(&p, &spec, &os, &as, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    ro_policy_ws_t *ws;
    ro__policy_ws_new(&ws, p, B);
    uint32_t od = ro__policy_obs_dim(p), ad = ro__policy_act_dim(p);
    float *obs = ro__policy_ws_input(ws);
    int32_t *ai = calloc(B, sizeof *ai);
    float *af = calloc((size_t)B * ad, sizeof *af);
    for (uint32_t i = 0; i < B; i++)
        kind.vt->reset(envs[i], obs + (size_t)i * od);

    uint64_t steps = 0, t0 = ro__now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
    uint64_t now = t0;
    while (now < deadline) {
        for (int rep = 0; rep < 16; rep++) {
            ro__policy_act(p, ws, B, rows, ai, af);
            for (uint32_t i = 0; i < B; i++) {
                ro_action_t a;
                if (as.kind == RO_SPACE_DISCRETE)
                    a.discrete = ai[i];
                else
                    a.box = af + (size_t)i * ad;
                ro_step_t st = {0};
                float *o = obs + (size_t)i * od;
                kind.vt->step(envs[i], a, o, &st);
                if (st.terminated || st.truncated || (max_steps && ++len[i] >= max_steps)) {
                    len[i] = 0;
                    kind.vt->reset(envs[i], o);
                }
            }
            steps += B;
        }
        now = ro__now_ns();
    }
    double sps = (double)steps / ((double)(now - t0) * 1e-9);
    for (uint32_t i = 0; i < B; i++)
        kind.vt->destroy(envs[i]);
    ro__policy_ws_free(ws);
    ro__policy_free(p);
    ro__env_close(&kind);
    free(envs);
    free(rng);
    free(rows);
    free(len);
    free(ai);
    free(af);
    return sps;
}

static ro_summary_t node_run(const bench_case_t *bc, uint32_t workers, double seconds)
{
    ro_config_t c;
    ro__config_defaults(&c);
    c.env = bc->env;
    char kv[64];
    if (bc->env_arg) {
        snprintf(kv, sizeof kv, "%s", bc->env_arg);
        char *eq = strchr(kv, '=');
        *eq = '\0';
        c.env_args[0].key = kv;
        c.env_args[0].value = eq + 1;
        c.nenv_args = 1;
    }
    c.policy.kind = bc->policy;
    c.num_envs = bc->num_envs;
    c.workers = workers;
    c.seconds = seconds;
    c.quiet = true;
    ro_node_t *n;
    char err[256];
    if (ro_node_new(&n, &c, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    ro_node_run(n);
    ro_summary_t s;
    ro_node_summary(n, &s);
    ro_node_free(n);
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct engine_opts {
    double seconds, quiet_wait;
    uint32_t repeats, workers;
    const char *csv;
    bool help;
} engine_opts_t;

#define AT(field) offsetof(engine_opts_t, field)
static const ro_flag_t engine_flags[] = {
    {RO_FLAG_SECONDS, "seconds", "S", AT(seconds), 10, .help = "each run (default 3)"},
    {RO_FLAG_U32, "workers", "W", AT(workers), 1, 1024,
     .help = "the node's workers (default: allowed CPUs)"},
    {RO_FLAG_U32, "repeats", "N", AT(repeats), 1, BENCH_MAX_REPEATS,
     .help = "runs of each side, alternating; medians (default 3)"},
    {RO_FLAG_STRING, "csv", "FILE", AT(csv), .help = "also write the table as CSV"},
    {RO_FLAG_SECONDS, "quiet-wait", "S", AT(quiet_wait), 0, .help = BENCH_QUIET_WAIT_HELP},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    engine_opts_t o = {.seconds = 3.0, .repeats = 3, .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_engine",
                "usage: bench_engine [options]\n\nEngine efficiency: a node's steps/s over W x a "
                "raw single-thread loop's,\nmeasured in one run (docs/benchmarks.md).\n\n",
                engine_flags, sizeof engine_flags / sizeof engine_flags[0], &o, &o.help, argc, argv,
                NULL);
    bench_quiet_wait_s = o.quiet_wait;
    double seconds = o.seconds;
    int repeats = (int)o.repeats;
    uint32_t workers = o.workers;
    const char *csv = o.csv;
    if (workers == 0) {
        ro_topology_t t;
        char err[128];
        ro__topology_read(&t, err, sizeof err);
        workers = (uint32_t)t.ncpus;
        ro__topology_free(&t);
    }
    const bench_case_t cases[] = {
        {"cartpole+random", "cartpole", NULL, RO_POLICY_RANDOM, 256},
        {"cartpole+mlp64x64", "cartpole", NULL, RO_POLICY_MLP, 256},
        {"pendulum+mlp64x64", "pendulum", NULL, RO_POLICY_MLP, 256},
        {"burn50us+mlp64x64", "burn", "cost_us=50", RO_POLICY_MLP, 64},
    };
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (out)
        fprintf(out, "case,workers,batch,raw_sps,node_sps,efficiency,threads,ext_load\n");
    printf("| case | W | batch | raw 1-thread steps/s | node steps/s | efficiency | threads |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bench_case_t *bc = &cases[i];
        double node_sps[15], raw_sps[15];
        ro_summary_t s = {0};
        double load = 0, l; /* CPUs other processes used (bench_util.h) */
        for (int r = 0; r < repeats; r++) {
            BENCH_QUIET(s = node_run(bc, workers, seconds), &l);
            load += l / (2 * repeats);
            node_sps[r] = s.sps;
            BENCH_QUIET(raw_sps[r] = raw_loop(bc, s.batch, seconds), &l);
            load += l / (2 * repeats);
        }
        double node = median(node_sps, repeats), raw = median(raw_sps, repeats);
        double eff = node / (raw * workers);
        printf("| %s | %u | %u | %.0f | %.0f | %.3f | %d |\n", bc->name, workers, s.batch, raw,
               node, eff, s.threads);
        if (out)
            fprintf(out, "%s,%u,%u,%.1f,%.1f,%.4f,%d,%.3f\n", bc->name, workers, s.batch, raw, node,
                    eff, s.threads, load);
        fflush(stdout);
    }
    if (out)
        fclose(out);
    return 0;
}
