"""Atari as the field runs it, for ``--env py:rollout_client.atari:make``
(docs/env-api.md "Atari"):

    rollout-node --env py:rollout_client.atari:make --env-arg game=Breakout
    rollout_client.make_vec("py:rollout_client.atari:make", 16, game="Pong")

``ALE/<game>-v5`` from ale-py (its wheel carries the ROMs), with the
standard preprocessing of Gymnasium's ``AtariPreprocessing`` (no-op starts,
frame skip 4 with a max over the last two frames, 84x84 grayscale) and
``FrameStackObservation`` (the last 4 frames): observations are uint8
tensors of shape (4, 84, 84) end to end. ALE v5 envs skip 4 frames on their
own, so the env is made with ``frameskip=1`` and the wrapper skips.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym


def make(game: str = "Breakout", version: str = "v5", frame_skip: int = 4,
         screen_size: int = 84, stack: int = 4, noop_max: int = 30,
         terminal_on_life_loss: bool = False, **kwargs: Any) -> gym.Env:  # type: ignore[type-arg]
    """``ALE/{game}-{version}`` preprocessed; kwargs go to ``gymnasium.make``
    (e.g. ``repeat_action_probability``, ``full_action_space``)."""
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    env = gym.make(f"ALE/{game}-{version}", frameskip=1, **kwargs)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip,
                             screen_size=screen_size, terminal_on_life_loss=terminal_on_life_loss,
                             grayscale_obs=True)
    return FrameStackObservation(env, stack)
