/* lane.c: VecEnv's asynchronous recv() and send() over one node's shared
 * memory, each one C call (rollout_client._hotpath.Lane; vecenv_lane.py).
 *
 * Why: with a torch policy of about 1 ms per batch of 1024 envs, the
 * Python of recv() and send() (frame reads, checks, state changes, gathers;
 * some twenty calls) cost 160-240 us per batch on a 2-CPU VM, most of it
 * cold after the policy: the policy kept only 0.72-0.78 of its own speed.
 * Here a batch costs one call each way.
 *
 * A lane serves the common case only: one node, env ABI 1, observations
 * in float32 in the node's SEED memory (a Unix-domain socket). Its frames
 * carry only ranges of env rows (docs/protocol.md); a frame's rows stay as
 * the node wrote them until its answer is sent (the node steps an env only
 * after its action), so recv() copies them straight out of the memory into
 * the arrays it returns. Any other frame (an error, a goodbye, anything
 * unexpected) is handed back to Python whole, which treats it as the
 * client always did.
 *
 * Every frame is untrusted: its ranges are checked against the node's env
 * count and every env's state before anything changes. Buffers are
 * bounded: input grows only for a frame larger than it, to at most the
 * node's max_frame, and shrinks back once read; output holds at most one
 * answer per registered frame, and there are at most num_envs of those.
 *
 * The GIL is held throughout except while it waits in poll(). One thread
 * at a time (VecEnv is not thread-safe, as Gymnasium's are not).
 *
 * This file: the type and its methods; lane.h lists the others.
 */
#include "lane.h"

#include <errno.h>
#include <string.h>

static void lane_release(Lane *L)
{
    if (L->frames) {
        for (npy_intp i = 0; i < L->n; i++)
            PyMem_RawFree(L->frames[i].ranges);
    }
    PyMem_RawFree(L->frames);
    PyMem_RawFree(L->free_slots);
    PyMem_RawFree(L->ready);
    PyMem_RawFree(L->in);
    PyMem_RawFree(L->out);
    L->frames = NULL;
    L->free_slots = NULL;
    L->ready = NULL;
    L->in = L->out = NULL;
    L->in_cap = L->in_start = L->in_end = L->out_len = L->out_cap = 0;
    L->fd = -1;
}

static void lane_dealloc(Lane *L)
{
    lane_release(L);
    Py_CLEAR(L->refs);
    Py_CLEAR(L->spin);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

/* The data of a column argument, checked for dtype, shape and size. */
static void *column(PyObject *o, int typenum, npy_intp rows, npy_intp width, int writable,
                    const char *name)
{
    PyArrayObject *a = ro__hp_array(o, typenum, 0, writable, name);
    if (!a)
        return NULL;
    npy_intp want = rows * (width ? width : 1);
    if (PyArray_SIZE(a) != want || ro__hp_rows(a) != rows) {
        PyErr_Format(PyExc_ValueError, "%s: %zd values in %zd rows needed, got %zd", name,
                     (Py_ssize_t)want, (Py_ssize_t)rows, (Py_ssize_t)PyArray_SIZE(a));
        return NULL;
    }
    return PyArray_DATA(a);
}

static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {
        "fd",      "obs_shape", "m_obs",     "m_final", "m_reward", "m_flags",   "m_step",
        "m_act",   "discrete",  "action_n",  "state",   "frame_of", "ep_return", "ep_length",
        "nflight", "last_seq",  "max_frame", "spin",    "keep",     "hold",      NULL};
    int fd, discrete;
    PyObject *shape, *mo, *mf, *mr, *mfl, *ms, *ma, *st, *fo, *er, *el, *spin, *keep;
    PyObject *hold = Py_None;
    long long action_n;
    Py_ssize_t nflight, max_frame;
    unsigned long long last_seq;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO!OOOOOOpLOOOOnKnOO|O", names, &fd, &PyTuple_Type,
                                     &shape, &mo, &mf, &mr, &mfl, &ms, &ma, &discrete, &action_n,
                                     &st, &fo, &er, &el, &nflight, &last_seq, &max_frame, &spin,
                                     &keep, &hold))
        return NULL;
    PyArrayObject *sa = ro__hp_array(st, NPY_INT8, 1, 1, "state");
    if (!sa)
        return NULL;
    npy_intp n = PyArray_DIM(sa, 0);
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    npy_intp d = 1;
    if (nd < 1 || nd >= NPY_MAXDIMS || n < 1 || fd < 0 || nflight < 0 || nflight > n ||
        max_frame < 64) {
        PyErr_SetString(PyExc_ValueError, "Lane: bad fd, obs_shape, envs, nflight or max_frame");
        return NULL;
    }
    Lane *L = (Lane *)type->tp_alloc(type, 0);
    if (!L)
        return NULL;
    L->fd = -1;
    L->n = n;
    L->obs_nd = (int)nd + 1;
    for (Py_ssize_t i = 0; i < nd; i++) {
        npy_intp v = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (v < 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Lane: obs_shape of positive ints");
            goto fail;
        }
        L->obs_dims[i + 1] = v;
        d *= v;
    }
    L->d = d;
    L->discrete = discrete;
    L->action_n = action_n;
    if (!(L->m_obs = column(mo, NPY_FLOAT32, n, d, 0, "m_obs")) ||
        !(L->m_final = column(mf, NPY_FLOAT32, n, d, 0, "m_final")) ||
        !(L->m_reward = column(mr, NPY_FLOAT32, n, 0, 0, "m_reward")) ||
        !(L->m_flags = column(mfl, NPY_UINT8, n, 0, 0, "m_flags")) ||
        !(L->m_step = column(ms, NPY_UINT64, n, 0, 0, "m_step")) ||
        !(L->frame_of = column(fo, NPY_INT64, n, 0, 1, "frame_of")) ||
        !(L->ep_ret = column(er, NPY_FLOAT64, n, 0, 1, "ep_return")) ||
        !(L->ep_len = column(el, NPY_INT64, n, 0, 1, "ep_length")) ||
        (hold != Py_None && !(L->hold = column(hold, NPY_BOOL, n, 0, 1, "hold"))))
        goto fail;
    PyArrayObject *act = ro__hp_array(ma, discrete ? NPY_INT32 : NPY_FLOAT32, 0, 1, "m_act");
    if (!act)
        goto fail;
    L->act_width = discrete ? 1 : PyArray_SIZE(act) / n;
    if (L->act_width < 1 || PyArray_SIZE(act) != n * L->act_width || ro__hp_rows(act) != n) {
        PyErr_SetString(PyExc_ValueError, "m_act: one row per env needed");
        goto fail;
    }
    L->m_act = PyArray_DATA(act);
    L->state = PyArray_DATA(sa);
    L->frames = PyMem_RawCalloc((size_t)n, sizeof *L->frames);
    L->free_slots = PyMem_RawMalloc((size_t)n * sizeof *L->free_slots);
    L->ready = PyMem_RawMalloc((size_t)n * sizeof *L->ready);
    L->in_cap = IN_BASE;
    L->in = PyMem_RawMalloc(L->in_cap);
    /* A node that keeps to the protocol has at most n frames registered
     * and answers unsent in all (each holds envs of its own): see send(). */
    L->out_cap = 2 * (size_t)n * (ANSWER_MAX + HOLD_HEAD + HOLD_MAX);
    L->out = PyMem_RawMalloc(L->out_cap);
    if (!L->frames || !L->free_slots || !L->ready || !L->in || !L->out) {
        PyErr_NoMemory();
        goto fail;
    }
    for (npy_intp i = 0; i < n; i++)
        L->free_slots[i] = n - 1 - i;
    L->nfree = n;
    L->nflight = nflight;
    L->last_seq = last_seq;
    L->max_frame = (size_t)max_frame;
    L->refs = Py_NewRef(keep);
    L->spin = Py_NewRef(spin);
    L->fd = fd;
    return (PyObject *)L;
fail:
    Py_DECREF(L);
    return NULL;
}

static PyObject *event(const char *what, PyObject *detail)
{
    if (!detail)
        return NULL;
    return Py_BuildValue("(sN)", what, detail);
}

static PyObject *lane_recv(Lane *L, PyObject *args)
{
    Py_ssize_t want;
    double timeout;
    int ordered = 0;
    if (!PyArg_ParseTuple(args, "nd|p", &want, &timeout, &ordered))
        return NULL;
    if (L->fd < 0) /* detached: the connection closed */
        return event("closed", PyUnicode_FromString("the connection is closed"));
    if (want < 1 || want > L->n || (ordered && want != L->n)) {
        PyErr_Format(PyExc_ValueError, "recv(): want %zd outside [1, %zd] (ordered: all of them)",
                     want, (Py_ssize_t)L->n);
        return NULL;
    }
    double deadline = timeout < 0 ? -1.0 : ro__hp_lane_now() + timeout;
    char msg[256];
    while (L->nready < want) {
        const uint8_t *body;
        size_t len;
        int r = ro__hp_lane_next(L, &body, &len, msg, sizeof msg);
        if (r < 0)
            return event("bad", PyUnicode_FromString(msg));
        if (r > 0) {
            int t = ro__hp_lane_take_frame(L, body, len, msg, sizeof msg);
            if (t == BAD)
                return event("bad", PyUnicode_FromString(msg));
            if (t == NOMEM)
                return PyErr_NoMemory();
            if (t == NOT_MINE)
                return event("frame",
                             PyBytes_FromStringAndSize((const char *)body, (Py_ssize_t)len));
            continue;
        }
        if (L->nready + L->nflight < want)
            return event("short", PyLong_FromSsize_t((Py_ssize_t)(L->nready + L->nflight)));
        if (ro__hp_lane_room(L) < 0)
            return PyErr_NoMemory();
        ssize_t got = ro__hp_lane_read(L);
        if (got == 0)
            return event("closed", PyUnicode_FromString("closed the connection without goodbye"));
        if (got == -2)
            return event("closed", PyUnicode_FromFormat("connection lost: %s", strerror(errno)));
        if (got > 0)
            continue;
        int w = ro__hp_lane_wait(L, deadline);
        if (w < 0)
            return NULL;
        if (L->fd < 0) /* detached by another thread while the GIL was free */
            return event("closed", PyUnicode_FromString("the connection is closed"));
        if (w == 0)
            Py_RETURN_NONE;
    }
    return ro__hp_lane_gather(L, want, ordered);
}

/* -- send ------------------------------------------------------------------- */

/* Sends what the output holds: None, or ("closed", why). */
static PyObject *lane_sent(Lane *L)
{
    int err = ro__hp_lane_flush(L);
    if (err)
        return event("closed", PyUnicode_FromFormat("send failed: %s", strerror(err)));
    Py_RETURN_NONE;
}

/* send() of envs lo..lo+k, every one HANDED (checked), with their
 * actions (checked): the same as the general case, in runs. */
static PyObject *lane_send_range(Lane *L, npy_intp lo, npy_intp k, const void *act, int act_type)
{
    memset(L->state + lo, HELD, (size_t)k);
    if (!L->discrete)
        memcpy((float *)L->m_act + lo * L->act_width, act,
               (size_t)(k * L->act_width) * sizeof(float));
    else if (act_type == NPY_INT64)
        for (npy_intp i = 0; i < k; i++)
            ((int32_t *)L->m_act)[lo + i] = (int32_t)((const int64_t *)act)[i];
    else
        memcpy((int32_t *)L->m_act + lo, act, (size_t)k * sizeof(int32_t));
    /* Envs of one frame are usually neighbours: one decrement per run. */
    for (npy_intp i = 0; i < k;) {
        int64_t slot = L->frame_of[lo + i];
        npy_intp j = i + 1;
        while (j < k && L->frame_of[lo + j] == slot)
            j++;
        if ((L->frames[slot].left -= j - i) == 0)
            ro__hp_lane_answer(L, slot);
        i = j;
    }
    return lane_sent(L);
}

/* send(env_ids, actions, checked=False) -> None | (index, why) | ("ids",)
 *     | ("actions",) | ("closed", message) | ("bad", message)
 * Takes env_ids (int64 [k], C-contiguous) and their actions: discrete
 * int64 or int32 [k] in [0, n); box float32 [k, width] once the caller's
 * check_actions checked and clipped them (checked). (index, why):
 * env_ids[index] is refused ("range", "twice" or its state); ("ids",) or
 * ("actions",): an array not of a form taken here, or a discrete action out
 * of range (the caller's checks then say which, or convert it); nothing
 * was taken in any of these. ("closed", ...): the send failed; ("bad",
 * ...): the node broke the protocol. */
static PyObject *lane_send(Lane *L, PyObject *args)
{
    PyObject *o_ids, *o_act;
    int checked = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &o_ids, &o_act, &checked))
        return NULL;
    if (L->fd < 0) /* detached: the connection closed */
        return event("closed", PyUnicode_FromString("the connection is closed"));
    PyArrayObject *ids_a = (PyArrayObject *)o_ids;
    if (!PyArray_Check(o_ids) || PyArray_TYPE(ids_a) != NPY_INT64 || PyArray_NDIM(ids_a) != 1 ||
        !PyArray_IS_C_CONTIGUOUS(ids_a))
        return Py_BuildValue("(s)", "ids");
    npy_intp k = PyArray_DIM(ids_a, 0), i;
    const int64_t *ids = PyArray_DATA(ids_a);
    /* The actions' form first: a refusal here leaves every state as it was. */
    const void *act = NULL;
    int act_type = 0;
    if (PyArray_Check(o_act) && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o_act)) {
        PyArrayObject *a = (PyArrayObject *)o_act;
        act_type = PyArray_TYPE(a);
        int ok = L->discrete ? (act_type == NPY_INT64 || act_type == NPY_INT32) &&
                                   PyArray_NDIM(a) == 1 && PyArray_DIM(a, 0) == k
                             : checked && act_type == NPY_FLOAT32 &&
                                   PyArray_SIZE(a) == k * L->act_width && ro__hp_rows(a) == k;
        if (ok)
            act = PyArray_DATA(a);
    }
    if (!act)
        return Py_BuildValue("(s)", "actions");
    int err = ro__hp_lane_flush(L);
    if (err)
        return event("closed", PyUnicode_FromFormat("send failed: %s", strerror(err)));
    if (L->out_len + (size_t)(L->n - L->nfree) * (ANSWER_MAX + HOLD_HEAD) +
            (L->hold ? (size_t)L->n * HOLD_MAX : 0) >
        L->out_cap)
        return event("bad", PyUnicode_FromString(
                                "the node sends frames for envs whose answers it has not read"));
    if (L->discrete) {
        for (i = 0; i < k; i++) {
            int64_t v =
                act_type == NPY_INT64 ? ((const int64_t *)act)[i] : ((const int32_t *)act)[i];
            if (v < 0 || v >= L->action_n)
                return Py_BuildValue("(s)", "actions");
        }
    }
    /* The usual: recv() handed out one range of envs, in order. */
    npy_intp lo = k ? ids[0] : 0;
    int range = k > 0 && lo >= 0 && lo <= L->n - k;
    if (range) {
        const int8_t *st = L->state + lo;
        for (i = 0; i < k; i++) /* no early exit: one vectorised pass */
            range &= (ids[i] == lo + i) & (st[i] == HANDED);
    }
    if (range)
        return lane_send_range(L, lo, k, act, act_type);
    /* Every env: in range, HANDED, not twice; marked HELD as it is seen,
     * all put back at the first refusal. */
    for (i = 0; i < k; i++) {
        int64_t e = ids[i];
        const char *why = NULL;
        if (e < 0 || e >= L->n)
            why = "range";
        else if (L->state[e] != HANDED)
            why = "state";
        if (why) {
            int twice = 0;
            for (npy_intp j = 0; j < i; j++) {
                twice |= ids[j] == e;
                L->state[ids[j]] = HANDED;
            }
            return Py_BuildValue("(ns)", (Py_ssize_t)i, twice ? "twice" : why);
        }
        L->state[e] = HELD;
    }
    for (i = 0; i < k; i++) {
        int64_t e = ids[i];
        if (L->discrete) {
            ((int32_t *)L->m_act)[e] = (int32_t)(act_type == NPY_INT64 ? ((const int64_t *)act)[i]
                                                                       : ((const int32_t *)act)[i]);
        } else {
            memcpy((float *)L->m_act + e * L->act_width, (const float *)act + i * L->act_width,
                   (size_t)L->act_width * sizeof(float));
        }
        npy_intp slot = L->frame_of[e];
        if (--L->frames[slot].left == 0)
            ro__hp_lane_answer(L, slot);
    }
    return lane_sent(L);
}
/* -- setup and teardown --------------------------------------------------------- */

static PyObject *lane_adopt(Lane *L, PyObject *args)
{
    unsigned long long seq;
    PyObject *o_ranges;
    int to;
    if (!PyArg_ParseTuple(args, "KOi", &seq, &o_ranges, &to))
        return NULL;
    if (L->fd < 0) {
        PyErr_SetString(PyExc_ValueError, "adopt(): the lane is detached");
        return NULL;
    }
    PyArrayObject *r = ro__hp_array(o_ranges, NPY_UINT32, 1, 0, "ranges");
    if (!r)
        return NULL;
    if (to != READY && to != HANDED) {
        PyErr_SetString(PyExc_ValueError, "adopt(): to is READY or HANDED");
        return NULL;
    }
    npy_intp len = PyArray_DIM(r, 0), k;
    char msg[256];
    if (len % 2) {
        PyErr_SetString(PyExc_ValueError, "adopt(): ranges are (first, count) pairs");
        return NULL;
    }
    if (ro__hp_lane_check_ranges(L, seq, PyArray_DATA(r), len / 2, &k, msg, sizeof msg) < 0) {
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    if (ro__hp_lane_register(L, seq, PyArray_DATA(r), len / 2, k, to) < 0)
        return NULL;
    if (seq > L->last_seq)
        L->last_seq = seq;
    Py_RETURN_NONE;
}

static PyObject *lane_feed(Lane *L, PyObject *args)
{
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b))
        return NULL;
    if (L->fd < 0) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "feed(): the lane is detached");
        return NULL;
    }
    /* The bytes come from the client's own reader, bounded there. */
    size_t left = L->in_end - L->in_start;
    if (left + (size_t)b.len > L->in_cap) {
        size_t cap = left + (size_t)b.len + IN_BASE;
        uint8_t *m = PyMem_RawMalloc(cap);
        if (!m) {
            PyBuffer_Release(&b);
            return PyErr_NoMemory();
        }
        memcpy(m, L->in + L->in_start, left);
        PyMem_RawFree(L->in);
        L->in = m;
        L->in_cap = cap;
        L->in_start = 0;
        L->in_end = left;
    }
    if (L->in_start) {
        memmove(L->in, L->in + L->in_start, left);
        L->in_start = 0;
        L->in_end = left;
    }
    memcpy(L->in + L->in_end, b.buf, (size_t)b.len);
    L->in_end += (size_t)b.len;
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

static PyObject *lane_detach(Lane *L, PyObject *unused)
{
    (void)unused;
    if (L->fd >= 0)
        ro__hp_lane_flush(L);
    PyObject *rest = PyBytes_FromStringAndSize((const char *)L->out, (Py_ssize_t)L->out_len);
    lane_release(L);
    return rest;
}

static PyObject *lane_counts(Lane *L, void *unused)
{
    (void)unused;
    return Py_BuildValue("(nnn)", (Py_ssize_t)L->nready, (Py_ssize_t)L->nflight,
                         (Py_ssize_t)(L->n - L->nfree));
}

static PyMethodDef lane_methods[] = {
    {"recv", (PyCFunction)lane_recv, METH_VARARGS,
     "recv(want, timeout, ordered=False) -> arrays | None | (event, detail)\n\n"
     "The next `want` envs whose observation came in (timeout seconds, < 0: no limit): "
     "(obs, reward, terminated, truncated, infos, stepped, ended), in arrival order (ordered: "
     "every env, env e in row e, as step() returns them); None when the "
     "time ran out; or what Python must handle: ('frame', bytes) a frame not taken here, "
     "('bad', message) a protocol violation, ('short', count) fewer envs can come, "
     "('closed', message) the connection ended."},
    {"send", (PyCFunction)lane_send, METH_VARARGS,
     "send(env_ids, actions, checked=False) -> None | (index, why) | ('ids',) | ('actions',) "
     "| ('closed', message) | ('bad', message)"},
    {"adopt", (PyCFunction)lane_adopt, METH_VARARGS,
     "adopt(seq, ranges, to): a frame received before the lane (uint32 (first, count) "
     "pairs) whose envs become READY (1) or HANDED (2)."},
    {"feed", (PyCFunction)lane_feed, METH_VARARGS,
     "feed(bytes): bytes read from the socket before the lane, not yet framed."},
    {"detach", (PyCFunction)lane_detach, METH_NOARGS,
     "detach() -> bytes: the answers not yet written; the lane is done."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef lane_getset[] = {
    {"counts", (getter)lane_counts, NULL, "(ready, in flight, frames unanswered)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ro__hp_lane_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rollout_client._hotpath.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lane(fd, obs_shape, m_obs, m_final, m_reward, m_flags, m_step, m_act, "
              "discrete, action_n, state, frame_of, ep_return, ep_length, nflight, last_seq, "
              "max_frame, spin, keep, hold=None): one node's asynchronous send()/recv() in C "
              "(lane.c); hold: NEXT_STEP's marks, a bool array of one per env that the lane "
              "keeps (lane.h), or None for the node's same-step resets.",
    .tp_new = lane_new,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_methods = lane_methods,
    .tp_getset = lane_getset,
};
