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
 * c->owner (or container_of).
 */
#ifndef RO_CONN_H
#define RO_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "wire/addr.h"
#include "wire/frame.h"
#include "wire/pb_alloc.h"

#define RO_CONN_READ_CHUNK 65536

typedef struct ro_conn ro_conn_t;

typedef struct ro_conn_ops {
    /* A frame arrived. Set *keep to keep it (free it later with
     * ro__frame_free and c->alloc); otherwise it is freed on return. May
     * close c. */
    void (*on_frame)(ro_conn_t *c, ro_frame_t *f, bool *keep);
    /* ro__conn_connect finished: status 0, or a libuv error (the
     * connection is then closing). NULL for accepted connections. */
    void (*on_connect)(ro_conn_t *c, int status);
    /* The socket is closed and released: c may be freed or reused. c->why
     * says why it closed. Called exactly once per accept or connect. */
    void (*on_closed)(ro_conn_t *c);
} ro_conn_ops_t;

typedef struct ro_conn_opts {
    const ro_conn_ops_t *ops;
    void *owner;
    const char *program;  /* log lines start "<program>: <label>: " */
    size_t max_frame;     /* largest frame accepted */
    size_t max_queued;    /* bytes queued for writing before the peer is a slow reader */
    ro_pb_alloc_t *alloc; /* decodes its frames; the owner's, outlives them */
} ro_conn_opts_t;

struct ro_conn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    const ro_conn_ops_t *ops;
    void *owner;
    const char *program;
    ro_pb_alloc_t *alloc;
    ro_frame_reader_t rd;
    size_t max_queued;
    bool open;       /* between accept/connect and on_closed */
    bool closing;    /* ro__conn_close was called */
    bool broken;     /* the peer sent bytes that are not frames: closed for that */
    char peer[64];   /* the peer's address, "ip:port" */
    char label[128]; /* names the peer in logs; the owner may rewrite it */
    char why[256];   /* why the connection closed */
};

/*
 * ro__conn_listen binds server to spec ("HOST:PORT", port 0: any free one;
 * flag names it in messages) and listens, calling cb for each connection
 * (server->data = data). A non-loopback address is refused unless
 * off_loopback_ok (a token protects the listener). The bound address is
 * written to bound ("127.0.0.1:40123"). Returns 0, or a negative code with
 * one line in err (the handle is then closing). Loop thread.
 */
int ro__conn_listen(uv_tcp_t *server, uv_loop_t *loop, const char *spec, const char *flag,
                    bool off_loopback_ok, uv_connection_cb cb, void *data, char *bound,
                    size_t boundlen, char *err, size_t errlen);

/* ro__conn_accept accepts a pending connection from server. Returns 0 (the
 * connection reads and will call on_closed), or a negative code (nothing
 * to close). */
int ro__conn_accept(ro_conn_t *c, uv_stream_t *server, const ro_conn_opts_t *o);

/* ro__conn_connect starts connecting to sa; on_connect tells how it went.
 * Returns 0, or a negative code (no callback will come). */
int ro__conn_connect(ro_conn_t *c, uv_loop_t *loop, const struct sockaddr *sa,
                     const ro_conn_opts_t *o);

/* ro__conn_send encodes and queues f. Returns 0; RO_EIO if the connection
 * is closing or the write failed; RO_ENOBUFS if the peer has stopped
 * reading (over max_queued bytes waiting): the caller should close it. */
int ro__conn_send(ro_conn_t *c, const ro_frame_t *f);

/* ro__conn_queued returns the bytes accepted for writing, not yet sent. */
size_t ro__conn_queued(const ro_conn_t *c);

/* ro__conn_log writes one line "<program>: <label>: <message>" to stderr. */
__attribute__((format(printf, 2, 3))) void ro__conn_log(const ro_conn_t *c, const char *fmt, ...);

/* ro__conn_fail tells the peer why (an Error frame with code), logs it and
 * closes. */
__attribute__((format(printf, 3, 4))) void ro__conn_fail(ro_conn_t *c, int code, const char *fmt,
                                                         ...);

/* ro__conn_goodbye sends a Goodbye with reason (the caller closes). */
int ro__conn_goodbye(ro_conn_t *c, const char *reason);

/* ro__conn_close stops reading and closes; on_closed follows. Idempotent. */
void ro__conn_close(ro_conn_t *c, const char *why);

#endif
