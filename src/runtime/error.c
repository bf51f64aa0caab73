#include "runtime/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ro_strerror(int code)
{
    if (code >= 0)
        return "success";
    /* Our codes are negated errno values: strerror knows them all. */
    return strerror(-code);
}

int ro__errorf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
