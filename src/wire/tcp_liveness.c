#include "wire/tcp_liveness.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

int ro__tcp_liveness(uv_tcp_t *tcp)
{
    uv_os_fd_t fd;
    int intvl = RO_KEEPALIVE_INTVL_S, cnt = RO_KEEPALIVE_CNT;
    unsigned ut = RO_USER_TIMEOUT_MS;
    int rc = uv_tcp_keepalive(tcp, 1, RO_KEEPALIVE_IDLE_S);
    if (rc)
        return rc;
    rc = uv_fileno((uv_handle_t *)tcp, &fd);
    if (rc)
        return rc;
    /* libuv before 1.45 sets only the idle time: the rest by hand. */
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut) != 0)
        return -errno;
    return 0;
}
