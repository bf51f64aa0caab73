#include "trajectory/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

/* Written once under pthread_once, read-only afterwards. */
static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
/* pow8[j][d] = x^(8 * d * 256^j) mod P: shifting by n bytes is at most four
 * products, one per byte of n (n < 2^32), then one with the CRC. */
static uint32_t pow8[4][256];
static pthread_once_t pow_once = PTHREAD_ONCE_INIT;

/* a * b mod P, polynomials over GF(2) in the reflected bit order (zlib's
 * multmodp): bit 31 is x^0. */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b >> 1) ^ (POLY & (0u - (b & 1u)));
    }
    return p;
}

static void make_pow(void)
{
    uint32_t x8 = 1u << 23; /* x^8: bit 31 - 8 */
    for (int j = 0; j < 4; j++) {
        pow8[j][0] = 1u << 31; /* x^0 */
        for (int d = 1; d < 256; d++)
            pow8[j][d] = multmodp(pow8[j][d - 1], x8);
        x8 = multmodp(pow8[j][255], x8); /* x^(8 * 256^(j+1)) */
    }
}

uint32_t ro__crc32c_shift(uint32_t crc1, uint64_t len2)
{
    pthread_once(&pow_once, make_pow);
    uint32_t p = 1u << 31;
    for (int j = 0; len2 && j < 4; j++, len2 >>= 8)
        if (len2 & 0xFF)
            p = multmodp(pow8[j][len2 & 0xFF], p);
    /* Beyond 2^32 bytes (never for a record): the rest, 2^32 bytes at a time. */
    for (; len2; len2--)
        p = multmodp(multmodp(pow8[3][255], pow8[3][1]), p);
    return multmodp(p, crc1);
}

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[i] = c;
    }
}

uint32_t ro__crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, make_table);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len--)
        c = table[(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* unaligned-safe */
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

uint32_t ro__crc32c(uint32_t crc, const void *data, size_t len)
{
    if (__builtin_cpu_supports("sse4.2"))
        return crc32c_hw(crc, data, len);
    return ro__crc32c_sw(crc, data, len);
}
#else
uint32_t ro__crc32c(uint32_t crc, const void *data, size_t len)
{
    return ro__crc32c_sw(crc, data, len);
}
#endif
