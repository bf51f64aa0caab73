"""make_vec / gymnasium.make_vec("rollout/...") against the real Gymnasium
(issue 29): ids and spaces as Gymnasium's own envs have them, the three
autoreset modes, reseeding, Gymnasium's wrappers unchanged, refusals by
name, and nothing left behind by close().

Run as: test_python_gym.py BUILD_DIR ROLLOUT_NODE GRIDWORLD_SO MOUNTAINCAR_SO
(the example plugins built for this interpreter: without the sanitizers). No
clock: every check is on what the envs return.
"""
import os
import subprocess
import sys
import unittest

BUILD, NODE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
GRIDWORLD, MOUNTAINCAR = os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4])
del sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import rollout_client as rc  # noqa: E402

MUJOCO_IDS = ["InvertedPendulum-v5", "Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5"]


def has_mujoco():
    try:
        rc.make_vec("rollout/Hopper-v5", 1).close()
        return True
    except ValueError as e:
        if "MuJoCo" in str(e) or "mujoco" in str(e):
            return False
        raise


def cartpole_ended(obs):
    """CartPole-v1's termination condition on observations."""
    return (np.abs(obs[..., 0]) > 2.4) | (np.abs(obs[..., 2]) > 12 * 2 * np.pi / 360)


def is_reset_obs(obs):
    """Inside CartPole-v1's reset distribution, U(-0.05, 0.05) per value."""
    return np.all(np.abs(obs) <= 0.05, axis=-1)


class Registration(unittest.TestCase):
    def test_every_id_registered_with_gymnasiums_spaces(self):
        ids = ["CartPole-v1", "Pendulum-v1"] + (MUJOCO_IDS if has_mujoco() else [])
        for gid in ids:
            with self.subTest(gid):
                env = gym.make_vec(f"rollout/{gid}", num_envs=3)
                ref = gym.make(gid)
                self.assertIsInstance(env, gym.vector.VectorEnv)
                self.assertIsInstance(env.unwrapped, rc.RolloutVectorEnv)
                self.assertEqual(env.single_observation_space.shape,
                                 ref.observation_space.shape)
                self.assertEqual(type(env.single_action_space), type(ref.action_space))
                self.assertEqual(env.single_action_space.shape, ref.action_space.shape)
                if isinstance(ref.action_space, gym.spaces.Box):
                    np.testing.assert_allclose(env.single_action_space.low,
                                               ref.action_space.low)
                    np.testing.assert_allclose(env.single_action_space.high,
                                               ref.action_space.high)
                else:
                    self.assertEqual(env.single_action_space.n, ref.action_space.n)
                self.assertEqual(env.observation_space.shape,
                                 (3,) + ref.observation_space.shape)
                self.assertIs(env.metadata["autoreset_mode"], AutoresetMode.NEXT_STEP)
                obs, infos = env.reset(seed=1)
                self.assertIn(obs, env.observation_space)
                obs, rew, term, trunc, infos = env.step(env.action_space.sample())
                self.assertEqual(rew.dtype, np.float64)
                self.assertEqual(term.dtype, np.bool_)
                self.assertEqual(trunc.shape, (3,))
                env.close()
                ref.close()

    def test_module_prefix_needs_no_import(self):
        code = ("import gymnasium; e = gymnasium.make_vec('rollout_client:rollout/CartPole-v1', "
                "num_envs=2); e.reset(seed=0); print(type(e).__name__, e.num_envs)")
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["RolloutVectorEnv", "2"])

    def test_make_vec_names(self):
        for name in ["rollout/CartPole-v1", "CartPole-v1", "cartpole"]:
            with rc.make_vec(name, 2) as env:
                self.assertEqual(env.single_observation_space.shape, (4,))
        with rc.make_vec(MOUNTAINCAR, 2) as env:
            self.assertEqual(env.single_observation_space.shape, (2,))
        env = gym.make_vec("rollout/Plugin-v0", num_envs=2, plugin=MOUNTAINCAR)
        env.close()


class Autoreset(unittest.TestCase):
    def run_until_ends(self, env, steps=400):
        """Steps random actions; yields (t, obs, rew, term, trunc, infos, prev_obs)."""
        obs, _ = env.reset(seed=11)
        for t in range(steps):
            prev = obs
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            yield t, obs, rew, term, trunc, infos, prev

    def test_next_step(self):
        env = rc.make_vec("rollout/CartPole-v1", 16)
        ended = np.zeros(16, bool)
        checked = 0
        for t, obs, rew, term, trunc, infos, prev in self.run_until_ends(env):
            # The step after an end is the reset: reward 0, no flag, a first observation.
            self.assertTrue(np.all(rew[ended] == 0.0))
            self.assertFalse(np.any(term[ended] | trunc[ended]))
            self.assertTrue(np.all(is_reset_obs(obs[ended])))
            checked += int(ended.sum())
            # The ending step returns the episode's last observation.
            self.assertTrue(np.all(cartpole_ended(obs[term])))
            self.assertEqual(infos, {})
            ended = term | trunc
        self.assertGreater(checked, 20)
        env.close()

    def test_same_step(self):
        env = rc.make_vec("rollout/CartPole-v1", 16, autoreset_mode="same_step")
        self.assertIs(env.metadata["autoreset_mode"], AutoresetMode.SAME_STEP)
        ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4,
                                       autoreset_mode=AutoresetMode.SAME_STEP)
        ref.reset(seed=0)
        while True:  # the shape of Gymnasium's own infos on an ending step
            _, _, rterm, rtrunc, rinfos = ref.step(ref.action_space.sample())
            if (rterm | rtrunc).any():
                break
        checked = 0
        for t, obs, rew, term, trunc, infos, prev in self.run_until_ends(env):
            done = term | trunc
            if not done.any():
                self.assertEqual(infos, {})
                continue
            self.assertEqual(set(infos), set(rinfos))
            self.assertEqual(infos["final_obs"].dtype, rinfos["final_obs"].dtype)
            np.testing.assert_array_equal(infos["_final_obs"], done)
            np.testing.assert_array_equal(infos["_final_info"], done)
            for i in np.flatnonzero(done):
                final = infos["final_obs"][i]
                self.assertEqual(final.shape, (4,))
                if term[i]:
                    self.assertTrue(cartpole_ended(final))
                self.assertTrue(is_reset_obs(obs[i]))  # already the next episode
                checked += 1
            for i in np.flatnonzero(~done):
                self.assertIsNone(infos["final_obs"][i])
        self.assertGreater(checked, 20)
        env.close()

    def test_disabled(self):
        env = rc.make_vec("rollout/CartPole-v1", 8, autoreset_mode=AutoresetMode.DISABLED)
        obs, _ = env.reset(seed=3)
        left = np.zeros(8, bool)
        for _ in range(500):
            obs, rew, term, trunc, _ = env.step(np.zeros(8, np.int64))
            left = term | trunc
            if left.any():
                break
        self.assertTrue(left.any())
        with self.assertRaisesRegex(ValueError, "reset_mask"):
            env.step(np.zeros(8, np.int64))
        before = obs.copy()
        obs2, _ = env.reset(options={"reset_mask": left})
        self.assertTrue(np.all(is_reset_obs(obs2[left])))
        np.testing.assert_array_equal(obs2[~left], before[~left])
        env.step(np.zeros(8, np.int64))  # stepping again is allowed
        env.close()

    def test_truncation_at_max_episode_steps(self):
        for mode in AutoresetMode:
            with self.subTest(mode):
                env = rc.make_vec("rollout/Pendulum-v1", 4, autoreset_mode=mode,
                                  max_episode_steps=20)
                env.reset(seed=0)
                for t in range(1, 21):
                    _, _, term, trunc, _ = env.step(np.zeros((4, 1), np.float32))
                    self.assertFalse(term.any())
                    self.assertEqual(bool(trunc.all()), t == 20)
                env.close()


class Seeding(unittest.TestCase):
    def rollout(self, env, seed, steps=60):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        rng = np.random.default_rng(0)
        for _ in range(steps):
            a = rng.uniform(-2, 2, size=(8, 1)).astype(np.float32)
            obs, rew, term, trunc, _ = env.step(a[:env.num_envs])
            out.append(obs)
        return np.stack(out)

    def test_reseed_repeats_and_differs(self):
        env = rc.make_vec("rollout/Pendulum-v1", 4)
        a, b = self.rollout(env, 5), self.rollout(env, 5)
        np.testing.assert_array_equal(a, b)
        c = self.rollout(env, 6)
        self.assertFalse(np.array_equal(a[0], c[0]))
        obs, _ = env.reset()  # continues: another episode, not seed 6's first again
        self.assertFalse(np.array_equal(obs, c[0]))
        env.close()

    def test_env_i_independent_of_num_envs_and_threads(self):
        small = rc.make_vec("rollout/Pendulum-v1", 4, num_threads=1)
        large = rc.make_vec("rollout/Pendulum-v1", 8, num_threads=2)
        self.assertEqual(large.num_threads, 2)
        a, b = self.rollout(small, 9), self.rollout(large, 9)
        np.testing.assert_array_equal(a, b[:, :4])
        small.close()
        large.close()

    def test_seed_list(self):
        env = rc.make_vec("rollout/Pendulum-v1", 4)
        ref, _ = env.reset(seed=7)
        other, _ = env.reset(seed=8)
        obs, _ = env.reset(seed=[7, None, 7, None])
        np.testing.assert_array_equal(obs[[0, 2]], ref[[0, 2]])
        self.assertFalse(np.array_equal(obs[1], other[1]))  # env 1 went on
        with self.assertRaisesRegex(ValueError, "4 seeds"):
            env.reset(seed=[1, 2])
        env.close()

    def test_same_episodes_as_the_node(self):
        """reset(seed=S) plays env i as `rollout-node --seed S` does: the
        node's recorded actions, replayed here, give its observations and
        rewards bit for bit."""
        import json
        path = os.path.join(BUILD, "test_python_gym_node.traj")
        rec = subprocess.run([NODE, "--env", "pendulum", "--num-envs", "4", "--seed", "31",
                              "--policy", "random", "--steps", "200", "--record", path],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(rec.returncode, 0, rec.stderr)
        replay = os.path.join(os.path.dirname(NODE), "rollout-replay")
        dump = subprocess.run([replay, "--dump", path], capture_output=True, text=True,
                              timeout=120)
        os.unlink(path)
        self.assertEqual(dump.returncode, 0, dump.stderr)
        rows = [json.loads(line) for line in dump.stdout.splitlines() if line.startswith("{")]
        per_env = {i: sorted((r for r in rows if r["env"] == i), key=lambda r: r["step"])
                   for i in range(4)}
        steps = min(len(v) for v in per_env.values()) - 1
        self.assertGreater(steps, 20)
        env = rc.make_vec("rollout/Pendulum-v1", 4)
        obs, _ = env.reset(seed=31)
        for i in range(4):
            np.testing.assert_array_equal(obs[i], np.float32(per_env[i][0]["obs"]))
        for t in range(1, steps + 1):
            act = np.array([per_env[i][t]["action"] for i in range(4)], np.float32)
            obs, rew, _, _, _ = env.step(act)
            for i in range(4):
                np.testing.assert_array_equal(obs[i], np.float32(per_env[i][t]["obs"]))
                self.assertEqual(np.float32(rew[i]), np.float32(per_env[i][t]["reward"]))
        env.close()


class RunSteps(unittest.TestCase):
    def test_cycled_batches_equal_step(self):
        """Engine.run_steps(k, batches), the benchmarks' envs alone, steps
        with batch i % m at its step i, and keeps the batches for the next
        calls: the transitions step() gives with the same actions (a box and
        a discrete env); bad batches refused by name."""
        for gid, draw in (("rollout/Pendulum-v1",
                           lambda r: r.uniform(-2, 2, size=(4, 1)).astype(np.float32)),
                          ("rollout/CartPole-v1", lambda r: r.integers(0, 2, size=4))):
            rng = np.random.default_rng(1)
            acts = [draw(rng) for _ in range(3)]
            ref, alone = rc.make_vec(gid, 4), rc.make_vec(gid, 4)
            ref.reset(seed=2)
            alone.reset(seed=2)
            for t in range(9):
                ref.step(acts[t % 3])
            engine = alone.unwrapped._engine
            engine.run_steps(3, [alone.unwrapped._split_actions(a) for a in acts])
            engine.run_steps(6)  # the batches kept: each call cycles them from the first
            a, b = ref.step(acts[0]), alone.step(acts[0])
            for x, y in zip(a[:4], b[:4]):
                np.testing.assert_array_equal(x, y)
            with self.assertRaisesRegex(ValueError, "1 to 1024 batches"):
                engine.run_steps(1, [])
            with self.assertRaisesRegex(TypeError, "batch 0 is not a"):
                engine.run_steps(1, [acts[0]])
            ref.close()
            alone.close()


class Async(unittest.TestCase):
    def test_send_recv_equals_step(self):
        """EnvPool's API: batches come back in the order they were sent, and
        each env's transitions are those step() gives it."""
        sync = rc.make_vec("rollout/Pendulum-v1", 8, max_episode_steps=15)
        sync.reset(seed=3)
        rows = [sync.step(np.full((8, 1), 0.5, np.float32)) for _ in range(20)]
        env = rc.make_vec("rollout/Pendulum-v1", 8, batch_size=4, num_threads=2,
                          max_episode_steps=15)
        self.assertEqual(env.batch_size, 4)
        env.async_reset(seed=3)
        count = np.zeros(8, int)
        order = []
        while count.min() < 21:
            obs, rew, term, trunc, infos = env.recv()
            ids = infos["env_id"]
            order.append(tuple(ids))
            for k, i in enumerate(ids):
                t = count[i]
                if 1 <= t <= 20:
                    o, r, te, tr, _ = rows[t - 1]
                    np.testing.assert_array_equal(obs[k], o[i])
                    self.assertEqual(rew[k], r[i])
                    self.assertEqual((term[k], trunc[k]), (te[i], tr[i]))
                count[i] += 1
            env.send(np.full((4, 1), 0.5, np.float32), ids)
        self.assertEqual(order[:2], [(0, 1, 2, 3), (4, 5, 6, 7)])
        env.close()
        sync.close()

    def test_async_refusals(self):
        env = rc.make_vec("rollout/CartPole-v1", 8, batch_size=4, num_threads=2)
        env.async_reset(seed=0)
        obs, rew, term, trunc, infos = env.recv()
        with self.assertRaisesRegex(ValueError, "env 5 was not received"):
            env.send(np.zeros(4, np.int64), [0, 1, 2, 5])
        env.send(np.zeros(4, np.int64), infos["env_id"])
        with self.assertRaisesRegex(ValueError, "stepping already"):
            env.send(np.zeros(4, np.int64), [0, 1, 2, 3])
        with self.assertRaisesRegex(ValueError, "step\\(\\) while envs step"):
            env.step(np.zeros(8, np.int64))
        env.recv()
        env.recv()  # the sent batch
        with self.assertRaisesRegex(ValueError, "none is stepping"):
            env.recv()
        env.reset(seed=1)  # a reset starts over from every env
        obs, *_ = env.recv()
        self.assertEqual(obs.shape, (4, 4))
        env.close()


class EnvState(unittest.TestCase):
    def test_restore_repeats_bit_for_bit(self):
        ids = ["rollout/CartPole-v1", "rollout/Pendulum-v1"] + (
            ["rollout/Hopper-v5", "rollout/Ant-v5"] if has_mujoco() else [])
        for gid in ids:
            with self.subTest(gid):
                env = rc.make_vec(gid, 4, max_episode_steps=1000)
                env.reset(seed=1)
                env.action_space.seed(3)
                acts = [env.action_space.sample() for _ in range(25)]
                for a in acts[:5]:
                    env.step(a)
                saved = env.get_state()
                first = [env.step(a) for a in acts[5:]]
                env.set_state(range(4), saved)
                again = [env.step(a) for a in acts[5:]]
                for x, y in zip(first, again):
                    for k in range(4):  # obs, reward, terminated, truncated
                        np.testing.assert_array_equal(x[k], y[k])
                env.close()

    def test_states_are_checked(self):
        a = rc.make_vec("rollout/Pendulum-v1", 2)
        a.reset(seed=0)
        blob = a.get_state([0])[0]
        other_args = rc.make_vec("rollout/Pendulum-v1", 2, max_episode_steps=50)
        with self.assertRaisesRegex(ValueError, "param"):
            other_args.set_state([0], [blob])
        cart = rc.make_vec("rollout/CartPole-v1", 2)
        with self.assertRaisesRegex(ValueError, "not of env 'cartpole'"):
            cart.set_state([1], [blob])
        with self.assertRaisesRegex(ValueError, "not an env state"):
            a.set_state([0], [b"junk"])
        with self.assertRaisesRegex(ValueError, "env ids and"):
            a.set_state([0, 1], [blob])
        a.set_state([1], [blob])  # env 0's state into env 1: the same env
        np.testing.assert_array_equal(a.get_state([1])[0], blob)
        for e in (a, other_args, cart):
            e.close()


class Wrappers(unittest.TestCase):
    def test_record_episode_statistics(self):
        env = gym.wrappers.vector.RecordEpisodeStatistics(rc.make_vec("rollout/CartPole-v1", 8))
        obs, _ = env.reset(seed=2)
        ret, length, seen = np.zeros(8), np.zeros(8, int), 0
        ended = np.zeros(8, bool)
        for _ in range(600):
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            ret = np.where(ended, 0.0, ret) + rew
            length = np.where(ended, 0, length) + np.where(ended, 0, 1)
            done = term | trunc
            if done.any():
                m = infos["_episode"]
                np.testing.assert_array_equal(m, done)
                np.testing.assert_allclose(infos["episode"]["r"][m], ret[m], rtol=1e-6)
                np.testing.assert_array_equal(infos["episode"]["l"][m], length[m])
                seen += int(m.sum())
            ended = done
        self.assertGreater(seen, 10)
        env.close()

    def test_observation_and_reward_wrappers(self):
        env = rc.make_vec("rollout/CartPole-v1", 8)
        env = norm = gym.wrappers.vector.NormalizeObservation(env)
        env = gym.wrappers.vector.NormalizeReward(env)
        env = gym.wrappers.vector.TransformObservation(env, lambda o: o * 2.0)
        env = gym.wrappers.vector.TransformReward(env, lambda r: r - 1.0)
        obs, _ = env.reset(seed=1)
        for _ in range(200):
            obs, rew, term, trunc, _ = env.step(env.action_space.sample())
            self.assertTrue(np.all(np.isfinite(obs)))
        self.assertGreater(norm.obs_rms.count, 200)
        env.close()

    def test_action_wrappers(self):
        def rewards(wrap, action):
            env = rc.make_vec("rollout/Pendulum-v1", 4)
            env = wrap(env) if wrap else env
            env.reset(seed=4)
            out = [env.step(np.full((4, 1), action, np.float32))[1] for _ in range(10)]
            env.close()
            return np.stack(out)

        np.testing.assert_array_equal(rewards(gym.wrappers.vector.ClipAction, 50.0),
                                      rewards(None, 2.0))
        np.testing.assert_array_equal(
            rewards(lambda e: gym.wrappers.vector.RescaleAction(e, -1.0, 1.0), 1.0),
            rewards(None, 2.0))

    def test_flatten_dict_observation(self):
        env = gym.make_vec("rollout/Plugin-v0", num_envs=4, plugin=GRIDWORLD, agents=1)
        self.assertIsInstance(env.single_observation_space, gym.spaces.Dict)
        flat = gym.wrappers.vector.FlattenObservation(env)
        obs, infos = flat.reset(seed=0)
        self.assertEqual(obs.shape, (4, 7 * 7 + 2 + 2))
        self.assertEqual(infos["action_mask"].shape, (4, 5))
        for _ in range(20):  # allowed moves only: the mask is honoured
            mask = infos["action_mask"]
            act = np.array([np.flatnonzero(m)[0] for m in mask])
            obs, rew, term, trunc, infos = flat.step(act)
        self.assertEqual(env.unwrapped.env_failures, 0)
        flat.close()

    def test_dict_info_to_list(self):
        env = gym.wrappers.vector.DictInfoToList(
            rc.make_vec("rollout/CartPole-v1", 8, autoreset_mode="same_step"))
        env.reset(seed=0)
        for _ in range(300):
            obs, rew, term, trunc, infos = env.step(env.action_space.sample())
            self.assertIsInstance(infos, list)
            self.assertEqual(len(infos), 8)
            for i in np.flatnonzero(term | trunc):
                self.assertIn("final_obs", infos[i])
        env.close()


class Refusals(unittest.TestCase):
    def test_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "no arg 'bogus'"):
            rc.make_vec("rollout/CartPole-v1", 2, bogus=1)
        with self.assertRaisesRegex(ValueError, "2 agents"):
            rc.make_vec(GRIDWORLD, 2)
        with self.assertRaisesRegex(ValueError, "nothing_here.so"):
            rc.make_vec("/nonexistent/nothing_here.so", 2)
        with self.assertRaisesRegex(ValueError, "autoreset_mode"):
            rc.make_vec("rollout/CartPole-v1", 2, autoreset_mode="sometimes")
        with self.assertRaisesRegex(ValueError, "num_envs"):
            rc.make_vec("rollout/CartPole-v1", 0)
        env = rc.make_vec("rollout/CartPole-v1", 4)
        with self.assertRaisesRegex(RuntimeError, "reset"):
            env.step(np.zeros(4, np.int64))
        env.reset(seed=0)
        with self.assertRaisesRegex(ValueError, "env 2's value 7"):
            env.step(np.array([0, 1, 7, 0]))
        with self.assertRaisesRegex(ValueError, "4 envs"):
            env.step(np.zeros(3, np.int64))
        with self.assertRaisesRegex(TypeError, "integers"):
            env.step(np.zeros(4, np.float32))
        with self.assertRaisesRegex(ValueError, "options"):
            env.reset(options={"difficulty": 3})
        env.step(np.zeros(4, np.int64))  # still usable after every refusal
        env.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            env.step(np.zeros(4, np.int64))


class Resources(unittest.TestCase):
    def test_killed_interpreter_leaves_no_node_nor_socket(self):
        """launch_node's node stops when its interpreter is SIGKILLed, and
        removes its unix: socket file."""
        import signal
        import tempfile
        sock = os.path.join(tempfile.mkdtemp(prefix="ro_gym_", dir=BUILD), "n.sock")
        code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import rollout_client as rc; "
                "n = rc.launch_node(env='cartpole', num_envs=4, node=sys.argv[2], "
                "listen='unix:' + sys.argv[3]); print(n.proc.pid, flush=True); time.sleep(600)")
        p = subprocess.Popen([sys.executable, "-c", code, PYTHON_DIR, NODE, sock],
                             stdout=subprocess.PIPE, text=True)
        node_pid = int(p.stdout.readline())  # the node listens: launch_node returned
        self.assertTrue(os.path.exists(sock))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        guard = 600  # 60 s: the hang guard, in polls of the node's /proc entry
        while guard and os.path.exists(f"/proc/{node_pid}") and \
                not open(f"/proc/{node_pid}/stat").read().split(")")[1].split()[0] == "Z":
            guard -= 1
            import time
            time.sleep(0.1)
        self.assertTrue(guard, f"node {node_pid} still runs 60 s after its interpreter died")
        guard = 600
        while guard and os.path.exists(sock):
            guard -= 1
            time.sleep(0.1)
        self.assertFalse(os.path.exists(sock), "the node left its socket file")


    def test_close_leaves_nothing(self):
        def counts():
            return (len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")))

        base = counts()
        env = rc.make_vec("rollout/Pendulum-v1", 64, num_threads=2)
        env.reset(seed=0)
        env.step(np.zeros((64, 1), np.float32))
        self.assertEqual(counts()[0], base[0] + 1)  # one helper thread
        env.close()
        self.assertEqual(counts(), base)


if __name__ == "__main__":
    unittest.main(verbosity=2)
