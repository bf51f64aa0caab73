/*
 * The recurrent states a remote learner keeps between the steps it serves
 * (SEED mode: rollout-learner, docs/protocol.md "Recurrent policies in SEED
 * mode"), one per env row of a node, with the rule that decides which
 * state a row's step starts from:
 *
 *   - the row's observation starts an episode: zeros;
 *   - we answered the row's previous step: the state that answer left;
 *   - we answered this very step before (the node sends it again after a
 *     reconnect: our answer was lost): the state that step started from;
 *   - anything else (we never served the row, another learner served its
 *     steps since, the node restarted): zeros, counted as a reset.
 *
 * So no state is ever applied to a step it was not computed for: a
 * learner that takes over envs mid-episode (a failover, a rebalance)
 * starts them from zeros rather than from what it held before.
 *
 * Single-threaded: the caller's (the learner's loop thread).
 */
#ifndef RO_POLICY_STATE_TABLE_H
#define RO_POLICY_STATE_TABLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ro_state_table {
    uint32_t rows, floats;
    float *mem;      /* [rows][2][floats]: the state after the last answered step, the one before */
    uint64_t *at;    /* [rows] the step mem's first state is for, + 1; 0: none */
    uint64_t resets; /* rows that came mid-episode without a state of ours for their step */
} ro_state_table_t;

/* ro__state_table_init makes an empty table of rows x floats. 0 or
 * RO_ENOMEM. */
int ro__state_table_init(ro_state_table_t *t, uint32_t rows, uint32_t floats);
void ro__state_table_free(ro_state_table_t *t);

/* ro__state_table_clear forgets every row (its node restarted). */
void ro__state_table_clear(ro_state_table_t *t);

/* ro__state_table_take writes into in the state row's step `step` starts
 * from (first: the observation starts an episode), by the rule above. */
void ro__state_table_take(ro_state_table_t *t, uint32_t row, uint64_t step, bool first, float *in);

/* ro__state_table_commit records that row's step `step` was answered,
 * starting from in and leaving out. */
void ro__state_table_commit(ro_state_table_t *t, uint32_t row, uint64_t step, const float *in,
                            const float *out);

#endif
