/* Error codes: 0 on success, a negative errno-like code on failure. */
#ifndef RO_ERROR_H
#define RO_ERROR_H

#include <errno.h>
#include <stddef.h>

enum {
    RO_EINVAL = -EINVAL,       /* a bad argument or value */
    RO_ENOMEM = -ENOMEM,       /* out of memory */
    RO_ENOENT = -ENOENT,       /* no such file, env or symbol */
    RO_EIO = -EIO,             /* read or write failed */
    RO_ERANGE = -ERANGE,       /* a value outside its accepted range */
    RO_EBADMSG = -EBADMSG,     /* a malformed message or file record */
    RO_ENOTSUP = -ENOTSUP,     /* not supported by this build or env */
    RO_EMSGSIZE = -EMSGSIZE,   /* a frame or record over its size limit */
    RO_EPROTO = -EPROTO,       /* a peer broke the protocol */
    RO_EACCES = -EACCES,       /* a peer presented a wrong or missing token */
    RO_ETIMEDOUT = -ETIMEDOUT, /* a peer did not answer in time */
    RO_ESHUTDOWN = -ESHUTDOWN, /* the node is stopping: do not come back */
    RO_EBUSY = -EBUSY,         /* shared: a sole user's request (a learner's reseed) refused */
    RO_ENOBUFS = -ENOBUFS,     /* a peer stopped reading: too much is queued for it */
    RO_EPERM = -EPERM,         /* refused by how the node runs (set_state while it records) */
};

/* ro__errorf writes a message into err (errlen bytes; either may be 0) and
 * returns code, so that a failure reads `return ro__errorf(err, n, RO_EINVAL,
 * "...", ...)`. Any thread. */
__attribute__((format(printf, 4, 5))) int ro__errorf(char *err, size_t errlen, int code,
                                                     const char *fmt, ...);

/* ro_strerror returns a static description of an error code. Any thread. */
const char *ro_strerror(int code);

#endif
