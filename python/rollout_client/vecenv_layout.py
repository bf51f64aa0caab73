"""The rows a VecEnv works over, one way for both env ABIs (issue 30).

An env ABI 2 node's welcome layout (abi2.SeedLayout) says what a row is:
its tensors, agents, action parts and mask. An env ABI 1 node's spaces are
adapted to the same form: one tensor ``"obs"`` (the node's dtype and
shape), one agent per env, no mask, one Discrete or Box action part. From
here on VecEnv (vecenv.py), its asynchronous stepping (vecenv_async.py)
and its actions (vecenv_actions.py) have one implementation; only a
frame's decoding (VecEnv._ingest) and the action wire (vecenv_actions.py)
know which ABI the node speaks.
"""
from typing import Any, List, Optional, Tuple

import numpy as np

from . import abi2, spaces


class RowLayout:
    """What one row of the VecEnv's nodes is: ``tensors`` (name, numpy
    dtype, shape of one row), ``agents`` rows per env, ``mask_width`` mask
    bytes per row, the single spaces, and ``abi2`` (the nodes' SeedLayout,
    or None for env ABI 1 nodes, whose NodeInfo is ``abi1``). Raises
    ValueError when the nodes' spaces differ."""

    def __init__(self, infos: "List[Any]") -> None:
        first = infos[0]
        self.abi2: "Optional[abi2.SeedLayout]" = first.layout
        self.abi1: Any = None if first.layout is not None else first
        for info in infos[1:]:
            same = (info.layout is not None and self.abi2 is not None and
                    self.abi2.same(info.layout)) if self.abi2 is not None or \
                info.layout is not None else _same_spaces(first, info)
            if not same:
                raise ValueError(f"node {info.address} has other spaces than {first.address}: "
                                 "a VecEnv needs the same observation and action spaces")
        self.tensors: "List[Tuple[str, np.dtype, Tuple[int, ...]]]"
        if self.abi2 is not None:
            lay = self.abi2
            self.agents = lay.agents
            self.tensors = list(lay.tensors)
            self.mask_width = lay.mask_width
            self.single_observation_space, self.single_action_space = abi2.spaces_of(lay)
        else:
            self.agents = 1
            self.tensors = [("obs", first.obs_dtype, tuple(first.obs_shape))]
            self.mask_width = 0
            self.single_observation_space = spaces.box(
                first.obs_low.reshape(first.obs_shape), first.obs_high.reshape(first.obs_shape),
                first.obs_shape, first.obs_dtype)
            self.single_action_space = _abi1_action_space(first)
        # One tensor is handed out as its array, several as a dict of them.
        self.dict_obs = len(self.tensors) > 1

    def fill(self, dtype: np.dtype) -> float:
        """What a row without a final observation holds in final_obs."""
        return np.nan if dtype.kind == "f" else 0


def _abi1_action_space(info: Any) -> Any:
    if info.action_kind == "discrete":
        return spaces.discrete(info.action_n)
    inf = np.full(info.action_shape, np.inf, np.float32)
    low = info.action_low.reshape(info.action_shape) if info.action_low is not None else -inf
    high = info.action_high.reshape(info.action_shape) if info.action_high is not None else inf
    return spaces.box(low, high, info.action_shape, np.float32)


def _same_spaces(a: Any, b: Any) -> bool:
    def eq(x: Any, y: Any) -> bool:
        return (x is None and y is None) or (x is not None and y is not None
                                             and bool(np.array_equal(x, y)))
    return bool(a.obs_shape == b.obs_shape and a.obs_dtype == b.obs_dtype
                and np.array_equal(a.obs_low, b.obs_low)
                and np.array_equal(a.obs_high, b.obs_high)
                and a.action_kind == b.action_kind and a.action_n == b.action_n
                and a.action_shape == b.action_shape and eq(a.action_low, b.action_low)
                and eq(a.action_high, b.action_high))


__all__ = ["RowLayout"]
