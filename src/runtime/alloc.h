/* Cache-line-aligned zeroed arrays, and arrays carved from one block.
 *
 * Structs that keep thread-shared fields on their own cache lines
 * (alignas(64)) only get them if the array holding them starts on a line:
 * calloc() promises 16 bytes. Free with free(). */
#ifndef RO_ALLOC_H
#define RO_ALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RO_CACHE_LINE 64

/* ro__calloc_lines returns n zeroed elements of size bytes starting on a
 * cache line, or NULL (also on overflow). */
static inline void *ro__calloc_lines(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size - RO_CACHE_LINE)
        return NULL;
    size_t bytes = (n * size + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    void *p = aligned_alloc(RO_CACHE_LINE, bytes ? bytes : RO_CACHE_LINE);
    if (p)
        memset(p, 0, bytes);
    return p;
}

/* ro__carve reserves the next `bytes` of a block, on cache lines of their
 * own: returns where they lie in mem (NULL while mem is NULL, a first pass
 * that only sizes the block) and moves *off past them. Carve a block twice,
 * sizing it then pointing into it, to hold many arrays in one allocation. */
static inline void *ro__carve(void *mem, size_t *off, size_t bytes)
{
    size_t at = *off;
    *off += (bytes + RO_CACHE_LINE - 1) / RO_CACHE_LINE * RO_CACHE_LINE;
    return mem ? (char *)mem + at : NULL;
}

#endif
