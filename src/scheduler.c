#include "scheduler.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"

typedef struct ro_worker {
    pthread_t thread;
    ro_sched_t *sched;
    ro_runq_t *q;
    int cpu;
    _Atomic int tid;      /* written by the worker once, read by the main thread */
    _Atomic int pin_err;  /* written by the worker once, read by the main thread */
    bool started;         /* main thread only */
} ro_worker_t;

struct ro_sched {
    ro_runq_t *queues; /* nqueues, each on its own cache lines */
    int nqueues;
    ro_worker_t *workers;
    int nworkers;
};

/* Programmer errors (a broken mutex) abort: there is nothing to recover. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "rollout: fatal: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

static void runq_init(ro_runq_t *q, int numa_node)
{
    pthread_condattr_t ca;
    must(pthread_mutex_init(&q->mu, NULL), "pthread_mutex_init");
    must(pthread_condattr_init(&ca), "pthread_condattr_init");
    /* Deadlines are CLOCK_MONOTONIC: wall-clock jumps must not fire them. */
    must(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), "pthread_condattr_setclock");
    must(pthread_cond_init(&q->cv, &ca), "pthread_cond_init");
    pthread_condattr_destroy(&ca);
    q->head = q->tail = NULL;
    q->timers = NULL;
    q->sleepers = 0;
    q->stop = false;
    q->numa_node = numa_node;
    atomic_init(&q->next_deadline, UINT64_MAX);
    atomic_init(&q->runs, 0);
}

void ro__runq_push(ro_runq_t *q, ro_actor_t *a)
{
    must(pthread_mutex_lock(&q->mu), "pthread_mutex_lock");
    a->runq_next = NULL;
    if (q->tail)
        q->tail->runq_next = a;
    else
        q->head = a;
    q->tail = a;
    if (q->sleepers > 0)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ro__runq_arm(ro_runq_t *q, ro_timer_t *t, uint64_t deadline_ns)
{
    must(pthread_mutex_lock(&q->mu), "pthread_mutex_lock");
    t->deadline_ns = deadline_ns;
    ro_timer_t **pp = &q->timers;
    while (*pp && (*pp)->deadline_ns <= deadline_ns)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    /* Relaxed: a stale read only makes a worker check the clock (or not)
     * one actor later; the list itself is read under mu. */
    atomic_store_explicit(&q->next_deadline, q->timers->deadline_ns, memory_order_relaxed);
    /* A sleeper may be waiting for a later deadline, or none: wake one. */
    if (q->sleepers > 0)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* Detach due timers; caller holds mu. Returns them as a list. */
static ro_timer_t *take_due_locked(ro_runq_t *q, uint64_t now)
{
    ro_timer_t *due = NULL, **tail = &due;
    while (q->timers && q->timers->deadline_ns <= now) {
        ro_timer_t *t = q->timers;
        q->timers = t->next;
        t->next = NULL;
        *tail = t;
        tail = &t->next;
    }
    atomic_store_explicit(&q->next_deadline, q->timers ? q->timers->deadline_ns : UINT64_MAX,
                          memory_order_relaxed);
    return due;
}

/* Send the messages of fired timers; never under mu (a send may push onto
 * this same queue). */
static void deliver(ro_timer_t *due)
{
    while (due) {
        ro_timer_t *next = due->next;
        ro__actor_send(due->target, &due->msg);
        due = next;
    }
}

static void pin_self(ro_worker_t *w)
{
    if (w->cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    atomic_store_explicit(&w->pin_err, rc, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    ro_worker_t *w = arg;
    ro_runq_t *q = w->q;
    /* Relaxed: read by the main thread after pthread_join or for reports. */
    atomic_store_explicit(&w->tid, (int)syscall(SYS_gettid), memory_order_relaxed);
    pin_self(w);

    ro_actor_t *keep = NULL; /* an actor we still hold (it has more messages) */
    for (;;) {
        ro_timer_t *due = NULL;
        uint64_t nd = atomic_load_explicit(&q->next_deadline, memory_order_relaxed);
        uint64_t now = nd != UINT64_MAX ? ro__now_ns() : 0;

        must(pthread_mutex_lock(&q->mu), "pthread_mutex_lock");
        if (nd != UINT64_MAX && now >= nd)
            due = take_due_locked(q, now);
        if (keep) {
            /* Back of the line, so one busy actor cannot starve the rest. */
            keep->runq_next = NULL;
            if (q->tail)
                q->tail->runq_next = keep;
            else
                q->head = keep;
            q->tail = keep;
            keep = NULL;
        }
        while (q->head == NULL && !q->stop && due == NULL) {
            q->sleepers++;
            if (q->timers) {
                struct timespec ts;
                uint64_t d = q->timers->deadline_ns;
                ts.tv_sec = (time_t)(d / 1000000000ull);
                ts.tv_nsec = (long)(d % 1000000000ull);
                pthread_cond_timedwait(&q->cv, &q->mu, &ts);
                now = ro__now_ns();
                if (q->timers && q->timers->deadline_ns <= now)
                    due = take_due_locked(q, now);
            } else {
                pthread_cond_wait(&q->cv, &q->mu);
            }
            q->sleepers--;
        }
        if (q->stop) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        ro_actor_t *a = q->head;
        if (a) {
            q->head = a->runq_next;
            if (q->head == NULL)
                q->tail = NULL;
        }
        pthread_mutex_unlock(&q->mu);

        deliver(due);
        if (a) {
            atomic_fetch_add_explicit(&q->runs, 1, memory_order_relaxed); /* statistic */
            if (ro__actor_run(a))
                keep = a;
        }
    }
    return NULL;
}

int ro__sched_new(ro_sched_t **out, int nqueues, const int *numa_nodes,
                  const ro_worker_plan_t *plan, int nworkers)
{
    if (nqueues < 1 || nworkers < 1)
        return RO_EINVAL;
    for (int i = 0; i < nworkers; i++)
        if (plan[i].queue < 0 || plan[i].queue >= nqueues)
            return RO_EINVAL;

    ro_sched_t *s = calloc(1, sizeof *s);
    if (!s)
        return RO_ENOMEM;
    /* aligned_alloc: each queue's shared fields stay on their own lines. */
    size_t qbytes = ((sizeof(ro_runq_t) * (size_t)nqueues + 63) / 64) * 64;
    s->queues = aligned_alloc(64, qbytes);
    s->workers = calloc((size_t)nworkers, sizeof *s->workers);
    if (!s->queues || !s->workers)
        goto fail;
    s->nqueues = nqueues;
    s->nworkers = nworkers;
    for (int i = 0; i < nqueues; i++)
        runq_init(&s->queues[i], numa_nodes ? numa_nodes[i] : 0);
    for (int i = 0; i < nworkers; i++) {
        ro_worker_t *w = &s->workers[i];
        w->sched = s;
        w->q = &s->queues[plan[i].queue];
        w->cpu = plan[i].cpu;
        atomic_init(&w->tid, 0);
        atomic_init(&w->pin_err, 0);
    }
    *out = s;
    return 0;
fail:
    free(s->queues);
    free(s->workers);
    free(s);
    return RO_ENOMEM;
}

int ro__sched_start(ro_sched_t *s)
{
    for (int i = 0; i < s->nworkers; i++) {
        int rc = pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
        if (rc != 0) {
            ro__sched_stop(s);
            return -rc;
        }
        s->workers[i].started = true;
    }
    return 0;
}

void ro__sched_stop(ro_sched_t *s)
{
    for (int i = 0; i < s->nqueues; i++) {
        ro_runq_t *q = &s->queues[i];
        must(pthread_mutex_lock(&q->mu), "pthread_mutex_lock");
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    for (int i = 0; i < s->nworkers; i++) {
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = false;
        }
    }
}

void ro__sched_free(ro_sched_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nqueues; i++) {
        pthread_mutex_destroy(&s->queues[i].mu);
        pthread_cond_destroy(&s->queues[i].cv);
    }
    free(s->queues);
    free(s->workers);
    free(s);
}

ro_runq_t *ro__sched_queue(ro_sched_t *s, int i)
{
    return &s->queues[i];
}

int ro__sched_nqueues(const ro_sched_t *s)
{
    return s->nqueues;
}

int ro__sched_nworkers(const ro_sched_t *s)
{
    return s->nworkers;
}

int ro__sched_pin_errors(const ro_sched_t *s)
{
    int n = 0;
    for (int i = 0; i < s->nworkers; i++)
        n += atomic_load_explicit(&s->workers[i].pin_err, memory_order_relaxed) != 0;
    return n;
}

int ro__sched_worker_tid(const ro_sched_t *s, int i)
{
    return atomic_load_explicit(&s->workers[i].tid, memory_order_relaxed);
}
