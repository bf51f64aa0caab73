/*
 * rollout-replay --bisect A.traj B.traj (docs/replay.md "Bisecting"): the
 * first step at which two recordings of one seed differ (two builds, two
 * machines): for each env, its snapshots (format version 3) narrow the
 * search to the steps between the last state both recordings agree on and
 * the first they do not (a binary search over the env's snapshots); then
 * the env's entries there are compared one by one. The answer is the
 * difference with the fewest env steps before it (ties: the lower env):
 * env, episode, step and the first field that differs. Without snapshots
 * the envs' entries are compared from the start. Single-threaded.
 */
#ifndef RO_REPLAY_BISECT_H
#define RO_REPLAY_BISECT_H

#include <stdio.h>

/*
 * ro__replay_bisect compares recordings a and b (one file each); the
 * answer goes to out, notes and errors to log. Returns 0 (no difference),
 * 1 (a difference, printed) or 2 (a file unusable, or recordings of other
 * runs: another env, args, seed, node index or number of envs).
 */
int ro__replay_bisect(const char *a, const char *b, FILE *out, FILE *log);

#endif
