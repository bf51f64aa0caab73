"""Every built-in env equals Gymnasium's own, transition by transition
(issue 32): CartPole-v1, Pendulum-v1, InvertedPendulum-v5, Hopper-v5,
Walker2d-v5, HalfCheetah-v5 and Ant-v5, with the real gymnasium and mujoco
of .venv (fidelity.py says how).

Each env is recorded by rollout-node twice (random policy with a 20-step
time limit: many resets and truncations; the MLP with the default limit:
terminations), about 4 800 transitions per env, and every transition must
match Gymnasium's exactly: terminated and truncated, and the observation
and reward after the cast to float32, the reward terms of `info` as
float64. bench/mujoco_fidelity.py runs the same check over 100 000
transitions per env for the table in docs/env-api.md. A run with
non-default env args checks that the args mean what Gymnasium's keywords
mean; one compared against Gymnasium with another weight must fail, so the
check can.

Run as: test_fidelity.py ROLLOUT_NODE FIDELITY_STATES.
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity as fid  # noqa: E402

NODE = TOOL = ""
ENVS = ["cartpole", "pendulum", "inverted_pendulum", "hopper", "walker2d", "half_cheetah", "ant"]
NEVER_TERMINATE = {"pendulum", "half_cheetah"}
MODELS = {"hopper.xml", "walker2d_v5.xml", "half_cheetah.xml", "ant.xml",
          "inverted_pendulum.xml"}


class Fidelity(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ro_fidelity_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # Gymnasium's MuJoCo logs the model compiler's warnings (its
        # half_cheetah.xml uses a deprecated attribute) to MUJOCO_LOG.TXT in
        # the working directory: this test's own.
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)

    def run_env(self, env):
        runs = [fid.check(NODE, TOOL, env, "random", 11, 8, 8 * 300,
                          ["max_episode_steps=20"], self.tmp),
                fid.check(NODE, TOOL, env, "mlp", 12, 4, 4 * 600, [], self.tmp)]
        r = fid.merge(runs)
        print(f"{env}: {r.transitions} transitions, {r.resets} resets, {r.terminated} "
              f"terminated, {r.truncated} truncated; {runs[0].reset_moments_note}")
        self.assertTrue(r.ok(), f"{env}: {r.problems}")
        self.assertEqual(r.transitions, 4800)
        self.assertGreaterEqual(r.resets, 100)
        self.assertGreater(r.truncated, 0)
        if env not in NEVER_TERMINATE:
            self.assertGreater(r.terminated, 0)
        self.assertEqual(r.mujoco_version, "" if env not in fid.MUJOCO else
                         __import__("mujoco").__version__)
        return r

    def test_cartpole(self):
        self.run_env("cartpole")

    def test_pendulum(self):
        self.run_env("pendulum")

    def test_inverted_pendulum(self):
        self.run_env("inverted_pendulum")

    def test_hopper(self):
        self.run_env("hopper")

    def test_walker2d(self):
        self.run_env("walker2d")

    def test_half_cheetah(self):
        self.run_env("half_cheetah")

    def test_ant(self):
        self.run_env("ant")

    def test_args_as_gymnasium_keywords(self):
        """Non-default args, as Gymnasium's keywords of the same names."""
        cases = {
            "hopper": ["exclude_current_positions_from_observation=false",
                       "healthy_z_range=0.8,inf", "healthy_angle_range=-0.3,0.3",
                       "healthy_state_range=-50,50", "reset_noise_scale=0.02",
                       "forward_reward_weight=2", "ctrl_cost_weight=0.01",
                       "healthy_reward=0.5", "frame_skip=3"],
            "walker2d": ["terminate_when_unhealthy=false", "healthy_z_range=0.9,1.9"],
            "half_cheetah": ["exclude_current_positions_from_observation=false",
                             "reset_noise_scale=0.3", "ctrl_cost_weight=0.2"],
            "ant": ["include_cfrc_ext_in_observation=false", "main_body=torso",
                    "contact_force_range=-0.5,0.5", "contact_cost_weight=1e-3",
                    "healthy_z_range=0.3,1.1", "exclude_current_positions_from_observation=0"],
            "inverted_pendulum": ["frame_skip=3", "reset_noise_scale=0.05"],
            "pendulum": ["g=9.81"],
        }
        for env, args in cases.items():
            r = fid.check(NODE, TOOL, env, "random", 13, 4, 4 * 150,
                          args + ["max_episode_steps=40"], self.tmp)
            self.assertTrue(r.ok(), f"{env} {args}: {r.problems}")
            self.assertEqual(r.transitions, 600)

    def test_check_can_fail(self):
        """A recording compared with a Gymnasium env of another control cost
        weight: the rewards and the reward_ctrl term differ, and the check
        says so."""
        path = os.path.join(self.tmp, "w.traj")
        fid.record(NODE, "hopper", "random", 14, 2, 200, ["ctrl_cost_weight=0.002"], path)
        r = fid.check_file(path, TOOL, "random", self.tmp,
                           gym_overrides={"ctrl_cost_weight": 0.001})
        self.assertFalse(r.ok())
        self.assertGreater(r.reward_mismatches, 0)
        self.assertGreater(r.terms_mismatches, 0)
        self.assertEqual(r.obs_mismatches, 0)  # the weight changes no state

    def test_models_are_gymnasiums(self):
        """The embedded models are the installed Gymnasium's assets, byte for
        byte (a Gymnasium that changes them must be noticed)."""
        import gymnasium
        assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
        ours = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "src",
                            "envs", "mujoco")
        for name in sorted(MODELS):
            with open(os.path.join(ours, name), "rb") as a, \
                    open(os.path.join(assets, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{name} differs from Gymnasium's")


if __name__ == "__main__":
    NODE, TOOL = sys.argv.pop(1), sys.argv.pop(1)
    unittest.main(verbosity=2)
