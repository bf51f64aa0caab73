/*
 * Addresses as users write them: "HOST:PORT", HOST a name, a dotted IPv4
 * address or an IPv6 address in brackets ("[::1]:5555"), or "unix:PATH", a
 * Unix-domain socket (a node and its learners on one host: the same frames
 * without TCP's per-packet work). The one parser of --listen, --connect and
 * --serve; names resolve with libuv's getaddrinfo.
 */
#ifndef RO_ADDR_H
#define RO_ADDR_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

typedef struct ro_addr {
    char host[256]; /* without brackets; the socket's path for "unix:PATH" */
    int port;       /* -1 for "unix:PATH" */
} ro_addr_t;

/* The longest PATH of "unix:PATH" (sockaddr_un's sun_path, less its NUL). */
#define RO_ADDR_UNIX_MAX 107

/*
 * ro__addr_parse splits spec into host and port. port0_ok allows port 0
 * (a listener: the kernel picks one). flag names the flag in messages.
 * Returns 0 or RO_EINVAL with one line in err.
 */
int ro__addr_parse(const char *spec, bool port0_ok, ro_addr_t *out, const char *flag, char *err,
                   size_t errlen);

/*
 * ro__addr_resolve finds a's first address (IPv4 or IPv6) into ss, waiting
 * for the lookup: for start-up, before the loop runs (a numeric host needs
 * no lookup). Returns 0 or RO_ENOENT with one line in err.
 */
int ro__addr_resolve(uv_loop_t *loop, const ro_addr_t *a, struct sockaddr_storage *ss,
                     const char *flag, char *err, size_t errlen);

/* ro__addr_set_port writes the port into a resolved address. */
void ro__addr_set_port(struct sockaddr_storage *ss, int port);

/* ro__addr_len: the length of a resolved address, for bind and connect. */
unsigned ro__addr_len(const struct sockaddr *sa);

/* ro__addr_is_loopback tells whether sa is 127.0.0.0/8, ::1 or a Unix-domain
 * socket (only this host can reach any of them). */
bool ro__addr_is_loopback(const struct sockaddr *sa);

/* ro__addr_format writes sa as "ip:port" ("[ip]:port" for IPv6, "unix:PATH"). */
void ro__addr_format(const struct sockaddr *sa, char *buf, size_t len);

#endif
