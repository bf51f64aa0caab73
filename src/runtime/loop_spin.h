/*
 * Bounded, adaptive spinning of a libuv loop that awaits a peer's answer
 * (SEED mode's round trips between a node and a learner on one host).
 *
 * Why: a round trip between two processes that each sleep in epoll_wait
 * costs two wake-ups, and on a virtual machine each wake-up is tens of
 * microseconds of latency (perf: most of a SEED node's time in the
 * kernel's wake-up paths, the CPUs idle 60 % of the time). A loop that
 * keeps polling (epoll_wait with no timeout, through an active idle
 * handle) for the short while its peer needs to answer is never put to
 * sleep, and the peer's write has no one to wake.
 *
 * Bounded: one wait spins at most the cap, then the loop sleeps as usual.
 * Adaptive: after 8 spins in a row that ran out (the peer shares our CPU,
 * so our spinning delays the very answer we wait for, or it is slow) the
 * next 256 waits sleep at once, then spinning is tried again. An answer
 * that comes while spinning resets the count. (A budget that shrank with
 * each miss and grew with the answers' latency was tried first: on a
 * 2-CPU VM, where a sleeping peer's wake-up costs 20-100 us, one slow
 * answer shrank it below what the next needed, and SEED at 256 envs ran at
 * 0.76-1.1 M steps/s instead of 2.9 M.)
 *
 * Loop thread only.
 */
#ifndef RO_LOOP_SPIN_H
#define RO_LOOP_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

typedef struct ro_loop_spin {
    uv_idle_t idle;
    uint64_t cap_ns;   /* the most one wait spins; 0: never spin */
    uint64_t armed_ns; /* when the wait began; 0: no wait */
    bool spinning;
    uint32_t streak; /* spins in a row that ran out */
    uint32_t quiet;  /* waits left without spinning */
    uint64_t hits;   /* answers that came while spinning */
    uint64_t misses; /* spins that ran out */
} ro_loop_spin_t;

/* ro__loop_spin_init prepares s on loop, spinning at most cap_us per wait
 * (0: never). Cannot fail. */
void ro__loop_spin_init(ro_loop_spin_t *s, uv_loop_t *loop, uint32_t cap_us);

/* ro__loop_spin_arm: an answer is awaited now; the loop spins for it
 * (up to the cap) rather than sleep. A wait already armed goes on. */
void ro__loop_spin_arm(ro_loop_spin_t *s);

/* ro__loop_spin_answered: the awaited answer came; the spin, if any,
 * stops. */
void ro__loop_spin_answered(ro_loop_spin_t *s);

/* ro__loop_spin_close closes the handle (before the loop closes). */
void ro__loop_spin_close(ro_loop_spin_t *s);

#endif
