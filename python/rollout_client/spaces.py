"""Observation and action spaces, Gymnasium-shaped.

When gymnasium (>= 1.0) is importable, :func:`box`, :func:`discrete` and
:func:`batch` return real ``gymnasium.spaces`` objects, and ``GYMNASIUM`` is
the module. Otherwise they return the small classes below, which have the
same attributes and methods that RL code uses: ``shape``, ``dtype``,
``low``/``high`` (Box), ``n`` (Discrete), ``nvec`` (MultiDiscrete),
``sample()``, ``contains(x)`` (also ``x in space``) and ``seed(s)``.
gymnasium is never required.
"""
import enum

import numpy as np


def _import_gymnasium():
    try:
        import gymnasium
        import gymnasium.spaces  # noqa: F401
        import gymnasium.vector  # noqa: F401
    except ImportError:
        return None
    try:
        major = int(str(getattr(gymnasium, "__version__", "0")).split(".")[0])
    except ValueError:
        major = 0
    # 0.x vector envs have another constructor and step API.
    return gymnasium if major >= 1 else None


GYMNASIUM = _import_gymnasium()


class AutoresetMode(enum.Enum):
    """Gymnasium's autoreset modes (``gymnasium.vector.AutoresetMode``, same
    values), for when gymnasium is not importable."""
    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"
    DISABLED = "Disabled"


def same_step_mode():
    """The autoreset mode of a node: Gymnasium's SAME_STEP."""
    if GYMNASIUM is not None and hasattr(GYMNASIUM.vector, "AutoresetMode"):
        return GYMNASIUM.vector.AutoresetMode.SAME_STEP
    return AutoresetMode.SAME_STEP


class Space:
    """What every space here has."""

    def __init__(self, shape, dtype, seed=None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self._np_random = np.random.default_rng(seed)

    @property
    def np_random(self):
        return self._np_random

    def seed(self, seed=None):
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x):
        return self.contains(x)


class Box(Space):
    """A box of ``shape`` values of ``dtype`` in [low, high] (bounds may be
    infinite)."""

    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        dtype = np.dtype(dtype)
        if shape is None:
            shape = np.shape(low) if np.ndim(low) else np.shape(high)
        super().__init__(shape, dtype, seed)
        self.low = np.broadcast_to(np.asarray(low, dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype), self.shape).copy()

    def sample(self):
        """Uniform where bounded, shifted exponential where bounded on one
        side, normal where unbounded (as gymnasium does)."""
        low = self.low.astype(np.float64)
        high = self.high.astype(np.float64)
        if self.dtype.kind in "iu":
            high = high + 1.0
        lo_ok, hi_ok = np.isfinite(low), np.isfinite(high)
        rng = self._np_random
        out = np.empty(self.shape, np.float64)
        both, none = lo_ok & hi_ok, ~lo_ok & ~hi_ok
        only_lo, only_hi = lo_ok & ~hi_ok, ~lo_ok & hi_ok
        out[both] = rng.uniform(low[both], high[both])
        out[none] = rng.normal(size=int(none.sum()))
        out[only_lo] = low[only_lo] + rng.exponential(size=int(only_lo.sum()))
        out[only_hi] = high[only_hi] - rng.exponential(size=int(only_hi.sum()))
        if self.dtype.kind in "iu":
            out = np.floor(out)
        return np.clip(out, self.low, self.high).astype(self.dtype)

    def contains(self, x):
        x = np.asarray(x)
        if x.shape != self.shape or not np.can_cast(x.dtype, self.dtype, "same_kind"):
            return False
        return bool(np.all(x >= self.low) and np.all(x <= self.high))

    def __eq__(self, other):
        return (isinstance(other, Box) and self.shape == other.shape
                and self.dtype == other.dtype and np.array_equal(self.low, other.low)
                and np.array_equal(self.high, other.high))

    def __repr__(self):
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class Discrete(Space):
    """The integers 0 .. n-1."""

    def __init__(self, n, seed=None):
        super().__init__((), np.int64, seed)
        self.n = int(n)
        self.start = 0

    def sample(self):
        return np.int64(self._np_random.integers(self.n))

    def contains(self, x):
        x = np.asarray(x)
        return (x.shape == () and x.dtype.kind in "iu" and 0 <= int(x) < self.n)

    def __eq__(self, other):
        return isinstance(other, Discrete) and self.n == other.n

    def __repr__(self):
        return f"Discrete({self.n})"


class MultiDiscrete(Space):
    """One integer in 0 .. nvec[i]-1 per position: the batch of Discrete."""

    def __init__(self, nvec, seed=None):
        self.nvec = np.asarray(nvec, np.int64)
        super().__init__(self.nvec.shape, np.int64, seed)

    def sample(self):
        return self._np_random.integers(self.nvec).astype(np.int64)

    def contains(self, x):
        x = np.asarray(x)
        return (x.shape == self.shape and x.dtype.kind in "iu" and bool(np.all(x >= 0))
                and bool(np.all(x < self.nvec)))

    def __eq__(self, other):
        return isinstance(other, MultiDiscrete) and np.array_equal(self.nvec, other.nvec)

    def __repr__(self):
        return f"MultiDiscrete({self.nvec.tolist()})"


def box(low, high, shape, dtype):
    """A Box space (gymnasium's when importable)."""
    cls = GYMNASIUM.spaces.Box if GYMNASIUM is not None else Box
    return cls(low=low, high=high, shape=tuple(shape), dtype=dtype)


def discrete(n):
    """A Discrete space (gymnasium's when importable)."""
    return GYMNASIUM.spaces.Discrete(int(n)) if GYMNASIUM is not None else Discrete(n)


def batch(space, n):
    """The space of n stacked samples of space: a Box gains a leading axis,
    a Discrete becomes a MultiDiscrete, as gymnasium.vector.utils.batch_space
    makes them."""
    if GYMNASIUM is not None:
        return GYMNASIUM.vector.utils.batch_space(space, n)
    if isinstance(space, Discrete):
        return MultiDiscrete(np.full(n, space.n))
    if isinstance(space, Box):
        reps = (n,) + (1,) * len(space.shape)
        return Box(np.tile(space.low, reps), np.tile(space.high, reps),
                   (n,) + space.shape, space.dtype)
    raise TypeError(f"cannot batch {space!r}")


def dtype_bounds(dtype):
    """(low, high) of a numeric dtype: its range for integers, +-inf for
    floats."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min, info.max
    return -np.inf, np.inf


__all__ = ["AutoresetMode", "Box", "Discrete", "GYMNASIUM", "MultiDiscrete", "batch", "box",
           "discrete", "dtype_bounds", "same_step_mode"]
