/* worker.c: the per-command work of a Python env worker process
 * (rollout_client/env_worker.py): its wait for the node's next command and
 * its answer (the Waiter type), and the stepping of its shard's envs
 * (step_shard). The shared memory's layout is src/envs/pyenv_proto.h.
 *
 * Why C: in Python the worker spent 5.5 us a command beside 4 CartPole
 * envs' 17 us of steps (numpy per-row stores, lists, a syscall each way),
 * a third of what a 2-process vector env of small envs can spend; and only
 * C can make the seq_cst stores and loads that let both sides skip the
 * eventfd syscalls while the other spins. */
#include "hotpath.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "envs/pyenv_proto.h"
#include "runtime/clock.h"
#include "runtime/spin_budget.h"

/* How long a wait for the next command spins at most (spin_budget.h's
 * RO_SPIN_WHOLE: the cap while the recent gaps between our answer and the
 * node's next command are under it). A sleeping worker's wake costs
 * 20-100 us on a VM, and the gap is the slowest other worker's lag plus
 * the caller's turn: with Atari's 270 us steps that lag passes 200 us
 * (Pong, 8 and 64 envs on 2 processes: 2-8 % more steps with 1 ms than
 * with 200 us in 6 paired runs; CartPole the same). The spin yields
 * between reads: a process that wants our CPU gets it. */
#define WORKER_SPIN_CAP_NS 1000000u

typedef struct {
    PyObject_HEAD Py_buffer mem; /* the header's mapping (PY_HEADER bytes) */
    int wake_fd, done_fd;
    ro_spin_budget_t spin;
} WaiterObject;

static _Atomic uint32_t *word(WaiterObject *w, size_t off)
{
    return (_Atomic uint32_t *)(void *)((uint8_t *)w->mem.buf + off);
}

static int waiter_init(WaiterObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"header", "wake_fd", "done_fd", NULL};
    if (self->mem.obj) {
        PyErr_SetString(PyExc_RuntimeError, "Waiter: already made");
        return -1;
    }
    Py_buffer mem;
    int wake, done;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "w*ii", names, &mem, &wake, &done))
        return -1;
    if (mem.len < PY_HEADER || ((uintptr_t)mem.buf & 3)) {
        PyErr_Format(PyExc_ValueError, "Waiter: a %d-byte aligned header is needed, got %zd bytes",
                     PY_HEADER, mem.len);
        PyBuffer_Release(&mem);
        return -1;
    }
    self->mem = mem;
    self->wake_fd = wake;
    self->done_fd = done;
    const uint32_t magic = atomic_load_explicit(word(self, PY_H_MAGIC), memory_order_relaxed);
    const uint32_t version = atomic_load_explicit(word(self, PY_H_VERSION), memory_order_relaxed);
    if (magic != PY_MAGIC || version != PY_PROTO_VERSION) {
        PyErr_Format(PyExc_ValueError,
                     "Waiter: the node's memory has magic %#x version %u; this worker speaks "
                     "%#x version %u (a node and package from different builds?)",
                     magic, version, PY_MAGIC, PY_PROTO_VERSION);
        PyBuffer_Release(&self->mem); /* mem.obj NULL again: not made */
        return -1;
    }
    ro__spin_budget_init(&self->spin, WORKER_SPIN_CAP_NS, RO_SPIN_WHOLE);
    return 0;
}

/* made says whether the waiter was made (its methods refuse otherwise). */
static bool made(WaiterObject *self)
{
    if (self->mem.obj)
        return true;
    PyErr_SetString(PyExc_RuntimeError, "Waiter: not made (its __init__ failed or never ran)");
    return false;
}

static void waiter_dealloc(WaiterObject *self)
{
    if (self->mem.obj)
        PyBuffer_Release(&self->mem);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Waiter.answer(seq, status): the command seq is done. */
static PyObject *waiter_answer(WaiterObject *self, PyObject *args)
{
    unsigned int seq, status;
    if (!made(self) || !PyArg_ParseTuple(args, "II", &seq, &status))
        return NULL;
    atomic_store_explicit(word(self, PY_H_STATUS), status, memory_order_relaxed);
    /* Seq_cst (a release of the rows and status above), as the node's
     * store of its sleeping word and load of this one
     * (src/envs/pyenv_proc.c): one of us sees the other's store, so the
     * node either finds this answer while spinning or is woken. */
    atomic_store_explicit(word(self, PY_H_ACK), seq, memory_order_seq_cst);
    if (atomic_load_explicit(word(self, PY_H_NODE_SLEEPS), memory_order_seq_cst)) {
        uint64_t one = 1;
        if (write(self->done_fd, &one, sizeof one) != sizeof one)
            return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* sleep_for sleeps on the wake eventfd until the node posts a command
 * after seq. 0, or -1 with an exception (a signal handler's, or the
 * eventfd's error). Called with the GIL released: takes it back for a
 * signal. */
static int sleep_for(WaiterObject *self, uint32_t seq, PyThreadState **ts)
{
    _Atomic uint32_t *cmd = word(self, PY_H_SEQ), *sleeps = word(self, PY_H_WORKER_SLEEPS);
    int rc = 0;
    atomic_store_explicit(sleeps, 1, memory_order_seq_cst);
    while (atomic_load_explicit(cmd, memory_order_seq_cst) == seq) {
        uint64_t v;
        if (read(self->wake_fd, &v, sizeof v) == sizeof v)
            continue;
        int e = errno;
        PyEval_RestoreThread(*ts);
        if (e == EINTR)
            rc = PyErr_CheckSignals();
        else {
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
            rc = -1;
        }
        *ts = PyEval_SaveThread();
        if (rc)
            break;
    }
    /* Relaxed: our answer's seq_cst store orders it before the node can
     * post again. */
    atomic_store_explicit(sleeps, 0, memory_order_relaxed);
    return rc;
}

/* Waiter.wait(seq): returns once the node posts the command after seq,
 * spinning on its sequence word first as the spin rule allows, then
 * asleep. The GIL is released meanwhile. */
static PyObject *waiter_wait(WaiterObject *self, PyObject *args)
{
    unsigned int seq;
    if (!made(self) || !PyArg_ParseTuple(args, "I", &seq))
        return NULL;
    const uint64_t t0 = ro__now_ns(), budget = ro__spin_budget_next(&self->spin);
    PyThreadState *ts = PyEval_SaveThread();
    const bool hit = budget && ro__spin_while_u32(word(self, PY_H_SEQ), seq, t0 + budget);
    int rc = hit ? 0 : sleep_for(self, seq, &ts);
    PyEval_RestoreThread(ts);
    if (rc)
        return NULL;
    ro__spin_budget_record(&self->spin, budget, ro__now_ns() - t0, hit);
    Py_RETURN_NONE;
}

/* Waiter.stats(): (hits, misses, blocked) of its spin rule. */
static PyObject *waiter_stats(WaiterObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("KKK", (unsigned long long)self->spin.hits,
                         (unsigned long long)self->spin.misses,
                         (unsigned long long)self->spin.blocked);
}

static PyMethodDef waiter_methods[] = {
    {"wait", (PyCFunction)waiter_wait, METH_VARARGS,
     "wait(seq): returns once the node posts the command after seq"},
    {"answer", (PyCFunction)waiter_answer, METH_VARARGS,
     "answer(seq, status): command seq is done with status (its rows written)"},
    {"stats", (PyCFunction)waiter_stats, METH_NOARGS,
     "stats() -> (hits, misses, blocked): how the waits ended"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ro__hp_waiter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rollout_client._hotpath.Waiter",
    .tp_basicsize = sizeof(WaiterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Waiter(header, wake_fd, done_fd): an env worker's side of its node's commands "
              "(src/envs/pyenv_proto.h): wait() for the next, answer() one",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)waiter_init,
    .tp_dealloc = (destructor)waiter_dealloc,
    .tp_methods = waiter_methods,
};

/* --- step_shard --- */

/* A strided column of per-env rows: row i at base + i * stride. */
typedef struct {
    uint8_t *base;
    npy_intp stride, rows;
} column_t;

static int column(PyObject *o, int typenum, npy_intp width, const char *name, column_t *out)
{
    if (!PyArray_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: a numpy array is needed", name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)o;
    const int nd = PyArray_NDIM(a);
    if (PyArray_TYPE(a) != typenum || !PyArray_ISWRITEABLE(a) || nd != (width ? 2 : 1) ||
        (width && (PyArray_DIM(a, 1) < width || PyArray_STRIDE(a, 1) != 1))) {
        PyErr_Format(PyExc_TypeError, "%s: a writable %d-d array of the row layout is needed", name,
                     width ? 2 : 1);
        return -1;
    }
    *out = (column_t){(uint8_t *)PyArray_BYTES(a), PyArray_STRIDE(a, 0), PyArray_DIM(a, 0)};
    return 0;
}

/* put_row writes observation o into row i of rows: a memcpy when rows is
 * an array whose row is contiguous and o an array of its dtype and row
 * shape (the usual case), else rows[i] = o (numpy's conversions, or a
 * composite observation's Rows). 0, or -1 with an exception. */
static int put_row(PyObject *rows, npy_intp i, PyObject *o)
{
    if (PyArray_Check(rows) && PyArray_Check(o)) {
        PyArrayObject *r = (PyArrayObject *)rows, *a = (PyArrayObject *)o;
        const int nd = PyArray_NDIM(r);
        bool fits = nd >= 1 && PyArray_NDIM(a) == nd - 1 && PyArray_IS_C_CONTIGUOUS(a) &&
                    PyArray_EquivTypes(PyArray_DESCR(a), PyArray_DESCR(r)) && i >= 0 &&
                    i < PyArray_DIM(r, 0) && PyArray_ISWRITEABLE(r);
        npy_intp inner = PyArray_ITEMSIZE(r);
        for (int d = nd - 1; fits && d >= 1; d--) {
            fits = PyArray_DIM(a, d - 1) == PyArray_DIM(r, d) && PyArray_STRIDE(r, d) == inner;
            inner *= PyArray_DIM(r, d);
        }
        if (fits) {
            memcpy(PyArray_BYTES(r) + i * PyArray_STRIDE(r, 0), PyArray_DATA(a), (size_t)inner);
            return 0;
        }
    }
    PyObject *key = PyLong_FromSsize_t(i);
    int rc = key ? PyObject_SetItem(rows, key, o) : -1;
    Py_XDECREF(key);
    return rc;
}

/* step_one steps env i with action a: its observation into obs row i (or,
 * when the episode ended, the reset's into reset_obs row i too), its
 * reward and ended flags into *reward, *term, *trunc. 0, or -1 with the
 * env's exception set. */
static int step_one(PyObject *env, PyObject *a, npy_intp i, PyObject *obs, PyObject *reset_obs,
                    double *reward, int *term, int *trunc)
{
    static PyObject *step_name, *reset_name;
    if (!step_name && !(step_name = PyUnicode_InternFromString("step")))
        return -1;
    if (!reset_name && !(reset_name = PyUnicode_InternFromString("reset")))
        return -1;
    PyObject *out = PyObject_CallMethodOneArg(env, step_name, a);
    if (!out)
        return -1;
    int rc = -1;
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 5) {
        PyErr_Format(PyExc_TypeError,
                     "env.step returned %R, not a 5-tuple (obs, reward, terminated, truncated, "
                     "info)",
                     (PyObject *)Py_TYPE(out));
        goto done;
    }
    *reward = PyFloat_AsDouble(PyTuple_GET_ITEM(out, 1));
    if (*reward == -1.0 && PyErr_Occurred())
        goto done;
    if ((*term = PyObject_IsTrue(PyTuple_GET_ITEM(out, 2))) < 0 ||
        (*trunc = PyObject_IsTrue(PyTuple_GET_ITEM(out, 3))) < 0 ||
        put_row(obs, i, PyTuple_GET_ITEM(out, 0)) < 0)
        goto done;
    if (*term || *trunc) {
        PyObject *first = PyObject_CallMethodNoArgs(env, reset_name);
        PyObject *o = first ? PySequence_GetItem(first, 0) : NULL;
        Py_XDECREF(first);
        if (!o || put_row(reset_obs, i, o) < 0) {
            Py_XDECREF(o);
            goto done;
        }
        Py_DECREF(o);
    }
    rc = 0;
done:
    Py_DECREF(out);
    return rc;
}

/* The exception being raised, normalized, with its traceback, or NULL. */
static PyObject *take_exception(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

/* step_row steps env i of envs with action a, writes its row's reward
 * and flags (its GO flag cleared), and hands an env that raised an
 * Exception to recreate. 0, or -1 with an exception that ends the
 * command (recreate's own, or a KeyboardInterrupt/SystemExit: those end
 * this process, as they would in Python). */
static int step_row(PyObject *envs, npy_intp i, PyObject *a, PyObject *obs, PyObject *reset_obs,
                    const column_t *reward, const column_t *flags, PyObject *recreate)
{
    double r = 0.0;
    int te = 0, tr = 0;
    PyObject *env = PyList_GET_ITEM(envs, i); /* recreate may replace it: read each time */
    Py_INCREF(env);
    int rc = step_one(env, a, i, obs, reset_obs, &r, &te, &tr);
    Py_DECREF(env);
    if (rc < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyObject *exc = take_exception();
        PyObject *res = PyObject_CallFunction(recreate, "nO", (Py_ssize_t)i, exc ? exc : Py_None);
        Py_XDECREF(exc);
        if (!res)
            return -1;
        Py_DECREF(res);
        r = 0.0, te = tr = 0; /* the node reads the failed flag only */
    }
    uint8_t *f = flags->base + i * flags->stride;
    float rf = (float)r;
    memcpy(reward->base + i * reward->stride, &rf, sizeof rf);
    f[PY_F_TERM] = (uint8_t)te;
    f[PY_F_TRUNC] = (uint8_t)tr;
    if (rc == 0 && (te || tr))
        f[PY_F_RESET_READY] = 1;
    f[PY_F_GO] = 0;
    return 0;
}

/* The reward and flags columns of a step_shard or step_discrete call. */
static int columns(PyObject *reward_o, PyObject *flags_o, column_t *reward, column_t *flags)
{
    return column(reward_o, NPY_FLOAT32, 0, "reward", reward) < 0 ||
                   column(flags_o, NPY_UINT8, PY_FLAGS, "flags", flags) < 0
               ? -1
               : 0;
}

PyDoc_STRVAR_EXTERN(
    step_shard_doc,
    "step_shard(envs, order, actions, obs, reset_obs, reward, flags, recreate)\n\n"
    "Steps envs[i] with actions[k] for the k-th i of order: its observation into obs[i] (an\n"
    "episode that ends is reset at once: its first observation into reset_obs[i], flag\n"
    "RESET_READY), its reward into reward[i], terminated and truncated into flags[i]; the\n"
    "row's GO flag cleared. An env that raises an Exception (or returns what is not a step) is\n"
    "handed to recreate(i, exception), which makes it again; its row reads reward 0, not\n"
    "ended. Any other exception (KeyboardInterrupt) is raised.");

PyObject *ro__hp_step_shard(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *envs, *order, *acts, *obs, *reset_obs, *reward_o, *flags_o, *recreate;
    if (!PyArg_ParseTuple(args, "O!O!OOOOOO", &PyList_Type, &envs, &PyList_Type, &order, &acts,
                          &obs, &reset_obs, &reward_o, &flags_o, &recreate))
        return NULL;
    column_t reward, flags;
    if (columns(reward_o, flags_o, &reward, &flags) < 0)
        return NULL;
    const Py_ssize_t k = PyList_GET_SIZE(order);
    if (PySequence_Size(acts) < k) {
        PyErr_Format(PyExc_ValueError, "actions: %zd are needed", k);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        const Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(order, j));
        if (i == -1 && PyErr_Occurred())
            return NULL;
        if (i < 0 || i >= PyList_GET_SIZE(envs) || i >= reward.rows || i >= flags.rows) {
            PyErr_Format(PyExc_ValueError, "order: env %zd outside the shard", i);
            return NULL;
        }
        PyObject *a = PySequence_GetItem(acts, j);
        if (!a)
            return NULL;
        int rc = step_row(envs, i, a, obs, reset_obs, &reward, &flags, recreate);
        Py_DECREF(a);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR_EXTERN(
    step_discrete_doc,
    "step_discrete(envs, act_i, start, obs, reset_obs, reward, flags, recreate)\n\n"
    "step_shard for an env of one Discrete action part, the rows chosen and the actions made\n"
    "here: each row whose GO flag is set, stepped with numpy.int64(act_i[i, 0] + start) (as\n"
    "Gymnasium's vector envs pass them), in row order.");

/* The GO rows of a step_discrete or step_box call (env i with row i of
 * each column, the rows all have), each stepped with the action
 * make(ctx, i) returns: a new reference, or NULL with an exception. */
typedef PyObject *(*make_action_t)(const void *ctx, npy_intp i);

static PyObject *step_go_rows(PyObject *envs, npy_intp rows, make_action_t make, const void *ctx,
                              PyObject *obs, PyObject *reset_obs, const column_t *reward,
                              const column_t *flags, PyObject *recreate)
{
    npy_intp n = PyList_GET_SIZE(envs);
    n = n < reward->rows ? n : reward->rows;
    n = n < flags->rows ? n : flags->rows;
    n = n < rows ? n : rows;
    for (npy_intp i = 0; i < n; i++) {
        if (!flags->base[i * flags->stride + PY_F_GO])
            continue;
        PyObject *a = make(ctx, i);
        if (!a || step_row(envs, i, a, obs, reset_obs, reward, flags, recreate) < 0) {
            Py_XDECREF(a);
            return NULL;
        }
        Py_DECREF(a);
    }
    Py_RETURN_NONE;
}

/* A step_discrete call's actions: numpy.int64(act_i[i, 0] + start). */
typedef struct {
    PyArrayObject *act;
    long long start;
    PyArray_Descr *int64;
} discrete_t;

static PyObject *discrete_action(const void *ctx, npy_intp i)
{
    const discrete_t *d = ctx;
    int32_t v;
    memcpy(&v, (const uint8_t *)PyArray_BYTES(d->act) + i * PyArray_STRIDE(d->act, 0), sizeof v);
    const int64_t value = (int64_t)v + d->start;
    return PyArray_Scalar((void *)&value, d->int64, NULL);
}

PyObject *ro__hp_step_discrete(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *envs, *act_o, *obs, *reset_obs, *reward_o, *flags_o, *recreate;
    discrete_t d;
    if (!PyArg_ParseTuple(args, "O!OLOOOOO", &PyList_Type, &envs, &act_o, &d.start, &obs,
                          &reset_obs, &reward_o, &flags_o, &recreate))
        return NULL;
    column_t reward, flags;
    if (columns(reward_o, flags_o, &reward, &flags) < 0)
        return NULL;
    if (!PyArray_Check(act_o) || PyArray_TYPE((PyArrayObject *)act_o) != NPY_INT32 ||
        PyArray_NDIM((PyArrayObject *)act_o) != 2 || PyArray_DIM((PyArrayObject *)act_o, 1) < 1) {
        PyErr_SetString(PyExc_TypeError, "act_i: a 2-d int32 array of the row layout is needed");
        return NULL;
    }
    d.act = (PyArrayObject *)act_o;
    if (!(d.int64 = PyArray_DescrFromType(NPY_INT64))) /* a new reference */
        return NULL;
    PyObject *r = step_go_rows(envs, PyArray_DIM(d.act, 0), discrete_action, &d, obs, reset_obs,
                               &reward, &flags, recreate);
    Py_DECREF(d.int64);
    return r;
}

PyDoc_STRVAR_EXTERN(
    step_box_doc,
    "step_box(envs, act_f, proto, obs, reset_obs, reward, flags, recreate)\n\n"
    "step_shard for an env of one Box action part of a float dtype, the rows chosen and the\n"
    "actions made here: each row whose GO flag is set, stepped with a new array like proto (its\n"
    "shape and dtype, float32 or float64) holding act_f[i, :proto.size], in row order.");

/* A step_box call's actions: a new array like proto holding the float32
 * values of row i of act. */
typedef struct {
    PyArrayObject *act, *proto;
} box_t;

static PyObject *box_action(const void *ctx, npy_intp i)
{
    const box_t *b = ctx;
    const uint8_t *f = (const uint8_t *)PyArray_BYTES(b->act) + i * PyArray_STRIDE(b->act, 0);
    PyArrayObject *a = (PyArrayObject *)PyArray_NewLikeArray(b->proto, NPY_CORDER, NULL, 0);
    if (!a)
        return NULL;
    const npy_intp size = PyArray_SIZE(b->proto);
    if (PyArray_TYPE(b->proto) == NPY_FLOAT32) {
        memcpy(PyArray_DATA(a), f, (size_t)size * sizeof(float));
    } else {
        double *d = PyArray_DATA(a);
        for (npy_intp k = 0; k < size; k++) {
            float v;
            memcpy(&v, f + k * (npy_intp)sizeof v, sizeof v);
            d[k] = v;
        }
    }
    return (PyObject *)a;
}

PyObject *ro__hp_step_box(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *envs, *act_o, *proto_o, *obs, *reset_obs, *reward_o, *flags_o, *recreate;
    if (!PyArg_ParseTuple(args, "O!OOOOOOO", &PyList_Type, &envs, &act_o, &proto_o, &obs,
                          &reset_obs, &reward_o, &flags_o, &recreate))
        return NULL;
    column_t reward, flags;
    if (columns(reward_o, flags_o, &reward, &flags) < 0)
        return NULL;
    if (!PyArray_Check(proto_o) || (PyArray_TYPE((PyArrayObject *)proto_o) != NPY_FLOAT32 &&
                                    PyArray_TYPE((PyArrayObject *)proto_o) != NPY_FLOAT64)) {
        PyErr_SetString(PyExc_TypeError, "proto: a float32 or float64 array is needed");
        return NULL;
    }
    const box_t b = {(PyArrayObject *)act_o, (PyArrayObject *)proto_o};
    if (!PyArray_Check(act_o) || PyArray_TYPE(b.act) != NPY_FLOAT32 || PyArray_NDIM(b.act) != 2 ||
        PyArray_DIM(b.act, 1) < PyArray_SIZE(b.proto) ||
        PyArray_STRIDE(b.act, 1) != sizeof(float)) {
        PyErr_SetString(PyExc_TypeError,
                        "act_f: a 2-d float32 array of the row layout, proto.size wide, is needed");
        return NULL;
    }
    return step_go_rows(envs, PyArray_DIM(b.act, 0), box_action, &b, obs, reset_obs, &reward,
                        &flags, recreate);
}
