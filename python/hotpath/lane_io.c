/* lane_io.c: the Lane's socket: frames found in what was read, room to
 * read into (bounded by the node's max_frame), answers written, and the
 * waits (spinning as the client's policy allows, then poll() without the
 * GIL). */
#include "lane.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The next complete frame in the input: 1 (its body at *body, *len bytes;
 * taken), 0 (none complete yet), -1 (a bad length prefix; msg set). */
int ro__hp_lane_next(Lane *L, const uint8_t **body, size_t *len, char *msg, size_t mlen)
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
int ro__hp_lane_room(Lane *L)
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

double ro__hp_lane_now(void)
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
int ro__hp_lane_flush(Lane *L)
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
ssize_t ro__hp_lane_read(Lane *L)
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
 * most until `deadline` (ro__hp_lane_now(); < 0: no limit): first spinning as the
 * client's policy allows, then in poll() without the GIL. 1 readable, 0
 * timed out, -1 a Python error (a signal's exception). */
int ro__hp_lane_wait(Lane *L, double deadline)
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
        double end = ro__hp_lane_now() + cap;
        for (;;) {
            struct pollfd p = {.fd = L->fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0) {
                PyObject *r = spin_call(L, "hit");
                Py_XDECREF(r);
                return r ? 1 : -1;
            }
            if (ro__hp_lane_now() >= end)
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
            double left = deadline - ro__hp_lane_now();
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
            ro__hp_lane_flush(L); /* an error shows at the next send() */
        if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
            return 1;
    }
}