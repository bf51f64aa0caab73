/*
 * Running a node: start the workers and the envs, the control actor on the
 * loop, signals and the --seconds deadline, and the clean stop.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "actors/exchange/messages.h"
#include "node/node.h"
#include "node/node_internal.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/thread_guard.h"

static void request_stop(ro_node_t *n)
{
    /* Relaxed: env actors only need to see it eventually; it guards no data. */
    atomic_store_explicit(&n->stopping, true, memory_order_relaxed);
    if (n->hub)
        ro__hub_stop(n->hub); /* envs waiting for learners finish now */
}

/* A second SIGINT/SIGTERM means the operator will not wait for the clean
 * stop, e.g. a recording draining to a stalled disk: leave at once, as the
 * signal would have. Runs as the signal handler itself (write and _exit are
 * async-signal-safe), so it works while the loop thread waits, for
 * instance in ro__recorder_finish for a write that does not return. */
static void on_second_signal(int signum)
{
    static const char msg[] = "rollout-node: second signal: exiting without finishing the "
                              "steps in flight or flushing files\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(128 + signum);
}

/* The first SIGINT/SIGTERM stops the run cleanly (every step in flight
 * finished and recorded, metrics flushed). */
static void on_signal(uv_signal_t *h, int signum)
{
    ro_node_t *n = h->data;
    if (n->signals++ > 0) /* both reached the loop before the handler below was in place */
        on_second_signal(signum);
    /* From now on the kernel calls on_second_signal directly, in place of
     * libuv's handler (which only wakes the loop); closing the uv_signal
     * handles at shutdown restores the default action. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_second_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        fprintf(stderr,
                "rollout-node: warning: a second signal may not end the clean stop: "
                "sigaction: %s\n",
                strerror(errno));
    if (!n->cfg.quiet)
        fprintf(stderr,
                "rollout-node: %s: finishing the steps in flight and flushing files (a second "
                "signal exits at once)\n",
                signum == SIGINT ? "SIGINT" : "SIGTERM");
    request_stop(n);
}

/* SIGHUP: whoever started the node is gone (a terminal closed; a launcher
 * that died: launch_node's PR_SET_PDEATHSIG, which a dying process sends
 * once per thread that was the node's parent). A clean stop, as the first
 * SIGINT/SIGTERM's, and repeats change nothing: no one is left to mean
 * "exit at once" by a second one. */
static void on_hangup(uv_signal_t *h, int signum)
{
    (void)signum;
    ro_node_t *n = h->data;
    if (n->hangup)
        return;
    n->hangup = true;
    if (!n->cfg.quiet)
        fprintf(stderr, "rollout-node: SIGHUP: finishing the steps in flight and flushing "
                        "files\n");
    request_stop(n);
}

static void on_deadline(uv_timer_t *t)
{
    request_stop(t->data);
}

void ro__node_close_shard_homes(ro_node_t *n)
{
    for (uint32_t i = 0; i < n->nshard_homes; i++)
        ro__actor_close_loop(&n->shard_homes[i]);
}

/* Every lane is done: every env finished its last step and nothing is in
 * flight. Stop the workers, flush the logger, close the loop's handles. */
static void shutdown_node(ro_node_t *n)
{
    n->t_end_ns = ro__now_ns();
    int t = ro__thread_count();
    if (t > n->threads_seen)
        n->threads_seen = t;
    /* Pins read back again while the workers still exist. */
    int bad = ro__sched_check_affinity(n->sched);
    if (bad > n->affinity_mismatches)
        n->affinity_mismatches = bad;
    ro__sched_stop(n->sched);
    if (n->hub) {
        ro__hub_stop(n->hub); /* goodbye to every learner */
        ro__hub_close(n->hub);
    }
    n->logger_rc = ro__logger_finish(&n->logger);
    if (n->logger_rc)
        fprintf(stderr,
                "rollout-node: could not write the metrics file %s or the TensorBoard events in "
                "%s (disk full or I/O error)\n",
                n->cfg.metrics ? n->cfg.metrics : "(none)",
                n->cfg.tensorboard ? n->cfg.tensorboard : "(none)");
    if (n->recorder) {
        /* Every shard has handed over its last step: write it all. */
        char err[512] = "";
        n->record_rc = ro__recorder_finish(n->recorder, err, sizeof err);
        if (n->record_rc)
            fprintf(stderr, "rollout-node: %s\n", err);
    }
    ro__actor_close_loop(&n->control_home);
    ro__node_close_shard_homes(n); /* the recorder, their last sender, is done */
    uv_close((uv_handle_t *)&n->sigint, NULL);
    uv_close((uv_handle_t *)&n->sigterm, NULL);
    uv_close((uv_handle_t *)&n->sighup, NULL);
    uv_close((uv_handle_t *)&n->deadline, NULL);
}

void ro__node_control(ro_actor_t *self, ro_msg_t *msg)
{
    ro_node_t *n = ro__container_of(self, ro_node_t, control);
    if (msg->type == RO_MSG_POLICY_DONE) {
        ro__node_policy_switched(n, ro__container_of(msg, ro_learner_t, swap_done_msg));
        return;
    }
    if (msg->type == RO_MSG_RECORD_FAILED) {
        request_stop(n); /* --record-error stop; finish reports the error */
        return;
    }
    if (msg->type == RO_MSG_LANE_DONE && ++n->lanes_done == n->learners_expected)
        shutdown_node(n);
}

/* Once the workers have pinned themselves: read back their CPU masks and
 * the buffers' pages from the OS, and say what runs where. */
static void report_start(ro_node_t *n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpus[CPU_SETSIZE], ncpus = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                cpus[ncpus++] = c;
    ro__topology_cpulist(cpus, ncpus, n->allowed_cpus, sizeof n->allowed_cpus);
    ro__sched_wait_pinned(n->sched);
    n->affinity_mismatches = ro__sched_check_affinity(n->sched);
    ro__node_check_placement(n);
    if (n->cfg.quiet)
        return;
    fprintf(stderr,
            "rollout-node: running: %d threads (1 loop + %d workers, read from /proc/self/task), "
            "allowed CPUs %s, %d NUMA node(s) in use of %d%s%s; pinning %s; %d buffers "
            "node-local%s\n",
            ro__thread_count(), n->nworkers, n->allowed_cpus, n->ngroups, ro__topology_os_nodes(),
            n->topo.fake ? " (declared)" : "", n->cfg.numa_node >= 0 ? ", bound" : "",
            n->affinity_mismatches ? "MISMATCH" : "verified", n->mem_blocks - n->mem_misplaced,
            n->mem_misplaced ? " (SOME MISPLACED)" : "");
}

void ro_node_stop_signals(int how)
{
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    pthread_sigmask(how, &stops, NULL);
}

int ro_node_run(ro_node_t *n)
{
    if (n->ran)
        return RO_EINVAL;
    n->ran = true;
    int rc;
    n->sighup.data = n;
    if ((rc = uv_signal_init(&n->loop, &n->sighup)) ||
        (rc = uv_signal_start(&n->sigint, on_signal, SIGINT)) ||
        (rc = uv_signal_start(&n->sigterm, on_signal, SIGTERM)) ||
        (rc = uv_signal_start(&n->sighup, on_hangup, SIGHUP))) {
        fprintf(stderr, "rollout-node: cannot handle SIGINT, SIGTERM and SIGHUP: %s\n",
                uv_strerror(rc));
        return RO_EIO;
    }
    /* Handled now: one that came while the node started (main.c blocked
     * them) is delivered here, on the loop's thread. */
    ro_node_stop_signals(SIG_UNBLOCK);
    /* Timers only fail on a closing handle. */
    if (n->cfg.seconds > 0)
        uv_timer_start(&n->deadline, on_deadline, (uint64_t)(n->cfg.seconds * 1000.0), 0);
    if (n->recorder) {
        char err[256];
        if ((rc = ro__recorder_start(n->recorder, err, sizeof err)) != 0) {
            fprintf(stderr, "rollout-node: %s\n", err);
            return rc;
        }
    }
    rc = ro__sched_start(n->sched);
    if (rc) {
        fprintf(stderr, "rollout-node: cannot start the worker threads: %s\n", ro_strerror(rc));
        return rc;
    }
    report_start(n);
    n->t_start_ns = ro__now_ns();
    ro__logger_start(&n->logger);
    for (uint32_t i = 0; i < n->nshards; i++)
        ro__env_shard_start(&n->shards[i]);
    n->threads_seen = ro__thread_count();
    uv_run(&n->loop, UV_RUN_DEFAULT);
    return n->logger_rc ? n->logger_rc : n->record_rc;
}
