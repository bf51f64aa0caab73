/*
 * Stream mode's trajectory segments (docs/protocol.md "Stream mode"): T
 * consecutive steps of the N envs of one shard, each column in its own
 * array so that it goes on the wire as it lies in memory (segment_codec.h).
 *
 * A shard's env actor fills one segment at a time through its stream port
 * (stream_port.h), hands it to the stream hub when T rows are in, and takes
 * the next from a bounded pool (runtime/grant_pool.h): if none is free
 * (learners are behind), the shard waits for a grant without blocking its
 * worker. The hub gives a segment back to the pool once a learner
 * acknowledged it.
 *
 * A segment belongs to one thread at a time: the env actor's while it
 * fills it, the loop's (the hub) from the hand-over message until it is
 * given back; the message and the pool's mutex order the data.
 */
#ifndef RO_SEGMENT_H
#define RO_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"
#include "runtime/actor.h"
#include "runtime/grant_pool.h"
#include "runtime/shared_mem.h"

struct ro_space_layout;

/* Element types, as proto/rollout.proto's DType numbers them. */
enum { RO_DT_FLOAT32 = 1, RO_DT_INT32 = 2, RO_DT_UINT8 = 3, RO_DT_UINT32 = 4, RO_DT_UINT64 = 5 };

/* The columns of an ABI 1 env's segment, in the order they go on the wire. */
enum ro_seg_col {
    RO_SEG_OBS,            /* float32 [T, N, obs...]: the observation each action saw */
    RO_SEG_ACTION,         /* int32 [T, N] or float32 [T, N, act] */
    RO_SEG_LOGP,           /* float32 [T, N] */
    RO_SEG_MEAN,           /* float32 [T, N, act]: box MLP only */
    RO_SEG_LOG_STD,        /* float32 [T, act]: box MLP only */
    RO_SEG_REWARD,         /* float32 [T, N] */
    RO_SEG_TERMINATED,     /* uint8 [T, N] */
    RO_SEG_TRUNCATED,      /* uint8 [T, N] */
    RO_SEG_IS_FIRST,       /* uint8 [T, N]: obs starts an episode */
    RO_SEG_EPISODE,        /* uint32 [T, N]: the env's episode number */
    RO_SEG_STEP,           /* uint32 [T, N]: the action's step in its episode, from 0 */
    RO_SEG_POLICY_VERSION, /* uint64 [T] */
    RO_SEG_NEXT_OBS,       /* float32 [N, obs...]: the observation after the last step */
    RO_SEG_FINAL_INDEX,    /* int32 [K]: t * N + n of the steps that ended an episode */
    RO_SEG_FINAL_OBS,      /* float32 [K, obs...]: their last observation */
    RO_SEG_STATE_H,        /* float32 [N, H]: a recurrent policy's h before step 0 */
    RO_SEG_STATE_C,        /* float32 [N, H]: an LSTM's c before step 0 */
    RO_SEG_NCOLS
};

/* The columns of an env ABI 2 env's segment (docs/protocol.md), in wire
 * order; R rows = envs x agents. Those the env does not use (tensors past
 * its own, no box part, no mask) are absent. */
enum ro_seg2_col {
    RO_SEG2_OBS = 0, /* + k: "obs/<name>" [T, R, shape...] of tensor k's dtype */
    RO_SEG2_ACTION = RO_SEG2_OBS + RO_ENV_MAX_TENSORS, /* int32 [T, R, ndisc] */
    RO_SEG2_ACTION_BOX,                                /* float32 [T, R, nbox] */
    RO_SEG2_MASK,                                      /* uint8 [T, R, mask_width] */
    RO_SEG2_LOGP,                                      /* float32 [T, R]: summed over heads */
    RO_SEG2_REWARD,                                    /* float32 [T, R] */
    RO_SEG2_TERMINATED,                                /* uint8 [T, R] */
    RO_SEG2_TRUNCATED,                                 /* uint8 [T, R] */
    RO_SEG2_IS_FIRST,                                  /* uint8 [T, R] */
    RO_SEG2_EPISODE,                                   /* uint32 [T, R]: its env's */
    RO_SEG2_STEP,                                      /* uint32 [T, R]: its env's */
    RO_SEG2_POLICY_VERSION,                            /* uint64 [T] */
    RO_SEG2_NEXT_OBS,                                  /* + k: "next_obs/<name>" [R, shape...] */
    RO_SEG2_FINAL_INDEX = RO_SEG2_NEXT_OBS + RO_ENV_MAX_TENSORS, /* int32 [K] */
    RO_SEG2_FINAL_OBS, /* + k: "final_obs/<name>" [K, shape...] */
    RO_SEG2_STATE_H = RO_SEG2_FINAL_OBS + RO_ENV_MAX_TENSORS, /* float32 [R, H], as ABI 1's */
    RO_SEG2_STATE_C,                                          /* float32 [R, H] */
    RO_SEG2_NCOLS
};

/* The most columns of a segment, either ABI. */
#define RO_SEG_MAX_COLS RO_SEG2_NCOLS

/* What a column's leading dimensions count: steps x rows, steps, rows, or
 * the segment's final observations. */
enum { RO_SEG_LEAD_TN = 1, RO_SEG_LEAD_T, RO_SEG_LEAD_N, RO_SEG_LEAD_K };

/* One column: its name, element type, leading dimensions, the dimensions
 * after them, and its bytes per leading element (0: absent). */
typedef struct ro_seg_col_desc {
    char name[48];
    uint8_t dtype; /* RO_DT_* */
    uint8_t lead;  /* RO_SEG_LEAD_* */
    uint32_t ndim, shape[RO_SPACE_MAX_DIMS];
    size_t item;
} ro_seg_col_desc_t;

/* What every segment of a node looks like. Read-only once built. */
typedef struct ro_seg_layout {
    uint32_t T;                      /* unroll: rows per segment */
    uint32_t obs_dim, act_dim;       /* floats per observation; per box action */
    uint32_t obs_ndim, obs_shape[4]; /* the observation's shape */
    bool discrete;
    bool gaussian;  /* the policy reports mean and log_std */
    uint32_t max_n; /* envs in the largest shard (ABI 2: rows) */
    size_t bytes;   /* one segment's arrays, cache-line rounded */
    /* Env ABI 2: the env's layout (owned by the node, outliving the pool),
     * or NULL for ABI 1 columns. */
    const struct ro_space_layout *space;
    uint32_t ncols; /* RO_SEG_NCOLS or RO_SEG2_NCOLS */
    ro_seg_col_desc_t col[RO_SEG_MAX_COLS];
} ro_seg_layout_t;

typedef struct ro_segment {
    ro_pool_item_t item;     /* in the pool while free */
    ro_msg_t msg;            /* env actor -> stream hub: full (RO_MSG_SEGMENT) */
    struct ro_segment *next; /* the hub's queues */
    const ro_seg_layout_t *lay;
    struct ro_seg_pool *pool; /* where it goes back */

    /* Set by the env actor before the hand-over. */
    uint32_t shard, first_env, n;
    uint64_t shard_seq;
    uint32_t t;      /* rows filled */
    uint32_t nfinal; /* K */
    uint64_t version_min, version_max;
    bool last; /* the shard's last segment (the run ends) */

    /* The hub's while it holds it. */
    uint64_t conn_seq; /* its seq on the connection it was sent on; 0: unsent */
    uint64_t sent_ns;
    uint32_t writing; /* writes of its frame not yet done */
    bool acked;       /* acknowledged while still being written: freed when written */

    void *col[RO_SEG_MAX_COLS]; /* each column's array, in mem; NULL: absent */
    void *mem;
} ro_segment_t;

/* Where the columns both ABIs' segments have lie: ABI 1's after enum
 * ro_seg_col, ABI 2's after enum ro_seg2_col (obs, next_obs, final_obs:
 * the first tensor's; tensor k's is + k). */
typedef struct ro_seg_cols {
    int obs, next_obs, final_obs;
    int logp, reward, terminated, truncated, is_first, episode, step, version, final_index;
    int state_h, state_c;
} ro_seg_cols_t;

/* ro__seg_cols says where lay's columns lie (its ABI's numbers). */
const ro_seg_cols_t *ro__seg_cols(const ro_seg_layout_t *lay);

/* ro__seg_layout makes the layout of segments of T rows for envs with
 * these spaces, shards of at most max_n envs; gaussian: the policy reports
 * mean and log_std (a box MLP). */
void ro__seg_layout(ro_seg_layout_t *lay, uint32_t T, const ro_space_t *obs, const ro_space_t *act,
                    bool gaussian, uint32_t max_n);

/* ro__seg_layout_state adds a recurrent policy's state columns to a layout
 * made by either function above: "state/h" [N, hid] and, for an LSTM
 * (lstm), "state/c" [N, hid], each row's state before the segment's first
 * step (zeros where that step starts an episode). */
void ro__seg_layout_state(ro_seg_layout_t *lay, uint32_t hid, bool lstm);

/* ro__seg_layout_cell names a layout's state columns as the welcome does:
 * "gru:H" (state/h only) or "lstm:H" into buf, or "" (none). */
void ro__seg_layout_cell(const ro_seg_layout_t *lay, char *buf, size_t len);

/* ro__seg_layout_typed makes the layout of an env ABI 2 env's segments (sp,
 * which must outlive it), shards of at most max_rows rows (envs x agents).
 * Column names come from the env's tensor names. */
void ro__seg_layout_typed(ro_seg_layout_t *lay, uint32_t T, const struct ro_space_layout *sp,
                          uint32_t max_rows);

/* ro__seg_col_bytes is how many bytes column c of s holds now (its rows
 * filled, or K for the final columns); 0 for an absent one. */
size_t ro__seg_col_bytes(const ro_segment_t *s, int c);

/* ro__seg_col_name names an ABI 1 column on the wire ("obs", ...); a
 * layout's col[c].name names any. */
const char *ro__seg_col_name(int c);

/* ro__seg_col_shape writes column c's shape in s (its leading dimensions,
 * then the rest) and returns how many dimensions it has. */
uint32_t ro__seg_col_shape(const ro_segment_t *s, int c, uint32_t *shape);

/* The segments of a node and the shards waiting for one. */
typedef struct ro_seg_pool {
    ro_grant_pool_t pool;
    ro_seg_layout_t lay;
    ro_segment_t *segs;
    uint32_t nsegs;
    void *mem;           /* every segment's arrays */
    ro_shared_mem_t shm; /* mem, when it is shared (shm.base == mem); else zeroed */
} ro_seg_pool_t;

/* ro__seg_pool_init allocates nsegs segments of layout lay; shared: in
 * memory a learner on this host can map (runtime/shared_mem.h), if the
 * kernel allows it (p->shm.base tells). Main thread. Returns 0 or
 * RO_ENOMEM. */
int ro__seg_pool_init(ro_seg_pool_t *p, const ro_seg_layout_t *lay, uint32_t nsegs, bool shared);
void ro__seg_pool_free(ro_seg_pool_t *p);

/* ro__seg_pool_give gives segments back (a list through next). Any thread. */
void ro__seg_pool_give(ro_seg_pool_t *p, ro_segment_t *list);

#endif
