/* mj_raw.c: the raw MuJoCo loop, on one thread or on several with a
 * barrier per step (mj_raw.h). */
#include "mj_raw.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "envs/mujoco/mj_envs.h"
#include "envs/registry.h"
#include "runtime/clock.h"
#include "runtime/cpu_relax.h"
#include "runtime/rng.h"

#define MAX_STEPS 1000
#define MAX_THREADS 256

/* done_raw is the env's termination test, written against MuJoCo's state
 * (docs/env-api.md): the raw loop must visit the states the env visits. */
static int done_raw(const char *env, const mjModel *m, const mjData *d)
{
    if (!strcmp(env, "inverted_pendulum"))
        return !(d->qpos[1] >= -0.2 && d->qpos[1] <= 0.2);
    if (!strcmp(env, "hopper")) {
        int ok = d->qpos[1] > 0.7 && d->qpos[2] > -0.2 && d->qpos[2] < 0.2;
        for (int i = 2; i < m->nq; i++)
            ok = ok && d->qpos[i] > -100 && d->qpos[i] < 100;
        for (int i = 0; i < m->nv; i++)
            ok = ok && d->qvel[i] > -100 && d->qvel[i] < 100;
        return !ok;
    }
    if (!strcmp(env, "walker2d"))
        return !(d->qpos[1] > 0.8 && d->qpos[1] < 2.0 && d->qpos[2] > -1 && d->qpos[2] < 1);
    if (!strcmp(env, "ant")) {
        int ok = d->qpos[2] >= 0.2 && d->qpos[2] <= 1.0;
        for (int i = 0; i < m->nq; i++)
            ok = ok && isfinite(d->qpos[i]);
        for (int i = 0; i < m->nv; i++)
            ok = ok && isfinite(d->qvel[i]);
        return !ok;
    }
    return 0; /* half_cheetah */
}

/* The simulations one thread steps, of one env's shared model. */
typedef struct raw_sims {
    const char *env;
    const mjModel *m;
    int frame_skip, ant, normal_qvel;
    double noise;
    uint32_t n;
    mjData **d;
    uint32_t *len;
    ro_rng_t r;
} raw_sims_t;

static void reset_raw(raw_sims_t *s, mjData *d)
{
    const mjModel *m = s->m;
    mj_resetData(m, d);
    for (int i = 0; i < m->nq; i++)
        d->qpos[i] = m->qpos0[i] + ro__rng_uniform(&s->r, -s->noise, s->noise);
    for (int i = 0; i < m->nv; i++)
        d->qvel[i] = s->normal_qvel ? s->noise * ro__rng_normal(&s->r)
                                    : ro__rng_uniform(&s->r, -s->noise, s->noise);
    mj_forward(m, d);
}

/* sims_make makes n simulations on the calling thread (its pages are
 * placed as that thread first touches them, as an env's are). */
static void sims_make(raw_sims_t *s, const char *env, const mjModel *m, int frame_skip, uint32_t n,
                      uint64_t seed)
{
    const int normal_qvel = !strcmp(env, "ant") || !strcmp(env, "half_cheetah");
    *s = (raw_sims_t){.env = env,
                      .m = m,
                      .frame_skip = frame_skip,
                      .ant = !strcmp(env, "ant"),
                      .normal_qvel = normal_qvel,
                      .noise = normal_qvel                         ? 0.1
                               : !strcmp(env, "inverted_pendulum") ? 0.01
                                                                   : 5e-3,
                      .n = n,
                      .d = calloc(n, sizeof(mjData *)),
                      .len = calloc(n, sizeof(uint32_t))};
    if (s->d == NULL || s->len == NULL) {
        fprintf(stderr, "bench_mj_raw: out of memory for %u simulations\n", n);
        exit(1);
    }
    ro__rng_init(&s->r, seed);
    for (uint32_t i = 0; i < n; i++) {
        s->d[i] = mj_makeData(m);
        if (s->d[i] == NULL) {
            fprintf(stderr, "bench_mj_raw: mj_makeData failed at simulation %u\n", i);
            exit(1);
        }
        reset_raw(s, s->d[i]);
    }
}

/* sims_step steps every simulation once (one env step each). */
static void sims_step(raw_sims_t *s)
{
    const mjModel *m = s->m;
    for (uint32_t i = 0; i < s->n; i++) {
        mjData *di = s->d[i];
        for (int j = 0; j < m->nu; j++)
            di->ctrl[j] = ro__rng_uniform(&s->r, m->actuator_ctrlrange[2 * j],
                                          m->actuator_ctrlrange[2 * j + 1]);
        for (int f = 0; f < s->frame_skip; f++)
            mj_step(m, di);
        if (s->ant) /* the contact forces Ant-v5 observes: Gymnasium computes them too */
            mj_rnePostConstraint(m, di);
        if (done_raw(s->env, m, di) || ++s->len[i] >= MAX_STEPS) {
            s->len[i] = 0;
            reset_raw(s, di);
        }
    }
}

static void sims_free(raw_sims_t *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        mj_deleteData(s->d[i]);
    free(s->d);
    free(s->len);
}

/* A sense-reversing spin barrier: the least a step's synchronisation
 * costs (no sleep, no system call). */
typedef struct raw_barrier {
    _Atomic uint32_t arrived, sense;
    _Atomic bool stop; /* set by thread 0 before the barrier that ends the run */
    uint32_t threads;
} raw_barrier_t;

static void barrier_wait(raw_barrier_t *b, uint32_t *local)
{
    *local ^= 1u;
    /* Acq_rel: every thread's step before any thread leaves the barrier. */
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->threads) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->sense, *local, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&b->sense, memory_order_acquire) != *local)
        ro__cpu_relax();
}

typedef struct raw_thread {
    pthread_t tid;
    uint32_t id, n;
    int cpu; /* pinned to it, or -1 */
    const char *env;
    const mjModel *m;
    int frame_skip;
    double seconds;
    uint64_t steps;
    uint64_t t0_ns, t1_ns; /* thread 0: the first and the last barrier */
    raw_barrier_t *b;
} raw_thread_t;

static void *raw_thread_main(void *arg)
{
    raw_thread_t *t = arg;
    if (t->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    raw_sims_t s;
    sims_make(&s, t->env, t->m, t->frame_skip, t->n, 1 + t->id);
    uint32_t local = 0;
    barrier_wait(t->b, &local); /* every thread's simulations made */
    t->t0_ns = ro__now_ns();
    const uint64_t deadline = t->t0_ns + (uint64_t)(t->seconds * 1e9);
    for (;;) {
        sims_step(&s);
        t->steps += s.n;
        if (t->id == 0 && ro__now_ns() >= deadline)
            atomic_store_explicit(&t->b->stop, true, memory_order_relaxed);
        barrier_wait(t->b, &local);
        /* Relaxed: ordered by the barrier it was set before. */
        if (atomic_load_explicit(&t->b->stop, memory_order_relaxed))
            break;
    }
    t->t1_ns = ro__now_ns();
    sims_free(&s);
    return NULL;
}

/* run_threads: the raw loop on `threads` pinned threads with a barrier per
 * step; returns the steps of all, their time in *ns. */
static uint64_t run_threads(const char *env, const mjModel *m, int frame_skip, uint32_t n,
                            uint32_t threads, double seconds, uint64_t *ns)
{
    static raw_thread_t ts[MAX_THREADS];
    raw_barrier_t b = {.threads = threads};
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    sched_getaffinity(0, sizeof allowed, &allowed);
    int cpu = -1;
    for (uint32_t i = 0; i < threads; i++) {
        do
            cpu++;
        while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed));
        ts[i] = (raw_thread_t){.id = i,
                               .n = n / threads + (i < n % threads),
                               .cpu = cpu < CPU_SETSIZE ? cpu : -1,
                               .env = env,
                               .m = m,
                               .frame_skip = frame_skip,
                               .seconds = seconds,
                               .b = &b};
        if (pthread_create(&ts[i].tid, NULL, raw_thread_main, &ts[i])) {
            fprintf(stderr, "bench_mj_raw: cannot start thread %u\n", i);
            exit(1);
        }
    }
    uint64_t steps = 0;
    for (uint32_t i = 0; i < threads; i++) {
        pthread_join(ts[i].tid, NULL);
        steps += ts[i].steps;
    }
    *ns = ts[0].t1_ns - ts[0].t0_ns;
    return steps;
}

void bench_mj_probe(const char *who, const char *env, ro_env_kind_t *kind, void **probe)
{
    char err[256];
    if (ro__env_open(kind, env, err, sizeof err) ||
        kind->vt->create(probe, NULL, 0, 1, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", who, err);
        exit(1);
    }
}

double bench_mj_raw(const char *env, uint32_t n, uint32_t threads, double seconds, double *cpu)
{
    ro_env_kind_t kind;
    void *probe;
    bench_mj_probe("bench_mj_raw", env, &kind, &probe);
    /* The env's shared model, held by the probe instance. */
    const mjModel *m = ro__mj_env_model(probe);
    const int frame_skip = (int)(ro__mj_env_dt(probe) / m->opt.timestep + 0.5);
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS || threads > n)
        threads = n < MAX_THREADS ? n : MAX_THREADS;
    const double c0 = bench_cpu_s(RUSAGE_SELF);
    uint64_t steps = 0, ns = 0;
    if (threads == 1) {
        raw_sims_t s;
        sims_make(&s, env, m, frame_skip, n, 1);
        const uint64_t t0 = ro__now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
        uint64_t now = t0;
        while (now < deadline) {
            sims_step(&s);
            steps += n;
            now = ro__now_ns();
        }
        ns = now - t0;
        sims_free(&s);
    } else {
        /* The simulations' set-up is in the CPU time, not in the time;
         * it is small next to `seconds` of stepping. */
        steps = run_threads(env, m, frame_skip, n, threads, seconds, &ns);
    }
    *cpu = (bench_cpu_s(RUSAGE_SELF) - c0) / (double)steps;
    kind.vt->destroy(probe);
    ro__env_close(&kind);
    return (double)steps / ((double)ns * 1e-9);
}
