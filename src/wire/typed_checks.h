/*
 * SEED mode's frames for an env of env ABI 2 (docs/protocol.md "SEED mode
 * and env ABI 2"): the layout a welcome carries, read back into a
 * spaces/layout.h layout; the checks of an Observations frame's typed
 * tensors, final tensors and mask; the checks of an Actions frame's
 * composite actions (every discrete entry in range and allowed by its
 * row's mask, every box float finite and inside its bounds). Pure
 * functions of untrusted messages: any thread; every count is checked
 * before it is used, and each failure names the field.
 */
#ifndef RO_WIRE_TYPED_CHECKS_H
#define RO_WIRE_TYPED_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "rollout.pb-c.h"
#include "spaces/layout.h"
#include "wire/seed_memory.h"

/*
 * ro__layout_from_wire builds *lay from a welcome's layout l (a box part
 * must carry its bounds). 0, or RO_EPROTO with a message naming the field
 * (lay then holds nothing to free); on success free it with
 * ro__layout_free.
 */
int ro__layout_from_wire(ro_space_layout_t *lay, const Rollout__V1__TrajectoryLayout *l, char *err,
                         size_t errlen);

/*
 * ro__check_observations_typed: a frame of n rows (of num_rows: env x
 * agents) of an env with layout lay: the per-row columns n long, row
 * indices below num_rows, obs and final_obs empty, one tensor per layout
 * tensor (name, dtype, shape [n, ...], n x row bytes of data), one final
 * tensor each for the final_index rows, the mask n x mask_width bytes. A
 * frame in memory: its ranges (of rows) only, no column in the frame. 0 or
 * RO_EPROTO naming the field.
 */
int ro__check_observations_typed(const Rollout__V1__Observations *o, const ro_space_layout_t *lay,
                                 uint32_t num_rows, char *err, size_t errlen);

/*
 * ro__check_action_rows_typed: rows actions of layout lay (disc rows x
 * ndisc entries, box rows x nbox floats; NULL when the layout has none),
 * against the rows' mask (rows x mask_width bytes, or NULL), answering
 * seq; first_row names the first row in messages. RO_ERANGE naming the
 * first value out of range, masked, or not finite.
 */
int ro__check_action_rows_typed(const int32_t *disc, const float *box, const uint8_t *mask,
                                size_t rows, const ro_space_layout_t *lay, uint64_t seq,
                                size_t first_row, char *err, size_t errlen);

/* ro__check_actions_typed: an Actions frame for `rows` rows of layout lay
 * carries rows x ndisc discrete entries and rows x nbox box floats and is
 * not in memory (RO_EPROTO); the values are checked by the caller, row by
 * row, with ro__check_action_rows_typed and the rows' masks. */
int ro__check_actions_typed(const Rollout__V1__Actions *a, size_t rows,
                            const ro_space_layout_t *lay, char *err, size_t errlen);

#endif
