/*
 * Format version 2 of weights files (params.h, docs/policy.md): the
 * PolicyLayout a policy built for an env ABI 2 layout (spaces/layout.h)
 * carries, so that a file says what it drives: how its input row was
 * flattened from typed tensors (names, dtypes, shapes, uint8 / 255), the
 * action parts, and which head outputs are whose (one categorical head per
 * discrete entry, one Gaussian head per box float). Loading checks it
 * against the env's layout and names the first thing that differs.
 *
 * The layout travels packed (ro_policy_params_t.layout): it is small, and
 * is unpacked only to be checked, through a bounded allocator.
 */
#ifndef RO_POLICY_PARAMS_LAYOUT_H
#define RO_POLICY_PARAMS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spaces/layout.h"

/* The largest packed PolicyLayout accepted (field 9 of a file). */
#define RO_POLICY_LAYOUT_MAX ((size_t)1 << 20)

/* What of a weights file (params.h's ro_policy_params_t) the layout is
 * checked with: ro__policy_params_view makes one. */
typedef struct ro_params_view {
    uint32_t obs_dim, action_dim, nlog_std;
    bool composite;
    const uint8_t *layout; /* the packed PolicyLayout, or NULL (format 1) */
    size_t layout_len;
} ro_params_view_t;

/* ro__policy_layout_pack writes lay's PolicyLayout into a malloc'd buffer
 * (*buf, *len; the caller frees it). Returns 0 or RO_ENOMEM. */
int ro__policy_layout_pack(const ro_space_layout_t *lay, uint8_t **buf, size_t *len);

/*
 * ro__policy_layout_validate checks p's layout on its own (no env): it
 * unpacks, its counts are bounded, the inputs tile obs_dim, the heads tile
 * action_dim and refer to parts of the right kind, the Gaussian heads are
 * nlog_std. RO_EBADMSG with a message naming name and the field.
 */
int ro__policy_layout_validate(ro_params_view_t p, const char *name, char *err, size_t errlen);

/*
 * ro__policy_layout_check checks that p (validated) fits the env's layout:
 * the input width and every tensor, the parts, every head's width, the
 * mask, composite or not. RO_EINVAL with a message naming what differs,
 * e.g. "head 2 has 2 logits, the env's MultiDiscrete entry 2 has 3
 * values". A format-1 file (no layout) fits an env whose action is one
 * plain head and whose row is obs_dim floats.
 */
int ro__policy_layout_check(ro_params_view_t p, const ro_space_layout_t *lay, const char *name,
                            char *err, size_t errlen);

#endif
