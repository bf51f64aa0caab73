#include "runtime/numa_mem.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ro_build_config.h"

#if RO_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

static size_t page_round(size_t bytes)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes == 0)
        bytes = 1;
    if (bytes > SIZE_MAX - pg)
        return 0;
    return (bytes + pg - 1) / pg * pg;
}

bool ro__numa_available(void)
{
#if RO_HAVE_NUMA
    return numa_available() >= 0;
#else
    return false;
#endif
}

void *ro__numa_alloc(size_t bytes, int node)
{
    size_t len = page_round(bytes);
    if (len == 0)
        return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#if RO_HAVE_NUMA
    if (node >= 0 && node < 8 * (int)sizeof(unsigned long) * 16 && ro__numa_available()) {
        /* Preferred, not bound: a full node spills over instead of failing. */
        unsigned long mask[16] = {0};
        mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
        (void)mbind(p, len, MPOL_PREFERRED, mask, 8 * sizeof mask, 0);
    }
#else
    (void)node;
#endif
    /* First touch, now, under the policy: the pages land on the node
     * instead of wherever the first writer happens to run. */
    memset(p, 0, len);
    return p;
}

void ro__numa_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, page_round(bytes));
}

int ro__numa_misplaced(const void *p, size_t bytes, int node)
{
#if RO_HAVE_NUMA
    if (!p || !ro__numa_available())
        return 0;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p / pg * pg, end = (uintptr_t)p + (bytes ? bytes : 1);
    int bad = 0;
    enum { CHUNK = 64 };
    void *pages[CHUNK];
    int status[CHUNK];
    while (a < end) {
        unsigned long k = 0;
        for (; k < CHUNK && a < end; k++, a += pg)
            pages[k] = (void *)a;
        if (move_pages(0, k, pages, NULL, status, 0) != 0)
            return 0;
        for (unsigned long i = 0; i < k; i++)
            bad += status[i] != node;
    }
    return bad;
#else
    (void)p;
    (void)bytes;
    (void)node;
    return 0;
#endif
}

int ro__numa_bound_node(const void *p)
{
#if RO_HAVE_NUMA
    if (!ro__numa_available())
        return -1;
    int mode = 0;
    unsigned long mask[16] = {0};
    if (get_mempolicy(&mode, mask, 8 * sizeof mask, (void *)p, MPOL_F_ADDR) != 0)
        return -1;
    if (mode != MPOL_PREFERRED && mode != MPOL_BIND)
        return -1;
    for (int i = 0; i < (int)(8 * sizeof mask); i++)
        if (mask[i / (8 * sizeof(unsigned long))] >> (i % (8 * sizeof(unsigned long))) & 1)
            return i;
    return -1;
#else
    (void)p;
    return -1;
#endif
}
