#ifndef RO_ENV_ARGS_H
#define RO_ENV_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rollout/env.h"

/*
 * Helpers for env implementations parsing their args (any thread). Each
 * returns 0, or RO_EINVAL with a message naming key and value if the value
 * is not a number in [lo, hi].
 */
int ro__env_arg_double(const char *key, const char *value, double lo, double hi, double *out,
                       char *err, size_t errlen);
int ro__env_arg_u32(const char *key, const char *value, uint32_t lo, uint32_t hi, uint32_t *out,
                    char *err, size_t errlen);

/* ro__env_arg_key_known tells whether key is one of arg_keys (an env's
 * table: key, help, key, help, ..., NULL). */
bool ro__env_arg_key_known(const char *const *arg_keys, const char *key);

/* ro__env_args_known checks that every key of args[0..n) is one of
 * arg_keys (the env's table: key, help, key, help, ..., NULL): 0, or
 * RO_EINVAL with "env 'ENV' has no arg 'KEY' (accepted: A, B)". */
int ro__env_args_known(const char *env, const char *const *arg_keys, const ro_env_arg_t *args,
                       size_t n, char *err, size_t errlen);

/* ro__env_alloc is a zeroed env of size bytes, or NULL with "env 'ENV':
 * out of memory" in err. */
void *ro__env_alloc(const char *env, size_t size, char *err, size_t errlen);

#endif
