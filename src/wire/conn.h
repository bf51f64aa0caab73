/*
 * One protocol connection over TCP, either end: the node's learner sessions
 * (accepted), rollout-learner's links to nodes (connected) and
 * rollout-replay --serve. It owns the socket, reads and decodes frames
 * (bounded reader and allocator), writes frames with a bounded send queue,
 * sets TCP_NODELAY and dead-link detection (tcp_liveness.h), and closes.
 * What the frames mean is the owner's business: it gets them through
 * ro_conn_ops_t.
 *
 * Loop thread only. The owner embeds a ro_conn_t and finds itself with
 * c->o.owner (or container_of).
 */
#ifndef RO_CONN_H
#define RO_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "runtime/ilist.h"
#include "wire/addr.h"
#include "wire/frame.h"
#include "wire/listener.h"
#include "wire/pb_alloc.h"

#define RO_CONN_READ_CHUNK 65536

typedef struct ro_conn ro_conn_t;

typedef struct ro_conn_ops {
    /* A frame arrived. Set *keep to keep it (free it later with
     * ro__frame_free and c->alloc); otherwise it is freed on return. May
     * close c. */
    void (*on_frame)(ro_conn_t *c, ro_frame_t *f, bool *keep);
    /* Optional, called first with each frame's bytes (no length prefix;
     * valid during the call): return true if it was handled in place (not
     * decoded then). May close c. */
    bool (*on_raw)(ro_conn_t *c, const uint8_t *body, size_t len);
    /* ro__conn_connect finished: status 0, or a libuv error (the
     * connection is then closing). NULL for accepted connections. */
    void (*on_connect)(ro_conn_t *c, int status);
    /* The socket is closed and released: c may be freed or reused. c->why
     * says why it closed. Called exactly once per accept or connect. */
    void (*on_closed)(ro_conn_t *c);
} ro_conn_ops_t;

/* The bytes a connection may have queued for writing before its peer is a
 * slow reader (it has stopped reading) and is closed: every program's
 * max_queued, sized to a few of the largest frames any of them sends. */
#define RO_CONN_MAX_QUEUED (64u << 20)

typedef struct ro_conn_opts {
    const ro_conn_ops_t *ops;
    void *owner;
    const char *program;       /* log lines start "<program>: <label>: " */
    size_t max_frame;          /* largest frame accepted (ro__conn_set_max_frame changes it) */
    size_t max_queued;         /* bytes queued for writing before the peer is a slow reader */
    ro_pb_alloc_t *alloc;      /* decodes its frames; the owner's, outlives them */
    ro_frame_budget_t *budget; /* shared by the owner's connections (frame.h), or NULL */
} ro_conn_opts_t;

struct ro_conn {
    /* The socket: TCP, or a Unix-domain socket ("unix:PATH"); the same
     * stream either way. */
    ro_stream_socket_t h;
    bool local; /* h is the pipe */
    uv_connect_t creq;
    /* As given to ro__conn_accept or ro__conn_connect (o.max_frame is the
     * first limit; the reader's, rd.max_frame, is the one in force). */
    ro_conn_opts_t o;
    ro_frame_reader_t rd;
    bool open;    /* between accept/connect and on_closed */
    bool closing; /* ro__conn_close or ro__conn_fail was called */
    /* ro__conn_fail's last words: frames queued before its Error frame
     * are flushed (uv_shutdown) before the socket closes, for at most
     * RO_CONN_LINGER_MS, so that the peer reads why it was closed.
     * Loop thread only. */
    uv_shutdown_t linger_req;
    uv_timer_t linger;
    bool lingering;
    uint8_t closes_left; /* handles still closing before on_closed */
    /* The peer broke the connection's rules (bytes that are not frames, a
     * frame over its limit or the budget) or its owner's (wire/gate.h: no
     * hello in time): closed for that, the reason logged and sent. */
    bool broken;
    char peer[116];  /* the peer's address, "ip:port" or "unix:PATH" */
    char label[192]; /* names the peer in logs; the owner may rewrite it (raw: logs escape it) */
    char why[256];   /* why the connection closed: may hold the peer's words, escape to print */
    /* The owner's gate (wire/gate.h) while the peer has not said hello. */
    ro_ilink_t gate_link;
    uint64_t gate_since_ns; /* when it entered the gate */
    bool gated;
};

/* ro__conn_accept takes fd, a connection accepted on loop (wire/listener.h),
 * and starts reading. Returns 0 (the connection reads and will call
 * on_closed), or a negative code (fd closed, nothing else to close). */
int ro__conn_accept(ro_conn_t *c, uv_loop_t *loop, int fd, const ro_conn_opts_t *o);

/* ro__conn_connect starts connecting to sa; on_connect tells how it went.
 * Returns 0, or a negative code (no callback will come). */
int ro__conn_connect(ro_conn_t *c, uv_loop_t *loop, const struct sockaddr *sa,
                     const ro_conn_opts_t *o);

/* How long a failed connection may take to flush its last frames (the
 * Error frame among them) to a peer that reads slowly, before it closes. */
#define RO_CONN_LINGER_MS 2000

/* ro__conn_send encodes and queues f. Returns 0; RO_EIO if the connection
 * is closing or the write failed; RO_ENOBUFS if the peer has stopped
 * reading (over max_queued bytes waiting): the caller should close it. */
int ro__conn_send(ro_conn_t *c, const ro_frame_t *f);

/* ro__conn_read_now reads what the socket holds now, without waiting for
 * the loop to poll it, and hands it on exactly as the loop's read would
 * (frames to on_frame/on_raw; the end of the stream or an error closes c).
 * Why: a peer that answers within one of our turns (a SEED learner whose
 * next frame came while it computed the last) saves a turn of the loop and
 * its epoll_wait per frame. Loop thread, outside c's callbacks. Returns the
 * bytes read (0: nothing was there, or c is not reading). */
size_t ro__conn_read_now(ro_conn_t *c);

/* ro__conn_send_fds is ro__conn_send for a frame that carries nfds (at
 * most RO_SHARED_FDS_MAX) file descriptors over a Unix-domain connection
 * (SCM_RIGHTS, attached to its first byte): the node's welcome handing its
 * learner shared memory. The peer gets its own descriptors; ours stay
 * ours. Only before anything else is queued: RO_ENOBUFS otherwise, or if
 * the socket takes nothing now; RO_EINVAL on TCP. */
int ro__conn_send_fds(ro_conn_t *c, const ro_frame_t *f, const int *fds, unsigned nfds);

/* ro__conn_take_fds moves the file descriptors that came with the frames
 * read so far on a connection we made to a Unix-domain socket (the
 * welcome's, in the order sent) into fds, up to max (more are closed), and
 * returns how many. The caller closes them. A peer that sends more than
 * RO_SHARED_FDS_MAX before they are taken is closed for it. */
unsigned ro__conn_take_fds(ro_conn_t *c, int *fds, unsigned max);

/* A vectored send's completion: called once its bytes were handed to the
 * kernel, or the connection closed first (status < 0). */
typedef void (*ro_conn_written_fn)(void *ctx, int status);

/*
 * ro__conn_send_bufs queues bytes already framed by the caller (a frame
 * laid out over several buffers, so that large arrays go out from where
 * they lie, without a copy). The buffers must stay valid until written is
 * called (also when this returns 0 and the connection closes). Returns
 * as ro__conn_send; on an error written is not called.
 */
int ro__conn_send_bufs(ro_conn_t *c, const uv_buf_t *bufs, unsigned nbufs,
                       ro_conn_written_fn written, void *ctx);

/* ro__conn_set_max_frame changes the largest frame c accepts from now on
 * (a frame whose prefix was read already is held to the new limit). */
static inline void ro__conn_set_max_frame(ro_conn_t *c, size_t max_frame)
{
    c->rd.max_frame = max_frame;
}

/* ro__conn_queued returns the bytes accepted for writing, not yet sent. */
size_t ro__conn_queued(const ro_conn_t *c);

/* ro__conn_log writes one line "<program>: <label>: <message>" to stderr,
 * label and message escaped (runtime/text.h): they may hold a peer's words. */
__attribute__((format(printf, 2, 3))) void ro__conn_log(const ro_conn_t *c, const char *fmt, ...);

/* ro__conn_fail tells the peer why (an Error frame with code), logs it and
 * closes. */
__attribute__((format(printf, 3, 4))) void ro__conn_fail(ro_conn_t *c, int code, const char *fmt,
                                                         ...);

/* ro__conn_goodbye sends a Goodbye with reason and, if env_steps is not
 * NULL, the env steps taken with the connection's answers (the caller
 * closes). */
int ro__conn_goodbye(ro_conn_t *c, const char *reason, const uint64_t *env_steps);

/* ro__conn_close stops reading and closes; on_closed follows. Idempotent. */
void ro__conn_close(ro_conn_t *c, const char *why);

#endif
