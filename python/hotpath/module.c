/* rollout_client._hotpath: the per-step array work of rollout_client's
 * VecEnv, in one pass (this file: the module; frames.c, envs.c and lane*.c:
 * the functions and the Lane type).
 *
 * Why C: each numpy call costs a few microseconds on the machines we run on
 * (call, dtype dispatch, a temporary), whatever the size, and a step of 1024
 * envs did about sixty of them: 250 us of Python per step, more than the
 * node's own stepping. These functions do the same work in one pass each
 * (docs/python.md "The fast path"):
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
 *   Lane        (lane.c) a VecEnv's asynchronous recv() and send() over
 *               one node's shared memory, each one call: frames read and
 *               checked, rows copied out, episodes counted, actions
 *               written, answers sent (vecenv_lane.py).
 *   Waiter, step_shard, step_discrete, step_box
 *               (worker.c) a Python env worker's side of its node's
 *               commands, and the stepping of its envs (env_worker.py).
 *
 * Everything a caller passes is checked here (array type, dtype, shape,
 * contiguity, every index against its array): a wrong argument raises
 * TypeError or ValueError, never reads or writes outside an array. What the
 * node wrote in its memory is data, not trusted: row ranges are checked
 * against the memory's rows and the VecEnv's envs before any copy. The
 * node may write its memory during a copy (a misbehaving node): the values
 * are then garbage, but every access stays inside the mapping.
 *
 * Called with the GIL held; nothing here allocates without bound (outputs
 * are as large as the rows asked for), and only Lane.recv() blocks: in
 * poll(), with the GIL released, for at most its timeout. */
#define RO_HOTPATH_MODULE
#include "hotpath.h"

#include <string.h>

/* The helpers the other files share (hotpath.h says what each does). */

PyArrayObject *ro__hp_array(PyObject *obj, int typenum, int ndim, int writable, const char *name)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: a numpy array is needed", name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != typenum || (ndim && PyArray_NDIM(a) != ndim) ||
        !PyArray_IS_C_CONTIGUOUS(a) || (writable && !PyArray_ISWRITEABLE(a))) {
        PyArray_Descr *want = PyArray_DescrFromType(typenum); /* a new reference */
        char kind = want ? want->type : '?';
        Py_XDECREF(want);
        PyErr_Format(PyExc_TypeError,
                     "%s: a C-contiguous%s array of dtype %c with %d dimension(s) is needed, "
                     "got dtype %c with %d",
                     name, writable ? " writable" : "", kind, ndim, PyArray_DESCR(a)->type,
                     PyArray_NDIM(a));
        return NULL;
    }
    return a;
}

npy_intp ro__hp_rows(PyArrayObject *a)
{
    return PyArray_NDIM(a) ? PyArray_DIM(a, 0) : 1;
}

npy_intp ro__hp_row_bytes(PyArrayObject *a)
{
    npy_intp r = ro__hp_rows(a);
    return r ? PyArray_NBYTES(a) / r : 0;
}

int ro__hp_env_rows(PyObject *o, npy_intp k, npy_intp n, npy_intp *first, const int64_t **ids)
{
    *ids = NULL;
    *first = 0;
    if (k < 0) {
        PyErr_Format(PyExc_ValueError, "rows: a count of %zd envs", (Py_ssize_t)k);
        return -1;
    }
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
    PyArrayObject *a = ro__hp_array(o, NPY_INT64, 1, 0, "rows");
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

static PyMethodDef methods[] = {
    {"take_frame", ro__hp_take_frame, METH_VARARGS, take_frame_doc},
    {"scan_observations", ro__hp_scan_observations, METH_VARARGS, scan_observations_doc},
    {"episodes", ro__hp_episodes, METH_VARARGS, episodes_doc},
    {"gather", ro__hp_gather, METH_VARARGS, gather_doc},
    {"first_outside", ro__hp_first_outside, METH_VARARGS, first_outside_doc},
    {"adopt", ro__hp_adopt, METH_VARARGS, adopt_doc},
    {"hold", ro__hp_hold, METH_VARARGS, hold_doc},
    {"step_shard", ro__hp_step_shard, METH_VARARGS, step_shard_doc},
    {"step_discrete", ro__hp_step_discrete, METH_VARARGS, step_discrete_doc},
    {"step_box", ro__hp_step_box, METH_VARARGS, step_box_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_hotpath",
    "The per-step array work of rollout_client's VecEnv, in C (python/hotpath/).",
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
    if (PyType_Ready(&ro__hp_lane_type) < 0 || PyType_Ready(&ro__hp_waiter_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddObjectRef(m, "Lane", (PyObject *)&ro__hp_lane_type) < 0 ||
              PyModule_AddObjectRef(m, "Waiter", (PyObject *)&ro__hp_waiter_type) < 0))
        Py_CLEAR(m);
    return m;
}
