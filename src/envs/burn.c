/*
 * burn: a benchmark env standing in for a physics engine. Each step spends
 * cost_us microseconds of real CPU work (a dependent chain of float64
 * operations), then writes obs_dim floats in [-1, 1].
 *
 * The work is counted in iterations, not timed: a step preempted by the OS
 * takes longer in wall time but does the same work, so an oversubscribed
 * node shows lost throughput in benchmarks, as a real simulator would.
 */
#include "envs/burn.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envs/env_args.h"
#include "envs/builtin_env.h"
#include "envs/registry.h"
#include "runtime/error.h"
#include "runtime/rng.h"

#define DEFAULT_COST_US 50.0
#define MAX_COST_US 1e6 /* one second per step is plenty for a benchmark */
#define DEFAULT_OBS_DIM 16u
#define DEFAULT_ACT_N 4u
#define MAX_DIM 65536u

/* The chain: x <- R*x*(1-x), the logistic map. For x in [0, 1] it stays in
 * [0, R/4], so it never overflows, and each iteration depends on the last,
 * so the loop can be neither vectorised nor skipped. */
#define CHAIN_R 3.99

#define GOLDEN 0.6180339887498949

#define CALIB_ITERS 100000u
#define CALIB_TRIES 5

typedef struct burn {
    ro_rng_t rng;
    uint64_t iters;
    uint32_t obs_dim, act_n;
    double z;        /* the scalar state, in [0, 1) */
    uint32_t *phase; /* obs_dim phases; obs[i] = phase[i] / 2^31 - 1 */
    float *low, *high;
} burn_t;

static const char *const burn_arg_keys[] = {
    "cost_us", "CPU work per step in microseconds, a double >= 0 (default 50)",
    "obs_dim", "observation size, 1..65536 (default 16)",
    "act_n",   "number of discrete actions, 1..65536 (default 4)",
    NULL,
};

/*
 * The only static state of the env: iterations per microsecond, a property
 * of the machine, measured once per process and read-only afterwards. It is
 * kept as the bits of a double, 0 until measured. Threads that race on the
 * first use may each measure, but only the first compare-exchange stores,
 * so every instance of the process uses the same value.
 */
static _Atomic uint64_t calib_bits;

/* chain runs n iterations of the logistic map from x. */
static double chain(double x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x = CHAIN_R * x * (1.0 - x);
    return x;
}

static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* calibrate times CALIB_ITERS iterations a few times and returns the rate
 * of the fastest, the run least disturbed by interrupts; thread CPU time
 * leaves out time spent preempted. Well under 1 ms a try on a current core. */
static double calibrate(void)
{
    double best_ns = INFINITY;
    /* volatile: the start value is unknown to the compiler and the result
     * is kept, so the timed loop is the real one. */
    volatile double seed = 0.3, sink;
    for (int t = 0; t < CALIB_TRIES; t++) {
        double t0 = thread_cpu_ns();
        sink = chain(seed, CALIB_ITERS);
        double dt = thread_cpu_ns() - t0;
        if (dt > 0 && dt < best_ns)
            best_ns = dt;
    }
    (void)sink;
    /* A clock too coarse to see the loop would give 0 ns: fall back to a
     * conservative rate rather than divide by zero. */
    return isfinite(best_ns) ? CALIB_ITERS / (best_ns / 1e3) : 100.0;
}

double ro__burn_iters_per_us(void)
{
    /* Relaxed is enough: the double is the only data published, and it is
     * read and written whole through this one atomic. */
    uint64_t bits = atomic_load_explicit(&calib_bits, memory_order_relaxed);
    if (bits == 0) {
        double rate = calibrate();
        uint64_t mine;
        memcpy(&mine, &rate, sizeof mine);
        /* On failure `bits` receives the value another thread stored. */
        if (atomic_compare_exchange_strong_explicit(&calib_bits, &bits, mine, memory_order_relaxed,
                                                    memory_order_relaxed))
            bits = mine;
    }
    double rate;
    memcpy(&rate, &bits, sizeof rate);
    return rate;
}

uint64_t ro__burn_iters(const void *env)
{
    const burn_t *b = env;
    return b->iters;
}

/* parse_args reads cost_us, obs_dim and act_n into b. */
static int parse_args(burn_t *b, double *cost_us, const ro_env_arg_t *args, size_t nargs, char *err,
                      size_t errlen)
{
    int rc = ro__env_args_known("burn", burn_arg_keys, args, nargs, err, errlen);
    for (size_t i = 0; rc == 0 && i < nargs; i++) {
        const char *k = args[i].key, *v = args[i].value;
        if (strcmp(k, "cost_us") == 0)
            rc = ro__env_arg_double(k, v, 0.0, MAX_COST_US, cost_us, err, errlen);
        else if (strcmp(k, "obs_dim") == 0)
            rc = ro__env_arg_u32(k, v, 1, MAX_DIM, &b->obs_dim, err, errlen);
        else /* act_n */
            rc = ro__env_arg_u32(k, v, 1, MAX_DIM, &b->act_n, err, errlen);
    }
    return rc;
}

static void burn_destroy(void *env)
{
    burn_t *b = env;
    if (b == NULL)
        return;
    free(b->phase);
    free(b->low);
    free(b->high);
    free(b);
}

static int burn_create(void **out, const ro_env_arg_t *args, size_t nargs, uint64_t seed, char *err,
                       size_t errlen)
{
    burn_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        goto nomem;
    b->obs_dim = DEFAULT_OBS_DIM;
    b->act_n = DEFAULT_ACT_N;
    double cost_us = DEFAULT_COST_US;
    int rc = parse_args(b, &cost_us, args, nargs, err, errlen);
    if (rc < 0) {
        burn_destroy(b);
        return rc;
    }

    b->phase = calloc(b->obs_dim, sizeof *b->phase);
    b->low = malloc(b->obs_dim * sizeof *b->low);
    b->high = malloc(b->obs_dim * sizeof *b->high);
    if (b->phase == NULL || b->low == NULL || b->high == NULL)
        goto nomem;
    for (uint32_t i = 0; i < b->obs_dim; i++) {
        b->low[i] = -1.0f;
        b->high[i] = 1.0f;
    }
    b->iters = (uint64_t)llround(cost_us * ro__burn_iters_per_us());
    ro__rng_init(&b->rng, seed);
    *out = b;
    return 0;

nomem:
    burn_destroy(b);
    snprintf(err, errlen, "env 'burn': out of memory");
    return RO_ENOMEM;
}

static void burn_spaces(void *env, ro_space_t *obs, ro_space_t *act)
{
    burn_t *b = env;
    *obs = (ro_space_t){
        .kind = RO_SPACE_BOX, .ndim = 1, .shape = {b->obs_dim}, .low = b->low, .high = b->high};
    *act = (ro_space_t){.kind = RO_SPACE_DISCRETE, .n = b->act_n};
}

/* write_obs maps each phase to [-1, 1); `bias` is -1 plus the chain's
 * zero term (see burn_step). */
static void write_obs(const burn_t *b, double bias, float *obs)
{
    for (uint32_t i = 0; i < b->obs_dim; i++)
        obs[i] = (float)((double)b->phase[i] * 0x1.0p-31 + bias);
}

static void burn_reset(void *env, float *obs)
{
    burn_t *b = env;
    b->z = ro__rng_double(&b->rng);
    for (uint32_t i = 0; i < b->obs_dim; i++)
        b->phase[i] = (uint32_t)(ro__rng_next(&b->rng) >> 32);
    write_obs(b, -1.0, obs);
}

static int burn_step(void *env, ro_action_t action, float *obs, ro_step_t *out)
{
    burn_t *b = env;
    if (action.discrete < 0 || (uint32_t)action.discrete >= b->act_n)
        return RO_EINVAL;

    /* The next state mixes the old one with the action. */
    double m = b->z + (action.discrete + 1) * GOLDEN;
    m -= floor(m);
    b->z = m;

    /* The work starts from the state and action, so it cannot be done ahead
     * of time. Its result enters the observation as 0.0 * x: exactly zero
     * for the finite x the chain yields, so the numbers do not depend on the
     * iteration count (calibrated, so it differs between machines and runs,
     * and a recorded trajectory must replay bit for bit), yet the compiler
     * must run the loop, since 0.0 * x is not zero for inf or NaN. */
    double x = chain(0.1 + 0.8 * m, b->iters);
    double bias = -1.0 + 0.0 * x;

    /* Each phase advances by its own odd multiple of the step's increment;
     * uint32 arithmetic wraps, which is the modulo we want. */
    uint32_t inc = (uint32_t)(m * 4294967296.0);
    for (uint32_t i = 0; i < b->obs_dim; i++)
        b->phase[i] += inc * (2 * i + 1);
    write_obs(b, bias, obs);

    out->reward = (float)m;
    out->terminated = 0;
    out->truncated = 0;
    return 0;
}

/* The state (rollout/env.h "Env state"): the RNG, z (float64), then the
 * obs_dim phases (uint32), host order; obs_dim and the work per step come
 * from the args. */
static size_t burn_state_size(void *env)
{
    burn_t *b = env;
    return sizeof b->rng + sizeof b->z + b->obs_dim * sizeof *b->phase;
}

static int burn_save_state(void *env, void *buf, size_t len)
{
    burn_t *b = env;
    if (len != burn_state_size(b))
        return RO_EINVAL;
    char *p = buf;
    memcpy(p, &b->rng, sizeof b->rng);
    memcpy(p + sizeof b->rng, &b->z, sizeof b->z);
    memcpy(p + sizeof b->rng + sizeof b->z, b->phase, b->obs_dim * sizeof *b->phase);
    return 0;
}

static int burn_load_state(void *env, const void *buf, size_t len)
{
    burn_t *b = env;
    if (len != burn_state_size(b))
        return RO_EINVAL;
    const char *p = buf;
    double z;
    memcpy(&z, p + sizeof b->rng, sizeof z);
    /* The step turns z into an integer phase increment: a z outside [0, 1)
     * (NaN, inf) would make that conversion undefined. */
    if (!(z >= 0.0 && z < 1.0))
        return RO_EINVAL;
    memcpy(&b->rng, p, sizeof b->rng);
    b->z = z;
    memcpy(b->phase, p + sizeof b->rng + sizeof z, b->obs_dim * sizeof *b->phase);
    return 0;
}

RO_ENV_STATE_OPS(burn);
RO_ENV_VTABLE(burn, 1000, burn_destroy);
