/* frames.c: one Observations frame, from the wire (scan_observations: the
 * walk over its fields) or from the node's SEED memory (take_frame: its rows
 * into the VecEnv's per-env arrays). See module.c. */
#include "hotpath.h"

#include <math.h>
#include <string.h>

PyDoc_STRVAR_EXTERN(
    take_frame_doc,
    "take_frame(ranges, offset, m_obs, m_final, m_reward, m_flags, m_step, obs, final, "
    "reward, flags, step, has_final) -> count\n\n"
    "Copy the rows of one in-memory Observations frame out of a node's SEED memory "
    "(m_*: obs and final float32 [R, D], reward float32 [R], flags uint8 [R], step "
    "uint64 [R]) into per-env arrays (obs and final float32 [N, D] or both None, reward "
    "float32 [N], flags bool [3, N] (terminated, truncated, episode_start), step uint64 "
    "[N], has_final bool [N]); env e of the frame is row offset + e. ranges: uint32 "
    "(first, count) pairs. A row without a final observation gets NaN in final. Returns "
    "the number of envs. Raises ValueError when a range lies outside the memory or the "
    "arrays, before anything is written; and, naming the env, when a value read is NaN "
    "or infinite or its flags have bits no node sets (no node writes them: the rows "
    "written then are not to be used).");

/* bad_value names, as a ValueError, the first value of the n floats v
 * (env env's column what) that is not finite; 0 if all are. */
static int bad_value(const float *v, npy_intp n, npy_intp env, const char *what)
{
    for (npy_intp j = 0; j < n; j++)
        if (!isfinite(v[j])) {
            PyErr_Format(PyExc_ValueError, "the %s of env %zd in shared memory holds %s", what,
                         (Py_ssize_t)env, isnan(v[j]) ? "NaN" : "an infinity");
            return -1;
        }
    return 0;
}

PyObject *ro__hp_take_frame(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_ranges, *o_mobs, *o_mfinal, *o_mreward, *o_mflags, *o_mstep;
    PyObject *o_obs, *o_final, *o_reward, *o_flags, *o_step, *o_has_final;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "OnOOOOOOOOOOO", &o_ranges, &offset, &o_mobs, &o_mfinal, &o_mreward,
                          &o_mflags, &o_mstep, &o_obs, &o_final, &o_reward, &o_flags, &o_step,
                          &o_has_final))
        return NULL;
    PyArrayObject *ranges = ro__hp_array(o_ranges, NPY_UINT32, 1, 0, "ranges");
    PyArrayObject *mreward = ro__hp_array(o_mreward, NPY_FLOAT32, 1, 0, "m_reward");
    PyArrayObject *mflags = ro__hp_array(o_mflags, NPY_UINT8, 1, 0, "m_flags");
    PyArrayObject *mstep = ro__hp_array(o_mstep, NPY_UINT64, 1, 0, "m_step");
    PyArrayObject *reward = ro__hp_array(o_reward, NPY_FLOAT32, 1, 1, "reward");
    PyArrayObject *flags = ro__hp_array(o_flags, NPY_BOOL, 2, 1, "flags");
    PyArrayObject *step = ro__hp_array(o_step, NPY_UINT64, 1, 1, "step");
    PyArrayObject *has_final = ro__hp_array(o_has_final, NPY_BOOL, 1, 1, "has_final");
    if (!ranges || !mreward || !mflags || !mstep || !reward || !flags || !step || !has_final)
        return NULL;
    PyArrayObject *mobs = NULL, *mfinal = NULL, *obs = NULL, *final = NULL;
    if ((o_obs == Py_None) != (o_final == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "obs and final: both arrays or both None");
        return NULL;
    }
    if (o_obs != Py_None) {
        if (!(mobs = ro__hp_array(o_mobs, NPY_FLOAT32, 2, 0, "m_obs")) ||
            !(mfinal = ro__hp_array(o_mfinal, NPY_FLOAT32, 2, 0, "m_final")) ||
            !(obs = ro__hp_array(o_obs, NPY_FLOAT32, 2, 1, "obs")) ||
            !(final = ro__hp_array(o_final, NPY_FLOAT32, 2, 1, "final")))
            return NULL;
    }
    npy_intp R = ro__hp_rows(mreward), N = ro__hp_rows(reward);
    if (ro__hp_rows(mflags) != R || ro__hp_rows(mstep) != R ||
        (mobs && (ro__hp_rows(mobs) != R || ro__hp_rows(mfinal) != R))) {
        PyErr_SetString(PyExc_ValueError, "the memory's columns have different row counts");
        return NULL;
    }
    if (PyArray_DIM(flags, 0) != 3 || PyArray_DIM(flags, 1) != N || ro__hp_rows(step) != N ||
        ro__hp_rows(has_final) != N ||
        (obs && (ro__hp_rows(obs) != N || ro__hp_rows(final) != N))) {
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
            if (f & ~(RO_HP_TERMINATED | RO_HP_TRUNCATED | RO_HP_EPISODE_START | RO_HP_HAS_FINAL)) {
                PyErr_Format(PyExc_ValueError,
                             "the flags of env %zd in shared memory are 0x%02x, bits no node sets",
                             (Py_ssize_t)src, f);
                return NULL;
            }
            /* Our copies: what the caller will use. */
            if (bad_value(d_reward + dst, 1, src, "reward") ||
                (d_obs && bad_value(d_obs + dst * d, d, src, "observation")))
                return NULL;
            d_flags[dst] = (f & RO_HP_TERMINATED) != 0;
            d_flags[N + dst] = (f & RO_HP_TRUNCATED) != 0;
            d_flags[2 * N + dst] = (f & RO_HP_EPISODE_START) != 0;
            d_has_final[dst] = (f & RO_HP_HAS_FINAL) != 0;
            if (d_final) {
                float *out = d_final + dst * d;
                if (f & RO_HP_HAS_FINAL) {
                    memcpy(out, m_final + src * d, row);
                    if (bad_value(out, d, src, "final observation"))
                        return NULL;
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

int ro__hp_varint(const uint8_t *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *v)
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

enum { TAG_OBSERVATIONS = 0x1A, FIELD_RANGES = 12, FIELD_IN_MEMORY = 11 };

int ro__hp_scan(const uint8_t *b, Py_ssize_t start, Py_ssize_t end, ro_hp_scan_t *s)
{
    const char *what = "an observations frame";
    uint64_t size = 0;
    memset(s, 0, sizeof *s);
    if (end - start < 2 || b[start] != TAG_OBSERVATIONS)
        return 0;
    Py_ssize_t pos = start + 1;
    if (ro__hp_varint(b, &pos, end, &size) < 0)
        goto truncated;
    if (size != (uint64_t)(end - pos)) /* more fields after it, or a length past the frame */
        return 0;
    while (pos < end) {
        uint64_t tag, v;
        if (ro__hp_varint(b, &pos, end, &tag) < 0)
            goto truncated;
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (wt == 2) {
            if (ro__hp_varint(b, &pos, end, &v) < 0)
                goto truncated;
            if (v > (uint64_t)(end - pos)) {
                snprintf(s->err, sizeof s->err, "%s: a field of %llu bytes with %zd left", what,
                         (unsigned long long)v, end - pos);
                return -1;
            }
            if (field >= 2 && field <= FIELD_RANGES) {
                if (s->have[field]) /* split in parts: legal, rare; protobuf merges them */
                    return 0;
                s->have[field] = 1;
                s->spans[field][0] = pos;
                s->spans[field][1] = pos + (Py_ssize_t)v;
            }
            pos += (Py_ssize_t)v;
        } else if (wt == 0) {
            if (ro__hp_varint(b, &pos, end, &v) < 0)
                goto truncated;
            if (field == 1)
                s->seq = v;
            else if (field == FIELD_IN_MEMORY)
                s->in_memory = v != 0;
            else if (field >= 2 && field <= 10) /* unpacked: legal, rare */
                return 0;
        } else if (wt == 1 || wt == 5) {
            if (field >= 2 && field <= 10)
                return 0;
            Py_ssize_t skip = wt == 1 ? 8 : 4;
            if (skip > end - pos) {
                snprintf(s->err, sizeof s->err, "%s: a field runs past its frame", what);
                return -1;
            }
            pos += skip;
        } else { /* a group or a bad wire type: protobuf decides */
            return 0;
        }
    }
    if (!s->in_memory)
        return 1;
    for (int f = 2; f <= 10; f++) {
        if (s->have[f]) {
            snprintf(s->err, sizeof s->err, "%s: in memory, yet with columns in the frame", what);
            return -1;
        }
    }
    /* The ranges' varints are counted (and checked) here; a caller decodes
     * them into an array of that many: the frame's size bounds it. */
    Py_ssize_t lo = s->have[FIELD_RANGES] ? s->spans[FIELD_RANGES][0] : 0;
    Py_ssize_t hi = s->have[FIELD_RANGES] ? s->spans[FIELD_RANGES][1] : 0;
    uint64_t v;
    for (Py_ssize_t p = lo; p < hi; s->nranges++) {
        if (ro__hp_varint(b, &p, hi, &v) < 0) {
            snprintf(s->err, sizeof s->err,
                     "a truncated or overlong varint in observations field ranges");
            return -1;
        }
    }
    return 1;
truncated:
    snprintf(s->err, sizeof s->err, "a truncated or overlong varint in %s", what);
    return -1;
}

void ro__hp_scan_ranges(const uint8_t *b, const ro_hp_scan_t *s, uint32_t *out)
{
    Py_ssize_t hi = s->have[FIELD_RANGES] ? s->spans[FIELD_RANGES][1] : 0;
    Py_ssize_t p = s->have[FIELD_RANGES] ? s->spans[FIELD_RANGES][0] : 0;
    uint64_t v = 0;
    for (Py_ssize_t i = 0; p < hi; i++) {
        ro__hp_varint(b, &p, hi, &v);
        out[i] = (uint32_t)v; /* uint32: the low bits, as protobuf reads it */
    }
}

PyDoc_STRVAR_EXTERN(
    scan_observations_doc,
    "scan_observations(buf, start, end) -> None | (seq, in_memory, spans, ranges)\n\n"
    "Walk the Frame in buf[start:end] (any bytes-like object) when it is a "
    "Frame{observations} laid out as protobuf encoders write it: seq (uint64), in_memory "
    "(bool), spans (a tuple of 13: for the length-delimited fields 2 to 12 their "
    "(start, end) in buf, else None) and ranges (in_memory frames: field 12's packed "
    "varints as uint32, else None). None for another frame kind or layout (a field "
    "repeated or not packed, a group, more after the observations): protobuf then "
    "decides. Raises ValueError on bytes no protobuf parser takes.");

PyObject *ro__hp_scan_observations(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end))
        return NULL;
    PyObject *result = NULL, *ranges = NULL, *sp = NULL;
    ro_hp_scan_t s;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "scan_observations: start and end outside buf");
        goto done;
    }
    int r = ro__hp_scan(view.buf, start, end, &s);
    if (r < 0) {
        PyErr_SetString(PyExc_ValueError, s.err);
        goto done;
    }
    if (r == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (s.in_memory) {
        npy_intp n = s.nranges;
        if (!(ranges = PyArray_SimpleNew(1, &n, NPY_UINT32)))
            goto done;
        ro__hp_scan_ranges(view.buf, &s, PyArray_DATA((PyArrayObject *)ranges));
    } else {
        ranges = Py_NewRef(Py_None);
    }
    if (!(sp = PyTuple_New(RO_HP_OBS_SPANS)))
        goto done;
    for (int f = 0; f < RO_HP_OBS_SPANS; f++) {
        PyObject *item =
            s.have[f] ? Py_BuildValue("(nn)", s.spans[f][0], s.spans[f][1]) : Py_NewRef(Py_None);
        if (!item)
            goto done;
        PyTuple_SET_ITEM(sp, f, item);
    }
    result = Py_BuildValue("KOOO", (unsigned long long)s.seq, s.in_memory ? Py_True : Py_False, sp,
                           ranges);
done:
    Py_XDECREF(ranges);
    Py_XDECREF(sp);
    PyBuffer_Release(&view);
    return result;
}
