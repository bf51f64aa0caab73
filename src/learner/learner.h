/*
 * rollout-learner's insides, shared by learner_main.c (forward-pass lanes,
 * batching, the run) and learner_conn.c (connections to nodes: frames in
 * and out, the welcome, checks). Loop thread, except where a field says a
 * lane touches it.
 */
#ifndef RO_LEARNER_INTERNAL_H
#define RO_LEARNER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/actor.h"
#include "learner/cli.h"
#include "policy/policy.h"
#include "runtime/rng.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"
#include "wire/frame.h"

#define READ_CHUNK 65536
#define MAX_NUM_ENVS (1u << 20)

typedef struct learner learner_t;

typedef struct node_conn {
    uv_tcp_t tcp; /* re-initialized for every connection attempt */
    uv_connect_t creq;
    uv_timer_t retry; /* backoff before a reconnect, then that attempt's deadline */
    learner_t *L;
    int index;
    const char *addr;
    struct sockaddr_storage sa;
    ro_frame_reader_t rd;
    bool connected, welcomed, closing, failed;
    bool final;       /* no reconnect after this close: a goodbye or an error */
    bool attached;    /* welcomed at least once: reconnects only after that */
    bool waiting;     /* tcp closed, retry timer armed for the next attempt */
    uint32_t gen;     /* bumped per connection: actions of an older one are not sent */
    uint64_t lost_ns; /* when the last welcomed connection ended; 0 while it lasts */
    uint32_t attempts, backoff_ms;
    uint64_t reconnects; /* welcomes after the first */
    char why[200];       /* why the connection (or attempt) closed */
    char last_fail[200]; /* last logged attempt failure: log again when it changes */
    uint64_t node_id;
    uint32_t num_envs;
    ro_rng_t *rngs;      /* [num_envs]; kept across reconnects (lanes may hold them) */
    double *ep_ret;      /* [num_envs] running return */
    uint64_t *next_step; /* [num_envs] first step not yet counted: a resent batch is not
                            counted twice */
    uint64_t steps, episodes;
    double return_sum;
    char rbuf[READ_CHUNK];
} node_conn_t;

/* A received Observations frame waiting for its forward pass. */
typedef struct pending {
    ro_frame_t *frame;
    node_conn_t *c;
    uint32_t gen; /* c->gen when it arrived */
    struct pending *next;
} pending_t;

/* One forward pass: the frames it covers and room for their actions.
 * Owned by the loop, then by the lane it is sent to, then by the loop. */
typedef struct job {
    ro_msg_t msg;
    pending_t *frames;
    uint32_t rows;
    ro_rng_t **rowrng; /* [rows] sampling stream of each row */
    int32_t *act_i;    /* [rows] */
    float *act_f;      /* [rows x act_dim] */
} job_t;

/* A forward-pass lane: an actor on one worker with its own scratch. */
typedef struct lane {
    ro_actor_t actor;
    learner_t *L;
    ro_policy_ws_t *ws; /* touched only by the thread running the lane */
    uint32_t ws_rows;
} lane_t;

struct learner {
    uv_loop_t loop;
    uv_check_t check;
    uv_timer_t wait_timer, deadline, progress;
    uv_signal_t sigint, sigterm;
    ro_learner_cfg_t cfg;
    char token[256];
    node_conn_t conns[RO_LEARNER_MAX_NODES];
    uint32_t open_conns; /* nodes not done with: connected, connecting or waiting to reconnect */

    /* The spaces, from the first welcome; every node must match. */
    bool have_spec;
    uint32_t obs_dim, act_dim, act_n;
    bool discrete;
    float *obs_low, *obs_high, *act_low, *act_high;
    ro_space_t obs_space, act_space;
    ro_policy_t *policy; /* read-only once built: shared by the lanes */

    /* Forward passes on the workers. */
    ro_topology_t topo;
    ro_worker_plan_t *plan;
    int ngroups, group_nodes[RO_TOPO_MAX_NODES];
    ro_sched_t *sched;
    lane_t *lanes;
    uint32_t nlanes, next_lane;
    uv_async_t done_async;
    ro_actor_t done; /* loop actor: jobs come back here */
    uint32_t jobs_out;
    bool finished;
    int threads;                     /* read from /proc/self/task once the workers run */
    Rollout__V1__PolicyParams *push; /* --push-policy: the weights to push */
    uint32_t pushed;                 /* nodes that accepted them */

    pending_t *pending_head, **pending_tail;
    uint32_t pending_rows;
    uint64_t first_pending_ns;
    bool wait_armed;

    uint64_t steps, batches;
    uint64_t t0;
    bool stopping;
    int exit_code;
    char err[512];
};

/* learner_conn.c */
/* ro__learner_send encodes and queues a frame to a node; 0 or a negative code. */
int ro__learner_send(node_conn_t *c, const ro_frame_t *f);
/* ro__learner_stop_all says goodbye to every node and closes the connections. */
void ro__learner_stop_all(learner_t *L, const char *why);
/* ro__learner_conn_start initializes c's handles and makes the first
 * connection attempt; c->L, index, addr and sa are set. Loop thread, before
 * uv_run. */
void ro__learner_conn_start(node_conn_t *c);
/* ro__learner_parse_addr parses "HOST:PORT" (numeric IPv4/IPv6). */
int ro__learner_parse_addr(const char *spec, struct sockaddr_storage *ss);

/* learner_main.c */
/* ro__learner_maybe_finish closes the loop's handles (the nodes' retry
 * timers too) once no node is left and no job is out. */
void ro__learner_maybe_finish(learner_t *L);

#endif
