/*
 * Addresses as users write them: "HOST:PORT", HOST a name, a dotted IPv4
 * address or an IPv6 address in brackets ("[::1]:5555"). The one parser of
 * --listen, --connect and --serve; names resolve with libuv's getaddrinfo.
 */
#ifndef RO_ADDR_H
#define RO_ADDR_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

typedef struct ro_addr {
    char host[256]; /* without brackets */
    int port;
} ro_addr_t;

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

/* ro__addr_resolve_start starts resolving a without waiting; cb gets the
 * result (free it with uv_freeaddrinfo). Loop thread. Returns 0 or a libuv
 * error (no callback then). */
int ro__addr_resolve_start(uv_loop_t *loop, uv_getaddrinfo_t *req, const ro_addr_t *a,
                           uv_getaddrinfo_cb cb);

/* ro__addr_set_port writes the port into a resolved address. */
void ro__addr_set_port(struct sockaddr_storage *ss, int port);

/* ro__addr_is_loopback tells whether sa is 127.0.0.0/8 or ::1. */
bool ro__addr_is_loopback(const struct sockaddr *sa);

/* ro__addr_format writes sa as "ip:port" ("[ip]:port" for IPv6). */
void ro__addr_format(const struct sockaddr *sa, char *buf, size_t len);

#endif
