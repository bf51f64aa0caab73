"""gymnasium.vector.utils.batch_space for Box and Discrete."""
import numpy as np

from .. import spaces


def batch_space(space, n=1):
    if isinstance(space, spaces.Box):
        reps = (n,) + (1,) * space.low.ndim
        return spaces.Box(np.tile(space.low, reps), np.tile(space.high, reps), dtype=space.dtype)
    if isinstance(space, spaces.Discrete):
        return spaces.MultiDiscrete(np.full((n,), space.n, dtype=space.dtype), dtype=space.dtype)
    raise TypeError(f"batch_space: {type(space)}")
