"""SEED mode carries env ABI 2 (issue 20; docs/protocol.md "SEED mode and
env ABI 2"): the example plugins gridworld (a Dict observation of uint8 and
int32 tensors, an action mask, two agents) and catch (84x84 uint8 pixels;
Discrete, or MultiDiscrete with --env-arg action=multidiscrete) run with
--learner remote, served by rollout-learner over TCP and over a Unix socket,
and by rollout_client's VecEnv (Gymnasium-shaped spaces, masks in infos).

The plugins fail any step given a masked move (gridworld: into a wall), so
a node's env_failures of 0 says no masked action reached them. Each run
ends by its own --steps and the node's goodbye; every wait has the hang
guard of nodeutil; nothing here decides by the clock.

Run as: test_seed_abi2.py ROLLOUT_NODE PLUGIN_SO GRIDWORLD_SO CATCH_SO
(rollout-learner lies beside the node; rollout_pb2 comes from
$ROLLOUT_PROTO_OUT).
"""
import json
import os
import subprocess
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

LEARNER = GRID = CATCH = None


def start_node(env, *args, listen="127.0.0.1:0"):
    """A SEED node of env on a free loopback port (or `listen`):
    (Popen, address, stderr Lines)."""
    p = nu.spawn([nu.NODE, "--env", env, "--learner", "remote", "--listen", listen, "--json",
                  "--quiet", *map(str, args)],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "listening for learners on" in line:
            return p, line.strip().rsplit(" ", 1)[1], nu.Lines(p.stderr)
    p.wait()
    raise AssertionError(f"the SEED node did not start (exit {p.returncode})")


def summary(p, log, guard=nu.HANG_GUARD_S):
    """The node's --json summary once it exits 0."""
    try:
        p.wait(timeout=guard)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the node did not exit within {guard} s: {log.text()}") from None
    out = p.stdout.read()
    log.thread.join(timeout=10)
    assert p.returncode == 0, f"node exited {p.returncode}: {log.text()}"
    return json.loads(out.strip().splitlines()[-1])


def envs():
    """(name, env, env args, agents) of each run."""
    return (
        ("gridworld", GRID, [], 2),
        ("catch", CATCH, [], 1),
        ("catch multidiscrete", CATCH, ["--env-arg", "action=multidiscrete"], 1),
    )


class CLearner(nu.TempDirCase):
    def test_every_step_served_no_masked_move(self):
        # rollout-learner checks every frame against the welcome's layout
        # (a bad one would end it with status 1), acts with the layout's
        # policy (masks applied) and counts rows; the node checks every
        # action entry (a masked or out-of-range one would close the
        # learner's session: learners_rejected).
        for name, env, env_args, agents in envs():
            num_envs = 8
            n = num_envs * agents * 150
            for via, listen in (("tcp", "127.0.0.1:0"),
                                ("unix", "unix:" + self.path(name.replace(" ", "_") + ".sock"))):
                for policy in ("mlp", "random"):
                    with self.subTest(env=name, via=via, policy=policy):
                        p, addr, log = start_node(env, *env_args, "--num-envs", num_envs,
                                                  "--workers", 2, "--shard", 2, "--steps", n,
                                                  "--seed", 4, listen=listen)
                        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet",
                                        "--policy", policy],
                                       capture_output=True, text=True)
                        s = summary(p, log)
                        self.assertEqual(q.returncode, 0, q.stderr)
                        ls = json.loads(q.stdout.strip().splitlines()[-1])
                        node = ls["nodes"][0]
                        self.assertEqual(node["mode"], "seed")
                        self.assertEqual(s["env_failures"], 0, log.text())
                        self.assertEqual((s["learners_attached"], s["learners_rejected"]),
                                         (1, 0))
                        self.assertEqual(s["agents"], agents)
                        # Steps are rows (agent steps), on both sides.
                        self.assertEqual(s["steps"], n)
                        self.assertEqual(node["steps"], n)
                        self.assertGreater(s["episodes"], 0)
                        self.assertEqual(node["frames_in_memory"], 0)

    def test_remote_run_repeats_the_local_one(self):
        # With the node's seed the learner samples each row from the stream
        # the node's own lanes would (env e's agent a: row e x agents + a),
        # through the same layout policy and masks: the run is the local one.
        for name, env, env_args, agents in envs():
            with self.subTest(env=name):
                steps = 8 * agents * 200
                local, _ = nu.run("--env", env, *env_args, "--num-envs", 8, "--steps", steps,
                                  "--seed", 5)
                p, addr, log = start_node(env, *env_args, "--num-envs", 8, "--steps", steps,
                                          "--seed", 5, "--workers", 0)
                q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet", "--workers",
                                0, "--seed", 5], capture_output=True, text=True)
                s = summary(p, log)
                self.assertEqual(q.returncode, 0, q.stderr)
                self.assertEqual(s["env_failures"], 0)
                for k in ("steps", "episodes", "mean_return", "metrics"):
                    self.assertEqual(s[k], local[k], k)


if __name__ == "__main__":
    nu.setup_from_argv()
    GRID, CATCH = sys.argv[1:3]
    del sys.argv[1:3]
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
