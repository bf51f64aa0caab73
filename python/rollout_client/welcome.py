"""A node's Welcome, checked: what it may ask of a learner (the limits
rollout-learner keeps too) and the NodeInfo a Client keeps of it. Nothing
the welcome says is allocated before it is checked against the limits;
each refusal is a ProtocolError naming the field (issue 31 B)."""
import dataclasses
from typing import Any, NoReturn, Optional, Tuple

import numpy as np

from . import abi2, spaces
from .errors import ProtocolError

# Element types an observation space may declare (Space.dtype): numpy names.
# What a welcome may ask of us, as rollout-learner bounds it
# (src/wire/checks.c, programs/learner/learner.h): envs (rows) per node, values
# in one space, and the bytes of one observation column (every env's
# observation), which a VecEnv holds a few of. A welcome over these is
# refused, naming the field, before anything of its size is allocated.
MAX_NUM_ENVS = 1 << 20
MAX_SPACE_VALUES = 1 << 20
MAX_OBS_COLUMN_BYTES = 1 << 30
OBS_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64")


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What a node told us in its Welcome."""
    index: int               # position of the node in the client's address list
    address: str             # "host:port" as given
    node_id: int
    seed: int
    env: str
    num_envs: int
    max_episode_steps: int   # 0: none
    obs_shape: Tuple[int, ...]
    obs_dim: int             # product of obs_shape: obs rows are flattened
    obs_dtype: np.dtype      # the observations' element type (Space.dtype; float32 by default)
    obs_low: np.ndarray      # [obs_dim] in obs_dtype: the bounds the node sent, else the
    obs_high: np.ndarray     # dtype's range (-inf/inf for floats)
    action_kind: str         # "discrete" or "box"
    action_n: int            # discrete: number of actions (0 for box)
    action_shape: Tuple[int, ...]  # box: shape of one action (() for discrete)
    action_low: Optional[np.ndarray]   # box: float32 [action_size]
    action_high: Optional[np.ndarray]
    max_frame: int           # largest frame the node accepts (0: not said)
    node_index: int = 0      # its --node-index: env i seeds from (seed, node_index, i)
    # An env ABI 2 node (docs/protocol.md "SEED mode and env ABI 2"): its
    # welcome's layout (abi2.SeedLayout), and its agents per env. num_envs
    # then counts rows (envs x agents); the obs_* and action_* fields are
    # placeholders (action_kind "abi2"): the layout says it all.
    layout: Any = None
    agents: int = 1

    @property
    def action_size(self):
        """Floats per action (box), 1 for discrete."""
        return int(np.prod(self.action_shape)) if self.action_kind == "box" else 1


def _refuse(message: str) -> NoReturn:
    raise ProtocolError(message)


def node_info(c: Any, w: Any) -> NodeInfo:
    """The NodeInfo of connection c (its index and address) from a checked
    Welcome w; ProtocolError naming the field (the caller tells the node
    and closes). The protocol version is checked before."""
    if not w.HasField("spec"):
        _refuse("welcome has no spec")
    s = w.spec
    if w.HasField("layout"):
        return _node_info_abi2(c, w)
    o = s.observation
    if o.kind != "box" or not o.shape:
        _refuse(f"observation space must be a box with a shape, got kind "
                f"{o.kind[:20]!r} shape {list(o.shape)[:8]}")
    if not 1 <= s.num_envs <= MAX_NUM_ENVS:
        _refuse(f"welcome spec.num_envs {s.num_envs} is not in [1, {MAX_NUM_ENVS}]")
    obs_shape = _shape("spec.observation.shape", o.shape)
    obs_dim = int(np.prod(obs_shape))
    if (o.dtype or "float32") not in OBS_DTYPES:
        _refuse(f"observation dtype {o.dtype[:40]!r} is not one of "
                f"{', '.join(OBS_DTYPES)}")
    obs_dtype = np.dtype(o.dtype or "float32")
    if s.num_envs * obs_dim * obs_dtype.itemsize > MAX_OBS_COLUMN_BYTES:
        _refuse(f"welcome spec.num_envs {s.num_envs} x spec.observation.shape "
                f"{list(obs_shape)} ({obs_dtype.name}) is over "
                f"{MAX_OBS_COLUMN_BYTES >> 20} MiB of observations")
    lo, hi = spaces.dtype_bounds(obs_dtype)
    obs_low = np.full(obs_dim, lo, obs_dtype)
    obs_high = np.full(obs_dim, hi, obs_dtype)
    if len(o.low) == obs_dim and len(o.high) == obs_dim:
        # Bounds travel as floats: infinite ones mean the dtype's range.
        fl, fh = np.array(o.low, np.float64), np.array(o.high, np.float64)
        if np.isnan(fl).any() or np.isnan(fh).any() or (fl > fh).any():
            _refuse("observation bounds have NaN or low > high")
        for bound, out in ((fl, obs_low), (fh, obs_high)):
            finite = np.isfinite(bound)
            if (bound[finite] < lo).any() or (bound[finite] > hi).any():
                _refuse(f"observation bounds lie outside {obs_dtype.name}'s range")
            out[finite] = bound[finite].astype(obs_dtype)
    elif len(o.low) or len(o.high):
        _refuse(f"observation bounds have {len(o.low)}/{len(o.high)} values, "
                f"shape needs {obs_dim}")
    a = s.action
    low = high = None
    action_shape: Tuple[int, ...]
    if a.kind == "discrete":
        if not 1 <= a.n <= MAX_SPACE_VALUES:
            _refuse(f"welcome spec.action.n {a.n} is not in [1, {MAX_SPACE_VALUES}]")
        action_n, action_shape = int(a.n), ()
    elif a.kind == "box":
        action_n, action_shape = 0, _shape("spec.action.shape", a.shape)
        size = int(np.prod(action_shape))
        if len(a.low) == size and len(a.high) == size:
            low = np.array(a.low, dtype=np.float32)
            high = np.array(a.high, dtype=np.float32)
        elif len(a.low) or len(a.high):
            _refuse(f"box action bounds have {len(a.low)}/{len(a.high)} values, "
                    f"shape needs {size}")
    else:
        _refuse(f"unknown action space kind {a.kind[:20]!r}")
    return NodeInfo(index=c.index, address=c.address, node_id=int(w.node_id),
                    seed=int(w.seed), env=s.env, num_envs=int(s.num_envs),
                    max_episode_steps=int(s.max_episode_steps), obs_shape=obs_shape,
                    obs_dim=obs_dim, obs_dtype=obs_dtype, obs_low=obs_low,
                    obs_high=obs_high, action_kind=a.kind, action_n=action_n,
                    action_shape=action_shape, action_low=low, action_high=high,
                    max_frame=int(w.max_frame), node_index=int(w.node_index))

def _shape(field: str, shape: Any) -> Tuple[int, ...]:
    """A box's shape from a welcome: 1 to 4 dims of at least 1, at most
    MAX_SPACE_VALUES values (checked before anything is allocated)."""
    dims = list(shape)
    if not 1 <= len(dims) <= 4 or min(dims) < 1 or \
            int(np.prod(dims, dtype=object)) > MAX_SPACE_VALUES:
        _refuse(f"welcome {field} {dims[:8]} is not 1 to 4 dims of at most "
                f"{MAX_SPACE_VALUES} values")
    return tuple(int(d) for d in dims)

def _node_info_abi2(c: Any, w: Any) -> NodeInfo:
    """NodeInfo of an env ABI 2 node: its layout, rows as num_envs."""
    lay = abi2.SeedLayout(w.layout)  # ProtocolError naming the field
    s = w.spec
    if not 1 <= s.num_envs <= MAX_NUM_ENVS // lay.agents:
        _refuse(f"welcome spec.num_envs {s.num_envs} of {lay.agents} agents is over "
                f"{MAX_NUM_ENVS} rows")
    row = sum(int(np.prod(shape)) * dt.itemsize for _, dt, shape in lay.tensors)
    if s.num_envs * lay.agents * row > MAX_OBS_COLUMN_BYTES:
        _refuse(f"welcome spec.num_envs {s.num_envs} x {lay.agents} agents x layout "
                f"tensors of {row} bytes a row is over {MAX_OBS_COLUMN_BYTES >> 20} MiB "
                "of observations")
    none = np.zeros(0, np.float32)
    return NodeInfo(index=c.index, address=c.address, node_id=int(w.node_id),
                    seed=int(w.seed), env=s.env, num_envs=int(s.num_envs) * lay.agents,
                    max_episode_steps=int(s.max_episode_steps), obs_shape=(), obs_dim=0,
                    obs_dtype=np.dtype(np.float32), obs_low=none, obs_high=none,
                    action_kind="abi2", action_n=0, action_shape=(), action_low=None,
                    action_high=None, max_frame=int(w.max_frame),
                    node_index=int(w.node_index), layout=lay, agents=lay.agents)


__all__ = ["MAX_NUM_ENVS", "MAX_OBS_COLUMN_BYTES", "MAX_SPACE_VALUES", "NodeInfo", "OBS_DTYPES",
           "node_info"]
