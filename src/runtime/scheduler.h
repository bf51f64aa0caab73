/*
 * Worker threads, their run queues, and work stealing within a NUMA node.
 *
 * Each worker is pinned to one CPU and owns one run queue; the workers of a
 * NUMA node form a group. An actor has a home queue: every send that makes
 * it runnable puts it there, so an actor and the actors it talks to (a
 * learner lane and its env shards) stay on one CPU and its caches. A worker
 * whose own queue is empty steals from the queues of its group, never from
 * another node; when nothing is left anywhere in its group it sleeps on its
 * queue's condition variable: no polling. A push wakes the queue's own
 * worker if it sleeps, and wakes an idle worker of the group when the queue
 * holds more than its busy owner can start.
 *
 * Queues also keep one-shot timers (the learner's max-wait): the owner fires
 * due timers between actors, and sleeps no longer than the earliest one.
 */
#ifndef RO_SCHEDULER_H
#define RO_SCHEDULER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/actor.h"

/* A one-shot timer: when due, msg is sent to target. Owned by the arming
 * actor; must not be armed again before its message has been received. */
typedef struct ro_timer {
    ro_msg_t msg;
    ro_actor_t *target;
    uint64_t deadline_ns;  /* under the run queue mutex while armed */
    struct ro_timer *next; /* under the run queue mutex while armed */
} ro_timer_t;

struct ro_group;

typedef struct ro_runq {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the owner sleeps here */
    ro_ilist_t run;    /* runnable actors (their runq_link), under mu */
    /* Actors queued: changed under mu; read without it (relaxed) by thieves
     * to skip empty queues without locking them. */
    _Atomic uint32_t len;
    ro_timer_t *timers;     /* armed timers sorted by deadline, under mu */
    bool sleeping;          /* owner waits on cv, under mu */
    bool wake;              /* a pusher asked the owner to look again, under mu */
    bool stop;              /* under mu */
    struct ro_group *group; /* read-only after init */
    int numa_node;          /* read-only after init */
    /* Owner is looking for work or asleep: pushers read it to pick whom to
     * wake. seq_cst, paired with the group's idle count (scheduler.c). */
    alignas(64) atomic_bool idle;
    /* Earliest armed deadline, UINT64_MAX if none. Written under mu, read
     * without it by the owner to skip the clock when no timer is armed. */
    _Atomic uint64_t next_deadline;
    _Atomic uint64_t runs;   /* actors run by the owner (statistic, relaxed) */
    _Atomic uint64_t steals; /* actors it took from siblings (statistic, relaxed) */
} ro_runq_t;

typedef struct ro_worker_plan {
    int cpu;   /* CPU to pin to, or -1 for none */
    int group; /* index of its NUMA group (0 .. ngroups-1) */
} ro_worker_plan_t;

typedef struct ro_sched ro_sched_t;

/* ro__sched_new creates one run queue per worker (worker i serves queue i)
 * and groups them by plan[i].group; group g is on NUMA node group_nodes[g].
 * nworkers may be 0: no worker, no queue (every actor on the loop). No
 * thread starts yet. Main thread. */
int ro__sched_new(ro_sched_t **out, int ngroups, const int *group_nodes,
                  const ro_worker_plan_t *plan, int nworkers);

/* ro__sched_start starts the workers; each pins itself before running any
 * actor (failures: ro__sched_pin_errors). Main thread. */
int ro__sched_start(ro_sched_t *s);

/* ro__sched_stop wakes every worker, lets it finish the actor it runs, and
 * joins it. Actors still queued are not run. Main thread. */
void ro__sched_stop(ro_sched_t *s);

/* ro__sched_free releases a stopped (or never started) scheduler. */
void ro__sched_free(ro_sched_t *s);

/* ro__sched_queue returns worker i's run queue. */
ro_runq_t *ro__sched_queue(ro_sched_t *s, int i);
int ro__sched_nworkers(const ro_sched_t *s);
int ro__sched_ngroups(const ro_sched_t *s);
/* Number of workers whose pinning failed (after start). */
int ro__sched_pin_errors(const ro_sched_t *s);
/* Actors stolen across queues so far (relaxed sum). */
uint64_t ro__sched_steals(const ro_sched_t *s);

/* ro__sched_worker_tid returns worker i's kernel thread id (0 before it
 * started), ro__sched_worker_cpu its planned CPU (-1: not pinned). Main
 * thread. */
int ro__sched_worker_tid(const ro_sched_t *s, int i);
int ro__sched_worker_cpu(const ro_sched_t *s, int i);

/* ro__sched_check_affinity reads back each running pinned worker's CPU
 * mask from the OS (sched_getaffinity on its thread id) and returns how
 * many are not exactly their planned CPU. Main thread, while the workers
 * run (after they pinned themselves: ro__sched_wait_pinned). */
int ro__sched_check_affinity(const ro_sched_t *s);

/* ro__sched_wait_pinned waits until every started worker has pinned
 * itself (each reports it; no deadline). Main thread. */
void ro__sched_wait_pinned(ro_sched_t *s);

/* ro__actor_init_worker prepares an actor whose home is runq: it runs on
 * runq's worker (or a sibling that steals it), up to batch messages at a
 * time. Before the first send. */
void ro__actor_init_worker(ro_actor_t *a, const char *name, ro_behaviour_fn fn, ro_runq_t *runq,
                           uint32_t batch);

/* ro__runq_push makes a runnable actor known to its home queue. Any
 * thread. */
void ro__runq_push(ro_runq_t *q, ro_actor_t *a);

/* ro__runq_arm arms t to send t->msg to t->target at deadline_ns
 * (CLOCK_MONOTONIC), on the queue whose owner will fire it. Any thread. */
void ro__runq_arm(ro_runq_t *q, ro_timer_t *t, uint64_t deadline_ns);

#endif
