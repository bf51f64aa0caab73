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
import threading
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

    def test_workers_run_one_thread_pools(self):
        # The seeds' lesson: BLAS, OpenMP and OpenCV at one thread in each
        # env process, whatever the caller's environment says.
        keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENCV_FOR_THREADS_NUM")
        saved = {k: os.environ.get(k) for k in keys}
        os.environ.update({k: "8" for k in keys})
        try:
            v = rc.make_vec("py:pyenv_envs:threads", 2, num_threads=2)
            obs, _ = v.reset(seed=0)
            v.close()
        finally:
            for k, x in saved.items():
                if x is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = x
        np.testing.assert_array_equal(obs, np.ones((2, len(keys)), np.int32))

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


class SpinBudgetRule(unittest.TestCase):
    """rollout_client/spin_budget.py: the rule of src/runtime/spin_budget.h
    (unit.spin_budget) in Python, fed a history, its budgets checked."""

    def test_short_waits_spin_twice_their_length(self):
        from rollout_client import spin_budget as sb
        s = sb.SpinBudget(200e-6)
        self.assertEqual(s.next(), 200e-6)  # no history: up to the cap
        s.record(200e-6, 40e-6, True)
        self.assertAlmostEqual(s.next(), 2 * 40e-6 + sb.SLACK)
        s.record(90e-6, 80e-6, True)
        self.assertAlmostEqual(s.rtt, 50e-6)  # a quarter of the difference
        for _ in range(40):
            s.record(s.next(), 150e-6, True)
        self.assertEqual(s.next(), 200e-6)  # the cap
        self.assertEqual(s.cap, 200e-6)

    def test_long_waits_sleep_until_they_shorten(self):
        from rollout_client import spin_budget as sb
        s = sb.SpinBudget(200e-6)
        s.record(s.next(), 3e-3, False)
        n = 0
        while s.rtt > s.cap:
            self.assertEqual(s.next(), 0.0)
            s.record(0.0, 30e-6, False)
            n += 1
        self.assertEqual((n, s.blocked), (10, 10))
        self.assertGreater(s.next(), 0.0)

    def test_misses_rest_then_probe(self):
        from rollout_client import spin_budget as sb
        s = sb.SpinBudget(200e-6)
        for _ in range(sb.MISS_STREAK):
            s.record(s.next(), 60e-6, False)
        rest = sb.REST_MIN
        for _ in range(8):
            self.assertEqual([s.next() for _ in range(rest)], [0.0] * rest)
            b = s.next()  # the probe
            self.assertGreater(b, 0.0)
            s.record(b, 60e-6, False)
            rest = min(rest * 2, sb.REST_MAX)
        self.assertEqual(s.quiet, sb.REST_MAX)
        s.quiet = 0
        s.record(s.next(), 40e-6, True)  # answered while spinning
        self.assertEqual((s.rest, s.streak, s.quiet), (sb.REST_MIN, 0, 0))
        self.assertEqual(sb.SpinBudget(0).next(), 0.0)
        with self.assertRaises(ValueError):
            sb.SpinBudget(-1)


class AwaitCommand(unittest.TestCase):
    """env_worker's wait for the node's next command: a command seen while
    spinning leaves its eventfd count behind, and the wake that count gives
    later must not pass for a new command."""

    def setUp(self):
        from rollout_client import env_worker
        self.ew = env_worker
        self.fd = os.eventfd(0)
        self.old_fd = env_worker.FD_WAKE
        env_worker.FD_WAKE = self.fd
        self.hdr = memoryview(bytearray(env_worker.HEADER)).cast("I")
        self.w = object.__new__(env_worker.Worker)
        self.w.hdr = self.hdr

    def tearDown(self):
        self.ew.FD_WAKE = self.old_fd
        os.close(self.fd)

    def post(self, seq):
        """What the node does: the sequence word, then the eventfd."""
        self.hdr[self.ew.H_SEQ >> 2] = seq
        os.eventfd_write(self.fd, 1)

    def test_command_seen_spinning_then_a_late_wake_sleeps_again(self):
        from rollout_client.spin_budget import SpinBudget
        s = SpinBudget(60.0)  # a minute: the command is there before it runs out
        self.post(2)
        self.w.await_command(s, 1)  # seq 2 is there: a hit, the eventfd not read
        self.assertEqual((s.hits, s.misses), (1, 0))
        # The next wait sleeps (no spin) and first meets command 2's count:
        # seq is still 2, so it sleeps again until command 3.
        asleep = SpinBudget(0)
        t = threading.Thread(target=self.post, args=(3,))
        t.start()
        self.w.await_command(asleep, 2)
        t.join()
        self.assertEqual(self.hdr[self.ew.H_SEQ >> 2], 3)
        # Whichever count is left now (command 3's, if its wake came after
        # its word was read), the next wait returns for command 4 only.
        t = threading.Thread(target=self.post, args=(4,))
        t.start()
        self.w.await_command(asleep, 3)
        t.join()
        self.assertEqual(self.hdr[self.ew.H_SEQ >> 2], 4)

    def test_sleeps_when_spinning_is_off(self):
        from rollout_client.spin_budget import SpinBudget
        s = SpinBudget(0)
        self.post(5)
        self.w.await_command(s, 4)
        self.assertEqual((s.hits, s.misses, s.blocked), (0, 0, 1))
        os.set_blocking(self.fd, False)
        with self.assertRaises(BlockingIOError):  # it slept on (and read) the eventfd
            os.eventfd_read(self.fd)


if __name__ == "__main__":
    unittest.main(verbosity=2)
