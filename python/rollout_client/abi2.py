"""Env ABI 2 nodes in SEED mode (docs/protocol.md "SEED mode and env ABI
2"): the welcome's layout, the Gymnasium-shaped spaces it makes, the
Observations frames of its rows checked into :class:`Abi2Batch`, and
composite actions checked (range, mask, bounds) and encoded.

Rows: an env of A agents is A consecutive rows, agent 0 first (env e's
agent a is row e * A + a). Per row an action is ``ndisc`` int32 discrete
entries and ``nbox`` floats, the layout's parts in order.
"""
import numpy as np

from . import shared_memory, spaces, wire
from .actions import finite_box
from .errors import ProtocolError

_WIRE_DTYPES = {np.dtype("u1"): 3, np.dtype("<i4"): 2, np.dtype("<f4"): 1}
_DTYPES = {v: k for k, v in _WIRE_DTYPES.items()}


class SeedLayout:
    """A SEED welcome's layout (the fields of stream.StreamLayout):
    ``agents`` rows per env, ``tensors`` (name, numpy dtype, shape of one
    row), per row ``ndisc`` int32 entries, ``nbox`` floats and
    ``mask_width`` mask bytes, ``metrics``; and ``parts`` (kind, n, nvec,
    shape, low, high) per action part, ``disc_n`` (values of each discrete
    entry), ``disc_mask`` (each entry's first mask byte),
    ``box_low``/``box_high`` (bounds of each box float)."""

    def __init__(self, msg):
        self.agents = msg.agents
        if not 1 <= self.agents <= 1024 or not 1 <= len(msg.tensors) <= 8 or \
                not 1 <= len(msg.parts) <= 8:
            raise ProtocolError(f"welcome layout with {self.agents} agents, "
                                f"{len(msg.tensors)} tensors, {len(msg.parts)} action parts")
        self.tensors = []
        for t in msg.tensors:
            dt = _DTYPES.get(t.dtype)
            if dt is None or not t.name or not 1 <= len(t.shape) <= 4 or min(t.shape) < 1 or \
                    int(np.prod(t.shape, dtype=np.int64)) > 1 << 20:
                raise ProtocolError(f"welcome layout tensor {t.name[:40]!r}: dtype {t.dtype}, "
                                    f"shape {list(t.shape)}")
            self.tensors.append((t.name, dt, tuple(int(d) for d in t.shape)))
        self.mask_width = msg.mask_width
        self.metrics = list(msg.metrics)
        self.parts = []
        disc_n, low, high = [], [], []
        for i, p in enumerate(msg.parts):
            if p.kind == "discrete":
                if p.n < 1:
                    raise ProtocolError(f"welcome layout parts[{i}]: Discrete({p.n})")
                self.parts.append(("discrete", p.n, None, (), None, None))
                disc_n.append(p.n)
            elif p.kind == "multi_discrete":
                if p.n < 1 or len(p.nvec) != p.n or min(p.nvec) < 1:
                    raise ProtocolError(f"welcome layout parts[{i}]: MultiDiscrete n {p.n}, "
                                        f"nvec {list(p.nvec)[:8]}")
                self.parts.append(("multi_discrete", p.n, np.array(p.nvec, np.int64), (p.n,),
                                   None, None))
                disc_n.extend(p.nvec)
            elif p.kind == "multi_binary":
                if p.n < 1:
                    raise ProtocolError(f"welcome layout parts[{i}]: MultiBinary({p.n})")
                self.parts.append(("multi_binary", p.n, None, (p.n,), None, None))
                disc_n.extend([2] * p.n)
            elif p.kind != "box":
                raise ProtocolError(f"welcome layout parts[{i}]: kind {p.kind[:20]!r}")
            else:
                shape = tuple(int(d) for d in p.shape)
                size = int(np.prod(shape)) if shape else 0
                if not shape or size != p.n or len(p.low) != size or len(p.high) != size:
                    raise ProtocolError(f"welcome layout parts[{i}]: a box of shape "
                                        f"{list(shape)}, n {p.n}, {len(p.low)} low and "
                                        f"{len(p.high)} high bounds")
                lo, hi = np.array(p.low, np.float32), np.array(p.high, np.float32)
                if not (lo <= hi).all():
                    raise ProtocolError(f"welcome layout parts[{i}]: low > high, or NaN")
                self.parts.append(("box", size, None, shape, lo, hi))
                low.append(lo)
                high.append(hi)
        self.disc_n = np.array(disc_n, np.int64)
        self.ndisc = len(disc_n)
        self.nbox = sum(len(lo) for lo in low)
        self.disc_mask = np.concatenate([[0], np.cumsum(self.disc_n)[:-1]]).astype(np.int64)
        if self.mask_width and self.mask_width != int(self.disc_n.sum()):
            raise ProtocolError(f"welcome layout: mask_width {self.mask_width}, its actions "
                                f"need {int(self.disc_n.sum())}")
        self.box_low = np.concatenate(low) if low else np.zeros(0, np.float32)
        self.box_high = np.concatenate(high) if high else np.zeros(0, np.float32)
        self.row_bytes = [int(np.prod(shape)) * dt.itemsize for _, dt, shape in self.tensors]

    def same(self, other):
        """Whether other (a SeedLayout) has the same spaces."""
        def key(lay):
            return (lay.agents, [(n, d.str, s) for n, d, s in lay.tensors], lay.mask_width,
                    [(k, n, None if v is None else v.tolist(), s,
                      None if lo is None else lo.tolist(), None if hi is None else hi.tolist())
                     for k, n, v, s, lo, hi in lay.parts])
        return key(self) == key(other)


def spaces_of(lay):
    """(single observation space, single action space) of one row:
    a Dict of Boxes (one per tensor, its dtype and shape; a single tensor:
    that Box) and Discrete / MultiDiscrete / MultiBinary / Box, or a Tuple
    of them for several parts."""
    boxes = []
    for name, dt, shape in lay.tensors:
        lo, hi = (0, 255) if dt == np.uint8 else spaces.dtype_bounds(dt)
        boxes.append((name, spaces.box(np.full(shape, lo, dt), np.full(shape, hi, dt), shape,
                                       dt)))
    obs = boxes[0][1] if len(boxes) == 1 else spaces.dict_of(boxes)
    parts = []
    for kind, n, nvec, shape, lo, hi in lay.parts:
        if kind == "discrete":
            parts.append(spaces.discrete(n))
        elif kind == "multi_discrete":
            parts.append(spaces.multi_discrete(nvec))
        elif kind == "multi_binary":
            parts.append(spaces.multi_binary(n))
        else:
            parts.append(spaces.box(lo.reshape(shape), hi.reshape(shape), shape, np.float32))
    return obs, parts[0] if len(parts) == 1 else spaces.tuple_of(parts)


class SeedMemory2:
    """A SEED connection's shared memory for an env ABI 2 node
    (Welcome.seed_memory with typed columns): per row (num_rows of them)
    ``tensors`` / ``final_tensors`` (name -> [rows, ...] of its dtype),
    ``mask`` uint8 [rows, mask_width] (or None), ``step``, ``reward``,
    ``flags`` (read-only views of the node's memory), and this connection's
    ``act`` int32 [rows, ndisc] and ``act_box`` float32 [rows, nbox],
    which the learner writes before it answers a frame."""

    rows = shared_memory.SeedMemory.rows  # (first row, count) pairs, checked

    def __init__(self, fds, m, lay, num_rows, address):
        n = self.num_envs = num_rows
        row = sum(lay.row_bytes)
        # What a node of this build lays out, plus a page, bounds what we map.
        want_obs = n * (2 * row + lay.mask_width + 13) + (2 * len(lay.tensors) + 4) * 64 + \
            2 * shared_memory._PAGE
        want_act = n * 4 * (lay.ndisc + lay.nbox) + 64 + 2 * shared_memory._PAGE
        if not 0 < m.obs_bytes <= want_obs or not 0 < m.act_bytes <= want_act:
            raise ProtocolError(f"node {address}: shared memory of {m.obs_bytes} and "
                                f"{m.act_bytes} bytes offered for {n} rows")
        col = shared_memory._column
        for field, ts in (("tensors", m.tensors), ("final_tensors", m.final_tensors)):
            if len(ts) != len(lay.tensors):
                raise ProtocolError(f"node {address}: shared memory with {len(ts)} {field}, "
                                    f"expected {len(lay.tensors)}")
            for k, ((name, dt, shape), t) in enumerate(zip(lay.tensors, ts)):
                if t.name != name or t.dtype != _WIRE_DTYPES[dt] or \
                        tuple(t.shape) != (n,) + shape:
                    raise ProtocolError(f"node {address}: shared memory {field}[{k}] is not "
                                        f"{name!r} ({dt.name}, [{n}, ...])")
        om = shared_memory.map_peer(fds, m.obs_fd, m.obs_bytes, address, "observation memory")
        am = shared_memory.map_peer(fds, m.act_fd, m.act_bytes, address, "action memory",
                                    writable=True)

        def tensors(ts, what):
            return {name: col(om, t.offset, n * int(np.prod(shape)), dt, f"{what} {name}",
                              address).reshape((n,) + shape)
                    for (name, dt, shape), t in zip(lay.tensors, ts)}
        self.tensors = tensors(m.tensors, "tensor")
        self.final_tensors = tensors(m.final_tensors, "final tensor")
        self.mask = col(om, m.mask_offset, n * lay.mask_width, np.uint8, "mask",
                        address).reshape(n, lay.mask_width) if lay.mask_width else None
        self.step = col(om, m.step_offset, n, np.uint64, "step", address)
        self.reward = col(om, m.reward_offset, n, np.float32, "reward", address)
        self.flags = col(om, m.flags_offset, n, np.uint8, "flags", address)
        self.act = col(am, m.act_offset, n * lay.ndisc, np.int32, "action",
                       address).reshape(n, lay.ndisc)
        self.act_box = col(am, m.act_box_offset, n * lay.nbox, np.float32, "action box",
                           address).reshape(n, lay.nbox)

    def batch(self, m, node, address):
        """An Abi2Batch of an in-memory frame m (its ranges checked here):
        copies of its rows, valid for good."""
        seq = int(m.seq)
        if len(m.env) or len(m.step) or len(m.reward) or len(m.obs) or len(m.final_index) or \
                len(m.tensors) or len(m.final_tensors) or len(m.mask):
            raise ProtocolError(f"observations seq {seq} in memory, yet with columns in the "
                                "frame")
        env, _ = self.rows(np.array(m.ranges, np.uint32), address)
        f = self.flags[env]
        fi = np.flatnonzero(f & shared_memory.HAS_FINAL)
        b = Abi2Batch(node, seq, env, self.step[env], self.reward[env],
                      ((f & shared_memory.TERMINATED) != 0,
                       (f & shared_memory.TRUNCATED) != 0,
                       (f & shared_memory.EPISODE_START) != 0),
                      {k: v[env] for k, v in self.tensors.items()}, fi,
                      {k: v[env[fi]] for k, v in self.final_tensors.items()},
                      self.mask[env] if self.mask is not None else None, in_memory=True)
        _check_read(b, f, seq)
        return b


def _check_read(b, f, seq):
    """Refuse, naming the column and the row, what no node writes into its
    memory: a NaN or infinite reward or float tensor value, flags with bits
    no node sets (issue 31 A: another process may have written there; a
    mask byte is any value, nonzero allowed). The copies of b are checked, so what is checked
    is what the learner uses; one vectorised pass per column."""
    cols = [("flags", f, (f & ~np.uint8(15)) != 0), ("reward", b.reward, ~np.isfinite(b.reward))]
    for what, ts, rows in (("tensor", b.tensors, b.env), ("final tensor", b.final_tensors,
                                                          b.env[b.final_index])):
        for name, a in ts.items():
            if a.dtype.kind == "f" and len(a):
                bad = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1)
                cols.append((f"{what} {name!r}", rows, bad))
    for name, col, bad in cols:
        if not bad.any():
            continue
        k = int(np.flatnonzero(bad)[0])
        row = int(b.env[k]) if name in ("flags", "reward") else int(col[k])
        raise ProtocolError(f"observations seq {seq} in memory: the {name} of "
                            f"row {row} is {_describe(name, col, k)}, which no node writes")


def _describe(name, col, k):
    """The bad value at row k of a column, in words."""
    if name == "flags":
        return f"0x{int(col[k]):02x} (bits no node sets)"
    if name == "reward":
        return "NaN" if np.isnan(col[k]) else "infinite"
    return "not finite (NaN or an infinity)"


class Abi2Batch:
    """One Observations frame of an env ABI 2 node: ``env`` holds row
    indices (uint32 [n]); ``tensors`` / ``final_tensors`` map each tensor's
    name to [n, ...] / [k, ...] arrays of its dtype (``final_index`` says
    which rows, int64 [k]); ``mask`` uint8 [n, mask_width] (None without
    one); ``step``, ``reward``, ``terminated``, ``truncated``,
    ``episode_start``, ``is_first`` as a Batch's. Every array is the batch's own."""

    env_range = None

    def __init__(self, node, seq, env, step, reward, flags, tensors, final_index,
                 final_tensors, mask, in_memory=False):
        self.in_memory = in_memory  # answered in the connection's action memory
        self.node, self.seq, self.env, self.step, self.reward = node, seq, env, step, reward
        self.terminated, self.truncated, self.episode_start = flags
        self.is_first = self.episode_start  # the Client widens it (Client._mark_first)
        self.tensors, self.final_index, self.final_tensors = tensors, final_index, final_tensors
        self.mask = mask

    @property
    def n(self):
        return len(self.env)

    def __len__(self):
        return len(self.env)


def _tensors(lay, msgs, rows, seq, field):
    """The layout's tensors of `rows` rows from a frame's NamedTensors."""
    if len(msgs) != len(lay.tensors):
        raise ProtocolError(f"observations seq {seq}: {len(msgs)} {field}, expected "
                            f"{len(lay.tensors)}")
    out = {}
    for k, ((name, dt, shape), t) in enumerate(zip(lay.tensors, msgs)):
        if t.name != name or t.dtype != _WIRE_DTYPES[dt] or tuple(t.shape) != (rows,) + shape \
                or len(t.data) != rows * lay.row_bytes[k] or t.offset:
            raise ProtocolError(f"observations seq {seq}: {field}[{k}] is not {name!r} "
                                f"({dt.name}, [{rows}, ...], {rows * lay.row_bytes[k]} bytes)")
        out[name] = np.frombuffer(t.data, dt).reshape((rows,) + shape).copy()
    return out


def batch_of(lay, m, num_rows, node):
    """An Abi2Batch from a parsed Observations message, every field checked
    against the layout and the node's rows; ProtocolError naming the field."""
    seq, n = int(m.seq), len(m.env)
    if m.in_memory or len(m.ranges):
        raise ProtocolError(f"observations seq {seq} in memory, or with ranges, but no shared "
                            "memory was agreed")
    if n == 0 or not len(m.step) == len(m.reward) == len(m.terminated) == len(m.truncated) \
            == len(m.episode_start) == n or len(m.obs) or len(m.final_obs) \
            or len(m.mask) != n * lay.mask_width:
        raise ProtocolError(f"observations seq {seq}: inconsistent field lengths for {n} rows")
    env = np.array(m.env, np.uint32)
    if int(env.max()) >= num_rows or len(np.unique(env)) != n:
        raise ProtocolError(f"observations seq {seq}: a row index >= {num_rows}, or repeated")
    fi = np.array(m.final_index, np.int64)
    if len(fi) and (int(fi.max()) >= n or len(np.unique(fi)) != len(fi)):
        raise ProtocolError(f"observations seq {seq}: final_index out of range or repeated")
    flags = (np.array(m.terminated, bool), np.array(m.truncated, bool),
             np.array(m.episode_start, bool))
    mask = np.frombuffer(m.mask, np.uint8).reshape(n, lay.mask_width).copy() \
        if lay.mask_width else None
    return Abi2Batch(node, seq, env, np.array(m.step, np.uint64),
                     np.array(m.reward, np.float32), flags,
                     _tensors(lay, m.tensors, n, seq, "tensors"), fi,
                     _tensors(lay, m.final_tensors, len(fi), seq, "final_tensors"), mask)


def _part(kind, n, nvec, shape, lo, hi, a, rows, clip_box, where, what):
    """One part's actions for `rows` rows as int64 [rows, entries] or
    float32 [rows, size]; ValueError naming the first bad row."""
    a = np.asarray(a)
    if kind != "box":
        want = (rows,) if kind == "discrete" else (rows, n)
        if a.shape != want and not (kind == "discrete" and a.shape == (rows, 1)):
            raise ValueError(f"{what}: {kind} actions for {rows} rows must have shape {want}, "
                             f"got {a.shape}")
        if a.dtype.kind not in "iub":
            raise ValueError(f"{what}: {kind} actions must be integers, got dtype {a.dtype}")
        a = a.reshape(rows, -1).astype(np.int64)
        top = np.broadcast_to(nvec if nvec is not None else (2 if kind == "multi_binary" else n),
                              a.shape[1:])
        bad = ((a < 0) | (a >= top)).any(axis=1)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{what}: {where(k)} has {a[k].tolist()}, outside "
                             f"[0, {np.asarray(top).tolist()})")
        return a
    size = n
    if a.size != rows * size or a.ndim < 1 or a.shape[0] != rows:
        raise ValueError(f"{what}: box actions for {rows} rows must have shape "
                         f"({rows}, {', '.join(map(str, shape))}), got {a.shape}")
    a = finite_box(a, rows, size, where, what)
    if clip_box:
        return np.clip(a, lo, hi)
    bad = ((a < lo) | (a > hi)).any(axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: {where(k)} has {a[k].tolist()}, outside the box's bounds")
    return a


def check_actions(lay, actions, rows, mask, clip_box=True, where=None):
    """The actions of `rows` rows in the action space's batched form (an
    array for one part, a tuple of arrays for a Tuple), checked: shapes,
    dtypes, every discrete entry in range and allowed by ``mask`` (uint8
    [rows, mask_width], or None), box floats finite (clipped to the bounds
    with clip_box, else refused outside them). Returns (int32 [rows, ndisc],
    float32 [rows, nbox]); ValueError naming the first bad row."""
    where = where or (lambda k: f"row {k}")
    parts = lay.parts
    if len(parts) > 1:
        if not isinstance(actions, (tuple, list)) or len(actions) != len(parts):
            raise ValueError(f"a Tuple action of {len(parts)} parts: pass a tuple of "
                             f"{len(parts)} arrays, one per part, batched over {rows} rows")
    else:
        actions = (actions,)
    disc, box = [], []
    for i, (p, a) in enumerate(zip(parts, actions)):
        v = _part(*p, a, rows, clip_box, where, f"action part {i}" if len(parts) > 1
                  else "actions")
        (box if p[0] == "box" else disc).append(v)
    d = np.concatenate(disc, axis=1).astype(np.int32) if disc else np.zeros((rows, 0), np.int32)
    b = np.concatenate(box, axis=1) if box else np.zeros((rows, 0), np.float32)
    if mask is not None and lay.ndisc:
        allowed = np.take_along_axis(mask, lay.disc_mask[None, :] + d, axis=1)
        bad = (allowed == 0).any(axis=1)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            e = int(np.flatnonzero(allowed[k] == 0)[0])
            raise ValueError(f"a masked action: {where(k)} entry {e} is {int(d[k, e])}, which "
                             "its action mask forbids (infos['action_mask'])")
    return d, b


def actions_message(seq, disc, box, hold=None):
    """The bytes of Frame{actions} answering seq with rows x ndisc entries
    and rows x nbox floats (checked: entries are non-negative), and hold
    (env indices not to step: Actions.hold)."""
    d = wire.encode_varints(disc.reshape(-1)) if disc.size else b""
    f = np.ascontiguousarray(box, "<f4").tobytes() if box.size else b""
    inner = (b"\x08" + wire.encode_varint(seq) if seq else b"") + \
        (b"\x12" + wire.encode_varint(len(d)) + d if d else b"") + \
        (b"\x1a" + wire.encode_varint(len(f)) + f if f else b"") + wire.hold_field(hold)
    return b"\x22" + wire.encode_varint(len(inner)) + inner


__all__ = ["Abi2Batch", "SeedLayout", "SeedMemory2", "actions_message", "batch_of", "check_actions",
           "spaces_of"]
