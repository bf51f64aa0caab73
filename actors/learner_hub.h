/*
 * The remote-learner hub: serves the node's envs to learners attached over
 * TCP (rollout-learner, the Python client), in place of local learner lanes.
 *
 * It is a loop actor. Env actors offer it their step batches exactly as
 * they would a local lane. Each shard is owned by one learner session at a
 * time (so a learner sees whole trajectories); a session batches its ready
 * shards into Observations frames (the one batcher: a full batch, every
 * shard of the session waiting, or max-wait) and the Actions frame that
 * answers each one sends them back to stepping (session_flow.h).
 *
 * No transition is lost: a shard whose observations were sent stays parked
 * (its step batch is the kept copy) until its actions arrive. If the
 * learner goes away, its unanswered batches and its shards pass to another
 * learner, or wait for the next one to attach, and are sent again. Memory is
 * bounded by the number of shards.
 *
 * The same listener takes trainers on a node with local learner lanes: a
 * trainer pushes PolicyParams, which the node validates and switches to.
 *
 * Every frame from a peer is untrusted: size limit, version, order, counts
 * and action ranges are checked; a bad one gets an Error frame, the
 * connection is closed with a log line, and the node keeps serving the
 * other learners.
 */
#ifndef RO_LEARNER_HUB_H
#define RO_LEARNER_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "actors/step_batch.h"
#include "rollout.pb-c.h"
#include "rollout/env.h"
#include "runtime/actor.h"

typedef struct ro_hub ro_hub_t;

typedef struct ro_hub_opts {
    const char *listen;       /* "HOST:PORT" */
    const char *token;        /* required in hellos, or NULL */
    uint32_t batch;           /* envs per Observations frame */
    uint64_t max_wait_us;     /* send a partial batch after this long */
    size_t max_frame;         /* largest frame accepted, bytes */
    uint32_t max_learners;    /* sessions at once; more are refused */
    double learner_timeout_s; /* close a learner that leaves a batch unanswered this long */
    double hello_timeout_s;   /* close a connection that has not said hello this long; 0: never */
    const char *env_name;
    uint64_t seed;
    uint32_t max_episode_steps;
    bool learners; /* accept role "learner" (the node runs --learner remote) */
    /* Accept role "trainer" and pass each PolicyParams it pushes to on_policy
     * (loop thread), which returns 0 or a negative code with a message. */
    int (*on_policy)(void *ctx, const Rollout__V1__PolicyParams *pp, char *err, size_t errlen);
    void *ctx;
} ro_hub_opts_t;

/* Counters, read on the loop thread. */
typedef struct ro_hub_stats {
    uint64_t accepted;       /* connections accepted */
    uint64_t attached;       /* hellos accepted */
    uint64_t rejected;       /* sessions closed for bad input or a slow peer */
    uint64_t timed_out;      /* sessions closed for not answering (or saying hello) in time */
    uint64_t batches_sent;   /* Observations frames */
    uint64_t batches_resent; /* batches sent again after a learner left */
    uint64_t rows_sent;
    /* Gauges at the time of the call: where the envs are waiting. A slow
     * learner shows as envs_in_flight near num_envs and a growing
     * oldest_wait_ns; memory stays bounded because each env waits in its
     * own step batch (there is no queue to grow). */
    uint32_t learners;       /* attached learner sessions */
    uint32_t envs_in_flight; /* sent, actions not yet back */
    uint32_t envs_unsent;    /* ready, waiting for a batch or a learner */
    uint64_t oldest_wait_ns; /* age of the oldest unanswered batch; 0 if none */
    uint64_t queued_bytes;   /* frames accepted by the kernel's queue, not yet sent */
} ro_hub_stats_t;

/*
 * ro__hub_new binds the listener and prepares the hub for the step batches
 * of nshards shards, already initialised (it sizes its frames from their
 * row counts; batches[i]->index == i; their learner must be
 * ro__hub_actor()). control receives RO_MSG_LANE_DONE when every shard is
 * done. On failure returns a negative code and one line in err. Loop
 * thread, before the loop runs.
 */
int ro__hub_new(ro_hub_t **out, uv_loop_t *loop, ro_step_batch_t *const *batches, uint32_t nshards,
                uint32_t num_envs, const ro_space_t *obs, const ro_space_t *act,
                ro_actor_t *control, const ro_hub_opts_t *o, char *err, size_t errlen);

/* ro__hub_actor is the actor shards offer their step batches to. */
ro_actor_t *ro__hub_actor(ro_hub_t *h);

/* ro__hub_address writes the bound address ("127.0.0.1:40123"). */
void ro__hub_address(const ro_hub_t *h, char *buf, size_t len);

/* ro__hub_stop stops serving: says goodbye to every learner and tells
 * every shard it holds to finish. Loop thread; idempotent. */
void ro__hub_stop(ro_hub_t *h);

/* ro__hub_close closes every handle (after stop). Loop thread. */
void ro__hub_close(ro_hub_t *h);

/* ro__hub_stats copies the counters and reads the gauges. Loop thread. */
void ro__hub_stats(const ro_hub_t *h, ro_hub_stats_t *out);

/* ro__hub_free frees the hub after its handles closed. */
void ro__hub_free(ro_hub_t *h);

#endif
