/*
 * Shared by the bench programs: run a node in this process from a config,
 * and take medians. Each program measures ratios within one run.
 */
#ifndef RO_BENCH_UTIL_H
#define RO_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "node.h"
#include "topology.h"

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

/* bench_repeats parses a --repeats value: 1..BENCH_MAX_REPEATS, else 3. */
static inline int bench_repeats(const char *s)
{
    int r = atoi(s);
    return r > 0 && r <= BENCH_MAX_REPEATS ? r : 3;
}

#endif
