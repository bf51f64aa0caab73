/* envs.c: the per-env work of a step (episodes, gather, the discrete range
 * check) and the states of asynchronous stepping (adopt, hold;
 * vecenv_async.py). See module.c. */
#include "hotpath.h"

#include <math.h>
#include <string.h>

PyDoc_STRVAR_EXTERN(
    episodes_doc,
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

PyObject *ro__hp_episodes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_reward, *o_term, *o_trunc, *o_has_final, *o_step, *o_rows, *o_ret, *o_len;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o_reward, &o_term, &o_trunc, &o_has_final, &o_step,
                          &o_rows, &o_ret, &o_len))
        return NULL;
    PyArrayObject *reward = ro__hp_array(o_reward, NPY_FLOAT32, 1, 0, "reward");
    PyArrayObject *term = ro__hp_array(o_term, NPY_BOOL, 1, 0, "terminated");
    PyArrayObject *trunc = ro__hp_array(o_trunc, NPY_BOOL, 1, 0, "truncated");
    PyArrayObject *hf = ro__hp_array(o_has_final, NPY_BOOL, 1, 0, "has_final");
    PyArrayObject *ret = ro__hp_array(o_ret, NPY_FLOAT64, 1, 1, "ep_return");
    PyArrayObject *len = ro__hp_array(o_len, NPY_INT64, 1, 1, "ep_length");
    if (!reward || !term || !trunc || !hf || !ret || !len)
        return NULL;
    PyArrayObject *step = NULL;
    if (o_step != Py_None && !(step = ro__hp_array(o_step, NPY_UINT64, 1, 0, "step")))
        return NULL;
    npy_intp k = ro__hp_rows(reward), n = ro__hp_rows(ret);
    if (ro__hp_rows(term) != k || ro__hp_rows(trunc) != k || ro__hp_rows(hf) != k ||
        (step && ro__hp_rows(step) != k) || ro__hp_rows(len) != n) {
        PyErr_SetString(PyExc_ValueError, "episodes: arrays of different lengths");
        return NULL;
    }
    npy_intp first;
    const int64_t *ids;
    if (ro__hp_env_rows(o_rows, k, n, &first, &ids) < 0)
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
        int transition = !st || st[i] != 0; /* not an env's first observation */
        int count = ro__hp_episode_row(&er[e], &el[e], r[i], transition, te[i] != 0, tr[i] != 0,
                                       f[i] != 0, &out_ret[i], &out_len[i]);
        counted[i] = (npy_bool)count;
        stepped += transition;
        ended += count;
    }
    return Py_BuildValue("NNNnn", o_out_ret, o_out_len, o_counted, (Py_ssize_t)stepped,
                         (Py_ssize_t)ended);
}

PyDoc_STRVAR_EXTERN(
    gather_doc, "gather(rows, k, arrays, flags) -> (copies..., flags_copy)\n\n"
                "New arrays of the rows of k envs (rows: an int, the first of k envs in order; or "
                "int64 [k]) of each C-contiguous array in the tuple `arrays` (first axis: envs), "
                "and of flags (bool [3, N]: its second axis is envs) as bool [3, k].");

PyObject *ro__hp_gather(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_rows, *o_arrays, *o_flags;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OnO!O", &o_rows, &k, &PyTuple_Type, &o_arrays, &o_flags))
        return NULL;
    PyArrayObject *flags = ro__hp_array(o_flags, NPY_BOOL, 2, 0, "flags");
    if (!flags)
        return NULL;
    npy_intp n = PyArray_DIM(flags, 1);
    if (PyArray_DIM(flags, 0) != 3 || k < 0) {
        PyErr_SetString(PyExc_ValueError, "gather: flags must be [3, N] and k >= 0");
        return NULL;
    }
    npy_intp first;
    const int64_t *ids;
    if (ro__hp_env_rows(o_rows, k, n, &first, &ids) < 0)
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
        size_t rb = is_flags ? 1 : (size_t)ro__hp_row_bytes(a);
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

PyDoc_STRVAR_EXTERN(first_outside_doc,
                    "first_outside(values, n) -> index\n\n"
                    "The index of the first of values (int64 [k]) outside [0, n), or -1: the range "
                    "check of discrete actions in one pass.");

PyObject *ro__hp_first_outside(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_values;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &o_values, &n))
        return NULL;
    PyArrayObject *a = ro__hp_array(o_values, NPY_INT64, 1, 0, "values");
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

/* The per-env table of asynchronous stepping (vecenv_async.py) that
 * adopt() and hold() move envs through: state int8 [n], and per env its
 * frame and its row in it, int64 [n] each. */
typedef struct env_table {
    int8_t *state;
    int64_t *frame_of, *pos_of;
    npy_intp n;
} env_table_t;

/* env_table reads the table's three arrays (state always written; frame_of
 * and pos_of when `writable`) into *t; -1 with TypeError or ValueError
 * (naming the function `fn`) otherwise. */
static int env_table(PyObject *o_state, PyObject *o_frame_of, PyObject *o_pos_of, int writable,
                     const char *fn, env_table_t *t)
{
    PyArrayObject *state = ro__hp_array(o_state, NPY_INT8, 1, 1, "state");
    PyArrayObject *frame_of = ro__hp_array(o_frame_of, NPY_INT64, 1, writable, "frame_of");
    PyArrayObject *pos_of = ro__hp_array(o_pos_of, NPY_INT64, 1, writable, "pos_of");
    if (!state || !frame_of || !pos_of)
        return -1;
    t->n = ro__hp_rows(state);
    if (ro__hp_rows(frame_of) != t->n || ro__hp_rows(pos_of) != t->n) {
        PyErr_Format(PyExc_ValueError, "%s: arrays of different lengths", fn);
        return -1;
    }
    t->state = PyArray_DATA(state);
    t->frame_of = PyArray_DATA(frame_of);
    t->pos_of = PyArray_DATA(pos_of);
    return 0;
}

PyDoc_STRVAR_EXTERN(
    adopt_doc, "adopt(rows, k, state, frame_of, pos_of, key, want, to) -> bad\n\n"
               "A received frame's k envs (rows: an int, the first of k envs in order; or int64 "
               "[k]) join frame `key`: each must be in state `want` (state: int8 [N]); then env "
               "rows[i] gets state `to`, frame_of (int64 [N]) `key` and pos_of (int64 [N]) i. "
               "Returns -1, or the first env not in state `want` (then nothing changed).");

PyObject *ro__hp_adopt(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_rows, *o_state, *o_frame_of, *o_pos_of;
    Py_ssize_t k;
    long long key;
    int want, to;
    if (!PyArg_ParseTuple(args, "OnOOOLii", &o_rows, &k, &o_state, &o_frame_of, &o_pos_of, &key,
                          &want, &to))
        return NULL;
    env_table_t t;
    if (env_table(o_state, o_frame_of, o_pos_of, 1, "adopt", &t) < 0)
        return NULL;
    npy_intp first;
    const int64_t *ids;
    if (ro__hp_env_rows(o_rows, k, t.n, &first, &ids) < 0)
        return NULL;
    for (npy_intp i = 0; i < k; i++) {
        npy_intp e = ids ? (npy_intp)ids[i] : first + i;
        if (t.state[e] != want)
            return PyLong_FromSsize_t((Py_ssize_t)e);
    }
    for (npy_intp i = 0; i < k; i++) {
        npy_intp e = ids ? (npy_intp)ids[i] : first + i;
        t.state[e] = (int8_t)to;
        t.frame_of[e] = key;
        t.pos_of[e] = i;
    }
    return PyLong_FromLong(-1);
}

/* The (frame key, env count) pairs hold() collects before it appends them
 * to its list. */
enum { FRAME_KEYS = 64 };

/* append_frames appends the n pairs (keys[i], counts[i]) to the list
 * frames as tuples; -1 with an exception set otherwise. */
static int append_frames(PyObject *frames, const int64_t *keys, const Py_ssize_t *counts,
                         Py_ssize_t n)
{
    for (Py_ssize_t m = 0; m < n; m++) {
        PyObject *t = Py_BuildValue("(Ln)", (long long)keys[m], counts[m]);
        if (!t || PyList_Append(frames, t) < 0) {
            Py_XDECREF(t);
            return -1;
        }
        Py_DECREF(t);
    }
    return 0;
}

PyDoc_STRVAR_EXTERN(
    hold_doc, "hold(ids, state, frame_of, pos_of, want, to) -> (bad, frames, pos)\n\n"
              "The envs ids (int64 [k]) the user answers: each must lie in [0, N), be in state "
              "`want` and come once. Then each gets state `to`; frames is [(frame key, env "
              "count)] in order of first appearance, pos (int64 [k]) each env's row in its frame. "
              "bad is -1, or the position in ids of the first env that is out of range (then "
              "frames is 'range'), in another state ('state') or given twice ('twice'); then "
              "nothing changed.");

PyObject *ro__hp_hold(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_ids, *o_state, *o_frame_of, *o_pos_of;
    int want, to;
    if (!PyArg_ParseTuple(args, "OOOOii", &o_ids, &o_state, &o_frame_of, &o_pos_of, &want, &to))
        return NULL;
    PyArrayObject *ida = ro__hp_array(o_ids, NPY_INT64, 1, 0, "ids");
    env_table_t t;
    if (!ida || env_table(o_state, o_frame_of, o_pos_of, 0, "hold", &t) < 0)
        return NULL;
    if (want == to || want == -128 || to == -128) {
        PyErr_SetString(PyExc_ValueError, "hold: bad states (want == to, or -128)");
        return NULL;
    }
    npy_intp n = t.n, k = ro__hp_rows(ida);
    const int64_t *ids = PyArray_DATA(ida);
    int8_t *st = t.state;
    const int64_t *fr = t.frame_of, *po = t.pos_of;
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
    int64_t keys[FRAME_KEYS];
    Py_ssize_t counts[FRAME_KEYS], nkeys = 0;
    for (npy_intp i = 0; i < k; i++) {
        int64_t key = fr[ids[i]];
        pos[i] = po[ids[i]];
        Py_ssize_t j = 0;
        while (j < nkeys && keys[j] != key)
            j++;
        if (j == nkeys) {
            if (nkeys == FRAME_KEYS) { /* flush the table into the list, start again */
                if (append_frames(frames, keys, counts, nkeys) < 0)
                    goto fail;
                nkeys = j = 0;
            }
            keys[j] = key;
            counts[j] = 0;
            nkeys++;
        }
        counts[j]++;
    }
    if (append_frames(frames, keys, counts, nkeys) < 0)
        goto fail;
    return Py_BuildValue("nNN", (Py_ssize_t)-1, frames, o_pos);
fail:
    for (npy_intp i = 0; i < k; i++)
        st[ids[i]] = (int8_t)want;
    Py_XDECREF(o_pos);
    Py_XDECREF(frames);
    return NULL;
}
