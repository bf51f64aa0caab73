/*
 * rollout-learner's state, shared by main.c (start-up, signals, the
 * summary), serve.c (links' callbacks, jobs, the loop's turns), welcome.c
 * (the spec, a node's memory), frame_rows.c (a frame's rows and actions)
 * and frame_ring.c (a SEED node's frame ring): main.c calls serve.c,
 * serve.c the other three, never the other way. Loop
 * thread, except where a field says a lane touches it.
 */
#ifndef RO_LEARNER_H
#define RO_LEARNER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/exchange/batcher.h"
#include "learner/cli.h"
#include "learner/forward.h"
#include "learner/node_link.h"
#include "learner/stream_rx.h"
#include "metrics/histo.h"
#include "metrics/exporters.h"
#include "policy/policy.h"
#include "policy/state_table.h"
#include "runtime/loop_spin.h"
#include "runtime/shared_mem.h"
#include "spaces/layout.h"
#include "wire/pb_alloc.h"
#include "wire/seed_memory.h"

#define MAX_NUM_ENVS (1u << 20)

/* One node: its link and what the learner keeps of it. Loop thread. */
typedef struct node {
    ro_link_t link;
    uint32_t num_envs;
    ro_rng_t *rngs;          /* [num_envs]; kept across reconnects (lanes may hold them) */
    double *ep_ret;          /* [num_envs] running return */
    uint64_t *next_step;     /* [num_envs] first step not yet counted: a resent batch is not
                                counted twice */
    ro_state_table_t rstate; /* a recurrent policy's states per row (policy/state_table.h) */
    uint64_t steps, episodes;
    uint64_t steps_at_welcome; /* steps when this connection was welcomed (SEED) */
    double return_sum;
    uint64_t frames, frames_in_memory; /* SEED: Observations frames, those in shared memory */
    /* SEED, on this host: the node's observation memory and this
     * connection's action memory (wire/seed_memory.h); unmapped when the
     * connection's frames carry the columns. */
    ro_shared_mem_t seed_obs, seed_act;
    ro_seed_mem_layout_t seed_lay;
    /* SEED, on this host, Hello.seed_ring: the connection's frame rings
     * (wire/seed_ring.h; NULL: none), the frames we took from the node's,
     * how many of the connection's frames came that way, and how many of
     * our answers went through ours. */
    ro_shared_mem_t ring_mem;
    struct ro_seed_rings *rings;
    uint64_t ring_tail;
    uint64_t frames_in_ring, answers_in_ring;
    bool ring_asleep;    /* marked asleep by us (frame_ring.c), not yet woken */
    bool stream;         /* a stream node: segments, not observations */
    ro_stream_rx_t rx;   /* stream: what came in */
    uint64_t ack_owed;   /* stream: the highest seq taken and not yet acknowledged (0: none) */
    uint64_t first_owed; /* stream: the lowest seq taken and not yet acknowledged */
    uint32_t ack_every;  /* stream: owed segments that make an ack go at once (half the window) */
} node_t;

/* --tensorboard and --prometheus (metrics.c). Loop thread. */
typedef struct learner_metrics {
    bool on;          /* either asked for: the histograms count */
    uv_timer_t timer; /* an event each --metrics-interval */
    ro_exporters_t out;
    char labels[256];
    /* This interval's (TensorBoard) and the earlier ones' (Prometheus adds
     * the two): SEED episodes' returns (serve.c counts them) and rows per
     * forward pass. */
    ro_histo_t ret_iv, ret_all, rows_iv, rows_all;
    uint64_t last_ns, last_steps, last_batches, last_episodes;
    double last_return;
} learner_metrics_t;

typedef struct learner {
    uv_loop_t loop;
    uv_check_t check;
    uv_prepare_t prepare; /* frame rings marked asleep before the loop may block */
    uv_idle_t kick;       /* one more turn without blocking (frames kept coming) */
    ro_loop_spin_t spin;  /* polls for the next observations after answering */
    uv_timer_t wait_timer, deadline, progress;
    uv_signal_t sigint, sigterm;
    ro_learner_cfg_t cfg;
    char token[256];
    node_t nodes[RO_LEARNER_MAX_NODES];
    uint32_t open_links; /* nodes not done with */

    /* The spaces, from the first welcome; every node must match. */
    bool have_spec;
    uint32_t obs_dim, act_dim, act_n;
    bool discrete;
    float *bounds[4]; /* copies of the box bounds: obs low/high, act low/high */
    ro_space_t obs_space, act_space;
    ro_policy_t *policy; /* read-only once built: shared by the lanes */
    /* The env's layout (welcome.c): an env ABI 2 node's, or an ABI 1
     * node's spaces adapted to one (one float32 tensor, one action part),
     * which every path past the welcome reads; abi2: the node speaks ABI 2
     * frames (typed tensors). Rows are envs x agents; the lanes' actions
     * are act_ndisc entries (1 for ABI 1 spaces) and act_dim floats apart. */
    bool abi2;
    ro_space_layout_t lay;
    uint32_t act_ndisc;

    ro_forward_t fw;
    ro_batcher_t pending; /* received frames waiting for a forward pass */
    bool wait_armed;
    bool finished;
    int threads; /* read from /proc/self/task once the workers run */
    /* threads.c: the forward pass timed at the first welcome (0: none)
     * over forward_rows rows, which chose cfg.workers. */
    uint64_t forward_ns;
    uint32_t forward_rows;
    Rollout__V1__PolicyParams *push; /* --push-policy: the weights to push */
    ro_pb_alloc_t push_alloc;
    uint32_t pushed; /* nodes that accepted them */

    uint64_t steps, batches;
    learner_metrics_t met;
    uint64_t t0;       /* the first welcome (the start until then) */
    bool welcomed_any; /* some node welcomed us: t0 is set */
    bool stopping;
    int exit_code;
    char err[512];
} learner_t;

/* serve.c */
/* The links' callbacks. */
extern const ro_link_ops_t ro__learner_link_ops;
/* ro__learner_stop_all says goodbye to every node and closes. */
void ro__learner_stop_all(learner_t *L, const char *why);
/* ro__learner_maybe_finish closes the loop's handles once no node is left
 * and no job is out. */
void ro__learner_maybe_finish(learner_t *L);
/* ro__learner_job_done takes a job back from a lane (forward.h). */
void ro__learner_job_done(void *ctx, ro_job_t *j);
/* ro__learner_on_check runs the batches due after each turn of the loop. */
void ro__learner_on_check(uv_check_t *h);
/* ro__learner_on_prepare: before the loop may block, the nodes' frame
 * rings are marked asleep (frames posted meanwhile taken first). */
void ro__learner_on_prepare(uv_prepare_t *h);
/* ro__learner_free_pending frees received frames (a list of ro_pending_t). */
void ro__learner_free_pending(ro_batch_item_t *it);

/* metrics.c */
/* ro__learner_metrics_open opens --tensorboard and --prometheus and starts
 * the interval timer. 0, or a negative code with one line in err. */
int ro__learner_metrics_open(learner_t *L, char *err, size_t errlen);
/* ro__learner_metrics_close writes the last event, closes the file and the
 * endpoint (handles close on the loop). Returns 0, or RO_EIO if the event
 * file could not be written. Again is harmless. */
int ro__learner_metrics_close(learner_t *L);

/* threads.c */
/* ro__learner_choose_threads starts the forward lanes unless they run
 * (--workers given, or an earlier welcome): times a pass over rows rows (0:
 * a node without forward passes) and picks the loop thread or workers
 * (local: the node is on this host and needs a CPU), and the loop's spin;
 * the lanes hand their jobs to on_done. 0, or a negative code
 * with one line in err. */
int ro__learner_choose_threads(learner_t *L, uint32_t rows, bool local, ro_job_done_fn on_done,
                               char *err, size_t errlen);

/* welcome.c */
/* ro__learner_welcome takes node n's welcome: the spec or layout (the
 * policy built on the first), a stream node's rules, the SEED memory and
 * ring, the per-env state. 0, or a code with one line in err; *misfit is
 * set when the policy does not fit the env's layout (every node will say
 * so: the caller stops). */
int ro__learner_welcome(learner_t *L, node_t *n, const Rollout__V1__Welcome *w, bool *misfit,
                        char *err, size_t errlen);

/* frame_rows.c */
/* ro__learner_rows_bytes: the room a pending frame of rows rows needs
 * after it (ro_pending_t.obs_copy) for ro__learner_take_rows. */
size_t ro__learner_rows_bytes(const learner_t *L, const Rollout__V1__Observations *o,
                              uint32_t rows);
/* ro__learner_take_rows takes a checked frame's rows into p (its env
 * indices, the observations the forward pass reads, the mask rows, the
 * recurrent states) and counts their steps. A frame in node n's memory is
 * read out of it here (ranges checked), and what it holds is checked as it
 * is read (each value read once): a NaN or infinite observation or reward,
 * or flags no node writes, are refused by name, never used. 0, or a
 * negative code (RO_ERANGE, RO_ENOMEM) with one line in err. */
int ro__learner_take_rows(learner_t *L, node_t *n, const Rollout__V1__Observations *o,
                          ro_pending_t *p, char *err, size_t errlen);
/* ro__learner_write_actions writes a frame's rows' entries (act_i,
 * act_ndisc apart) and floats (act_f, act_dim apart) into node n's action
 * memory at their row indices (p->env). */
void ro__learner_write_actions(const learner_t *L, node_t *n, const ro_pending_t *p,
                               const int32_t *act_i, const float *act_f);

#endif
