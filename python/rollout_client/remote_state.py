"""The remote VecEnv's ``get_state`` and ``set_state`` (docs/python.md "Env
state (remote)"): Frame{get_state} / Frame{set_state} to each node whose envs are
named, each answered by Frame{env_states} (docs/protocol.md "Env state").

A node takes and sets the states of envs its learner holds: every env of
a synchronous VecEnv after ``reset()`` or ``step()``, or of an asynchronous
one once it has received every env (none in flight). The semantics are
``make_vec``'s (vector.py): a state is bytes per env (the same blob both
give, so either takes the other's); ``set_state`` returns nothing, and each
restored env's next ``step()`` starts from its restored state (the
observation of that state is the one returned where it was saved; the
arrays handed out before keep the rows they had). A refusal raises and
changes nothing: NotImplementedError naming the env for an env without
state support, ValueError for a blob that is not a state of the env or an
env id out of range or named twice, RuntimeError for the rest (a node shared
with other learners, a recording node, an answer over the frame limit).
The connection goes on.
"""
from __future__ import annotations

import struct
import time
from typing import Any, Sequence

import numpy as np

from .errors import ConnectionClosed
from .framing import encode_frame

ENOTSUP, EBADMSG, EINVAL = 95, 74, 22  # EnvStates.code
_ELAPSED_AT = 80  # a blob's header: its episode's steps (src/envs/env_state.h)


def _targets(vec: Any, env_ids: Any, what: str) -> list[tuple[int, int]]:
    """(node, node env index) of each of env_ids (the VecEnv's env ids;
    env ABI 2: rows, each standing for its env)."""
    n = vec.num_envs
    ids = np.arange(n) if env_ids is None else np.asarray(env_ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"{what}: env_ids must be a 1-D sequence of ints, got shape "
                         f"{ids.shape} dtype {ids.dtype}")
    agents = vec.agents if vec.layout is not None else 1
    out = []
    for k in ids.tolist():
        if not 0 <= k < n:
            raise ValueError(f"{what}: env id {k} is outside [0, {n})")
        node = int(np.searchsorted(vec.offsets, k, side="right")) - 1
        out.append((node, (k - int(vec.offsets[node])) // agents))
    return out


def _check_ready(vec: Any, what: str) -> None:
    """Every env of the request must be held here with nothing in flight:
    frames that come during the exchange would be read under the lane or
    over views the client still hands out (framing.py)."""
    vec._check_open(f"{what}()")
    if not vec._started:
        raise RuntimeError(f"{what}() before reset(): call reset() first")
    lane = getattr(vec, "_lane", None)
    flight = vec._lane_counts()[1] if lane is not None else \
        (vec._nflight if vec._mode == "async" else 0)
    if flight or vec.client._ready:
        raise RuntimeError(f"{what}() while {flight or 'some'} envs are stepping at their "
                           "nodes or waiting to be received: recv() every env first")


def _exchange(vec: Any, frames: dict[int, bytes], what: str) -> dict[int, Any]:
    """Send each node its request and wait for every answer (EnvStates by
    node), at most vec.timeout."""
    cl = vec.client
    conns = {i: cl._conns[i] for i in frames}
    for i, body in frames.items():
        c = conns[i]
        if not c.open:
            raise ConnectionClosed(f"node {c.address} closed: {what}() cannot reach its envs")
        c.states = None
        c.outbuf += encode_frame(body)
        cl._flush(c)
    deadline = None if vec.timeout is None else time.monotonic() + vec.timeout
    while any(c.states is None for c in conns.values()):
        for c in conns.values():
            if not c.open:
                raise ConnectionClosed(f"node {c.address} closed before answering {what}()")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            late = [c.address for c in conns.values() if c.states is None]
            raise TimeoutError(f"{what}(): no answer from node(s) {', '.join(late)} after "
                               f"{vec.timeout:g}s")
        for key, mask in cl._sel.select(left):
            c = key.data
            if c.open and mask & 2:  # selectors.EVENT_WRITE
                cl._flush(c)
            if c.open and mask & 1:  # selectors.EVENT_READ
                cl._on_readable(c)
        if cl._ready:  # nothing was in flight: a node broke the protocol
            c = conns[cl._ready[0].node]
            cl._fail(c, f"observations while the learner waited for its {what} answer")
    out = {}
    for i, c in conns.items():
        out[i], c.states = c.states, None
    return out


def _raise_refusal(c: Any, a: Any, what: str) -> None:
    """A node's refusal (EnvStates.code), as make_vec's would be raised."""
    msg = f"{what}: node {c.address}: {a.error}"
    if a.code == ENOTSUP:
        raise NotImplementedError(msg)
    if a.code in (EBADMSG, EINVAL):
        raise ValueError(msg)
    raise RuntimeError(f"{msg} (code {a.code})")


def _answers(vec: Any, targets: list[tuple[int, int]], body_of: Any, what: str) -> dict[int, Any]:
    """One request per node of targets (body_of(pb frame, node, positions)
    fills it), every answer checked to name the envs asked."""
    pb = vec.client._pb
    by_node: dict[int, list[int]] = {}
    for pos, (node, _) in enumerate(targets):
        by_node.setdefault(node, []).append(pos)
    frames = {}
    for node, positions in by_node.items():
        f = pb.Frame()
        body_of(f, node, positions)
        frames[node] = f.SerializeToString()
        limit = vec.nodes[node].max_frame
        if limit and len(frames[node]) > limit:  # the node would close the connection
            raise RuntimeError(f"{what}: {len(positions)} states take {len(frames[node])} "
                               f"bytes, over node {vec.nodes[node].address}'s frame limit "
                               f"({limit}): set fewer envs at a time")
    got = _exchange(vec, frames, what)
    for node, a in got.items():
        c = vec.client._conns[node]
        want = [targets[p][1] for p in by_node[node]]
        if a.code:
            _raise_refusal(c, a, what)
        if list(a.env) != want:
            vec.client._fail(c, f"env_states answer names envs {list(a.env)[:8]}, the "
                                f"{what} asked for {want[:8]}")
    return got


def get_state(vec: Any, env_ids: Any = None) -> list[bytes]:
    """The states of envs env_ids (default all) as bytes, one per id."""
    _check_ready(vec, "get_state")
    targets = _targets(vec, env_ids, "get_state")
    if not targets:
        return []
    distinct = sorted(set(targets))  # env ABI 2: an env's rows share its state

    def body(f: Any, node: int, positions: list[int]) -> None:
        f.get_state.env.extend(distinct[p][1] for p in positions)

    got = _answers(vec, distinct, body, "get_state")
    blob = {}
    for node, a in got.items():
        if len(a.state) != len(a.env):
            vec.client._fail(vec.client._conns[node],
                             f"env_states answer with {len(a.state)} states for {len(a.env)} envs")
        for e, s in zip(a.env, a.state):
            blob[(node, e)] = bytes(s)
    return [blob[t] for t in targets]


def set_state(vec: Any, env_ids: Any, states: Sequence[bytes]) -> None:
    """Restores envs env_ids from states (one blob per id): see the module."""
    _check_ready(vec, "set_state")
    targets = _targets(vec, env_ids, "set_state")
    states = list(states)
    if len(targets) != len(states):
        raise ValueError(f"set_state: {len(targets)} env ids and {len(states)} states")
    ids = np.asarray(env_ids).tolist()
    if len(set(ids)) != len(ids):
        raise ValueError("set_state: an env id is named twice")
    blobs: dict[tuple[int, int], bytes] = {}
    for i, (t, s) in enumerate(zip(targets, states)):
        if not isinstance(s, (bytes, bytearray, memoryview)):
            raise ValueError(f"set_state: state {i} is {type(s).__name__}, not bytes")
        if blobs.setdefault(t, bytes(s)) != bytes(s):  # env ABI 2: rows of one env
            raise ValueError(f"set_state: env id {ids[i]} is an agent row of an env named "
                             "before with another state: an env's rows share one state")
    if not targets:
        return
    distinct = sorted(blobs)

    def body(f: Any, node: int, positions: list[int]) -> None:
        f.set_state.env.extend(distinct[p][1] for p in positions)
        f.set_state.state.extend(blobs[distinct[p]] for p in positions)

    _answers(vec, distinct, body, "set_state")
    _restored(vec, env_ids, states)


def _restored(vec: Any, env_ids: Any, states: list[Any]) -> None:
    """The VecEnv's own bookkeeping of restored envs: no autoreset pending
    (the restored state goes on), episode counts from the blob's steps, and
    the next row is_first (a recurrent policy has no state for it)."""
    rows = np.asarray(env_ids, np.int64)
    if vec.layout is not None and vec.agents > 1:  # every row of each env
        rows = (rows // vec.agents)[:, None] * vec.agents + np.arange(vec.agents)
        rows = rows.reshape(-1)
        elapsed = np.repeat([_elapsed(s) for s in states], vec.agents)
    else:
        elapsed = np.asarray([_elapsed(s) for s in states], np.int64)
    if vec.layout is not None and vec._mask is not None:
        mask = vec._mask.copy()  # the one handed out stays the caller's
        mask[rows] = 1  # unknown until the next observation: the node allows all
        vec._mask = mask
    if vec._next is not None:
        vec._next.pending[rows] = False
    if vec._disabled is not None:
        vec._disabled.waiting[rows] = False
    vec._ep_return[rows] = 0.0
    vec._ep_length[rows] = elapsed
    if vec._last_seen is not None and len(vec._last_seen) > int(rows.max(initial=0)):
        vec._last_seen[rows] = -2


def _elapsed(blob: Any) -> int:
    """A checked blob's episode steps (the node accepted it)."""
    (n,) = struct.unpack_from("<Q", bytes(blob[_ELAPSED_AT:_ELAPSED_AT + 8]))
    return int(n)


__all__ = ["get_state", "set_state"]
