"""gymnasium.spaces, reduced to what the tests use."""
import numpy as np


class Space:
    def __init__(self, shape=None, dtype=None, seed=None):
        self._shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._np_random = np.random.default_rng(seed)

    @property
    def shape(self):
        return self._shape

    @property
    def np_random(self):
        return self._np_random

    def seed(self, seed=None):
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def contains(self, x):
        raise NotImplementedError

    def __contains__(self, x):
        return self.contains(x)


class Box(Space):
    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        dtype = np.dtype(dtype)
        if shape is None:
            shape = np.shape(low)
        shape = tuple(int(d) for d in shape)
        self.low = np.full(shape, low, dtype) if np.isscalar(low) else np.asarray(low, dtype)
        self.high = np.full(shape, high, dtype) if np.isscalar(high) else np.asarray(high, dtype)
        assert self.low.shape == shape and self.high.shape == shape, "bounds and shape differ"
        super().__init__(shape, dtype, seed)

    def sample(self):
        lo = np.where(np.isfinite(self.low), self.low, -1e3).astype(np.float64)
        hi = np.where(np.isfinite(self.high), self.high, 1e3).astype(np.float64)
        if self.dtype.kind in "iu":
            return np.floor(self.np_random.uniform(lo, hi + 1)).clip(lo, hi).astype(self.dtype)
        return self.np_random.uniform(lo, hi).astype(self.dtype)

    def contains(self, x):
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                    and np.all(x >= self.low) and np.all(x <= self.high))


class Discrete(Space):
    def __init__(self, n, seed=None, start=0):
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    def sample(self):
        return self.start + self.np_random.integers(self.n)

    def contains(self, x):
        if isinstance(x, int):
            x = np.int64(x)
        elif isinstance(x, (np.generic, np.ndarray)) and x.dtype.kind in "iu" and x.shape == ():
            x = np.int64(x)
        else:
            return False
        return bool(self.start <= x < self.start + self.n)


class MultiDiscrete(Space):
    def __init__(self, nvec, dtype=np.int64, seed=None):
        self.nvec = np.array(nvec, dtype=dtype, copy=True)
        self.start = np.zeros(self.nvec.shape, dtype=dtype)
        super().__init__(self.nvec.shape, dtype, seed)

    def sample(self):
        return (self.np_random.random(self.nvec.shape) * self.nvec).astype(self.dtype)

    def contains(self, x):
        if isinstance(x, list):
            x = np.array(x)
        return bool(isinstance(x, np.ndarray) and x.shape == self.shape
                    and x.dtype != object and np.all(0 <= x) and np.all(x < self.nvec))
