#ifndef RO_ENV_ARGS_H
#define RO_ENV_ARGS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Helpers for env implementations parsing their args (any thread). Each
 * returns 0, or RO_EINVAL with a message naming key and value if the value
 * is not a number in [lo, hi].
 */
int ro__env_arg_double(const char *key, const char *value, double lo, double hi, double *out,
                       char *err, size_t errlen);
int ro__env_arg_u32(const char *key, const char *value, uint32_t lo, uint32_t hi, uint32_t *out,
                    char *err, size_t errlen);

#endif
