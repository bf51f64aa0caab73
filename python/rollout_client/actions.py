"""An env ABI 1 node's actions checked before anything is sent (the node's
own checks, named here by env: a refused action leaves the caller free to
try again). Env ABI 2's composite actions: abi2.check_actions."""
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from .hotpath import hot

if TYPE_CHECKING:
    from .welcome import NodeInfo


def finite_box(a: np.ndarray, rows: int, size: int, where: Callable[[int], str],
               what: str = "") -> np.ndarray:
    """Box actions of the right element count as float32 [rows, size]:
    ValueError (after ``what``, where given) unless they are numbers and
    finite, naming the first bad row by ``where(k)``."""
    head = f"{what}: " if what else ""
    if a.dtype.kind not in "fiub":
        raise ValueError(f"{head}box actions must be numbers, got dtype {a.dtype}")
    a = a.astype(np.float32).reshape(rows, size)
    finite = np.isfinite(a).all(axis=1)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"{head}box actions must be finite: {where(k)} has {a[k].tolist()}")
    return a


def check_actions(info: "NodeInfo", actions: Any, n: int, clip_box: bool = True,
                  where: Optional[Callable[[int], str]] = None) -> np.ndarray:
    """The actions for n envs of a node described by ``info`` (a NodeInfo),
    checked and in the wire's types: int64 [n] (discrete) or float32
    [n, action_size] (box: clipped to the bounds with clip_box, else
    refused outside them, as the node would).

    Raises ValueError naming the problem and the first bad row; ``where(k)``
    says what row k is (default "row k"). Nothing is sent: a caller that
    gets ValueError can try again with other actions.
    """
    where = where or (lambda k: f"row {k}")
    a = np.asarray(actions)
    if info.action_kind == "discrete":
        if a.shape not in ((n,), (n, 1)):
            raise ValueError(f"discrete actions for {n} envs must have shape ({n},), "
                             f"got {a.shape}")
        if a.dtype.kind not in "iub":
            raise ValueError(f"discrete actions must be integers, got dtype {a.dtype}")
        a = np.ascontiguousarray(a.reshape(n), np.int64)
        k = hot.first_outside(a, info.action_n)
        if k >= 0:
            bad = int(np.count_nonzero((a < 0) | (a >= info.action_n)))
            raise ValueError(f"discrete actions must lie in [0, {info.action_n}): action "
                             f"{int(a[k])} for {where(k)} ({bad} out of range)")
        return a
    size = info.action_size
    if a.size != n * size or (a.ndim > 1 and a.shape[0] != n):
        raise ValueError(f"box actions for {n} envs must have shape "
                         f"({n}, {', '.join(map(str, info.action_shape))}), got {a.shape}")
    a = finite_box(a, n, size, where)
    low, high = info.action_low, info.action_high
    if low is None or high is None:
        return a
    if clip_box:
        return np.clip(a, low, high)
    # Unclipped: the node refuses an action outside the box (error 34) and
    # ends the session of every env; refused here instead, naming the env.
    outside = ((a < low) | (a > high)).any(axis=1)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        raise ValueError(f"box actions must lie inside the bounds (clip_box=False): "
                         f"{where(k)} has {a[k].tolist()}")
    return a


__all__ = ["check_actions", "finite_box"]
