"""The spin-or-sleep rule of src/runtime/spin_budget.h, for a Python env
worker awaiting the node's next command (env_worker.py): the same pure rule
and constants, in seconds. The C header says why; in short: spin up to
2 x the recent waits + 10 us (at most the cap) while they were short, sleep
at once while they were longer than the cap (a sleeping wait still samples
them), and after 4 spins in a row that ran out rest 64 waits, doubling (to
4096) while the probe after a rest misses too.
"""
from __future__ import annotations

SLACK = 10e-6
MISS_STREAK = 4
REST_MIN = 64
REST_MAX = 4096
SAMPLE_MAX = 1.0


class SpinBudget:
    """One waiter's history: next() says how long its next wait spins (0:
    it sleeps at once), record() how that wait ended."""

    __slots__ = ("cap", "rtt", "streak", "quiet", "rest", "probing", "hits", "misses",
                 "blocked")

    def __init__(self, cap: float) -> None:
        if cap < 0:
            raise ValueError(f"cap={cap!r}: seconds, 0 or more")
        self.cap = cap
        self.rtt = 0.0  # smoothed wait; 0: no sample yet
        self.streak = 0
        self.quiet = 0
        self.rest = REST_MIN
        self.probing = False
        self.hits = self.misses = self.blocked = 0

    def next(self) -> float:
        if self.cap <= 0:
            return 0.0
        if self.quiet:
            self.quiet -= 1
            return 0.0
        if self.rtt <= 0:
            return self.cap
        if self.rtt > self.cap:
            return 0.0
        return min(2 * self.rtt + SLACK, self.cap)

    def record(self, budget: float, sample: float, hit: bool) -> None:
        sample = min(max(sample, 1e-9), SAMPLE_MAX)
        self.rtt = self.rtt - self.rtt / 4 + sample / 4 if self.rtt > 0 else sample
        if budget <= 0:
            self.blocked += 1
            return
        if hit:
            self.hits += 1
            self.streak = 0
            self.rest = REST_MIN
            self.probing = False
            return
        self.misses += 1
        if self.probing:  # the rest did not help: a longer one, then a probe again
            self.rest = min(self.rest * 2, REST_MAX)
            self.quiet = self.rest
            self.streak = 0
            return
        self.streak += 1
        if self.streak >= MISS_STREAK:
            self.streak = 0
            self.quiet = self.rest
            self.probing = True


__all__ = ["SpinBudget"]
