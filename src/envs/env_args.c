/*
 * Strict parsing of env argument values, for env implementations (built-in
 * ones; a plugin parses its own).
 */
#include "envs/env_args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/text.h"

int ro__env_arg_double(const char *key, const char *value, double lo, double hi, double *out,
                       char *err, size_t errlen)
{
    /* strtod skips leading blanks and accepts "nan" and "inf": strict
     * parsing rejects both, and anything left after the number. */
    char *end = NULL;
    double v = 0.0;
    errno = 0;
    if (value[0] != '\0' && !isspace((unsigned char)value[0]))
        v = strtod(value, &end);
    if (end == NULL || end == value || *end != '\0')
        return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is not a number", key, value);
    if (!isfinite(v) || errno == ERANGE)
        return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is not a finite double", key,
                          value);
    if (!(v >= lo && v <= hi))
        return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is outside [%g, %g]", key,
                          value, lo, hi);
    *out = v;
    return 0;
}

int ro__env_arg_u32(const char *key, const char *value, uint32_t lo, uint32_t hi, uint32_t *out,
                    char *err, size_t errlen)
{
    /* Digits only: strtoull would accept blanks, a sign (and wrap "-1" to a
     * huge value) and, with base 0, hex or octal. */
    int digits = value[0] != '\0';
    for (const char *p = value; *p != '\0'; p++)
        if (*p < '0' || *p > '9')
            digits = 0;
    if (!digits)
        return ro__errorf(err, errlen, RO_EINVAL,
                          "env arg '%s': '%s' is not a non-negative integer", key, value);
    errno = 0;
    unsigned long long v = strtoull(value, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return ro__errorf(err, errlen, RO_EINVAL, "env arg '%s': '%s' is outside [%u, %u]", key,
                          value, lo, hi);
    *out = (uint32_t)v;
    return 0;
}

bool ro__env_arg_key_known(const char *const *arg_keys, const char *key)
{
    for (size_t k = 0; arg_keys[k]; k += 2)
        if (strcmp(arg_keys[k], key) == 0)
            return true;
    return false;
}

int ro__env_args_known(const char *env, const char *const *arg_keys, const ro_env_arg_t *args,
                       size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (ro__env_arg_key_known(arg_keys, args[i].key))
            continue;
        char list[256];
        return ro__errorf(err, errlen, RO_EINVAL, "env '%s' has no arg '%s' (accepted: %s)", env,
                          args[i].key, ro__text_join(list, sizeof list, arg_keys, 2, ", "));
    }
    return 0;
}

void *ro__env_alloc(const char *env, size_t size, char *err, size_t errlen)
{
    void *e = calloc(1, size);
    if (!e)
        ro__errorf(err, errlen, RO_ENOMEM, "env '%s': out of memory", env);
    return e;
}
