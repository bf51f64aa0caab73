"""Gymnasium ids for rollout's envs, and make_vec.

``import rollout_client`` registers, in Gymnasium's registry, a
``rollout/`` id for every built-in env with a vector entry point (the
in-process engine, vector.py), so that

    gymnasium.make_vec("rollout/CartPole-v1", num_envs=64)

gives a :class:`~rollout_client.vector.RolloutVectorEnv`. Without the
import, Gymnasium's module prefix does it: ``gymnasium.make_vec(
"rollout_client:rollout/CartPole-v1", ...)``. A plugin is named with
``gymnasium.make_vec("rollout/Plugin-v0", num_envs=N,
plugin="path/to/libenv.so")``. Keyword arguments are the env's arguments
(docs/env-api.md; unknown ones are refused by name) and the vector env's
own (autoreset_mode, num_threads, seed).
"""
from __future__ import annotations

import functools
import os
from typing import Any

import gymnasium

from .python_env import is_python_env
from .vector import RolloutVectorEnv

NAMESPACE = "rollout"

# Gymnasium's id -> rollout's env name (docs/env-api.md).
BUILTIN: dict[str, str] = {
    "CartPole-v1": "cartpole",
    "Pendulum-v1": "pendulum",
    "InvertedPendulum-v5": "inverted_pendulum",
    "Hopper-v5": "hopper",
    "Walker2d-v5": "walker2d",
    "HalfCheetah-v5": "half_cheetah",
    "Ant-v5": "ant",
    "Burn-v0": "burn",
}
PLUGIN_ID = "Plugin-v0"
PYTHON_ID = "Python-v0"


def _make_builtin(name: str, num_envs: int = 1, **kwargs: Any) -> RolloutVectorEnv:
    return RolloutVectorEnv(name, num_envs, **kwargs)


def _make_plugin(num_envs: int = 1, plugin: str | None = None,
                 **kwargs: Any) -> RolloutVectorEnv:
    if not plugin:
        raise ValueError(f"{NAMESPACE}/{PLUGIN_ID} needs plugin='path/to/libenv.so' (a shared "
                         "object built against <rollout/env.h>: docs/env-api.md)")
    # A path, never a bare name: ro__env_open takes a name with a '/' as a file.
    path = plugin if os.sep in plugin else os.path.join(os.curdir, plugin)
    return RolloutVectorEnv(path, num_envs, **kwargs)


def _make_python(num_envs: int = 1, env: str | None = None,
                 **kwargs: Any) -> RolloutVectorEnv:
    if not env or not is_python_env(env):
        raise ValueError(f"{NAMESPACE}/{PYTHON_ID} needs env='gym:ID' or env='py:MODULE:CALLABLE' "
                         f"(got {env!r}): docs/env-api.md, Python envs")
    return RolloutVectorEnv(env, num_envs, **kwargs)


def register_envs() -> None:
    """Registers every ``rollout/`` id (again: a no-op for those present)."""
    for gym_id, name in BUILTIN.items():
        full = f"{NAMESPACE}/{gym_id}"
        if full not in gymnasium.registry:
            gymnasium.register(full, vector_entry_point=functools.partial(_make_builtin, name))
    full = f"{NAMESPACE}/{PLUGIN_ID}"
    if full not in gymnasium.registry:
        gymnasium.register(full, vector_entry_point=_make_plugin)
    full = f"{NAMESPACE}/{PYTHON_ID}"
    if full not in gymnasium.registry:
        gymnasium.register(full, vector_entry_point=_make_python)


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any) -> RolloutVectorEnv:
    """A :class:`RolloutVectorEnv` of ``num_envs`` envs: ``env_id`` is a
    ``rollout/`` id (``"rollout/Hopper-v5"``; the prefix may be left out),
    a built-in env name (``"hopper"``) or a plugin path (``".so"``).
    a Python env (``"gym:CartPole-v1"``, ``"py:mymodule:make_env"``: its
    workers are processes, docs/env-api.md) or a plugin path (``.so``).
    ``kwargs`` as ``gymnasium.make_vec``'s for these ids."""
    if is_python_env(env_id):  # before the plugin rule: gym:ALE/Pong-v5 has a '/'
        return _make_python(num_envs, env=env_id, **kwargs)
    gym_id = env_id.split("/", 1)[1] if env_id.startswith(NAMESPACE + "/") else env_id
    if gym_id in BUILTIN:
        return _make_builtin(BUILTIN[gym_id], num_envs, **kwargs)
    if gym_id == PLUGIN_ID:
        return _make_plugin(num_envs, **kwargs)
    if gym_id == PYTHON_ID:
        return _make_python(num_envs, **kwargs)
    if gym_id.endswith(".so") or os.sep in gym_id:
        return _make_plugin(num_envs, plugin=gym_id, **kwargs)
    if gym_id in BUILTIN.values():
        return _make_builtin(gym_id, num_envs, **kwargs)
    raise ValueError(f"env {env_id!r}: expected one of "
                     f"{[f'{NAMESPACE}/{i}' for i in BUILTIN] + [f'{NAMESPACE}/{PLUGIN_ID}']}, "
                     "a built-in env name or a plugin path (.so)")
