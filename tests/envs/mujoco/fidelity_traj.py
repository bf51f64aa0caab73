"""Reads a rollout trajectory file (format version 1, docs/replay.md) into
numpy arrays, entry by entry in file order: what the fidelity check
compares Gymnasium with.

The generated rollout_pb2 comes from the Python client's loader
(python/rollout_client/_proto.py; the meson tests point $ROLLOUT_PROTO_OUT
at the build's)."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

_LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python",
                       "rollout_client", "_proto.py")
MAGIC = b"ROTRAJ1\n"
TERMINATED, TRUNCATED, FAILED, RESET = 1, 2, 4, 8


def pb2() -> Any:
    """The generated rollout_pb2 module, through the client's own loader."""
    spec = importlib.util.spec_from_file_location("_rollout_proto_loader", _LOADER)
    assert spec is not None and spec.loader is not None
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    return loader.load()


@dataclass
class Trajectory:
    """Every entry of one file, in file order (row k is entry k)."""
    header: Any
    env: np.ndarray      # uint32 [n]
    episode: np.ndarray  # uint64 [n]
    step: np.ndarray     # uint32 [n]
    flags: np.ndarray    # uint32 [n]
    reward: np.ndarray   # float32 [n]
    action: np.ndarray   # float32 [n, action_dim] (discrete: the index as a float)
    obs: np.ndarray      # float32 [n, obs_dim]


def _varint(data: bytes, i: int) -> tuple[int, int]:
    n, shift = 0, 0
    while True:
        b = data[i]
        n |= (b & 0x7F) << shift
        shift += 7
        i += 1
        if not b & 0x80:
            return n, i


def read(path: str) -> Trajectory:
    """Reads a whole version 1 file (no CRC check: rollout-replay --verify
    is the file's checker; this reads what it accepted)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a rollout trajectory file")
    pb = pb2()
    i, records = 8, []
    while i < len(data):
        n, i = _varint(data, i)
        records.append(data[i:i + n])
        i += n + 4
    header = pb.TrajectoryHeader()
    header.ParseFromString(records[0])
    if header.format_version != 1:
        raise ValueError(f"{path}: format version {header.format_version}, not 1")
    od, ad = header.obs_dim, header.action_dim
    cols: dict[str, list[np.ndarray]] = {k: [] for k in
                                         ("env", "episode", "step", "flags", "reward", "action",
                                          "obs")}
    for payload in records[1:]:
        b = pb.TransitionBatch()
        b.ParseFromString(payload)
        if b.dropped:
            raise ValueError(f"{path}: record {b.record} follows {b.dropped} dropped steps")
        k = len(b.env)
        cols["env"].append(np.array(b.env, dtype=np.uint32))
        cols["episode"].append(np.array(b.episode, dtype=np.uint64))
        cols["step"].append(np.array(b.step, dtype=np.uint32))
        cols["flags"].append(np.array(b.flags, dtype=np.uint32))
        cols["reward"].append(np.array(b.reward, dtype=np.float32))
        if header.action_kind == "discrete":
            cols["action"].append(np.array(b.action, dtype=np.float32).reshape(k, 1))
        else:
            cols["action"].append(np.array(b.action_box, dtype=np.float32).reshape(k, ad))
        cols["obs"].append(np.array(b.obs, dtype=np.float32).reshape(k, od))
    return Trajectory(header=header, **{k: np.concatenate(v) for k, v in cols.items()})


def float_bits(x: np.ndarray) -> np.ndarray:
    """float32 values as their bits, so NaNs and signed zeros compare too."""
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)

