"""The machine's limits for Python envs stepped by P processes, for
bench_pyenv.py: the raw loop run by P processes at once, each over its
share of the envs, either

- free (``"free"``: nothing but its own envs),
- with a barrier after every step (``"barrier"``: every process waits for
  the slowest, as a synchronous ``step()`` of a vector env must), or
- handed each step by a caller (``"handoff"``: this process, the caller,
  bumps a sequence word and waits for every process's answer word, as a
  vector env whose envs live in worker processes must, everyone spinning
  on shared memory with a ``sched_yield`` between looks: the least such a
  hand-over can cost).

None copies actions or observations: they are what any P-process vector env
(of that shape) could reach on these CPUs, not a vector env. With one
process per CPU each is pinned to its own, as rollout pins its env workers.

A pool keeps its processes (forked, each making its envs once) for every
round; ``run(seconds)`` returns env-steps per second summed over them.
"""
from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import time
from typing import Any, Callable, List

import numpy as np

# Shared words (u64): one step count (handoff: the last step answered) per
# process, then the caller's step (handoff), the stop request and the step
# after which every process stops.
W_SEQ, W_STOP, W_END = 61, 62, 63
NEVER = (1 << 64) - 1


def actions(space: Any, n: int, seed: int = 0) -> List[np.ndarray]:
    """16 batches of n random actions of space, drawn once (timed loops
    cycle them)."""
    space.seed(seed)
    return [np.stack([space.sample() for _ in range(n)]) for _ in range(16)]


def step_all(envs: List[Any], a: np.ndarray) -> None:
    """The raw loop's step: env.step, a reset when an episode ends, nothing
    else."""
    for i, e in enumerate(envs):
        _, _, te, tr, _ = e.step(a[i])
        if te or tr:
            e.reset()


class RefPool:
    """P processes each stepping its share of n envs made by make."""

    def __init__(self, make: Callable[[], Any], n: int, procs: int, mode: str) -> None:
        if mode not in ("free", "barrier", "handoff") or procs > W_SEQ:
            raise ValueError(f"mode {mode!r} with {procs} processes")
        self.mode, self.procs, self.n = mode, procs, n
        self.mem = mmap.mmap(-1, 8 * (W_END + 1))  # shared with the forked children
        ctx = mp.get_context("fork")
        self.pipes: List[Any] = []
        self.children: List[Any] = []
        shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
        first = 0
        for me in range(procs):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=self._child, args=(make, first, shares[me], me, theirs),
                            daemon=True)
            p.start()
            first += shares[me]
            self.pipes.append(mine)
            self.children.append(p)
        for pipe in self.pipes:
            pipe.recv()  # its envs are made and reset

    def run(self, seconds: float) -> float:
        words = memoryview(self.mem).cast("Q")
        for i in range(self.procs):
            words[i] = 0
        words[W_SEQ], words[W_STOP], words[W_END] = 0, 0, NEVER
        for pipe in self.pipes:
            pipe.send(seconds)
        if self.mode == "handoff":
            return self._hand_out(words, seconds)
        if self.mode == "barrier":
            time.sleep(seconds)
            words[W_STOP] = 1
        return sum(pipe.recv() for pipe in self.pipes)

    def _hand_out(self, words: Any, seconds: float) -> float:
        """The caller's loop: each step handed to every process, every
        answer awaited; env-steps per second as this process saw them."""
        procs, clock, yield_cpu = self.procs, time.perf_counter, os.sched_yield
        k, t0 = 0, clock()
        while clock() - t0 < seconds:
            k += 1
            words[W_SEQ] = k
            for j in range(procs):
                while words[j] != k:
                    yield_cpu()
        rate = k * self.n / (clock() - t0)
        words[W_STOP] = 1
        words[W_SEQ] = k + 1
        for pipe in self.pipes:
            pipe.recv()
        return rate

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for p in self.children:
            p.join(10)

    def _child(self, make: Callable[[], Any], first: int, count: int, me: int, pipe: Any) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) == self.procs:  # one process per CPU: each on its own, as rollout's
            os.sched_setaffinity(0, {cpus[me]})
        envs = [make() for _ in range(count)]
        for i, e in enumerate(envs):
            e.reset(seed=first + i)
        acts = actions(envs[0].action_space, count, first)
        words = memoryview(self.mem).cast("Q")
        pipe.send(True)
        while True:
            seconds = pipe.recv()
            if seconds is None:
                return
            steps = self._steps(envs, acts, words, me, seconds)
            pipe.send(steps)

    def _steps(self, envs: List[Any], acts: List[np.ndarray], words: Any, me: int,
               seconds: float) -> float:
        procs, barrier, clock = self.procs, self.mode == "barrier", time.perf_counter
        k, t0 = 0, clock()
        if self.mode == "handoff":
            while True:
                while words[W_SEQ] == k:
                    os.sched_yield()
                if words[W_STOP]:
                    return 0.0  # the caller counts
                step_all(envs, acts[k % 16])
                k += 1
                words[me] = k
        while True:
            step_all(envs, acts[k % 16])
            k += 1
            if not barrier:
                if clock() - t0 >= seconds:
                    break
                continue
            # Process 0 says, before it arrives at step k's barrier, whether
            # k is the last: everyone reads it after passing that barrier.
            if me == 0 and words[W_STOP]:
                words[W_END] = k
            words[me] = k
            while min(words[j] for j in range(procs)) < k:
                os.sched_yield()
            if words[W_END] == k:
                break
        return k * len(envs) / (clock() - t0)
