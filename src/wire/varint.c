#include "wire/varint.h"

#include "runtime/error.h"

size_t ro__varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t ro__varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

int ro__varint_get(const uint8_t *p, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < RO_VARINT_MAX; i++) {
        if (i == n)
            return 0;
        /* The tenth byte carries bit 63 only: anything more overflows. */
        if (i == RO_VARINT_MAX - 1 && (p[i] & 0x7e))
            return RO_EBADMSG;
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return (int)i + 1;
        }
    }
    return RO_EBADMSG;
}
