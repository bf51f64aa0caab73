/*
 * Reading a stream-mode Segment frame in place (docs/protocol.md "Stream
 * mode"): the frame's bytes are walked as protobuf's wire format, and each
 * tensor is described by a pointer into them, never copied. The bytes are
 * untrusted: every length is checked against what is left, unknown fields
 * are skipped, and ro__segment_view_check holds the tensors to the shapes
 * their header promises. Pure functions: any thread.
 */
#ifndef RO_SEGMENT_VIEW_H
#define RO_SEGMENT_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RO_VIEW_MAX_TENSORS 48
#define RO_VIEW_MAX_DIMS 8

typedef struct ro_tensor_view {
    const char *name; /* not NUL-terminated: name_len bytes */
    size_t name_len;
    uint32_t dtype; /* proto/rollout.proto DType */
    uint32_t ndim;
    uint32_t shape[RO_VIEW_MAX_DIMS];
    const uint8_t *data; /* little-endian elements, in the frame's bytes (or shared memory) */
    size_t bytes;
    uint64_t offset; /* in shared memory (the segment's in_memory) */
} ro_tensor_view_t;

typedef struct ro_segment_view {
    uint64_t seq, shard_seq, version_min, version_max;
    uint32_t shard, first_env, t, n;
    bool in_memory; /* the tensors lie in the node's segment memory: resolve them */
    uint32_t ntensors;
    ro_tensor_view_t tensors[RO_VIEW_MAX_TENSORS];
} ro_segment_view_t;

/*
 * ro__segment_view_parse reads frame (a Frame message's bytes, without its
 * length prefix). Returns 1 and fills v if it is a segment, 0 if it is some
 * other frame (decode it as usual), or RO_EBADMSG with one line in err if
 * it is malformed.
 */
int ro__segment_view_parse(const uint8_t *frame, size_t len, ro_segment_view_t *v, char *err,
                           size_t errlen);

/*
 * ro__segment_view_resolve points an in_memory segment's tensors at their
 * bytes in the node's segment memory, size bytes mapped at base (NULL:
 * none mapped). Every tensor must lie inside it, its bytes those its dtype
 * and shape take. Returns 0 (also for a segment that carries its bytes) or
 * RO_EPROTO with one line in err.
 */
int ro__segment_view_resolve(ro_segment_view_t *v, const uint8_t *base, size_t size, char *err,
                             size_t errlen);

/* ro__segment_view_find returns the tensor named name, or NULL. */
const ro_tensor_view_t *ro__segment_view_find(const ro_segment_view_t *v, const char *name);

/* The most observation tensors, and dims of one, of an env ABI 2 layout
 * (include/rollout/env.h's limits), and the bytes of a tensor's name. */
#define RO_VIEW_MAX_OBS 8
#define RO_VIEW_MAX_OBS_DIMS 4
#define RO_VIEW_MAX_NAME 32

/* One observation tensor of an env ABI 2 layout: one row's. */
typedef struct ro_segment_obs_rule {
    char name[RO_VIEW_MAX_NAME]; /* NUL-terminated */
    uint32_t dtype;              /* proto DType */
    uint32_t ndim, shape[RO_VIEW_MAX_OBS_DIMS];
} ro_segment_obs_rule_t;

/* What a learner expects of a node's segments (from its welcome). Zero it
 * before filling it: reconnects compare it bytewise. */
typedef struct ro_segment_rules {
    uint32_t unroll;   /* most steps */
    uint32_t num_envs; /* env indices below this */
    uint32_t obs_dim;  /* floats per observation (ABI 1) */
    uint32_t act_dim;  /* floats per box action; 1 for discrete (ABI 1) */
    bool discrete;
    /* Env ABI 2 (the welcome's layout): a segment's n counts rows, agents
     * per env; its tensors are docs/protocol.md's ABI 2 list. */
    bool abi2;
    uint32_t agents, nobs;
    ro_segment_obs_rule_t obs[RO_VIEW_MAX_OBS];
    uint32_t ndisc, nbox, mask_width; /* per row; 0: no such tensor */
    /* The welcome's recurrent cell: state_hid = H (0: none), state_lstm. */
    uint32_t state_hid;
    bool state_lstm;
} ro_segment_rules_t;

/* ro__segment_view_check holds a parsed segment to the rules: 1 <= t <=
 * unroll, its envs within num_envs (ABI 2: whole envs of agents rows),
 * every required tensor present with its dtype, shape and byte count,
 * final indices inside the segment, versions ordered; a recurrent node's
 * state/h (and state/c) finite, and zero in every row whose first step
 * starts an episode. Returns 0 or
 * RO_EPROTO with one line in err, naming the tensor. */
int ro__segment_view_check(const ro_segment_view_t *v, const ro_segment_rules_t *r, char *err,
                           size_t errlen);

#endif
