"""Stream mode: trajectory segments from rollout-nodes started with
``--learner stream`` (docs/protocol.md, "Stream mode"; docs/python.md).

A node acts with its own policy and streams every transition; a learner
receives whole segments, T steps of one shard's N envs, and may push new
weights back::

    with rollout_client.Stream(["127.0.0.1:5555"]) as s:
        b = s.recv(timeout=60)        # a SegmentBatch
        b.obs.shape                   # (T, N, obs_dim), float32
        b.action, b.logp, b.reward    # (T, N)
        s.push_policy(params)         # a PolicyParams, e.g. policy_params(...)

From a node whose env uses env ABI 2 (typed tensors, composite actions, a
mask, several agents), ``b.obs`` is a dict of the env's tensors by name
(``b.obs["view"]``, each of its own dtype, (T, rows, ...)), with
``b.action``, ``b.action_box`` and ``b.mask``; ``b.layout`` describes them
(docs/python.md).

The arrays are views into the bytes received: nothing is copied after the
socket read. They stay valid as long as you keep them (or the batch): the
receive buffer they view is never written again, so a batch you keep is
never overwritten by later ones. From a node on this host (``unix:PATH``,
or ``HOST:PORT`` moved there by the same-host upgrade) the segments come as references into the node's memory, mapped read-only
(``shared_memory=True``, the default; docs/protocol.md): each is copied
once out of it, into memory of its own, for the same guarantee. ``poison=True`` (a debug mode) fills a
batch's bytes with 0xFF when you call ``batch.release()``, so that code
that still reads a released batch sees NaNs and huge integers instead of
plausible data.
"""
import collections
import math
import os
import selectors
import time
from typing import Any, Optional, Sequence

import numpy as np

from . import _proto, shared_memory, wire
from .errors import (AuthenticationError, ConnectionClosed, FrameTooLarge, ProtocolError,
                     RemoteError, VersionMismatch)
from .framing import DEFAULT_MAX_FRAME, decode_varint, encode_frame
from .links import PROTOCOL_VERSION, Link, NodeLinks, node_addresses

# proto DType -> numpy dtype (little-endian).
_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<i4"), 3: np.dtype("u1"), 4: np.dtype("<u4"),
           5: np.dtype("<u8")}
_MAX_DIMS = 8  # a tensor's dims: (t, n) and an env tensor's 4, and room
_SEG = "a segment"  # what the wire reader's errors name
_BLOCK = 8 << 20  # receive buffers: each is filled once, then left to the batches viewing it


class StreamLayout:
    """What an env ABI 2 node's segments hold (its welcome's ``layout``):
    ``agents`` rows per env; ``tensors`` a list of (name, numpy dtype, shape
    of one row); per row ``ndisc`` int32 action entries, ``nbox`` box floats
    and ``mask_width`` mask bytes; ``metrics`` the env's metric names."""

    def __init__(self, msg):
        self.agents = msg.agents
        if not 1 <= self.agents <= 1024:
            raise ProtocolError(f"welcome layout with {self.agents} agents")
        self.tensors = []
        for t in msg.tensors:
            dt = _DTYPES.get(t.dtype)
            if dt is None or not t.name or not 1 <= len(t.shape) <= 4:
                raise ProtocolError(f"welcome layout tensor {t.name!r}: dtype {t.dtype}, "
                                    f"shape {list(t.shape)}")
            self.tensors.append((t.name, dt, tuple(t.shape)))
        self.ndisc = self.nbox = 0
        for p in msg.parts:
            if p.kind == "discrete":
                self.ndisc += 1
            elif p.kind in ("multi_discrete", "multi_binary"):
                self.ndisc += p.n
            elif p.kind == "box":
                self.nbox += p.n
            else:
                raise ProtocolError(f"welcome layout action part of kind {p.kind!r}")
        self.mask_width = msg.mask_width
        self.metrics = list(msg.metrics)


class SegmentBatch:
    """One segment: T steps of the N envs first_env .. first_env + N - 1.

    Arrays (numpy views into the received bytes): ``obs`` (T, N, obs...),
    ``action`` (T, N) int32 or (T, N, act) float32, ``logp`` (T, N),
    ``mean`` (T, N, act) and ``log_std`` (T, act) for a Gaussian policy,
    ``reward`` (T, N), ``terminated``/``truncated``/``is_first`` (T, N)
    uint8, ``episode``/``step`` (T, N) uint32, ``policy_version`` (T,)
    uint64, ``next_obs`` (N, obs...) the observation after the last step,
    ``final_index`` (K,) the flat t * N + n of the steps that ended an
    episode and ``final_obs`` (K, obs...) their last observations.
    ``in_memory`` tells that it came from the node's shared memory.
    ``tensors`` has every array by its name on the wire. From a node with
    a recurrent policy (``--recurrent``), ``state`` holds each row's state
    before the first step by name: ``state["h"]`` (N, H) float32 and, for
    an LSTM, ``state["c"]`` (``tensors["state/h"]``...); it is zero where
    ``is_first[0]`` is set. Without one ``state`` is ``{}``.

    From an env ABI 2 node (``layout`` set, a StreamLayout) N counts rows,
    ``agents`` per env (envs first_env .. first_env + N / agents - 1), and
    ``obs``, ``next_obs`` and ``final_obs`` are dicts of the env's tensors
    by name, each of its own dtype: ``obs["view"]`` (T, N, 7, 7) uint8 is
    ``tensors["obs/view"]``. ``action`` is (T, N, ndisc) int32 (None
    without discrete parts), ``action_box`` (T, N, nbox) float32 (or None),
    ``mask`` (T, N, mask_width) uint8, the mask each action was chosen
    under (or None); ``logp`` sums the log-probabilities of every head.
    """

    def __init__(self, node, header, tensors, block, span, poison=False, in_memory=False,
                 layout=None):
        self.node = node
        self.in_memory = in_memory  # read from the node's shared memory (then copied)
        self._poison = poison
        (self.seq, self.shard, self.shard_seq, self.first_env, self.t, self.n,
         self.policy_version_min, self.policy_version_max) = header
        self.tensors = tensors
        self.layout = layout
        self.agents = layout.agents if layout is not None else 1
        if layout is None:
            self.__dict__.update(tensors)
        else:
            self.__dict__.update((k, v) for k, v in tensors.items() if "/" not in k)
            for prefix in ("obs", "next_obs", "final_obs"):
                setattr(self, prefix, {name: tensors[f"{prefix}/{name}"]
                                       for name, _, _ in layout.tensors})
            self.action = tensors.get("action") if layout.ndisc else None
            self.action_box = tensors.get("action_box") if layout.nbox else None
            self.mask = tensors.get("mask") if layout.mask_width else None
        self.state = {k[len("state/"):]: v for k, v in tensors.items() if k.startswith("state/")}
        self._block, self._span = block, span

    @property
    def num_transitions(self):
        """Rows of the segment: T x N (env ABI 2: agent steps)."""
        return self.t * self.n

    @property
    def env_ids(self):
        """The env of each of the N rows."""
        return self.first_env + np.arange(self.n, dtype=np.int64) // self.agents

    @property
    def agent_ids(self):
        """The agent (0 .. agents - 1) of each of the N rows."""
        return np.arange(self.n, dtype=np.int64) % self.agents

    def release(self):
        """Done with this batch. In the stream's poison mode (a debug aid)
        its bytes are overwritten with 0xFF, so a view still in use shows
        NaNs and huge integers."""
        if self._poison and self._block is not None:
            a, b = self._span
            self._block[a:b] = 0xFF
        self._block = None


class _Node(Link):
    def __init__(self, index, address):
        super().__init__(index, address)
        self.block = np.empty(0, np.uint8)
        self.mv = memoryview(self.block)  # the same bytes, indexed as ints
        self.start = self.end = 0  # buffered bytes: block[start:end]
        self.ack_due = 0           # highest seq delivered
        self.acked = 0             # highest seq acknowledged
        self.ack_every = 1         # delivered segments per ack while more are buffered
        self.welcome = None
        self.layout = None  # a StreamLayout for an env ABI 2 node
        self.cell = None    # a recurrent node's ("gru" or "lstm", H)
        self.shm = None    # its segment memory, mapped read-only (uint8 array)
        self.accepted_version = None  # of our last policy push the node accepted


class Stream(NodeLinks):
    """Segments from one or more stream nodes.

    ``window`` asks each node to let this learner hold at most that many
    unacknowledged segments (default: the node's ``--stream-window``);
    ``max_policy_lag`` asks it to drop segments more than that many policy
    versions behind. A segment is acknowledged by a later recv(): once half
    the window is delivered, or when recv() would wait, so the node sends on
    while you train on the last one.

    ``upgrade`` (default True): over TCP, ask each node for the same-host
    upgrade (docs/protocol.md "Same-host upgrade"): a node on this host
    moves the stream to its private Unix-domain socket and shared memory;
    any failure there goes back to TCP. Logged on the ``rollout_client``
    logger; ``stream.upgraded[i]`` says whether node i moved.
    ``upgrade=False`` stays on TCP.
    """

    def __init__(self, addresses, token=None, token_file=None, name=None, window=0,
                 max_policy_lag=0, max_frame=DEFAULT_MAX_FRAME, connect_timeout=30.0,
                 poison=False, shared_memory=True, upgrade=True):
        addresses = node_addresses(addresses, "Stream")
        self._setup(token, token_file, name or f"rollout_client.Stream/{os.getpid()}",
                    shared_memory, upgrade)
        self._window, self._max_lag = window, max_policy_lag
        self._max_frame = max_frame
        self._poison = poison
        self._nodes = [_Node(i, a) for i, a in enumerate(addresses)]
        self._ready = collections.deque()
        try:
            for nd in self._nodes:
                self._connect(nd, time.monotonic() + connect_timeout)
        except BaseException:
            self.close()
            raise
        self.welcomes = [nd.welcome for nd in self._nodes]
        self.upgraded = [nd.upgraded for nd in self._nodes]

    # -- connections ------------------------------------------------------
    def _map(self, nd, w):
        """Map the segment memory the welcome offers, read-only, after
        checking that it is what it says: a file of that size that can
        never shrink under the mapping."""
        nd.shm = None
        if not w.segment_memory_fd:
            return
        if not nd.shared:
            raise ProtocolError(f"node {nd.address} offered shared memory we did not ask for")
        nd.shm = shared_memory.map_peer(nd.fds, w.segment_memory_fd, w.segment_memory_bytes,
                                        nd.address, "segment memory")

    def _connect(self, nd, deadline):
        try:
            self._welcome(nd, self._handshake(nd, deadline))
        finally:
            self._drop_fds(nd)  # the mapping keeps the memory
        nd.sock.setblocking(False)
        self._sel.register(nd.sock, selectors.EVENT_READ, nd)
        self._drain(nd)  # segments that came with the welcome: no read will announce them

    def _links(self):
        return getattr(self, "_nodes", [])

    def _hello_fields(self, nd, hello):
        hello.window = self._window
        hello.max_policy_lag = self._max_lag

    def _first_frame(self, nd, deadline):
        """The node's first frame on nd's fresh socket (read from an empty
        buffer), parsed."""
        nd.start = nd.end = 0
        nd.sock.settimeout(max(0.1, deadline - time.monotonic()))
        body = self._next_frame(nd, block=True)
        if body is None:
            raise ConnectionClosed(f"node {nd.address} closed during the handshake")
        g = self._pb.Frame()
        try:
            g.ParseFromString(bytes(body))
        except Exception as e:  # protobuf raises DecodeError; be broad on purpose
            raise ProtocolError(f"node {nd.address}: undecodable frame in the handshake: "
                                f"{e}") from None
        return g

    def _fail(self, nd, message):
        raise ProtocolError(f"node {nd.address}: {message}") from None

    def _welcome(self, nd, g):
        """Check nd's welcome (its first frame, g); map the segment memory
        it offers."""
        kind = g.WhichOneof("body")
        if kind == "error":
            err = AuthenticationError if g.error.code == 13 else RemoteError
            raise err(g.error.code, g.error.message, nd.address)
        if kind != "welcome":
            raise ProtocolError(f"node {nd.address}: expected welcome, got {kind}")
        if g.welcome.protocol_version != PROTOCOL_VERSION:
            raise VersionMismatch(PROTOCOL_VERSION, g.welcome.protocol_version, nd.address)
        if g.welcome.mode != "stream":
            raise ProtocolError(f"node {nd.address} runs mode {g.welcome.mode or 'seed'!r}, "
                                "not stream (start it with --learner stream)")
        nd.welcome = g.welcome
        nd.layout = StreamLayout(g.welcome.layout) if g.welcome.HasField("layout") else None
        nd.cell = _cell(nd.address, g.welcome.recurrent)
        self._map(nd, g.welcome)
        # Half the window per ack: the node always has room to send on,
        # and a learner that keeps up sends few acks (each one wakes
        # the node's loop).
        nd.ack_every = max(1, g.welcome.window // 2)

    def _fill(self, nd, block):
        """Read more bytes into nd's buffer; False on EOF. A frame that does
        not fit moves to a fresh buffer: buffers are never written twice."""
        room = len(nd.block) - nd.end
        if room < 65536:
            left = nd.block[nd.start:nd.end]
            size = max(_BLOCK, 2 * len(left) + 65536)
            fresh = np.empty(size, np.uint8)
            fresh[:len(left)] = left
            nd.block, nd.start, nd.end = fresh, 0, len(left)
            nd.mv = memoryview(fresh)
        try:
            view = memoryview(nd.block)[nd.end:]
            got = nd.sock.recv_into(view) if nd.fds is None else \
                shared_memory.recv_into(nd.sock, view, nd.fds, nd.address)
        except BlockingIOError:
            return True
        if got == 0:
            return False
        nd.end += got
        return True

    def _next_frame(self, nd, block=False):
        """The next complete frame's body as a memoryview into nd.block (and
        its span), or None if none is complete (or, blocking, on EOF)."""
        while True:
            buf = nd.mv
            size, body = decode_varint(buf[:nd.end], nd.start) if nd.end > nd.start else (None,
                                                                                         nd.start)
            if size is not None and size > self._max_frame:
                raise FrameTooLarge(size, self._max_frame, nd.address)
            if size is not None and nd.end - body >= size:
                nd.start = body + size
                nd.span = (body, body + size)
                return buf[body:body + size]
            if size is not None and body + size > len(buf) and nd.start > 0:
                # Room for the rest in a fresh buffer (copy just this frame's head).
                nd.block = np.concatenate([nd.block[nd.start:nd.end],
                                           np.empty(max(_BLOCK, size + 16), np.uint8)])
                nd.mv = memoryview(nd.block)
                nd.end -= nd.start
                nd.start = 0
                continue
            if not block:
                return None
            if not self._fill(nd, True):
                return None

    # -- frames -------------------------------------------------------------
    def _segment(self, nd, body, span):
        """A SegmentBatch viewing body, or None if the frame is no segment."""
        b, arr = nd.mv, nd.block
        base = span[0]
        end = span[1]
        seg = None
        for field, wt, v in wire.fields(b, base, end, _SEG):
            if field == 9 and wt == 2:
                seg = v
            elif 1 <= field <= 10:
                return None
        if seg is None:
            return None
        hdr = [0] * 8
        descs = []  # (name, dtype, shape, data span, offset): nothing allocated yet
        in_memory = False
        for field, wt, v in wire.fields(b, seg[0], seg[0] + seg[1], _SEG):
            if wt == 0 and 1 <= field <= 8:
                hdr[field - 1] = v
            elif field == 10 and wt == 0:
                in_memory = v != 0
            elif field == 9 and wt == 2:
                name, dtype, shape, data, offset = None, 0, [], (0, 0), 0
                for f2, w2, v2 in wire.fields(b, v[0], v[0] + v[1], _SEG):
                    if f2 == 1 and w2 == 2:
                        name = bytes(b[v2[0]:v2[0] + min(v2[1], 200)]).decode("utf-8", "replace")
                    elif f2 == 2 and w2 == 0:
                        dtype = v2
                    elif f2 == 3 and w2 == 2:
                        shape, p, e = [], v2[0], v2[0] + v2[1]
                        while p < e and len(shape) <= _MAX_DIMS:
                            d, p = wire.read_varint(b, p, e, _SEG)
                            shape.append(d)
                    elif f2 == 4 and w2 == 2:
                        data = v2
                    elif f2 == 5 and w2 == 0:
                        offset = v2
                descs.append((name, _DTYPES.get(dtype), shape, data, offset))
        # Every name, dtype, shape and size against what the welcome says a
        # segment holds, before a byte is allocated or copied.
        self._check_sizes(nd, hdr, descs, in_memory)
        tensors, refs = {}, []
        for name, dt, shape, data, offset in descs:
            count = math.prod(shape) if shape else 0
            if data[1] == 0:
                refs.append((name, dt, shape, offset, count * dt.itemsize))
                continue  # resolved below, if the segment is in memory
            if count * dt.itemsize != data[1]:
                raise ProtocolError(f"node {nd.address}: segment tensor {name!r} has dtype "
                                    f"{dt}, shape {shape} and {data[1]} bytes")
            # A view of the received bytes: no copy.
            tensors[name] = np.ndarray(shape, dt, arr, data[0])
        if in_memory:
            # One copy out of the node's memory, which it reuses once we
            # acknowledge, into a block of the batch's own: its arrays are
            # then ours to keep (and to poison on release).
            arr = np.empty(sum(r[4] for r in refs), np.uint8)
            span, at = (0, len(arr)), 0
        for name, dt, shape, offset, size in refs:
            if not in_memory:
                if size:
                    raise ProtocolError(f"node {nd.address}: segment tensor {name!r} has shape "
                                        f"{shape} and no bytes")
                tensors[name] = np.empty(shape, dt)  # an empty tensor
                continue
            arr[at:at + size] = nd.shm[offset:offset + size]
            tensors[name] = np.ndarray(shape, dt, arr, at)
            at += size
        if in_memory and "reward" in tensors and not np.isfinite(tensors["reward"]).all():
            bad = np.argwhere(~np.isfinite(tensors["reward"]))[0]
            raise ProtocolError(f"node {nd.address}: segment {hdr[0]} in memory: the reward of "
                                f"row {int(bad[1])} at step {int(bad[0])} is not finite")
        t, n = hdr[4], hdr[5]
        if nd.layout is not None:
            self._check_abi2(nd, hdr[0], t, n, tensors)
        for name in ("obs", "action", "logp", "reward", "terminated", "truncated", "is_first"):
            if nd.layout is not None and name in ("obs", "action"):
                continue  # checked against the layout
            a = tensors.get(name)
            if a is None or a.shape[:2] != (t, n):
                raise ProtocolError(f"node {nd.address}: segment {hdr[0]} lacks a ({t}, {n}) "
                                    f"{name}")
        if nd.cell is not None:
            self._check_state(nd, hdr[0], n, tensors)
        return SegmentBatch(nd.index, tuple(hdr), tensors, arr, span, self._poison, in_memory,
                            nd.layout)

    @staticmethod
    def _check_state(nd, seq, n, tensors):
        """A recurrent node's state tensors: (n, H) float32, zero in the rows
        whose first step starts an episode (docs/protocol.md)."""
        kind, hid = nd.cell
        for name in ("state/h", "state/c") if kind == "lstm" else ("state/h",):
            a = tensors.get(name)
            if a is None or a.dtype != np.dtype("<f4") or a.shape != (n, hid):
                got = "none" if a is None else f"{a.dtype} {a.shape}"
                raise ProtocolError(f"node {nd.address}: segment {seq} tensor {name!r} is {got}; "
                                    f"expected float32 {(n, hid)}")
            if np.any(a[tensors["is_first"][0] != 0]):
                raise ProtocolError(f"node {nd.address}: segment {seq} {name} is not zero in a "
                                    "row whose first step starts an episode")

    @staticmethod
    def _schema(nd, t, n, k):
        """name -> (dtype, shape) of the tensors a segment of t steps of n
        rows with k final observations holds, from the welcome (the node's
        segment layout, actors/stream/segment.c); mean and log_std only where
        the actions are a box."""
        f4, i4, u1, u4, u8 = (_DTYPES[c] for c in (1, 2, 3, 4, 5))
        want = {"logp": (f4, (t, n)), "reward": (f4, (t, n)), "terminated": (u1, (t, n)),
                "truncated": (u1, (t, n)), "is_first": (u1, (t, n)), "episode": (u4, (t, n)),
                "step": (u4, (t, n)), "policy_version": (u8, (t,)), "final_index": (i4, (k,))}
        lay = nd.layout
        if lay is None:
            spec = nd.welcome.spec
            obs = tuple(int(d) for d in spec.observation.shape)
            want.update({"obs": (f4, (t, n) + obs), "next_obs": (f4, (n,) + obs),
                         "final_obs": (f4, (k,) + obs)})
            if spec.action.kind == "discrete":
                want["action"] = (i4, (t, n))
            else:
                ad = math.prod(int(d) for d in spec.action.shape)
                want.update({"action": (f4, (t, n, ad)), "mean": (f4, (t, n, ad)),
                             "log_std": (f4, (t, ad))})
            return want
        for name, dt, shape in lay.tensors:
            want.update({f"obs/{name}": (dt, (t, n) + shape), f"next_obs/{name}": (dt, (n,) + shape),
                         f"final_obs/{name}": (dt, (k,) + shape)})
        for name, dt, width in (("action", i4, lay.ndisc), ("action_box", f4, lay.nbox),
                                ("mask", u1, lay.mask_width)):
            if width:
                want[name] = (dt, (t, n, width))
        return want

    @staticmethod
    def _schema_state(nd, n, want):
        """A recurrent node's state tensors in want (Welcome.recurrent)."""
        if nd.cell is not None:
            kind, hid = nd.cell
            for name in ("state/h", "state/c") if kind == "lstm" else ("state/h",):
                want[name] = (_DTYPES[1], (n, hid))

    def _check_sizes(self, nd, hdr, descs, in_memory):
        """A segment's tensors (name, dtype, shape, data span, offset, as
        read from the frame), checked before anything is allocated: the
        steps and rows inside the welcome's unroll and envs, each name at
        most once, each tensor the welcome names with its dtype and shape,
        any other at most the size of those together; in memory, each
        inside the node's memory and all of them at most a segment's size."""
        seq, t, n = hdr[0], hdr[4], hdr[5]
        w = nd.welcome
        rows = w.spec.num_envs * (nd.layout.agents if nd.layout is not None else 1)
        unroll = w.unroll or t
        if not 1 <= t <= unroll or not 1 <= n <= rows:
            raise ProtocolError(f"node {nd.address}: segment {seq} of {t} steps of {n} rows "
                                f"(unroll {unroll}, {rows} rows)")
        fi = [d for d in descs if d[0] == "final_index"]
        k = fi[0][2][0] if fi and len(fi[0][2]) == 1 else 0
        if k > t * n:
            raise ProtocolError(f"node {nd.address}: segment {seq} has {k} final observations "
                                f"for {t} x {n} steps")
        want = self._schema(nd, t, n, k)
        self._schema_state(nd, n, want)
        known = sum(math.prod(shape) * dt.itemsize for dt, shape in want.values())
        seen, other, total = set(), 0, 0
        for name, dt, shape, data, offset in descs:
            why = "has no name" if name is None else "comes twice" if name in seen else \
                "has no dtype this client knows" if dt is None else \
                f"has {len(shape)} dims, over {_MAX_DIMS}" if len(shape) > _MAX_DIMS else None
            if why:
                raise ProtocolError(f"node {nd.address}: segment {seq} tensor "
                                    f"{(name or '')[:40]!r} {why}")
            seen.add(name)
            size = math.prod(shape) * dt.itemsize if shape else 0
            if name in want and (dt, tuple(shape)) != want[name]:
                raise ProtocolError(f"node {nd.address}: segment {seq} tensor {name!r} is "
                                    f"{dt} {tuple(shape)[:8]}; expected {want[name][0]} "
                                    f"{want[name][1]}")
            if name not in want:
                other += size
                if other > known:
                    raise ProtocolError(f"node {nd.address}: segment {seq} has tensors the "
                                        f"welcome does not name of over {known} bytes "
                                        f"({name[:40]!r} of shape {shape[:8]})")
            if in_memory and not data[1]:
                if nd.shm is None or offset > len(nd.shm) or size > len(nd.shm) - offset:
                    raise ProtocolError(f"node {nd.address}: segment tensor {name!r} lies at "
                                        f"{offset}..+{size}, outside the node's shared memory")
                total += size
        if total > len(nd.shm if nd.shm is not None else ()):
            raise ProtocolError(f"node {nd.address}: segment {seq} refers to {total} bytes of a "
                                f"shared memory of {len(nd.shm)}")

    @staticmethod
    def _check_abi2(nd, seq, t, n, tensors):
        """An env ABI 2 segment's tensors against the welcome's layout:
        each present with its dtype and shape (docs/protocol.md)."""
        lay = nd.layout
        if n % lay.agents:
            raise ProtocolError(f"node {nd.address}: segment {seq} has {n} rows, not whole envs "
                                f"of {lay.agents} agents")
        fi = tensors.get("final_index")
        k = fi.shape[0] if fi is not None and fi.ndim == 1 else -1
        want = [("final_index", np.dtype("<i4"), (k,))]
        for name, dt, shape in lay.tensors:
            want += [(f"obs/{name}", dt, (t, n) + shape), (f"next_obs/{name}", dt, (n,) + shape),
                     (f"final_obs/{name}", dt, (k,) + shape)]
        for name, dt, width in (("action", np.dtype("<i4"), lay.ndisc),
                                ("action_box", np.dtype("<f4"), lay.nbox),
                                ("mask", np.dtype("u1"), lay.mask_width)):
            if width:
                want.append((name, dt, (t, n, width)))
        for name, dt, shape in want:
            a = tensors.get(name)
            if a is None or a.dtype != dt or a.shape != shape:
                got = "none" if a is None else f"{a.dtype} {a.shape}"
                raise ProtocolError(f"node {nd.address}: segment {seq} tensor {name!r} is {got}; "
                                    f"expected {dt} {shape}")
        if k and (fi.min() < 0 or fi.max() >= t * n):
            raise ProtocolError(f"node {nd.address}: segment {seq} has a final index outside "
                                f"its {t} x {n} steps")

    def _other(self, nd, body):
        g = self._pb.Frame()
        g.ParseFromString(bytes(body))
        kind = g.WhichOneof("body")
        if kind == "policy_accepted":
            nd.accepted_version = g.policy_accepted.version
        elif kind == "goodbye":
            nd.goodbye = g.goodbye.reason
            self._close_conn(nd)
        elif kind == "error":
            self._close_conn(nd)
            raise RemoteError(g.error.code, g.error.message, nd.address)
        else:
            raise ProtocolError(f"node {nd.address}: unexpected {kind} frame")

    def _drain(self, nd):
        while nd.open:
            body = self._next_frame(nd)
            if body is None:
                return
            batch = self._segment(nd, body, nd.span)
            if batch is None:
                self._other(nd, body)
            else:
                self._ready.append(batch)

    def _ack(self, some=False):
        """Acknowledge what was delivered, so the node sends more: all of it
        (before waiting), or with some, only nodes owed half their window."""
        for nd in self._nodes:
            # Nothing new: no ack (a node that has everything may have
            # said goodbye and closed).
            if nd.ack_due > nd.acked and nd.open and (
                    not some or nd.ack_due - nd.acked >= nd.ack_every):
                f = self._pb.Frame()
                f.segment_ack.seq = nd.ack_due
                data = encode_frame(f.SerializeToString())
                nd.acked = nd.ack_due
                try:
                    if nd.sock.send(data) != len(data):  # a few bytes: all go, or none
                        raise BlockingIOError
                except BlockingIOError:
                    nd.sock.setblocking(True)
                    nd.sock.sendall(data)
                    nd.sock.setblocking(False)
                except OSError:
                    self._read_rest(nd)

    def _read_rest(self, nd):
        """A node we can no longer write to has closed: read what it sent
        before (its goodbye, or an error frame), then close our end."""
        try:
            nd.sock.setblocking(True)
            nd.sock.settimeout(5.0)  # a hang guard: a closed peer gives EOF at once
            while nd.open and self._fill(nd, True):
                self._drain(nd)
        except OSError:
            pass
        if nd.open:
            self._drain(nd)
        self._close_conn(nd)

    # -- the API ------------------------------------------------------------
    def recv(self, timeout: Optional[float] = None) -> Optional[SegmentBatch]:
        """The next segment (a SegmentBatch), or None if timeout seconds
        pass first. Acknowledges the segments delivered before. Raises
        ConnectionClosed once every node has closed (a goodbye: clean)."""
        self._ack(some=bool(self._ready))
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._ready:
            self._ack()
        while not self._ready:
            if not any(nd.open for nd in self._nodes):
                reasons = [nd.goodbye for nd in self._nodes if nd.goodbye is not None]
                raise ConnectionClosed("every node closed its stream",
                                       clean=len(reasons) == len(self._nodes),
                                       reason="; ".join(reasons))
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._read_ready(left)
        batch = self._ready.popleft()
        nd = self._nodes[batch.node]
        nd.ack_due = max(nd.ack_due, batch.seq)
        return batch

    def pump(self, timeout: float = 0) -> int:
        """Read what the nodes sent (up to timeout seconds) without
        delivering or acknowledging segments: e.g. to see a push accepted
        while the window is full. Returns the segments now waiting."""
        self._read_ready(timeout)
        return len(self._ready)

    def _read_ready(self, timeout: Optional[float]) -> None:
        """Read what the nodes that are ready within timeout seconds sent,
        taking its segments; a node whose stream ended is closed."""
        for key, _ in self._sel.select(timeout):
            nd = key.data
            if not self._fill(nd, False):
                self._drain(nd)
                self._close_conn(nd)
                continue
            self._drain(nd)

    def push_policy(self, params: Any, nodes: Optional[Sequence[int]] = None) -> None:
        """Send weights (a rollout_pb2.PolicyParams, e.g. from
        policy_params()) to every node (or those indices): they validate
        them and switch their lanes between two batches. The answer comes
        as ``accepted_version(i)``; an error is raised by a later recv()."""
        f = self._pb.Frame()
        f.policy_params.CopyFrom(params)
        data = encode_frame(f.SerializeToString())
        for nd in self._nodes:
            if (nodes is None or nd.index in nodes) and nd.open:
                nd.sock.setblocking(True)
                nd.sock.sendall(data)
                nd.sock.setblocking(False)

    def accepted_version(self, node: int = 0) -> Optional[int]:
        """The version of the last pushed policy node i accepted, or None."""
        return self._nodes[node].accepted_version


def _cell(address, text):
    """The welcome's recurrent cell, "gru:H" or "lstm:H" (H 1..512), as
    (kind, H); None for ""."""
    if not text:
        return None
    kind, _, hid = text.partition(":")
    if kind not in ("gru", "lstm") or not hid.isdigit() or not 1 <= int(hid) <= 512:
        raise ProtocolError(f"node {address}: welcome names the recurrent cell {text[:32]!r}; "
                            "expected gru:H or lstm:H, H in 1..512")
    return kind, int(hid)


def policy_params(layers, activation="tanh", action_kind="discrete", log_std=None, version=0,
                  cell=None):
    """A PolicyParams message from numpy weights: layers is a list of
    (weight [out, in], bias [out]) pairs (PyTorch's nn.Linear layout): the
    hidden layers, then the head (logits, or the Gaussian's mean); log_std
    [action_dim] for a box head. cell, a recurrent cell between the hidden
    layers and the head (format 3, docs/policy.md): ("gru" or "lstm",
    weight_ih, weight_hh, bias_ih, bias_hh), PyTorch's GRUCell/LSTMCell
    parameters as they are."""
    pb = _proto.load()
    p = pb.PolicyParams(format_version=3 if cell else 1, activation=activation,
                        action_kind=action_kind, version=version)
    p.obs_dim = int(np.asarray(layers[0][0]).shape[1])
    p.action_dim = int(np.asarray(layers[-1][0]).shape[0])

    def put(t, v):
        v = np.asarray(v, np.float32)
        t.shape[:] = list(v.shape)
        t.data[:] = v.ravel().tolist()

    for i, (w, b) in enumerate(layers):
        if cell and i == len(layers) - 1:  # the cell goes before the head
            kind, w_ih, w_hh, b_ih, b_hh = cell
            c = p.layers.add()
            c.kind = kind
            put(c.weight, w_ih)
            put(c.bias, b_ih)
            put(c.weight_hh, w_hh)
            put(c.bias_hh, b_hh)
        layer = p.layers.add()
        put(layer.weight, w)
        put(layer.bias, b)
    if log_std is not None:
        put(p.log_std, np.asarray(log_std, np.float32).ravel())
    return p
