"""A VecEnv's actions, one way for both env ABIs: checked before anything
is sent (ValueError naming the env; nothing taken), kept as a tuple of
arrays with one row per env row until a frame's answer goes, and put on
the wire as the node's ABI takes them.

The tuple is env ABI 2's (int32 [k, ndisc], float32 [k, nbox]), the
layout's parts in order (abi2.check_actions: ranges, masks, bounds), or an
env ABI 1 node's one wire array (actions.check_actions: int64 [k] or
float32 [k, size]); vecenv_layout.py says why only this and a frame's
decoding know the ABI.
"""
from typing import Any, Callable, Optional, Tuple

import numpy as np

from . import abi2
from .actions import check_actions
from .vecenv_layout import RowLayout

Acts = Tuple[np.ndarray, ...]


class Actions:
    """``check(actions, k, mask, where)`` -> the tuple; ``blank(k)`` a
    frame's answer before its actions come; ``wire(acts, batch)`` what
    Client._queue_checked takes for a batch."""

    def __init__(self, rows: RowLayout, clip_box: bool) -> None:
        self.rows = rows
        self.clip_box = clip_box
        info = rows.abi1
        # One varint byte each when a discrete ABI 1 action fits in 7 bits.
        self._narrow = info is not None and info.action_kind == "discrete" and \
            info.action_n <= 128

    def check(self, actions: Any, k: int, mask: Optional[np.ndarray],
              where: Callable[[int], str]) -> Acts:
        """actions for k rows (mask: the rows' action masks, env ABI 2),
        checked; ValueError naming the first bad row."""
        if self.rows.abi2 is not None:
            return abi2.check_actions(self.rows.abi2, actions, k, mask, self.clip_box, where)
        return (check_actions(self.rows.abi1, actions, k, self.clip_box, where),)

    def blank(self, k: int) -> Acts:
        if self.rows.abi2 is not None:
            lay = self.rows.abi2
            return (np.zeros((k, lay.ndisc), np.int32), np.zeros((k, lay.nbox), np.float32))
        info = self.rows.abi1
        if info.action_kind == "discrete":
            return (np.zeros(k, np.int64),)
        return (np.zeros((k, info.action_size), np.float32),)

    def wire(self, acts: Acts, batch: Any) -> Any:
        if self.rows.abi2 is not None:
            return acts
        if self._narrow and not batch.in_memory:
            return acts[0].astype(np.uint8)
        return acts[0]


__all__ = ["Actions"]
