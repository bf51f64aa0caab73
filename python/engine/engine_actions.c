/* engine_actions.c: a batch of actions checked and written into the
 * engine's action rows (engine.h). */
#include "engine.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* rows_fit tells whether a holds k rows of per values (what names them in
 * the ValueError set when it does not). */
static bool rows_fit(PyArrayObject *a, uint32_t k, uint32_t per, const char *what)
{
    if (PyArray_SIZE(a) == (npy_intp)k * per && PyArray_NDIM(a) >= 1 &&
        PyArray_DIM(a, 0) == (npy_intp)k)
        return true;
    PyObject *shape = PyObject_GetAttrString((PyObject *)a, "shape");
    PyErr_Format(PyExc_ValueError, "actions: %u envs x %u %s are needed, got shape %R", k, per,
                 what, shape ? shape : Py_None);
    Py_XDECREF(shape);
    return false;
}

/* take_discrete / take_box: one kind of a batch (engine.h,
 * ro__eng_take_actions). */
static int take_discrete(ro_vec_t *v, PyObject *obj, const uint32_t *ids, uint32_t k)
{
    const ro_space_layout_t *L = &v->lay;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 0, 0, 0);
    if (!a)
        return -1;
    char kind = PyArray_DESCR(a)->kind;
    if (kind != 'i' && kind != 'u' && kind != 'b') {
        PyErr_Format(PyExc_TypeError,
                     "actions: integers are needed for discrete actions, got "
                     "dtype %R",
                     (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return -1;
    }
    PyArrayObject *c = (PyArrayObject *)PyArray_FROMANY((PyObject *)a, NPY_INT64, 0, 0,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    Py_DECREF(a);
    if (!c)
        return -1;
    const uint32_t per = L->ndisc;
    if (!rows_fit(c, k, per, "discrete values")) {
        Py_DECREF(c);
        return -1;
    }
    const int64_t *x = PyArray_DATA(c);
    /* Checked whole before any row is written. One pass with no early exit;
     * the first offender is looked up after. */
    int64_t bad = -1;
    for (npy_intp i = 0; i < (npy_intp)k * per; i++) {
        const int64_t hi = L->disc_n[i % per];
        bad = (x[i] < 0 || x[i] >= hi) && bad < 0 ? (int64_t)i : bad;
    }
    if (bad >= 0) {
        uint32_t row = (uint32_t)(bad / per);
        PyErr_Format(PyExc_ValueError, "actions: env %u's value %lld is outside 0..%u",
                     ids ? ids[row] : row, (long long)x[bad], L->disc_n[bad % per] - 1);
        Py_DECREF(c);
        return -1;
    }
    for (uint32_t i = 0; i < k; i++) {
        int32_t *out = v->act_i + (size_t)(ids ? ids[i] : i) * per;
        for (uint32_t e = 0; e < per; e++)
            out[e] = (int32_t)x[(size_t)i * per + e];
    }
    Py_DECREF(c);
    return 0;
}

static int take_box(ro_vec_t *v, PyObject *obj, const uint32_t *ids, uint32_t k)
{
    const uint32_t per = v->lay.nbox;
    /* Cast to float32 as Gymnasium's Box would; the env gets the values as
     * they are: bounds are the user's (ClipAction), as in Gymnasium. */
    PyArrayObject *c = (PyArrayObject *)PyArray_FROMANY(
        obj, NPY_FLOAT32, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!c)
        return -1;
    if (!rows_fit(c, k, per, "floats")) {
        Py_DECREF(c);
        return -1;
    }
    const float *x = PyArray_DATA(c);
    if (!ids)
        memcpy(v->act_f, x, (size_t)k * per * sizeof(float));
    else
        for (uint32_t i = 0; i < k; i++)
            memcpy(v->act_f + (size_t)ids[i] * per, x + (size_t)i * per, per * sizeof(float));
    Py_DECREF(c);
    return 0;
}

int ro__eng_take_actions(ro_vec_t *v, PyObject *disc, PyObject *box, const uint32_t *ids,
                         uint32_t k)
{
    const char *missing = v->lay.ndisc && disc == Py_None ? "discrete"
                          : v->lay.nbox && box == Py_None ? "box"
                                                          : NULL;
    if (missing) {
        PyErr_Format(PyExc_TypeError, "actions: the env takes %s actions, not None", missing);
        return -1;
    }
    if ((v->lay.ndisc && take_discrete(v, disc, ids, k) < 0) ||
        (v->lay.nbox && take_box(v, box, ids, k) < 0))
        return -1;
    return 0;
}

/* The bytes of one batch of a cycle: every env's discrete row, then every
 * env's box row. */
static size_t cycle_bytes(const ro_vec_t *v, size_t *disc)
{
    *disc = (size_t)v->n * v->lay.ndisc * sizeof(int32_t);
    return *disc + (size_t)v->n * v->lay.nbox * sizeof(float);
}

void ro__eng_put_cycle(ro_vec_t *v, const void *block, uint32_t j)
{
    size_t disc, all = cycle_bytes(v, &disc);
    const uint8_t *b = (const uint8_t *)block + j * all;
    if (disc)
        memcpy(v->act_i, b, disc);
    if (all > disc)
        memcpy(v->act_f, b + disc, all - disc);
}

int ro__eng_take_cycle(ro_vec_t *v, PyObject *batches, void **out, uint32_t *m)
{
    PyObject *seq = PySequence_Fast(batches, "actions: a sequence of (discrete, box) batches");
    if (!seq)
        return -1;
    const Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    size_t disc, all = cycle_bytes(v, &disc);
    uint8_t *block = k > 0 && k <= 1024 ? malloc((size_t)k * (all ? all : 1)) : NULL;
    if (!block) {
        if (k > 0 && k <= 1024)
            PyErr_NoMemory();
        else
            PyErr_Format(PyExc_ValueError, "actions: 1 to 1024 batches are needed, got %zd", k);
        goto fail;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, j), *d, *b;
        if (!PyTuple_Check(pair) || !PyArg_ParseTuple(pair, "OO", &d, &b)) {
            PyErr_Format(PyExc_TypeError, "actions: batch %zd is not a (discrete, box) pair", j);
            goto fail;
        }
        if (ro__eng_take_actions(v, d, b, NULL, v->n) < 0)
            goto fail;
        if (disc)
            memcpy(block + (size_t)j * all, v->act_i, disc);
        if (all > disc)
            memcpy(block + (size_t)j * all + disc, v->act_f, all - disc);
    }
    Py_DECREF(seq);
    *out = block;
    *m = (uint32_t)k;
    return 0;
fail:
    free(block);
    Py_DECREF(seq);
    return -1;
}
