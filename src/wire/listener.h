/*
 * The one listening socket (the node's hub, rollout-replay --serve): it
 * binds, listens and accepts itself, so that every accept error is seen.
 * libuv's own listener answers EMFILE (out of file descriptors) by
 * accepting and closing waiting connections without telling its owner;
 * here the error is logged (at most once a second), accepting pauses for
 * RO_LISTENER_PAUSE_MS (waiting connections stay in the kernel's backlog)
 * and the connections already open go on being served.
 *
 * Loop thread only.
 */
#ifndef RO_LISTENER_H
#define RO_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include <uv.h>

/* How long accepting pauses after an error such as EMFILE. */
#define RO_LISTENER_PAUSE_MS 100

typedef struct ro_listener ro_listener_t;

/* An accepted or connected stream socket, TCP or Unix-domain ("unix:PATH"),
 * as each libuv handle type sees it. */
typedef union ro_stream_socket {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_stream_t stream;
    uv_handle_t handle;
} ro_stream_socket_t;

/* A connection was accepted: fd is the owner's from now on (ro__conn_accept
 * takes it, and closes it if it fails). */
typedef void (*ro_listener_cb)(ro_listener_t *l, int fd);

struct ro_listener {
    uv_poll_t poll;
    uv_timer_t pause;
    int fd;
    ro_listener_cb cb;
    void *data; /* the owner's */
    const char *program;
    bool open, closing;
    /* Accept errors: logged at most once a second. */
    uint64_t last_log_ns; /* when the last line was written; 0: never */
    uint64_t unlogged;    /* errors since that line */
    uint64_t errors;      /* in all */
    char unix_path[108];  /* "unix:PATH": the socket file, removed at close; "" otherwise */
    /* The socket file we bound (its device and inode): removed at close only
     * if the path still names it, not another node's socket made there since. */
    dev_t unix_dev;
    ino_t unix_ino;
};

/*
 * ro__listener_open binds l to spec ("HOST:PORT", port 0: any free one;
 * flag names it in messages) and listens, calling cb for each accepted
 * connection (l->data = data; log lines start "<program>: "). A
 * non-loopback address is refused unless off_loopback_ok (a token protects
 * the listener); "unix:PATH" is local. Its socket file is made owner-only,
 * replaces a stale one (no process accepts on it), never another file or a
 * live socket, and is removed at close. The bound address is written to
 * bound ("127.0.0.1:40123", "unix:PATH").
 * Returns 0, or a negative code with one line in err (a handle it made
 * may still finish closing on the loop).
 */
int ro__listener_open(ro_listener_t *l, uv_loop_t *loop, const char *spec, const char *flag,
                      bool off_loopback_ok, const char *program, ro_listener_cb cb, void *data,
                      char *bound, size_t boundlen, char *err, size_t errlen);

/* ro__listener_close stops listening and closes the socket; its handles
 * finish closing on the loop. Idempotent. */
void ro__listener_close(ro_listener_t *l);

#endif
