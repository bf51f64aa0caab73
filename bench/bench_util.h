/*
 * Shared by the bench programs: run a node in this process from a config,
 * and take medians. Each program measures ratios within one run.
 */
#ifndef RO_BENCH_UTIL_H
#define RO_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "node/config.h"
#include "node/node.h"
#include "runtime/flags.h"
#include "runtime/topology.h"

/* A node configuration for a bench: env (with at most one KEY=VALUE arg),
 * policy, envs, workers, seconds; the rest at the defaults. */
typedef struct bench_node {
    const char *env;
    const char *env_arg; /* "key=value" or NULL */
    ro_policy_kind_t policy;
    uint32_t num_envs;
} bench_node_t;

/* bench_config fills c for b with W workers for `seconds`; kv holds the
 * split env argument (c points into it). */
static inline void bench_config(ro_config_t *c, const bench_node_t *b, uint32_t workers,
                                double seconds, char kv[64])
{
    ro__config_defaults(c);
    c->env = b->env;
    if (b->env_arg) {
        snprintf(kv, 64, "%s", b->env_arg);
        char *eq = strchr(kv, '=');
        *eq = '\0';
        c->env_args[0].key = kv;
        c->env_args[0].value = eq + 1;
        c->nenv_args = 1;
    }
    c->policy.kind = b->policy;
    c->num_envs = b->num_envs;
    c->workers = workers;
    c->seconds = seconds;
    c->quiet = true;
}

/* bench_run builds, runs and frees a node; exits the program on error. */
static inline ro_summary_t bench_run(const ro_config_t *c)
{
    ro_node_t *n;
    char err[512];
    if (ro_node_new(&n, c, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    ro_node_run(n);
    ro_summary_t s;
    ro_node_summary(n, &s);
    ro_node_free(n);
    return s;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* bench_median sorts v[n] in place and returns its median. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* bench_allowed_cpus returns the CPUs this process may use. */
static inline int bench_allowed_cpus(void)
{
    ro_topology_t t;
    char err[256];
    if (ro__topology_read(&t, err, sizeof err) != 0)
        return 1;
    int n = t.ncpus;
    ro__topology_free(&t);
    return n;
}

#define BENCH_MAX_REPEATS 15

/* bench_cpu_s returns the CPU seconds (user + system) of this process's
 * threads (who = RUSAGE_SELF) or of its waited-for children
 * (RUSAGE_CHILDREN): steps per CPU-second are what other processes on a
 * shared machine do not move. */
static inline double bench_cpu_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/*
 * bench_parse reads the program's flags with the one flag parser
 * (runtime/flags.h): --help prints the usage and exits 0, a bad flag or
 * value prints one line and exits 2. operands: as ro__flags_parse.
 */
static inline void bench_parse(const char *prog, const char *usage, const ro_flag_t *flags,
                               size_t n, void *cfg, const bool *help, int argc, char **argv,
                               int *operands)
{
    char err[256];
    if (ro__flags_parse(flags, n, cfg, NULL, argc, argv, operands, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        exit(2);
    }
    if (*help) {
        ro__flags_usage(stdout, usage, flags, n);
        exit(0);
    }
}

/* --quiet-wait S: how long each sample may wait for other processes to go
 * quiet (bench_wait_quiet). 0: no wait and no retry (bench/run_all.sh
 * --quick). Set once by main before measuring. */
static double bench_quiet_wait_s = 10.0;

/* The --quiet-wait flag's help, the same in every program. */
#define BENCH_QUIET_WAIT_HELP                                                                      \
    "wait up to S seconds for a quiet machine before each\nsample and retry noisy ones "           \
    "(default 10; 0:\nmeasure at once, as run_all.sh --quick does)"

/*
 * Noise from other processes. The machine is shared: a sample taken while
 * other processes used the CPUs measures them, not us. bench_load_mark and
 * bench_load_others tell how many CPUs (on average) other processes kept
 * busy since the mark: all busy time (/proc/stat) minus this process's
 * (/proc/self/stat, all threads). BENCH_QUIET first waits for a quiet
 * moment (bench_wait_quiet), then repeats a measurement until other
 * processes used less than BENCH_QUIET_CPUS during it, at most
 * BENCH_QUIET_TRIES times, keeping the last.
 */
#include <time.h>
#include <unistd.h>

#define BENCH_QUIET_CPUS 0.10
#define BENCH_QUIET_TRIES 6
/* At most bench_quiet_wait_s per try, and this long per program in all, is
 * spent waiting for other processes to go quiet. */
#define BENCH_QUIET_BUDGET_S 240.0

typedef struct bench_load {
    double busy_s, self_s, t_s;
} bench_load_t;

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_load_read(bench_load_t *m)
{
    double tck = (double)sysconf(_SC_CLK_TCK);
    unsigned long long v[8] = {0};
    m->busy_s = m->self_s = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8)
            m->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tck;
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        /* Fields after the command name (which may hold spaces): state is
         * field 3, utime and stime are fields 14 and 15. */
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            m->self_s = (double)(ut + st) / tck;
    }
    m->t_s = bench_now_s();
}

static inline void bench_load_mark(bench_load_t *m)
{
    bench_load_read(m);
}

/* CPUs kept busy by other processes since the mark (0 if unreadable). */
static inline double bench_load_others(const bench_load_t *mark)
{
    bench_load_t now;
    bench_load_read(&now);
    double dt = now.t_s - mark->t_s;
    double others = (now.busy_s - mark->busy_s) - (now.self_s - mark->self_s);
    return dt > 0 && others > 0 ? others / dt : 0.0;
}

/* bench_wait_quiet waits, in windows of 0.25 s with this process idle,
 * until one has other processes using fewer than BENCH_QUIET_CPUS, or
 * BENCH_QUIET_WAIT_S has passed, or the program's waiting budget is spent. */
static inline void bench_wait_quiet(void)
{
    static double waited;
    double t0 = bench_now_s();
    while (waited < BENCH_QUIET_BUDGET_S && bench_now_s() - t0 < bench_quiet_wait_s) {
        bench_load_t m;
        bench_load_mark(&m);
        struct timespec ts = {0, 250000000};
        nanosleep(&ts, NULL);
        double others = bench_load_others(&m);
        waited += 0.25;
        if (others < BENCH_QUIET_CPUS)
            break;
    }
}

/* Runs stmt until other processes kept fewer than BENCH_QUIET_CPUS CPUs
 * busy during it (at most BENCH_QUIET_TRIES times); *load_out gets the
 * load during the kept run. */
#define BENCH_QUIET(stmt, load_out)                                                                \
    do {                                                                                           \
        int bench_tries_ = bench_quiet_wait_s > 0 ? BENCH_QUIET_TRIES : 1;                         \
        for (int bench_try_ = 0; bench_try_ < bench_tries_; bench_try_++) {                        \
            bench_load_t bench_mark_;                                                              \
            bench_wait_quiet();                                                                    \
            bench_load_mark(&bench_mark_);                                                         \
            stmt;                                                                                  \
            *(load_out) = bench_load_others(&bench_mark_);                                         \
            if (*(load_out) < BENCH_QUIET_CPUS)                                                    \
                break;                                                                             \
        }                                                                                          \
    } while (0)

#endif
