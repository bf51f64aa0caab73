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
 */
#include "hotpath.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The per-env states of vecenv_async.py. */
enum { IN_FLIGHT = 0, READY = 1, HANDED = 2, HELD = 3 };

enum { IN_BASE = 1 << 16, ANSWER_MAX = 24 };

/* One Observations frame whose answer is not sent yet. */
typedef struct lane_frame {
    uint64_t seq;
    npy_intp left;    /* envs without an action yet */
    npy_intp npairs;  /* (first, count) pairs in ranges */
    uint32_t *ranges; /* owned */
} lane_frame_t;

typedef struct {
    PyObject ob_base; /* PyObject_HEAD */
    /* The socket, memory columns, per-env arrays and spin: kept alive. */
    PyObject *refs;
    PyObject *spin; /* the client's spin.Spin: its policy decides each wait */
    int fd;         /* -1 once detached */
    npy_intp n, d;
    int obs_nd;
    npy_intp obs_dims[NPY_MAXDIMS];
    /* The node's memory: its columns, and this connection's actions. */
    const float *m_obs, *m_final, *m_reward;
    const uint8_t *m_flags;
    const uint64_t *m_step;
    void *m_act;
    int discrete;
    npy_intp act_width;
    int64_t action_n;
    /* VecEnv's per-env arrays (vecenv_async.py reads them for messages). */
    int8_t *state;
    int64_t *frame_of; /* slot in frames while READY, HANDED or HELD; else -1 */
    double *ep_ret;
    int64_t *ep_len;
    /* Frames not answered yet: at most n (each holds an env not IN_FLIGHT). */
    lane_frame_t *frames;
    npy_intp *free_slots, nfree;
    /* READY envs in arrival order: runs of (first, count), a ring of n. */
    uint32_t (*ready)[2];
    npy_intp rhead, rlen, nready, nflight;
    /* Bytes read and not yet taken as frames: in[in_start..in_end). */
    uint8_t *in;
    size_t in_cap, in_start, in_end, max_frame;
    int peer_gone; /* the node closed its end: answers are dropped */
    /* Answers not yet written to the socket. */
    uint8_t *out;
    size_t out_len, out_cap;
    uint64_t last_seq;
} Lane;

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
    static char *names[] = {"fd",       "obs_shape", "m_obs",     "m_final",   "m_reward",
                            "m_flags",  "m_step",    "m_act",     "discrete",  "action_n",
                            "state",    "frame_of",  "ep_return", "ep_length", "nflight",
                            "last_seq", "max_frame", "spin",      "keep",      NULL};
    int fd, discrete;
    PyObject *shape, *mo, *mf, *mr, *mfl, *ms, *ma, *st, *fo, *er, *el, *spin, *keep;
    long long action_n;
    Py_ssize_t nflight, max_frame;
    unsigned long long last_seq;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO!OOOOOOpLOOOOnKnOO", names, &fd, &PyTuple_Type,
                                     &shape, &mo, &mf, &mr, &mfl, &ms, &ma, &discrete, &action_n,
                                     &st, &fo, &er, &el, &nflight, &last_seq, &max_frame, &spin,
                                     &keep))
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
        !(L->ep_len = column(el, NPY_INT64, n, 0, 1, "ep_length")))
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
    L->out_cap = 2 * (size_t)n * ANSWER_MAX;
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

/* -- frames in ---------------------------------------------------------------- */

/* Registers a frame of k envs in ranges (npairs pairs, checked) whose envs
 * become `to` (READY: queued for recv(); HANDED: given out already). */
static int lane_register(Lane *L, uint64_t seq, const uint32_t *ranges, npy_intp npairs, npy_intp k,
                         int to)
{
    uint32_t *own = PyMem_RawMalloc((size_t)npairs * 2 * sizeof *own);
    if (!own || L->nfree == 0) { /* nfree: a frame holds an env, there are n */
        PyMem_RawFree(own);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(own, ranges, (size_t)npairs * 2 * sizeof *own);
    npy_intp slot = L->free_slots[--L->nfree];
    L->frames[slot] = (lane_frame_t){.seq = seq, .left = k, .npairs = npairs, .ranges = own};
    for (npy_intp i = 0; i < npairs; i++) {
        uint32_t first = ranges[2 * i], count = ranges[2 * i + 1];
        memset(L->state + first, to, count);
        for (uint32_t j = 0; j < count; j++)
            L->frame_of[first + j] = slot;
        if (to != READY)
            continue;
        npy_intp tail = (L->rhead + L->rlen - 1) % L->n;
        if (L->rlen && L->ready[tail][0] + L->ready[tail][1] == first) {
            L->ready[tail][1] += count; /* the usual: one run, frame after frame */
        } else {
            L->ready[(L->rhead + L->rlen) % L->n][0] = first;
            L->ready[(L->rhead + L->rlen) % L->n][1] = count;
            L->rlen++;
        }
    }
    if (to == READY)
        L->nready += k;
    L->nflight -= k;
    return 0;
}

/* Checks a frame's ranges (npairs pairs): each non-empty, inside the
 * node's envs, every env IN_FLIGHT and none twice. Sets *k to the envs.
 * -1 with msg set otherwise; nothing changes either way. */
static int lane_check_ranges(Lane *L, uint64_t seq, const uint32_t *rg, npy_intp npairs,
                             npy_intp *k, char *msg, size_t len)
{
    npy_intp total = 0, i, bad = -1;
    if (npairs == 0) {
        snprintf(msg, len, "observations seq %llu: in memory, without ranges",
                 (unsigned long long)seq);
        return -1;
    }
    for (i = 0; i < npairs; i++) {
        npy_intp first = rg[2 * i], count = rg[2 * i + 1];
        if (count < 1 || first >= L->n || count > L->n - first || count > L->n - total) {
            snprintf(msg, len,
                     "observations seq %llu: a range of %zd envs from %zd is empty, not inside "
                     "[0, %zd) or more than %zd envs in all",
                     (unsigned long long)seq, (Py_ssize_t)count, (Py_ssize_t)first,
                     (Py_ssize_t)L->n, (Py_ssize_t)L->n);
            return -1;
        }
        total += count;
    }
    if (npairs == 1) { /* the usual: one run, which cannot hold an env twice */
        const int8_t *st = L->state + rg[0];
        int8_t any = 0;
        for (npy_intp j = 0; j < total; j++)
            any |= st[j]; /* IN_FLIGHT is 0 */
        for (npy_intp j = 0; any && j < total; j++) {
            if (st[j] != IN_FLIGHT) {
                bad = (npy_intp)rg[0] + j;
                break;
            }
        }
        npairs = 0; /* nothing marked */
    }
    /* Marked as they are seen (so that an env twice shows), then restored. */
    for (i = 0; i < npairs && bad < 0; i++) {
        for (uint32_t j = 0; j < rg[2 * i + 1]; j++) {
            npy_intp e = (npy_intp)rg[2 * i] + j;
            if (L->state[e] != IN_FLIGHT) {
                bad = e;
                break;
            }
            L->state[e] = -1;
        }
    }
    for (npy_intp p = 0; p < npairs; p++) {
        for (uint32_t j = 0; j < rg[2 * p + 1]; j++) {
            npy_intp e = (npy_intp)rg[2 * p] + j;
            if (L->state[e] == -1)
                L->state[e] = IN_FLIGHT;
        }
    }
    if (bad >= 0) {
        snprintf(msg, len, "env %zd came again before its action was sent", (Py_ssize_t)bad);
        return -1;
    }
    *k = total;
    return 0;
}

/* What lane_take_frame made of a frame. */
enum { TOOK = 1, NOT_MINE = 0, BAD = -1, NOMEM = -2 };

static int lane_take_frame(Lane *L, const uint8_t *b, size_t len, char *msg, size_t mlen)
{
    ro_hp_scan_t s;
    int r = ro__hp_scan(b, 0, (Py_ssize_t)len, &s);
    if (r < 0) {
        snprintf(msg, mlen, "malformed observations frame: %s", s.err);
        return BAD;
    }
    if (r == 0 || !s.in_memory)
        return NOT_MINE;
    if (s.seq <= L->last_seq) {
        snprintf(msg, mlen, "observations seq %llu after seq %llu", (unsigned long long)s.seq,
                 (unsigned long long)L->last_seq);
        return BAD;
    }
    if (s.nranges % 2 || s.nranges > 2 * L->n) {
        snprintf(msg, mlen,
                 "observations seq %llu: %zd range values, not (first, count) pairs "
                 "of at most %zd envs",
                 (unsigned long long)s.seq, s.nranges, (Py_ssize_t)L->n);
        return BAD;
    }
    uint32_t stack[64];
    uint32_t *rg = s.nranges <= 64 ? stack : PyMem_RawMalloc((size_t)s.nranges * sizeof *rg);
    if (!rg)
        return NOMEM;
    ro__hp_scan_ranges(b, &s, rg);
    npy_intp k;
    int out = TOOK;
    if (lane_check_ranges(L, s.seq, rg, s.nranges / 2, &k, msg, mlen) < 0)
        out = BAD;
    else if (lane_register(L, s.seq, rg, s.nranges / 2, k, READY) < 0)
        out = NOMEM;
    else
        L->last_seq = s.seq;
    if (rg != stack)
        PyMem_RawFree(rg);
    return out;
}

/* The next complete frame in the input: 1 (its body at *body, *len bytes;
 * taken), 0 (none complete yet), -1 (a bad length prefix; msg set). */
static int lane_next(Lane *L, const uint8_t **body, size_t *len, char *msg, size_t mlen)
{
    Py_ssize_t pos = (Py_ssize_t)L->in_start, end = (Py_ssize_t)L->in_end;
    uint64_t size;
    if (pos >= end)
        return 0;
    if (ro__hp_varint(L->in, &pos, end, &size) < 0) {
        if (end - (Py_ssize_t)L->in_start >= 10) {
            snprintf(msg, mlen, "frame length prefix is longer than 10 bytes");
            return -1;
        }
        return 0;
    }
    if (size > L->max_frame) {
        snprintf(msg, mlen, "a frame of %llu bytes, above the node's max_frame %zu",
                 (unsigned long long)size, L->max_frame);
        return -1;
    }
    if ((uint64_t)(end - pos) < size)
        return 0;
    *body = L->in + pos;
    *len = (size_t)size;
    L->in_start = (size_t)pos + (size_t)size;
    return 1;
}

/* Room to read into: unread bytes moved to the front, the buffer grown
 * for a frame larger than it (to at most max_frame plus its prefix) and
 * shrunk back once it is read. 0, or -1 (no memory). */
static int lane_room(Lane *L)
{
    size_t left = L->in_end - L->in_start;
    if (left == 0 && L->in_cap > 4 * IN_BASE) {
        uint8_t *small = PyMem_RawMalloc(IN_BASE);
        if (small) {
            PyMem_RawFree(L->in);
            L->in = small;
            L->in_cap = IN_BASE;
        }
    }
    if (L->in_start) {
        memmove(L->in, L->in + L->in_start, left);
        L->in_start = 0;
        L->in_end = left;
    }
    if (L->in_cap - L->in_end >= IN_BASE / 4)
        return 0;
    /* Full of one incomplete frame: make room for all of it. */
    Py_ssize_t pos = 0;
    uint64_t size = 0;
    size_t need = L->in_cap + IN_BASE;
    if (ro__hp_varint(L->in, &pos, (Py_ssize_t)L->in_end, &size) == 0 && size <= L->max_frame)
        need = (size_t)pos + (size_t)size + IN_BASE / 4;
    if (need <= L->in_cap)
        return 0;
    uint8_t *big = PyMem_RawRealloc(L->in, need);
    if (!big)
        return -1;
    L->in = big;
    L->in_cap = need;
    return 0;
}

/* -- waiting ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Writes what the output holds. 0 (all or some written, or the socket is
 * full), or the errno of a failed send. A peer that closed its end
 * (EPIPE, ECONNRESET) is no error here: what it sent before, a goodbye
 * perhaps, is still to be read, and recv() reports the end with it, as a
 * TCP peer's end shows; answers to it are dropped from then on. */
static int lane_flush(Lane *L)
{
    while (L->out_len) {
        if (L->peer_gone) {
            L->out_len = 0;
            break;
        }
        ssize_t w = send(L->fd, L->out, L->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE || errno == ECONNRESET) {
                L->peer_gone = 1;
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
        }
        memmove(L->out, L->out + w, L->out_len - (size_t)w);
        L->out_len -= (size_t)w;
    }
    return 0;
}

/* One read: >0 bytes, 0 at EOF, -1 nothing now (EAGAIN), -2 an error
 * (errno). */
static ssize_t lane_read(Lane *L)
{
    for (;;) {
        ssize_t r = recv(L->fd, L->in + L->in_end, L->in_cap - L->in_end, MSG_DONTWAIT);
        if (r > 0)
            L->in_end += (size_t)r;
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
}

/* Calls spin.<name>() (the client's policy, spin.py); NULL on error. */
static PyObject *spin_call(Lane *L, const char *name)
{
    return PyObject_CallMethod(L->spin, name, NULL);
}

/* Waits until the socket has bytes (or takes the pending answers), at
 * most until `deadline` (now_s(); < 0: no limit): first spinning as the
 * client's policy allows, then in poll() without the GIL. 1 readable, 0
 * timed out, -1 a Python error (a signal's exception). */
static int lane_wait(Lane *L, double deadline)
{
    PyObject *until = spin_call(L, "begin");
    if (!until)
        return -1;
    if (until != Py_None) {
        Py_DECREF(until);
        PyObject *o_cap = PyObject_GetAttrString(L->spin, "cap");
        double cap = o_cap ? PyFloat_AsDouble(o_cap) : -1.0;
        Py_XDECREF(o_cap);
        if (PyErr_Occurred())
            return -1;
        double end = now_s() + cap;
        for (;;) {
            struct pollfd p = {.fd = L->fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0) {
                PyObject *r = spin_call(L, "hit");
                Py_XDECREF(r);
                return r ? 1 : -1;
            }
            if (now_s() >= end)
                break;
        }
        PyObject *r = spin_call(L, "miss");
        if (!r)
            return -1;
        Py_DECREF(r);
    } else {
        Py_DECREF(until);
    }
    for (;;) {
        struct pollfd p = {.fd = L->fd, .events = POLLIN | (L->out_len ? POLLOUT : 0)};
        int ms = -1;
        if (deadline >= 0) {
            double left = deadline - now_s();
            if (left <= 0)
                return 0;
            ms = (int)(left * 1000.0) + 1;
        }
        PyThreadState *ts = PyEval_SaveThread(); /* the GIL is free while we sleep */
        int r = poll(&p, 1, ms);
        int err = errno;
        PyEval_RestoreThread(ts);
        if (L->fd < 0) /* detached meanwhile: the caller says so */
            return 1;
        if (r < 0 && err == EINTR) {
            if (PyErr_CheckSignals() < 0)
                return -1;
            continue;
        }
        if (r < 0) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (r > 0 && (p.revents & POLLOUT))
            lane_flush(L); /* an error shows at the next send() */
        if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
            return 1;
    }
}

/* -- recv ------------------------------------------------------------------- */

/* The infos dict of recv() (vecenv_async.py's _transitions): o holds the
 * arrays lane_gather made. NULL on error. */
static PyObject *lane_infos(PyObject **o, int with_ids)
{
    /* The keys, made once (interned, never freed: the module lives as long
     * as the interpreter), and which of o each maps to. */
    static const char *const names[] = {"env_id",         "final_obs",     "_final_obs",
                                        "has_final_obs",  "_episode",      "episode_return",
                                        "episode_length", "episode_start", "step"};
    static const int which[] = {4, 5, 6, 6, 11, 9, 10, 7, 8};
    static PyObject *keys[9], *k_episode, *k_r, *k_l;
    enum { NKEYS = sizeof names / sizeof *names };
    if (!k_l) {
        for (int i = 0; i < NKEYS; i++) {
            if (!keys[i] && !(keys[i] = PyUnicode_InternFromString(names[i])))
                return NULL;
        }
        if ((!k_episode && !(k_episode = PyUnicode_InternFromString("episode"))) ||
            (!k_r && !(k_r = PyUnicode_InternFromString("r"))) ||
            !(k_l = PyUnicode_InternFromString("l")))
            return NULL;
    }
    PyObject *ep = PyDict_New(), *infos = PyDict_New();
    int bad = !ep || !infos || PyDict_SetItem(ep, k_r, o[9]) < 0 ||
              PyDict_SetItem(ep, k_l, o[10]) < 0 || PyDict_SetItem(infos, k_episode, ep) < 0;
    for (int i = with_ids ? 0 : 1; !bad && i < NKEYS; i++) /* keys[0]: env_id */
        bad = PyDict_SetItem(infos, keys[i], o[which[i]]) < 0;
    Py_XDECREF(ep);
    if (bad) {
        Py_XDECREF(infos);
        return NULL;
    }
    return infos;
}

/* The returns (float) and lengths (int) of the k rows' episodes counted
 * (ended of them) as two lists, in row order: what VecEnv appends to
 * episode_returns and episode_lengths. */
static PyObject *lane_ended(npy_intp k, npy_intp ended, const npy_bool *counted, const double *ret,
                            const int64_t *len)
{
    PyObject *r = PyList_New(ended), *l = PyList_New(ended);
    if (!r || !l)
        goto fail;
    for (npy_intp i = 0, j = 0; i < k; i++) {
        if (!counted[i])
            continue;
        PyObject *x = PyFloat_FromDouble(ret[i]), *y = PyLong_FromLongLong(len[i]);
        if (!x || !y) {
            Py_XDECREF(x);
            Py_XDECREF(y);
            goto fail;
        }
        PyList_SET_ITEM(r, j, x);
        PyList_SET_ITEM(l, j, y);
        j++;
    }
    return Py_BuildValue("(NN)", r, l);
fail:
    Py_XDECREF(r);
    Py_XDECREF(l);
    return NULL;
}

/* The `want` READY envs next in the ready queue, taken: (obs, reward,
 * terminated, truncated, infos, stepped, ended) as recv() returns the
 * first five (vecenv_lane.py); stepped counts the transitions, ended is
 * None or the (returns, lengths) lists of the episodes counted. Rows are
 * in arrival order, with infos["env_id"]; `ordered` (want is every env,
 * each READY once: step()) puts env e's in row e, without env_id. */
static PyObject *lane_gather(Lane *L, npy_intp want, int ordered)
{
    npy_intp k = want, d = L->d;
    npy_intp dims[NPY_MAXDIMS];
    memcpy(dims, L->obs_dims, sizeof dims);
    dims[0] = k;
    PyObject *o[12] = {0};
    o[0] = PyArray_SimpleNew(L->obs_nd, dims, NPY_FLOAT32); /* obs */
    o[1] = PyArray_SimpleNew(1, &k, NPY_FLOAT32);           /* reward */
    o[2] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* terminated */
    o[3] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* truncated */
    o[4] = PyArray_SimpleNew(1, &k, NPY_INT64);             /* env_id */
    o[5] = PyArray_SimpleNew(L->obs_nd, dims, NPY_FLOAT32); /* final obs */
    o[6] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* has_final */
    o[7] = PyArray_SimpleNew(1, &k, NPY_BOOL);              /* episode_start */
    o[8] = PyArray_SimpleNew(1, &k, NPY_UINT64);            /* step */
    o[9] = PyArray_SimpleNew(1, &k, NPY_FLOAT64);           /* episode return */
    o[10] = PyArray_SimpleNew(1, &k, NPY_INT64);            /* episode length */
    o[11] = PyArray_SimpleNew(1, &k, NPY_BOOL);             /* counted */
    for (int i = 0; i < 12; i++) {
        if (!o[i]) {
            for (int j = 0; j < 12; j++)
                Py_XDECREF(o[j]);
            return NULL;
        }
    }
#define COL(i, T) ((T *)PyArray_DATA((PyArrayObject *)o[i]))
    /* Each a fresh array of its own: restrict lets the passes vectorise. */
    float *restrict obs = COL(0, float), *restrict reward = COL(1, float);
    float *restrict fin = COL(5, float);
    npy_bool *restrict term = COL(2, npy_bool), *restrict trunc = COL(3, npy_bool);
    npy_bool *restrict hasf = COL(6, npy_bool), *restrict start = COL(7, npy_bool);
    npy_bool *restrict counted = COL(11, npy_bool);
    int64_t *restrict ids = COL(4, int64_t), *restrict out_len = COL(10, int64_t);
    uint64_t *restrict step = COL(8, uint64_t);
    double *restrict out_ret = COL(9, double);
#undef COL
    npy_intp got = 0, stepped = 0, ended = 0;
    size_t row = (size_t)d * sizeof(float);
    while (got < k) {
        uint32_t *run = L->ready[L->rhead];
        npy_intp first = run[0], take = run[1] < (uint32_t)(k - got) ? run[1] : k - got;
        npy_intp at = ordered ? first : got; /* where its rows go */
        memcpy(obs + at * d, L->m_obs + first * d, row * (size_t)take);
        memcpy(reward + at, L->m_reward + first, (size_t)take * sizeof(float));
        memcpy(step + at, L->m_step + first, (size_t)take * sizeof(uint64_t));
        memset(L->state + first, HANDED, (size_t)take);
        /* Branch-free passes (a batch is a thousand rows, and this runs
         * cold after the user's policy): the few final observations are
         * copied over the NaN fill afterwards. */
        for (npy_intp c = 0; c < take * d; c++)
            fin[at * d + c] = NAN;
        /* The flags, each byte read once (the node may rewrite it
         * meanwhile): into hasf first, then decoded from there. */
        memcpy(hasf + at, L->m_flags + first, (size_t)take);
        for (npy_intp j = 0; j < take; j++) {
            npy_intp i = at + j;
            uint8_t f = hasf[i];
            ids[i] = first + j;
            term[i] = (f & RO_HP_TERMINATED) != 0;
            trunc[i] = (f & RO_HP_TRUNCATED) != 0;
            start[i] = (f & RO_HP_EPISODE_START) != 0;
            hasf[i] = (f & RO_HP_HAS_FINAL) != 0;
        }
        /* Episodes, as episodes() in envs.c counts them: step 0 is an env's
         * first observation, no transition; a truncation without its final
         * observation is not counted. */
        double *restrict ep_ret = L->ep_ret + first;
        int64_t *restrict ep_len = L->ep_len + first;
        for (npy_intp j = 0; j < take; j++) {
            npy_intp i = at + j;
            int te = term[i], tr = trunc[i], st = step[i] != 0;
            double r = ep_ret[j] + (st ? (double)reward[i] : 0.0);
            int64_t len = ep_len[j] + st;
            int done = te | tr, count = te | (tr & hasf[i]);
            counted[i] = (npy_bool)count;
            out_ret[i] = count ? r : NAN;
            out_len[i] = count ? len : 0;
            ep_ret[j] = done ? 0.0 : r;
            ep_len[j] = done ? 0 : len;
            stepped += st;
            ended += count;
        }
        for (npy_intp j = 0; j < take; j++) {
            if (hasf[at + j])
                memcpy(fin + (at + j) * d, L->m_final + (first + j) * d, row);
        }
        got += take;
        if ((uint32_t)take == run[1]) {
            L->rhead = (L->rhead + 1) % L->n;
            L->rlen--;
        } else {
            run[0] += (uint32_t)take;
            run[1] -= (uint32_t)take;
        }
    }
    L->nready -= k;
    PyObject *infos = lane_infos(o, !ordered);
    PyObject *eps = !infos  ? NULL
                    : ended ? lane_ended(k, ended, counted, out_ret, out_len)
                            : Py_NewRef(Py_None);
    PyObject *t =
        eps ? Py_BuildValue("(OOOONnN)", o[0], o[1], o[2], o[3], infos, (Py_ssize_t)stepped, eps)
            : NULL;
    if (!eps)
        Py_XDECREF(infos);
    for (int j = 0; j < 12; j++)
        Py_DECREF(o[j]);
    return t;
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
    double deadline = timeout < 0 ? -1.0 : now_s() + timeout;
    char msg[256];
    while (L->nready < want) {
        const uint8_t *body;
        size_t len;
        int r = lane_next(L, &body, &len, msg, sizeof msg);
        if (r < 0)
            return event("bad", PyUnicode_FromString(msg));
        if (r > 0) {
            int t = lane_take_frame(L, body, len, msg, sizeof msg);
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
        if (lane_room(L) < 0)
            return PyErr_NoMemory();
        ssize_t got = lane_read(L);
        if (got == 0)
            return event("closed", PyUnicode_FromString("closed the connection without goodbye"));
        if (got == -2)
            return event("closed", PyUnicode_FromFormat("connection lost: %s", strerror(errno)));
        if (got > 0)
            continue;
        int w = lane_wait(L, deadline);
        if (w < 0)
            return NULL;
        if (L->fd < 0) /* detached by another thread while the GIL was free */
            return event("closed", PyUnicode_FromString("the connection is closed"));
        if (w == 0)
            Py_RETURN_NONE;
    }
    return lane_gather(L, want, ordered);
}

/* -- send ------------------------------------------------------------------- */

/* Appends the answer of frame `slot` (Frame{actions{seq, in_memory}},
 * length-prefixed; wire.actions_in_memory) and frees the slot: its envs
 * are in flight again. */
static void lane_answer(Lane *L, npy_intp slot)
{
    lane_frame_t *f = &L->frames[slot];
    uint8_t inner[16], *p = inner;
    if (f->seq) {
        *p++ = 0x08;
        for (uint64_t v = f->seq;; v >>= 7) {
            *p++ = (uint8_t)(v < 0x80 ? v : (v & 0x7F) | 0x80);
            if (v < 0x80)
                break;
        }
    }
    *p++ = 0x20;
    *p++ = 0x01;
    size_t il = (size_t)(p - inner);
    uint8_t *o = L->out + L->out_len; /* out_cap: ANSWER_MAX per frame, n frames */
    *o++ = (uint8_t)(il + 2);         /* the body: tag, length, inner (< 128 bytes) */
    *o++ = 0x22;
    *o++ = (uint8_t)il;
    memcpy(o, inner, il);
    L->out_len += il + 3;
    for (npy_intp i = 0; i < f->npairs; i++) {
        uint32_t first = f->ranges[2 * i], count = f->ranges[2 * i + 1];
        memset(L->state + first, IN_FLIGHT, count);
        memset(L->frame_of + first, 0xFF, count * sizeof *L->frame_of); /* -1 */
        L->nflight += count;
    }
    PyMem_RawFree(f->ranges);
    f->ranges = NULL;
    L->free_slots[L->nfree++] = slot;
}

/* Sends what the output holds: None, or ("closed", why). */
static PyObject *lane_sent(Lane *L)
{
    int err = lane_flush(L);
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
            lane_answer(L, slot);
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
    int err = lane_flush(L);
    if (err)
        return event("closed", PyUnicode_FromFormat("send failed: %s", strerror(err)));
    if (L->out_len + (size_t)(L->n - L->nfree) * ANSWER_MAX > L->out_cap)
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
            lane_answer(L, slot);
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
    if (lane_check_ranges(L, seq, PyArray_DATA(r), len / 2, &k, msg, sizeof msg) < 0) {
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    if (lane_register(L, seq, PyArray_DATA(r), len / 2, k, to) < 0)
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
    size_t left = L->in_end - L->in_start;
    if ((size_t)b.len > L->max_frame + 16 || left + (size_t)b.len > L->in_cap) {
        size_t cap = left + (size_t)b.len + IN_BASE;
        uint8_t *m = (size_t)b.len > L->max_frame + 16 ? NULL : PyMem_RawMalloc(cap);
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
        lane_flush(L);
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
              "max_frame, spin, keep): one node's asynchronous send()/recv() in C "
              "(lane.c).",
    .tp_new = lane_new,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_methods = lane_methods,
    .tp_getset = lane_getset,
};
