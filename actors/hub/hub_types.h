/*
 * The remote-learner hub's options and counters (learner_hub.h), apart so
 * that the hub's own files share them without including its API.
 */
#ifndef RO_HUB_TYPES_H
#define RO_HUB_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"

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
    uint64_t seed;       /* the run seed, told to learners in the welcome */
    uint32_t node_index; /* --node-index, told to learners in the welcome */
    uint32_t max_episode_steps;
    uint32_t spin_us; /* spin this long for actions due (runtime/loop_spin.h); 0: never */
    bool learners;    /* accept role "learner" (the node runs --learner remote) */
    bool recording;   /* --record: per-env reseeds are refused (hub_reseed.c) */
    /* SEED mode with an env of env ABI 2 that is not ABI 1 shaped: its
     * layout (outlives the hub), which the welcome carries and every
     * frame follows; NULL for ABI 1 spaces. */
    const struct ro_space_layout *layout;
    /* Accept role "trainer" and pass each PolicyParams it pushes to on_policy
     * (loop thread), which returns 0 or a negative code with a message. */
    int (*on_policy)(void *ctx, const Rollout__V1__PolicyParams *pp, char *err, size_t errlen);
    void *ctx;
} ro_hub_opts_t;

/* Counters, read on the loop thread. */
typedef struct ro_hub_stats {
    uint64_t accepted;         /* connections accepted */
    uint64_t attached;         /* hellos accepted */
    uint64_t rejected;         /* sessions closed for bad input or a slow peer */
    uint64_t timed_out;        /* sessions closed for not answering (or saying hello) in time */
    uint64_t upgrades_offered; /* TCP hellos answered with the private socket (hub_admit.c) */
    uint64_t upgrades;         /* learners attached through it */
    uint64_t batches_sent;     /* Observations frames */
    uint64_t batches_resent;   /* batches sent again after a learner left */
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
    uint64_t policy_pushes;  /* policies pushed by trainers or stream learners and accepted */
    /* SEED with --spin-us: the loop's spins while actions were due
     * (runtime/loop_spin.h): answers that came in time, spins that ran out. */
    uint64_t spin_hits, spin_misses;
    /* Stream mode (stream set). */
    bool stream;
    uint64_t segments_sent, segments_acked, segments_resent, segments_dropped_lag;
    uint64_t segments_unsent_at_stop; /* dropped: the node stopped with no learner left */
    uint64_t transitions_sent, transitions_acked;
    uint32_t segments_in_flight;             /* sent, not yet acknowledged */
    uint32_t segments_unsent;                /* waiting for their learner's window, or a learner */
    uint64_t policy_lag_min, policy_lag_max; /* versions behind, at send */
    double policy_lag_mean;
} ro_hub_stats_t;

#endif
