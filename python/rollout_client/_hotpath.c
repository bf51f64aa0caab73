/* _hotpath: the per-step array work of rollout_client's VecEnv, in one pass.
 *
 * Why C: each numpy call costs a few microseconds on the machines we run on
 * (call, dtype dispatch, a temporary), whatever the size, and a step of 1024
 * envs did about sixty of them: 250 us of Python per step, more than the
 * node's own stepping. These three functions do the same work in one pass
 * each (docs/python.md "Where a step's time goes"):
 *
 *   take_frame  copies one in-memory Observations frame's rows out of the
 *               node's shared memory into the VecEnv's per-env arrays;
 *   episodes    updates the running episode returns and lengths of the rows
 *               of a step and says which episodes ended;
 *   gather      copies the rows of given envs out of per-env arrays into new
 *               arrays (what recv() hands out);
 *   scan_observations  walks the fields of one Frame{observations} in place
 *               (wire.py's parser: the spans of its fields, its ranges);
 *   first_outside  the range check of discrete actions;
 *   adopt, hold the per-env states of asynchronous stepping
 *               (vecenv_async.py): a received frame's envs, and envs the
 *               user answers.
 *
 * Everything a caller passes is checked here (array type, dtype, shape,
 * contiguity, every index against its array): a wrong argument raises
 * TypeError or ValueError, never reads or writes outside an array. What the
 * node wrote in its memory is data, not trusted: row ranges are checked
 * against the memory's rows and the VecEnv's envs before any copy. The
 * node may write its memory during a copy (a misbehaving node): the values
 * are then garbage, but every access stays inside the mapping.
 *
 * Called with the GIL held; nothing here blocks or allocates without bound
 * (outputs are as large as the rows asked for). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The flags column of SEED memory (src/wire/seed_memory.h). */
enum { TERMINATED = 1, TRUNCATED = 2, EPISODE_START = 4, HAS_FINAL = 8 };

/* array returns obj as a C-contiguous ndarray of typenum with ndim
 * dimensions (ndim 0: any), writable if asked, or NULL with TypeError
 * naming `name`. The reference is borrowed. */
static PyArrayObject *array(PyObject *obj, int typenum, int ndim, int writable, const char *name)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: a numpy array is needed", name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != typenum || (ndim && PyArray_NDIM(a) != ndim) ||
        !PyArray_IS_C_CONTIGUOUS(a) || (writable && !PyArray_ISWRITEABLE(a))) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a C-contiguous%s array of dtype %c with %d dimension(s) is needed", name,
                     writable ? " writable" : "", PyArray_DescrFromType(typenum)->type, ndim);
        return NULL;
    }
    return a;
}

/* rows is the length of the first axis (1 for a 0-d array). */
static npy_intp rows(PyArrayObject *a)
{
    return PyArray_NDIM(a) ? PyArray_DIM(a, 0) : 1;
}

/* row_bytes is the size of one row along the first axis. */
static npy_intp row_bytes(PyArrayObject *a)
{
    npy_intp r = rows(a);
    return r ? PyArray_NBYTES(a) / r : 0;
}

PyDoc_STRVAR(take_frame_doc,
             "take_frame(ranges, offset, m_obs, m_final, m_reward, m_flags, m_step, obs, final, "
             "reward, flags, step, has_final) -> count\n\n"
             "Copy the rows of one in-memory Observations frame out of a node's SEED memory "
             "(m_*: obs and final float32 [R, D], reward float32 [R], flags uint8 [R], step "
             "uint64 [R]) into per-env arrays (obs and final float32 [N, D] or both None, reward "
             "float32 [N], flags bool [3, N] (terminated, truncated, episode_start), step uint64 "
             "[N], has_final bool [N]); env e of the frame is row offset + e. ranges: uint32 "
             "(first, count) pairs. A row without a final observation gets NaN in final. Returns "
             "the number of envs. Raises ValueError when a range lies outside the memory or the "
             "arrays, before anything is written.");

static PyObject *take_frame(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_ranges, *o_mobs, *o_mfinal, *o_mreward, *o_mflags, *o_mstep;
    PyObject *o_obs, *o_final, *o_reward, *o_flags, *o_step, *o_has_final;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "OnOOOOOOOOOOO", &o_ranges, &offset, &o_mobs, &o_mfinal, &o_mreward,
                          &o_mflags, &o_mstep, &o_obs, &o_final, &o_reward, &o_flags, &o_step,
                          &o_has_final))
        return NULL;
    PyArrayObject *ranges = array(o_ranges, NPY_UINT32, 1, 0, "ranges");
    PyArrayObject *mreward = array(o_mreward, NPY_FLOAT32, 1, 0, "m_reward");
    PyArrayObject *mflags = array(o_mflags, NPY_UINT8, 1, 0, "m_flags");
    PyArrayObject *mstep = array(o_mstep, NPY_UINT64, 1, 0, "m_step");
    PyArrayObject *reward = array(o_reward, NPY_FLOAT32, 1, 1, "reward");
    PyArrayObject *flags = array(o_flags, NPY_BOOL, 2, 1, "flags");
    PyArrayObject *step = array(o_step, NPY_UINT64, 1, 1, "step");
    PyArrayObject *has_final = array(o_has_final, NPY_BOOL, 1, 1, "has_final");
    if (!ranges || !mreward || !mflags || !mstep || !reward || !flags || !step || !has_final)
        return NULL;
    PyArrayObject *mobs = NULL, *mfinal = NULL, *obs = NULL, *final = NULL;
    if ((o_obs == Py_None) != (o_final == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "obs and final: both arrays or both None");
        return NULL;
    }
    if (o_obs != Py_None) {
        if (!(mobs = array(o_mobs, NPY_FLOAT32, 2, 0, "m_obs")) ||
            !(mfinal = array(o_mfinal, NPY_FLOAT32, 2, 0, "m_final")) ||
            !(obs = array(o_obs, NPY_FLOAT32, 2, 1, "obs")) ||
            !(final = array(o_final, NPY_FLOAT32, 2, 1, "final")))
            return NULL;
    }
    npy_intp R = rows(mreward), N = rows(reward);
    if (rows(mflags) != R || rows(mstep) != R || (mobs && (rows(mobs) != R || rows(mfinal) != R))) {
        PyErr_SetString(PyExc_ValueError, "the memory's columns have different row counts");
        return NULL;
    }
    if (PyArray_DIM(flags, 0) != 3 || PyArray_DIM(flags, 1) != N || rows(step) != N ||
        rows(has_final) != N || (obs && (rows(obs) != N || rows(final) != N))) {
        PyErr_SetString(PyExc_ValueError, "the per-env arrays have different row counts");
        return NULL;
    }
    npy_intp d = 0;
    if (obs) {
        d = PyArray_DIM(obs, 1);
        if (PyArray_DIM(final, 1) != d || PyArray_DIM(mobs, 1) != d ||
            PyArray_DIM(mfinal, 1) != d) {
            PyErr_SetString(PyExc_ValueError, "obs rows differ in width");
            return NULL;
        }
    }
    npy_intp nr = PyArray_DIM(ranges, 0);
    const uint32_t *rg = PyArray_DATA(ranges);
    if (nr == 0 || nr % 2) {
        PyErr_Format(PyExc_ValueError, "ranges: %zd values, not (first, count) pairs",
                     (Py_ssize_t)nr);
        return NULL;
    }
    if (offset < 0 || offset > N) {
        PyErr_Format(PyExc_ValueError, "offset %zd outside [0, %zd]", offset, (Py_ssize_t)N);
        return NULL;
    }
    /* Every range is checked before the first copy: a bad frame writes
     * nothing. */
    for (npy_intp i = 0; i < nr; i += 2) {
        npy_intp first = rg[i], count = rg[i + 1];
        if (count < 1 || first >= R || count > R - first || first + count > N - offset) {
            PyErr_Format(PyExc_ValueError,
                         "range of %zd envs from %zd is empty or outside the memory's %zd rows "
                         "or the %zd envs from %zd",
                         (Py_ssize_t)count, (Py_ssize_t)first, (Py_ssize_t)R,
                         (Py_ssize_t)(N - offset), offset);
            return NULL;
        }
    }
    const float *m_obs = mobs ? PyArray_DATA(mobs) : NULL;
    const float *m_final = mfinal ? PyArray_DATA(mfinal) : NULL;
    const float *m_reward = PyArray_DATA(mreward);
    const uint8_t *m_flags = PyArray_DATA(mflags);
    const uint64_t *m_step = PyArray_DATA(mstep);
    float *d_obs = obs ? PyArray_DATA(obs) : NULL;
    float *d_final = final ? PyArray_DATA(final) : NULL;
    float *d_reward = PyArray_DATA(reward);
    npy_bool *d_flags = PyArray_DATA(flags);
    uint64_t *d_step = PyArray_DATA(step);
    npy_bool *d_has_final = PyArray_DATA(has_final);
    npy_intp count = 0;
    size_t row = (size_t)d * sizeof(float);
    for (npy_intp i = 0; i < nr; i += 2) {
        npy_intp first = rg[i], n = rg[i + 1], to = offset + first;
        if (d_obs)
            memcpy(d_obs + to * d, m_obs + first * d, row * (size_t)n);
        memcpy(d_reward + to, m_reward + first, (size_t)n * sizeof(float));
        memcpy(d_step + to, m_step + first, (size_t)n * sizeof(uint64_t));
        for (npy_intp k = 0; k < n; k++) {
            npy_intp src = first + k, dst = to + k;
            /* One read of the byte: the node may rewrite it meanwhile. */
            uint8_t f = m_flags[src];
            d_flags[dst] = (f & TERMINATED) != 0;
            d_flags[N + dst] = (f & TRUNCATED) != 0;
            d_flags[2 * N + dst] = (f & EPISODE_START) != 0;
            d_has_final[dst] = (f & HAS_FINAL) != 0;
            if (d_final) {
                float *out = d_final + dst * d;
                if (f & HAS_FINAL) {
                    memcpy(out, m_final + src * d, row);
                } else {
                    for (npy_intp j = 0; j < d; j++)
                        out[j] = NAN;
                }
            }
        }
        count += n;
    }
    return PyLong_FromSsize_t((Py_ssize_t)count);
}

/* env_rows reads `rows` of episodes() and gather(): an int (the first of k
 * envs in order) or an int64 array of k envs. Sets *first or *ids. */
static int env_rows(PyObject *o, npy_intp k, npy_intp n, npy_intp *first, const int64_t **ids)
{
    *ids = NULL;
    *first = 0;
    if (PyLong_Check(o)) {
        Py_ssize_t f = PyLong_AsSsize_t(o);
        if (f == -1 && PyErr_Occurred())
            return -1;
        if (f < 0 || f > n || k > n - f) {
            PyErr_Format(PyExc_ValueError, "rows %zd..%zd outside [0, %zd)", f, f + (Py_ssize_t)k,
                         (Py_ssize_t)n);
            return -1;
        }
        *first = f;
        return 0;
    }
    PyArrayObject *a = array(o, NPY_INT64, 1, 0, "rows");
    if (!a)
        return -1;
    if (PyArray_DIM(a, 0) != k) {
        PyErr_Format(PyExc_ValueError, "rows: %zd ids for %zd values",
                     (Py_ssize_t)PyArray_DIM(a, 0), (Py_ssize_t)k);
        return -1;
    }
    const int64_t *v = PyArray_DATA(a);
    for (npy_intp i = 0; i < k; i++) {
        if (v[i] < 0 || v[i] >= n) {
            PyErr_Format(PyExc_ValueError, "rows: env %lld outside [0, %zd)", (long long)v[i],
                         (Py_ssize_t)n);
            return -1;
        }
    }
    *ids = v;
    return 0;
}

PyDoc_STRVAR(episodes_doc,
             "episodes(reward, terminated, truncated, has_final, step, rows, ep_return, "
             "ep_length) -> (ep_ret, ep_len, counted, stepped, ended)\n\n"
             "Running episode statistics over k rows of a step: reward float32 [k], terminated, "
             "truncated and has_final bool [k], step uint64 [k] or None (every row a "
             "transition; else step 0 marks an env's first observation, no transition); rows "
             "are the envs (an int: k envs from it; or int64 [k]); ep_return float64 [N] and "
             "ep_length int64 [N] are updated. An episode that ended (terminated, or truncated "
             "with its final observation) is counted: ep_ret float64 [k] holds its return (NaN "
             "elsewhere), ep_len int64 [k] its length (0 elsewhere), counted bool [k]. Ended "
             "envs (terminated or truncated) start again at 0. stepped is the number of "
             "transitions, ended the number counted.");

static PyObject *episodes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_reward, *o_term, *o_trunc, *o_has_final, *o_step, *o_rows, *o_ret, *o_len;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o_reward, &o_term, &o_trunc, &o_has_final, &o_step,
                          &o_rows, &o_ret, &o_len))
        return NULL;
    PyArrayObject *reward = array(o_reward, NPY_FLOAT32, 1, 0, "reward");
    PyArrayObject *term = array(o_term, NPY_BOOL, 1, 0, "terminated");
    PyArrayObject *trunc = array(o_trunc, NPY_BOOL, 1, 0, "truncated");
    PyArrayObject *hf = array(o_has_final, NPY_BOOL, 1, 0, "has_final");
    PyArrayObject *ret = array(o_ret, NPY_FLOAT64, 1, 1, "ep_return");
    PyArrayObject *len = array(o_len, NPY_INT64, 1, 1, "ep_length");
    if (!reward || !term || !trunc || !hf || !ret || !len)
        return NULL;
    PyArrayObject *step = NULL;
    if (o_step != Py_None && !(step = array(o_step, NPY_UINT64, 1, 0, "step")))
        return NULL;
    npy_intp k = rows(reward), n = rows(ret);
    if (rows(term) != k || rows(trunc) != k || rows(hf) != k || (step && rows(step) != k) ||
        rows(len) != n) {
        PyErr_SetString(PyExc_ValueError, "episodes: arrays of different lengths");
        return NULL;
    }
    npy_intp first;
    const int64_t *ids;
    if (env_rows(o_rows, k, n, &first, &ids) < 0)
        return NULL;
    npy_intp dims[1] = {k};
    PyObject *o_out_ret = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    PyObject *o_out_len = PyArray_SimpleNew(1, dims, NPY_INT64);
    PyObject *o_counted = PyArray_SimpleNew(1, dims, NPY_BOOL);
    if (!o_out_ret || !o_out_len || !o_counted) {
        Py_XDECREF(o_out_ret);
        Py_XDECREF(o_out_len);
        Py_XDECREF(o_counted);
        return NULL;
    }
    const float *r = PyArray_DATA(reward);
    const npy_bool *te = PyArray_DATA(term), *tr = PyArray_DATA(trunc), *f = PyArray_DATA(hf);
    const uint64_t *st = step ? PyArray_DATA(step) : NULL;
    double *er = PyArray_DATA(ret);
    int64_t *el = PyArray_DATA(len);
    double *out_ret = PyArray_DATA((PyArrayObject *)o_out_ret);
    int64_t *out_len = PyArray_DATA((PyArrayObject *)o_out_len);
    npy_bool *counted = PyArray_DATA((PyArrayObject *)o_counted);
    npy_intp stepped = 0, ended = 0;
    for (npy_intp i = 0; i < k; i++) {
        npy_intp e = ids ? (npy_intp)ids[i] : first + i;
        if (!st || st[i] != 0) { /* a transition, not an env's first observation */
            er[e] += (double)r[i];
            el[e] += 1;
            stepped++;
        }
        /* A truncation without its final observation is an env failure
         * (docs/env-api.md): the cut episode is not counted. */
        int done = te[i] || tr[i];
        int count = done && (te[i] || f[i]);
        counted[i] = (npy_bool)count;
        out_ret[i] = count ? er[e] : NAN;
        out_len[i] = count ? el[e] : 0;
        ended += count;
        if (done) {
            er[e] = 0.0;
            el[e] = 0;
        }
    }
    return Py_BuildValue("NNNnn", o_out_ret, o_out_len, o_counted, (Py_ssize_t)stepped,
                         (Py_ssize_t)ended);
}

PyDoc_STRVAR(gather_doc,
             "gather(rows, k, arrays, flags) -> (copies..., flags_copy)\n\n"
             "New arrays of the rows of k envs (rows: an int, the first of k envs in order; or "
             "int64 [k]) of each C-contiguous array in the tuple `arrays` (first axis: envs), "
             "and of flags (bool [3, N]: its second axis is envs) as bool [3, k].");

static PyObject *gather(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_rows, *o_arrays, *o_flags;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OnO!O", &o_rows, &k, &PyTuple_Type, &o_arrays, &o_flags))
        return NULL;
    PyArrayObject *flags = array(o_flags, NPY_BOOL, 2, 0, "flags");
    if (!flags)
        return NULL;
    npy_intp n = PyArray_DIM(flags, 1);
    if (PyArray_DIM(flags, 0) != 3 || k < 0) {
        PyErr_SetString(PyExc_ValueError, "gather: flags must be [3, N] and k >= 0");
        return NULL;
    }
    npy_intp first;
    const int64_t *ids;
    if (env_rows(o_rows, k, n, &first, &ids) < 0)
        return NULL;
    Py_ssize_t m = PyTuple_GET_SIZE(o_arrays);
    PyObject *out = PyTuple_New(m + 1);
    if (!out)
        return NULL;
    for (Py_ssize_t j = 0; j <= m; j++) {
        int is_flags = j == m;
        PyArrayObject *a = is_flags ? flags : NULL;
        if (!is_flags) {
            PyObject *o = PyTuple_GET_ITEM(o_arrays, j);
            if (!PyArray_Check(o) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o) ||
                PyArray_NDIM((PyArrayObject *)o) < 1 || PyArray_DIM((PyArrayObject *)o, 0) != n) {
                PyErr_Format(PyExc_TypeError,
                             "gather: array %zd is not a C-contiguous array of %zd rows", j,
                             (Py_ssize_t)n);
                Py_DECREF(out);
                return NULL;
            }
            a = (PyArrayObject *)o;
        }
        int nd = PyArray_NDIM(a);
        npy_intp dims[NPY_MAXDIMS];
        memcpy(dims, PyArray_DIMS(a), (size_t)nd * sizeof(npy_intp));
        dims[is_flags ? 1 : 0] = k;
        PyArray_Descr *descr = PyArray_DESCR(a);
        Py_INCREF(descr);
        PyObject *o_copy =
            PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0, NULL);
        if (!o_copy) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, j, o_copy);
        char *dst = PyArray_DATA((PyArrayObject *)o_copy);
        const char *src = PyArray_DATA(a);
        /* flags: three planes of n bytes, each gathered to k bytes. */
        npy_intp planes = is_flags ? 3 : 1;
        size_t rb = is_flags ? 1 : (size_t)row_bytes(a);
        for (npy_intp p = 0; p < planes; p++) {
            const char *s = src + (size_t)p * (size_t)n * rb;
            char *t = dst + (size_t)p * (size_t)k * rb;
            if (!ids) {
                memcpy(t, s + (size_t)first * rb, (size_t)k * rb);
                continue;
            }
            for (npy_intp i = 0; i < k; i++)
                memcpy(t + (size_t)i * rb, s + (size_t)ids[i] * rb, rb);
        }
    }
    return out;
}

/* varint reads the varint at b[*pos..end) into *v (bits past 64 dropped,
 * as protobuf does). -1 when it is truncated or longer than ten bytes. */
static int varint(const uint8_t *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *v)
{
    uint64_t value = 0;
    for (unsigned shift = 0; shift <= 63; shift += 7) {
        if (*pos >= end)
            return -1;
        uint8_t c = b[(*pos)++];
        value |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *v = value;
            return 0;
        }
    }
    return -1;
}

enum { TAG_OBSERVATIONS = 0x1A, OBS_SPANS = 13, FIELD_RANGES = 12, FIELD_IN_MEMORY = 11 };

PyDoc_STRVAR(scan_doc,
             "scan_observations(buf, start, end) -> None | (seq, in_memory, spans, ranges)\n\n"
             "Walk the Frame in buf[start:end] (any bytes-like object) when it is a "
             "Frame{observations} laid out as protobuf encoders write it: seq (uint64), in_memory "
             "(bool), spans (a tuple of 13: for the length-delimited fields 2 to 12 their "
             "(start, end) in buf, else None) and ranges (in_memory frames: field 12's packed "
             "varints as uint32, else None). None for another frame kind or layout (a field "
             "repeated or not packed, a group, more after the observations): protobuf then "
             "decides. Raises ValueError on bytes no protobuf parser takes.");

static PyObject *scan_observations(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end))
        return NULL;
    PyObject *result = NULL;
    const uint8_t *b = view.buf;
    const char *what = "an observations frame";
    Py_ssize_t spans[OBS_SPANS][2];
    int have[OBS_SPANS] = {0};
    uint64_t seq = 0, size = 0;
    int in_memory = 0;
    Py_ssize_t pos;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "scan_observations: start and end outside buf");
        goto done;
    }
    if (end - start < 2 || b[start] != TAG_OBSERVATIONS) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    pos = start + 1;
    if (varint(b, &pos, end, &size) < 0)
        goto truncated;
    if (size != (uint64_t)(end - pos)) { /* more fields after it, or a length past the frame */
        result = Py_NewRef(Py_None);
        goto done;
    }
    while (pos < end) {
        uint64_t tag, v;
        if (varint(b, &pos, end, &tag) < 0)
            goto truncated;
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (wt == 2) {
            if (varint(b, &pos, end, &v) < 0)
                goto truncated;
            if (v > (uint64_t)(end - pos)) {
                PyErr_Format(PyExc_ValueError, "%s: a field of %llu bytes with %zd left", what,
                             (unsigned long long)v, end - pos);
                goto done;
            }
            if (field >= 2 && field <= FIELD_RANGES) {
                if (have[field]) { /* split in parts: legal, rare; protobuf merges them */
                    result = Py_NewRef(Py_None);
                    goto done;
                }
                have[field] = 1;
                spans[field][0] = pos;
                spans[field][1] = pos + (Py_ssize_t)v;
            }
            pos += (Py_ssize_t)v;
        } else if (wt == 0) {
            if (varint(b, &pos, end, &v) < 0)
                goto truncated;
            if (field == 1) {
                seq = v;
            } else if (field == FIELD_IN_MEMORY) {
                in_memory = v != 0;
            } else if (field >= 2 && field <= 10) { /* unpacked: legal, rare */
                result = Py_NewRef(Py_None);
                goto done;
            }
        } else if (wt == 1 || wt == 5) {
            if (field >= 2 && field <= 10) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            Py_ssize_t skip = wt == 1 ? 8 : 4;
            if (skip > end - pos) {
                PyErr_Format(PyExc_ValueError, "%s: a field runs past its frame", what);
                goto done;
            }
            pos += skip;
        } else { /* a group or a bad wire type: protobuf decides */
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    PyObject *ranges = Py_NewRef(Py_None);
    if (in_memory) {
        for (int f = 2; f <= 10; f++) {
            if (have[f]) {
                Py_DECREF(ranges);
                PyErr_Format(PyExc_ValueError, "%s: in memory, yet with columns in the frame",
                             what);
                goto done;
            }
        }
        /* Two passes: count (and check) the varints, then decode them into
         * an array of that many: the frame's size bounds it. */
        Py_ssize_t lo = have[FIELD_RANGES] ? spans[FIELD_RANGES][0] : 0;
        Py_ssize_t hi = have[FIELD_RANGES] ? spans[FIELD_RANGES][1] : 0;
        npy_intp n = 0;
        uint64_t v;
        for (Py_ssize_t p = lo; p < hi; n++) {
            if (varint(b, &p, hi, &v) < 0) {
                Py_DECREF(ranges);
                PyErr_SetString(PyExc_ValueError,
                                "a truncated or overlong varint in observations field ranges");
                goto done;
            }
        }
        PyArrayObject *r = (PyArrayObject *)PyArray_SimpleNew(1, &n, NPY_UINT32);
        if (!r) {
            Py_DECREF(ranges);
            goto done;
        }
        uint32_t *out = PyArray_DATA(r);
        for (Py_ssize_t p = lo, i = 0; p < hi; i++) {
            varint(b, &p, hi, &v);
            out[i] = (uint32_t)v; /* uint32: the low bits, as protobuf reads it */
        }
        Py_DECREF(ranges);
        ranges = (PyObject *)r;
    }
    PyObject *sp = PyTuple_New(OBS_SPANS);
    if (!sp) {
        Py_DECREF(ranges);
        goto done;
    }
    for (int f = 0; f < OBS_SPANS; f++) {
        PyObject *item =
            have[f] ? Py_BuildValue("(nn)", spans[f][0], spans[f][1]) : Py_NewRef(Py_None);
        if (!item) {
            Py_DECREF(sp);
            Py_DECREF(ranges);
            goto done;
        }
        PyTuple_SET_ITEM(sp, f, item);
    }
    result =
        Py_BuildValue("KONO", (unsigned long long)seq, in_memory ? Py_True : Py_False, sp, ranges);
    Py_DECREF(ranges);
    goto done;
truncated:
    PyErr_Format(PyExc_ValueError, "a truncated or overlong varint in %s", what);
done:
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(first_outside_doc,
             "first_outside(values, n) -> index\n\n"
             "The index of the first of values (int64 [k]) outside [0, n), or -1: the range "
             "check of discrete actions in one pass.");

static PyObject *first_outside(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_values;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &o_values, &n))
        return NULL;
    PyArrayObject *a = array(o_values, NPY_INT64, 1, 0, "values");
    if (!a)
        return NULL;
    const int64_t *v = PyArray_DATA(a);
    npy_intp k = PyArray_DIM(a, 0);
    for (npy_intp i = 0; i < k; i++) {
        if (v[i] < 0 || v[i] >= n)
            return PyLong_FromSsize_t((Py_ssize_t)i);
    }
    return PyLong_FromLong(-1);
}

PyDoc_STRVAR(adopt_doc,
             "adopt(rows, k, state, frame_of, pos_of, key, want, to) -> bad\n\n"
             "A received frame's k envs (rows: an int, the first of k envs in order; or int64 "
             "[k]) join frame `key`: each must be in state `want` (state: int8 [N]); then env "
             "rows[i] gets state `to`, frame_of (int64 [N]) `key` and pos_of (int64 [N]) i. "
             "Returns -1, or the first env not in state `want` (then nothing changed).");

static PyObject *adopt(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_rows, *o_state, *o_frame_of, *o_pos_of;
    Py_ssize_t k;
    long long key;
    int want, to;
    if (!PyArg_ParseTuple(args, "OnOOOLii", &o_rows, &k, &o_state, &o_frame_of, &o_pos_of, &key,
                          &want, &to))
        return NULL;
    PyArrayObject *state = array(o_state, NPY_INT8, 1, 1, "state");
    PyArrayObject *frame_of = array(o_frame_of, NPY_INT64, 1, 1, "frame_of");
    PyArrayObject *pos_of = array(o_pos_of, NPY_INT64, 1, 1, "pos_of");
    if (!state || !frame_of || !pos_of)
        return NULL;
    npy_intp n = rows(state);
    if (rows(frame_of) != n || rows(pos_of) != n || k < 0) {
        PyErr_SetString(PyExc_ValueError, "adopt: arrays of different lengths");
        return NULL;
    }
    npy_intp first;
    const int64_t *ids;
    if (env_rows(o_rows, k, n, &first, &ids) < 0)
        return NULL;
    int8_t *st = PyArray_DATA(state);
    int64_t *fr = PyArray_DATA(frame_of), *pos = PyArray_DATA(pos_of);
    for (npy_intp i = 0; i < k; i++) {
        npy_intp e = ids ? (npy_intp)ids[i] : first + i;
        if (st[e] != want)
            return PyLong_FromSsize_t((Py_ssize_t)e);
    }
    for (npy_intp i = 0; i < k; i++) {
        npy_intp e = ids ? (npy_intp)ids[i] : first + i;
        st[e] = (int8_t)to;
        fr[e] = key;
        pos[e] = i;
    }
    return PyLong_FromLong(-1);
}

PyDoc_STRVAR(hold_doc,
             "hold(ids, state, frame_of, pos_of, want, to) -> (bad, frames, pos)\n\n"
             "The envs ids (int64 [k]) the user answers: each must lie in [0, N), be in state "
             "`want` and come once. Then each gets state `to`; frames is [(frame key, env "
             "count)] in order of first appearance, pos (int64 [k]) each env's row in its frame. "
             "bad is -1, or the position in ids of the first env that is out of range (then "
             "frames is 'range'), in another state ('state') or given twice ('twice'); then "
             "nothing changed.");

static PyObject *hold(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_ids, *o_state, *o_frame_of, *o_pos_of;
    int want, to;
    if (!PyArg_ParseTuple(args, "OOOOii", &o_ids, &o_state, &o_frame_of, &o_pos_of, &want, &to))
        return NULL;
    PyArrayObject *ida = array(o_ids, NPY_INT64, 1, 0, "ids");
    PyArrayObject *state = array(o_state, NPY_INT8, 1, 1, "state");
    PyArrayObject *frame_of = array(o_frame_of, NPY_INT64, 1, 0, "frame_of");
    PyArrayObject *pos_of = array(o_pos_of, NPY_INT64, 1, 0, "pos_of");
    if (!ida || !state || !frame_of || !pos_of)
        return NULL;
    npy_intp n = rows(state), k = rows(ida);
    if (rows(frame_of) != n || rows(pos_of) != n || want == to || want == -128 || to == -128) {
        PyErr_SetString(PyExc_ValueError, "hold: arrays of different lengths, or bad states");
        return NULL;
    }
    const int64_t *ids = PyArray_DATA(ida);
    int8_t *st = PyArray_DATA(state);
    const int64_t *fr = PyArray_DATA(frame_of), *po = PyArray_DATA(pos_of);
    /* One pass marks each env taken (TAKEN, a state no caller uses), which
     * finds the repeated ones; a bad env undoes the marks before it. */
    enum { TAKEN = -128 };
    npy_intp bad = -1;
    const char *why = NULL;
    for (npy_intp i = 0; i < k && bad < 0; i++) {
        int64_t e = ids[i];
        if (e < 0 || e >= n) {
            bad = i, why = "range";
        } else if (st[e] == TAKEN) {
            bad = i, why = "twice";
        } else if (st[e] != want) {
            bad = i, why = "state";
        } else {
            st[e] = TAKEN;
        }
    }
    if (bad >= 0) {
        for (npy_intp i = 0; i < bad; i++)
            st[ids[i]] = (int8_t)want;
        return Py_BuildValue("nsO", (Py_ssize_t)bad, why, Py_None);
    }
    for (npy_intp i = 0; i < k; i++)
        st[ids[i]] = (int8_t)to;
    npy_intp dims[1] = {k};
    PyObject *o_pos = PyArray_SimpleNew(1, dims, NPY_INT64);
    PyObject *frames = PyList_New(0);
    if (!o_pos || !frames)
        goto fail;
    int64_t *pos = PyArray_DATA((PyArrayObject *)o_pos);
    /* The usual answer is one whole frame; a few frames at most otherwise:
     * the linear search over the frames seen is short. */
    int64_t keys[64];
    Py_ssize_t counts[64], nkeys = 0;
    for (npy_intp i = 0; i < k; i++) {
        int64_t key = fr[ids[i]];
        pos[i] = po[ids[i]];
        Py_ssize_t j = 0;
        while (j < nkeys && keys[j] != key)
            j++;
        if (j == nkeys) {
            if (nkeys == 64) { /* flush the table into the list, start again */
                for (Py_ssize_t m = 0; m < nkeys; m++) {
                    PyObject *t = Py_BuildValue("(Ln)", (long long)keys[m], counts[m]);
                    if (!t || PyList_Append(frames, t) < 0) {
                        Py_XDECREF(t);
                        goto fail;
                    }
                    Py_DECREF(t);
                }
                nkeys = j = 0;
            }
            keys[j] = key;
            counts[j] = 0;
            nkeys++;
        }
        counts[j]++;
    }
    for (Py_ssize_t m = 0; m < nkeys; m++) {
        PyObject *t = Py_BuildValue("(Ln)", (long long)keys[m], counts[m]);
        if (!t || PyList_Append(frames, t) < 0) {
            Py_XDECREF(t);
            goto fail;
        }
        Py_DECREF(t);
    }
    return Py_BuildValue("nNN", (Py_ssize_t)-1, frames, o_pos);
fail:
    for (npy_intp i = 0; i < k; i++)
        st[ids[i]] = (int8_t)want;
    Py_XDECREF(o_pos);
    Py_XDECREF(frames);
    return NULL;
}

static PyMethodDef methods[] = {
    {"take_frame", take_frame, METH_VARARGS, take_frame_doc},
    {"episodes", episodes, METH_VARARGS, episodes_doc},
    {"gather", gather, METH_VARARGS, gather_doc},
    {"scan_observations", scan_observations, METH_VARARGS, scan_doc},
    {"first_outside", first_outside, METH_VARARGS, first_outside_doc},
    {"adopt", adopt, METH_VARARGS, adopt_doc},
    {"hold", hold, METH_VARARGS, hold_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_hotpath",
    "The per-step array work of rollout_client's VecEnv, in C (see _hotpath.c).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__hotpath(void)
{
    import_array();
    return PyModule_Create(&module);
}
