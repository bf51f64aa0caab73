/*
 * A read-only HTTP/1.x endpoint that serves one path (the Prometheus
 * endpoint, --prometheus ADDR: GET /metrics). It is on the hostile-input
 * list like every socket, so it is small and bounded:
 *   - at most RO_HTTP_MAX_CONNS connections at once; one more is closed at
 *     accept (Prometheus scrapes one request at a time);
 *   - a request's head (request line and headers) at most
 *     RO_HTTP_MAX_REQUEST bytes, else 431; the whole exchange within
 *     RO_HTTP_TIMEOUT_MS of the accept, else the connection is closed
 *     (a peer that sends slowly holds nothing for long);
 *   - GET and HEAD of the path only: another method is 405 (with Allow),
 *     another path 404, a request line that is not HTTP/1.0 or HTTP/1.1
 *     or holds control bytes 400, another HTTP version 505;
 *   - one request a connection ("Connection: close"): the response is
 *     written, the connection shut down and drained, then closed.
 * The body comes from the owner's render callback at each request, on the
 * loop thread, so it shows the counters of that moment.
 *
 * Loop thread only.
 */
#ifndef RO_HTTP_ENDPOINT_H
#define RO_HTTP_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "wire/listener.h"

#define RO_HTTP_MAX_CONNS 16
#define RO_HTTP_MAX_REQUEST 8192
#define RO_HTTP_TIMEOUT_MS 10000

/* Writes the body (text) to out. Loop thread. */
typedef void (*ro_http_render_fn)(void *ctx, FILE *out);

typedef struct ro_http ro_http_t;

typedef struct ro_http_conn {
    ro_stream_socket_t h;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    ro_http_t *srv;
    int state;      /* a value of the enum in http_endpoint.c; 0: the slot is free */
    int handles;    /* of h and timer, not yet closed */
    bool peer_done; /* the peer closed its side while the response was written */
    char *resp;     /* the response being written (malloc'd), or NULL */
    size_t len;     /* bytes of req */
    char req[RO_HTTP_MAX_REQUEST];
} ro_http_conn_t;

struct ro_http {
    ro_listener_t listener;
    uv_loop_t *loop;
    const char *path; /* the one path served, e.g. "/metrics" */
    const char *content_type;
    ro_http_render_fn render;
    void *ctx;
    bool open;
    char bound[128]; /* "127.0.0.1:9100", "unix:PATH" */
    ro_http_conn_t conns[RO_HTTP_MAX_CONNS];
    /* Counts, for the owner's metrics and tests. */
    uint64_t served;   /* 200 responses */
    uint64_t refused;  /* 4xx/5xx responses */
    uint64_t busy;     /* connections closed at accept: all slots taken */
    uint64_t timeouts; /* connections closed by the timeout */
};

/*
 * ro__http_open listens on spec ("HOST:PORT", port 0: a free one;
 * "unix:PATH"), flag naming it in messages and log lines starting
 * "<program>: ". Any address is allowed: the endpoint only reads out
 * counters (docs/operations.md says who can reach it). The bound address
 * is in s->bound. Returns 0, or a negative code with one line in err.
 */
int ro__http_open(ro_http_t *s, uv_loop_t *loop, const char *spec, const char *flag,
                  const char *program, const char *path, const char *content_type,
                  ro_http_render_fn render, void *ctx, char *err, size_t errlen);

/* ro__http_close stops listening and closes every connection; the handles
 * finish closing on the loop (s must live until it has run). Idempotent. */
void ro__http_close(ro_http_t *s);

#endif
