"""VecEnv's EnvPool-style asynchronous stepping (send/recv) against real
nodes: every env's trajectory is the one synchronous step() gives, whatever
the batch size and however frames are split; in Gymnasium's NEXT_STEP (the
default) and SAME_STEP modes they are make_vec's in this process, after
reset(seed=...) at any time; DISABLED shows the same-step run's episodes;
the misuses others deadlock on (empty batches, recv() of envs that cannot
come) fail at once with a clear error and leave the VecEnv usable.

Run as: test_python_vecenv_async.py ROLLOUT_NODE BUILD_DIR. Every wait is
for an observation or an exit, with GUARD as the only clock.
"""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE, BUILD = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import nodeutil as nu  # noqa: E402  (processes killed at exit and on SIGTERM)

import rollout_client as rc  # noqa: E402

GUARD = nu.HANG_GUARD_S  # only a lost event takes this long


def balance(obs):
    """A CartPole controller: an env's action depends on its own observation
    only, so each env's trajectory is fixed by the node's seed."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


class Async(unittest.TestCase):
    """Over TCP: vecenv_async.py's Python does the work."""

    lane = False  # whether a one-node VecEnv here takes the lane (vecenv_lane.py)
    # Over TCP the Python path, so the same-host upgrade is declined here
    # (upgrade=False): the node's memory would hand the VecEnv to the lane.
    client_args = {"upgrade": False}

    def launch(self, num_envs=16, seed=11, env="cartpole", extra=()):
        node = rc.launch_node(env=env, num_envs=num_envs, seed=seed, node=NODE,
                              extra_args=list(extra), **self.listen())
        self.addCleanup(node.stop)
        return node

    def listen(self):
        return {}

    def check_lane(self, env):
        """A one-node VecEnv that went asynchronous took the lane exactly
        when this class says it should."""
        if len(env.nodes) == 1 and env._mode == "async":
            self.assertEqual(env._lane is not None, self.lane)

    @staticmethod
    def chaotic(obs):
        """An action per env from its own observation only, that ends
        CartPole episodes every few dozen steps."""
        return (np.abs(obs[:, 0] * 1e4).astype(np.int64) + (obs[:, 2] > 0)) % 2

    def local_trajectories(self, seed, n, steps, mode):
        """make_vec's (in this process) first observations after
        reset(seed=seed) and each env's `steps` transitions under chaotic."""
        env = rc.make_vec("CartPole-v1", num_envs=n, autoreset_mode=mode)
        try:
            obs, _ = env.reset(seed=seed)
            first = obs.copy()
            out = [[] for _ in range(n)]
            for _ in range(steps):
                obs, rew, term, trunc, _ = env.step(self.chaotic(obs))
                for k in range(n):
                    out[k].append((obs[k].copy(), rew[k], term[k], trunc[k]))
        finally:
            env.close()
        return first, out

    def collect(self, env, obs, steps, total):
        """Each env's transitions under send/recv and chaotic until every
        env has `steps`: from reset()'s obs, or (obs None) from the first
        observations recv() returns (returned too). Checks that
        total_steps, `total` before the reset, counts every transition but
        NEXT_STEP's reset steps."""
        n = env.num_envs
        got = [[] for _ in range(n)]
        first = np.zeros((n, 4), np.float32)
        started = np.full(n, obs is not None)
        ended = np.zeros(n, bool)
        resets = 0
        next_step = env.metadata["autoreset_mode"].name == "NEXT_STEP"
        if obs is not None:
            env.send(self.chaotic(obs), np.arange(n))
        while min(len(g) for g in got) < steps:
            obs, rew, term, trunc, infos = env.recv()
            self.check_lane(env)
            ids = infos["env_id"]
            for j, k in enumerate(ids.tolist()):
                if not started[k]:  # its first observation: no transition
                    started[k] = True
                    first[k] = obs[j]
                else:
                    got[k].append((obs[j].copy(), rew[j], term[j], trunc[j]))
                    resets += bool(next_step and ended[k])
                    ended[k] = term[j] or trunc[j]
            env.send(self.chaotic(obs), ids)
        self.assertEqual(env.total_steps - total, sum(map(len, got)) - resets)
        return first, [g[:steps] for g in got]

    def assert_same(self, got, want, what):
        ends = 0
        for k, (w, g) in enumerate(zip(want, got)):
            self.assertEqual(len(g), len(w))
            for t, (x, y) in enumerate(zip(w, g)):
                np.testing.assert_array_equal(x[0], y[0], err_msg=f"{what}: env {k} step {t} obs")
                self.assertEqual((x[1], x[2], x[3]), (y[1], y[2], y[3]),
                                 f"{what}: env {k} step {t}")
                ends += bool(x[2] or x[3])
        self.assertGreater(ends, 2 * len(want), f"{what}: too few episode ends to tell")

    def test_autoreset_modes_equal_make_vec(self):
        """send()/recv() in NEXT_STEP (the default, as Gymnasium's) and
        SAME_STEP, batches of 3 over frames of 4: reset(seed=31) on a node
        run with another seed that already stepped, with envs in flight,
        answered and handed out, gives make_vec's first observations, and
        every env's transitions are make_vec's in the same mode over many
        episode ends (NEXT_STEP: ended envs held for their reset step);
        async_reset(seed=31) then starts them over again, and
        async_reset(seed=[...]) (a seed per env) gives make_vec's envs of
        that seed list."""
        n, steps = 8, 60
        node = self.launch(num_envs=n, seed=4, extra=["--workers", 1, "--shard", 4,
                                                      "--batch", 4])
        listed = [40 + 3 * k for k in range(n)]
        for mode in ("next_step", "same_step"):
            with self.subTest(mode):
                first, want = self.local_trajectories(31, n, steps, mode)
                first_l, want_l = self.local_trajectories(listed, n, steps, mode)
                with rc.VecEnv(node.address, timeout=GUARD, batch_size=3,
                               autoreset_mode=None if mode == "next_step" else mode,
                               **self.client_args) as env:
                    self.assertEqual(env.metadata["autoreset_mode"].name, mode.upper())
                    env.async_reset()
                    for _ in range(6):
                        obs, _, _, _, infos = env.recv()
                        env.send(self.chaotic(obs), infos["env_id"])
                    obs, _, _, _, infos = env.recv()
                    env.send(self.chaotic(obs[:1]), infos["env_id"][:1])  # two still handed out
                    total = env.total_steps
                    obs, infos = env.reset(seed=31)
                    np.testing.assert_array_equal(obs, first)
                    self.assertTrue(infos["episode_start"].all())
                    got = self.collect(env, obs, steps, total)[1]
                    self.assert_same(got, want, f"{mode} after reset(seed=31)")
                    total = env.total_steps
                    env.async_reset(seed=31)
                    got_first, got = self.collect(env, None, steps, total)
                    np.testing.assert_array_equal(got_first, first)
                    self.assert_same(got, want, f"{mode} after async_reset(seed=31)")
                    total = env.total_steps
                    env.async_reset(seed=listed)
                    got_first, got = self.collect(env, None, steps, total)
                    np.testing.assert_array_equal(got_first, first_l)
                    self.assert_same(got, want_l, f"{mode} after async_reset(seed=[...])")
        self.assertEqual(node.stop(), 0)

    def test_autoreset_disabled(self):
        """DISABLED under send()/recv(): the step that ends an episode gives
        its last observation (the same-step run's final_obs) and the env
        waits: send() refuses it by name until reset(options={"reset_mask":
        ...}) hands out its next episode's first observation (the same-step
        run's), from where it steps on as the same-step run's env."""
        n, steps = 4, 80
        same = []
        with rc.VecEnv(self.launch(num_envs=n, seed=7).address, timeout=GUARD, batch_size=n,
                       autoreset_mode="same_step", **self.client_args) as env:
            env.async_reset()
            obs, _, _, _, infos = env.recv()
            for _ in range(steps):
                order = np.argsort(infos["env_id"])
                env.send(self.chaotic(obs), infos["env_id"])
                obs, rew, term, trunc, infos = env.recv()
                order = np.argsort(infos["env_id"])
                same.append((obs[order].copy(), infos["final_obs"][order].copy(), rew[order],
                             term[order], trunc[order]))
        with rc.VecEnv(self.launch(num_envs=n, seed=7).address, timeout=GUARD, batch_size=n,
                       autoreset_mode="disabled", **self.client_args) as env:
            env.async_reset()
            obs, _, _, _, infos = env.recv()
            resets = 0
            for t in range(steps):
                env.send(self.chaotic(obs), infos["env_id"])
                obs, rew, term, trunc, infos = env.recv()
                self.assertNotIn("final_obs", infos)
                order = np.argsort(infos["env_id"])
                s_obs, s_final, s_rew, s_term, s_trunc = same[t]
                done = (term | trunc)[order]
                np.testing.assert_array_equal(rew[order], s_rew, err_msg=f"step {t}")
                np.testing.assert_array_equal(term[order], s_term, err_msg=f"step {t}")
                np.testing.assert_array_equal(trunc[order], s_trunc, err_msg=f"step {t}")
                np.testing.assert_array_equal(obs[order], np.where(done[:, None], s_final, s_obs),
                                              err_msg=f"step {t}")
                if done.any():
                    with self.assertRaisesRegex(ValueError, "ended its episode and was not reset"):
                        env.send(self.chaotic(obs), infos["env_id"])
                    first, _ = env.reset(options={"reset_mask": done})
                    np.testing.assert_array_equal(first[done], s_obs[done], err_msg=f"step {t}")
                    obs[order[done]] = first[done]  # (env k is row order[k])
                    resets += 1
            self.assertGreater(resets, 3)

    def sync_trajectories(self, addresses, steps):
        """Each env's first `steps` transitions under step() and balance."""
        with rc.VecEnv(addresses, timeout=GUARD, autoreset_mode="same_step",
                       **self.client_args) as env:
            obs, _ = env.reset()
            out = []
            for _ in range(steps):
                obs, rew, term, trunc, _ = env.step(balance(obs))
                out.append((obs.copy(), rew.copy(), term.copy(), trunc.copy()))
        n = len(out[0][0])
        return [[(o[k], r[k], te[k], tr[k]) for o, r, te, tr in out] for k in range(n)]

    def async_trajectories(self, addresses, steps, batch_size, start):
        """The same under send/recv: start "async_reset" (first observations
        through recv) or "reset" (reset() then send for all envs)."""
        got = None
        with rc.VecEnv(addresses, timeout=GUARD, batch_size=batch_size,
                       autoreset_mode="same_step", **self.client_args) as env:
            n = env.num_envs
            got = [[] for _ in range(n)]
            if start == "reset":
                obs, _ = env.reset()
                env.send(balance(obs), np.arange(n))
            else:
                env.async_reset()
            while min(len(g) for g in got) < steps:
                obs, rew, term, trunc, infos = env.recv()
                self.check_lane(env)
                ids = infos["env_id"]
                self.assertEqual(len(ids), batch_size)
                for j, k in enumerate(ids.tolist()):
                    if infos["step"][j] != 0:  # a first observation is no transition
                        got[k].append((obs[j].copy(), rew[j], term[j], trunc[j]))
                env.send(balance(obs), ids)
            self.assertGreater(env.total_steps, 0)
        return [g[:steps] for g in got]

    def test_every_env_follows_its_synchronous_trajectory(self):
        """Two nodes (frames of 8 envs, the node's default batch) with batch
        sizes that split frames (3, 5), equal one (8) and span nodes (32);
        and one node (the lane's case, over shared memory): every env's
        transitions equal what step() gives with the same seed."""
        steps = 60
        want = self.sync_trajectories([self.launch().address, self.launch(seed=12).address],
                                      steps)
        for batch_size, start, nodes in ((3, "async_reset", 2), (5, "reset", 2),
                                         (8, "async_reset", 2), (32, "reset", 2),
                                         (3, "async_reset", 1), (5, "reset", 1),
                                         (16, "async_reset", 1)):
            with self.subTest(batch_size=batch_size, start=start, nodes=nodes):
                addresses = [self.launch().address]
                if nodes == 2:
                    addresses.append(self.launch(seed=12).address)
                got = self.async_trajectories(addresses, steps, batch_size, start)
                if nodes == 1:
                    want1, got = want[:16], got[:16]
                else:
                    want1 = want
                self.assertEqual(len(got), len(want1))
                for k, (w, g) in enumerate(zip(want1, got)):
                    for t, (x, y) in enumerate(zip(w, g)):
                        np.testing.assert_array_equal(x[0], y[0], err_msg=f"env {k} step {t} obs")
                        self.assertEqual((x[1], x[2], x[3]), (y[1], y[2], y[3]),
                                         f"env {k} step {t}")

    def test_box_actions(self):
        """Pendulum: box actions of shape [k, 1] reach their envs; episodes
        of 200 steps end truncated with a final observation."""
        node = self.launch(env="pendulum", num_envs=4, seed=2)
        with rc.VecEnv(node.address, timeout=GUARD, batch_size=3, autoreset_mode="same_step",
                       **self.client_args) as env:
            env.async_reset()
            finals = 0
            while len(env.episode_lengths) < 4:
                obs, rew, term, trunc, infos = env.recv()
                self.check_lane(env)
                self.assertEqual(obs.shape, (3, 3))
                finals += int(infos["_final_obs"].sum())
                self.assertTrue(np.isfinite(infos["final_obs"][infos["_final_obs"]]).all())
                self.assertTrue(np.isnan(infos["final_obs"][~infos["_final_obs"]]).all())
                env.send(np.zeros((3, 1), np.float32), infos["env_id"])
            # Every episode that ended came with its final observation; the
            # last recv may end more than one (which envs a batch of 3 of 4
            # takes depends on the order the node answers in).
            self.assertEqual(env.episode_lengths, [200] * len(env.episode_lengths))
            self.assertEqual(finals, len(env.episode_lengths))

    def test_misuse_fails_at_once_and_leaves_it_usable(self):
        node = self.launch(num_envs=8, extra=["--workers", 1, "--shard", 4, "--batch", 4])
        env = rc.VecEnv(node.address, timeout=GUARD, batch_size=8, **self.client_args)
        self.addCleanup(env.close)
        with self.assertRaisesRegex(RuntimeError, "async_reset"):
            env.recv()
        env.async_reset()
        env.send(np.zeros(0, np.int64), np.zeros(0, np.int64))  # an empty batch: nothing to do
        obs, _, _, _, infos = env.recv()
        self.check_lane(env)
        ids = infos["env_id"]
        self.assertEqual(sorted(ids.tolist()), list(range(8)))
        with self.assertRaisesRegex(RuntimeError, "8 env\\(s\\) returned by recv\\(\\) have no action"):
            env.recv()  # everything is handed out: nothing can come
        with self.assertRaisesRegex(RuntimeError, "asynchronous now"):
            env.step(np.zeros(8, np.int64))
        with self.assertRaisesRegex(ValueError, "given twice"):
            env.send(np.zeros(2, np.int64), [ids[0], ids[0]])
        with self.assertRaisesRegex(ValueError, "not an env id"):
            env.send(np.zeros(1, np.int64), [8])
        with self.assertRaisesRegex(ValueError, "must lie in"):
            env.send(np.full(8, 2, np.int64), ids)
        # One env of a frame of several (the node batches 4 envs a frame;
        # which envs share a frame is read from the VecEnv): its frame is
        # held, nothing sent.
        frame = env._frame_of[ids] == env._frame_of[ids[0]]
        self.assertGreaterEqual(int(frame.sum()), 2)
        env.send(balance(obs[:1]), ids[:1])
        with self.assertRaisesRegex(ValueError, "answered already"):
            env.send(np.zeros(1, np.int64), ids[:1])
        with self.assertRaisesRegex(RuntimeError, "7 env\\(s\\) returned .* and 1 answered env\\(s\\) wait"):
            env.recv()
        env.send(balance(obs[1:]), ids[1:])  # every frame is whole: in flight
        with self.assertRaisesRegex(ValueError, "stepping at its node"):
            env.send(np.zeros(1, np.int64), ids[:1])
        obs2, rew, term, trunc, infos = env.recv()  # still usable
        self.assertEqual(sorted(infos["env_id"].tolist()), list(range(8)))
        self.assertTrue((infos["step"] == 1).all())
        self.assertTrue((rew == 1.0).all())
        env.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            env.recv()
        self.assertEqual(node.stop(), 0)

    def test_a_node_that_stops_ends_it_cleanly(self):
        """The node stops (SIGINT: it says goodbye) while this VecEnv's
        envs are in flight and handed out: recv() raises ConnectionClosed
        with clean set, and so does every call after it."""
        node = self.launch(num_envs=8, extra=["--batch", 8])
        env = rc.VecEnv(node.address, timeout=GUARD, batch_size=4, **self.client_args)
        self.addCleanup(env.close)
        env.async_reset()
        obs, _, _, _, infos = env.recv()
        self.check_lane(env)
        env.send(balance(obs), infos["env_id"])
        self.assertEqual(node.stop(), 0)
        for _ in range(2):
            with self.assertRaises(rc.ConnectionClosed) as got:
                while True:  # the envs that were in flight may still come first
                    obs, _, _, _, infos = env.recv()
                    env.send(balance(obs), infos["env_id"])
            self.assertTrue(got.exception.clean, str(got.exception))

    def test_sync_after_async_refused_and_the_reverse(self):
        node = self.launch(num_envs=4)
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step",
                       **self.client_args) as env:
            obs, _ = env.reset()
            env.step(balance(obs))
            with self.assertRaisesRegex(RuntimeError, "synchronous now"):
                env.recv()
            with self.assertRaisesRegex(RuntimeError, "synchronous now"):
                env.send(np.zeros(4, np.int64), np.arange(4))
        with self.assertRaisesRegex(ValueError, "batch_size"):
            rc.VecEnv(self.launch(num_envs=4).address, timeout=GUARD, batch_size=5,
                      **self.client_args)


class AsyncLane(Async):
    """The same over a Unix-domain socket with the node's shared memory: a
    one-node VecEnv takes the lane (lane.c), two nodes stay in Python."""

    lane = True
    client_args: "dict[str, bool]" = {}

    @classmethod
    def setUpClass(cls):
        cls.sockdir = tempfile.mkdtemp(prefix="vecenv_async.")
        cls.count = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.sockdir, ignore_errors=True)

    def listen(self):
        type(self).count += 1
        return {"listen": f"unix:{self.sockdir}/node{self.count}.sock"}


if __name__ == "__main__":
    unittest.main(verbosity=2)
