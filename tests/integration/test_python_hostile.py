"""Hostile nodes against the learners (issue 31): what a node says or puts
in memory that rollout-learner and the Python client must refuse by name,
without using it and without allocating what it asks for.

usage: test_python_hostile.py ROLLOUT_NODE BUILD_DIR [unittest args]"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_POSITIONAL = [a for a in sys.argv[1:3] if not a.startswith("-")]
NODE = _POSITIONAL[0] if _POSITIONAL else None
BUILD = _POSITIONAL[1] if len(_POSITIONAL) > 1 else None
del sys.argv[1:1 + len(_POSITIONAL)]
if BUILD:
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import hostile_node as hn  # noqa: E402
import nodeutil as nu  # noqa: E402

import rollout_client as rc  # noqa: E402
from rollout_client import hotpath  # noqa: E402

GUARD = nu.HANG_GUARD_S


def nan_obs(cols):
    cols["obs"][2 * 4 + 1] = np.nan  # env 2's second value


def inf_reward(cols):
    cols["reward"][3] = np.inf


def odd_flags(cols):
    cols["flags"][1] = 0x44


POISONS = ((nan_obs, "the observation of env 2 holds NaN"),
           (inf_reward, "the reward of env 3 is infinite"),
           (odd_flags, "the flags of env 1 are 0x44, bits no node sets"))


class ValuesInMemory(nu.TempDirCase):
    """A: a learner that reads NaN or out-of-range values from a node's
    memory reports them by name and uses none of them."""

    def test_rollout_learner_names_what_it_refuses(self):
        learner = os.path.join(BUILD, "rollout-learner")
        for poison, says in POISONS:
            with self.subTest(poison.__name__):
                path = self.path(poison.__name__ + ".sock")
                node = hn.seed_node(path, poison=poison)
                p = nu.run_cmd([learner, "--connect", "unix:" + path, "--workers", 0, "--steps",
                                100, "--quiet"], timeout=GUARD, capture_output=True,
                               text=True)
                node.close()
                self.assertNotEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"observations 1 in memory: {says}", p.stderr)
                # Nothing was answered: the values were never used.
                self.assertFalse([f for f in node.got if f.WhichOneof("body") == "actions"])

    def test_the_client_names_what_it_refuses(self):
        for poison, says in POISONS:
            with self.subTest(poison.__name__):
                path = self.path(poison.__name__ + ".sock")
                node = hn.seed_node(path, poison=poison)
                with rc.Client("unix:" + path, connect_timeout=GUARD) as c:
                    self.assertIsNotNone(c._conns[0].mem)  # the memory came with the welcome
                    with self.assertRaises(rc.ProtocolError) as cm:
                        c.recv(timeout=GUARD)
                    self.assertIn(f"observations seq 1 in memory: {says}", str(cm.exception))
                node.close()

    def test_vecenv_hotpath_names_what_it_refuses(self):
        n, d = 4, 3
        m_obs = np.zeros((n, d), np.float32)
        m_final = np.zeros((n, d), np.float32)
        m_reward = np.zeros(n, np.float32)
        m_flags = np.zeros(n, np.uint8)
        m_step = np.zeros(n, np.uint64)

        def take():
            return hotpath.load().take_frame(
                np.array([0, n], np.uint32), 0, m_obs, m_final, m_reward, m_flags, m_step,
                np.zeros((n, d), np.float32), np.zeros((n, d), np.float32),
                np.zeros(n, np.float32), np.zeros((3, n), bool), np.zeros(n, np.uint64),
                np.zeros(n, bool))
        self.assertEqual(take(), n)
        m_obs[1, 2] = np.nan
        with self.assertRaisesRegex(ValueError, "observation of env 1 in shared memory holds NaN"):
            take()
        m_obs[1, 2] = 0
        m_reward[3] = -np.inf
        with self.assertRaisesRegex(ValueError, "reward of env 3 .* holds an infinity"):
            take()
        m_reward[3] = 0
        m_flags[0] = 8  # a final observation
        m_final[0, 0] = np.nan
        with self.assertRaisesRegex(ValueError, "final observation of env 0"):
            take()
        m_flags[0] = 0x80
        with self.assertRaisesRegex(ValueError, "flags of env 0 .* 0x80"):
            take()


if __name__ == "__main__":
    unittest.main(verbosity=2)
