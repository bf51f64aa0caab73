"""gymnasium.vector, reduced: VectorEnv, AutoresetMode, utils.batch_space."""
from enum import Enum

import numpy as np

from . import utils  # noqa: F401


class AutoresetMode(Enum):
    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"
    DISABLED = "Disabled"


class VectorEnv:
    metadata = {}
    spec = None
    render_mode = None
    closed = False
    _np_random = None
    _np_random_seed = None

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
            self._np_random_seed = seed

    def step(self, actions):
        raise NotImplementedError

    def close(self, **kwargs):
        if self.closed:
            return
        self.close_extras(**kwargs)
        self.closed = True

    def close_extras(self, **kwargs):
        pass

    @property
    def unwrapped(self):
        return self

    @property
    def np_random(self):
        if self._np_random is None:
            self._np_random = np.random.default_rng()
        return self._np_random

    def __del__(self):
        if not getattr(self, "closed", True):
            self.close()
