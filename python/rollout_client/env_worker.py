"""An env worker process: a shard of a node's Python envs (docs/env-api.md
"Python envs").

rollout-node (src/envs/pyenv_proc.c) starts it as::

    python -m rollout_client.env_worker SPEC PARENT_PID [KEY=VALUE ...]

with descriptors 3 (a memfd: the shard's shared memory), 4 (an eventfd the
node writes to wake it), 5 (an eventfd it writes when a command is done) and
6 (a pipe whose end it holds: the node sees it close when this process
dies). SPEC is ``gym:ID`` (``gymnasium.make(ID, **kwargs)``) or
``py:MODULE:CALLABLE`` (``MODULE.CALLABLE(**kwargs)``); each VALUE is read
as a Python literal (``ast.literal_eval``: numbers, strings, tuples...) or
else kept as a string.

The protocol, one command at a time: the node writes the per-env rows
(actions, go flags) and the command into the header (op, then seq); this
process does it and writes ack = seq. Each side spins for the other's word
a while before it sleeps on its eventfd (4: this process's, 5: the
node's), and each writes the other's eventfd only when the other says it
sleeps. Nothing is pickled: rows are numpy views of the shared memory. The
waits and the steps are C (``_hotpath``'s Waiter and step_shard,
python/hotpath/worker.c). The node checks everything written here (flags,
sizes, text) before it uses it.
"""
from __future__ import annotations

import ast
import ctypes
import importlib
import mmap
import os
import signal
import struct
import sys
import traceback
from typing import Any, Dict, List, Optional

import numpy as np

from . import pyenv_spaces as ps

FD_MEM, FD_WAKE, FD_DONE = 3, 4, 5

# The header (src/envs/pyenv_proto.h): u32 words at these byte offsets.
H_MAGIC, H_VERSION, H_OP, H_SEQ, H_ACK, H_STATUS = 0, 4, 8, 12, 16, 20
H_NENVS, H_STRIDE, H_SPEC_LEN, H_DATA_OFF = 24, 28, 32, 36
H_OFF_ACT_I, H_OFF_ACT_F, H_OFF_REWARD, H_OFF_FLAGS, H_OFF_SEED = 40, 44, 48, 52, 56
H_OFF_OBS, H_OFF_RESET, H_ERR_LEN = 64, 96, 128
ERR_OFF, ERR_MAX = 1024, 3072
SPEC_OFF, SPEC_MAX = 4096, 1 << 20
OP_HELLO, OP_ATTACH, OP_STEP, OP_RESET = 1, 2, 3, 4
STATUS_OK, STATUS_FATAL = 0, 1
# Per-row flag bytes.
F_GO, F_TERM, F_TRUNC, F_RESET_READY, F_FAILED, F_SEED = 0, 1, 2, 3, 4, 5

GOLDEN = 0x9E3779B97F4A7C15
HEADER = 4096

def parse_kwargs(pairs: List[str]) -> Dict[str, Any]:
    """KEY=VALUE strings as keyword arguments: literals where they parse."""
    out: Dict[str, Any] = {}
    for kv in pairs:
        key, _, value = kv.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def make_factory(spec: str, kwargs: Dict[str, Any]) -> Any:
    """A function making one env of spec."""
    if spec.startswith("gym:"):
        import gymnasium as gym
        env_id = spec[4:]
        if env_id.startswith("ALE/"):
            import ale_py
            gym.register_envs(ale_py)
        return lambda: gym.make(env_id, **kwargs)
    if spec.startswith("py:"):
        module, _, name = spec[3:].rpartition(":")
        if not module or not name:
            raise ValueError(f"env '{spec}': expected py:MODULE:CALLABLE")
        fn = getattr(importlib.import_module(module), name)
        return lambda: fn(**kwargs)
    raise ValueError(f"env '{spec}': expected gym:ID or py:MODULE:CALLABLE")


def die_with_parent(parent: int) -> None:
    """This process ends when the node does (PR_SET_PDEATHSIG), even if the
    node is SIGKILLed; if the node is already gone, now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


class Rows:
    """Rows of several tensors as one: ``rows[i] = obs`` writes each leaf of
    an observation (a Dict's or Tuple's) into its tensor's row i."""

    def __init__(self, views: List[np.ndarray], flatten: Any) -> None:
        self.views, self.flatten = views, flatten

    def __setitem__(self, i: int, obs: Any) -> None:
        for v, leaf in zip(self.views, self.flatten(obs)):
            v[i] = leaf


class Worker:
    """The shard this process hosts and the views of its shared memory."""

    def __init__(self, spec: str, kwargs: Dict[str, Any]) -> None:
        self.mm = mmap.mmap(FD_MEM, os.fstat(FD_MEM).st_size)
        # The header apart, as u32 words: its mapping never moves (attach
        # maps the rest again), and a word reads without struct.
        self.hdr_mm = mmap.mmap(FD_MEM, HEADER)
        self.hdr = memoryview(self.hdr_mm).cast("I")
        # Here, not at import: a package without its compiled part fails
        # this, and main() reports why to the node.
        from .hotpath import hot
        self.hot = hot
        self.factory = make_factory(spec, kwargs)
        self.envs: List[Any] = []
        self.restarts: List[int] = []

    def u32(self, off: int) -> int:
        return int(self.hdr[off >> 2])

    def put_u32(self, off: int, v: int) -> None:
        self.hdr[off >> 2] = v

    def error(self, text: str) -> None:
        """The first error of a command: its text into the header."""
        if self.u32(H_ERR_LEN):
            return
        raw = text.encode("utf-8", "replace")[:ERR_MAX - 1]
        self.mm[ERR_OFF:ERR_OFF + len(raw)] = raw
        self.put_u32(H_ERR_LEN, len(raw))

    def hello(self) -> None:
        env = self.factory()
        self.envs.append(env)
        self.lay = ps.layout_of(env.observation_space, env.action_space)
        spec = ps.encode_spec(self.lay)
        if len(spec) > SPEC_MAX:
            raise ps.UnsupportedSpace(f"spaces take {len(spec)} bytes; at most {SPEC_MAX}")
        self.mm[SPEC_OFF:SPEC_OFF + len(spec)] = spec
        self.put_u32(H_SPEC_LEN, len(spec))

    def attach(self) -> None:
        self.mm.close()
        self.mm = mmap.mmap(FD_MEM, os.fstat(FD_MEM).st_size)
        n, stride, base = self.u32(H_NENVS), self.u32(H_STRIDE), self.u32(H_DATA_OFF)
        buf = np.frombuffer(self.mm, np.uint8)
        del buf  # only checks the mapping reads as a buffer

        def view(off: int, dtype: Any, shape: tuple) -> np.ndarray:
            itemsize = np.dtype(dtype).itemsize
            strides = [stride] + list(np.cumprod([itemsize] + list(shape[::-1]))[:-1][::-1])
            return np.ndarray((n,) + tuple(shape), dtype, self.mm, base + off, strides)

        lay = self.lay
        self.act_i = view(self.u32(H_OFF_ACT_I), np.int32, (max(lay.ndisc, 1),))
        self.act_f = view(self.u32(H_OFF_ACT_F), np.float32, (max(lay.nbox, 1),))
        self.reward = view(self.u32(H_OFF_REWARD), np.float32, ())
        self.flags = view(self.u32(H_OFF_FLAGS), np.uint8, (8,))
        self.seeds = view(self.u32(H_OFF_SEED), np.uint64, ())
        self.obs = [view(self.u32(H_OFF_OBS + 4 * k), ps.NP_OF[t.dtype], t.shape)
                    for k, t in enumerate(lay.tensors)]
        self.reset_obs = [view(self.u32(H_OFF_RESET + 4 * k), ps.NP_OF[t.dtype], t.shape)
                          for k, t in enumerate(lay.tensors)]
        while len(self.envs) < n:
            self.envs.append(self.factory())
        self.restarts = [0] * n
        self.go = self.flags[:, F_GO]
        leaf = len(self.obs) == 1 and lay.single_leaf
        self.obs_rows: Any = self.obs[0] if leaf else Rows(self.obs, lay.flatten)
        self.reset_rows: Any = self.reset_obs[0] if leaf else Rows(self.reset_obs, lay.flatten)
        parts = lay.parts
        single = len(parts) == 1 and not lay.composite_action
        self.simple_discrete: Optional[int] = (
            parts[0].start if single and parts[0].kind == ps.KIND_DISCRETE else None)
        # One Box part of a float dtype: the prototype of its actions.
        self.box_proto: Optional[np.ndarray] = (
            np.zeros(parts[0].shape, parts[0].dtype)
            if single and parts[0].kind == ps.KIND_BOX
            and np.dtype(parts[0].dtype) in (np.float32, np.float64) else None)
        for i in range(n):
            self.first_reset(i, int(self.seeds[i]))

    def first_reset(self, i: int, seed: int) -> None:
        obs, _ = self.envs[i].reset(seed=seed)
        self.reset_rows[i] = obs
        self.flags[i, F_RESET_READY] = 1

    def recreate(self, i: int, exc: Optional[BaseException] = None) -> None:
        """Env i raised (exc, or the exception being handled): a fresh
        instance, reset from a seed of its own."""
        text = "".join(traceback.format_exception(exc)) if exc else traceback.format_exc()
        self.error(f"env {i} of this worker raised:\n{text}")
        self.flags[i, F_FAILED] = 1
        try:
            self.envs[i].close()
        except Exception:  # noqa: BLE001 (a broken env may fail to close too)
            pass
        self.restarts[i] += 1
        self.envs[i] = self.factory()
        self.first_reset(i, (int(self.seeds[i]) + GOLDEN * self.restarts[i]) % (1 << 64))

    def step(self) -> None:
        """Steps the rows whose go flag is set (in C, step_shard: each
        observation straight into its row, the reward and flags beside
        it). One Discrete action part, or one Box part of a float dtype
        (the usual spaces): the rows and actions are found in C too
        (step_discrete, step_box). Otherwise each action is built here."""
        if self.simple_discrete is not None:
            self.hot.step_discrete(self.envs, self.act_i, self.simple_discrete, self.obs_rows,
                                   self.reset_rows, self.reward, self.flags, self.recreate)
            return
        if self.box_proto is not None:
            self.hot.step_box(self.envs, self.act_f, self.box_proto, self.obs_rows,
                              self.reset_rows, self.reward, self.flags, self.recreate)
            return
        order: List[int] = np.flatnonzero(self.go).tolist()
        action, act_i, act_f = self.lay.action, self.act_i, self.act_f
        acts = [action(act_i[i], act_f[i]) for i in order]
        self.hot.step_shard(self.envs, order, acts, self.obs_rows, self.reset_rows,
                            self.reward, self.flags, self.recreate)

    def reset(self) -> None:
        for i in np.flatnonzero(self.flags[:, F_GO]).tolist():
            seed = int(self.seeds[i]) if self.flags[i, F_SEED] else None
            self.flags[i, F_SEED] = 0
            try:
                obs, _ = self.envs[i].reset(seed=seed)
                self.reset_rows[i] = obs
                self.flags[i, F_RESET_READY] = 1
            except Exception:  # noqa: BLE001
                self.recreate(i)
            self.flags[i, F_GO] = 0

    def serve(self) -> None:
        hdr = self.hdr
        waiter = self.hot.Waiter(self.hdr_mm, FD_WAKE, FD_DONE)
        w_op, w_seq = H_OP >> 2, H_SEQ >> 2
        while True:
            op = hdr[w_op]
            status = STATUS_OK
            try:
                if op == OP_STEP:
                    self.step()
                elif op == OP_HELLO:
                    self.hello()
                elif op == OP_ATTACH:
                    self.attach()
                elif op == OP_RESET:
                    self.reset()
            except Exception:  # noqa: BLE001 (reported to the node, then this process ends)
                self.error(traceback.format_exc())
                status = STATUS_FATAL
            seq = hdr[w_seq]
            waiter.answer(seq, status)
            if status != STATUS_OK:
                return
            waiter.wait(seq)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m rollout_client.env_worker SPEC PARENT_PID [KEY=VALUE ...] "
              "(started by rollout-node)", file=sys.stderr)
        return 2
    die_with_parent(int(args[1]))
    try:
        worker = Worker(args[0], parse_kwargs(args[2:]))
    except Exception:  # noqa: BLE001
        mm = mmap.mmap(FD_MEM, os.fstat(FD_MEM).st_size)
        raw = traceback.format_exc().encode("utf-8", "replace")[:ERR_MAX - 1]
        mm[ERR_OFF:ERR_OFF + len(raw)] = raw
        struct.pack_into("<I", mm, H_ERR_LEN, len(raw))
        struct.pack_into("<I", mm, H_STATUS, STATUS_FATAL)
        struct.pack_into("<I", mm, H_ACK, struct.unpack_from("<I", mm, H_SEQ)[0])
        os.eventfd_write(FD_DONE, 1)
        return 1
    worker.serve()
    return 1


if __name__ == "__main__":
    sys.exit(main())
