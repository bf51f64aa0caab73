/*
 * Worker threads and per-NUMA-node run queues.
 *
 * One run queue per NUMA node the node spans; W worker threads, each pinned
 * to one CPU and serving the run queue of that CPU's node. A worker takes an
 * actor, runs a bounded batch of its messages, puts it back if it still has
 * messages, and takes the next. Idle workers sleep on a condition variable:
 * no polling. A run queue also keeps one-shot timers (used by the learner's
 * max-wait): workers fire due timers between actors, and a sleeping worker
 * waits no longer than the earliest deadline.
 */
#ifndef RO_SCHEDULER_H
#define RO_SCHEDULER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "actor.h"

/* A one-shot timer: when due, msg is sent to target. Owned by the arming
 * actor; must not be armed again before its message has been received. */
typedef struct ro_timer {
    ro_msg_t msg;
    ro_actor_t *target;
    uint64_t deadline_ns;     /* under the run queue mutex while armed */
    struct ro_timer *next;    /* under the run queue mutex while armed */
} ro_timer_t;

typedef struct ro_runq {
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* idle workers of this queue wait here */
    ro_actor_t *head, *tail;   /* runnable actors, under mu */
    ro_timer_t *timers;        /* armed timers sorted by deadline, under mu */
    uint32_t sleepers;         /* workers waiting on cv, under mu */
    bool stop;                 /* under mu */
    int numa_node;             /* read-only after init */
    /* Earliest armed deadline, UINT64_MAX if none. Written under mu, read
     * without it by workers to skip the clock when no timer is armed. */
    alignas(64) _Atomic uint64_t next_deadline;
    /* Actors run by this queue's workers (statistics; relaxed). */
    _Atomic uint64_t runs;
} ro_runq_t;

typedef struct ro_worker_plan {
    int cpu;    /* CPU to pin to, or -1 for none */
    int queue;  /* index of the run queue it serves */
} ro_worker_plan_t;

typedef struct ro_sched ro_sched_t;

/* ro__sched_new creates nqueues run queues (queue i on NUMA node numa_nodes[i])
 * and the worker plan, without starting threads. Main thread. */
int ro__sched_new(ro_sched_t **out, int nqueues, const int *numa_nodes,
                  const ro_worker_plan_t *plan, int nworkers);

/* ro__sched_start starts the workers. Each pins itself before running any
 * actor; a failed pin is reported through ro__sched_pin_errors. Main thread. */
int ro__sched_start(ro_sched_t *s);

/* ro__sched_stop wakes every worker, lets it finish the actor it runs, and
 * joins it. Actors still queued are not run. Main thread. */
void ro__sched_stop(ro_sched_t *s);

/* ro__sched_free releases a stopped (or never started) scheduler. */
void ro__sched_free(ro_sched_t *s);

ro_runq_t *ro__sched_queue(ro_sched_t *s, int i);
int ro__sched_nqueues(const ro_sched_t *s);
int ro__sched_nworkers(const ro_sched_t *s);
/* Number of workers whose pinning failed (after start). */
int ro__sched_pin_errors(const ro_sched_t *s);
/* The Linux thread id of worker i (after start; 0 before it runs). */
int ro__sched_worker_tid(const ro_sched_t *s, int i);

/* ro__runq_push makes a runnable actor known to its queue. Any thread. */
void ro__runq_push(ro_runq_t *q, ro_actor_t *a);

/* ro__runq_arm arms t to send t->msg to t->target at deadline_ns
 * (CLOCK_MONOTONIC). Any thread. */
void ro__runq_arm(ro_runq_t *q, ro_timer_t *t, uint64_t deadline_ns);

#endif
