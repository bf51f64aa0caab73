/* spin_budget.c: the spin-or-sleep rule of a waiter (spin_budget.h). */
#include "runtime/spin_budget.h"

void ro__spin_budget_init(ro_spin_budget_t *s, uint64_t cap_ns)
{
    *s = (ro_spin_budget_t){.cap_ns = cap_ns, .rest = RO_SPIN_REST_MIN};
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
