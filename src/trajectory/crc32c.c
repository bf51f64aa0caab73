#include "trajectory/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

/* Written once under pthread_once, read-only afterwards. */
static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

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
