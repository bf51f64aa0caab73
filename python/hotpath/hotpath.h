/* hotpath.h: what the files of rollout_client._hotpath share (the module is
 * described in module.c). Internal to the extension: ro__hp_ names. */
#ifndef RO_HOTPATH_H
#define RO_HOTPATH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
/* One numpy C-API table for the extension's files: module.c imports it. */
#define PY_ARRAY_UNIQUE_SYMBOL ro_hotpath_ARRAY_API
#ifndef RO_HOTPATH_MODULE
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <math.h>
#include <stdint.h>

/* A docstring the method table in module.c refers to. */
#define PyDoc_STRVAR_EXTERN(name, str) const char name[] = PyDoc_STR(str)

/* The flags column of SEED memory (src/wire/seed_memory.h). */
enum { RO_HP_TERMINATED = 1, RO_HP_TRUNCATED = 2, RO_HP_EPISODE_START = 4, RO_HP_HAS_FINAL = 8 };

/* ro__hp_array returns obj as a C-contiguous ndarray of typenum with ndim
 * dimensions (ndim 0: any), writable if asked, or NULL with TypeError
 * naming `name` and what it got. The reference is borrowed. */
PyArrayObject *ro__hp_array(PyObject *obj, int typenum, int ndim, int writable, const char *name);

/* ro__hp_rows is the length of a's first axis (1 for a 0-d array). */
npy_intp ro__hp_rows(PyArrayObject *a);

/* ro__hp_row_bytes is the size of one row along a's first axis. */
npy_intp ro__hp_row_bytes(PyArrayObject *a);

/* ro__hp_env_rows reads the `rows` argument of episodes(), gather() and
 * adopt(): an int (the first of k envs in order) or an int64 array of k
 * envs, each checked to lie in [0, n) (and k to be at least 0). Sets
 * *first or *ids; -1 with an exception set otherwise. */
int ro__hp_env_rows(PyObject *o, npy_intp k, npy_intp n, npy_intp *first, const int64_t **ids);

/* ro__hp_episode_row is one env's step in the running episode figures,
 * the rule episodes() (envs.c) and the lane (lane_gather.c) share: a
 * transition (not an env's first observation) adds its reward and a step
 * to *ret and *len; an episode that ended (terminated, or truncated with
 * its final observation: a truncation without it is an env failure,
 * docs/env-api.md) is counted, its figures in *out_ret and *out_len (NaN
 * and 0 otherwise); an env that ended (terminated or truncated) starts
 * again at 0. Returns whether it was counted. Branch-free, so that loops
 * over rows vectorise. */
static inline int ro__hp_episode_row(double *ret, int64_t *len, float reward, int transition,
                                     int terminated, int truncated, int has_final, double *out_ret,
                                     int64_t *out_len)
{
    double r = *ret + (transition ? (double)reward : 0.0);
    int64_t l = *len + (transition != 0);
    int done = terminated | truncated, count = terminated | (truncated & has_final);
    *out_ret = count ? r : NAN;
    *out_len = count ? l : 0;
    *ret = done ? 0.0 : r;
    *len = done ? 0 : l;
    return count;
}

/* frames.c: one frame from the wire or the node's memory. */

/* ro__hp_varint reads the varint at b[*pos..end) into *v (bits past 64
 * dropped, as protobuf does). -1 when it is truncated or longer than ten
 * bytes. */
int ro__hp_varint(const uint8_t *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *v);

/* The fields of an Observations frame (proto/rollout.proto): 2 to 12 are
 * length-delimited when packed. */
enum { RO_HP_OBS_SPANS = 13 };

/* What ro__hp_scan found in a Frame{observations}. */
typedef struct ro_hp_scan {
    uint64_t seq;
    int in_memory;
    int have[RO_HP_OBS_SPANS];            /* field f was there, at spans[f] */
    Py_ssize_t spans[RO_HP_OBS_SPANS][2]; /* (start, end) of field f's bytes */
    Py_ssize_t nranges;                   /* in_memory: varints in field 12 */
    char err[128];                        /* why, when ro__hp_scan says -1 */
} ro_hp_scan_t;

/* ro__hp_scan walks the Frame in b[start..end): 1 when it is a
 * Frame{observations} laid out as protobuf encoders write it (an in-memory
 * one without columns, its ranges' varints counted), 0 for another frame
 * kind or layout (protobuf then decides), -1 on bytes no protobuf parser
 * takes (s->err says why). Reads only b[start..end). */
int ro__hp_scan(const uint8_t *b, Py_ssize_t start, Py_ssize_t end, ro_hp_scan_t *s);

/* ro__hp_scan_ranges decodes the s->nranges varints of field 12 that
 * ro__hp_scan counted into out, as uint32. */
void ro__hp_scan_ranges(const uint8_t *b, const ro_hp_scan_t *s, uint32_t *out);

extern const char take_frame_doc[], scan_observations_doc[];
PyObject *ro__hp_take_frame(PyObject *self, PyObject *args);
PyObject *ro__hp_scan_observations(PyObject *self, PyObject *args);

/* envs.c: per-env work of a step, and the asynchronous states. */
extern const char episodes_doc[], gather_doc[], first_outside_doc[], adopt_doc[], hold_doc[];
PyObject *ro__hp_episodes(PyObject *self, PyObject *args);
PyObject *ro__hp_gather(PyObject *self, PyObject *args);
PyObject *ro__hp_first_outside(PyObject *self, PyObject *args);
PyObject *ro__hp_adopt(PyObject *self, PyObject *args);
PyObject *ro__hp_hold(PyObject *self, PyObject *args);

/* lane.c: one node's asynchronous recv() and send(), each one call. */
extern PyTypeObject ro__hp_lane_type;

/* worker.c: a Python env worker process's commands and steps. */
extern PyTypeObject ro__hp_waiter_type;
extern const char step_shard_doc[], step_discrete_doc[], step_box_doc[];
PyObject *ro__hp_step_shard(PyObject *self, PyObject *args);
PyObject *ro__hp_step_discrete(PyObject *self, PyObject *args);
PyObject *ro__hp_step_box(PyObject *self, PyObject *args);

#endif
