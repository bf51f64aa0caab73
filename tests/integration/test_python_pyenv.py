"""Python envs through make_vec (issue 33 point 1): make_vec("gym:ID") and
gymnasium.make_vec("rollout/Python-v0", env=...) run Gymnasium envs in env
worker processes behind rollout's in-process engine: trajectories that do
not depend on the number of processes, Gymnasium's NEXT_STEP autoreset,
reseeding, Dict observations, refusals by name, and no process left after
close(). No clock: every check is on what the envs return.

Run as: test_python_pyenv.py BUILD_DIR"""
import os
import subprocess
import sys
import unittest

BUILD = os.path.abspath(sys.argv[1])
del sys.argv[1:2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import rollout_client as rc  # noqa: E402


def workers_of_this_process():
    """The env worker processes this process started (their command lines)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(os.getpid())],
                         capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "rollout_client.env_worker" in line]


def run(v, steps, seed):
    """obs, rewards and flags of `steps` steps of seeded random actions."""
    rng = np.random.default_rng(seed)
    obs, _ = v.reset(seed=seed)
    out = [obs.copy()]
    for _ in range(steps):
        a = rng.integers(0, 2, v.num_envs)
        obs, r, te, tr, _ = v.step(a)
        out += [obs.copy(), r.copy(), te.copy(), tr.copy()]
    return out


class MakeVec(unittest.TestCase):
    def test_cartpole_independent_of_processes(self):
        ref = None
        for threads in (1, 2, 3):
            with self.subTest(num_threads=threads):
                v = rc.make_vec("gym:CartPole-v1", 6, num_threads=threads)
                self.assertEqual(len(workers_of_this_process()), threads)
                self.assertEqual(v.single_observation_space.shape, (4,))
                self.assertEqual(v.single_action_space, gym.spaces.Discrete(2))
                got = run(v, 150, seed=11)
                v.close()
                self.assertEqual(workers_of_this_process(), [])
                if ref is None:
                    ref = got
                    continue
                for a, b in zip(got, ref):
                    np.testing.assert_array_equal(a, b)

    def test_next_step_autoreset(self):
        v = rc.make_vec("gym:CartPole-v1", 4, num_threads=2)
        obs, _ = v.reset(seed=2)
        ended = np.zeros(4, bool)
        seen = 0
        for _ in range(300):
            obs, r, te, tr, _ = v.step(np.zeros(4, np.int64))  # always left: short episodes
            # The step after an end is the reset: reward 0, not ended.
            self.assertTrue(np.all(r[ended] == 0.0))
            self.assertFalse(np.any((te | tr)[ended]))
            seen += int(ended.sum())
            ended = te | tr
        self.assertGreater(seen, 4)
        v.close()

    def test_reseed_repeats(self):
        v = rc.make_vec("gym:CartPole-v1", 3, num_threads=1)
        a = run(v, 40, seed=5)
        b = run(v, 40, seed=5)
        c = run(v, 40, seed=6)
        v.close()
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        self.assertFalse(np.array_equal(a[0], c[0]))

    def test_send_recv_one_command_per_process(self):
        # Two processes of 3 envs: every batch sent is one command to each,
        # so the 3 envs of a process see one command number, one more each
        # batch (not one command per env).
        v = rc.make_vec("py:pyenv_envs:commands", 6, num_threads=2)
        v.async_reset(seed=0)
        seen = []
        for _ in range(5):
            obs, _, _, _, info = v.recv()
            self.assertEqual(sorted(info["env_id"].tolist()), list(range(6)))
            seen.append(obs[np.argsort(info["env_id"]), 0])
            v.send(np.zeros(6, np.int64))
        v.close()
        for batch in seen[1:]:
            self.assertEqual(len(set(batch[:3].tolist())), 1, seen)
            self.assertEqual(len(set(batch[3:].tolist())), 1, seen)
        for a, b in zip(seen[1:], seen[2:]):
            np.testing.assert_array_equal(b, a + 1)

    def test_send_recv_steps_as_step(self):
        # send/recv of every env takes the same steps as step().
        v = rc.make_vec("gym:CartPole-v1", 6, num_threads=2)
        ref = run(v, 60, seed=4)
        rng = np.random.default_rng(4)
        v.async_reset(seed=4)
        got = []
        for t in range(61):
            obs, r, te, tr, info = v.recv()
            order = np.argsort(info["env_id"])
            got += [obs[order].copy()] + ([] if t == 0 else
                                           [r[order].copy(), te[order].copy(), tr[order].copy()])
            if t < 60:
                v.send(rng.integers(0, 2, 6)[info["env_id"]])
        v.close()
        self.assertEqual(len(got), len(ref))
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)

    def test_gymnasium_id_dict_observations(self):
        v = gym.make_vec("rollout/Python-v0", num_envs=3, env="py:pyenv_envs:drift",
                         horizon=7, num_threads=1)
        sp = v.single_observation_space
        self.assertEqual(list(sp.spaces), ["bits", "frame", "phase", "pos"])
        obs, _ = v.reset(seed=1)
        self.assertEqual(obs["frame"].shape, (3, 3, 4))
        for t in range(1, 8):
            obs, r, te, tr, _ = v.step(v.action_space.sample())
            if t < 7:
                np.testing.assert_array_equal(obs["frame"][:, 0, 0], [t] * 3)
        self.assertTrue(np.all(tr))  # horizon=7 reached the env as an int
        v.close()

    def test_atari_uint8_frames_end_to_end(self):
        try:
            import ale_py  # noqa: F401
            import cv2  # noqa: F401
        except ImportError as e:
            raise unittest.SkipTest(f"Atari needs ale-py and opencv-python-headless: {e}")
        v = rc.make_vec("py:rollout_client.atari:make", 2, game="Breakout", num_threads=2)
        sp = v.single_observation_space
        self.assertEqual((sp.dtype, sp.shape), (np.uint8, (4, 84, 84)))
        self.assertEqual(v.single_action_space, gym.spaces.Discrete(4))
        obs, _ = v.reset(seed=3)
        fire = np.ones(2, np.int64)
        shifted = 0
        for t in range(60):
            nxt, r, te, tr, _ = v.step(fire if t % 10 == 0 else v.action_space.sample())
            self.assertEqual((nxt.dtype, nxt.shape), (np.uint8, (2, 4, 84, 84)))
            live = ~(te | tr)
            # FrameStackObservation: the newest three frames move down one.
            np.testing.assert_array_equal(nxt[live, :3], obs[live, 1:])
            shifted += int(live.sum())
            obs = nxt
        self.assertGreater(shifted, 100)
        self.assertGreater(int(obs.max()), 0)  # a screen, not zeros
        v.close()

    def test_refusals_named(self):
        with self.assertRaisesRegex(TypeError, "literals only"):
            rc.make_vec("gym:CartPole-v1", 2, render_fn=lambda: 0)
        with self.assertRaisesRegex(ValueError, "needs env='gym:ID'"):
            gym.make_vec("rollout/Python-v0", num_envs=2, env="cartpole")
        with self.assertRaisesRegex(Exception, "rollout cannot carry a Text space"):
            rc.make_vec("py:pyenv_envs:texty", 2)
        self.assertEqual(workers_of_this_process(), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
