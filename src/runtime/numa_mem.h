/*
 * Memory placed on a NUMA node: page-granular blocks whose pages are bound
 * (preferred) to one node before they are first touched.
 *
 * A block is its own mapping, so binding it moves nothing else; it starts on
 * a page, hence on a cache line. Without libnuma (build feature -Dnuma) or
 * with node < 0 the block is still a fresh zeroed mapping, with no binding.
 */
#ifndef RO_NUMA_MEM_H
#define RO_NUMA_MEM_H

#include <stdbool.h>
#include <stddef.h>

/* ro__numa_alloc returns bytes (rounded up to whole pages) of zeroed memory
 * whose pages are preferably on NUMA node `node`, touched once so they are
 * placed now; NULL on failure. Free with ro__numa_free(p, bytes). Any
 * thread. */
void *ro__numa_alloc(size_t bytes, int node);

/* ro__numa_free releases a block of ro__numa_alloc (NULL is ignored). */
void ro__numa_free(void *p, size_t bytes);

/* ro__numa_available tells whether this build and machine can place memory
 * on nodes (libnuma present and the kernel has NUMA support). */
bool ro__numa_available(void);

/*
 * ro__numa_misplaced reads back where the pages of [p, p + bytes) are
 * (move_pages with no target: the kernel reports each page's node) and
 * returns how many are not on `node`; 0 when placement cannot be read
 * (no libnuma). Any thread.
 */
int ro__numa_misplaced(const void *p, size_t bytes, int node);

/* ro__numa_bound_node returns the node the mapping holding p is bound to
 * (its memory policy, read with get_mempolicy), or -1 if it has none or the
 * policy cannot be read. */
int ro__numa_bound_node(const void *p);

#endif
