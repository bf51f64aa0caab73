#include "runtime/scheduler.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"

/* The workers of one NUMA node. */
typedef struct ro_group {
    int numa_node;
    int n;
    ro_runq_t **members; /* their queues; read-only after init */
    /* Workers of the group that are looking for work or asleep. seq_cst:
     * a pusher that reads 0 here is ordered before the idle worker's
     * increment, so that worker's scan after it sees the push. */
    alignas(64) atomic_int idle;
} ro_group_t;

typedef struct ro_worker {
    pthread_t thread;
    ro_runq_t *q;
    int index; /* in its group */
    int cpu;
    _Atomic int tid;        /* written by the worker once, read by the main thread */
    _Atomic int pin_err;    /* written by the worker once, read by the main thread */
    bool started;           /* main thread only */
    struct ro_sched *sched; /* read-only after init: where to report pinned */
} ro_worker_t;

struct ro_sched {
    ro_runq_t *queues; /* nworkers, one per worker */
    ro_worker_t *workers;
    int nworkers;
    ro_group_t *groups;
    int ngroups;
    /* Workers report here once pinned; the main thread waits for them
     * (ro__sched_wait_pinned) on the event, not on a deadline. */
    pthread_mutex_t pin_mu;
    pthread_cond_t pin_cv;
    int npinned; /* under pin_mu */
};

/*
 * The queue of the worker running on this thread (NULL on other threads).
 * Set once by each worker at start; lets a push tell "my own actor readied
 * an actor of mine, which I will run next" from a push by anyone else.
 */
static _Thread_local ro_runq_t *tl_own_queue;

/* Programmer errors (a broken mutex) abort: there is nothing to recover. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "rollout: fatal: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

static void lock(ro_runq_t *q)
{
    must(pthread_mutex_lock(&q->mu), "pthread_mutex_lock");
}

static void unlock(ro_runq_t *q)
{
    pthread_mutex_unlock(&q->mu);
}

static void runq_init(ro_runq_t *q, ro_group_t *g)
{
    pthread_condattr_t ca;
    must(pthread_mutex_init(&q->mu, NULL), "pthread_mutex_init");
    must(pthread_condattr_init(&ca), "pthread_condattr_init");
    /* Deadlines are CLOCK_MONOTONIC: wall-clock jumps must not fire them. */
    must(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), "pthread_condattr_setclock");
    must(pthread_cond_init(&q->cv, &ca), "pthread_cond_init");
    pthread_condattr_destroy(&ca);
    q->run = (ro_ilist_t){0};
    atomic_init(&q->len, 0);
    q->timers = NULL;
    q->sleeping = q->wake = q->stop = false;
    q->group = g;
    q->numa_node = g->numa_node;
    atomic_init(&q->idle, false);
    atomic_init(&q->next_deadline, UINT64_MAX);
    atomic_init(&q->runs, 0);
    atomic_init(&q->steals, 0);
}

/* Queue list operations; the caller holds q->mu. len only changes here;
 * relaxed: the mutex orders it for the owner, thieves only use it as a hint. */
static void append_locked(ro_runq_t *q, ro_actor_t *a)
{
    ro__ilist_append(&q->run, &a->runq_link);
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static ro_actor_t *take_locked(ro_runq_t *q)
{
    ro_ilink_t *l = ro__ilist_take(&q->run);
    if (!l)
        return NULL;
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    return ro__container_of(l, ro_actor_t, runq_link);
}

/* Ask one idle worker of q's group, other than q's owner, to look for work. */
static void wake_idle_sibling(ro_runq_t *q)
{
    ro_group_t *g = q->group;
    for (int i = 0; i < g->n; i++) {
        ro_runq_t *s = g->members[i];
        if (s == q || !atomic_load(&s->idle)) /* seq_cst, see ro_group_t.idle */
            continue;
        bool woke = false;
        lock(s);
        if (!s->wake) {
            s->wake = true;
            if (s->sleeping)
                pthread_cond_signal(&s->cv);
            woke = true;
        }
        unlock(s);
        if (woke)
            return;
    }
}

void ro__runq_push(ro_runq_t *q, ro_actor_t *a)
{
    lock(q);
    append_locked(q, a);
    bool owner_asleep = q->sleeping;
    /* More is queued than the busy owner will start next. */
    bool crowded = tl_own_queue != q || atomic_load_explicit(&q->len, memory_order_relaxed) >= 2;
    if (owner_asleep) {
        q->wake = true;
        pthread_cond_signal(&q->cv);
    }
    unlock(q);
    /* The owner is busy and more is queued than it can start now: let an
     * idle sibling steal. An actor that the owner itself readied, alone in
     * its queue, waits for the owner (it runs next, cache-warm). */
    if (!owner_asleep && crowded && atomic_load(&q->group->idle) > 0) /* seq_cst */
        wake_idle_sibling(q);
}

void ro__runq_arm(ro_runq_t *q, ro_timer_t *t, uint64_t deadline_ns)
{
    lock(q);
    t->deadline_ns = deadline_ns;
    ro_timer_t **pp = &q->timers;
    while (*pp && (*pp)->deadline_ns <= deadline_ns)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    /* Relaxed: a stale read only makes the owner check the clock one actor
     * later; the list itself is read under mu. */
    atomic_store_explicit(&q->next_deadline, q->timers->deadline_ns, memory_order_relaxed);
    /* A sleeping owner must recompute how long it may sleep. */
    if (q->sleeping) {
        q->wake = true;
        pthread_cond_signal(&q->cv);
    }
    unlock(q);
}

/* Detach due timers; caller holds mu. */
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

/* Take the oldest actor of a sibling queue, starting after our own index so
 * that thieves spread over victims. */
static ro_actor_t *steal(ro_worker_t *w)
{
    ro_group_t *g = w->q->group;
    for (int k = 1; k < g->n; k++) {
        ro_runq_t *v = g->members[(w->index + k) % g->n];
        if (atomic_load_explicit(&v->len, memory_order_relaxed) == 0)
            continue; /* a hint: skip empty queues without touching their lock */
        lock(v);
        ro_actor_t *a = take_locked(v);
        unlock(v);
        if (a) {
            atomic_fetch_add_explicit(&w->q->steals, 1, memory_order_relaxed); /* statistic */
            return a;
        }
    }
    return NULL;
}

/* Nothing to run: announce idleness, look once more, then sleep until a
 * push, a wake from a sibling, a due timer or stop. Returns an actor from
 * our own queue, or NULL (the caller then looks again). */
static ro_actor_t *idle_wait(ro_worker_t *w)
{
    ro_runq_t *q = w->q;
    ro_group_t *g = q->group;
    atomic_store(&q->idle, true);  /* seq_cst: before the scan below */
    atomic_fetch_add(&g->idle, 1); /* seq_cst: pairs with pushers' load */
    ro_actor_t *a = steal(w);
    if (!a) {
        lock(q);
        for (;;) {
            if (q->run.first || q->wake || q->stop)
                break;
            if (q->timers) {
                uint64_t d = q->timers->deadline_ns;
                if (ro__now_ns() >= d)
                    break;
                struct timespec ts = {.tv_sec = (time_t)(d / 1000000000ull),
                                      .tv_nsec = (long)(d % 1000000000ull)};
                q->sleeping = true;
                pthread_cond_timedwait(&q->cv, &q->mu, &ts);
            } else {
                q->sleeping = true;
                pthread_cond_wait(&q->cv, &q->mu);
            }
            q->sleeping = false;
        }
        q->wake = false;
        a = take_locked(q);
        unlock(q);
    }
    atomic_fetch_sub(&g->idle, 1);
    atomic_store(&q->idle, false);
    return a;
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

/* Named threads: `ps -L`, top -H and /proc/PID/task/TID/comm show them. */
static void name_self(int cpu)
{
    char name[16];
    if (cpu >= 0)
        snprintf(name, sizeof name, "ro-w-cpu%d", cpu % 100000);
    else
        snprintf(name, sizeof name, "ro-w");
    pthread_setname_np(pthread_self(), name);
}

static void schedule_on_runq(ro_actor_t *a)
{
    ro__runq_push(a->home, a);
}

void ro__actor_init_worker(ro_actor_t *a, const char *name, ro_behaviour_fn fn, ro_runq_t *runq,
                           uint32_t batch)
{
    ro__actor_init(a, name, fn, batch, schedule_on_runq, runq);
}

static void *worker_main(void *arg)
{
    ro_worker_t *w = arg;
    ro_runq_t *q = w->q;
    /* Relaxed: read by the main thread for reports only. */
    atomic_store_explicit(&w->tid, (int)syscall(SYS_gettid), memory_order_relaxed);
    tl_own_queue = q;
    pin_self(w);
    name_self(w->cpu);
    /* Under pin_mu: the main thread's wait then sees tid and pin_err. */
    must(pthread_mutex_lock(&w->sched->pin_mu), "pthread_mutex_lock");
    w->sched->npinned++;
    must(pthread_cond_broadcast(&w->sched->pin_cv), "pthread_cond_broadcast");
    must(pthread_mutex_unlock(&w->sched->pin_mu), "pthread_mutex_unlock");

    ro_actor_t *keep = NULL; /* an actor we ran that still has messages */
    for (;;) {
        ro_timer_t *due = NULL;
        uint64_t nd = atomic_load_explicit(&q->next_deadline, memory_order_relaxed);
        uint64_t now = nd != UINT64_MAX ? ro__now_ns() : 0;

        lock(q);
        if (nd != UINT64_MAX && now >= nd)
            due = take_due_locked(q, now);
        if (keep && keep->home == q) {
            append_locked(q, keep); /* back of the line: no actor starves the rest */
            keep = NULL;
        }
        ro_actor_t *a = take_locked(q);
        bool stop = q->stop;
        unlock(q);

        if (keep) { /* a stolen actor goes back to its home queue */
            ro__runq_push(keep->home, keep);
            keep = NULL;
        }
        deliver(due);
        if (stop)
            break;
        if (!a)
            a = steal(w);
        if (!a)
            a = idle_wait(w);
        if (!a)
            continue; /* woken: look at timers, our queue and the siblings again */
        atomic_fetch_add_explicit(&q->runs, 1, memory_order_relaxed); /* statistic */
        if (ro__actor_run(a))
            keep = a;
    }
    return NULL;
}

int ro__sched_new(ro_sched_t **out, int ngroups, const int *group_nodes,
                  const ro_worker_plan_t *plan, int nworkers)
{
    if (ngroups < 1 || nworkers < 0)
        return RO_EINVAL;
    /* nworkers 0: no thread, no queue (a node whose actors all live on its
     * loop); every call below then has nothing to do. */
    size_t nq = nworkers ? (size_t)nworkers : 1;
    for (int i = 0; i < nworkers; i++)
        if (plan[i].group < 0 || plan[i].group >= ngroups)
            return RO_EINVAL;

    ro_sched_t *s = calloc(1, sizeof *s);
    if (!s)
        return RO_ENOMEM;
    /* aligned_alloc: each queue's shared fields stay on their own lines. */
    s->queues = aligned_alloc(64, sizeof(ro_runq_t) * nq);
    s->workers = calloc(nq, sizeof *s->workers);
    s->groups = aligned_alloc(64, sizeof(ro_group_t) * (size_t)ngroups);
    if (!s->queues || !s->workers || !s->groups)
        goto fail;
    s->nworkers = nworkers;
    s->ngroups = ngroups;
    must(pthread_mutex_init(&s->pin_mu, NULL), "pthread_mutex_init");
    must(pthread_cond_init(&s->pin_cv, NULL), "pthread_cond_init");
    for (int g = 0; g < ngroups; g++) {
        ro_group_t *grp = &s->groups[g];
        grp->numa_node = group_nodes ? group_nodes[g] : 0;
        grp->n = 0;
        atomic_init(&grp->idle, 0);
        grp->members = calloc(nq, sizeof *grp->members);
        if (!grp->members) {
            for (int k = 0; k < g; k++)
                free(s->groups[k].members);
            goto fail;
        }
    }
    for (int i = 0; i < nworkers; i++) {
        ro_group_t *grp = &s->groups[plan[i].group];
        ro_worker_t *w = &s->workers[i];
        runq_init(&s->queues[i], grp);
        w->q = &s->queues[i];
        w->index = grp->n;
        w->cpu = plan[i].cpu;
        atomic_init(&w->tid, 0);
        atomic_init(&w->pin_err, 0);
        w->sched = s;
        grp->members[grp->n++] = w->q;
    }
    *out = s;
    return 0;
fail:
    free(s->queues);
    free(s->workers);
    free(s->groups);
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
    for (int i = 0; i < s->nworkers; i++) {
        ro_runq_t *q = &s->queues[i];
        lock(q);
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        unlock(q);
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
    for (int i = 0; i < s->nworkers; i++) {
        pthread_mutex_destroy(&s->queues[i].mu);
        pthread_cond_destroy(&s->queues[i].cv);
    }
    for (int g = 0; g < s->ngroups; g++)
        free(s->groups[g].members);
    pthread_mutex_destroy(&s->pin_mu);
    pthread_cond_destroy(&s->pin_cv);
    free(s->queues);
    free(s->workers);
    free(s->groups);
    free(s);
}

ro_runq_t *ro__sched_queue(ro_sched_t *s, int i)
{
    return &s->queues[i];
}

int ro__sched_nworkers(const ro_sched_t *s)
{
    return s->nworkers;
}

int ro__sched_ngroups(const ro_sched_t *s)
{
    return s->ngroups;
}

int ro__sched_pin_errors(const ro_sched_t *s)
{
    int n = 0;
    for (int i = 0; i < s->nworkers; i++)
        n += atomic_load_explicit(&s->workers[i].pin_err, memory_order_relaxed) != 0;
    return n;
}

uint64_t ro__sched_steals(const ro_sched_t *s)
{
    uint64_t n = 0;
    for (int i = 0; i < s->nworkers; i++)
        n += atomic_load_explicit(&s->queues[i].steals, memory_order_relaxed);
    return n;
}

int ro__sched_worker_tid(const ro_sched_t *s, int i)
{
    return atomic_load_explicit(&s->workers[i].tid, memory_order_relaxed);
}

int ro__sched_worker_cpu(const ro_sched_t *s, int i)
{
    return s->workers[i].cpu;
}

void ro__sched_wait_pinned(ro_sched_t *s)
{
    int started = 0;
    for (int i = 0; i < s->nworkers; i++)
        started += s->workers[i].started;
    /* A started worker pins itself before anything else, so the count
     * always gets there: no deadline (a loaded machine only makes it
     * later). The mutex also orders the workers' tid and pin_err stores
     * before our reads. */
    must(pthread_mutex_lock(&s->pin_mu), "pthread_mutex_lock");
    while (s->npinned < started)
        must(pthread_cond_wait(&s->pin_cv, &s->pin_mu), "pthread_cond_wait");
    must(pthread_mutex_unlock(&s->pin_mu), "pthread_mutex_unlock");
}

int ro__sched_check_affinity(const ro_sched_t *s)
{
    int bad = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const ro_worker_t *w = &s->workers[i];
        int tid = atomic_load_explicit(&w->tid, memory_order_relaxed);
        if (w->cpu < 0 || !w->started || tid == 0)
            continue;
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(tid, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1 ||
            !CPU_ISSET(w->cpu, &set))
            bad++;
    }
    return bad;
}
