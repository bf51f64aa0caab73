"""Gymnasium spaces as env ABI 2 layouts, for the env worker (env_worker.py).

A Python env run by rollout reports its spaces once, in the binary form that
the node's src/envs/pyenv_spec.c reads and checks (docs/env-api.md "Python
envs"):

- observations: named tensors of uint8, int32 or float32. A Box of any dtype
  is one tensor (float16/float64 as float32, bool as uint8, other integers as
  int32 when their bounds fit); Discrete an int32 of shape (1,); MultiDiscrete
  an int32, MultiBinary a uint8 tensor of its shape; Dict and Tuple their
  parts, in order, named by their keys (or indices) joined with ``_``.
- actions: parts (a Tuple or Dict of several, in order): Discrete,
  MultiDiscrete, MultiBinary (1-D) and Box (float32 on the wire, cast to the
  space's dtype for the env).

Anything else (Text, Graph, Sequence, nested Dicts in actions...) is refused
by name with :class:`UnsupportedSpace`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

# Env ABI 2's codes (include/rollout/env.h).
DTYPE_UINT8, DTYPE_INT32, DTYPE_FLOAT32 = 1, 2, 3
KIND_DISCRETE, KIND_BOX, KIND_MULTI_DISCRETE, KIND_MULTI_BINARY = 1, 2, 3, 4
MAX_TENSORS, MAX_PARTS, MAX_DIMS, MAX_NAME = 8, 8, 4, 32
NP_OF = {DTYPE_UINT8: np.uint8, DTYPE_INT32: np.int32, DTYPE_FLOAT32: np.float32}

_OBS = struct.Struct("<32sIII4II")  # name, dtype, ndim, pad, shape[4], has_bounds
_PART = struct.Struct("<III4II")  # kind, n, ndim, shape[4], pad


class UnsupportedSpace(ValueError):
    """A space rollout cannot carry; the message names it and where it is."""


@dataclass
class ObsTensor:
    """One observation tensor: its name, ABI dtype, shape and bounds."""
    name: str
    dtype: int
    shape: Tuple[int, ...]
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None


@dataclass
class ActPart:
    """One action part and how a row's values become the env's action."""
    kind: int
    n: int
    shape: Tuple[int, ...] = (1,)
    nvec: Optional[np.ndarray] = None
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None
    convert: Callable[[np.ndarray, np.ndarray], Any] = field(default=lambda d, b: None)
    start: int = 0  # Discrete: the space's start
    dtype: Any = None  # Box: the space's dtype (what convert casts to)


@dataclass
class Layout:
    """A Gymnasium env's spaces seen as env ABI 2: what to report, how to
    write an observation into tensor views and how to read an action."""
    tensors: List[ObsTensor]
    parts: List[ActPart]
    ndisc: int
    nbox: int
    flatten: Callable[[Any], List[Any]]
    action: Callable[[np.ndarray, np.ndarray], Any]
    single_leaf: bool = False  # the observation is one Box (or Discrete...), no Dict or Tuple
    composite_action: bool = False  # the action space is a Tuple or Dict (of any parts)


def _shape(space: Any, where: str) -> Tuple[int, ...]:
    shape = tuple(int(d) for d in space.shape) or (1,)
    if len(shape) > MAX_DIMS:
        raise UnsupportedSpace(f"{where}: {type(space).__name__} of shape {space.shape} has "
                               f"more than {MAX_DIMS} dimensions")
    return shape


def _bounds(space: Any, shape: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore"):
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), shape).astype(np.float32)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), shape).astype(np.float32)
    return low.ravel(), high.ravel()


def _box_tensor(space: Any, name: str) -> ObsTensor:
    shape = _shape(space, f"observation '{name}'")
    dt = np.dtype(space.dtype)
    if dt == np.uint8 or dt == np.bool_:
        return ObsTensor(name, DTYPE_UINT8, shape)
    if dt.kind == "f":
        low, high = _bounds(space, shape)
        return ObsTensor(name, DTYPE_FLOAT32, shape, low, high)
    if dt.kind in "iu":
        info = np.iinfo(np.int32)
        lo, hi = np.asarray(space.low), np.asarray(space.high)
        if lo.min() < info.min or hi.max() > info.max:
            raise UnsupportedSpace(f"observation '{name}': a Box of {dt} whose bounds do not "
                                   "fit int32")
        low, high = _bounds(space, shape)
        return ObsTensor(name, DTYPE_INT32, shape, low, high)
    raise UnsupportedSpace(f"observation '{name}': a Box of dtype {dt}")


def _obs_tensors(space: Any, name: str, out: List[ObsTensor],
                 writers: List[Callable[[Any, List[Any]], None]]) -> None:
    """Appends space's tensors to out, and to writers one function per leaf
    that appends the leaf's value of an observation to a list."""
    from gymnasium import spaces as gs
    if isinstance(space, gs.Dict):
        for key, sub in space.spaces.items():
            child = f"{name}_{key}" if name != "obs" else str(key)
            getter = (lambda k: lambda o: o[k])(key)
            _nested(sub, child, out, writers, getter)
        return
    if isinstance(space, gs.Tuple):
        for i, sub in enumerate(space.spaces):
            child = f"{name}_{i}"
            getter = (lambda k: lambda o: o[k])(i)
            _nested(sub, child, out, writers, getter)
        return
    if isinstance(space, gs.Box):
        out.append(_box_tensor(space, name))
    elif isinstance(space, gs.Discrete):
        out.append(ObsTensor(name, DTYPE_INT32, (1,),
                             np.array([space.start], np.float32),
                             np.array([space.start + space.n - 1], np.float32)))
    elif isinstance(space, gs.MultiDiscrete):
        shape = _shape(space, f"observation '{name}'")
        low = np.broadcast_to(np.asarray(space.start, np.float32), shape).ravel()
        high = (np.asarray(space.start) + np.asarray(space.nvec) - 1).astype(np.float32).ravel()
        out.append(ObsTensor(name, DTYPE_INT32, shape, low, high))
    elif isinstance(space, gs.MultiBinary):
        out.append(ObsTensor(name, DTYPE_UINT8, _shape(space, f"observation '{name}'")))
    else:
        raise UnsupportedSpace(f"observation '{name}': rollout cannot carry a "
                               f"{type(space).__name__} space (Box, Discrete, MultiDiscrete, "
                               "MultiBinary, Dict and Tuple only)")
    writers.append(lambda o, acc: acc.append(o))


def _nested(space: Any, name: str, out: List[ObsTensor],
            writers: List[Callable[[Any, List[Any]], None]], getter: Callable[[Any], Any]) -> None:
    sub: List[Callable[[Any, List[Any]], None]] = []
    _obs_tensors(space, name, out, sub)

    def write(o: Any, acc: List[Any]) -> None:
        v = getter(o)
        for w in sub:
            w(v, acc)
    writers.append(write)


def _act_parts(space: Any, out: List[ActPart], where: str = "action") -> None:
    from gymnasium import spaces as gs
    if isinstance(space, (gs.Tuple, gs.Dict)) and where == "action":
        subs = space.spaces.values() if isinstance(space, gs.Dict) else space.spaces
        for i, sub in enumerate(subs):
            _act_parts(sub, out, f"action part {i}")
        return
    if isinstance(space, gs.Discrete):
        start = int(space.start)
        out.append(ActPart(KIND_DISCRETE, int(space.n), start=start))
        out[-1].convert = lambda d, b: int(d[0]) + start
    elif isinstance(space, gs.MultiDiscrete):
        if len(space.shape) != 1:
            raise UnsupportedSpace(f"{where}: a MultiDiscrete of shape {space.shape} (1-D only)")
        start_md = np.asarray(space.start)
        dt = space.dtype
        out.append(ActPart(KIND_MULTI_DISCRETE, int(space.shape[0]),
                           nvec=np.asarray(space.nvec, np.uint32)))
        out[-1].convert = lambda d, b: (d + start_md).astype(dt)
    elif isinstance(space, gs.MultiBinary):
        if len(space.shape) != 1:
            raise UnsupportedSpace(f"{where}: a MultiBinary of shape {space.shape} (1-D only)")
        dt_b = space.dtype
        out.append(ActPart(KIND_MULTI_BINARY, int(space.shape[0])))
        out[-1].convert = lambda d, b: d.astype(dt_b)
    elif isinstance(space, gs.Box):
        shape = _shape(space, where)
        low, high = _bounds(space, shape)
        dt_x = space.dtype
        out.append(ActPart(KIND_BOX, int(np.prod(shape)), shape, low=low, high=high, dtype=dt_x))
        out[-1].convert = lambda d, b: b.reshape(shape).astype(dt_x)
    else:
        raise UnsupportedSpace(f"{where}: rollout cannot carry a {type(space).__name__} action "
                               "space (Discrete, MultiDiscrete, MultiBinary, Box, or a Tuple or "
                               "Dict of them)")


def layout_of(obs_space: Any, act_space: Any) -> Layout:
    """The layout of an env's spaces, or UnsupportedSpace naming the part."""
    tensors: List[ObsTensor] = []
    writers: List[Callable[[Any, List[Any]], None]] = []
    _obs_tensors(obs_space, "obs", tensors, writers)
    if len(tensors) > MAX_TENSORS:
        raise UnsupportedSpace(f"observation: {len(tensors)} tensors; rollout carries at most "
                               f"{MAX_TENSORS}")
    for t in tensors:
        if len(t.name.encode()) >= MAX_NAME:
            raise UnsupportedSpace(f"observation '{t.name}': name longer than {MAX_NAME - 1} bytes")
    parts: List[ActPart] = []
    _act_parts(act_space, parts)
    if len(parts) > MAX_PARTS:
        raise UnsupportedSpace(f"action: {len(parts)} parts; rollout carries at most {MAX_PARTS}")
    ndisc = sum(p.n for p in parts if p.kind != KIND_BOX)
    nbox = sum(p.n for p in parts if p.kind == KIND_BOX)

    def flatten(o: Any) -> List[Any]:
        acc: List[Any] = []
        for w in writers:
            w(o, acc)
        return acc

    from gymnasium import spaces as gs
    composite = isinstance(act_space, (gs.Tuple, gs.Dict))
    action = _action_builder(parts, act_space, composite)
    single = not isinstance(obs_space, (gs.Dict, gs.Tuple))
    return Layout(tensors, parts, ndisc, nbox, flatten, action, single, composite)


def _action_builder(parts: Sequence[ActPart], space: Any,
                    composite: bool) -> Callable[[np.ndarray, np.ndarray], Any]:
    """How a row's discrete entries and box floats become the env's action."""
    spans = []
    d = b = 0
    for p in parts:
        if p.kind == KIND_BOX:
            spans.append((p.convert, slice(0, 0), slice(b, b + p.n)))
            b += p.n
        else:
            spans.append((p.convert, slice(d, d + p.n), slice(0, 0)))
            d += p.n
    if not composite:
        conv, ds, bs = spans[0]
        return lambda di, bo: conv(di[ds], bo[bs])
    keys = list(space.spaces.keys()) if hasattr(space.spaces, "keys") else None

    def build(di: np.ndarray, bo: np.ndarray) -> Any:
        vals = [c(di[ds], bo[bs]) for c, ds, bs in spans]
        return dict(zip(keys, vals)) if keys is not None else tuple(vals)
    return build


def encode_spec(lay: Layout) -> bytes:
    """The spec the node reads (src/envs/pyenv_spec.c): the tensors, the
    parts, then each bounded tensor's low and high, each part's nvec or
    bounds."""
    out = [struct.pack("<I", len(lay.tensors))]
    tail: List[bytes] = []
    for t in lay.tensors:
        shape = list(t.shape) + [0] * (MAX_DIMS - len(t.shape))
        bounded = t.low is not None
        out.append(_OBS.pack(t.name.encode(), t.dtype, len(t.shape), 0, *shape, int(bounded)))
        if bounded:
            assert t.low is not None and t.high is not None
            tail += [t.low.astype("<f4").tobytes(), t.high.astype("<f4").tobytes()]
    out.append(struct.pack("<I", len(lay.parts)))
    for p in lay.parts:
        shape = list(p.shape) + [0] * (MAX_DIMS - len(p.shape))
        out.append(_PART.pack(p.kind, p.n, len(p.shape), *shape, 0))
        if p.kind == KIND_MULTI_DISCRETE:
            assert p.nvec is not None
            tail.append(p.nvec.astype("<u4").tobytes())
        elif p.kind == KIND_BOX:
            assert p.low is not None and p.high is not None
            tail += [p.low.astype("<f4").tobytes(), p.high.astype("<f4").tobytes()]
    return b"".join(out + tail)
