/*
 * burn internals exposed to tests: the iteration count that stands for
 * cost_us of CPU work, so tests can check how it scales without timing.
 */
#ifndef RO_ENVS_BURN_H
#define RO_ENVS_BURN_H

#include <stdint.h>

/* ro__burn_iters_per_us returns how many iterations of the work chain one
 * microsecond of CPU time buys on this machine, calibrating on first use
 * (well under 20 ms). Any thread. */
double ro__burn_iters_per_us(void);

/* ro__burn_iters returns the iterations one step of a burn instance runs:
 * round(cost_us * ro__burn_iters_per_us()). */
uint64_t ro__burn_iters(const void *env);

#endif
