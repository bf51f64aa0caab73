/* spin_budget.c: the spin-or-sleep rule of a waiter (spin_budget.h). */
#include "runtime/spin_budget.h"

#include <sched.h>

#include "runtime/clock.h"
#include "runtime/cpu_relax.h"

void ro__spin_budget_init(ro_spin_budget_t *s, uint64_t cap_ns, ro_spin_shape_t shape)
{
    *s = (ro_spin_budget_t){.cap_ns = cap_ns, .shape = shape, .rest = RO_SPIN_REST_MIN};
}

uint64_t ro__spin_budget_next(ro_spin_budget_t *s)
{
    if (s->cap_ns == 0)
        return 0;
    if (s->quiet > 0) {
        s->quiet--;
        return 0;
    }
    if (s->rtt_ns == 0)
        return s->cap_ns;
    if (s->rtt_ns > s->cap_ns)
        return 0;
    if (s->shape == RO_SPIN_WHOLE)
        return s->cap_ns;
    const uint64_t b = 2 * s->rtt_ns + RO_SPIN_SLACK_NS;
    return b < s->cap_ns ? b : s->cap_ns;
}

void ro__spin_budget_record(ro_spin_budget_t *s, uint64_t budget_ns, uint64_t rtt_ns, bool hit)
{
    rtt_ns = rtt_ns > RO_SPIN_SAMPLE_MAX ? RO_SPIN_SAMPLE_MAX : rtt_ns;
    rtt_ns = rtt_ns ? rtt_ns : 1; /* 0 stays "no sample" */
    s->rtt_ns = s->rtt_ns ? s->rtt_ns - s->rtt_ns / 4 + rtt_ns / 4 : rtt_ns;
    s->rtt_ns = s->rtt_ns ? s->rtt_ns : 1;
    if (budget_ns == 0) {
        s->blocked++;
        return;
    }
    if (hit) {
        s->hits++;
        s->streak = 0;
        s->rest = RO_SPIN_REST_MIN;
        s->probing = false;
        return;
    }
    s->misses++;
    if (s->shape == RO_SPIN_WHOLE)
        return;
    if (s->probing) { /* the rest did not help: a longer one, then a probe again */
        s->rest = s->rest * 2 > RO_SPIN_REST_MAX ? RO_SPIN_REST_MAX : s->rest * 2;
        s->quiet = s->rest;
        s->streak = 0;
        return;
    }
    if (++s->streak >= RO_SPIN_MISS_STREAK) {
        s->streak = 0;
        s->quiet = s->rest;
        s->probing = true;
    }
}

bool ro__spin_while_u32(const _Atomic uint32_t *word, uint32_t value, uint64_t deadline_ns)
{
    for (;;) {
        if (atomic_load_explicit(word, memory_order_acquire) != value)
            return true;
        ro__cpu_relax();
        /* A yield between reads: on CPUs shared with the processes we
         * wait for, each look costs them no more than its own read
         * (yielding only every 64 reads measured 5-10 % fewer steps on
         * a 2-CPU VM with a caller and 2 env workers). */
        sched_yield();
        /* Past the deadline is a miss even if the word changed meanwhile:
         * a yield that took that long means others want the CPU, and it
         * counts towards a rest (the caller then finds the answer at once
         * on its sleeping path). */
        if (ro__now_ns() >= deadline_ns)
            return false;
    }
}
