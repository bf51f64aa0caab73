/*
 * The layout of an env's spaces (env ABI 2, include/rollout/env.h),
 * computed once from what the env reports and then read by every consumer:
 * the env actor sizes its buffers from it, the learner flattens
 * observations with it, the policy sizes and splits its head with it.
 *
 * Rows: an env with A agents is A rows of a batch. Per row, observation
 * tensor k takes t[k].row_bytes bytes (its own buffer, row-major [rows,
 * shape...]); the flattened float row (what an MLP reads) is the tensors in
 * the order the env declared them, each row-major, uint8 scaled by 1/255,
 * int32 converted. Actions per row: ndisc int32 discrete entries and nbox
 * floats, both in part order; the mask (if any) mask_width bytes, one per
 * possible value of each discrete entry, in entry order. The policy head:
 * every part in order, a discrete entry as its n logits (MultiBinary as 2),
 * a box part as its means.
 *
 * ABI 1 envs get a layout too (ro__layout_from_abi1: one float32 tensor
 * "obs", one Discrete or Box part, one agent): that is the shim through
 * which ABI 1 envs reach the rest of the node.
 *
 * A layout is built on the main thread at start-up and read-only after:
 * any thread may read it. It owns its arrays (ro__layout_free).
 */
#ifndef RO_SPACES_LAYOUT_H
#define RO_SPACES_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"

/* The most values of one tensor or box, and of one discrete entry: what the
 * wire accepts for ABI 1 spaces (wire/checks.h). */
#define RO_LAYOUT_MAX_VALUES (1u << 20)
/* The most discrete entries, and mask bytes, of one agent's action. */
#define RO_LAYOUT_MAX_ENTRIES (1u << 16)

typedef struct ro_tensor_layout {
    char name[RO_ENV_MAX_NAME];
    ro_dtype_t dtype;
    uint32_t ndim, shape[RO_SPACE_MAX_DIMS];
    uint32_t size;     /* elements per row */
    uint32_t elem;     /* bytes per element */
    size_t row_bytes;  /* size * elem */
    uint32_t flat_off; /* its first float in a flattened row */
    float *low, *high; /* [size], owned: the env's bounds, or the dtype's range */
} ro_tensor_layout_t;

typedef struct ro_part_layout {
    ro_space_kind_t kind;
    uint32_t n;        /* discrete entries (1 for Discrete), or box floats */
    uint32_t first;    /* its first entry among the row's discrete (or box) values */
    uint32_t head_off; /* its first output in the policy head */
    uint32_t ndim, shape[RO_SPACE_MAX_DIMS];
} ro_part_layout_t;

typedef struct ro_space_layout {
    uint32_t agents;
    uint32_t ntensors;
    ro_tensor_layout_t t[RO_ENV_MAX_TENSORS];
    uint32_t obs_width; /* floats of a flattened row */
    size_t obs_bytes;   /* bytes of a row over every tensor */

    uint32_t nparts;
    ro_part_layout_t part[RO_ENV_MAX_PARTS];
    uint32_t ndisc;            /* int32 discrete entries per row */
    uint32_t nbox;             /* box floats per row */
    uint32_t head_width;       /* policy head outputs per row */
    uint32_t mask_width;       /* mask bytes per row; 0 without a mask */
    uint32_t *disc_n;          /* [ndisc] values each entry can take */
    uint32_t *disc_head;       /* [ndisc] its first logit in the head */
    uint32_t *disc_mask;       /* [ndisc] its first byte in a mask row */
    uint32_t *box_head;        /* [nbox] the head output of each box float's mean */
    float *box_low, *box_high; /* [nbox] */

    uint32_t nmetrics;
    char metric[RO_ENV_MAX_METRICS][RO_ENV_MAX_NAME];

    bool plain_obs;  /* one float32 tensor: rows are the flattened rows as they are */
    bool simple_act; /* one Discrete or Box part, no mask: an ABI 1 action */
    bool abi1;       /* ABI 1 shaped: plain_obs, 1 agent, one Discrete or Box, no mask */
} ro_space_layout_t;

/*
 * ro__layout_from_spaces validates what an ABI 2 env reported and builds
 * *lay from it. On failure returns RO_EINVAL (or RO_ENOMEM) with a message
 * naming the env (env_name) and the field, e.g. "env 'grid': obs[1]
 * ('pos') has dtype 9; expected ...", and leaves nothing to free.
 */
int ro__layout_from_spaces(ro_space_layout_t *lay, const ro_env_spaces_t *sp, const char *env_name,
                           char *err, size_t errlen);

/* ro__layout_from_abi1 is the ABI 1 shim: the layout of spaces already
 * checked by ro__env_check_spaces (one tensor "obs", float32). */
int ro__layout_from_abi1(ro_space_layout_t *lay, const ro_space_t *obs, const ro_space_t *act,
                         const char *env_name, char *err, size_t errlen);

/* ro__layout_set_metrics copies an env's metric names (a NULL-terminated
 * list, or NULL), checking them as tensor names. RO_EINVAL with a message. */
int ro__layout_set_metrics(ro_space_layout_t *lay, const char *const *names, const char *env_name,
                           char *err, size_t errlen);

/* ro__layout_free frees what a layout owns; a zeroed layout is fine. */
void ro__layout_free(ro_space_layout_t *lay);

/* ro__layout_abi1_view fills ABI 1 spaces for an abi1 layout (bounds point
 * into the layout) and returns true; false (nothing written) otherwise. */
bool ro__layout_abi1_view(const ro_space_layout_t *lay, ro_space_t *obs, ro_space_t *act);

/* ro__layout_abi2_features writes what of ABI 2 a layout uses, e.g. "2
 * agents, uint8 observations and an action mask", for messages of modes
 * that carry ABI 1 shapes only; "" for an abi1 layout. */
void ro__layout_abi2_features(const ro_space_layout_t *lay, char *buf, size_t len);

/*
 * ro__layout_flatten writes nrows flattened float rows to out ([nrows x
 * obs_width]); tensors[k] points to the first of those rows of tensor k.
 * Any thread.
 */
void ro__layout_flatten(const ro_space_layout_t *lay, const uint8_t *const *tensors, uint32_t nrows,
                        float *out);

/* ro__layout_mask_ok tells whether a mask row leaves every discrete entry
 * at least one allowed value; *entry gets the first that has none. */
bool ro__layout_mask_ok(const ro_space_layout_t *lay, const uint8_t *mask_row, uint32_t *entry);

/* ro__dtype_name: "uint8", "int32", "float32", or "?". */
const char *ro__dtype_name(ro_dtype_t d);

/* ro__space_kind_name is an action part kind's name in the files and
 * messages that record a layout (a trajectory header's, a policy file's):
 * "discrete", "multi_discrete", "multi_binary", "box"; NULL for none. */
const char *ro__space_kind_name(ro_space_kind_t k);

/* ro__space_kind_of is the part kind ro__space_kind_name calls name
 * (NULL or unknown: 0, no kind). */
ro_space_kind_t ro__space_kind_of(const char *name);

/* ro__space_name_ok: s is a tensor or metric name as the env ABI allows
 * one, 1..RO_ENV_MAX_NAME-1 characters of [A-Za-z0-9_]. */
bool ro__space_name_ok(const char *s);

#endif
