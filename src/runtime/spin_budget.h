/*
 * How long a thread that awaits another process's answer spins before it
 * sleeps: a pure rule over the recent round trips (no clock, no thread),
 * kept by the waiter (src/envs/pyenv_proc.c's round trips with a Python
 * env worker).
 *
 * Why: on a virtual machine a sleeping waiter's wake-up costs 20-100 us,
 * more than a small batch's whole round trip (CartPole N=8 at 109 k
 * steps/s with a spinning waiter, 90 k blocking). But spinning costs a
 * CPU: on a loaded machine (two busy loops on 2 CPUs) a spinning waiter
 * took 2,300-5,600 us per round trip against 2.5-211 us blocking, since
 * its spin delayed the very process it waited for.
 *
 * The rule:
 * - Round trips are smoothed (rtt: 1/4 of each new sample, hit or not;
 *   a sample longer than 1 s counts as 1 s).
 * - No history yet: spin up to the cap.
 * - Recent round trips long (rtt over the cap): block at once. A long
 *   answer costs little extra for a wake, and each wait that blocks still
 *   samples the round trip, so spinning comes back when they shorten.
 * - Else spin for 2 x rtt + RO_SPIN_SLACK_NS, at most the cap: room for a
 *   slower answer than the average, never a whole slow one.
 * - A spin that runs out is a miss. RO_SPIN_MISS_STREAK misses in a row
 *   (the CPUs are oversubscribed: our spinning delays the answer) make
 *   the next `rest` waits block at once (RO_SPIN_REST_MIN at first), then
 *   one wait spins again: a probe. A probe that misses doubles the rest
 *   (up to RO_SPIN_REST_MAX) and starts it at once. An answer that comes
 *   while spinning (a hit) clears the streak and the rest's length.
 *
 * That is the rule of a round trip (RO_SPIN_FIT: the node awaiting a
 * worker's answer, due when its work is done). A stage of a pipeline
 * awaiting its next input (RO_SPIN_WHOLE: an env worker awaiting its
 * node's next command, which comes after the slowest of its peers and the
 * caller's own turn) spins the whole cap while the recent waits are under
 * it, and never rests: there a wait that runs out is that spread, not
 * oversubscription, and each sleep puts a wake on the node's path
 * (CartPole, 64 envs on 2 worker processes: 320-360 k steps/s with the
 * round trip's rule, 365-400 k with this one).
 *
 * ro__spin_while_u32 is the spin itself, for a word another process
 * writes (the node awaiting a Python env worker's answer, the worker its
 * node's next command: the one implementation of both).
 *
 * The waiter's thread only (its caller's lock).
 */
#ifndef RO_SPIN_BUDGET_H
#define RO_SPIN_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define RO_SPIN_SLACK_NS 10000u        /* added to 2 x rtt */
#define RO_SPIN_MISS_STREAK 4u         /* misses in a row before a rest */
#define RO_SPIN_REST_MIN 64u           /* waits of the first rest */
#define RO_SPIN_REST_MAX 4096u         /* waits of the longest rest */
#define RO_SPIN_SAMPLE_MAX 1000000000u /* a longer sample counts as this */

/* How a wait's spin is bounded (the rule above). */
typedef enum { RO_SPIN_FIT, RO_SPIN_WHOLE } ro_spin_shape_t;

typedef struct ro_spin_budget {
    uint64_t cap_ns; /* the most one wait spins; 0: never spin */
    ro_spin_shape_t shape;
    uint64_t rtt_ns;  /* smoothed round trip; 0: no sample yet */
    uint32_t streak;  /* spins in a row that ran out */
    uint32_t quiet;   /* waits left that block at once */
    uint32_t rest;    /* the next rest's length */
    bool probing;     /* the first spin after a rest: a miss doubles rest */
    uint64_t hits;    /* answers that came while spinning */
    uint64_t misses;  /* spins that ran out */
    uint64_t blocked; /* waits that did not spin */
} ro_spin_budget_t;

/* ro__spin_budget_init: no history, spinning at most cap_ns (0: never),
 * bounded as shape says. */
void ro__spin_budget_init(ro_spin_budget_t *s, uint64_t cap_ns, ro_spin_shape_t shape);

/* ro__spin_budget_next is how long the next wait spins (0: it blocks at
 * once); it consumes one wait of a rest. Call once per wait, then
 * ro__spin_budget_record once. */
uint64_t ro__spin_budget_next(ro_spin_budget_t *s);

/* ro__spin_budget_record tells how the wait ended: the round trip it
 * measured (from the command to the answer) and whether it spun
 * (budget > 0) and whether the answer came while spinning. */
void ro__spin_budget_record(ro_spin_budget_t *s, uint64_t budget_ns, uint64_t rtt_ns, bool hit);

/* ro__spin_while_u32 spins while *word holds value: true once it differs
 * (an acquire load: what its writer stored before it is visible), false
 * once CLOCK_MONOTONIC passes deadline_ns. A pause and a sched_yield
 * between reads: a process that shares our CPU (the one we wait for) runs
 * at once rather than after our time slice. */
bool ro__spin_while_u32(const _Atomic uint32_t *word, uint32_t value, uint64_t deadline_ns);

#endif
