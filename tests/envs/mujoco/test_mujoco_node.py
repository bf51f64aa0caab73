"""The MuJoCo envs in a real node: each env runs with the MLP and the random
policy; the same seed gives every env the same episodes whatever the
workers, shard size, batch size and max-wait; a recording replays bit for
bit with rollout-replay --verify; one simulation broken on purpose (a MuJoCo
error in mj_step, a state MuJoCo throws away) fails one env, which is reset
and counted, while the node runs to the end; MuJoCo never prints nor writes
its log file, and the summary counts its warnings; bad env args are refused
with a message naming them.

Run as: test_mujoco_node.py ROLLOUT_NODE FAULT_PLUGIN_SO ROLLOUT_REPLAY.
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integration"))
import nodeutil as nu  # noqa: E402
import wireutil  # noqa: E402

REPLAY = None
ENVS = ["inverted_pendulum", "hopper", "half_cheetah", "walker2d", "ant"]
DIMS = {"inverted_pendulum": (4, 1), "hopper": (11, 3), "half_cheetah": (17, 6),
        "walker2d": (17, 6), "ant": (105, 8)}

LAYOUTS = [
    ["--workers", 1, "--shard", 1, "--batch", 1, "--max-wait-us", 0],
    ["--workers", 2, "--shard", 2, "--batch", 16, "--max-wait-us", 1000],
    ["--workers", 2, "--shard", 3, "--batch", 5, "--max-wait-us", 50],
    ["--workers", 3, "--overcommit", "--shard", 2, "--batch", 7],
]


def run_in(cwd, *args, check=True):
    """nu.run, from another working directory (MuJoCo must write nothing)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return nu.run(*args, check=check)
    finally:
        os.chdir(old)


class MujocoNode(nu.TempDirCase):
    def quiet_checks(self, p):
        """MuJoCo's own handlers would print warnings and write a log file
        into the working directory: ours count them instead."""
        self.assertNotIn("WARNING", p.stdout + p.stderr)
        self.assertNotIn("ERROR", p.stdout + p.stderr)
        self.assertFalse(os.path.exists(self.path("MUJOCO_LOG.TXT")))

    def test_each_env_runs(self):
        for env in ENVS:
            for policy in ("mlp", "random"):
                s, p = run_in(self.tmp, "--env", env, "--policy", policy, "--num-envs", 16,
                              "--steps", 16 * 200, "--seed", 5)
                self.assertEqual(s["env"], env)
                self.assertEqual(s["steps"], 3200)
                self.assertEqual(s["env_failures"], 0, f"{env} {policy}")
                # None in these runs; the model compiler's (Gymnasium's
                # half_cheetah.xml uses a deprecated attribute) are not counted.
                self.assertEqual(s["mujoco_warnings"], 0, f"{env} {policy}")
                self.quiet_checks(p)

    def episodes(self, common, layout, tag):
        m = self.path(f"{tag}.jsonl")
        s, _ = nu.run(*common, *layout, "--metrics", m, "--metrics-episodes")
        self.assertEqual(s["dropped_metrics"], 0)
        self.assertEqual(s["env_failures"], 0)
        return nu.episodes_by_env(nu.read_metrics(m))

    def check_layouts(self, common, min_episodes):
        ref = self.episodes(common, LAYOUTS[0], "ref")
        self.assertGreaterEqual(sum(len(v) for v in ref.values()), min_episodes)
        for i, layout in enumerate(LAYOUTS[1:]):
            got = self.episodes(common, layout, f"l{i}")
            self.assertEqual(sorted(got), sorted(ref))
            for env in ref:
                self.assertEqual(got[env], ref[env], f"env {env} differs under {layout}")

    def test_determinism_hopper_mlp(self):
        self.check_layouts(["--env", "hopper", "--num-envs", 24, "--steps", 24 * 300,
                            "--seed", 7], 100)

    def test_determinism_half_cheetah_random(self):
        self.check_layouts(["--env", "half_cheetah", "--policy", "random", "--num-envs", 12,
                            "--steps", 12 * 250, "--seed", 8,
                            "--env-arg", "max_episode_steps=100"], 24)

    def test_determinism_walker2d_pendulum_ant(self):
        self.check_layouts(["--env", "walker2d", "--num-envs", 8, "--steps", 8 * 300,
                            "--seed", 9], 20)
        self.check_layouts(["--env", "inverted_pendulum", "--policy", "random",
                            "--num-envs", 8, "--steps", 8 * 300, "--seed", 9], 100)
        self.check_layouts(["--env", "ant", "--num-envs", 6, "--steps", 6 * 150, "--seed", 9,
                            "--env-arg", "max_episode_steps=50"], 12)

    def test_record_verify(self):
        for env in ENVS:
            f = self.path(f"{env}.traj")
            s, _ = nu.run("--env", env, "--num-envs", 6, "--steps", 6 * 250, "--workers", 2,
                          "--record", f, "--env-arg", "max_episode_steps=120",
                          "--env-arg", "reset_noise_scale=0.02")
            self.assertEqual(s["record_transitions"], s["steps"])
            p = subprocess.run([REPLAY, "--verify", f], capture_output=True, text=True,
                               timeout=240)
            self.assertEqual(p.returncode, 0, p.stderr)
            m = re.search(r"verify OK: (\d+) steps and (\d+) resets", p.stderr)
            self.assertIsNotNone(m, p.stderr)
            self.assertEqual(int(m.group(1)), s["steps"])
            self.assertEqual(int(m.group(2)), s["num_envs"] + s["episodes"])

    def test_verify_names_another_mujoco(self):
        """A recording made on another MuJoCo is refused by --verify, naming
        both versions, rather than diverging at its first step."""
        f, g = self.path("h.traj"), self.path("h222.traj")
        nu.run("--env", "hopper", "--num-envs", 2, "--steps", 20, "--record", f)
        wireutil.rewrite_header(f, g, mujoco_version="2.2.2")
        p = subprocess.run([REPLAY, "--verify", g], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the recording ran on MuJoCo 2.2.2 and this build's MuJoCo envs run on "
                      + wireutil.read_header(f).mujoco_version, p.stderr)
        p = subprocess.run([REPLAY, "--verify", f], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

    def fault_run(self, fault):
        m = self.path(f"fault_{fault}.jsonl")
        s, p = run_in(self.tmp, "--env", nu.PLUGIN, "--env-arg", f"fault={fault}",
                      "--env-arg", "at_step=40", "--num-envs", 8, "--steps", 8 * 400,
                      "--workers", 2, "--metrics", m, "--seed", 3)
        self.assertEqual(s["env"], "hopper_fault")
        self.assertEqual(s["steps"], 3200, "the node ran to the end")
        self.assertEqual(s["env_failures"], 1)
        fails = [r for r in nu.read_metrics(m) if r["type"] == "env_failure"]
        self.assertEqual(len(fails), 1, fails)
        self.quiet_checks(p)
        return s

    def test_error_inside_step_fails_one_env(self):
        self.fault_run("stack")

    def test_discarded_state_fails_one_env(self):
        s = self.fault_run("qvel")
        # MuJoCo's bad-qvel warning: counted in the summary, never printed.
        self.assertGreaterEqual(s["mujoco_warnings"], 1)

    def test_bad_args(self):
        cases = [("frame_skip=0", "frame_skip"), ("ctrl_cost_weight=x", "ctrl_cost_weight"),
                 ("healthy_z_range=1", "LO,HI"), ("bogus=1", "accepted:")]
        for arg, want in cases:
            s, p = nu.run("--env", "hopper", "--env-arg", arg, "--steps", 10, check=False)
            self.assertNotEqual(p.returncode, 0, arg)
            self.assertIn(want, p.stderr, arg)

    def test_dims_in_recording(self):
        """What the node records has each env's observation and action sizes."""
        for env in ENVS:
            f = self.path(f"d_{env}.traj")
            s, _ = nu.run("--env", env, "--num-envs", 2, "--steps", 20, "--record", f)
            # The MuJoCo the physics ran on, in --json and in the header.
            self.assertRegex(s["mujoco_version"], r"^[1-9]\d*\.\d+\.\d+$")
            self.assertEqual(wireutil.read_header(f).mujoco_version, s["mujoco_version"])
            p = subprocess.run([REPLAY, "--dump", f], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
            self.assertGreaterEqual(len(rows), 22)  # 20 steps, 2 first resets, + episode ends
            od, ad = DIMS[env]
            for r in rows:
                self.assertEqual(len(r["obs"]), od)
                self.assertEqual(len(r["action"]) if r["action"] else ad, ad)
        # A built-in env that is not MuJoCo's records no MuJoCo version.
        f = self.path("cartpole.traj")
        s, _ = nu.run("--env", "cartpole", "--num-envs", 2, "--steps", 20, "--record", f)
        self.assertEqual(wireutil.read_header(f).mujoco_version, "")

if __name__ == "__main__":
    nu.setup_from_argv()
    REPLAY = sys.argv.pop(1)
    unittest.main(verbosity=2)
