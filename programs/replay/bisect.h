/*
 * rollout-replay --bisect A.traj B.traj (docs/replay.md "Bisecting"): the
 * first step at which two recordings of one seed differ (two builds, two
 * machines): for each env, its snapshots (format version 3) narrow the
 * search to the steps between the last state both recordings agree on and
 * the first they do not (a binary search over the env's snapshots); then
 * the env's entries there are compared one by one. The answer is the
 * difference with the fewest env steps before it (ties: the lower env):
 * env, episode, step and the first field that differs. Without snapshots
 * the envs' entries are compared from the start. Rotated recordings are
 * given as their parts. Single-threaded.
 */
#ifndef RO_REPLAY_BISECT_H
#define RO_REPLAY_BISECT_H

#include <stddef.h>
#include <stdio.h>

/*
 * ro__replay_bisect compares two recordings given as paths[0..n): each is
 * its files in order, its part 0 first (a rotated recording's PATH PATH.1
 * ...: the snapshots of every part's index are searched, the entries read
 * on across parts). The answer goes to out, notes and errors to log.
 * Returns 0 (no difference), 1 (a difference, printed) or 2 (a file
 * unusable, not two recordings, parts out of order or of another
 * recording, or recordings of other runs: another env, args, seed, node
 * index or number of envs).
 */
int ro__replay_bisect(char *const *paths, size_t n, FILE *out, FILE *log);

#endif
