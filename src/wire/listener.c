#include "wire/listener.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "wire/addr.h"

static void on_poll(uv_poll_t *p, int status, int events);
void ro__listener_close(ro_listener_t *l);

/* Counts an accept error and says so, at most once a second. */
static void accept_error(ro_listener_t *l, int sys_errno)
{
    l->errors++;
    l->unlogged++;
    uint64_t now = ro__now_ns();
    if (l->last_log_ns && now - l->last_log_ns < 1000000000ull)
        return; /* a burst is one line a second, not one per peer */
    fprintf(stderr,
            "%s: cannot accept a connection: %s (%llu since the last message); still serving "
            "the connections already open\n",
            l->program, uv_strerror(uv_translate_sys_error(sys_errno)),
            (unsigned long long)l->unlogged);
    l->unlogged = 0;
    l->last_log_ns = now;
}

static void on_pause_over(uv_timer_t *t)
{
    ro_listener_t *l = t->data;
    int rc = l->closing ? 0 : uv_poll_start(&l->poll, UV_READABLE, on_poll);
    if (rc) /* cannot happen for a socket we polled before; say so if it does */
        fprintf(stderr, "%s: cannot listen again: %s; no more connections are accepted\n",
                l->program, uv_strerror(rc));
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    ro_listener_t *l = p->data;
    (void)events;
    while (status == 0 && !l->closing) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            l->cb(l, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        /* EMFILE, ENFILE, ENOBUFS...: the waiting connections stay in the
         * backlog; look again after a pause, not in a busy loop. */
        accept_error(l, errno);
        break;
    }
    if (!l->closing) {
        uv_poll_stop(&l->poll);
        uv_timer_start(&l->pause, on_pause_over, RO_LISTENER_PAUSE_MS, 0);
    }
}

static void on_poll_closed(uv_handle_t *h)
{
    ro_listener_t *l = h->data;
    close(l->fd); /* only now: never while it is polled */
    l->fd = -1;
}

int ro__listener_open(ro_listener_t *l, uv_loop_t *loop, const char *spec, const char *flag,
                      bool off_loopback_ok, const char *program, ro_listener_cb cb, void *data,
                      char *bound, size_t boundlen, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->cb = cb;
    l->data = data;
    l->program = program;
    ro_addr_t a;
    struct sockaddr_storage ss;
    int rc = ro__addr_parse(spec, true, &a, flag, err, errlen);
    if (rc == 0)
        rc = ro__addr_resolve(loop, &a, &ss, flag, err, errlen);
    if (rc)
        return rc;
    if (!off_loopback_ok && !ro__addr_is_loopback((struct sockaddr *)&ss))
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s '%s' is not a loopback address: a --token-file is required so that "
                          "only your learners can attach",
                          flag, spec);
    socklen_t sslen =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int one = 1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec,
                          uv_strerror(uv_translate_sys_error(e)));
    }
    l->fd = fd;
    if ((rc = uv_poll_init_socket(loop, &l->poll, fd)) != 0) {
        close(fd);
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec, uv_strerror(rc));
    }
    l->poll.data = l;
    uv_timer_init(loop, &l->pause); /* timers cannot fail to initialise */
    l->pause.data = l;
    l->open = true;
    if ((rc = uv_poll_start(&l->poll, UV_READABLE, on_poll)) != 0) {
        ro__listener_close(l);
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec, uv_strerror(rc));
    }
    struct sockaddr_storage got;
    socklen_t glen = sizeof got;
    if (getsockname(fd, (struct sockaddr *)&got, &glen) == 0)
        ro__addr_format((struct sockaddr *)&got, bound, boundlen);
    else
        snprintf(bound, boundlen, "%s", spec);
    return 0;
}

void ro__listener_close(ro_listener_t *l)
{
    if (!l->open || l->closing)
        return;
    l->closing = true;
    uv_close((uv_handle_t *)&l->poll, on_poll_closed);
    uv_close((uv_handle_t *)&l->pause, NULL);
}
