#!/usr/bin/env python3
"""rollout_client.atari.AtariStack (the fused preprocessing behind
``py:rollout_client.atari:make``) against Gymnasium's own
FrameStackObservation(AtariPreprocessing(ALE/...)) stepped side by side:
every observation, reward, flag and info equal, through episode ends
(terminated, truncated inside a skip, lives lost), no-op starts, sticky
actions and other skips, stacks and sizes.

usage: test_python_atari.py BUILD_DIR
"""
from __future__ import annotations

import os
import sys
import unittest
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

try:
    import ale_py  # noqa: F401
    import cv2  # noqa: F401
    from rollout_client import atari
    WHY = ""
except ImportError as e:  # the test says so rather than passing silently
    WHY = f"Atari needs ale-py and opencv-python-headless: {e}"


def side_by_side(tc: unittest.TestCase, steps: int, seed: int, **kw: Any) -> dict[str, int]:
    """Steps both stacks with the same seeded random actions; returns how
    many episode ends of each kind it saw."""
    ours, theirs = atari.make(**kw), atari.gymnasium_stack(**kw)
    tc.assertEqual(ours.observation_space, theirs.observation_space)
    tc.assertEqual(ours.action_space, theirs.action_space)
    rng = np.random.default_rng(seed)
    seen = {"terminated": 0, "truncated": 0, "resets": 0}
    o1, i1 = ours.reset(seed=seed)
    o2, i2 = theirs.reset(seed=seed)
    for t in range(steps):
        where = f"{kw} seed {seed} step {t}"
        np.testing.assert_array_equal(o1, o2, err_msg=where)
        tc.assertEqual((o1.dtype, o1.shape), (o2.dtype, o2.shape), where)
        tc.assertEqual(i1, i2, where)
        a = np.int64(rng.integers(ours.action_space.n))
        o1, r1, te1, tr1, i1 = ours.step(a)
        o2, r2, te2, tr2, i2 = theirs.step(a)
        tc.assertEqual((r1, te1, tr1), (r2, te2, tr2), where)
        if te1 or tr1:
            np.testing.assert_array_equal(o1, o2, err_msg=where + " (final)")
            tc.assertEqual(i1, i2, where)
            seen["terminated" if te1 else "truncated"] += 1
            seen["resets"] += 1
            o1, i1 = ours.reset()
            o2, i2 = theirs.reset()
    ours.close()
    theirs.close()
    return seen


@unittest.skipIf(WHY, WHY)
class AtariStackEqualsGymnasium(unittest.TestCase):
    def test_pong_sticky_actions(self):
        side_by_side(self, 300, 0, game="Pong")

    def test_breakout_lives_end_episodes(self):
        seen = side_by_side(self, 600, 1, game="Breakout", terminal_on_life_loss=True)
        self.assertGreater(seen["terminated"], 1)  # lives were lost and ended episodes

    def test_truncated_inside_a_skip(self):
        # 4-frame steps against a 103-frame limit: every episode is cut
        # inside a skip, where the preprocessing keeps stale screens.
        seen = side_by_side(self, 120, 2, game="Breakout", max_num_frames_per_episode=103)
        self.assertGreater(seen["truncated"], 1)

    def test_other_skips_stacks_sizes(self):
        side_by_side(self, 80, 3, game="Pong", frame_skip=1, stack=2, screen_size=64)
        side_by_side(self, 80, 4, game="Breakout", frame_skip=3, stack=1, noop_max=0)

    def test_step_before_reset_refused(self):
        import gymnasium as gym
        env = atari.make(game="Pong")
        with self.assertRaises(gym.error.ResetNeeded):
            env.step(0)
        env.close()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
