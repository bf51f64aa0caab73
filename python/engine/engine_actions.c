/* engine_actions.c: a batch of actions checked and written into the
 * engine's action rows (engine.h). */
#include "engine.h"

#include <string.h>

static int shape_error(PyArrayObject *a, uint32_t k, uint32_t per, const char *what)
{
    PyObject *shape = PyObject_GetAttrString((PyObject *)a, "shape");
    PyErr_Format(PyExc_ValueError, "actions: %u envs x %u %s are needed, got shape %R", k, per,
                 what, shape ? shape : Py_None);
    Py_XDECREF(shape);
    return -1;
}

int ro__eng_take_discrete(ro_vec_t *v, PyObject *obj, const uint32_t *ids, uint32_t k)
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
    if (PyArray_SIZE(c) != (npy_intp)k * per || PyArray_NDIM(c) < 1 ||
        PyArray_DIM(c, 0) != (npy_intp)k) {
        shape_error(c, k, per, "discrete values");
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

int ro__eng_take_box(ro_vec_t *v, PyObject *obj, const uint32_t *ids, uint32_t k)
{
    const uint32_t per = v->lay.nbox;
    /* Cast to float32 as Gymnasium's Box would; the env gets the values as
     * they are: bounds are the user's (ClipAction), as in Gymnasium. */
    PyArrayObject *c = (PyArrayObject *)PyArray_FROMANY(
        obj, NPY_FLOAT32, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!c)
        return -1;
    if (PyArray_SIZE(c) != (npy_intp)k * per || PyArray_NDIM(c) < 1 ||
        PyArray_DIM(c, 0) != (npy_intp)k) {
        shape_error(c, k, per, "floats");
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
