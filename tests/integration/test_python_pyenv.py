"""Python envs through make_vec (issue 33 point 1): make_vec("gym:ID") and
gymnasium.make_vec("rollout/Python-v0", env=...) run Gymnasium envs in env
worker processes behind rollout's in-process engine: trajectories that do
not depend on the number of processes, Gymnasium's NEXT_STEP autoreset,
reseeding, Dict observations, refusals by name, and no process left after
close(). No clock: every check is on what the envs return.

Run as: test_python_pyenv.py BUILD_DIR"""
import mmap
import os
import subprocess
import sys
import threading
import time
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

# The sleeping words of src/envs/pyenv_proto.h (the worker's Python never
# reads them: its Waiter does).
NODE_SLEEPS, WORKER_SLEEPS = 132, 136


def workers_of_this_process():
    """The env worker processes this process started (their command lines)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(os.getpid())],
                         capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "rollout_client.env_worker" in line]


def wait_until_dead(pid):
    """Returns once child pid of this process is a zombie (killed, not yet
    reaped: its node reaps it); a hang guard of 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return
        time.sleep(0.001)
    raise AssertionError(f"env worker {pid} did not die within 60 s of SIGKILL")


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

    def test_one_worker_per_cpu_pinned_to_it(self):
        # A pool of one process per CPU (the default) pins each to its own
        # CPU: the kernel never stacks two on one while another idles. Any
        # other pool is placed by the kernel.
        # A restarted worker is pinned as the one it replaces.
        cpus = sorted(os.sched_getaffinity(0))

        def affinities():
            pids = [int(line.split()[0]) for line in workers_of_this_process()]
            return pids, sorted(sorted(os.sched_getaffinity(pid)) for pid in pids)
        v = rc.make_vec("gym:CartPole-v1", 2 * len(cpus), num_threads=len(cpus))
        v.reset(seed=0)
        pids, pinned = affinities()
        self.assertEqual(pinned, [[c] for c in cpus])
        os.kill(pids[0], 9)
        wait_until_dead(pids[0])
        _, _, _, _, info = v.step(np.zeros(v.num_envs, np.int64))
        self.assertTrue(info["_rollout_env_failure"].any())  # the kill was seen: a new worker
        self.assertEqual(affinities()[1], [[c] for c in cpus])
        v.close()
        if len(cpus) > 1:
            v = rc.make_vec("gym:CartPole-v1", 4, num_threads=len(cpus) - 1)
            v.reset(seed=0)
            self.assertEqual(affinities()[1], [cpus] * (len(cpus) - 1))
            v.close()

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


def header(ew, magic=None, version=2):
    """A worker's header as the node writes it before the first command."""
    mm = mmap.mmap(-1, ew.HEADER)
    words = memoryview(mm).cast("I")
    words[ew.H_MAGIC >> 2] = 0x45595052 if magic is None else magic
    words[ew.H_VERSION >> 2] = version
    return mm, words


class WorkerWaiter(unittest.TestCase):
    """The worker's side of a command (python/hotpath/worker.c's Waiter):
    each side writes the other's eventfd only when the other says it
    sleeps. The node's side is src/envs/pyenv_proc.c; these play it."""

    def setUp(self):
        from rollout_client import env_worker as ew
        from rollout_client.hotpath import hot
        self.ew, self.hot = ew, hot
        self.wake = os.eventfd(0)
        self.done = os.eventfd(0, os.EFD_NONBLOCK)
        self.mm, self.words = header(ew)

    def tearDown(self):
        os.close(self.wake)
        os.close(self.done)

    def word(self, off):
        return self.words[off >> 2]

    def test_refuses_memory_of_another_protocol(self):
        for magic, version in ((0, 2), (None, 1)):
            mm, _ = header(self.ew, magic, version)
            with self.assertRaisesRegex(ValueError, "different builds"):
                self.hot.Waiter(mm, self.wake, self.done)
        unmade = self.hot.Waiter.__new__(self.hot.Waiter)
        with self.assertRaisesRegex(RuntimeError, "not made"):
            unmade.wait(1)
        with self.assertRaisesRegex(RuntimeError, "not made"):
            unmade.answer(1, 0)

    def test_answer_wakes_the_node_only_when_it_sleeps(self):
        w = self.hot.Waiter(self.mm, self.wake, self.done)
        w.answer(1, 0)
        self.assertEqual((self.word(self.ew.H_ACK), self.word(self.ew.H_STATUS)), (1, 0))
        with self.assertRaises(BlockingIOError):  # a spinning node: no syscall
            os.eventfd_read(self.done)
        self.words[NODE_SLEEPS >> 2] = 1
        w.answer(2, 1)
        self.assertEqual((self.word(self.ew.H_ACK), self.word(self.ew.H_STATUS)), (2, 1))
        self.assertEqual(os.eventfd_read(self.done), 1)

    def test_a_command_posted_before_the_wait_needs_no_wake(self):
        w = self.hot.Waiter(self.mm, self.wake, self.done)
        self.words[self.ew.H_SEQ >> 2] = 2  # no eventfd write: the worker was not asleep
        w.wait(1)
        self.assertEqual(sum(w.stats()[:2]), 1)  # it spun, and did not sleep on the eventfd
        self.assertEqual(self.word(WORKER_SLEEPS), 0)

    def test_a_sleeping_worker_is_woken(self):
        w = self.hot.Waiter(self.mm, self.wake, self.done)
        w.answer(2, 0)

        def node():
            # What the node does once the worker's spin ran out and it
            # said it sleeps: the sequence word, then the eventfd.
            guard = threading.Event()
            for _ in range(600):
                if self.word(WORKER_SLEEPS):
                    break
                guard.wait(0.1)
            else:
                self.fail("the worker never said it sleeps")
            self.words[self.ew.H_SEQ >> 2] = 3
            os.eventfd_write(self.wake, 1)
        self.words[self.ew.H_SEQ >> 2] = 2
        t = threading.Thread(target=node)
        t.start()
        w.wait(2)
        t.join()
        self.assertEqual((self.word(self.ew.H_SEQ), self.word(WORKER_SLEEPS)), (3, 0))


class Flaky(gym.Env):
    """CartPole's spaces; step k (counted from 1) raises, or returns a
    4-tuple, as `fault` says; float64 observations (rows are float32)."""
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fault, at):
        self.fault, self.at, self.t = fault, at, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.full(4, -1.0), {}

    def step(self, action):
        self.t += 1
        if self.t == self.at and self.fault == "raise":
            raise RuntimeError("flaky env")
        if self.t == self.at and self.fault == "interrupt":
            raise KeyboardInterrupt
        if self.t == self.at and self.fault == "short":
            return np.zeros(4), 0.0, False, False
        return np.full(4, self.t + 0.5 * int(action)), float(self.t), self.t == 3, False, {}


class StepShard(unittest.TestCase):
    """hot.step_shard, the worker's steps: rows as attach() maps them."""

    def rows(self, n):
        """obs, reset_obs, reward and flags views of n rows of 64 bytes."""
        buf = bytearray(64 * n)

        def view(off, dtype, shape):
            item = np.dtype(dtype).itemsize
            return np.ndarray((n,) + shape, dtype, buf, off, (64,) + ((item,) if shape else ()))
        return (view(0, np.float32, (4,)), view(16, np.float32, (4,)), view(32, np.float32, ()),
                view(40, np.uint8, (8,)))

    def test_cartpole_rows_match_its_steps(self):
        from rollout_client.hotpath import hot
        n = 3
        envs = [gym.make("CartPole-v1") for _ in range(n)]
        twins = [gym.make("CartPole-v1") for _ in range(n)]
        for i in range(n):
            envs[i].reset(seed=i)
            twins[i].reset(seed=i)
        obs, first, reward, flags = self.rows(n)
        rng = np.random.default_rng(1)
        ends = 0
        for _ in range(200):
            acts = rng.integers(0, 2, n).astype(np.int64)
            flags[:, 0] = 1
            hot.step_shard(envs, [0, 1, 2], acts, obs, first, reward, flags, None)
            for i, e in enumerate(twins):
                o, r, te, tr, _ = e.step(acts[i])
                np.testing.assert_array_equal(obs[i], o)
                self.assertEqual((reward[i], flags[i, 1], flags[i, 2], flags[i, 0]),
                                 (r, te, tr, 0))
                if te or tr:
                    np.testing.assert_array_equal(first[i], e.reset()[0])
                    self.assertEqual(flags[i, 3], 1)
                    flags[i, 3] = 0
                    ends += 1
        self.assertGreater(ends, 0)

    def test_a_failing_env_goes_to_recreate_and_the_others_step(self):
        from rollout_client.hotpath import hot
        obs, first, reward, flags = self.rows(3)
        calls = []
        envs = [Flaky(None, 0), Flaky("raise", 2), Flaky("short", 1)]
        flags[:, 0] = 1
        hot.step_shard(envs, [0, 1, 2], [1, 1, 1], obs, first, reward, flags,
                       lambda i, exc: calls.append((i, exc)))
        self.assertEqual([i for i, _ in calls], [2])
        self.assertRegex(str(calls[0][1]), "not a 5-tuple")
        np.testing.assert_array_equal(obs[0], [1.5] * 4)  # float64 converted into the row
        self.assertEqual((reward[0], reward[2], flags[2, 1], flags[2, 0]), (1.0, 0.0, 0, 0))
        flags[:, 0] = 1
        hot.step_shard(envs, [1], [0], obs, first, reward, flags,
                       lambda i, exc: calls.append((i, exc)))
        self.assertEqual(calls[1][0], 1)
        self.assertIsInstance(calls[1][1], RuntimeError)
        self.assertIsNotNone(calls[1][1].__traceback__)  # what the node's log line shows
        self.assertEqual((flags[0, 0], flags[1, 0], flags[2, 0]), (1, 0, 1))  # only row 1 ran
        # A third step of env 0 ends its episode: the reset's observation.
        flags[:, 0] = 1
        hot.step_shard(envs, [0], [0], obs, first, reward, flags, None)
        hot.step_shard(envs, [0], [0], obs, first, reward, flags, None)
        self.assertEqual((flags[0, 1], flags[0, 3]), (1, 1))
        np.testing.assert_array_equal(first[0], [-1.0] * 4)

    def test_discrete_rows_and_actions_found_in_c(self):
        """step_discrete: the GO rows only, np.int64(act_i[i, 0] + start)."""
        from rollout_client.hotpath import hot

        class Seen(Flaky):
            def step(self, action):
                self.got = action
                return super().step(action)
        obs, first, reward, flags = self.rows(4)
        act_i = np.zeros((4, 2), np.int32)
        act_i[:, 0] = [0, 1, 0, 1]
        envs = [Seen(None, 0) for _ in range(4)]
        flags[:, 0] = [1, 0, 1, 1]
        hot.step_discrete(envs, act_i, 3, obs, first, reward, flags, None)
        self.assertFalse(hasattr(envs[1], "got"))  # its GO flag was clear
        self.assertEqual([(type(envs[i].got), int(envs[i].got)) for i in (0, 2, 3)],
                         [(np.int64, 3), (np.int64, 3), (np.int64, 4)])
        self.assertEqual(list(flags[:, 0]), [0, 0, 0, 0])
        np.testing.assert_array_equal(obs[3], [1 + 0.5 * 4] * 4)
        with self.assertRaisesRegex(TypeError, "act_i"):
            hot.step_discrete(envs, act_i.astype(np.int64), 0, obs, first, reward, flags, None)

    def test_box_rows_and_actions_found_in_c(self):
        """step_box: the GO rows only, each a new array like proto (its
        shape and float dtype) of act_f[i, :proto.size]."""
        from rollout_client.hotpath import hot

        class Seen(Flaky):
            def step(self, action):
                self.got = action
                return super().step(0)
        obs, first, reward, flags = self.rows(3)
        act_f = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
        for proto in (np.zeros((2, 1), np.float32), np.zeros(3, np.float64)):
            envs = [Seen(None, 0) for _ in range(3)]
            flags[:, 0] = [1, 0, 1]
            hot.step_box(envs, act_f, proto, obs, first, reward, flags, None)
            self.assertFalse(hasattr(envs[1], "got"))  # its GO flag was clear
            for i in (0, 2):
                a = envs[i].got
                self.assertEqual((a.dtype, a.shape), (proto.dtype, proto.shape))
                self.assertFalse(np.shares_memory(a, act_f))  # the env may keep it
                np.testing.assert_array_equal(a.ravel(), act_f[i, :proto.size])
            self.assertEqual(list(flags[:, 0]), [0, 0, 0])
        with self.assertRaisesRegex(TypeError, "proto"):
            hot.step_box(envs, act_f, np.zeros(2, np.int32), obs, first, reward, flags, None)
        with self.assertRaisesRegex(TypeError, "act_f"):
            hot.step_box(envs, act_f[:, :1], np.zeros(2, np.float32), obs, first, reward, flags,
                         None)
        with self.assertRaisesRegex(TypeError, "act_f"):
            hot.step_box(envs, act_f.astype(np.float64), proto, obs, first, reward, flags, None)

    def test_an_interrupt_is_not_an_env_failure(self):
        from rollout_client.hotpath import hot
        obs, first, reward, flags = self.rows(2)
        calls = []
        flags[:, 0] = 1
        with self.assertRaises(KeyboardInterrupt):
            hot.step_shard([Flaky(None, 0), Flaky("interrupt", 1)], [0, 1], [0, 0], obs, first,
                           reward, flags, lambda i, exc: calls.append(i))
        self.assertEqual((calls, flags[0, 0], flags[1, 0]), ([], 0, 1))

    def test_bad_arguments_are_refused(self):
        from rollout_client.hotpath import hot
        obs, first, reward, flags = self.rows(2)
        envs = [Flaky(None, 0)] * 2
        with self.assertRaisesRegex(ValueError, "outside the shard"):
            hot.step_shard(envs, [2], [0], obs, first, reward, flags, None)
        with self.assertRaisesRegex(ValueError, "actions: 2 are needed"):
            hot.step_shard(envs, [0, 1], [0], obs, first, reward, flags, None)
        with self.assertRaisesRegex(TypeError, "reward"):
            hot.step_shard(envs, [0], [0], obs, first, reward.astype(np.float64), flags, None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
