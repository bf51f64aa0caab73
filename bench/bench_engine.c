/*
 * The node against the machine, all measured in one run of this program.
 *
 * Two yardsticks, both single-thread loops with no actors, messages or
 * threads, over B envs (B: the batch the node's lanes use):
 *
 *  - the machine: step every env, and run the OpenBLAS forward pass of the
 *    same network with ReLU (cblas_sgemm per layer, row-major, bias and
 *    relu, actions by argmax), B envs at a time. What the hardware gives
 *    with a standard BLAS, whatever our kernels are. The node's steps/s
 *    divided by W x this is "of machine", for relu and tanh networks alike
 *    (the yardstick is always the ReLU network).
 *  - the same kernels: the same loop with the project's own policy
 *    (forward and sampling, the node's activation and kernels):
 *    "efficiency", the engine's own overhead.
 *
 * Also, for the record, the env loop alone and OpenBLAS's forward alone.
 * And the same ratio in CPU time, which holds on a shared machine: the
 * node's steps per CPU-second of its process (every thread) against the
 * machine loop's steps per CPU-second of its thread. On a quiet machine
 * with every worker busy the two ratios agree; under load the wall-clock
 * one falls with the CPU share the node got, the CPU-time one does not.
 * With --node PATH the node side is that rollout-node binary instead (run
 * with --json; e.g. the previous commit's build), so its ratio to the same
 * machine yardstick can be set beside this build's; the same-kernel column
 * is then not measured.
 * Each side runs `repeats` times, alternating, and the medians are
 * compared, so a burst of noise on a shared machine moves one sample, not
 * the ratio.
 *
 * usage: bench_engine [--seconds S] [--workers W] [--repeats N] [--csv FILE]
 *                     [--quiet-wait S] [--node PATH] [--help]
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "bench_blas.h"
#include "bench_util.h"
#include "envs/registry.h"
#include "policy/policy.h"
#include "runtime/clock.h"
#include "runtime/rng.h"
#include "runtime/thread_guard.h"

typedef struct bench_case {
    const char *name;
    bench_node_t node;
    ro_activation_t act;
    bool machine; /* measure the machine yardstick (MLP 64-64 cases) */
} bench_case_t;

/* The raw side of one case: B envs stepped in a loop. */
typedef struct raw {
    ro_env_kind_t kind;
    void **envs;
    uint32_t *len, max_steps, od, B;
    ro_space_t as;
    float *obs;
    int32_t *ai;
    float *af;
} raw_t;

static void raw_open(raw_t *r, const bench_case_t *bc, uint32_t B, float *obs)
{
    char err[256], kv[64];
    memset(r, 0, sizeof *r);
    if (ro__env_open(&r->kind, bc->node.env, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    ro_env_arg_t in[1], args[1];
    size_t nin = 0, nargs = 0;
    if (bc->node.env_arg) {
        snprintf(kv, sizeof kv, "%s", bc->node.env_arg);
        char *eq = strchr(kv, '=');
        *eq = '\0';
        in[0] = (ro_env_arg_t){.key = kv, .value = eq + 1};
        nin = 1;
    }
    ro__env_check_args(r->kind.vt, in, nin, args, &nargs, &r->max_steps, err, sizeof err);
    r->B = B;
    r->envs = calloc(B, sizeof *r->envs);
    r->len = calloc(B, sizeof *r->len);
    for (uint32_t i = 0; i < B; i++)
        r->kind.vt->create(&r->envs[i], args, nargs, ro__seed_mix(1, i, RO_STREAM_ENV), err,
                           sizeof err);
    ro_space_t os;
    r->kind.vt->spaces(r->envs[0], &os, &r->as);
    r->od = (uint32_t)ro_space_size(&os);
    r->obs = obs ? obs : calloc((size_t)B * r->od, sizeof(float));
    r->ai = calloc(B, sizeof *r->ai);
    r->af = calloc((size_t)B * ro_space_size(&r->as), sizeof(float));
    for (uint32_t i = 0; i < B; i++)
        r->kind.vt->reset(r->envs[i], r->obs + (size_t)i * r->od);
}

static void raw_close(raw_t *r, bool own_obs)
{
    for (uint32_t i = 0; i < r->B; i++)
        r->kind.vt->destroy(r->envs[i]);
    ro__env_close(&r->kind);
    free(r->envs);
    free(r->len);
    free(r->ai);
    free(r->af);
    if (own_obs)
        free(r->obs);
}

/* raw_step steps every env with the actions in r->ai / r->af, with the
 * node's auto-reset and time limit. */
static void raw_step(raw_t *r)
{
    const size_t ad = ro_space_size(&r->as);
    for (uint32_t i = 0; i < r->B; i++) {
        ro_action_t a;
        if (r->as.kind == RO_SPACE_DISCRETE)
            a.discrete = r->ai[i];
        else
            a.box = r->af + (size_t)i * ad;
        ro_step_t st = {0};
        float *o = r->obs + (size_t)i * r->od;
        r->kind.vt->step(r->envs[i], a, o, &st);
        if (st.terminated || st.truncated || (r->max_steps && ++r->len[i] >= r->max_steps)) {
            r->len[i] = 0;
            r->kind.vt->reset(r->envs[i], o);
        }
    }
}

typedef enum { LOOP_SAME, LOOP_MACHINE, LOOP_ENV, LOOP_BLAS } loop_t;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* raw_loop runs one yardstick loop for `seconds`; returns steps/s (or
 * forward rows/s for LOOP_BLAS). */
static double raw_loop(const bench_case_t *bc, uint32_t B, loop_t kind, double seconds,
                       double *cpu_sps)
{
    ro_policy_t *p = NULL;
    ro_policy_ws_t *ws = NULL;
    ro_rng_t *rng = NULL, **rows = NULL;
    blas_net_t net = {0};
    raw_t r;
    if (kind == LOOP_SAME) {
        /* The node's own policy, fed straight from the envs. */
        raw_t probe;
        raw_open(&probe, bc, 1, NULL);
        ro_space_t os;
        probe.kind.vt->spaces(probe.envs[0], &os, &probe.as);
        ro_policy_spec_t spec = {.kind = bc->node.policy,
                                 .hidden = {64, 64},
                                 .nhidden = 2,
                                 .activation = bc->act,
                                 .seed = 1};
        char err[256];
        if (ro__policy_new(&p, &spec, &os, &probe.as, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
        raw_close(&probe, true);
        ro__policy_ws_new(&ws, p, B);
        raw_open(&r, bc, B, ro__policy_ws_input(ws));
        rng = calloc(B, sizeof *rng);
        rows = calloc(B, sizeof *rows);
        for (uint32_t i = 0; i < B; i++) {
            ro__rng_init(&rng[i], ro__seed_mix(1, i, RO_STREAM_ACTION));
            rows[i] = &rng[i];
        }
    } else {
        raw_open(&r, bc, B, NULL);
        if (kind != LOOP_ENV)
            blas_net_init(&net, r.od, r.as.kind == RO_SPACE_DISCRETE ? r.as.n : 1, B);
    }
    const double c0 = thread_cpu_s();
    uint64_t steps = 0, t0 = ro__now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9), now = t0;
    while (now < deadline) {
        for (int rep = 0; rep < 16; rep++) {
            if (kind == LOOP_SAME)
                ro__policy_act(p, ws, B, rows, r.ai, r.af, NULL, NULL);
            else if (kind == LOOP_MACHINE || kind == LOOP_BLAS)
                blas_forward(&net, r.obs, B, r.ai);
            else
                for (uint32_t i = 0; i < B; i++)
                    r.ai[i] = (int32_t)((steps / B + i) & 1); /* alternate pushes */
            if (kind != LOOP_BLAS)
                raw_step(&r);
            steps += B;
        }
        now = ro__now_ns();
    }
    const double sps = (double)steps / ((double)(now - t0) * 1e-9);
    if (cpu_sps)
        *cpu_sps = (double)steps / (thread_cpu_s() - c0);
    raw_close(&r, kind != LOOP_SAME);
    if (kind == LOOP_SAME) {
        ro__policy_ws_free(ws);
        ro__policy_free(p);
        free(rng);
        free(rows);
    } else if (kind != LOOP_ENV) {
        blas_net_free(&net);
    }
    return sps;
}

/* json_number returns the number after "key": in a JSON line, or NAN. */
static double json_number(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(line, pat);
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* external_run runs the rollout-node binary at `node` for one case and
 * reads its --json summary. */
static ro_summary_t external_run(const char *node, const bench_case_t *bc, uint32_t workers,
                                 double seconds)
{
    char envs[16], w[16], secs[32];
    snprintf(envs, sizeof envs, "%u", bc->node.num_envs);
    snprintf(w, sizeof w, "%u", workers);
    snprintf(secs, sizeof secs, "%g", seconds);
    /* --seed 1: the seed of the in-process runs, so both sides step the same
     * episodes (a node without --seed draws a fresh one). */
    const char *argv[22] = {node,        "--env",  bc->node.env, "--num-envs", envs,
                            "--workers", w,        "--seconds",  secs,         "--json",
                            "--quiet",   "--seed", "1"};
    int argc = 13;
    if (bc->node.policy == RO_POLICY_RANDOM) { /* --activation would be refused */
        argv[argc++] = "--policy";
        argv[argc++] = "random";
    } else {
        argv[argc++] = "--activation";
        argv[argc++] = bc->act == RO_ACT_RELU ? "relu" : "tanh";
    }
    if (bc->node.env_arg) {
        argv[argc++] = "--env-arg";
        argv[argc++] = bc->node.env_arg;
    }
    int fd[2];
    if (pipe(fd) != 0) {
        perror("bench_engine: pipe");
        exit(1);
    }
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        const int null = open("/dev/null", O_WRONLY); /* its summary line */
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(node, (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    static char buf[1 << 16];
    size_t n = 0;
    ssize_t got;
    while (n + 1 < sizeof buf && (got = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)got;
    buf[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const char *line = strstr(buf, "{");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line) {
        fprintf(stderr, "bench_engine: %s failed (status %d)\n", node, status);
        exit(1);
    }
    ro_summary_t s = {0};
    s.sps = json_number(line, "sps");
    s.steps = (uint64_t)json_number(line, "steps");
    s.batch = (uint32_t)json_number(line, "batch");
    s.threads = (int)json_number(line, "threads");
    return s;
}

static ro_summary_t node_run(const bench_case_t *bc, uint32_t workers, double seconds)
{
    ro_config_t c;
    char kv[64];
    bench_config(&c, &bc->node, workers, seconds, kv);
    c.policy.activation = bc->act;
    return bench_run(&c);
}

typedef struct engine_opts {
    double seconds, quiet_wait;
    uint32_t repeats, workers;
    const char *csv, *node;
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
    {RO_FLAG_STRING, "node", "PATH", AT(node),
     .help = "run that rollout-node binary (e.g. the previous\ncommit's) as the node side"},
    {RO_FLAG_BOOL, "help", NULL, AT(help), .help = "this text"},
};

int main(int argc, char **argv)
{
    ro__threads_single_blas(argv);
    engine_opts_t o = {.seconds = 3.0, .repeats = 3, .quiet_wait = bench_quiet_wait_s};
    bench_parse("bench_engine",
                "usage: bench_engine [options]\n\nThe node against the machine (the env loop and "
                "OpenBLAS's\nReLU forward, W x one thread) and against a loop over its own\n"
                "kernels, in wall-clock and CPU time, measured in one run\n"
                "(docs/benchmarks.md).\n\n",
                engine_flags, sizeof engine_flags / sizeof engine_flags[0], &o, &o.help, argc, argv,
                NULL);
    bench_quiet_wait_s = o.quiet_wait;
    double seconds = o.seconds;
    int repeats = (int)o.repeats;
    uint32_t workers = o.workers;
    const char *csv = o.csv, *external = o.node;
    if (workers == 0)
        workers = (uint32_t)bench_allowed_cpus();
    const bench_case_t cases[] = {
        {"cartpole+random", {"cartpole", NULL, RO_POLICY_RANDOM, 256}, RO_ACT_TANH, false},
        {"cartpole+mlp64x64", {"cartpole", NULL, RO_POLICY_MLP, 256}, RO_ACT_RELU, true},
        {"cartpole+mlp64x64", {"cartpole", NULL, RO_POLICY_MLP, 256}, RO_ACT_TANH, true},
        {"cartpole+mlp64x64", {"cartpole", NULL, RO_POLICY_MLP, 1024}, RO_ACT_RELU, true},
        {"cartpole+mlp64x64", {"cartpole", NULL, RO_POLICY_MLP, 1024}, RO_ACT_TANH, true},
        {"pendulum+mlp64x64", {"pendulum", NULL, RO_POLICY_MLP, 256}, RO_ACT_TANH, false},
        {"burn50us+mlp64x64", {"burn", "cost_us=50", RO_POLICY_MLP, 64}, RO_ACT_TANH, false},
    };
    FILE *out = csv ? fopen(csv, "w") : NULL;
    if (csv && !out) {
        fprintf(stderr, "bench_engine: cannot write %s\n", csv);
        return 1;
    }
    if (out)
        fprintf(out, "case,activation,envs,workers,batch,kernels,raw_sps,node_sps,efficiency,"
                     "machine_sps,of_machine,env_sps,blas_fwd_sps,threads,ext_load,node_cpu_sps,"
                     "machine_cpu_sps,of_machine_cpu\n");
    printf(
        "| case | act | envs | W | batch | kernels | same-kernel loop | node steps/s | "
        "efficiency | machine loop | node / (W x machine) | same, CPU time | env loop | OpenBLAS "
        "fwd rows/s | threads |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bench_case_t *bc = &cases[i];
        double node[BENCH_MAX_REPEATS], same[BENCH_MAX_REPEATS], mach[BENCH_MAX_REPEATS];
        double envl[BENCH_MAX_REPEATS], blas[BENCH_MAX_REPEATS];
        double node_cpu[BENCH_MAX_REPEATS], mach_cpu[BENCH_MAX_REPEATS];
        ro_summary_t s = {0};
        double load = 0, l; /* CPUs other processes used (bench_util.h) */
        const int sides = bc->machine ? 5 : 2;
        for (int r = 0; r < repeats; r++) {
            double c0 = 0;
            if (external)
                BENCH_QUIET((c0 = bench_cpu_s(RUSAGE_CHILDREN),
                             s = external_run(external, bc, workers, seconds)),
                            &l);
            else
                BENCH_QUIET((c0 = bench_cpu_s(RUSAGE_SELF), s = node_run(bc, workers, seconds)),
                            &l);
            node_cpu[r] =
                (double)s.steps / (bench_cpu_s(external ? RUSAGE_CHILDREN : RUSAGE_SELF) - c0);
            load += l / (sides * repeats);
            node[r] = s.sps;
            if (external)
                same[r] = NAN; /* that binary's kernels are not in this program */
            else
                BENCH_QUIET(same[r] = raw_loop(bc, s.batch, LOOP_SAME, seconds, NULL), &l);
            load += l / (sides * repeats);
            if (!bc->machine)
                continue;
            BENCH_QUIET(mach[r] = raw_loop(bc, s.batch, LOOP_MACHINE, seconds, &mach_cpu[r]), &l);
            load += l / (sides * repeats);
            BENCH_QUIET(envl[r] = raw_loop(bc, s.batch, LOOP_ENV, seconds / 2, NULL), &l);
            load += l / (sides * repeats);
            BENCH_QUIET(blas[r] = raw_loop(bc, s.batch, LOOP_BLAS, seconds / 2, NULL), &l);
            load += l / (sides * repeats);
        }
        const double n = bench_median(node, repeats), sm = bench_median(same, repeats);
        const double m = bc->machine ? bench_median(mach, repeats) : NAN;
        const double e = bc->machine ? bench_median(envl, repeats) : NAN;
        const double b = bc->machine ? bench_median(blas, repeats) : NAN;
        const double nc = bench_median(node_cpu, repeats);
        const double mc = bc->machine ? bench_median(mach_cpu, repeats) : NAN;
        const char *act = bc->node.policy == RO_POLICY_RANDOM ? "-"
                          : bc->act == RO_ACT_RELU            ? "relu"
                                                              : "tanh";
        const char *kern = external ? "external" : ro__kernels(RO_KERNELS_AUTO)->name;
        printf("| %s | %s | %u | %u | %u | %s | %.0f | %.0f | %.3f | %.0f | %.3f | %.3f | %.0f | "
               "%.0f | %d |\n",
               bc->name, act, bc->node.num_envs, workers, s.batch, kern, sm, n, n / (sm * workers),
               m, n / (m * workers), nc / mc, e, b, s.threads);
        if (out)
            fprintf(out,
                    "%s,%s,%u,%u,%u,%s,%.1f,%.1f,%.4f,%.1f,%.4f,%.1f,%.1f,%d,%.3f,%.1f,%.1f,%.4f\n",
                    bc->name, act, bc->node.num_envs, workers, s.batch, kern, sm, n,
                    n / (sm * workers), m, n / (m * workers), e, b, s.threads, load, nc, mc,
                    nc / mc);
        fflush(stdout);
    }
    if (out)
        fclose(out);
    return 0;
}
