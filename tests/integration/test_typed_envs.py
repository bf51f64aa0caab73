"""Env ABI 2 end to end (issue 20): the example plugins gridworld (a Dict
observation of uint8 and int32 tensors, action masks, two agents, per-episode
metrics) and catch (84x84 uint8 pixels; Discrete or MultiDiscrete actions)
run locally with the MLP and the random policy; the summary and --json carry
agents and the metrics' means; trainers push format-2 weights of the env's
layout over --listen (another layout is refused by name); weights
files (--save-policy, --policy FILE) of composite and typed-input policies
give identical runs and are refused on another layout; ABI 1 plugins
keep running; --record and rollout-replay carry ABI 2 envs (more in
test_record_typed.py). Every run ends by its own --steps: nothing here waits
on the clock."""
import json
import os
import signal
import subprocess
import sys
import unittest

import nodeutil as nu
import wireutil as w

GRID = CATCH = REPLAY = None


class TypedEnvs(nu.TempDirCase):
    def grid(self, *args):
        return nu.run("--env", GRID, "--num-envs", 16, "--seed", 3, *args)

    def test_gridworld_masks_agents_metrics(self):
        for policy in ("random", "mlp"):
            s, p = self.grid("--policy", policy, "--steps", 16 * 2 * 300)
            # The plugin fails any step given a masked move (into a wall):
            # no failure means no masked action ever reached it.
            self.assertEqual(s["env_failures"], 0, p.stderr)
            self.assertEqual(s["env"], "gridworld")
            self.assertEqual(s["agents"], 2)
            # --steps counts rows (agent steps): 300 steps of 16 envs x 2 agents.
            self.assertEqual(s["steps"], 16 * 2 * 300)
            m = s["metrics"]
            self.assertEqual(sorted(m), ["length", "success"])
            self.assertGreater(s["episodes"], 50)
            self.assertEqual(m["success"]["episodes"], s["episodes"])
            self.assertGreaterEqual(m["success"]["mean"], 0.0)
            self.assertLessEqual(m["success"]["mean"], 1.0)
            self.assertGreaterEqual(m["length"]["mean"], 1.0)
            self.assertLessEqual(m["length"]["mean"], 50.0)  # the vtable's limit
            # Each agent gets +1 on success and pays 0.01 a step: the mean
            # return follows from the two metrics (every episode reports both).
            self.assertAlmostEqual(s["mean_return"],
                                   m["success"]["mean"] - 0.01 * m["length"]["mean"], places=4)
            self.assertIn("env metrics (mean over episodes): success", p.stderr)

    def test_gridworld_is_reproducible_whatever_the_workers(self):
        a, _ = self.grid("--policy", "mlp", "--steps", 16 * 2 * 200, "--workers", 1)
        b, _ = self.grid("--policy", "mlp", "--steps", 16 * 2 * 200, "--workers", 2,
                         "--shard", 2)
        for k in ("steps", "episodes", "mean_return", "metrics"):
            self.assertEqual(a[k], b[k], k)

    def test_catch_pixels(self):
        for action in ("discrete", "multidiscrete"):
            for policy in ("random", "mlp"):
                s, p = nu.run("--env", CATCH, "--env-arg", "action=" + action, "--policy",
                              policy, "--num-envs", 8, "--steps", 8 * 100, "--seed", 5)
                self.assertEqual(s["env_failures"], 0, p.stderr)
                self.assertEqual(s["env"], "catch")
                self.assertEqual(s["agents"], 1)
                # The ball falls 4 pixels a step from row 0: every episode
                # is exactly 20 steps, so 100 steps of 8 envs end 40 of them.
                self.assertEqual(s["episodes"], 40)
                caught = s["metrics"]["caught"]
                self.assertEqual(caught["episodes"], 40)
                # Reward +1 for a catch, -1 for a miss, nothing else.
                self.assertAlmostEqual(s["mean_return"], 2 * caught["mean"] - 1, places=6)

    def test_catch_mlp_weights_file(self):
        # One Discrete action over uint8 pixels: a plain MLP head over 7056
        # inputs (format 2: the file records the uint8 tensor it reads).
        w = self.path("catch.pb")
        a, _ = nu.run("--env", CATCH, "--num-envs", 4, "--steps", 4 * 40, "--seed", 2,
                      "--save-policy", w)
        b, _ = nu.run("--env", CATCH, "--num-envs", 4, "--steps", 4 * 40, "--seed", 2,
                      "--policy", w)
        self.assertEqual(a["mean_return"], b["mean_return"])
        self.assertEqual(a["metrics"], b["metrics"])

    def refused(self, env, *args):
        s, p = nu.run("--env", env, "--num-envs", 4, "--steps", 400, *args, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        # --json: the refusal is a line of its own, {"error": why}, and
        # never a summary.
        self.assertEqual(list(s), ["error"], s)
        self.assertIn(s["error"], p.stderr)
        return p.stderr

    def test_trainers_push_weights_of_the_envs_layout(self):
        # Every mode carries ABI 2 now: stream (test_stream_typed.py), SEED
        # (test_seed_typed.py), and trainers' pushes to a local node with
        # --listen: a format-2 file of gridworld's policy (saved by a local
        # run) is taken; a file of catch's layout is refused by name and the
        # node goes on. Each wait is for the trainer's exit or the node's.
        learner = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
        good, other = self.path("g.pb"), self.path("c.pb")
        nu.run("--env", GRID, "--num-envs", 4, "--steps", 80, "--seed", 3, "--save-policy", good)
        nu.run("--env", CATCH, "--num-envs", 4, "--steps", 80, "--seed", 3, "--save-policy",
               other)
        p = nu.spawn([nu.NODE, "--env", GRID, "--num-envs", 4, "--listen", "127.0.0.1:0",
                      "--seconds", "0", "--quiet", "--json"], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
        addr = w.listen_address(p)
        q = nu.run_cmd([learner, "--connect", addr, "--push-policy", good], capture_output=True,
                       text=True, timeout=nu.HANG_GUARD_S)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertIn("pushed the policy to 1 of 1 nodes", q.stderr)
        q = nu.run_cmd([learner, "--connect", addr, "--push-policy", other],
                       capture_output=True, text=True, timeout=nu.HANG_GUARD_S)
        self.assertEqual(q.returncode, 1, q.stderr)
        self.assertIn("action_kind is one plain head (format 2) but the env's action is "
                      "composite", q.stderr)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, err)
        s = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(s["policy_pushes"], 1)
        self.assertEqual(s["env_failures"], 0)

    def same_runs(self, a, b):
        for k in ("steps", "episodes", "mean_return", "metrics", "env_failures"):
            self.assertEqual(a[k], b[k], k)

    def test_composite_weights_files(self):
        # --save-policy then --policy FILE on the same env and seed: the same
        # run, episode for episode. The saved MLP is 32 wide, not the
        # default: the second run's weights can only come from the file.
        # gridworld: typed tensors, a mask, 2 agents; catch: MultiDiscrete
        # and Discrete heads over 84x84 uint8 pixels.
        cases = (("grid", GRID, [], 16 * 2 * 200), ("catch_md", CATCH,
                 ["--env-arg", "action=multidiscrete"], 8 * 100),
                 ("catch_d", CATCH, [], 8 * 100))
        for name, env, extra, steps in cases:
            w = self.path(name + ".pb")
            base = ["--env", env, *extra, "--num-envs", 8, "--steps", steps, "--seed", 4]
            a, _ = nu.run(*base, "--policy", "mlp", "--hidden", "32", "--save-policy", w)
            b, _ = nu.run(*base, "--policy", w)
            self.same_runs(a, b)
            self.assertGreater(a["episodes"], 0)
        # A file of another layout is refused, naming what differs.
        err = self.refused(CATCH, "--env-arg", "action=multidiscrete", "--policy",
                           self.path("grid.pb"))
        self.assertIn("grid.pb: obs_dim is", err)
        err = self.refused(CATCH, "--policy", self.path("catch_md.pb"))
        self.assertIn("action_kind is \"composite\" (an env ABI 2 policy of 5 head outputs) "
                      "but the env's action is one discrete", err)
        err = self.refused(CATCH, "--env-arg", "action=multidiscrete", "--policy",
                           self.path("catch_d.pb"))
        self.assertIn("action_kind is one plain head (format 2) but the env's action is "
                      "composite", err)

    def test_record_and_replay_carry_typed_envs(self):
        # --record takes ABI 2 envs (format version 2; more in
        # test_record_typed.py); an ABI 1 recording is not replayed with an
        # ABI 2 plugin.
        g = self.path("g.traj")
        s, _ = self.grid("--policy", "random", "--steps", 16 * 2 * 50, "--record", g)
        self.assertEqual(s["record_transitions"], s["steps"])
        p = nu.run_cmd([REPLAY, "--verify", "--plugin", GRID, g], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("verify OK: %d steps" % s["steps"], p.stderr)
        t = self.path("m.traj")
        nu.run("--env", nu.PLUGIN, "--num-envs", 2, "--steps", 40, "--record", t)
        p = nu.run_cmd([REPLAY, "--verify", t, "--plugin", GRID], capture_output=True,
                       text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("is an env ABI 2 plugin (env 'gridworld'); the recording (format version "
                      "1) is of an ABI 1 env", p.stderr)

    def test_abi1_plugin_still_runs(self):
        # MountainCar (ABI 1) through the shim: local and stream-free runs as before.
        s, _ = nu.run("--env", nu.PLUGIN, "--policy", "random", "--num-envs", 4,
                      "--steps", 4 * 200)
        self.assertEqual(s["env"], "mountaincar")
        self.assertEqual(s["agents"], 1)
        self.assertEqual(s["metrics"], {})
        self.assertEqual(s["episodes"], 4)


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH, REPLAY = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main()
