/* Monotonic time in nanoseconds. */
#ifndef RO_CLOCK_H
#define RO_CLOCK_H

#include <stdint.h>
#include <time.h>

/* ro__now_ns reads CLOCK_MONOTONIC (a vDSO call, ~20 ns). Any thread. */
static inline uint64_t ro__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
