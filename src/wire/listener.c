#include "wire/listener.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

/* Before binding "unix:PATH": a socket file left by a process that died is
 * removed; a live one (something accepts on it) or any other file is
 * refused, never deleted. */
static int clear_stale_socket(const struct sockaddr_un *un, const char *flag, const char *spec,
                              char *err, size_t errlen)
{
    struct stat st;
    if (lstat(un->sun_path, &st) != 0)
        return 0; /* nothing there (or bind will say why not) */
    if (!S_ISSOCK(st.st_mode))
        return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': the path exists and is not a socket",
                          flag, spec);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec, strerror(errno));
    int rc = connect(fd, (const struct sockaddr *)un, sizeof *un);
    int e = errno;
    close(fd);
    if (rc == 0 || e != ECONNREFUSED)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "%s '%s': another process listens on this socket%s%s", flag, spec,
                          rc == 0 ? "" : ": ", rc == 0 ? "" : strerror(e));
    if (unlink(un->sun_path) != 0 && errno != ENOENT)
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': cannot remove the stale socket: %s", flag,
                          spec, strerror(errno));
    return 0;
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
    const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;
    bool local = ss.ss_family == AF_UNIX;
    if (local && (rc = clear_stale_socket(un, flag, spec, err, errlen)) != 0)
        return rc;
    int one = 1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || (!local && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&ss, ro__addr_len((struct sockaddr *)&ss)) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec,
                          uv_strerror(uv_translate_sys_error(e)));
    }
    struct stat st;
    if (local) {
        memcpy(l->unix_path, un->sun_path, sizeof l->unix_path); /* both 108, NUL inside */
        if (stat(un->sun_path, &st) == 0) { /* the file bind made: ours to remove */
            l->unix_dev = st.st_dev;
            l->unix_ino = st.st_ino;
        }
    }
    /* Owner-only before anyone may connect: other users on the host cannot
     * reach a Unix-domain listener (a token still applies if given). */
    if ((local && chmod(un->sun_path, 0600) != 0) || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        if (local)
            unlink(l->unix_path);
        l->unix_path[0] = '\0';
        return ro__errorf(err, errlen, RO_EIO, "%s '%s': %s", flag, spec,
                          uv_strerror(uv_translate_sys_error(e)));
    }
    l->fd = fd;
    if ((rc = uv_poll_init_socket(loop, &l->poll, fd)) != 0) {
        close(fd);
        if (l->unix_path[0])
            unlink(l->unix_path);
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

/* remove_socket_file unlinks our socket file, if the path still names it:
 * a file removed since and replaced by another node's socket (or anything
 * else) is left alone. (A node starting at the path between the lstat and
 * the unlink finds our socket still listening and refuses; only a third
 * party removing our file in that window could race us.) */
static void remove_socket_file(const ro_listener_t *l)
{
    struct stat st;
    if (lstat(l->unix_path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_dev != l->unix_dev ||
        st.st_ino != l->unix_ino)
        return;
    if (unlink(l->unix_path) != 0 && errno != ENOENT)
        fprintf(stderr, "%s: warning: cannot remove the socket file %s: %s\n", l->program,
                l->unix_path, strerror(errno));
}

void ro__listener_close(ro_listener_t *l)
{
    if (!l->open || l->closing)
        return;
    l->closing = true;
    if (l->unix_path[0])
        remove_socket_file(l);
    uv_close((uv_handle_t *)&l->poll, on_poll_closed);
    uv_close((uv_handle_t *)&l->pause, NULL);
}
