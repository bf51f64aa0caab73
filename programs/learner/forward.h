/*
 * rollout-learner's forward passes: W pinned workers (the runtime's
 * scheduler), one lane actor on each with its own policy scratch; or, with
 * W = 0, one lane that the loop thread runs itself (no hand-off: two
 * context switches less per batch, what a learner with one core wants). The loop
 * hands a lane a job (received frames batched by the one batcher, with the
 * sampling stream of each row); the lane runs the policy over their
 * observations and hands the job back, with one action per row, to the
 * loop's done callback.
 */
#ifndef RO_FORWARD_H
#define RO_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "actors/exchange/batcher.h"
#include "policy/policy.h"
#include "runtime/actor.h"
#include "runtime/rng.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"
#include "wire/frame.h"

struct ro_link;

/* A received Observations frame waiting for its forward pass. Loop thread,
 * then the lane holding its job, then the loop again. */
typedef struct ro_pending {
    ro_batch_item_t item; /* rows: its envs */
    ro_frame_t *frame;    /* NULL for a frame taken from the ring */
    uint64_t seq;         /* the frame's */
    bool in_memory;       /* its rows are in the node's memory */
    struct ro_link *link;
    uint32_t gen;        /* the link's connection it came on */
    const uint32_t *env; /* [rows] env indices: the frame's, or after obs_copy */
    const float *obs;    /* [rows x obs_dim]: the frame's, or obs_copy */
    const uint8_t *mask; /* env ABI 2: [rows x mask_width] in obs_copy, or NULL */
    /* A recurrent policy: per row, the state its step starts from, then
     * the one the lane leaves ([rows][2][state floats]), and the row's
     * step; NULL otherwise. */
    float *rs;
    uint64_t *rs_step;
    /* A frame in the node's memory: its rows copied out on arrival (then
     * their env indices), so that a lane never reads a mapping the loop may
     * release (a reconnect). */
    float obs_copy[];
} ro_pending_t;

/* One forward pass: its frames and room for their actions. */
typedef struct ro_job {
    ro_msg_t msg;
    ro_batch_item_t *frames; /* ro_pending_t items */
    uint32_t rows;
    bool failed;       /* the lane had no memory: nothing was computed */
    ro_rng_t **rowrng; /* [rows] the sampling stream of each row */
    int32_t *act_i;    /* [rows] (env ABI 2: [rows x ndisc]) */
    float *act_f;      /* [rows x act_dim] (env ABI 2: [rows x nbox]) */
    uint8_t *mask;     /* env ABI 2: [rows x mask_width], or NULL */
    float **state;     /* a recurrent policy: [rows] each row's working state, or NULL */
} ro_job_t;

typedef void (*ro_job_done_fn)(void *ctx, ro_job_t *job);

typedef struct ro_lane {
    ro_actor_t actor;
    struct ro_forward *fw;
    ro_policy_ws_t *ws; /* touched only by the thread running the lane */
    uint32_t ws_rows;
} ro_lane_t;

typedef struct ro_forward {
    ro_topology_t topo;
    ro_worker_plan_t *plan;
    int ngroups, group_nodes[RO_TOPO_MAX_NODES];
    ro_sched_t *sched;
    ro_lane_t *lanes;
    uint32_t nlanes, next_lane;
    bool inline_lane;          /* W = 0: submit runs the job and calls on_done */
    const ro_policy_t *policy; /* set before the first job; read-only then */
    uint32_t obs_dim;
    ro_loop_home_t done_home;
    ro_actor_t done; /* loop actor: jobs come back here */
    ro_job_done_fn on_done;
    void *ctx;
    uint32_t jobs_out; /* loop thread */
} ro_forward_t;

/* ro__forward_start plans and starts `workers` pinned workers with a lane
 * each, and the loop actor that takes finished jobs to on_done (workers 0:
 * the inline lane, on_done called from ro__forward_submit). Returns 0,
 * or a negative code with one line in err. Loop thread, once. */
int ro__forward_start(ro_forward_t *fw, uv_loop_t *loop, uint32_t workers, bool overcommit,
                      ro_job_done_fn on_done, void *ctx, char *err, size_t errlen);

/* ro__forward_submit hands a job to the next lane, round robin. The lane
 * owns it until on_done gets it back. Loop thread. */
void ro__forward_submit(ro_forward_t *fw, ro_job_t *job);

/* ro__forward_close joins the (idle) workers and closes the done handle
 * (once no job is out). Loop thread. */
void ro__forward_close(ro_forward_t *fw);

/* ro__forward_stop joins the workers and frees everything. Main thread,
 * after the loop ended. */
void ro__forward_stop(ro_forward_t *fw);

#endif
