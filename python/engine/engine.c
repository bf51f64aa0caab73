/* rollout_client._engine: the in-process vector engine (src/vecenv/vec.h)
 * as a Python type, the C half of rollout_client.vector's VectorEnv.
 *
 * Engine(env, num_envs, seed, args, autoreset, threads, check_finite)
 * opens the env and creates its instances; layout() describes its spaces;
 * reset() and step() run the engine with the GIL released and return new
 * arrays (the caller may keep them: nothing is shared with the next step).
 *
 * Every argument is checked here (types, shapes, discrete values against
 * their ranges) before the engine sees it: a wrong one raises TypeError or
 * ValueError naming it, and no env is stepped. One thread at a time: a
 * second call while one runs (another Python thread) raises RuntimeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <string.h>

#include "envs/env_kind.h"
#include "vecenv/vec.h"

typedef struct {
    PyObject_HEAD ro_vec_t *v;
    int busy; /* a call runs with the GIL released */
} EngineObject;

static int dtype_num(ro_dtype_t d)
{
    return d == RO_DTYPE_UINT8 ? NPY_UINT8 : d == RO_DTYPE_INT32 ? NPY_INT32 : NPY_FLOAT32;
}

static int engine_init(EngineObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"env",       "num_envs", "seed",         "args",
                             "autoreset", "threads",  "check_finite", NULL};
    const char *env;
    unsigned int num_envs;
    unsigned long long seed;
    PyObject *pyargs;
    int autoreset = 0, threads = -1, check_finite = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sIKO|iip", kwlist, &env, &num_envs, &seed, &pyargs,
                                     &autoreset, &threads, &check_finite))
        return -1;
    if (self->v) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is initialised once");
        return -1;
    }
    PyObject *seq = PySequence_Fast(pyargs, "args: a sequence of (key, value) string pairs");
    if (!seq)
        return -1;
    Py_ssize_t na = PySequence_Fast_GET_SIZE(seq);
    if (na > 64) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%zd env arguments: at most 64", na);
        return -1;
    }
    ro_env_arg_t ea[64];
    for (Py_ssize_t i = 0; i < na; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(it, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(it, 1))) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "args[%zd]: a (key, value) pair of strings", i);
            return -1;
        }
        ea[i].key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(it, 0));
        ea[i].value = PyUnicode_AsUTF8(PyTuple_GET_ITEM(it, 1));
        if (!ea[i].key || !ea[i].value) {
            Py_DECREF(seq);
            return -1;
        }
    }
    ro_vec_config_t cfg = {
        .env = env,
        .args = ea,
        .nargs = (size_t)na,
        .num_envs = num_envs,
        .seed = seed,
        .autoreset = (ro_autoreset_t)autoreset,
        .threads = threads,
        .check_finite = check_finite != 0,
    };
    char err[512] = "";
    int rc;
    /* Creating envs (a plugin's, MuJoCo's) may take a while: other Python
     * threads run meanwhile. The strings stay alive through seq. */
    Py_BEGIN_ALLOW_THREADS rc = ro__vec_new(&self->v, &cfg, err, sizeof err);
    Py_END_ALLOW_THREADS Py_DECREF(seq);
    if (rc) {
        PyErr_SetString(PyExc_ValueError, err);
        return -1;
    }
    return 0;
}

static void engine_dealloc(EngineObject *self)
{
    ro__vec_free(self->v);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static ro_vec_t *ready(EngineObject *self)
{
    if (!self->v) {
        PyErr_SetString(PyExc_ValueError, "the engine is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the engine is stepping on another thread: one call at a time");
        return NULL;
    }
    return self->v;
}

static PyObject *floats(const float *x, uint32_t n)
{
    PyObject *l = PyList_New(n);
    for (uint32_t i = 0; l && i < n; i++)
        PyList_SET_ITEM(l, i, PyFloat_FromDouble(x[i]));
    return l;
}

static PyObject *shape_of(uint32_t ndim, const uint32_t *shape)
{
    PyObject *t = PyTuple_New(ndim);
    for (uint32_t i = 0; t && i < ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromUnsignedLong(shape[i]));
    return t;
}

static const char *kind_name(ro_space_kind_t k)
{
    switch (k) {
    case RO_SPACE_DISCRETE:
        return "discrete";
    case RO_SPACE_BOX:
        return "box";
    case RO_SPACE_MULTI_DISCRETE:
        return "multi_discrete";
    case RO_SPACE_MULTI_BINARY:
        return "multi_binary";
    }
    return "?";
}

PyDoc_STRVAR(layout_doc, "layout() -> dict: the env's name, spaces and the engine's choices");

static PyObject *engine_layout(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    const ro_space_layout_t *L = &v->lay;
    PyObject *tensors = PyList_New(L->ntensors), *parts = PyList_New(L->nparts);
    if (!tensors || !parts)
        goto fail;
    for (uint32_t k = 0; k < L->ntensors; k++) {
        const ro_tensor_layout_t *t = &L->t[k];
        PyObject *d =
            Py_BuildValue("{s:s,s:s,s:N,s:N,s:N}", "name", t->name, "dtype",
                          ro__dtype_name(t->dtype), "shape", shape_of(t->ndim, t->shape), "low",
                          floats(t->low, t->size), "high", floats(t->high, t->size));
        if (!d)
            goto fail;
        PyList_SET_ITEM(tensors, k, d);
    }
    for (uint32_t p = 0; p < L->nparts; p++) {
        const ro_part_layout_t *pt = &L->part[p];
        PyObject *d;
        if (pt->kind == RO_SPACE_BOX) {
            d = Py_BuildValue("{s:s,s:N,s:N,s:N}", "kind", "box", "shape",
                              shape_of(pt->ndim, pt->shape), "low",
                              floats(L->box_low + pt->first, pt->n), "high",
                              floats(L->box_high + pt->first, pt->n));
        } else {
            PyObject *nvec = PyList_New(pt->n);
            for (uint32_t i = 0; nvec && i < pt->n; i++)
                PyList_SET_ITEM(nvec, i, PyLong_FromUnsignedLong(L->disc_n[pt->first + i]));
            d = Py_BuildValue("{s:s,s:N}", "kind", kind_name(pt->kind), "nvec", nvec);
        }
        if (!d)
            goto fail;
        PyList_SET_ITEM(parts, p, d);
    }
    return Py_BuildValue("{s:s,s:N,s:N,s:I,s:I,s:I,s:I,s:I,s:d,s:I}", "env",
                         ro__env_kind_name(&v->kind), "tensors", tensors, "parts", parts,
                         "mask_width", L->mask_width, "ndisc", L->ndisc, "nbox", L->nbox,
                         "max_episode_steps", v->max_steps, "threads", v->threads, "step_cost_ns",
                         v->step_cost_ns, "num_envs", v->n);
fail:
    Py_XDECREF(tensors);
    Py_XDECREF(parts);
    return NULL;
}

/* copy_rows returns a new [n, shape...] array of dtype holding buf. */
static PyObject *copy_rows(uint32_t n, uint32_t ndim, const uint32_t *shape, int typenum,
                           const void *buf, size_t bytes)
{
    npy_intp dims[RO_SPACE_MAX_DIMS + 1];
    dims[0] = n;
    for (uint32_t i = 0; i < ndim; i++)
        dims[i + 1] = shape[i];
    PyObject *a = PyArray_SimpleNew((int)ndim + 1, dims, typenum);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), buf, bytes);
    return a;
}

/* tensors_of returns every observation tensor of bufs as new arrays: one
 * array for one tensor, a tuple for several. */
static PyObject *tensors_of(const ro_vec_t *v, uint8_t *const *bufs)
{
    const ro_space_layout_t *L = &v->lay;
    if (L->ntensors == 1)
        return copy_rows(v->n, L->t[0].ndim, L->t[0].shape, dtype_num(L->t[0].dtype), bufs[0],
                         v->n * L->t[0].row_bytes);
    PyObject *t = PyTuple_New(L->ntensors);
    for (uint32_t k = 0; t && k < L->ntensors; k++) {
        PyObject *a = copy_rows(v->n, L->t[k].ndim, L->t[k].shape, dtype_num(L->t[k].dtype),
                                bufs[k], v->n * L->t[k].row_bytes);
        if (!a) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, a);
    }
    return t;
}

static PyObject *bools(const uint8_t *x, uint32_t n)
{
    npy_intp d = n;
    PyObject *a = PyArray_SimpleNew(1, &d, NPY_BOOL);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), x, n);
    return a;
}

/* take_discrete checks and copies the discrete actions: integers, n x
 * ndisc of them, each inside its entry's range. */
static int take_discrete(ro_vec_t *v, PyObject *obj)
{
    const ro_space_layout_t *L = &v->lay;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 0, 0, 0);
    if (!a)
        return -1;
    char kind = PyArray_DESCR(a)->kind;
    if (kind != 'i' && kind != 'u' && kind != 'b') {
        PyErr_Format(PyExc_TypeError, "actions: integers are needed for %s actions, got dtype %R",
                     L->nparts == 1 && L->part[0].kind == RO_SPACE_DISCRETE ? "Discrete"
                                                                            : "discrete",
                     (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return -1;
    }
    PyArrayObject *c = (PyArrayObject *)PyArray_FROMANY((PyObject *)a, NPY_INT64, 0, 0,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    Py_DECREF(a);
    if (!c)
        return -1;
    const npy_intp want = (npy_intp)v->n * L->ndisc;
    if (PyArray_SIZE(c) != want || PyArray_NDIM(c) < 1 || PyArray_DIM(c, 0) != (npy_intp)v->n) {
        PyErr_Format(PyExc_ValueError,
                     "actions: %u envs x %u discrete values are needed, got shape %R", v->n,
                     L->ndisc, PyObject_GetAttrString((PyObject *)c, "shape"));
        Py_DECREF(c);
        return -1;
    }
    const int64_t *x = PyArray_DATA(c);
    int32_t *out = v->act_i;
    int64_t bad = -1;
    /* One pass with no early exit; the first offender is looked up after. */
    for (npy_intp i = 0; i < want; i++) {
        const int64_t hi = L->disc_n[i % L->ndisc];
        bad = (x[i] < 0 || x[i] >= hi) && bad < 0 ? (int64_t)i : bad;
        out[i] = (int32_t)x[i];
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "actions: env %lld's value %lld is outside 0..%u",
                     (long long)(bad / L->ndisc), (long long)x[bad], L->disc_n[bad % L->ndisc] - 1);
        Py_DECREF(c);
        return -1;
    }
    Py_DECREF(c);
    return 0;
}

/* take_box copies the box actions: n x nbox floats (cast to float32). The
 * env gets them as they are: bounds are the user's (ClipAction), as in
 * Gymnasium. */
static int take_box(ro_vec_t *v, PyObject *obj)
{
    const uint32_t nbox = v->lay.nbox;
    PyArrayObject *c = (PyArrayObject *)PyArray_FROMANY(
        obj, NPY_FLOAT32, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!c)
        return -1;
    if (PyArray_SIZE(c) != (npy_intp)v->n * nbox || PyArray_NDIM(c) < 1 ||
        PyArray_DIM(c, 0) != (npy_intp)v->n) {
        PyErr_Format(PyExc_ValueError, "actions: %u envs x %u floats are needed, got shape %R",
                     v->n, nbox, PyObject_GetAttrString((PyObject *)c, "shape"));
        Py_DECREF(c);
        return -1;
    }
    memcpy(v->act_f, PyArray_DATA(c), (size_t)v->n * nbox * sizeof(float));
    Py_DECREF(c);
    return 0;
}

PyDoc_STRVAR(step_doc,
             "step(discrete, box) -> (obs, reward, terminated, truncated, ended, failed)\n\n"
             "Steps every env with its discrete values (ints [n] or [n, k], or None when the env "
             "has none) and box values (floats [n, ...], or None). obs is a new array (a tuple "
             "of arrays for several tensors); reward float64 [n]; ended and failed say whether "
             "any env ended or failed this step.");

static PyObject *engine_step(EngineObject *self, PyObject *args)
{
    PyObject *disc, *box;
    if (!PyArg_ParseTuple(args, "OO", &disc, &box))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    if (v->lay.ndisc) {
        if (disc == Py_None) {
            PyErr_SetString(PyExc_TypeError, "actions: the env takes discrete actions");
            return NULL;
        }
        if (take_discrete(v, disc) < 0)
            return NULL;
    }
    if (v->lay.nbox) {
        if (box == Py_None) {
            PyErr_SetString(PyExc_TypeError, "actions: the env takes box actions");
            return NULL;
        }
        if (take_box(v, box) < 0)
            return NULL;
    }
    char err[256];
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = ro__vec_step(v, err, sizeof err);
    Py_END_ALLOW_THREADS self->busy = 0;
    if (rc) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    npy_intp n = v->n;
    PyObject *obs = tensors_of(v, v->obs);
    PyObject *rew = PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    PyObject *term = bools(v->terminated, v->n), *trunc = bools(v->truncated, v->n);
    if (!obs || !rew || !term || !trunc) {
        Py_XDECREF(obs);
        Py_XDECREF(rew);
        Py_XDECREF(term);
        Py_XDECREF(trunc);
        return NULL;
    }
    memcpy(PyArray_DATA((PyArrayObject *)rew), v->reward, v->n * sizeof(double));
    const int ended = memchr(v->terminated, 1, v->n) || memchr(v->truncated, 1, v->n);
    const int failed = memchr(v->failed, 1, v->n) != NULL;
    return Py_BuildValue("(NNNNNN)", obs, rew, term, trunc, PyBool_FromLong(ended),
                         PyBool_FromLong(failed));
}

/* uint8_arg reads an optional bool/uint8 [n] argument into a new C array
 * (NULL for None); -1 with an exception on a wrong one. */
static int mask_arg(PyObject *o, uint32_t n, const char *name, PyArrayObject **out)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(o, NPY_BOOL, 1, 1,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (!a)
        return -1;
    if (PyArray_DIM(a, 0) != (npy_intp)n) {
        PyErr_Format(PyExc_ValueError, "%s: %u entries are needed, got %zd", name, n,
                     (Py_ssize_t)PyArray_DIM(a, 0));
        Py_DECREF(a);
        return -1;
    }
    *out = a;
    return 0;
}

PyDoc_STRVAR(reset_doc, "reset(seeds, has_seed, mask) -> obs\n\n"
                        "Starts a new episode of every env (mask: bool [n] of those to reset, or "
                        "None for all). seeds: uint64 [n] or None; has_seed: bool [n] of the envs "
                        "re-created from their seed first (None: all of seeds).");

static PyObject *engine_reset(EngineObject *self, PyObject *args)
{
    PyObject *o_seeds, *o_has, *o_mask;
    if (!PyArg_ParseTuple(args, "OOO", &o_seeds, &o_has, &o_mask))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    PyArrayObject *seeds = NULL, *has = NULL, *mask = NULL;
    PyObject *ret = NULL;
    if (o_seeds != Py_None) {
        seeds = (PyArrayObject *)PyArray_FROMANY(o_seeds, NPY_UINT64, 1, 1,
                                                 NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
        if (!seeds)
            goto out;
        if (PyArray_DIM(seeds, 0) != (npy_intp)v->n) {
            PyErr_Format(PyExc_ValueError, "seeds: %u are needed, got %zd", v->n,
                         (Py_ssize_t)PyArray_DIM(seeds, 0));
            goto out;
        }
    }
    if (mask_arg(o_has, v->n, "has_seed", &has) < 0 || mask_arg(o_mask, v->n, "mask", &mask) < 0)
        goto out;
    char err[512];
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc =
        ro__vec_reset(v, seeds ? PyArray_DATA(seeds) : NULL, has ? PyArray_DATA(has) : NULL,
                      mask ? PyArray_DATA(mask) : NULL, err, sizeof err);
    Py_END_ALLOW_THREADS self->busy = 0;
    if (rc) {
        PyErr_SetString(PyExc_ValueError, err);
        goto out;
    }
    ret = tensors_of(v, v->obs);
out:
    Py_XDECREF(seeds);
    Py_XDECREF(has);
    Py_XDECREF(mask);
    return ret;
}

static PyObject *engine_final_obs(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    return v ? tensors_of(v, v->final_obs) : NULL;
}

static PyObject *engine_failed(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    return v ? bools(v->failed, v->n) : NULL;
}

static PyObject *engine_mask(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    if (!v->mask)
        Py_RETURN_NONE;
    npy_intp d[2] = {v->n, v->lay.mask_width};
    PyObject *a = PyArray_SimpleNew(2, d, NPY_BOOL);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), v->mask, (size_t)v->n * v->lay.mask_width);
    return a;
}

static PyObject *engine_failures(EngineObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(self->v ? self->v->failures : 0);
}

static PyObject *engine_close(EngineObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close: the engine is stepping on another thread");
        return NULL;
    }
    ro__vec_free(self->v);
    self->v = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef engine_methods[] = {
    {"layout", (PyCFunction)engine_layout, METH_NOARGS, layout_doc},
    {"step", (PyCFunction)engine_step, METH_VARARGS, step_doc},
    {"reset", (PyCFunction)engine_reset, METH_VARARGS, reset_doc},
    {"final_obs", (PyCFunction)engine_final_obs, METH_NOARGS,
     "final_obs() -> the last observations of the envs that ended in the last step "
     "(SAME_STEP; other rows hold older data)"},
    {"failed", (PyCFunction)engine_failed, METH_NOARGS,
     "failed() -> bool [n]: the envs whose last step failed"},
    {"mask", (PyCFunction)engine_mask, METH_NOARGS,
     "mask() -> bool [n, width]: the action masks, or None"},
    {"close", (PyCFunction)engine_close, METH_NOARGS, "close(): destroys the envs now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef engine_getset[] = {
    {"failures", (getter)engine_failures, NULL, "failed env steps since creation", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rollout_client._engine.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(env, num_envs, seed, args, autoreset=0, threads=-1, check_finite=True)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)engine_init,
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_methods = engine_methods,
    .tp_getset = engine_getset,
};

static struct PyModuleDef engine_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_engine",
    .m_doc = "rollout's in-process vector engine (src/vecenv)",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    import_array();
    if (PyType_Ready(&EngineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&engine_module);
    if (!m)
        return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "NEXT_STEP", RO_AUTORESET_NEXT_STEP);
    PyModule_AddIntConstant(m, "SAME_STEP", RO_AUTORESET_SAME_STEP);
    PyModule_AddIntConstant(m, "DISABLED", RO_AUTORESET_DISABLED);
    return m;
}
