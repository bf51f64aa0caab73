/* engine_arrays.c: the engine's rows as new numpy arrays (engine.h). */
#include "engine.h"

#include <string.h>

static int dtype_num(ro_dtype_t d)
{
    return d == RO_DTYPE_UINT8 ? NPY_UINT8 : d == RO_DTYPE_INT32 ? NPY_INT32 : NPY_FLOAT32;
}

/* gather returns a new [k, shape...] array of typenum holding rows
 * ids[0..k) (row_bytes each) of buf. */
static PyObject *gather(uint32_t k, uint32_t ndim, const uint32_t *shape, int typenum,
                        const uint8_t *buf, size_t row_bytes, const uint32_t *ids)
{
    npy_intp dims[RO_SPACE_MAX_DIMS + 1];
    dims[0] = k;
    for (uint32_t i = 0; i < ndim; i++)
        dims[i + 1] = shape[i];
    PyObject *a = PyArray_SimpleNew((int)ndim + 1, dims, typenum);
    if (!a)
        return NULL;
    uint8_t *out = PyArray_DATA((PyArrayObject *)a);
    if (!ids)
        memcpy(out, buf, k * row_bytes);
    else
        for (uint32_t i = 0; i < k; i++)
            memcpy(out + i * row_bytes, buf + (size_t)ids[i] * row_bytes, row_bytes);
    return a;
}

PyObject *ro__eng_tensors(const ro_vec_t *v, uint8_t *const *bufs, const uint32_t *ids, uint32_t k)
{
    const ro_space_layout_t *L = &v->lay;
    if (L->ntensors == 1)
        return gather(k, L->t[0].ndim, L->t[0].shape, dtype_num(L->t[0].dtype), bufs[0],
                      L->t[0].row_bytes, ids);
    PyObject *t = PyTuple_New(L->ntensors);
    for (uint32_t j = 0; t && j < L->ntensors; j++) {
        PyObject *a = gather(k, L->t[j].ndim, L->t[j].shape, dtype_num(L->t[j].dtype), bufs[j],
                             L->t[j].row_bytes, ids);
        if (!a) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, j, a);
    }
    return t;
}

PyObject *ro__eng_bools(const uint8_t *x, const uint32_t *ids, uint32_t k)
{
    return gather(k, 0, NULL, NPY_BOOL, x, 1, ids);
}

PyObject *ro__eng_doubles(const double *x, const uint32_t *ids, uint32_t k)
{
    return gather(k, 0, NULL, NPY_FLOAT64, (const uint8_t *)x, sizeof(double), ids);
}
