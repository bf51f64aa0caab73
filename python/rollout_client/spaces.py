"""Observation and action spaces, Gymnasium-shaped.

When gymnasium (>= 1.0) is importable, :func:`box`, :func:`discrete` and
:func:`batch` return real ``gymnasium.spaces`` objects, and ``GYMNASIUM`` is
the module. Otherwise they return the small classes below, which have the
same attributes and methods that RL code uses: ``shape``, ``dtype``,
``low``/``high`` (Box), ``n`` (Discrete, MultiBinary), ``nvec`` (MultiDiscrete),
``spaces`` (Tuple, Dict: env ABI 2 nodes' composite actions and observations),
``sample()``, ``contains(x)`` (also ``x in space``) and ``seed(s)``.
gymnasium is never required.
"""
import enum
from typing import Any

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


class MultiBinary(Space):
    """``shape`` values, each 0 or 1."""

    def __init__(self, n, seed=None):
        self.n = n if isinstance(n, tuple) else int(n)
        super().__init__(self.n if isinstance(self.n, tuple) else (self.n,), np.int8, seed)

    def sample(self):
        return self._np_random.integers(0, 2, self.shape).astype(np.int8)

    def contains(self, x):
        x = np.asarray(x)
        return (x.shape == self.shape and x.dtype.kind in "iub"
                and bool(np.all((x == 0) | (x == 1))))

    def __eq__(self, other):
        return isinstance(other, MultiBinary) and self.shape == other.shape

    def __repr__(self):
        return f"MultiBinary({self.n})"


class _Composite(Space):
    """What Tuple and Dict share: their member spaces (held as a
    ``_container``), no shape of their own, indexing into the members, and
    equality of the members."""

    _container: Any = tuple

    def __init__(self, spaces, seed=None):
        self.spaces = self._container(spaces)
        super().__init__((), object, seed)
        self.shape = None

    def __getitem__(self, i):
        return self.spaces[i]

    def __eq__(self, other):
        return isinstance(other, type(self)) and self.spaces == other.spaces


class Tuple(_Composite):
    """A tuple of spaces, one value of each."""

    def sample(self):
        return tuple(s.sample() for s in self.spaces)

    def contains(self, x):
        return (isinstance(x, (tuple, list)) and len(x) == len(self.spaces)
                and all(s.contains(v) for s, v in zip(self.spaces, x)))

    def __len__(self):
        return len(self.spaces)

    def __repr__(self):
        return f"Tuple({', '.join(map(repr, self.spaces))})"


class Dict(_Composite):
    """Named spaces, in order: a value is a dict of one value of each."""

    _container = dict

    def sample(self):
        return {k: s.sample() for k, s in self.spaces.items()}

    def contains(self, x):
        return (isinstance(x, dict) and x.keys() == self.spaces.keys()
                and all(s.contains(x[k]) for k, s in self.spaces.items()))

    def keys(self):
        return self.spaces.keys()

    def __repr__(self):
        return "Dict(" + ", ".join(f"{k!r}: {s!r}" for k, s in self.spaces.items()) + ")"


def box(low, high, shape, dtype):
    """A Box space (gymnasium's when importable)."""
    cls = GYMNASIUM.spaces.Box if GYMNASIUM is not None else Box
    return cls(low=low, high=high, shape=tuple(shape), dtype=dtype)


def discrete(n):
    """A Discrete space (gymnasium's when importable)."""
    return GYMNASIUM.spaces.Discrete(int(n)) if GYMNASIUM is not None else Discrete(n)


def multi_discrete(nvec):
    """A MultiDiscrete space (gymnasium's when importable)."""
    cls = GYMNASIUM.spaces.MultiDiscrete if GYMNASIUM is not None else MultiDiscrete
    return cls(np.asarray(nvec, np.int64))


def multi_binary(n):
    """A MultiBinary space of n entries (gymnasium's when importable)."""
    cls = GYMNASIUM.spaces.MultiBinary if GYMNASIUM is not None else MultiBinary
    return cls(int(n))


def tuple_of(parts):
    """A Tuple space of parts (gymnasium's when importable)."""
    cls = GYMNASIUM.spaces.Tuple if GYMNASIUM is not None else Tuple
    return cls(tuple(parts))


def dict_of(named):
    """A Dict space of (name, space) pairs, in order (gymnasium's when
    importable)."""
    if GYMNASIUM is not None:  # in the env's order, not sorted by name
        return GYMNASIUM.spaces.Dict(dict(named), sort_keys=False)
    return Dict(dict(named))


# The most samples batch() stacks, and values it makes in all (bounds of a
# Box, each): the caps a client holds a node's welcome to (client.py).
MAX_BATCH = 1 << 20
MAX_BATCH_VALUES = 1 << 28


def _values(space):
    """How many values a sample of space has (an int, not an allocation):
    ours or gymnasium's spaces alike."""
    sub = getattr(space, "spaces", None)
    if sub is not None:  # Tuple, Dict
        return sum(_values(s) for s in (sub.values() if hasattr(sub, "values") else sub))
    shape = getattr(space, "shape", None) or ()
    n = 1
    for d in shape:
        n *= int(d)
    return n


def batch(space, n):
    """The space of n stacked samples of space: a Box gains a leading axis,
    a Discrete becomes a MultiDiscrete, as gymnasium.vector.utils.batch_space
    makes them. Raises ValueError, before allocating, for n outside [1,
    MAX_BATCH] or a batch of over MAX_BATCH_VALUES values."""
    if not 1 <= n <= MAX_BATCH or n * _values(space) > MAX_BATCH_VALUES:
        raise ValueError(f"cannot batch {n} samples of {_values(space)} values "
                         f"(at most {MAX_BATCH} samples, {MAX_BATCH_VALUES} values in all)")
    if GYMNASIUM is not None:
        return GYMNASIUM.vector.utils.batch_space(space, n)
    if isinstance(space, Discrete):
        return MultiDiscrete(np.full(n, space.n))
    if isinstance(space, Box):
        reps = (n,) + (1,) * len(space.shape)
        return Box(np.tile(space.low, reps), np.tile(space.high, reps),
                   (n,) + space.shape, space.dtype)
    if isinstance(space, MultiDiscrete):
        return MultiDiscrete(np.tile(space.nvec, (n,) + (1,) * space.nvec.ndim))
    if isinstance(space, MultiBinary):
        return MultiBinary((n,) + space.shape)
    if isinstance(space, Tuple):
        return Tuple(batch(s, n) for s in space.spaces)
    if isinstance(space, Dict):
        return Dict((k, batch(s, n)) for k, s in space.spaces.items())
    raise TypeError(f"cannot batch {space!r}")


def dtype_bounds(dtype):
    """(low, high) of a numeric dtype: its range for integers, +-inf for
    floats."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min, info.max
    return -np.inf, np.inf


__all__ = ["AutoresetMode", "Box", "Dict", "Discrete", "GYMNASIUM", "MultiBinary",
           "MultiDiscrete", "Tuple", "batch", "box", "dict_of", "discrete", "dtype_bounds",
           "multi_binary", "multi_discrete", "same_step_mode", "tuple_of", "MAX_BATCH",
           "MAX_BATCH_VALUES"]
