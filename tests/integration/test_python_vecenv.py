"""The remote VecEnv through the Gymnasium vector-env checklist (issue 16),
with the real gymnasium (the package depends on it): a rejected action
leaves it usable; observation dtypes; host names and [IPv6] addresses;
launch_node.

Run as: test_python_vecenv.py ROLLOUT_NODE BUILD_DIR. Every wait is for an
observation, a frame or an exit, with GUARD as the only clock.
"""
import os
import socket
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE, BUILD = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import nodeutil as nu  # noqa: E402  (processes killed at exit and on SIGTERM)

import rollout_client as rc  # noqa: E402
from rollout_client.testing import FakeNode  # noqa: E402

GUARD = nu.HANG_GUARD_S  # only a lost event takes this long


def balance(obs):
    """A CartPole controller that balances only if every env gets its own
    action."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def ipv6_loopback():
    try:
        with socket.create_server(("::1", 0), family=socket.AF_INET6):
            return True
    except OSError:
        return False


class Checklist:
    """The Gymnasium vector-env checklist, for any VecEnv of CartPole-like
    (discrete) or Pendulum-like (box) envs."""

    def check_paths(self, env):
        import gymnasium
        self.assertIsInstance(env, gymnasium.vector.VectorEnv)
        self.assertIsInstance(env.single_observation_space, gymnasium.spaces.Box)
        self.assertIsInstance(env.observation_space, gymnasium.spaces.Box)
        self.assertIs(env.metadata["autoreset_mode"], gymnasium.vector.AutoresetMode.SAME_STEP)
        self.assertEqual(env.metadata["autoreset_mode"].value, "SameStep")

    def check_spaces(self, env, obs_shape, obs_dtype=np.float32):
        n = env.num_envs
        self.assertIsInstance(n, int)
        so, sa = env.single_observation_space, env.single_action_space
        self.assertEqual(so.shape, obs_shape)
        self.assertEqual(so.dtype, np.dtype(obs_dtype))
        self.assertEqual(env.observation_space.shape, (n,) + obs_shape)
        self.assertEqual(env.observation_space.dtype, np.dtype(obs_dtype))
        self.assertEqual(so.low.shape, obs_shape)
        self.assertEqual(so.high.shape, obs_shape)
        if env.action_kind == "discrete":
            self.assertEqual(int(sa.n), env.action_n)
            self.assertEqual(env.action_space.shape, (n,))
            self.assertTrue(np.all(env.action_space.nvec == env.action_n))
            self.assertTrue(sa.contains(sa.sample()))
            self.assertFalse(sa.contains(np.int64(env.action_n)))
            self.assertFalse(env.action_space.contains(np.full(n, env.action_n)))
        else:
            self.assertEqual(sa.shape, env.action_shape)
            self.assertEqual(sa.dtype, np.float32)
            self.assertEqual(env.action_space.shape, (n,) + env.action_shape)
            self.assertTrue(np.all(sa.low < sa.high))
            self.assertFalse(sa.contains(sa.high + 1))
        for _ in range(5):
            a = env.action_space.sample()
            self.assertTrue(env.action_space.contains(a), a)
            self.assertTrue(a in env.action_space)

    def check_reset(self, env, seed, wrong_seed):
        with self.assertRaises(RuntimeError):
            env.step(env.action_space.sample())  # before reset
        with self.assertRaises(ValueError) as cm:
            env.reset(options={"reset_mask": np.ones(env.num_envs, bool)})
        self.assertIn("no reset options", str(cm.exception))
        for bad in (-1, 1.5, True, 1 << 64):
            with self.assertRaises(ValueError) as cm:
                env.reset(seed=bad)
            self.assertIn("a seed is an int", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            env.reset(seed=[seed] * (env.num_envs + 1))
        self.assertIn("one int (or None) per env", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            env.reset(seed=[seed] * (env.num_envs - 1) + [-1])
        self.assertIn("a seed is an int", str(cm.exception))
        obs, infos = env.reset(seed=seed)  # the nodes' seed, envs fresh: honoured as they are
        self.assertIsInstance(infos, dict)
        self.assertEqual(obs.shape, env.observation_space.shape)
        self.assertEqual(obs.dtype, env.observation_space.dtype)
        self.assertTrue(env.observation_space.contains(obs), obs)
        self.assertTrue((infos["step"] == 0).all())
        self.assertTrue(infos["episode_start"].all())
        # Any number of times, as Gymnasium's: each later one is a Reseed.
        for again in (wrong_seed, None, seed):
            obs, infos = env.reset(seed=again)
            self.assertTrue(env.observation_space.contains(obs), obs)
            self.assertTrue(infos["episode_start"].all())
            self.assertTrue(infos["is_first"].all())
        return obs

    def check_steps(self, env, policy, obs, steps):
        n = env.num_envs
        ended = final_seen = 0
        for _ in range(steps):
            out = env.step(policy(obs))
            self.assertEqual(len(out), 5)
            obs, rew, term, trunc, infos = out
            self.assertEqual(obs.shape, env.observation_space.shape)
            self.assertTrue(env.observation_space.contains(obs), obs)
            for a in (rew, term, trunc):
                self.assertEqual(a.shape, (n,))
            self.assertEqual(term.dtype, bool)
            self.assertEqual(trunc.dtype, bool)
            self.assertTrue(np.isfinite(rew).all())
            done = term | trunc
            self.assertEqual(infos["final_obs"].shape, env.observation_space.shape)
            self.assertTrue((infos["_final_obs"] == done).all())  # every end sends final_obs
            self.assertTrue(infos["episode_start"][done].all())
            self.assertTrue((infos["_rollout_episode"] == done).all())
            self.assertTrue(np.isfinite(infos["rollout_episode"]["r"][done]).all())
            self.assertTrue((infos["rollout_episode"]["l"][done] > 0).all())
            if done.any():
                fin = infos["final_obs"][done]
                self.assertTrue(env.single_observation_space.contains(fin[0]), fin[0])
                final_seen += int(done.sum())
            ended += int(done.sum())
        return ended, final_seen

    def check_close(self, env):
        env.close()
        self.assertTrue(env.closed)
        env.close()  # twice is fine
        with self.assertRaises(RuntimeError):
            env.step(env.action_space.sample())


class WithFakeNode(Checklist, unittest.TestCase):
    def test_gymnasium_checklist(self):
        with FakeNode(num_envs=5, groups=2, seed=1, max_episode_steps=60) as n0, \
                FakeNode(num_envs=3, groups=2, seed=2, max_episode_steps=60) as n1:
            env = rc.VecEnv([n0.address, n1.address], timeout=GUARD, autoreset_mode="same_step")
            with env:
                self.assertEqual(env.num_envs, 8)
                self.check_paths(env)
                self.check_spaces(env, (4,))
                obs = self.check_reset(env, seed=7, wrong_seed=8)
                ended, final_seen = self.check_steps(env, balance, obs, 130)
                self.assertGreaterEqual(ended, 16)  # 60-step episodes: two each
                self.assertEqual(final_seen, ended)
            self.assertTrue(env.closed)  # the context manager closed it
            self.check_close(env)
            nu.wait_for(lambda: n0.goodbyes and n1.goodbyes, "a goodbye at both fake nodes")

    def test_record_episode_statistics_wraps_it(self):
        """Gymnasium's RecordEpisodeStatistics over the remote VecEnv: its
        episode key is its own (the VecEnv's figures are rollout_episode),
        and the two agree on every episode."""
        import gymnasium
        with FakeNode(num_envs=4, groups=2, seed=5, max_episode_steps=30) as node:
            env = gymnasium.wrappers.vector.RecordEpisodeStatistics(
                rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step"))
            obs, _ = env.reset()
            seen = 0
            for _ in range(100):
                obs, rew, term, trunc, infos = env.step(balance(obs))
                if "_rollout_episode" in infos and infos["_rollout_episode"].any():
                    m = infos["_rollout_episode"]
                    np.testing.assert_array_equal(infos["_episode"], m)
                    np.testing.assert_allclose(infos["episode"]["r"][m],
                                               infos["rollout_episode"]["r"][m], rtol=1e-5)
                    np.testing.assert_array_equal(infos["episode"]["l"][m],
                                                  infos["rollout_episode"]["l"][m])
                    seen += int(m.sum())
            self.assertGreater(seen, 4)
            env.close()

    def test_is_first_marks_episode_starts(self):
        """infos["is_first"] (issue 34): every row at reset, then exactly the
        episode starts while this VecEnv sees every step; recv() too."""
        with FakeNode(num_envs=4, groups=2, seed=6, max_episode_steps=20) as node:
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                obs, infos = env.reset()
                self.assertTrue(infos["is_first"].all())
                starts = 0
                for _ in range(60):
                    obs, rew, term, trunc, infos = env.step(balance(obs))
                    np.testing.assert_array_equal(infos["is_first"], infos["episode_start"])
                    starts += int(infos["is_first"].sum())
                self.assertGreater(starts, 4)
        with FakeNode(num_envs=4, groups=2, seed=6, max_episode_steps=20) as node:
            with rc.VecEnv(node.address, timeout=GUARD, batch_size=2) as env:
                env.async_reset()
                seen = set()
                for _ in range(40):
                    obs, rew, term, trunc, infos = env.recv()
                    for k, i in enumerate(infos["env_id"]):
                        first_time = int(i) not in seen
                        seen.add(int(i))
                        self.assertEqual(bool(infos["is_first"][k]),
                                         first_time or bool(infos["episode_start"][k]))
                    env.send(balance(obs), infos["env_id"])

    def test_rejected_action_leaves_vecenv_usable(self):
        with FakeNode(num_envs=6, groups=3, seed=3) as node:
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                obs, _ = env.reset()
                obs, *_ = env.step(balance(obs))
                bad = balance(obs)
                bad[4] = 2  # out of range
                for actions, needle in ((bad, "action 2 for env 4"),
                                        (np.zeros(5, np.int64), "shape (6,)"),
                                        (np.zeros(6, np.float32), "integers")):
                    with self.assertRaises(ValueError) as cm:
                        env.step(actions)
                    self.assertIn(needle, str(cm.exception))
                answered = len(node.actions)
                # Still usable: every env steps on, none waits forever.
                for _ in range(600):
                    obs, rew, term, trunc, _ = env.step(balance(obs))
                self.assertEqual(set(env.episode_returns), {500.0})
                self.assertGreaterEqual(len(env.episode_returns), 6)
            self.assertGreater(len(node.actions), answered)
            sent = np.concatenate([a for _, a in node.actions])
            self.assertTrue(((sent == 0) | (sent == 1)).all(), "a refused action reached the node")
            self.assertEqual(node.errors_sent, [])

    def test_integer_observations(self):
        with FakeNode(num_envs=4, groups=2, obs_dtype="int16", max_episode_steps=20) as node:
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                self.check_spaces(env, (4,), np.int16)
                self.assertEqual(env.single_observation_space.low.tolist(), [-32768] * 4)
                obs, _ = env.reset()
                self.assertEqual(obs.dtype, np.int16)
                self.assertTrue(env.observation_space.contains(obs))
                before = node.envs.state.copy()
                np.testing.assert_array_equal(obs, np.round(before * 100).astype(np.int16))
                for _ in range(25):
                    obs, rew, term, trunc, infos = env.step(np.ones(4, np.int64))
                    self.assertEqual(obs.dtype, np.int16)
                    self.assertEqual(infos["final_obs"].dtype, np.int16)
                self.assertGreaterEqual(len(env.episode_returns), 4)  # 20 steps at most

    def test_host_names_and_ipv6(self):
        with FakeNode(num_envs=2, groups=1) as node:
            port = node.address.rsplit(":", 1)[1]
            with rc.VecEnv(f"localhost:{port}", timeout=GUARD, autoreset_mode="same_step") as env:
                env.reset()
                env.step(np.zeros(2, np.int64))
        if not ipv6_loopback():
            self.skipTest("no IPv6 loopback here")
        with FakeNode(num_envs=2, groups=1, host="::1") as node:
            self.assertTrue(node.address.startswith("[::1]:"))
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                env.reset()
                env.step(np.zeros(2, np.int64))

    def test_address_errors(self):
        for bad, needle in (("::1:5555", "brackets"), ("[::1]5555", "host:port"),
                            ("localhost:0", "port 1 to 65535"), ("h:70000", "port 1 to 65535"),
                            ("[localhost]:5555", "only IPv6"), ("5555", "host:port")):
            with self.assertRaises(ValueError) as cm:
                rc.parse_address(bad)
            self.assertIn(needle, str(cm.exception), bad)
        self.assertEqual(rc.parse_address("[::1]:5555"), ("::1", 5555))
        self.assertEqual(rc.parse_address("unix:/run/n.sock"), ("/run/n.sock", None))
        for bad in ("unix:", "unix:" + "x" * 108):
            with self.assertRaises(ValueError) as cm:
                rc.parse_address(bad)
            self.assertIn("unix:PATH", str(cm.exception))
        self.assertEqual(rc.parse_address("node-3.cluster:5555"), ("node-3.cluster", 5555))


class WithRealNode(Checklist, nu.TempDirCase):
    def launch(self, env="cartpole", num_envs=8, **kw):
        node = rc.launch_node(env=env, num_envs=num_envs, node=NODE, **kw)
        self.addCleanup(node.stop)
        return node

    def sock(self, name):
        return self.path(name + ".sock")

    def test_checklist_cartpole(self):
        node = self.launch(num_envs=8, seed=5)
        env = rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step")
        with env:
            self.check_paths(env)
            self.check_spaces(env, (4,))
            obs = self.check_reset(env, seed=5, wrong_seed=6)
            ended, _ = self.check_steps(env, lambda o: env.action_space.sample(), obs, 300)
            self.assertGreater(ended, 8)  # random play: short episodes
        self.check_close(env)
        self.assertEqual(node.stop(), 0)
        self.assertEqual(node.summary()["learners_rejected"], 0)

    def test_returned_arrays_are_the_callers(self):
        """What step() returns is never written again by the VecEnv (the
        receive buffer behind it is reused every step), and writing into it
        changes nothing the VecEnv returns later: 256 envs, several frames
        per step, 50 steps kept and compared with copies taken at once."""
        node = self.launch(num_envs=256, seed=3)
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            obs, _ = env.reset()
            kept, copies = [], []
            for _ in range(50):
                out = env.step(env.action_space.sample())
                arrays = list(out[:4]) + [out[4]["final_obs"], out[4]["_final_obs"],
                                          out[4]["step"], out[4]["episode_start"]]
                kept.append(arrays)
                copies.append([a.copy() for a in arrays])
            for step, (a, c) in enumerate(zip(kept, copies)):
                for x, y in zip(a, c):
                    np.testing.assert_array_equal(x, y, err_msg=f"step {step}")
            steps = kept[-1][6].copy()
            for x in kept[-1]:  # the caller scribbles over the last step's arrays
                x[...] = 0
            out = env.step(env.action_space.sample())
            np.testing.assert_array_equal(out[4]["step"], steps + 1)  # the node's count
            self.assertTrue(np.isfinite(out[0]).all())

    def test_checklist_pendulum_box_actions(self):
        node = self.launch(env="pendulum", num_envs=4, seed=2)
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            self.check_paths(env)
            self.check_spaces(env, (3,))
            self.assertEqual(env.single_action_space.low.tolist(), [-2.0])
            self.assertEqual(env.single_action_space.high.tolist(), [2.0])
            obs = self.check_reset(env, seed=2, wrong_seed=3)
            ended, final_seen = self.check_steps(env, lambda o: env.action_space.sample(),
                                                 obs, 205)
            self.assertEqual(ended, 4)  # 200-step episodes, truncated
            self.assertEqual(final_seen, 4)
        self.assertEqual(node.stop(), 0)

    def test_seed_is_honoured(self):
        """reset(seed=S) on a node run with seed S gives that seed's
        episodes: two nodes, same seed, same first observations and the same
        transitions for the same actions; another seed, other ones."""
        runs = []
        for seed in (11, 11, 12):
            node = self.launch(num_envs=4, seed=seed)
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                obs, _ = env.reset(seed=seed)
                trace = [obs]
                for _ in range(30):
                    obs, *_ = env.step(balance(obs))
                    trace.append(obs)
            runs.append(np.stack(trace))
            node.stop()
        np.testing.assert_array_equal(runs[0], runs[1])
        self.assertFalse(np.array_equal(runs[0][0], runs[2][0]))

    def trace(self, env, obs, steps=40):
        """obs, then the observations and rewards of `steps` balancing steps."""
        out = [obs.copy()]
        for _ in range(steps):
            obs, rew, *_ = env.step(balance(obs))
            out += [obs.copy(), rew[:, None].astype(obs.dtype)]
        return np.concatenate(out, axis=1)

    def test_reseed_at_will(self):
        """reset(seed=S) any number of times (issue 29): the episodes are
        those of a fresh node run with --seed S, after the envs stepped,
        again and again; reset() without a seed starts new episodes with
        the envs' streams going on (other ones); the same as make_vec's in
        this process (env i seeded from (S, i) by both)."""
        fresh = self.launch(num_envs=6, seed=31, workers=2, listen="unix:" + self.sock("f"))
        with rc.VecEnv(fresh.address, timeout=GUARD, autoreset_mode="same_step") as env:
            want = self.trace(env, env.reset(seed=31)[0])
        node = self.launch(num_envs=6, seed=4, workers=2, listen="unix:" + self.sock("n"))
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            obs, _ = env.reset()
            self.trace(env, obs, 25)
            for _ in range(2):  # after steps, and twice in a row
                obs, infos = env.reset(seed=31)
                self.assertTrue(infos["episode_start"].all())
                np.testing.assert_array_equal(self.trace(env, obs), want)
            obs, infos = env.reset()
            self.assertTrue(infos["episode_start"].all())
            self.assertFalse(np.array_equal(obs, want[:, :4]))
        local = rc.make_vec("CartPole-v1", num_envs=6, autoreset_mode="same_step")
        try:
            np.testing.assert_array_equal(self.trace(local, local.reset(seed=31)[0]), want)
        finally:
            local.close()
        self.assertEqual(node.stop(), 0)
        self.assertEqual(node.summary()["learners_rejected"], 0)

    def test_next_step_with_gymnasium_wrappers(self):
        """autoreset_mode="next_step", the default as Gymnasium's (issue 29):
        Gymnasium's own wrappers over the remote VecEnv, unchanged, give
        the very transitions and infos of the same wrappers over make_vec's
        in-process engine, step for step, over many episode ends: the
        node holds each ended env for its reset step (Actions.hold)."""
        import gymnasium
        from gymnasium.wrappers import vector as wv

        def wrap(env, box):
            env = wv.RecordEpisodeStatistics(env)
            env = wv.NormalizeObservation(env)
            env = wv.NormalizeReward(env)
            env = wv.TransformObservation(env, lambda o: o * 2.0, env.observation_space)
            if box:
                env = wv.ClipAction(env)
            return wv.DictInfoToList(env)

        for name, gym_id, box in (("cartpole", "CartPole-v1", False),
                                  ("pendulum", "Pendulum-v1", True)):
            with self.subTest(name):
                node = self.launch(env=name, num_envs=6, seed=8, workers=2,
                                   listen="unix:" + self.sock(name))
                remote = rc.VecEnv(node.address, timeout=GUARD)  # the default: NEXT_STEP
                self.assertIs(remote.metadata["autoreset_mode"],
                              gymnasium.vector.AutoresetMode.NEXT_STEP)
                with rc.VecEnv(node.address, timeout=GUARD, batch_size=3) as asynchronous:
                    self.assertIs(asynchronous.metadata["autoreset_mode"],  # send()/recv()
                                  gymnasium.vector.AutoresetMode.NEXT_STEP)
                a, b = wrap(remote, box), wrap(rc.make_vec(gym_id, num_envs=6), box)
                try:
                    oa, _ = a.reset(seed=5)
                    ob, _ = b.reset(seed=5)
                    np.testing.assert_array_equal(oa, ob)
                    remote.action_space.seed(3)
                    ended = resets = 0
                    done = np.zeros(6, bool)
                    for t in range(420):
                        act = remote.action_space.sample() * (2.5 if box else 1)  # clipped
                        ra, rb = a.step(act), b.step(act)
                        resets += int(done.sum())  # this step was those envs' reset
                        done = ra[2] | ra[3]
                        for k in range(4):
                            np.testing.assert_array_equal(ra[k], rb[k], err_msg=f"step {t}")
                        ea = [i.get("episode") for i in ra[4]]
                        eb = [i.get("episode") for i in rb[4]]
                        for x, y in zip(ea, eb):
                            self.assertEqual(x is None, y is None, f"step {t}")
                            if x is not None:  # RecordEpisodeStatistics' own key
                                self.assertEqual((x["r"], x["l"]), (y["r"], y["l"]))
                                ended += 1
                    self.assertGreater(ended, 6)
                    self.assertIsNotNone(remote._lane)  # its holds went in the lane's answers
                    self.assertEqual(remote.total_steps, 420 * 6 - resets)  # resets: no steps
                finally:
                    a.close()
                    b.close()

    def test_close_unmaps_the_memories(self):
        """close() unmaps the node's memories at once (issue 29: not at
        garbage collection): /proc/self/maps holds no memfd of the node
        after it, the VecEnv still referenced; lane or not, env ABI 1 or 2."""
        def memfds():
            with open("/proc/self/maps") as f:
                return sum("memfd:rollout-seed" in line for line in f)
        catch = os.path.join(BUILD, "examples", "libro_env_catch.so")
        for k, (env_name, mode) in enumerate((("cartpole", "same_step"),
                                              ("cartpole", "next_step"), (catch, "same_step"))):
            with self.subTest(env=os.path.basename(env_name), mode=mode):
                node = self.launch(env=env_name, num_envs=4, seed=1,
                                   listen="unix:" + self.sock(f"m{k}"))
                self.assertEqual(memfds(), 0)
                env = rc.VecEnv(node.address, timeout=GUARD, autoreset_mode=mode)
                env.reset()
                for _ in range(5):
                    env.step(env.action_space.sample())
                self.assertEqual(memfds(), 2)  # observation and action memory
                env.close()
                self.assertEqual(memfds(), 0)
                self.assertTrue(env.closed)

    def test_hold_outside_the_frame_refused(self):
        """Actions.hold naming an env that is not in the frame answered is
        a protocol error, named."""
        node = self.launch(num_envs=4, seed=1, extra_args=["--batch", 2, "--shard", 2])
        with rc.Client(node.address, connect_timeout=GUARD) as cl:
            b = cl.recv(timeout=GUARD)
            other = sorted(set(range(4)) - set(b.env.tolist()))[0]
            cl._flush(cl._queue_checked(b, np.zeros(len(b), np.int64), [other]))
            with self.assertRaises(rc.RemoteError) as cm:
                while True:
                    cl.recv(timeout=GUARD)
            self.assertIn(f"hold env {other}, which is not in that frame", str(cm.exception))

    def test_reseed_refused_while_shared(self):
        """A node that serves two learners refuses a reseed (one seed, or a
        seed per env) by name (an error frame, EBUSY) and goes on serving
        the other learner."""
        node = self.launch(num_envs=4, seed=1, extra_args=["--batch", 1])
        for seed, env_seeds in ((3, None), (None, [[3, None, 5, 6]])):
            with rc.Client(node.address, connect_timeout=GUARD) as a, \
                    rc.Client(node.address, connect_timeout=GUARD) as b:
                held = None
                while held is None:  # a answers until the node hands b some envs
                    batch = a.recv(timeout=GUARD)
                    a.send_actions(batch, np.zeros(len(batch), np.int64))
                    held = b.recv(timeout=0)
                a._reseed(seed, env_seeds)
                with self.assertRaises(rc.RemoteError) as cm:
                    while True:
                        a.recv(timeout=GUARD)
                self.assertEqual(cm.exception.code, 16)
                self.assertIn("reseed refused: 2 learners share this node's envs",
                              str(cm.exception))
                b.send_actions(held, np.zeros(len(held), np.int64))
                self.assertIsNotNone(b.recv(timeout=GUARD))  # b is served on
        self.assertEqual(node.stop(), 0)

    def test_per_env_seeds(self):
        """reset(seed=[...]), Gymnasium's list (issue 29): env i of the node
        is re-created from (its own seed, i), as make_vec creates env i of
        a list, so every seeded env's transitions are make_vec's; None
        keeps an env's stream (a new episode, not the old one). Seeds that
        are not one per env of the node, and per-env seeds to a node that
        records, are refused by name (error frames 71 and 95)."""
        seeds = [10, None, 12, 1 << 63, None, 15]
        seeded = np.array([s is not None for s in seeds])
        local = rc.make_vec("CartPole-v1", num_envs=6)
        try:
            want = self.trace(local, local.reset(seed=seeds)[0])
        finally:
            local.close()
        node = self.launch(num_envs=6, seed=4, workers=2, listen="unix:" + self.sock("p"))
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            obs, _ = env.reset()
            before = self.trace(env, obs, 5)
            for _ in range(2):  # after steps, and twice in a row
                obs, infos = env.reset(seed=seeds)
                self.assertTrue(infos["episode_start"].all())
                got = self.trace(env, obs)
                np.testing.assert_array_equal(got[seeded], want[seeded])
                self.assertFalse(np.array_equal(got[~seeded, :4], before[~seeded, :4]))
        with rc.Client(node.address, connect_timeout=GUARD) as cl:
            cl.recv(timeout=GUARD)
            cl._reseed(None, [[1, 2]])
            with self.assertRaises(rc.RemoteError) as cm:
                while True:
                    cl.recv(timeout=GUARD)
            self.assertEqual(cm.exception.code, 71)
            self.assertIn("per-env seeds are one per env of the node (2 seeds, 6 envs)",
                          str(cm.exception))
        self.assertEqual(node.stop(), 0)
        traj = os.path.join(self.tmp, "per_env.traj")
        node = self.launch(num_envs=4, seed=4, extra_args=["--record", traj])
        with rc.VecEnv(node.address, timeout=GUARD) as env:
            env.reset()
            with self.assertRaises(rc.RemoteError) as cm:
                env.reset(seed=[1, 2, 3, 4])
            self.assertEqual(cm.exception.code, 95)
            self.assertIn("this node records (--record)", str(cm.exception))
        self.assertEqual(node.stop(), 0)

    def test_recording_spans_reseeds(self):
        """rollout-node --record over reseeds (with and without a seed),
        env ABI 1 and 2, same-step and next-step (held envs: no entry):
        rollout-replay --verify replays it bit for bit, re-creating the
        reseeded envs from the recorded seed."""
        catch = os.path.join(BUILD, "examples", "libro_env_catch.so")
        for env_name, plugin, mode in (("cartpole", None, "same_step"),
                                       ("pendulum", None, "same_step"),
                                       ("catch", catch, "same_step"),
                                       ("cartpole_next", "cartpole", "next_step"),
                                       ("catch_next", catch, "next_step")):
            with self.subTest(env_name):
                traj = os.path.join(self.tmp, env_name + ".traj")
                node = self.launch(env=plugin or env_name, num_envs=5, seed=2, workers=2,
                                   listen="unix:" + self.sock(env_name),
                                   extra_args=["--record", traj])
                with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode=mode) as env:
                    env.action_space.seed(0)
                    env.reset()
                    for seed in (9, None, 9, 1 << 63):
                        for _ in range(23):
                            env.step(env.action_space.sample())
                        env.reset(seed=seed)
                    env.step(env.action_space.sample())
                self.assertEqual(node.stop(), 0)
                plugin = plugin if plugin and plugin.endswith(".so") else None
                cmd = [os.path.join(BUILD, "rollout-replay"), "--verify"]
                cmd += ["--plugin", plugin] if plugin else []
                p = nu.run_cmd(cmd + [traj], timeout=GUARD, capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("replayed bit for bit", p.stderr)
                self.assertIn("0 env(s) not verified to the end", p.stderr)
                dump = nu.run_cmd([os.path.join(BUILD, "rollout-replay"), "--dump"]
                                  + (["--plugin", plugin] if plugin else []) + [traj],
                                  timeout=GUARD, capture_output=True, text=True)
                resets = dump.stdout.count('"reset":true')
                self.assertGreaterEqual(resets, 5 * 5)  # the start and four reseeds at least

    def test_rejected_actions_leave_vecenv_usable(self):
        node = self.launch(num_envs=8)
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            obs, _ = env.reset()
            bad = balance(obs)
            bad[3] = -1
            with self.assertRaises(ValueError) as cm:
                env.step(bad)
            self.assertIn("action -1 for env 3", str(cm.exception))
            for _ in range(1100):
                obs, *_ = env.step(balance(obs))
            self.assertGreaterEqual(len(env.episode_returns), 8)
            self.assertGreater(np.mean(env.episode_returns), 400)
        node2 = self.launch(env="pendulum", num_envs=4)
        with rc.VecEnv(node2.address, timeout=GUARD, autoreset_mode="same_step") as env:
            env.reset()
            nan = np.zeros((4, 1), np.float32)
            nan[2, 0] = np.nan
            with self.assertRaises(ValueError) as cm:
                env.step(nan)
            self.assertIn("env 2", str(cm.exception))
            for _ in range(205):
                env.step(np.zeros((4, 1), np.float32))
            self.assertEqual(len(env.episode_returns), 4)
        for n in (node, node2):
            self.assertEqual(n.stop(), 0)
            self.assertEqual(n.summary()["learners_rejected"], 0)

    def test_vecenv_over_a_unix_socket(self):
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        node = self.launch(num_envs=2, listen=f"unix:{d}/node.sock")
        self.assertEqual(node.address, f"unix:{d}/node.sock")
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            env.reset(seed=None)
            obs, *_ = env.step(np.zeros(2, np.int64))
            self.assertEqual(obs.shape, (2, 4))
        self.assertEqual(node.stop(), 0)

    def test_shared_memory_equals_the_socket(self):
        """Over unix:PATH a VecEnv (and a Client) reads the observations in
        the node's memory and writes its actions into memory the node reads
        (docs/protocol.md "Observations in shared memory"). With the same
        seed and actions, every array step() returns is the same as with the
        columns in the frames (shared_memory=False), frames of several
        shards (4 of 16 envs per frame) and episode ends included, and so
        are the episode figures. In memory, step() runs on the lane
        (vecenv_lane.py), one C call each way; otherwise on Python."""
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        traces = []
        for shm in (True, False):
            node = self.launch(num_envs=64, seed=9, listen=f"unix:{d}/node.sock",
                               extra_args=["--shard", "16", "--batch", "32"])
            with rc.VecEnv(node.address, timeout=GUARD, shared_memory=shm,
                           autoreset_mode="same_step") as env:
                self.assertEqual(env.client._conns[0].mem is not None, shm)
                obs, _ = env.reset(seed=9)
                trace = [obs]
                rng = np.random.default_rng(0)
                for _ in range(120):
                    obs, rew, term, trunc, info = env.step(rng.integers(0, 2, 64))
                    trace += [obs, rew, term, trunc, info["final_obs"], info["_final_obs"],
                              info["step"], info["episode_start"], info["_rollout_episode"],
                              info["episode_return"], info["episode_length"]]
                    self.assertEqual(sorted(info), sorted(
                        ["final_obs", "_final_obs", "has_final_obs", "rollout_episode",
                         "_rollout_episode", "episode_return", "episode_length",
                         "episode_start", "step", "is_first"]))
                self.assertEqual(env._lane is not None, shm)
                self.assertGreater(len(env.episode_returns), 64)
                trace += [np.array(env.episode_returns), np.array(env.episode_lengths),
                          np.array(env.total_steps)]
            traces.append(trace)
            self.assertEqual(node.stop(), 0)
        for k, (a, b) in enumerate(zip(*traces)):
            np.testing.assert_array_equal(a, b, err_msg=f"array {k}")

    def test_shared_memory_batches_and_bad_actions(self):
        """Client batches from memory are the batch's own (kept after the
        answer, unchanged); an action out of range written into the action
        memory is refused by the node with an error naming it, and the node
        goes on serving the next learner."""
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        node = self.launch(num_envs=8, seed=4, listen=f"unix:{d}/node.sock")
        with rc.Client(node.address) as c:
            self.assertIsNotNone(c._conns[0].mem)
            b = c.recv(timeout=GUARD)
            self.assertTrue(b.in_memory)
            kept = (b.obs.copy(), b.step.copy(), b.env.copy())
            c.send_actions(b, np.zeros(b.n, np.int64))
            b2 = c.recv(timeout=GUARD)
            np.testing.assert_array_equal(b.obs, kept[0])
            np.testing.assert_array_equal(b.step, kept[1])
            # Past the client's checks: 7 into the memory of a Discrete(2) env.
            mem = c._conns[0].mem
            rows = slice(*b2.env_range)
            mem.act[rows] = 7
            conn = c._conns[0]
            conn.outbuf += rc.framing.encode_frame(rc.wire.actions_in_memory(b2.seq))
            c._flush(conn)
            with self.assertRaises(rc.RemoteError) as cm:
                while c.recv(timeout=GUARD) is not None:
                    pass
            self.assertIn("outside [0, 2)", str(cm.exception))
        # the node serves on
        with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
            env.reset()
            obs, *_ = env.step(np.zeros(8, np.int64))
            self.assertTrue(np.isfinite(obs).all())
        self.assertEqual(node.stop(), 0)
        self.assertEqual(node.summary()["learners_rejected"], 1)

    def test_autoreset_disabled(self):
        """autoreset_mode="disabled" shows the node's same-step autoreset the
        Gymnasium DISABLED way: two nodes of one seed, the same actions;
        where an episode ends, the disabled VecEnv's row is the same-step
        run's final_obs, and reset(options={"reset_mask": done}) hands out
        the same-step run's next observation for exactly those envs.
        Stepping before that reset and a mask naming a running env are
        refused, and the VecEnv stays usable (send()/recv() in DISABLED:
        test_python_vecenv_async.py)."""
        a_node = self.launch(num_envs=8, seed=21)
        b_node = self.launch(num_envs=8, seed=21)
        with self.assertRaises(ValueError):
            rc.VecEnv(b_node.address, timeout=GUARD, autoreset_mode="sometimes")
        with rc.VecEnv(a_node.address, timeout=GUARD, autoreset_mode="same_step") as same, \
                rc.VecEnv(b_node.address, timeout=GUARD, autoreset_mode="disabled") as dis:
            self.assertEqual(getattr(dis.metadata["autoreset_mode"], "value", None), "Disabled")
            oa, _ = same.reset(seed=21)
            ob, _ = dis.reset(seed=21)
            np.testing.assert_array_equal(oa, ob)
            rng = np.random.default_rng(3)
            ended = 0
            for _ in range(120):
                act = rng.integers(0, 2, 8)
                oa, ra, ta, tra, ia = same.step(act)
                ob, rb, tb, trb, ib = dis.step(act)
                for x, y in ((ra, rb), (ta, tb), (tra, trb)):
                    np.testing.assert_array_equal(x, y)
                self.assertNotIn("final_obs", ib)
                done = ta | tra
                np.testing.assert_array_equal(ob[~done], oa[~done])
                np.testing.assert_array_equal(ob[done], ia["final_obs"][done])
                if not done.any():
                    continue
                ended += int(done.sum())
                with self.assertRaises(ValueError) as e:
                    dis.step(act)  # refused: nothing sent
                self.assertIn("reset_mask", str(e.exception))
                with self.assertRaises(ValueError):
                    dis.reset(options={"reset_mask": ~done})
                ob2, _ = dis.reset(options={"reset_mask": done})
                np.testing.assert_array_equal(ob2, oa)
            self.assertGreater(ended, 8)
        self.assertEqual(a_node.stop(), 0)
        self.assertEqual(b_node.stop(), 0)

    def test_launch_node_by_host_name(self):
        node = self.launch(num_envs=2, listen="localhost:0")
        port = node.address.rsplit(":", 1)[1]
        with rc.VecEnv(f"localhost:{port}", timeout=GUARD, autoreset_mode="same_step") as env:
            env.reset()
            env.step(np.zeros(2, np.int64))

    def test_launch_node_errors_and_exit(self):
        with self.assertRaises(RuntimeError) as cm:
            rc.launch_node(num_envs=0, node=NODE)
        self.assertIn("--num-envs", str(cm.exception))
        with rc.launch_node(env="pendulum", num_envs=2, node=NODE, seed=4) as node:
            self.assertTrue(node.running)
            with rc.VecEnv(node.address, timeout=GUARD, autoreset_mode="same_step") as env:
                self.assertEqual(env.nodes[0].seed, 4)
                self.assertEqual(env.nodes[0].env, "pendulum")
        self.assertFalse(node.running)
        self.assertEqual(node.proc.returncode, 0)
        self.assertIsNotNone(node.summary())


if __name__ == "__main__":
    unittest.main(verbosity=2)
