/*
 * MLP policy weights as plain arrays, and their file format: one
 * length-delimited rollout.v1.PolicyParams message (a protobuf varint byte
 * count, then the message; see docs/policy.md).
 *
 * Files are untrusted input: ro__policy_params_decode checks every size,
 * shape and value before anything is used, and fails with a message naming
 * the file and the field.
 */
#ifndef RO_POLICY_PARAMS_H
#define RO_POLICY_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/activation.h"
#include "policy/params_layout.h"
#include "rollout.pb-c.h"
#include "wire/pb_alloc.h"
#include "rollout/env.h"

/* The most hidden layers an MLP may have (files and specs alike). */
#define RO_POLICY_MAX_HIDDEN 8

/* The largest weights file accepted. */
#define RO_POLICY_FILE_MAX ((size_t)256 << 20)

/* The widest hidden layer accepted (files and specs alike). */
#define RO_POLICY_MAX_WIDTH 65536u

/* One affine layer y = x W^T + b, PyTorch's nn.Linear layout; or (cell
 * set) a recurrent cell of out = H units: weight [G*H x in] and bias [G*H]
 * its input side, weight_hh [G*H x H] and bias_hh [G*H] its recurrent side,
 * PyTorch's GRUCell / LSTMCell layout (G = ro_cell_gates(cell)). */
typedef struct ro_policy_layer {
    uint32_t in;
    uint32_t out;
    float *weight; /* [out x in] (a cell: [G*out x in]), row-major */
    float *bias;   /* [out] (a cell: [G*out]) */
    ro_cell_t cell;
    float *weight_hh; /* a cell: [G*out x out] */
    float *bias_hh;   /* a cell: [G*out] */
} ro_policy_layer_t;

/* ro__policy_layer_rows is the rows of a layer's weight: out, or G*out for a
 * cell. */
static inline size_t ro__policy_layer_rows(const ro_policy_layer_t *L)
{
    return (size_t)ro_cell_gates(L->cell) * L->out;
}

/*
 * ro_policy_params_t is the content of a PolicyParams message: the hidden
 * layers then the head, each hidden layer followed by the activation; in
 * format 3 the layer before the head may be a recurrent cell (no
 * activation after it: its output is already squashed). The arrays live in
 * one block owned by the struct (mem).
 */
typedef struct ro_policy_params {
    ro_activation_t activation;
    uint32_t obs_dim;
    ro_space_kind_t action_kind; /* RO_SPACE_DISCRETE: logits head; RO_SPACE_BOX: mean head */
    uint32_t action_dim;         /* number of logits, or of action floats */
    uint32_t nlayers;            /* 1 .. RO_POLICY_MAX_HIDDEN + 1 */
    ro_policy_layer_t layers[RO_POLICY_MAX_HIDDEN + 1];
    float *log_std; /* [nlog_std]: a box head's (action_dim), a composite's (its Gaussian heads) */
    uint32_t nlog_std;
    uint64_t version;
    void *mem;
    /* Format version 2 (env ABI 2, params_layout.h): composite is action_kind
     * "composite" (the heads of the layout, side by side in the head
     * layer); layout the packed PolicyLayout (owned), or NULL (format 1). */
    bool composite;
    uint8_t *layout;
    size_t layout_len;
} ro_policy_params_t;

/* ro__policy_params_view is what params_layout.h checks of p. */
static inline ro_params_view_t ro__policy_params_view(const ro_policy_params_t *p)
{
    return (ro_params_view_t){.obs_dim = p->obs_dim,
                              .action_dim = p->action_dim,
                              .nlog_std = p->nlog_std,
                              .composite = p->composite,
                              .layout = p->layout,
                              .layout_len = p->layout_len};
}

/* The newest format_version this build reads and writes: 3 when a layer is
 * a recurrent cell. */
#define RO_POLICY_FORMAT_VERSION 3

/*
 * ro__policy_params_alloc allocates the arrays of p, whose dimensions the
 * caller has set (nlayers, each layer's in and out, nlog_std); contents
 * are left uninitialised. Returns 0 or RO_ENOMEM.
 */
int ro__policy_params_alloc(ro_policy_params_t *p);

/* ro__policy_params_free frees what alloc or decode allocated (not p). */
void ro__policy_params_free(ro_policy_params_t *p);

/*
 * ro__policy_params_decode parses and validates one length-delimited
 * PolicyParams (buf holds exactly that: trailing bytes are an error). name
 * is what messages call the source, e.g. "policy file w.pb". On success
 * fills *out (free with ro__policy_params_free); on failure returns
 * RO_EBADMSG (or RO_ENOMEM) and writes a message into err.
 *
 * Decode and load (params_file.c) read the message's wire format in two
 * passes that allocate nothing but the weights: the first checks its
 * structure (it stops at a layer too many; each tensor once,
 * shapes that match the values present) and counts the values, the second
 * copies them into their final place. So no file, however crafted, makes
 * the loader hold more than its weights (no larger than the file) and a
 * small read buffer.
 */
int ro__policy_params_decode(ro_policy_params_t *out, const uint8_t *buf, size_t len,
                             const char *name, char *err, size_t errlen);

/* ro__policy_params_frame reads the length prefix at the start of a file
 * of len bytes (avail of them at buf): *prefix bytes, then a message of
 * *msglen that must end the file. RO_EBADMSG with a message otherwise. */
int ro__policy_params_frame(const uint8_t *buf, size_t avail, size_t len, size_t *prefix,
                            uint64_t *msglen, const char *name, char *err, size_t errlen);

/* ro__policy_params_check_msg checks the scalar fields and the shapes of
 * m (not its values: m may hold counts without data) and sets p's
 * dimensions. RO_EBADMSG with a message naming the field. */
int ro__policy_params_check_msg(ro_policy_params_t *p, const Rollout__V1__PolicyParams *m,
                                const char *name, char *err, size_t errlen);

/* ro__policy_params_check_values: every weight, bias and log_std finite. */
int ro__policy_params_check_values(const ro_policy_params_t *p, const char *name, char *err,
                                   size_t errlen);

/* ro__policy_params_from_msg validates an already decoded PolicyParams (a
 * trainer's push) as decode does, and copies its weights into out. */
int ro__policy_params_from_msg(ro_policy_params_t *out, const Rollout__V1__PolicyParams *m,
                               const char *name, char *err, size_t errlen);

/* ro__policy_params_unpack decodes one length-delimited PolicyParams from
 * buf without checking its content, through alloc (initialised here, bounded
 * by the input's size; free the message with it). For a message to send on
 * as it is (rollout-learner --push-policy, after decode checked it). */
int ro__policy_params_unpack(Rollout__V1__PolicyParams **out, ro_pb_alloc_t *alloc,
                             const uint8_t *buf, size_t len, const char *name, char *err,
                             size_t errlen);

/*
 * ro__policy_params_check_spaces checks that p fits the env's spaces: the
 * observation size is obs_dim, and the action kind and size match. Returns
 * 0 or RO_EINVAL with a message naming name.
 */
int ro__policy_params_check_spaces(const ro_policy_params_t *p, const ro_space_t *obs,
                                   const ro_space_t *act, const char *name, char *err,
                                   size_t errlen);

/* ro__policy_params_read reads path and decodes it (no spaces to check
 * against: an env ABI 2 policy checks the layout, params_layout.h).
 * Errors: RO_ENOENT/RO_EIO (reading), RO_ERANGE (too large), decode's. */
int ro__policy_params_read(ro_policy_params_t *out, const char *path, char *err, size_t errlen);

/* ro__policy_params_load reads path, decodes it and checks it against the
 * spaces. Errors: RO_ENOENT/RO_EIO (reading), RO_ERANGE (too large), and
 * those of decode and check_spaces. */
int ro__policy_params_load(ro_policy_params_t *out, const char *path, const ro_space_t *obs,
                           const ro_space_t *act, char *err, size_t errlen);

/*
 * ro__policy_params_encode packs p as one length-delimited PolicyParams into
 * a malloc'd buffer (*buf, *len; the caller frees it). p must be
 * consistent (as decode or policy init make it). Returns 0 or RO_ENOMEM.
 */
int ro__policy_params_encode(const ro_policy_params_t *p, uint8_t **buf, size_t *len);

/* ro__policy_params_save encodes p into path atomically: it writes a
 * temporary file in the same directory, syncs it, then renames it over
 * path, so readers see the old file or the new one, never half of one. */
int ro__policy_params_save(const ro_policy_params_t *p, const char *path, char *err, size_t errlen);

#endif
