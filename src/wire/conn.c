#include "wire/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/shared_mem.h"
#include "runtime/text.h"
#include "wire/checks.h"
#include "wire/tcp_liveness.h"
#include "wire/varint.h"

typedef struct write_req {
    uv_write_t req;
    uint8_t *buf;
} write_req_t;

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows up as a read error or EOF */
    write_req_t *w = (write_req_t *)req;
    free(w->buf);
    free(w);
}

size_t ro__conn_queued(const ro_conn_t *c)
{
    return uv_stream_get_write_queue_size(&c->h.stream);
}

/* Frames up to this size (a SEED batch's Actions, an Observations frame
 * naming rows in shared memory, an ack) are encoded on the stack and
 * written at once when nothing is queued before them. Why: a uv_write
 * costs two allocations, and its completion makes libuv stop and restart
 * the socket's POLLOUT interest, which is one epoll_ctl per frame (strace
 * of a SEED learner at 256 envs: as many epoll_ctl as reads). */
#define DIRECT_MAX 512

int ro__conn_send(ro_conn_t *c, const ro_frame_t *f)
{
    if (c->closing || !c->open)
        return RO_EIO;
    const size_t queued = ro__conn_queued(c);
    if (queued > c->o.max_queued)
        return RO_ENOBUFS;
    uint8_t direct[DIRECT_MAX];
    const size_t dlen = queued == 0 ? ro__frame_encode_into(f, direct, sizeof direct) : 0;
    size_t sent = 0;
    if (dlen > 0) {
        uv_buf_t b = uv_buf_init((char *)direct, (unsigned)dlen);
        const int n = uv_try_write(&c->h.stream, &b, 1);
        if (n >= 0 && (size_t)n == dlen)
            return 0;
        /* The rest waits for the socket: queued below, as any frame. An
         * error (not EAGAIN) is left to uv_write, which reports it as it
         * always has. */
        sent = n > 0 ? (size_t)n : 0;
    }
    write_req_t *w = malloc(sizeof *w);
    if (!w)
        return RO_ENOMEM;
    size_t len;
    if (dlen > 0) {
        len = dlen - sent;
        if (!(w->buf = malloc(len))) {
            free(w);
            return RO_ENOMEM;
        }
        memcpy(w->buf, direct + sent, len);
    } else if (ro__frame_encode(f, &w->buf, &len) != 0) {
        free(w);
        return RO_ENOMEM;
    }
    uv_buf_t b = uv_buf_init((char *)w->buf, (unsigned)len);
    if (uv_write(&w->req, &c->h.stream, &b, 1, on_written) != 0) {
        free(w->buf);
        free(w);
        return RO_EIO;
    }
    return 0;
}

/* The descriptors ride on the frame's first byte (SCM_RIGHTS): nothing may
 * be queued before it, and the frame goes out with one sendmsg, its rest
 * (if the socket took only part) queued as any frame. */
int ro__conn_send_fds(ro_conn_t *c, const ro_frame_t *f, const int *fds, unsigned nfds)
{
    if (nfds == 0)
        return ro__conn_send(c, f);
    if (c->closing || !c->open)
        return RO_EIO;
    if (!c->local || nfds > RO_SHARED_FDS_MAX)
        return RO_EINVAL;
    uv_os_fd_t sock;
    if (ro__conn_queued(c) != 0 || uv_fileno(&c->h.handle, &sock) != 0)
        return RO_ENOBUFS;
    write_req_t *w = malloc(sizeof *w);
    size_t len;
    if (!w || ro__frame_encode(f, &w->buf, &len) != 0) {
        free(w);
        return RO_ENOMEM;
    }
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int) * RO_SHARED_FDS_MAX)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = w->buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.space,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * nfds)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n > 0 && (size_t)n < len) { /* the rest after them, in order */
        uv_buf_t b = uv_buf_init((char *)w->buf + n, (unsigned)(len - (size_t)n));
        if (uv_write(&w->req, &c->h.stream, &b, 1, on_written) == 0)
            return 0;
        n = -1;
    }
    free(w->buf);
    free(w);
    return n > 0 ? 0 : n == 0 || errno == EAGAIN ? RO_ENOBUFS : RO_EIO;
}

/* take_fd moves the first descriptor libuv holds for c (an IPC pipe keeps
 * what came with the bytes, uv_pipe_pending_count) into our hands: libuv
 * gives it out only as a handle, which is closed once we hold a copy. */
static void free_handle(uv_handle_t *h)
{
    free(h);
}

static int take_fd(ro_conn_t *c)
{
    uv_pipe_t *p = malloc(sizeof *p);
    if (!p || uv_pipe_init(c->h.handle.loop, p, 0) != 0) {
        free(p);
        return -1;
    }
    uv_os_fd_t fd;
    int dup = -1;
    if (uv_accept(&c->h.stream, (uv_stream_t *)p) == 0 && uv_fileno((uv_handle_t *)p, &fd) == 0)
        dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    uv_close((uv_handle_t *)p, free_handle);
    return dup;
}

unsigned ro__conn_take_fds(ro_conn_t *c, int *fds, unsigned max)
{
    unsigned n = 0;
    while (c->local && c->h.pipe.ipc && uv_pipe_pending_count(&c->h.pipe) > 0) {
        int fd = take_fd(c);
        if (fd >= 0 && n < max)
            fds[n++] = fd;
        else if (fd >= 0)
            close(fd);
    }
    return n;
}

typedef struct bufs_req {
    uv_write_t req;
    ro_conn_written_fn written;
    void *ctx;
} bufs_req_t;

static void on_bufs_written(uv_write_t *req, int status)
{
    bufs_req_t *w = (bufs_req_t *)req;
    w->written(w->ctx, status);
    free(w);
}

int ro__conn_send_bufs(ro_conn_t *c, const uv_buf_t *bufs, unsigned nbufs,
                       ro_conn_written_fn written, void *ctx)
{
    if (c->closing || !c->open)
        return RO_EIO;
    if (ro__conn_queued(c) > c->o.max_queued)
        return RO_ENOBUFS;
    bufs_req_t *w = malloc(sizeof *w);
    if (!w)
        return RO_ENOMEM;
    w->written = written;
    w->ctx = ctx;
    if (uv_write(&w->req, &c->h.stream, bufs, nbufs, on_bufs_written) != 0) {
        free(w);
        return RO_EIO;
    }
    return 0;
}

void ro__conn_log(const ro_conn_t *c, const char *fmt, ...)
{
    char msg[512], shown[600], label[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line whatever the peer put in its strings: no forged lines, no
     * terminal escapes. */
    fprintf(stderr, "%s: %s: %s\n", c->o.program, ro__text_log(label, sizeof label, c->label, 200),
            ro__text_log(shown, sizeof shown, msg, sizeof msg));
}

static void on_handle_closed(uv_handle_t *h);

/* The end of a failed connection's linger: its queue flushed (or the
 * flush cancelled by the close), or RO_CONN_LINGER_MS passed. Closes the
 * timer and the socket; on_closed follows the second. */
static void linger_over(ro_conn_t *c)
{
    if (!c->lingering)
        return;
    c->lingering = false;
    c->closes_left = 2;
    uv_close((uv_handle_t *)&c->linger, on_handle_closed);
    uv_close(&c->h.handle, on_handle_closed); /* cancels a flush still pending */
}

static void on_linger_flushed(uv_shutdown_t *req, int status)
{
    (void)status; /* flushed, or the peer went: closing either way */
    linger_over(req->data);
}

static void on_linger_timeout(uv_timer_t *t)
{
    linger_over(t->data);
}

/* Why: uv_close cancels the writes still queued, and with them the Error
 * frame that says why the peer is dropped (a learner that reads slowly
 * then saw only the end of the stream, and took it for a node that left).
 * So a connection failed with frames queued stops reading and taking
 * frames, flushes, then closes. False: close it at once. */
static bool linger_start(ro_conn_t *c, const char *why)
{
    if (c->closing || !c->open)
        return false;
    c->linger_req.data = c;
    if (uv_shutdown(&c->linger_req, &c->h.stream, on_linger_flushed) != 0)
        return false;
    uv_timer_init(c->h.handle.loop, &c->linger); /* cannot fail */
    c->linger.data = c;
    uv_timer_start(&c->linger, on_linger_timeout, RO_CONN_LINGER_MS, 0);
    c->lingering = true;
    c->closing = true;
    snprintf(c->why, sizeof c->why, "%.255s", why);
    uv_read_stop(&c->h.stream);
    return true;
}

static void send_error(ro_conn_t *c, int code, const char *message)
{
    Rollout__V1__Error e = ROLLOUT__V1__ERROR__INIT;
    e.code = (uint32_t)(code < 0 ? -code : code);
    e.message = (char *)message;
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_ERROR;
    f.error = &e;
    ro__conn_send(c, &f); /* best effort: the peer may be gone */
}

void ro__conn_fail(ro_conn_t *c, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ro__conn_log(c, "%s; closing", msg);
    send_error(c, code, msg);
    if (ro__conn_queued(c) == 0 || !linger_start(c, msg))
        ro__conn_close(c, msg);
}

int ro__conn_goodbye(ro_conn_t *c, const char *reason, const uint64_t *env_steps)
{
    Rollout__V1__Goodbye g = ROLLOUT__V1__GOODBYE__INIT;
    Rollout__V1__GoodbyeSteps st = ROLLOUT__V1__GOODBYE_STEPS__INIT;
    g.reason = (char *)reason;
    if (env_steps) {
        st.env_steps = *env_steps;
        g.steps = &st;
    }
    ro_frame_t f = ROLLOUT__V1__FRAME__INIT;
    f.body_case = ROLLOUT__V1__FRAME__BODY_GOODBYE;
    f.goodbye = &g;
    return ro__conn_send(c, &f);
}

static void on_handle_closed(uv_handle_t *h)
{
    ro_conn_t *c = h->data;
    if (c->closes_left > 1) { /* the linger timer and the socket: both */
        c->closes_left--;
        return;
    }
    ro__frame_reader_free(&c->rd);
    c->open = false;
    c->o.ops->on_closed(c);
}

void ro__conn_close(ro_conn_t *c, const char *why)
{
    if (c->closing || !c->open)
        return;
    c->closing = true;
    if (why)
        snprintf(c->why, sizeof c->why, "%s", why);
    uv_read_stop(&c->h.stream);
    c->closes_left = 1;
    uv_close(&c->h.handle, on_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    ro_conn_t *c = h->data;
    (void)suggested;
    /* Straight into the frame reader: no copy. NULL makes libuv report
     * UV_ENOBUFS to on_read. A connection held to small frames (before its
     * hello) reads no more than one of them at a time. */
    size_t chunk = RO_CONN_READ_CHUNK;
    if (c->rd.max_frame + RO_VARINT_MAX < chunk)
        chunk = c->rd.max_frame + RO_VARINT_MAX;
    uint8_t *to = ro__frame_reader_space(&c->rd, chunk);
    *buf = uv_buf_init((char *)to, to ? (unsigned)chunk : 0);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    ro_conn_t *c = s->data;
    (void)buf;
    if (nread == 0 || c->closing)
        return;
    if (nread == UV_ENOBUFS) {
        c->broken = true;
        if (c->rd.over_budget)
            ro__conn_fail(c, RO_ENOBUFS,
                          "its frame would take the %zu MiB held for frames being received "
                          "(all connections together) over its limit",
                          c->rd.budget->limit >> 20);
        else
            ro__conn_fail(c, RO_ENOMEM, "out of memory buffering its frames");
        return;
    }
    if (nread < 0) {
        ro__conn_close(c, nread == UV_EOF ? "disconnected" : uv_strerror((int)nread));
        return;
    }
    ro__frame_reader_commit(&c->rd, (size_t)nread);
    /* Descriptors that came with the bytes wait for the owner to take them
     * (ro__conn_take_fds); a peer that sends more than a welcome carries
     * holds no more of our descriptor table. */
    if (c->local && c->h.pipe.ipc && uv_pipe_pending_count(&c->h.pipe) > RO_SHARED_FDS_MAX) {
        c->broken = true;
        ro__conn_fail(c, RO_EPROTO, "it sent more than %d file descriptors", RO_SHARED_FDS_MAX);
        return;
    }
    while (!c->closing) {
        ro_frame_t *f = NULL;
        char err[256];
        if (c->o.ops->on_raw || c->gated) {
            const uint8_t *body;
            size_t len;
            int prc = ro__frame_reader_peek(&c->rd, &body, &len, err, sizeof err);
            if (prc == 0)
                return;
            /* Before its hello, strings the decoder would cut at a NUL: a
             * token is compared whole (wire/checks.h). */
            int hrc = prc > 0 && c->gated ? ro__check_hello_bytes(body, len, err, sizeof err) : 0;
            if (hrc) {
                c->broken = true;
                ro__conn_fail(c, hrc, "%s", err);
                return;
            }
            if (prc > 0 && c->o.ops->on_raw && c->o.ops->on_raw(c, body, len)) {
                if (!c->closing)
                    ro__frame_reader_skip(&c->rd);
                continue;
            }
        }
        int rc = ro__frame_reader_next(&c->rd, &f, err, sizeof err);
        if (rc == 0)
            return;
        if (rc < 0) {
            c->broken = true;
            ro__conn_fail(c, rc, "%s", err);
            return;
        }
        bool keep = false;
        c->o.ops->on_frame(c, f, &keep);
        if (!keep)
            ro__frame_free(c->o.alloc, f);
    }
}

size_t ro__conn_read_now(ro_conn_t *c)
{
    uv_os_fd_t fd;
    if (c->closing || !c->open || !uv_is_readable(&c->h.stream) || uv_fileno(&c->h.handle, &fd))
        return 0;
    if (c->local && c->h.pipe.ipc)
        return 0; /* descriptors may come with the bytes: libuv's read takes them */
    uv_buf_t b;
    on_alloc(&c->h.handle, 0, &b);
    if (!b.base)
        return 0; /* no room: the loop's own read reports it */
    ssize_t n;
    do
        n = recv(fd, b.base, b.len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    /* As libuv would have read it: bytes, the end of the stream, an error. */
    on_read(&c->h.stream, n > 0 ? n : n == 0 ? UV_EOF : uv_translate_sys_error(errno), &b);
    return n > 0 ? (size_t)n : 0;
}

/* The peer's address as "ip:port" ("[ip]:port" for IPv6); a Unix-domain
 * peer has no name of its own: the socket's path ("unix:PATH"). */
static void name_peer(ro_conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char path[RO_ADDR_UNIX_MAX + 1];
    size_t plen = sizeof path;
    if (c->local) {
        if (uv_pipe_getpeername(&c->h.pipe, path, &plen) != 0 || plen == 0) {
            plen = sizeof path; /* an accepted peer is unnamed: our end's path */
            if (uv_pipe_getsockname(&c->h.pipe, path, &plen) != 0)
                plen = 0;
        }
        snprintf(c->peer, sizeof c->peer, "unix:%.*s", (int)plen, path);
    } else if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0)
        ro__addr_format((struct sockaddr *)&ss, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "?");
}

static void setup(ro_conn_t *c, const ro_conn_opts_t *o)
{
    c->o = *o;
    c->closing = false;
    c->broken = false;
    c->why[0] = '\0';
    c->gate_link = (ro_ilink_t){0};
    c->gated = false;
    c->h.handle.data = c;
    c->creq.data = c;
}

/* Once connected (either way): low latency, dead links noticed, reading. */
static int start(ro_conn_t *c)
{
    if (!c->local) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        /* A peer behind a cut link is closed in seconds, both ends. */
        if (ro__tcp_liveness(&c->h.tcp) != 0)
            ro__conn_log(c, "warning: could not set TCP keepalive; a cut link may go unnoticed");
    }
    return uv_read_start(&c->h.stream, on_alloc, on_read);
}

int ro__conn_accept(ro_conn_t *c, uv_loop_t *loop, int fd, const ro_conn_opts_t *o)
{
    setup(c, o);
    int rc = ro__frame_reader_init(&c->rd, o->max_frame, o->alloc);
    if (rc) {
        close(fd);
        return rc;
    }
    ro__frame_reader_set_budget(&c->rd, o->budget);
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof ss;
    c->local = getsockname(fd, (struct sockaddr *)&ss, &sslen) == 0 && ss.ss_family == AF_UNIX;
    if ((rc = c->local ? uv_pipe_init(loop, &c->h.pipe, 0) : uv_tcp_init(loop, &c->h.tcp)) != 0) {
        ro__frame_reader_free(&c->rd);
        close(fd);
        return RO_EIO;
    }
    c->open = true;
    if ((rc = c->local ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd)) != 0) {
        close(fd);
        ro__conn_close(c, uv_strerror(rc));
        return 0; /* on_closed follows */
    }
    name_peer(c);
    snprintf(c->label, sizeof c->label, "%s", c->peer);
    if ((rc = start(c)) != 0)
        ro__conn_close(c, uv_strerror(rc));
    return 0;
}

static void on_connect(uv_connect_t *req, int status)
{
    ro_conn_t *c = req->data;
    if (status == UV_ECANCELED || c->closing)
        return; /* closed while connecting: on_closed tells */
    if (status == 0) {
        name_peer(c);
        status = start(c);
    }
    if (status != 0) {
        char why[200];
        snprintf(why, sizeof why, "cannot connect: %s", uv_strerror(status));
        ro__conn_close(c, why);
    }
    if (c->o.ops->on_connect)
        c->o.ops->on_connect(c, status);
}

int ro__conn_connect(ro_conn_t *c, uv_loop_t *loop, const struct sockaddr *sa,
                     const ro_conn_opts_t *o)
{
    setup(c, o);
    int rc = ro__frame_reader_init(&c->rd, o->max_frame, o->alloc);
    if (rc)
        return rc;
    ro__frame_reader_set_budget(&c->rd, o->budget);
    c->local = sa->sa_family == AF_UNIX;
    /* An IPC pipe: libuv reads it with recvmsg and keeps the descriptors a
     * node's welcome carries (ro__conn_take_fds); a plain read drops them. */
    if ((c->local ? uv_pipe_init(loop, &c->h.pipe, 1) : uv_tcp_init(loop, &c->h.tcp)) != 0) {
        ro__frame_reader_free(&c->rd);
        return RO_EIO;
    }
    c->open = true;
    if (c->local) {
        /* uv_pipe_connect reports every outcome through on_connect. */
        uv_pipe_connect(&c->creq, &c->h.pipe, ((const struct sockaddr_un *)sa)->sun_path,
                        on_connect);
        return 0;
    }
    rc = uv_tcp_connect(&c->creq, &c->h.tcp, sa, on_connect);
    if (rc != 0) {
        /* e.g. no route to the host: no callback comes; the handle must
         * still be closed, which reports through on_closed. */
        char why[200];
        snprintf(why, sizeof why, "cannot connect: %s", uv_strerror(rc));
        ro__conn_close(c, why);
        return 0;
    }
    return 0;
}
