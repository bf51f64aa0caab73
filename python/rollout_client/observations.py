"""A Client's Observations frames checked against the node's welcome and
turned into batches (Batch, abi2.Abi2Batch): sequence numbers, field
lengths, env indices, final observations, dtypes, and the columns read from
a node's shared memory (refused by name when they hold what no node
writes). A mixin of Client (client.py), whose _fail tells the node what was
wrong, closes the connection and raises ProtocolError."""
from typing import Any

import numpy as np

from . import abi2, shared_memory, spaces, wire
from .batch import Batch
from .errors import ProtocolError


class ObservationChecks:
    """_checked / _checked_abi2 (a frame against its connection's welcome)
    and _batch (a checked frame as a Batch) for Client."""

    _conns: Any

    def _fail(self, c: Any, message: str) -> Any:
        raise NotImplementedError  # Client's

    def _checked_abi2(self, c, m):
        """An abi2.Abi2Batch of an env ABI 2 node's frame, checked."""
        seq = int(m.seq)
        if seq <= c.last_seq:
            self._fail(c, f"observations seq {seq} after seq {c.last_seq}")
        try:
            b = c.mem.batch(m, c.index, c.address) if m.in_memory and c.mem is not None else \
                abi2.batch_of(c.info.layout, m, c.info.num_envs, c.index)
        except ProtocolError as e:
            self._fail(c, str(e))
        c.last_seq = seq
        c.unanswered.add(seq)
        return b

    def _checked(self, c, o):
        """o (a wire.ObsFrame) with every field checked against the node's
        welcome, observations in the node's dtype, and node and env_range
        set."""
        info = c.info
        seq = o.seq
        if seq <= c.last_seq:
            self._fail(c, f"observations seq {seq} after seq {c.last_seq}")
        if o.ranges is not None and not o.in_memory:
            self._fail(c, f"observations seq {seq}: ranges, but not in memory")
        if o.in_memory:
            if c.mem is None:
                self._fail(c, f"observations seq {seq} in memory, but no shared memory was "
                              "agreed")
            if len(o.env) or len(o.obs) or len(o.reward) or len(o.final_obs) or \
                    len(o.final_index):
                self._fail(c, f"observations seq {seq} in memory, yet with columns in the frame")
            try:
                o.env, o.env_range = c.mem.rows(o.ranges, c.address)
            except ProtocolError as e:
                self._fail(c, f"observations seq {seq}: {e}")
            o.env_known = o.env_range is not None  # one range: nothing repeats
            o.step = c.mem.step[o.env_range[0]:o.env_range[1]] \
                if o.env_range is not None else c.mem.step[o.env]
        env = o.env
        n = len(env)
        d = info.obs_dim
        flags = o.flags
        if not o.in_memory and (len(o.step) != n or len(o.obs) != n * d or len(o.reward) != n or
                                len(flags[0]) != n or len(flags[1]) != n or len(flags[2]) != n):
            for field, got, want in (("step", len(o.step), n), ("obs", len(o.obs), n * d),
                                     ("reward", len(o.reward), n),
                                     ("terminated", len(flags[0]), n),
                                     ("truncated", len(flags[1]), n),
                                     ("episode_start", len(flags[2]), n)):
                if got != want:
                    self._fail(c, f"observations seq {seq}: {field} has {got} values, "
                                  f"expected {want} ({n} envs, obs_dim {d})")
        if not o.env_known and n:
            top = int(env.max())
            if top >= info.num_envs:
                self._fail(c, f"observations seq {seq}: env index {top} "
                              f">= num_envs {info.num_envs}")
            if n > 1 and int(np.bincount(env).max()) > 1:  # at most num_envs counters
                self._fail(c, f"observations seq {seq}: an env index appears twice")
            if top - int(env[0]) == n - 1 and (n < 3 or (np.diff(env.astype(np.int64)) == 1).all()):
                o.env_range = (int(env[0]), top + 1)
            if o.env_key is not None:
                wire.remember_env(c.env_cache, o.env_key, env, o.env_range)
        k = len(o.final_index)
        if len(o.final_obs) != k * d:
            self._fail(c, f"observations seq {seq}: final_obs has {len(o.final_obs)} "
                          f"values for {k} final_index entries (obs_dim {d})")
        if k:
            fidx = o.final_index
            if k <= 16:  # the usual few: cheaper as Python ints
                listed = fidx.tolist()
                bad = max(listed) >= n or len(set(listed)) != k
            else:
                bad = int(fidx.max()) >= n or int(np.bincount(fidx).max()) > 1
            if bad:
                self._fail(c, f"observations seq {seq}: final_index out of range or repeated")
        if info.obs_dtype != np.float32:
            o.obs = self._as_obs_dtype(c, seq, "obs", o.obs)
            o.final_obs = self._as_obs_dtype(c, seq, "final_obs", o.final_obs)
        o.node = c.index
        c.last_seq = seq
        c.unanswered.add(seq)
        return o

    def _from_memory(self, c, o):
        """Fill the columns of a checked frame in memory from the node's
        memory: copies, valid until the frame is answered, checked (a NaN or
        infinite value, or flags no node sets, are refused by name: no node
        writes them). (VecEnv reads the memory itself, hotpath.take_frame.)"""
        mem = c.mem
        rows = slice(*o.env_range) if o.env_range is not None else o.env
        f = mem.flags[rows].copy()
        o.obs = mem.obs[rows].reshape(-1).copy()
        o.reward = mem.reward[rows].copy()
        fi = np.flatnonzero(f & shared_memory.HAS_FINAL)
        o.final_index = fi
        o.final_obs = mem.final_obs[o.env[fi]].reshape(-1)
        d = max(1, c.info.obs_dim)
        for name, col, width in (("flags", f, 1), ("reward", o.reward, 1),
                                 ("observation", o.obs, d), ("final observation", o.final_obs, d)):
            bad = np.flatnonzero(f & ~np.uint8(15)) if name == "flags" else \
                np.flatnonzero(~np.isfinite(col))
            if not len(bad):
                continue
            v = col[bad[0]]
            env = int((o.env[fi] if name == "final observation" else o.env)[bad[0] // width])
            what = f"are 0x{int(v):02x}, bits no node sets" if name == "flags" else \
                f"is {'NaN' if np.isnan(v) else 'infinite'}" if name == "reward" else \
                f"holds {'NaN' if np.isnan(v) else 'an infinity'}"
            self._fail(c, f"observations seq {o.seq} in memory: the {name} of env {env} {what}")
        o.flags = shared_memory.flag_rows(f)

    def _mark_first(self, b):
        """b.is_first: its episode starts, and each row whose previous step
        this Client did not deliver (Batch). Per connection; a new node id
        (a restarted node) forgets every env."""
        c = self._conns[b.node]
        env = np.asarray(b.env, np.int64)
        if c.node_id != c.info.node_id:
            c.node_id, c.last_step = c.info.node_id, np.zeros(0, np.int64)
        if len(env) and env.max() >= len(c.last_step):
            grown = np.full(int(env.max()) + 1, -1, np.int64)
            grown[:len(c.last_step)] = c.last_step
            c.last_step = grown
        step = np.asarray(b.step, np.int64)
        b.is_first = np.asarray(b.episode_start, bool) | (step != c.last_step[env] + 1)
        c.last_step[env] = step
        return b

    def _batch(self, o):
        """A Batch, with arrays of its own, from a checked wire.ObsFrame
        (an env ABI 2 node's abi2.Abi2Batch is one already)."""
        if isinstance(o, abi2.Abi2Batch):
            return self._mark_first(o)
        if o.in_memory:
            self._from_memory(self._conns[o.node], o)
        info = self._conns[o.node].info
        n, d, k = len(o.env), info.obs_dim, len(o.final_index)
        dtype = info.obs_dtype
        flags = o.flags
        return self._mark_first(Batch(o.node, o.seq, o.env.copy() if o.env_known else o.env,
                                      o.step.copy() if o.in_memory else o.step,
                                      o.obs.reshape(n, d).astype(dtype),
                                      o.reward.astype(np.float32), flags[0], flags[1], flags[2],
                                      final_index=o.final_index,
                                      final_rows=o.final_obs.reshape(k, d).astype(dtype),
                                      env_range=o.env_range, in_memory=o.in_memory))

    def _as_obs_dtype(self, c, seq, field, values):
        """float32 values from the wire in the node's observation dtype; an
        integer dtype takes only whole numbers in its range (vectorised)."""
        dtype = c.info.obs_dtype
        if dtype.kind in "iu":
            lo, hi = spaces.dtype_bounds(dtype)
            ok = (values == np.floor(values)) & (values >= lo) & (values <= hi)
            if not ok.all():
                k = np.argwhere(~ok)[0]
                self._fail(c, f"observations seq {seq}: {field} value {values[tuple(k)].item()!r} "
                              f"is not a {dtype.name}")
        return values.astype(dtype)


__all__ = ["ObservationChecks"]
