"""Python envs (issue 33) in every mode: SEED served by rollout-learner (the
remote run repeats the local one) and by rollout_client's VecEnv (Gymnasium
spaces as the env declares them, mapped), stream mode (every transition
counted once), and recordings that rollout-replay --verify re-steps bit for
bit, naming the env on its command line; an env that is not deterministic
under its seed is reported at its first divergence. Each run ends by its
--steps quota; every wait has nodeutil's hang guard.

Run as: test_pyenv_modes.py ROLLOUT_NODE PLUGIN_SO (rollout-learner and
rollout-replay lie beside the node)."""
import json
import os
import signal
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

DRIFT = "py:pyenv_envs:drift"
LEARNER = REPLAY = None


class Seed(nu.TempDirCase):
    def test_remote_run_repeats_the_local_one(self):
        for env in ("gym:CartPole-v1", DRIFT):
            with self.subTest(env=env):
                common = ["--env", env, "--num-envs", 4, "--steps", 4 * 150, "--seed", 5]
                local, _ = nu.run(*common)
                p, addr, log = nu.start_listening("remote", *common, "--quiet", "--workers", 0)
                q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet", "--workers", 0,
                                "--seed", 5], capture_output=True, text=True)
                s = nu.json_summary(p, log)
                self.assertEqual(q.returncode, 0, q.stderr)
                self.assertEqual(json.loads(q.stdout.strip().splitlines()[-1])["nodes"][0]["mode"],
                                 "seed")
                self.assertEqual(s["env_failures"], 0, log.text())
                for k in ("steps", "episodes", "mean_return"):
                    self.assertEqual(s[k], local[k], k)

    def test_vecenv_sees_the_mapped_spaces(self):
        n, per = 4, 100
        p, addr, log = nu.start_listening("remote", "--env", DRIFT, "--num-envs", n, "--quiet",
                                          "--steps", n * per, "--seed", 2)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step") as v:
            sp = v.single_observation_space.spaces
            # In the order of the env's Dict (Gymnasium sorts its keys).
            want = {"bits": (np.uint8, (3,)), "frame": (np.uint8, (3, 4)),
                    "phase": (np.int32, (1,)), "pos": (np.float32, (2,))}
            self.assertEqual(list(sp), list(want))
            for k, (dt, shape) in want.items():
                self.assertEqual((sp[k].dtype, sp[k].shape), (dt, shape), k)
            obs, _ = v.reset()
            steps = 0
            while True:
                # The worker writes what the env returns: frame is t, phase t % 5.
                self.assertTrue(np.all(obs["frame"] == obs["frame"][:, :1, :1]))
                self.assertTrue(np.all(obs["phase"][:, 0] == obs["frame"][:, 0, 0] % 5))
                try:
                    obs, r, te, tr, _ = v.step(v.action_space.sample())
                except rc.ConnectionClosed as e:
                    self.assertTrue(e.clean, e)
                    break
                steps += n
            self.assertEqual(steps + n, n * per)
            self.assertGreater(len(v.episode_returns), 0)
        s = nu.json_summary(p, log)
        self.assertEqual(s["env_failures"], 0, log.text())

    def test_next_step_hold_does_not_step_the_env(self):
        # NEXT_STEP: the step after an episode's end holds the env (the same
        # first observation again); its worker must not step it meanwhile,
        # so frame (the env's step count t) goes 0, 0 (held), 1, 2, ...
        n = 4
        p, addr, log = nu.start_listening("remote", "--env", DRIFT, "--env-arg", "horizon=5",
                                          "--num-envs", n, "--quiet", "--steps", n * 60,
                                          "--seed", 3)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="next_step") as v:
            obs, _ = v.reset()
            t = obs["frame"][:, 0, 0].astype(int)
            ended = np.zeros(n, bool)
            holds = 0
            while True:
                try:
                    obs, r, te, tr, _ = v.step(v.action_space.sample())
                except rc.ConnectionClosed as e:
                    self.assertTrue(e.clean, e)
                    break
                nxt = obs["frame"][:, 0, 0].astype(int)
                np.testing.assert_array_equal(nxt[ended], 0)
                np.testing.assert_array_equal(nxt[~ended], t[~ended] + 1)
                holds += int(ended.sum())
                t, ended = nxt, te | tr
            self.assertGreater(holds, n)
        s = nu.json_summary(p, log)
        self.assertEqual(s["env_failures"], 0, log.text())

    def first_obs(self, node_seed, reseed=None):
        """A SEED node's first observations (pos) after VecEnv.reset(seed=reseed)."""
        p, addr, log = nu.start_listening("remote", "--env", DRIFT, "--num-envs", 4, "--quiet",
                                          "--seed", node_seed, "--seconds", 0)
        with rc.VecEnv([addr], timeout=nu.HANG_GUARD_S, autoreset_mode="same_step") as v:
            obs, _ = v.reset(seed=reseed)
            pos = obs["pos"].copy()
        p.send_signal(signal.SIGINT)
        self.assertEqual(nu.json_summary(p, log)["env_failures"], 0, log.text())
        return pos

    def test_reseed_equals_a_fresh_node(self):
        # A learner's reset(seed=S) re-makes each env as a node started with
        # --seed S makes it: its worker resets it with that env's seed.
        fresh = self.first_obs(7)
        np.testing.assert_array_equal(self.first_obs(1, reseed=7), fresh)
        self.assertFalse(np.array_equal(self.first_obs(1), fresh))


class Stream(nu.TempDirCase):
    def test_every_transition_counted_once(self):
        n = 4 * 160
        p, addr, log = nu.start_listening("stream", "--env", DRIFT, "--num-envs", 4, "--quiet",
                                          "--workers", 2, "--unroll", 16, "--steps", n,
                                          "--seed", 4)
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet"], capture_output=True,
                       text=True)
        s = nu.json_summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        node = json.loads(q.stdout.strip().splitlines()[-1])["nodes"][0]
        self.assertEqual(node["mode"], "stream")
        self.assertEqual((s["steps"], node["steps"], s["stream_transitions_acked"]), (n, n, n))
        self.assertEqual(node["episodes"], s["episodes"])
        self.assertEqual((node["duplicates"], node["gaps"]), (0, 0))


class Replay(nu.TempDirCase):
    def record(self, env, *extra):
        path = self.path("run.traj")
        s, _ = nu.run("--env", env, *extra, "--num-envs", 4, "--workers", 2, "--steps", 4 * 150,
                      "--seed", 7, "--record", path)
        self.assertEqual(s["env_failures"], 0)
        return path

    def test_verify_bit_for_bit(self):
        for env in ("gym:CartPole-v1", DRIFT):
            with self.subTest(env=env):
                path = self.record(env)
                p = nu.run_cmd([REPLAY, "--verify", path], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2)
                self.assertIn("never loads code because a file names it", p.stderr)
                p = nu.run_cmd([REPLAY, "--verify", "--plugin", env, path], capture_output=True,
                               text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("verify OK: 600 steps", p.stderr)

    def test_atari_verifies(self):
        try:
            import ale_py  # noqa: F401
            import cv2  # noqa: F401
        except ImportError as e:
            raise unittest.SkipTest(f"Atari needs ale-py and opencv-python-headless: {e}")
        env = "py:rollout_client.atari:make"
        path = self.record(env, "--env-arg", "game=Breakout", "--policy", "random")
        p = nu.run_cmd([REPLAY, "--verify", "--plugin", env, path], capture_output=True,
                       text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("verify OK: 600 steps", p.stderr)

    def test_nondeterministic_env_reported(self):
        path = self.record(DRIFT, "--env-arg", "noisy=True")
        p = nu.run_cmd([REPLAY, "--verify", "--plugin", DRIFT, path], capture_output=True,
                       text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        # The first step after a (seeded, equal) reset: its noise came from the OS.
        self.assertRegex(p.stderr, r"divergence in .*: env \d+, agent 0, episode 0, step 1, "
                                   r"obs '(pos|bits)'\[\d\]: recorded")


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    REPLAY = os.path.join(os.path.dirname(nu.NODE), "rollout-replay")
    unittest.main(verbosity=2)
