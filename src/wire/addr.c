#include "wire/addr.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "runtime/error.h"

int ro__addr_parse(const char *spec, bool port0_ok, ro_addr_t *out, const char *flag, char *err,
                   size_t errlen)
{
    if (strncmp(spec, "unix:", 5) == 0) {
        size_t n = strlen(spec + 5);
        if (n == 0 || n > RO_ADDR_UNIX_MAX)
            return ro__errorf(err, errlen, RO_EINVAL,
                              "%s '%s': expected unix:PATH, PATH a socket file of 1 to %d bytes",
                              flag, spec, RO_ADDR_UNIX_MAX);
        memcpy(out->host, spec + 5, n + 1);
        out->port = -1;
        return 0;
    }
    const char *colon = strrchr(spec, ':');
    const char *host = spec;
    size_t hlen = colon ? (size_t)(colon - spec) : 0;
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') { /* [v6]:port */
        host++;
        hlen -= 2;
    } else if (colon && memchr(spec, ':', hlen)) {
        goto bad; /* a bare IPv6 address: its port would be ambiguous */
    }
    if (!colon || hlen == 0 || hlen >= sizeof out->host)
        goto bad;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || port < (port0_ok ? 0 : 1) ||
        port > 65535)
        goto bad;
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = (int)port;
    return 0;
bad:
    return ro__errorf(err, errlen, RO_EINVAL,
                      "%s '%s': expected HOST:PORT (a name, an IPv4 address or [IPv6]) and a port "
                      "in [%d, 65535], or unix:PATH",
                      flag, spec, port0_ok ? 0 : 1);
}

void ro__addr_set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static const struct addrinfo hints = {
    .ai_family = AF_UNSPEC,
    .ai_socktype = SOCK_STREAM,
    .ai_flags = AI_ADDRCONFIG,
};

int ro__addr_resolve(uv_loop_t *loop, const ro_addr_t *a, struct sockaddr_storage *ss,
                     const char *flag, char *err, size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    if (a->port < 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, a->host, strlen(a->host) + 1); /* parse bounded it */
        return 0;
    }
    if (uv_ip4_addr(a->host, a->port, (struct sockaddr_in *)ss) == 0 ||
        uv_ip6_addr(a->host, a->port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    uv_getaddrinfo_t req;
    int rc = uv_getaddrinfo(loop, &req, NULL, a->host, NULL, &hints); /* no callback: waits */
    if (rc != 0 || !req.addrinfo)
        return ro__errorf(err, errlen, RO_ENOENT, "%s: cannot resolve '%s': %s", flag, a->host,
                          rc ? uv_strerror(rc) : "no address");
    memcpy(ss, req.addrinfo->ai_addr, req.addrinfo->ai_addrlen);
    uv_freeaddrinfo(req.addrinfo);
    ro__addr_set_port(ss, a->port);
    return 0;
}

unsigned ro__addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6  ? sizeof(struct sockaddr_in6)
           : sa->sa_family == AF_UNIX ? sizeof(struct sockaddr_un)
                                      : sizeof(struct sockaddr_in);
}

bool ro__addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_UNIX)
        return true;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        static const unsigned char lo6[16] = {[15] = 1};
        return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, lo6, 16) == 0;
    }
    return false;
}

void ro__addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[48] = "?";
    if (sa->sa_family == AF_INET) {
        uv_ip4_name((const struct sockaddr_in *)sa, ip, sizeof ip);
        snprintf(buf, len, "%s:%d", ip, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        uv_ip6_name((const struct sockaddr_in6 *)sa, ip, sizeof ip);
        snprintf(buf, len, "[%s]:%d", ip, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    } else if (sa->sa_family == AF_UNIX) {
        snprintf(buf, len, "unix:%s", ((const struct sockaddr_un *)sa)->sun_path);
    } else {
        snprintf(buf, len, "?");
    }
}
