"""Python envs for the tests of --env py:MODULE:CALLABLE (test_pyenv.py):
composite spaces, seeded randomness, and faults injected on demand (a raise,
a SIGKILL of the worker, a hang) once per run, marked by a file, so that a
test sees one fault and the node's recovery from it. Test fixtures only:
nothing of this ships."""
import mmap
import os
import signal
import struct
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Drift(gym.Env):
    """A point drifting under Tuple(Discrete, Box) actions; Dict observations
    of every kind the worker maps (float64 Box, uint8 image, Discrete,
    MultiBinary). Its noise comes from reset(seed=...): episodes depend on
    the seed and the actions only."""

    def __init__(self, fault=None, at=30, once=None, horizon=40, noisy=False):
        self.observation_space = spaces.Dict({
            "pos": spaces.Box(-np.inf, np.inf, (2,), np.float64),
            "frame": spaces.Box(0, 255, (3, 4), np.uint8),
            "phase": spaces.Discrete(5),
            "bits": spaces.MultiBinary(3),
        })
        self.action_space = spaces.Tuple((spaces.Discrete(3),
                                          spaces.Box(-1.0, 1.0, (2,), np.float32)))
        self.fault, self.at, self.once, self.horizon = fault, int(at), once, int(horizon)
        # noisy: noise from the OS, not the seed (an env replay must catch).
        self.noise = np.random.default_rng() if noisy else None
        self.steps = 0
        self.pos = np.zeros(2)
        self.t = 0

    def _obs(self):
        frame = np.full((3, 4), self.t % 256, np.uint8)
        bits = np.array([self.t % 2, (self.t // 2) % 2, self.pos[0] > 0], np.int8)
        return {"pos": self.pos.copy(), "frame": frame, "phase": self.t % 5, "bits": bits}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-0.5, 0.5, 2)
        self.t = 0
        return self._obs(), {}

    def _maybe_fault(self):
        self.steps += 1
        if not self.fault or self.steps != self.at:
            return
        if self.once:
            try:
                os.close(os.open(self.once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        if self.fault == "raise":
            raise RuntimeError("injected fault")
        if self.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fault == "hang":
            while True:
                time.sleep(3600)

    def step(self, action):
        self._maybe_fault()
        d, box = action
        self.pos = self.pos + 0.1 * np.asarray(box, np.float64) + 0.05 * (int(d) - 1) \
            + (self.noise or self.np_random).normal(0.0, 0.05, 2)
        self.t += 1
        reward = float(-np.abs(self.pos).sum())
        term = bool(np.abs(self.pos).max() > 1.5)
        return self._obs(), reward, term, self.t >= self.horizon, {}


class Texty(gym.Env):
    """An env whose observations rollout cannot carry (a Text space)."""
    observation_space = spaces.Text(8)
    action_space = spaces.Discrete(2)


class Commands(gym.Env):
    """Observes its worker's command count: the sequence number of the
    command being served, read from the worker's shared memory (descriptor
    3, the header word at byte 12: src/envs/pyenv_proto.h's PY_H_SEQ). Envs
    stepped by one command see the same number."""
    observation_space = spaces.Box(0, 2**30, (1,), np.int32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.mm = mmap.mmap(3, 4096, prot=mmap.PROT_READ)

    def _obs(self):
        return np.array([struct.unpack_from("<I", self.mm, 12)[0]], np.int32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, False, False, {}


class Threads(gym.Env):
    """Observes the thread counts its process was started with: OpenMP,
    OpenBLAS, MKL and OpenCV's pool (0 where unset)."""
    KEYS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
            "OPENCV_FOR_THREADS_NUM")
    observation_space = spaces.Box(0, 2**20, (len(KEYS),), np.int32)
    action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([int(os.environ.get(k, "0")) for k in self.KEYS], np.int32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, False, False, {}


def drift(**kw):
    return Drift(**kw)


def texty():
    return Texty()


def commands():
    return Commands()


def threads():
    return Threads()
