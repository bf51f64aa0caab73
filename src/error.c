#include "error.h"

#include <string.h>

const char *ro_strerror(int code)
{
    if (code >= 0)
        return "success";
    /* Our codes are negated errno values: strerror knows them all. */
    return strerror(-code);
}
