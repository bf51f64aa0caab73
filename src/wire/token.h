/*
 * The shared secret a learner presents in its hello (--token-file), read by
 * the node and by rollout-learner alike.
 */
#ifndef RO_TOKEN_H
#define RO_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* The longest token, in bytes. */
#define RO_TOKEN_MAX 254

/* ro__token_read reads the token file at path: one line of 1 to
 * RO_TOKEN_MAX characters (trailing whitespace trimmed; no other line, no
 * control character) into out (outlen >= RO_TOKEN_MAX + 2). Returns 0 or
 * RO_EINVAL with one line in err. */
int ro__token_read(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* ro__token_exposed: true, with a one-line warning in msg, if the token
 * file can be read or written by users other than its owner. */
bool ro__token_exposed(const char *path, char *msg, size_t msglen);

#endif
