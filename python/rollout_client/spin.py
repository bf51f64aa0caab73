"""Bounded, adaptive spinning of a learner that waits for a node's frame:
the Python side of src/runtime/loop_spin.h, with the same policy.

Why: a synchronous ``VecEnv.step()`` sends the actions and has nothing to
do until the node's answer comes, tens of microseconds later on one host.
Sleeping in epoll for it costs a wake-up (on a 2-CPU VM measured at 25 to
100 us, often more than the node's own work for the frame), so the client
first polls its sockets without sleeping, at most ``cap`` seconds per wait.

Adaptive: after 8 spins in a row that ran out (the node is slow, or shares
our CPU, so that spinning delays the very answer we wait for) the next 256
waits sleep at once, then spinning is tried again; an answer that comes
while spinning resets the count. The default cap is 200 us for nodes on
this host (unix:PATH) and 0, never, over TCP (Client(spin_us=...)).
"""
import time

DEFAULT_UNIX_US = 200
_MISSES_BEFORE_REST = 8
_REST_WAITS = 256


class Spin:
    """The spin policy of one client: ``begin()`` says whether this wait
    spins and until when; ``hit()`` / ``miss()`` report how it ended."""

    __slots__ = ("cap", "streak", "quiet", "hits", "misses")

    def __init__(self, cap_us):
        if cap_us < 0:
            raise ValueError(f"spin_us={cap_us!r}: microseconds, 0 or more")
        self.cap = cap_us / 1e6
        self.streak = 0   # spins in a row that ran out
        self.quiet = 0    # waits left that sleep at once
        self.hits = 0     # waits answered while spinning
        self.misses = 0   # spins that ran out

    def begin(self):
        """The perf_counter time until which this wait spins, or None: sleep."""
        if self.cap <= 0:
            return None
        if self.quiet:
            self.quiet -= 1
            return None
        return time.perf_counter() + self.cap

    def hit(self):
        self.hits += 1
        self.streak = 0

    def miss(self):
        self.misses += 1
        self.streak += 1
        if self.streak >= _MISSES_BEFORE_REST:
            self.streak = 0
            self.quiet = _REST_WAITS


__all__ = ["DEFAULT_UNIX_US", "Spin"]
