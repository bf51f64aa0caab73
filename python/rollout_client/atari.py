"""Atari as the field runs it, for ``--env py:rollout_client.atari:make``
(docs/env-api.md "Atari"):

    rollout-node --env py:rollout_client.atari:make --env-arg game=Breakout
    rollout_client.make_vec("py:rollout_client.atari:make", 16, game="Pong")

``ALE/<game>-v5`` from ale-py (its wheel carries the ROMs), with the
standard preprocessing of Gymnasium's ``AtariPreprocessing`` (no-op starts,
frame skip 4 with a max over the last two frames, 84x84 grayscale) and
``FrameStackObservation`` (the last 4 frames): observations are uint8
tensors of shape (4, 84, 84) end to end. ALE v5 envs skip 4 frames on their
own, so the env is made with ``frameskip=1`` and the preprocessing skips.

``make`` returns ``AtariStack``: the two wrappers' steps fused into one.
Gymnasium's stack runs every frame of a step through three wrappers and
``AtariEnv.step``, which renders an RGB screen per frame that the
preprocessing throws away; ``AtariStack`` calls the emulator (``ale.act``)
once per frame and reads only the two gray screens the max keeps. Its
transitions, observations and infos equal the stack's bit for bit
(``tests/integration/test_python_atari.py`` steps both side by side), and a
step costs less (the raw loops of bench/bench_pyenv.py's two Pong rows).
``gymnasium_stack`` builds Gymnasium's own
stack, for comparison and for options ``AtariStack`` does not take.
"""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np


def _inner(game: str, version: str, kwargs: Any) -> gym.Env:  # type: ignore[type-arg]
    import ale_py

    gym.register_envs(ale_py)
    return gym.make(f"ALE/{game}-{version}", frameskip=1, **kwargs)


def gymnasium_stack(game: str = "Breakout", version: str = "v5", frame_skip: int = 4,
                    screen_size: int = 84, stack: int = 4, noop_max: int = 30,
                    terminal_on_life_loss: bool = False,
                    **kwargs: Any) -> gym.Env:  # type: ignore[type-arg]
    """Gymnasium's ``FrameStackObservation(AtariPreprocessing(ALE/{game}))``:
    what ``make`` equals, wrapper by wrapper."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    env = AtariPreprocessing(_inner(game, version, kwargs), noop_max=noop_max,
                             frame_skip=frame_skip, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True)
    return FrameStackObservation(env, stack)


class AtariStack(gym.Wrapper):  # type: ignore[type-arg]
    """``AtariPreprocessing`` (grayscale, unscaled) and
    ``FrameStackObservation`` (padding with the reset frame) in one wrapper
    around ``ALE/{game}`` made with ``frameskip=1``. Every buffer operation
    is the wrappers' own, in their order, so observations equal theirs even
    where theirs are odd (an episode that ends inside a skip keeps the
    previous step's screens)."""

    def __init__(self, env: gym.Env, frame_skip: int, screen_size: int,  # type: ignore[type-arg]
                 stack: int, noop_max: int, terminal_on_life_loss: bool) -> None:
        super().__init__(env)
        import cv2  # AtariPreprocessing's resize: the same function, bit for bit

        if frame_skip <= 0 or stack <= 0 or screen_size <= 0 or noop_max < 0:
            raise ValueError(f"frame_skip {frame_skip}, stack {stack}, screen_size {screen_size} "
                             f"and noop_max {noop_max}: each must be positive (noop_max >= 0)")
        atari: Any = env.unwrapped  # ale_py's AtariEnv
        if getattr(atari, "continuous", False):
            raise ValueError("continuous Atari actions: use gymnasium_stack")
        if noop_max and atari.get_action_meanings()[0] != "NOOP":
            raise ValueError("noop_max > 0 needs action 0 to be NOOP")
        self._resize, self._area = cv2.resize, cv2.INTER_AREA
        self.ale = atari.ale
        self._actions = atari._action_set
        self.frame_skip, self.noop_max = frame_skip, noop_max
        self.screen = (screen_size, screen_size)
        self.terminal_on_life_loss = terminal_on_life_loss
        h, w = atari.observation_space.shape[:2]
        self._buf = [np.empty((h, w), np.uint8), np.empty((h, w), np.uint8)]
        self._stack = np.zeros((stack, screen_size, screen_size), np.uint8)
        self.lives = 0
        self.game_over = False
        self._has_reset = False  # OrderEnforcing's rule: the inner env's check is bypassed
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)

    def _frame(self, action: Any) -> tuple[float, bool, bool]:
        """One emulator frame, as ``AtariEnv.step`` with frameskip 1."""
        ale = self.ale
        reward = ale.act(self._actions[action], 1.0)
        return reward, ale.game_over(with_truncation=False), ale.game_truncated()

    def _info(self) -> dict[str, Any]:
        ale = self.ale
        return {"lives": ale.lives(), "episode_frame_number": ale.getEpisodeFrameNumber(),
                "frame_number": ale.getFrameNumber()}

    def _screen(self) -> np.ndarray:
        buf = self._buf
        if self.frame_skip > 1:
            np.maximum(buf[0], buf[1], out=buf[0])
        return self._resize(buf[0], self.screen, interpolation=self._area)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self._has_reset:
            raise gym.error.ResetNeeded("cannot call env.step() before calling env.reset()")
        total, terminated, truncated = 0.0, False, False
        skip, ale, buf = self.frame_skip, self.ale, self._buf
        for t in range(skip):
            reward, terminated, truncated = self._frame(action)
            total += reward
            self.game_over = terminated
            if self.terminal_on_life_loss:
                lives = ale.lives()
                terminated = terminated or lives < self.lives
                self.game_over = terminated
                self.lives = lives
            if terminated or truncated:
                break
            if t == skip - 2:
                ale.getScreenGrayscale(buf[1])
            elif t == skip - 1:
                ale.getScreenGrayscale(buf[0])
        stack = self._stack
        stack[:-1] = stack[1:]
        stack[-1] = self._screen()
        return stack.copy(), total, terminated, truncated, self._info()

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self._has_reset = True
        atari: Any = self.env.unwrapped
        noops = atari.np_random.integers(1, self.noop_max + 1) if self.noop_max > 0 else 0
        for _ in range(noops):
            _, terminated, truncated = self._frame(0)
            info.update(self._info())
            if terminated or truncated:
                _, info = self.env.reset(seed=seed, options=options)
        self.lives = self.ale.lives()
        self.ale.getScreenGrayscale(self._buf[0])
        self._buf[1].fill(0)
        self._stack[:] = self._screen()
        return self._stack.copy(), info


def make(game: str = "Breakout", version: str = "v5", frame_skip: int = 4,
         screen_size: int = 84, stack: int = 4, noop_max: int = 30,
         terminal_on_life_loss: bool = False, **kwargs: Any) -> gym.Env:  # type: ignore[type-arg]
    """``ALE/{game}-{version}`` preprocessed (``AtariStack``); kwargs go to
    ``gymnasium.make`` (e.g. ``repeat_action_probability``,
    ``full_action_space``)."""
    return AtariStack(_inner(game, version, kwargs), frame_skip, screen_size, stack, noop_max,
                      terminal_on_life_loss)
