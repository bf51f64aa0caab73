#include "wire/http_endpoint.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/error.h"

enum { FREE = 0, READING, WRITING, DRAINING, CLOSING };

static void conn_close(ro_http_conn_t *c);

static void on_handle_closed(uv_handle_t *h)
{
    ro_http_conn_t *c = h->data;
    if (--c->handles == 0) {
        free(c->resp);
        c->resp = NULL;
        c->state = FREE; /* the slot may take the next connection */
    }
}

static void conn_close(ro_http_conn_t *c)
{
    if (c->state == CLOSING || c->state == FREE)
        return;
    c->state = CLOSING;
    uv_close(&c->h.handle, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_timeout(uv_timer_t *t)
{
    ro_http_conn_t *c = t->data;
    c->srv->timeouts++;
    conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    ro_http_conn_t *c = h->data;
    (void)hint;
    if (c->state != READING) { /* after the request: read and forget */
        buf->base = c->req;
        buf->len = sizeof c->req;
        return;
    }
    buf->base = c->req + c->len;
    buf->len = sizeof c->req - c->len;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    ro_http_conn_t *c = req->data;
    if (status != 0) /* the peer went first: nothing to drain */
        conn_close(c);
}

static void on_written(uv_write_t *req, int status)
{
    ro_http_conn_t *c = req->data;
    free(c->resp);
    c->resp = NULL;
    if (status != 0 || c->state != WRITING || c->peer_done) {
        conn_close(c);
        return;
    }
    /* Shut our side down, then read until the peer closes: closing with
     * unread bytes would send a reset that can destroy the response in
     * flight to it. The timeout still bounds the wait. */
    c->state = DRAINING;
    c->sreq.data = c;
    if (uv_shutdown(&c->sreq, &c->h.stream, on_shutdown) != 0)
        conn_close(c);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    default:
        return "HTTP Version Not Supported";
    }
}

/* in_memory opens a stream that writes to a malloc'd buffer (*buf, *len
 * once closed); NULL, the connection closed, when out of memory. */
static FILE *in_memory(ro_http_conn_t *c, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(buf, len);
    if (!f)
        conn_close(c);
    return f;
}

/* in_memory_done closes f, an in_memory stream on *buf: true when *buf holds
 * what was written; false, the buffer freed and the connection closed, when
 * out of memory. */
static bool in_memory_done(ro_http_conn_t *c, FILE *f, char **buf)
{
    if (fclose(f) == 0)
        return true;
    free(*buf);
    conn_close(c);
    return false;
}

/* Writes the response and stops reading the request. body: the 200's
 * (len bytes), or NULL for an error, whose body is why in one line. */
static void respond(ro_http_conn_t *c, int status, bool head, const char *body, size_t len,
                    const char *why)
{
    ro_http_t *s = c->srv;
    char *out;
    size_t outlen;
    FILE *f = in_memory(c, &out, &outlen);
    if (!f)
        return;
    if (!body) {
        body = why;
        len = strlen(why);
    }
    fprintf(f,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: "
            "close\r\n\r\n",
            status, reason(status), status == 200 ? s->content_type : "text/plain; charset=utf-8",
            len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
    if (!head)
        fwrite(body, 1, len, f);
    if (!in_memory_done(c, f, &out))
        return;
    if (status == 200)
        s->served++;
    else
        s->refused++;
    c->resp = out;
    c->state = WRITING;
    uv_buf_t b = uv_buf_init(out, (unsigned)outlen);
    c->wreq.data = c;
    if (uv_write(&c->wreq, &c->h.stream, &b, 1, on_written) != 0)
        conn_close(c);
}

/* A byte allowed in a request head: printable ASCII, tab, CR, LF. */
static bool head_byte_ok(unsigned char b)
{
    return (b >= 0x20 && b < 0x7f) || b == '\t' || b == '\r' || b == '\n';
}

/*
 * handle parses the request line of a complete head (len bytes up to its
 * blank line; headers are read past, never acted on) and answers it.
 */
static void handle(ro_http_conn_t *c, size_t len)
{
    ro_http_t *s = c->srv;
    char *p = c->req, *end = c->req + len;
    while (p < end && (*p == '\r' || *p == '\n')) /* empty lines before it (RFC 9112 2.2) */
        p++;
    for (char *q = p; q < end; q++)
        if (!head_byte_ok((unsigned char)*q)) {
            respond(c, 400, false, NULL, 0, "a control byte in the request\n");
            return;
        }
    char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) {
        respond(c, 400, false, NULL, 0, "no request line\n");
        return;
    }
    *eol = '\0';
    if (eol > p && eol[-1] == '\r')
        eol[-1] = '\0';
    char *sp1 = strchr(p, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ') || sp1 == p || sp2 == sp1 + 1) {
        respond(c, 400, false, NULL, 0, "the request line is not METHOD TARGET HTTP/1.x\n");
        return;
    }
    *sp1 = *sp2 = '\0';
    const char *method = p, *target = sp1 + 1, *version = sp2 + 1;
    if (strncmp(version, "HTTP/", 5) != 0) {
        respond(c, 400, false, NULL, 0, "the request line is not METHOD TARGET HTTP/1.x\n");
        return;
    }
    if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0) {
        respond(c, 505, false, NULL, 0, "only HTTP/1.0 and HTTP/1.1 are served\n");
        return;
    }
    bool head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        respond(c, 405, false, NULL, 0, "read-only: only GET and HEAD are served\n");
        return;
    }
    size_t plen = strcspn(target, "?"); /* a query (?name[]=...) is ignored */
    if (plen != strlen(s->path) || memcmp(target, s->path, plen) != 0) {
        char why[96];
        snprintf(why, sizeof why, "only %s is served\n", s->path);
        respond(c, 404, head, NULL, 0, why);
        return;
    }
    char *body;
    size_t blen;
    FILE *f = in_memory(c, &body, &blen);
    if (!f)
        return;
    s->render(s->ctx, f);
    if (!in_memory_done(c, f, &body))
        return;
    respond(c, 200, head, body, blen, NULL);
    free(body);
}

/* The end of a head: its blank line ("\r\n\r\n", or "\n\n" from a lax
 * client); the head's length with it, or 0 while it is incomplete. */
static size_t head_end(const char *b, size_t len)
{
    for (size_t i = 1; i < len; i++) {
        if (b[i] != '\n')
            continue;
        if (b[i - 1] == '\n')
            return i + 1;
        if (i >= 3 && b[i - 1] == '\r' && b[i - 2] == '\n' && b[i - 3] == '\r')
            return i + 1;
        if (i >= 2 && b[i - 1] == '\r' && b[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    ro_http_conn_t *c = st->data;
    (void)buf;
    if (nread == UV_EOF && c->state == WRITING) {
        c->peer_done = true; /* it half-closed after its request: answer, then close */
        return;
    }
    if (nread < 0) { /* EOF or an error: the exchange is over */
        conn_close(c);
        return;
    }
    if (c->state != READING)
        return; /* draining, or a response in flight: the bytes are dropped */
    size_t from = c->len > 3 ? c->len - 3 : 0;
    c->len += (size_t)nread;
    size_t end = head_end(c->req + from, c->len - from);
    if (end) {
        handle(c, from + end);
    } else if (c->len == sizeof c->req) {
        respond(c, 431, false, NULL, 0, "the request head is over 8192 bytes\n");
    }
}

static void on_accept(ro_listener_t *l, int fd)
{
    ro_http_t *s = l->data;
    ro_http_conn_t *c = NULL;
    for (int i = 0; i < RO_HTTP_MAX_CONNS && !c; i++)
        if (s->conns[i].state == FREE)
            c = &s->conns[i];
    if (!c) { /* every slot taken: this one goes at once */
        s->busy++;
        close(fd);
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof ss;
    bool local = getsockname(fd, (struct sockaddr *)&ss, &sslen) == 0 && ss.ss_family == AF_UNIX;
    memset(&c->h, 0, sizeof c->h);
    c->len = 0;
    c->peer_done = false;
    c->srv = s;
    int rc = local ? uv_pipe_init(s->loop, &c->h.pipe, 0) : uv_tcp_init(s->loop, &c->h.tcp);
    if (rc) {
        close(fd);
        return;
    }
    uv_timer_init(s->loop, &c->timer); /* cannot fail */
    c->h.handle.data = c->timer.data = c;
    c->handles = 2;
    c->state = READING;
    rc = local ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd);
    if (rc) {
        close(fd);
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, RO_HTTP_TIMEOUT_MS, 0);
    if (uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        conn_close(c);
}

int ro__http_open(ro_http_t *s, uv_loop_t *loop, const char *spec, const char *flag,
                  const char *program, const char *path, const char *content_type,
                  ro_http_render_fn render, void *ctx, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->path = path;
    s->content_type = content_type;
    s->render = render;
    s->ctx = ctx;
    int rc = ro__listener_open(&s->listener, loop, spec, flag, true, program, on_accept, s,
                               s->bound, sizeof s->bound, err, errlen);
    if (rc)
        return rc;
    s->open = true;
    return 0;
}

void ro__http_close(ro_http_t *s)
{
    if (!s->open)
        return;
    s->open = false;
    ro__listener_close(&s->listener);
    for (int i = 0; i < RO_HTTP_MAX_CONNS; i++)
        conn_close(&s->conns[i]);
}
