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
#define RO_ENGINE_MODULE
#include "engine.h"

#include <string.h>

#include "envs/env_kind.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "spaces/layout.h"
#include "vecenv/vec.h"
#include "vecenv/vec_async.h"

/* released marks the engine busy and releases the GIL for a call into the
 * engine (other Python threads run meanwhile; one that calls the engine is
 * refused: ready()). regained takes the GIL back and ends the busy mark; a
 * call that failed (rc not 0, err its message) raises ValueError: -1. */
static PyThreadState *released(EngineObject *self)
{
    self->busy = 1;
    return PyEval_SaveThread();
}

static int regained(EngineObject *self, PyThreadState *ts, int rc, const char *err)
{
    PyEval_RestoreThread(ts);
    self->busy = 0;
    if (!rc)
        return 0;
    PyErr_SetString(PyExc_ValueError, err);
    return -1;
}

static int engine_init(EngineObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"env",     "num_envs",     "seed",       "args", "autoreset",
                             "threads", "check_finite", "batch_size", NULL};
    const char *env;
    unsigned int num_envs;
    unsigned long long seed;
    PyObject *pyargs;
    int autoreset = 0, threads = -1, check_finite = 1;
    unsigned int batch_size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sIKO|iipI", kwlist, &env, &num_envs, &seed, &pyargs,
                                     &autoreset, &threads, &check_finite, &batch_size))
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
        .batch_size = batch_size,
    };
    char err[512] = "";
    /* Creating envs (a plugin's, MuJoCo's) may take a while: other Python
     * threads run meanwhile. The strings stay alive through seq. */
    PyThreadState *ts = released(self);
    int rc = ro__vec_new(&self->v, &cfg, err, sizeof err);
    rc = regained(self, ts, rc, err);
    Py_DECREF(seq);
    if (rc < 0)
        return -1;
    self->ids = PyMem_Calloc(self->v->n, sizeof *self->ids);
    return self->ids ? 0 : (PyErr_NoMemory(), -1);
}

static void engine_dealloc(EngineObject *self)
{
    ro__vec_free(self->v);
    PyMem_Free(self->ids);
    free(self->cycle);
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
            d = Py_BuildValue("{s:s,s:N}", "kind", ro__space_kind_name(pt->kind), "nvec", nvec);
        }
        if (!d)
            goto fail;
        PyList_SET_ITEM(parts, p, d);
    }
    return Py_BuildValue("{s:s,s:N,s:N,s:I,s:I,s:I,s:I,s:I,s:d,s:I,s:I}", "env",
                         ro__env_kind_name(&v->kind), "tensors", tensors, "parts", parts,
                         "mask_width", L->mask_width, "ndisc", L->ndisc, "nbox", L->nbox,
                         "max_episode_steps", v->max_steps, "threads", v->threads, "step_cost_ns",
                         v->step_cost_ns, "num_envs", v->n, "batch_size", v->batch);
fail:
    Py_XDECREF(tensors);
    Py_XDECREF(parts);
    return NULL;
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
    if (ro__eng_take_actions(v, disc, box, NULL, v->n) < 0)
        return NULL;
    char err[256];
    PyThreadState *ts = released(self);
    int rc = ro__vec_step(v, err, sizeof err);
    if (regained(self, ts, rc, err) < 0)
        return NULL;
    self->last_recv = 0;
    npy_intp n = v->n;
    PyObject *obs = ro__eng_tensors(v, v->obs, NULL, v->n);
    PyObject *rew = PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    PyObject *term = ro__eng_bools(v->terminated, NULL, v->n),
             *trunc = ro__eng_bools(v->truncated, NULL, v->n);
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
    PyThreadState *ts = released(self);
    int rc = ro__vec_reset(v, seeds ? PyArray_DATA(seeds) : NULL, has ? PyArray_DATA(has) : NULL,
                           mask ? PyArray_DATA(mask) : NULL, err, sizeof err);
    if (regained(self, ts, rc, err) < 0)
        goto out;
    self->last_recv = 0;
    ret = ro__eng_tensors(v, v->obs, NULL, v->n);
out:
    Py_XDECREF(seeds);
    Py_XDECREF(has);
    Py_XDECREF(mask);
    return ret;
}

/* The rows of the last results: every env after step(), the envs of the
 * last recv() after it. */
#define LAST_IDS(self) ((self)->last_recv ? (self)->ids : NULL)
#define LAST_K(self, v) ((self)->last_recv ? (v)->batch : (v)->n)

static PyObject *engine_final_obs(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    return v ? ro__eng_tensors(v, v->final_obs, LAST_IDS(self), LAST_K(self, v)) : NULL;
}

static PyObject *engine_failed(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    return v ? ro__eng_bools(v->failed, LAST_IDS(self), LAST_K(self, v)) : NULL;
}

static PyObject *engine_mask(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    if (!v->mask)
        Py_RETURN_NONE;
    const uint32_t k = LAST_K(self, v), w = v->lay.mask_width;
    npy_intp d[2] = {k, w};
    PyObject *a = PyArray_SimpleNew(2, d, NPY_BOOL);
    if (a)
        for (uint32_t i = 0; i < k; i++)
            memcpy((uint8_t *)PyArray_DATA((PyArrayObject *)a) + (size_t)i * w,
                   v->mask + (size_t)(self->last_recv ? self->ids[i] : i) * w, w);
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

PyDoc_STRVAR(send_doc, "send(env_ids, discrete, box)\n\n"
                       "Hands the actions of envs env_ids (ints [k], each returned by the last "
                       "recv()s and not sent since) over and returns at once: the engine's "
                       "threads step them meanwhile (vec_async.h).");

static PyObject *engine_send(EngineObject *self, PyObject *args)
{
    PyObject *o_ids, *disc, *box;
    if (!PyArg_ParseTuple(args, "OOO", &o_ids, &disc, &box))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    PyArrayObject *ids = (PyArrayObject *)PyArray_FROMANY(
        o_ids, NPY_UINT32, 1, 1, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!ids)
        return NULL;
    const npy_intp k = PyArray_DIM(ids, 0);
    if (k < 1 || k > (npy_intp)v->n) {
        PyErr_Format(PyExc_ValueError, "send: 1..%u env ids are needed, got %zd", v->n,
                     (Py_ssize_t)k);
        Py_DECREF(ids);
        return NULL;
    }
    const uint32_t *id = PyArray_DATA(ids);
    for (npy_intp i = 0; i < k; i++)
        if (id[i] >= v->n || v->where[id[i]] != RO_VEC_HANDED) {
            PyErr_Format(PyExc_ValueError,
                         "send: env %u %s: send() takes the envs recv() returned, once", id[i],
                         id[i] >= v->n                        ? "does not exist"
                         : v->where[id[i]] == RO_VEC_STEPPING ? "is stepping already"
                                                              : "was not received");
            Py_DECREF(ids);
            return NULL;
        }
    /* Only HANDED envs' rows are written: no job reads them. */
    if (ro__eng_take_actions(v, disc, box, id, (uint32_t)k) < 0) {
        Py_DECREF(ids);
        return NULL;
    }
    char err[256];
    PyThreadState *ts = released(self);
    int rc = ro__vec_send(v, id, (uint32_t)k, err, sizeof err);
    rc = regained(self, ts, rc, err);
    Py_DECREF(ids);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

PyDoc_STRVAR(recv_doc, "recv() -> (env_ids, obs, reward, terminated, truncated, ended, failed)\n\n"
                       "Waits for the next batch_size envs whose results are in and returns "
                       "them, as step() does for every env, with their ids (int32 [batch]).");

static PyObject *engine_recv(EngineObject *self, PyObject *unused)
{
    (void)unused;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    char err[256];
    PyThreadState *ts = released(self);
    int rc = ro__vec_recv(v, self->ids, err, sizeof err);
    if (regained(self, ts, rc, err) < 0)
        return NULL;
    self->last_recv = 1;
    const uint32_t k = v->batch;
    npy_intp dk = k;
    PyObject *ids = PyArray_SimpleNew(1, &dk, NPY_INT32);
    if (ids)
        for (uint32_t i = 0; i < k; i++)
            ((int32_t *)PyArray_DATA((PyArrayObject *)ids))[i] = (int32_t)self->ids[i];
    PyObject *obs = ro__eng_tensors(v, v->obs, self->ids, k);
    PyObject *rew = ro__eng_doubles(v->reward, self->ids, k);
    PyObject *term = ro__eng_bools(v->terminated, self->ids, k);
    PyObject *trunc = ro__eng_bools(v->truncated, self->ids, k);
    int ended = 0, failed = 0;
    for (uint32_t i = 0; i < k; i++) {
        ended |= v->terminated[self->ids[i]] | v->truncated[self->ids[i]];
        failed |= v->failed[self->ids[i]];
    }
    if (!ids || !obs || !rew || !term || !trunc) {
        Py_XDECREF(ids);
        Py_XDECREF(obs);
        Py_XDECREF(rew);
        Py_XDECREF(term);
        Py_XDECREF(trunc);
        return NULL;
    }
    return Py_BuildValue("(NNNNNNN)", ids, obs, rew, term, trunc, PyBool_FromLong(ended),
                         PyBool_FromLong(failed));
}

PyDoc_STRVAR(run_steps_doc,
             "run_steps(k, batches=None) -> ns\n\n"
             "Steps every env k times, in C with no Python between steps, and returns the "
             "nanoseconds it took: the envs' own stepping on the engine's threads, the reference "
             "the benchmarks hold step() to (bench/bench_gym.py). Step i's actions: batch i %% m "
             "of the last batches given (m (discrete, box) pairs as step() takes, converted once "
             "and kept), or without any those of the last step() (or zeros).");

static PyObject *engine_run_steps(EngineObject *self, PyObject *args)
{
    unsigned int k;
    PyObject *batches = Py_None;
    if (!PyArg_ParseTuple(args, "I|O", &k, &batches))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    void *cycle;
    uint32_t m;
    if (batches != Py_None) {
        if (ro__eng_take_cycle(v, batches, &cycle, &m) < 0)
            return NULL;
        free(self->cycle);
        self->cycle = cycle, self->cycle_m = m;
    }
    cycle = self->cycle, m = self->cycle_m;
    char err[256];
    int rc = 0;
    uint64_t t0 = ro__now_ns();
    PyThreadState *ts = released(self);
    for (unsigned int i = 0; i < k && !rc; i++) {
        if (cycle) /* a copy of the rows, as step() makes of its actions */
            ro__eng_put_cycle(v, cycle, i % m);
        rc = ro__vec_step(v, err, sizeof err);
    }
    uint64_t ns = ro__now_ns() - t0;
    if (regained(self, ts, rc, err) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(ns);
}

PyDoc_STRVAR(get_state_doc, "get_state(env) -> bytes: env's state as a checked blob");

static PyObject *engine_get_state(EngineObject *self, PyObject *args)
{
    unsigned int j;
    if (!PyArg_ParseTuple(args, "I", &j))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v)
        return NULL;
    char err[256];
    size_t need = 0, len = 0;
    int rc = ro__vec_state_bytes(v, j, &need, err, sizeof err);
    if (rc) {
        PyErr_SetString(rc == RO_ENOTSUP ? PyExc_NotImplementedError : PyExc_ValueError, err);
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)need);
    if (!b)
        return NULL;
    rc = ro__vec_get_state(v, j, PyBytes_AS_STRING(b), need, &len, err, sizeof err);
    if (rc) {
        Py_DECREF(b);
        PyErr_SetString(rc == RO_ENOTSUP ? PyExc_NotImplementedError : PyExc_ValueError, err);
        return NULL;
    }
    if (len != need && _PyBytes_Resize(&b, (Py_ssize_t)len) < 0)
        return NULL;
    return b;
}

PyDoc_STRVAR(set_state_doc, "set_state(env, blob): restores env from a get_state() blob");

static PyObject *engine_set_state(EngineObject *self, PyObject *args)
{
    unsigned int j;
    Py_buffer blob;
    if (!PyArg_ParseTuple(args, "Iy*", &j, &blob))
        return NULL;
    ro_vec_t *v = ready(self);
    if (!v) {
        PyBuffer_Release(&blob);
        return NULL;
    }
    char err[256];
    int rc = ro__vec_set_state(v, j, blob.buf, (size_t)blob.len, err, sizeof err);
    PyBuffer_Release(&blob);
    if (rc) {
        PyErr_SetString(rc == RO_ENOTSUP ? PyExc_NotImplementedError : PyExc_ValueError, err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef engine_methods[] = {
    {"get_state", (PyCFunction)engine_get_state, METH_VARARGS, get_state_doc},
    {"set_state", (PyCFunction)engine_set_state, METH_VARARGS, set_state_doc},
    {"run_steps", (PyCFunction)engine_run_steps, METH_VARARGS, run_steps_doc},
    {"send", (PyCFunction)engine_send, METH_VARARGS, send_doc},
    {"recv", (PyCFunction)engine_recv, METH_NOARGS, recv_doc},
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
