"""RolloutVectorEnv: rollout's envs as a Gymnasium vector env, in-process.

``gymnasium.make_vec("rollout/CartPole-v1", num_envs=N)`` (registration.py)
and ``rollout_client.make_vec(...)`` build one. The envs run in this
process, in C (src/vecenv, through ``rollout_client._engine``): a step is
one call that releases the GIL, steps every env on this thread (and on
helper threads when the envs cost enough to pay for the hand-off: MuJoCo),
and returns new arrays. There is no other process, socket, file or shared
mapping, so nothing outlives ``close()``, the interpreter, or a SIGKILL.

Gymnasium's semantics (gymnasium.vector.VectorEnv, 1.x):

- ``autoreset_mode``: NEXT_STEP (default), SAME_STEP (``final_obs`` and
  ``final_info`` in infos, as SyncVectorEnv writes them) or DISABLED
  (``reset(options={"reset_mask": mask})``), each as Gymnasium defines it.
- ``reset(seed=s)``: env i is re-created from (s, i), as ``rollout-node
  --seed s`` creates its env i, so both play the same episodes; a list
  gives each env its own seed (None: keep its stream). ``reset()``
  continues every env's stream. Every ``reset`` starts a new episode of
  every env (or of those ``options["reset_mask"]`` names).
- infos hold nothing rollout-specific but ``rollout_env_failure`` (with its
  mask) in a step where an env failed (docs/env-api.md: the episode is cut,
  truncated, and the env starts over), and ``action_mask`` for envs that
  have one. Episode statistics are RecordEpisodeStatistics' job.
- Asynchronous stepping, EnvPool's way: ``batch_size=B`` (< num_envs), then
  ``async_reset()``, ``recv()`` (the next B envs whose results are in, their
  ids in ``infos["env_id"]``) and ``send(actions, env_id)``; the engine's
  threads step the sent envs while the policy works on the received ones.
- Actions are taken as Gymnasium's batched action space gives them; discrete
  values outside their range raise ValueError naming the env, box values go
  to the env as they are (``ClipAction``/``RescaleAction`` bound them).
"""
from __future__ import annotations

import secrets
from typing import Any, Sequence

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _native
from .python_env import is_python_env, python_env_args

_MODES = {AutoresetMode.NEXT_STEP: 0, AutoresetMode.SAME_STEP: 1, AutoresetMode.DISABLED: 2}
_DTYPES: dict[str, type[np.generic]] = {"float32": np.float32, "uint8": np.uint8,
                                        "int32": np.int32}


def _tensor_space(t: dict[str, Any]) -> spaces.Box:
    dtype = _DTYPES[t["dtype"]]
    shape = tuple(t["shape"])
    low = np.asarray(t["low"], dtype=np.float64).reshape(shape)
    high = np.asarray(t["high"], dtype=np.float64).reshape(shape)
    if dtype == np.float32:
        # float32's extremes read as unbounded, as Gymnasium's envs declare.
        big = np.finfo(np.float32).max
        low = np.where(low <= -big, -np.inf, low)
        high = np.where(high >= big, np.inf, high)
    else:
        # The dtype's range, which float bounds may round past.
        info = np.iinfo(np.dtype(dtype))
        low = np.clip(low, info.min, info.max)
        high = np.clip(high, info.min, info.max)
    return spaces.Box(low.astype(dtype), high.astype(dtype), shape=shape,
                      dtype=dtype)  # type: ignore[arg-type]  # any of _DTYPES


def _part_space(p: dict[str, Any]) -> spaces.Space[Any]:
    kind = p["kind"]
    if kind == "box":
        shape = tuple(p["shape"])
        low = np.asarray(p["low"], dtype=np.float32).reshape(shape)
        high = np.asarray(p["high"], dtype=np.float32).reshape(shape)
        return spaces.Box(low, high, shape=shape, dtype=np.float32)
    if kind == "discrete":
        return spaces.Discrete(int(p["nvec"][0]))
    if kind == "multi_binary":
        return spaces.MultiBinary(len(p["nvec"]))
    return spaces.MultiDiscrete(np.asarray(p["nvec"], dtype=np.int64))


def parse_autoreset_mode(mode: AutoresetMode | str | None) -> AutoresetMode:
    """AutoresetMode from the enum, its value ("next_step", "same_step",
    "disabled", any case) or None (NEXT_STEP, Gymnasium's default)."""
    if mode is None:
        return AutoresetMode.NEXT_STEP
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for m in AutoresetMode:
            if mode.lower() in (m.value, m.name.lower()):
                return m
    raise ValueError(f"autoreset_mode {mode!r}: expected one of "
                     f"{[m.value for m in AutoresetMode]} or gymnasium.vector.AutoresetMode")


def _env_arg(key: str, value: Any) -> tuple[str, str]:
    if isinstance(value, bool):
        return key, "true" if value else "false"
    if isinstance(value, (int, float, str, np.integer, np.floating)):
        return key, str(value)
    raise TypeError(f"env argument {key}={value!r}: a number, a bool or a string is needed")


class RolloutVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
    """``RolloutVectorEnv(env, num_envs, autoreset_mode=None, num_threads=None,
    seed=None, **env_args)``: ``env`` is a built-in name (``cartpole``,
    ``hopper``, ...: docs/env-api.md) or a plugin path (``.so``; its code is
    loaded into this process); ``env_args`` are the env's arguments
    (``--env-arg``, e.g. ``max_episode_steps=200``), unknown ones refused by
    name. ``num_threads``: threads stepping the envs, the caller's included
    (default: chosen from the envs' measured cost). ``seed``: the envs'
    seed until a ``reset(seed=...)`` (default: drawn from the OS)."""

    def __init__(self, env: str, num_envs: int, autoreset_mode: AutoresetMode | str | None = None,
                 num_threads: int | None = None, seed: int | None = None,
                 batch_size: int | None = None, check_finite: bool = True,
                 render_mode: str | None = None, **env_args: Any) -> None:
        self.closed = True  # until the engine exists (gymnasium's __del__ reads it)
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: rollout's envs do not render")
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) \
                or num_envs < 1:
            raise ValueError(f"num_envs {num_envs!r}: a positive integer is needed")
        if num_threads is not None and (not isinstance(num_threads, (int, np.integer))
                                        or num_threads < 1):
            raise ValueError(f"num_threads {num_threads!r}: a positive integer is needed")
        if batch_size is not None and (not isinstance(batch_size, (int, np.integer))
                                       or not 1 <= batch_size <= num_envs):
            raise ValueError(f"batch_size {batch_size!r}: an integer in 1..num_envs is needed")
        mode = parse_autoreset_mode(autoreset_mode)
        self._seed = int(seed) if seed is not None else secrets.randbits(63)
        if not 0 <= self._seed < 2**64:
            raise ValueError(f"seed {seed}: expected 0 <= seed < 2**64")
        engine_mod = _native.load("_engine")
        if is_python_env(env):
            args = python_env_args(env_args)
        else:
            args = [_env_arg(k, v) for k, v in env_args.items()]
        self._engine = engine_mod.Engine(env, int(num_envs), self._seed, args, _MODES[mode],
                                         -1 if num_threads is None else int(num_threads),
                                         bool(check_finite), int(batch_size or 0))
        self.closed = False
        layout = self._engine.layout()
        self.layout: dict[str, Any] = layout
        self.num_envs = int(num_envs)
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.render_mode = None
        self._names = [t["name"] for t in layout["tensors"]]
        tensor_spaces = [_tensor_space(t) for t in layout["tensors"]]
        self.single_observation_space = (
            tensor_spaces[0] if len(tensor_spaces) == 1
            else spaces.Dict(dict(zip(self._names, tensor_spaces)), sort_keys=False))
        parts = [_part_space(p) for p in layout["parts"]]
        self.single_action_space = parts[0] if len(parts) == 1 else spaces.Tuple(parts)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._kinds = [p["kind"] for p in layout["parts"]]
        self._has_mask = layout["mask_width"] > 0
        self._needs_reset = True
        self.batch_size = int(layout["batch_size"])
        self._last_ids: np.ndarray | None = None

    # --- what the engine returns, as Gymnasium shapes it ---

    def _obs(self, raw: Any) -> Any:
        if len(self._names) == 1:
            return raw
        return dict(zip(self._names, raw))

    def _row(self, raw: Any, i: int) -> Any:
        if len(self._names) == 1:
            return raw[i]
        return {n: t[i] for n, t in zip(self._names, raw)}

    def _split_actions(self, actions: Any, rows: int | None = None) -> tuple[Any, Any]:
        """(discrete, box) arrays for the engine, from a batch of the action
        space: one part as it is; a Tuple's parts side by side."""
        if len(self._kinds) == 1:
            return (None, actions) if self._kinds[0] == "box" else (actions, None)
        if not isinstance(actions, (tuple, list)) or len(actions) != len(self._kinds):
            raise ValueError(f"actions: a tuple of {len(self._kinds)} batches (one per part of "
                             f"the Tuple action space) is needed")
        n = self.num_envs if rows is None else rows
        disc = [np.asarray(a).reshape(n, -1) for a, k in zip(actions, self._kinds) if k != "box"]
        box = [np.asarray(a, dtype=np.float32).reshape(n, -1)
               for a, k in zip(actions, self._kinds) if k == "box"]
        return (np.concatenate(disc, axis=1) if disc else None,
                np.concatenate(box, axis=1) if box else None)

    def _infos(self, ended: bool, failed: bool, term: np.ndarray,
               trunc: np.ndarray) -> dict[str, Any]:
        infos: dict[str, Any] = {}
        rows = len(term) if len(term) else self.num_envs
        if ended and self.autoreset_mode == AutoresetMode.SAME_STEP:
            done = term | trunc
            final = np.full(rows, None, dtype=object)
            raw = self._engine.final_obs()
            for i in np.flatnonzero(done):
                final[i] = self._row(raw, int(i))
            infos["final_obs"], infos["_final_obs"] = final, done
            infos["final_info"], infos["_final_info"] = {}, done.copy()
        if failed:
            f = self._engine.failed()
            infos["rollout_env_failure"], infos["_rollout_env_failure"] = f.copy(), f
        if self._has_mask:
            infos["action_mask"] = self._engine.mask()
            infos["_action_mask"] = np.ones(rows, dtype=np.bool_)
        return infos

    # --- gymnasium.vector.VectorEnv ---

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._check_open()
        mask = None
        if options:
            options = dict(options)
            if "reset_mask" in options:
                mask = options.pop("reset_mask")
                if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ \
                        or mask.shape != (self.num_envs,):
                    raise ValueError(f"options['reset_mask']: a bool array of shape "
                                     f"({self.num_envs},) is needed")
                if not mask.any():
                    raise ValueError("options['reset_mask'] names no env")
            if options:
                raise ValueError(f"reset options {sorted(options)}: rollout's envs take none "
                                 "but 'reset_mask'")
        seeds = has = None
        if seed is not None:
            seeds = np.zeros(self.num_envs, dtype=np.uint64)
            if isinstance(seed, bool):
                raise ValueError(f"seed {seed!r}: an integer or a list of them is needed")
            if isinstance(seed, (int, np.integer)):
                if not 0 <= int(seed) < 2**64:
                    raise ValueError(f"seed {seed}: expected 0 <= seed < 2**64")
                seeds[:] = int(seed)
            else:
                seed_list = list(seed)  # type: ignore[arg-type]  # not bool: refused above
                if len(seed_list) != self.num_envs:
                    raise ValueError(f"seed: a list of {self.num_envs} seeds (or None) is "
                                     f"needed, got {len(seed_list)}")
                has = np.array([s is not None for s in seed_list], dtype=np.bool_)
                for i, s in enumerate(seed_list):
                    if s is not None:
                        if not 0 <= int(s) < 2**64:
                            raise ValueError(f"seed[{i}] {s}: expected 0 <= seed < 2**64")
                        seeds[i] = int(s)
        obs = self._engine.reset(seeds, has, mask)
        self._needs_reset = False
        return self._obs(obs), self._infos(False, False, np.zeros(0, bool), np.zeros(0, bool))

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                          dict[str, Any]]:
        self._check_open()
        if self._needs_reset:
            raise RuntimeError("step() before reset(): call reset() first, as with any "
                               "Gymnasium vector env")
        disc, box = self._split_actions(actions)
        obs, rew, term, trunc, ended, failed = self._engine.step(disc, box)
        if failed or self._has_mask or (ended and self.autoreset_mode == AutoresetMode.SAME_STEP):
            return self._obs(obs), rew, term, trunc, self._infos(ended, failed, term, trunc)
        return self._obs(obs), rew, term, trunc, {}

    def close_extras(self, **kwargs: Any) -> None:
        """Destroys the envs now (gymnasium's close() calls it once)."""
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close()

    # --- asynchronous stepping (EnvPool's API) ---

    def async_reset(self, *, seed: int | Sequence[int | None] | None = None) -> None:
        """Resets every env; the next recv() returns the first batch."""
        self.reset(seed=seed)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The next ``batch_size`` envs whose results are in:
        ``(obs, reward, terminated, truncated, infos)``, their ids in
        ``infos["env_id"]`` (int32), in the order they were sent."""
        self._check_open()
        if self._needs_reset:
            raise RuntimeError("recv() before reset(): call async_reset() first")
        ids, obs, rew, term, trunc, ended, failed = self._engine.recv()
        self._last_ids = ids
        infos = self._infos(ended, failed, term, trunc)
        infos["env_id"] = ids
        return self._obs(obs), rew, term, trunc, infos

    def send(self, actions: Any, env_id: Any = None) -> None:
        """Steps envs ``env_id`` (default: those of the last recv()) with
        ``actions`` (one row per env, in env_id's order), in the background."""
        self._check_open()
        ids = self._last_ids if env_id is None else np.asarray(env_id)
        if ids is None:
            raise RuntimeError("send() needs env_id, or a recv() before it")
        disc, box = self._split_actions(actions, len(ids))
        self._engine.send(ids, disc, box)
        if env_id is None:
            self._last_ids = None

    # --- rollout's own ---

    def get_state(self, env_ids: Any = None) -> list[bytes]:
        """Each env's state (of ``env_ids``, default all) as bytes: a blob
        that names the env, its arguments and its episode's steps
        (docs/env-api.md "Env state"). NotImplementedError naming the env
        when it keeps no state (a plugin without the entries)."""
        self._check_open()
        ids = range(self.num_envs) if env_ids is None else [int(i) for i in env_ids]
        return [self._engine.get_state(i) for i in ids]

    def set_state(self, env_ids: Any, states: Sequence[bytes]) -> None:
        """Restores envs ``env_ids`` from ``get_state`` blobs (of envs of the
        same name and arguments, from this vector env or another): each is
        checked whole before its env sees it (ValueError naming what does not
        match). An env's next step starts from its restored state; the
        observation of that state is the one returned where it was saved."""
        self._check_open()
        ids = [int(i) for i in env_ids]
        if len(ids) != len(states):
            raise ValueError(f"set_state: {len(ids)} env ids and {len(states)} states")
        for i, blob in zip(ids, states):
            self._engine.set_state(i, blob)

    @property
    def env_failures(self) -> int:
        """Env steps that failed since creation (docs/env-api.md)."""
        return int(self._engine.failures)

    @property
    def num_threads(self) -> int:
        """Threads stepping the envs, the caller's included."""
        return int(self.layout["threads"])

    def __enter__(self) -> "RolloutVectorEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the vector env is closed")

    def __repr__(self) -> str:
        return f"RolloutVectorEnv({self.layout['env']}, num_envs={self.num_envs})"
