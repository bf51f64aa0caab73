"""Snapshots in recordings (rollout-node --snapshot-every K, trajectory
format version 3) and rollout-replay --from: the node records each env's
state every K of its steps and an index; --verify from any step replays bit
for bit from the envs' snapshots (every env kind that has state: an ABI 1
built-in with box actions, a MuJoCo-free burn, an ABI 2 plugin with masks
and two agents); --dump from a step prints what a full dump prints from
there; an env without state support is refused by name at start-up; and
the flag needs --record."""
import json
import os
import re
import sys
import unittest

import nodeutil as nu

REPLAY = None
DRIFT = None
GRIDWORLD = None
DRIFT_STATE = None


def replay(*args):
    return nu.run_cmd([REPLAY, *map(str, args)], capture_output=True, text=True)


def record(path, *args):
    s, _ = nu.run("--record", path, *args)
    return s


class Snapshots(nu.TempDirCase):
    def check_from(self, f, s, plugin=()):
        total = s["steps"]
        full = replay("--verify", *plugin, f)
        self.assertEqual(full.returncode, 0, full.stderr)
        for step in (0, total // 3, total - 1, total):
            p = replay("--verify", "--from", step, *plugin, f)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("verify OK", p.stderr)
            m = re.search(r"--from \d+: (\d+) env\(s\) started from snapshots, reading from "
                          r"record (\d+)", p.stderr)
            self.assertIsNotNone(m, p.stderr)
            # Every env or none starts from a snapshot: none when one env
            # (its shard behind the others) has none before the step yet.
            # At the end every env has one.
            restored = int(m.group(1))
            self.assertIn(restored, (0, s["num_envs"]), p.stderr)
            if step == total:
                self.assertEqual(restored, s["num_envs"], p.stderr)
            if restored:
                self.assertGreater(int(m.group(2)), 1)

    def test_cartpole(self):
        f = self.path("c.traj")
        s = record(f, "--num-envs", 16, "--steps", 16 * 2000, "--snapshot-every", 100,
                   "--seed", 3)
        self.assertEqual(s["record_snapshots"], 16 * 20)
        self.assertEqual(s["record_snapshot_failures"], 0)
        self.check_from(f, s)
        # --dump from a step: the full dump's lines from the step-th step on.
        step = 12345
        full = replay("--dump", f).stdout.splitlines()
        steps = [i for i, line in enumerate(full) if '"reset":false' in line]
        first = steps[step]
        while first > 0 and '"reset":true' in full[first - 1]:
            first -= 1
        part = replay("--dump", "--from", step, f)
        self.assertEqual(part.returncode, 0, part.stderr)
        self.assertEqual(part.stdout.splitlines(), full[first:])
        # --episode ENV:EPISODE: that episode, sought from a snapshot, is
        # what filtering the whole file gives; --verify replays it.
        last = max(json.loads(line)["episode"] for line in full if '"env":5,' in line)
        for env, ep in ((5, last // 2), (0, 0)):
            want = replay("--dump", "--env", env, "--episode", ep, f).stdout
            self.assertIn('"reset":true', want)
            got = replay("--dump", "--episode", f"{env}:{ep}", f)
            self.assertEqual(got.stdout, want, got.stderr)
            v = replay("--verify", "--episode", f"{env}:{ep}", f)
            self.assertEqual(v.returncode, 0, v.stderr)
            self.assertIn(f"--episode {env}:{ep}: {1 if ep else 0} env(s) started from "
                          "snapshots", v.stderr)

    def test_pendulum_and_burn(self):
        for env, extra in (("pendulum", ()), ("burn", ("--env-arg", "cost_us=0",
                                                       "--env-arg", "obs_dim=5"))):
            f = self.path(env + ".traj")
            s = record(f, "--env", env, *extra, "--num-envs", 8, "--steps", 8 * 900,
                       "--snapshot-every", 64, "--workers", 2, "--shard", 2)
            self.assertGreater(s["record_snapshots"], 0)
            self.check_from(f, s)

    def test_abi2_plugin(self):
        f = self.path("g.traj")
        s = record(f, "--env", GRIDWORLD, "--num-envs", 6, "--steps", 2 * 6 * 500,
                   "--snapshot-every", 50)
        self.assertGreater(s["record_snapshots"], 0)
        self.check_from(f, s, plugin=("--plugin", GRIDWORLD))

    def test_refused(self):
        _, p = nu.run("--env", DRIFT, "--record", self.path("d.traj"), "--snapshot-every", 10,
                      "--steps", 100, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--snapshot-every: env 'drift' has no state support", p.stderr)
        _, p = nu.run("--snapshot-every", 10, "--steps", 100, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--snapshot-every: only with --record PATH", p.stderr)
        # A file without snapshots: --from reads it from its start.
        f = self.path("plain.traj")
        record(f, "--num-envs", 4, "--steps", 400)
        p = replay("--verify", "--from", 200, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("it has no snapshots (recorded without --snapshot-every): reading from its "
                      "start", p.stderr)
        # Modes that do not mix: one line, exit 2.
        for args, msg in ((("--serve", "127.0.0.1:0", "--from", 5), "no other mode"),
                          (("--fork", 5, "--dump", "--policy", "random", "--steps", 1,
                            "--record", self.path("o.traj")), "takes no other mode"),
                          (("--steps", 5, "--verify"), "go with --fork"),
                          (("--episode", "1:2", "--env", 3, "--dump"), "ENV:EPISODE")):
            p = replay(*args, f)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(msg, p.stderr)


def step_rows(dump_text):
    """Every step row of a --dump, in file order."""
    rows = [json.loads(line) for line in dump_text.splitlines()]
    return [r for r in rows if not r["reset"]]


class Fork(nu.TempDirCase):
    def setUp(self):
        super().setUp()
        self.parent = self.path("p.traj")
        self.s = record(self.parent, "--num-envs", 8, "--steps", 8 * 3000, "--snapshot-every",
                        100, "--seed", 5)

    def test_fork_random(self):
        f, at = self.path("f.traj"), 10000
        p = replay("--fork", at, "--policy", "random", "--steps", 4000, "--record", f,
                   self.parent)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"fork: 4000 steps of 8 env(s) from step {at} of {self.parent} with "
                      f"random into {f}", p.stderr)
        # The fork replays bit for bit from the states it starts from.
        v = replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("verify OK: 4000 steps", v.stderr)
        self.assertIn(f"it is a fork of {self.parent} at step {at}", v.stderr)
        # Each env goes on where the parent was at the step: its first step
        # in the fork is the one the parent's next step of it was.
        parent = step_rows(replay("--dump", self.parent).stdout)[at:]
        fork = step_rows(replay("--dump", f).stdout)
        for env in range(8):
            want = next(r for r in parent if r["env"] == env)
            got = next(r for r in fork if r["env"] == env)
            self.assertEqual((got["episode"], got["step"]), (want["episode"], want["step"]), env)

    def test_fork_some_envs_with_a_policy_file(self):
        pol = self.path("pol.bin")
        nu.run("--steps", 64, "--save-policy", pol)
        f = self.path("f2.traj")
        p = replay("--fork", 12345, "--policy", pol, "--steps", 1000, "--env-ids", "2,5",
                   "--record", f, self.parent)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("fork: 1000 steps of 2 env(s)", p.stderr)
        v = replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual({r["env"] for r in step_rows(replay("--dump", f).stdout)}, {2, 5})

    def test_fork_refusals(self):
        pend = self.path("pend.bin")
        nu.run("--env", "pendulum", "--steps", 64, "--save-policy", pend)
        p = replay("--fork", 5000, "--policy", pend, "--steps", 10, "--record",
                   self.path("x.traj"), self.parent)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"--fork: --policy {pend}:", p.stderr)
        p = replay("--fork", 100, "--policy", "random", self.parent)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--fork STEP needs --policy FILE|random, --steps N and --record OUT",
                      p.stderr)

    def test_fork_abi2(self):
        # An env ABI 2 recording (gridworld: 2 agents, uint8 and int32
        # tensors, an action mask) forks as an ABI 1 one does, with the
        # random policy and with a policy file of its layout: the fork
        # replays bit for bit, each env's agents go on where the parent's
        # were, and every action the fork's policy chose is one the mask it
        # saw allowed.
        g = self.path("g.traj")
        # One shard: every env has entries before the step (shards need not
        # keep pace in the file).
        record(g, "--env", GRIDWORLD, "--num-envs", 4, "--workers", 1, "--shard", 4, "--steps", 2 * 4 * 600,
               "--snapshot-every", 40, "--seed", 7)
        pol = self.path("g.pb")
        nu.run("--env", GRIDWORLD, "--steps", 64, "--save-policy", pol)
        # Steps count rows (2 a step here): the fork goes on after the env
        # step that holds row STEP, so an even STEP is where it starts.
        at = 2346
        parent = step_rows(replay("--dump", "--plugin", GRIDWORLD, g).stdout)[at:]
        for policy in ("random", pol):
            f = self.path("gf.traj")
            p = replay("--fork", at, "--policy", policy, "--steps", 3000, "--record", f,
                       "--plugin", GRIDWORLD, g)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"fork: 3000 steps of 4 env(s) from step {at} of {g}", p.stderr)
            v = replay("--verify", "--plugin", GRIDWORLD, f)
            self.assertEqual(v.returncode, 0, v.stderr)
            self.assertIn("verify OK: 3000 steps", v.stderr)
            self.assertIn(f"it is a fork of {g} at step {at}", v.stderr)
            rows = [json.loads(line)
                    for line in replay("--dump", "--plugin", GRIDWORLD, f).stdout.splitlines()]
            for env in range(4):
                for agent in range(2):
                    mine = [r for r in rows if r["env"] == env and r["agent"] == agent]
                    want = next(r for r in parent if r["env"] == env and r["agent"] == agent)
                    self.assertEqual((mine[0]["episode"], mine[0]["step"]),
                                     (want["episode"], want["step"]), (policy, env, agent))
                    checked = 0
                    for before, r in zip(mine, mine[1:]):
                        if r["reset"]:
                            continue
                        self.assertEqual(before["mask"][r["action"]["discrete"][0]], 1,
                                         (policy, env, agent, before, r))
                        checked += 1
                    self.assertGreater(checked, 300)


class Bisect(nu.TempDirCase):
    def two(self, plugin, bug_after, *extra):
        a, b = self.path("a.traj"), self.path("b.traj")
        args = ("--env", plugin, "--num-envs", 8, "--steps", 8 * 1000, "--seed", 11,
                "--policy", "random", *extra)
        record(a, *args)
        env = dict(os.environ, DRIFT_BUG_AFTER=str(bug_after))
        p = nu.run_cmd([nu.NODE, "--json", "--quiet", "--record", b, *map(str, args)],
                       capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return a, b

    def expect(self, a, b, n):
        # The bug changes every env's (n+1)-th step: env 0's is the answer.
        # a and b: a file each, or each recording's parts (lists).
        a, b = (x if isinstance(x, list) else [x] for x in (a, b))
        rows = [r for r in step_rows(replay("--dump", "--plugin", DRIFT_STATE, *a).stdout)
                if r["env"] == 0]
        want = rows[n]
        p = replay("--bisect", *a, *b)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout.strip(),
                         f"first difference: env 0, episode {want['episode']}, step "
                         f"{want['step']} (the env's step {n + 1}): obs[0]: A "
                         + p.stdout.split("obs[0]: A ", 1)[1].strip())
        return p

    def test_with_snapshots(self):
        a, b = self.two(DRIFT_STATE, 437, "--snapshot-every", 64)
        self.expect(a, b, 437)
        same = replay("--bisect", a, a)
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertIn("no difference", same.stdout)

    def test_without_snapshots(self):
        a, b = self.two(DRIFT_STATE, 250)
        p = self.expect(a, b, 250)
        self.assertIn("its entries are compared from the start", p.stderr)

    def test_rotated_parts(self):
        # Rotated recordings (--record-max-bytes: PATH, PATH.1, ...) are
        # given as their parts in order: the snapshots of every part's
        # index are searched and the entries read on across parts; the
        # answer is the one-file recordings' (the difference lies in a
        # later part here).
        # One shard (the envs keep pace in the file): env 0's step 437 lies
        # past the first part.
        a, b = self.two(DRIFT_STATE, 437, "--snapshot-every", 64, "--record-max-bytes", 50000,
                        "--workers", 1, "--shard", 8)
        pa, pb = ([x] + [f"{x}.{k}" for k in range(1, 9) if os.path.exists(f"{x}.{k}")]
                  for x in (a, b))
        self.assertGreaterEqual(min(len(pa), len(pb)), 3, (pa, pb))
        first = [r for r in step_rows(replay("--dump", "--plugin", DRIFT_STATE, pa[0]).stdout)
                 if r["env"] == 0]
        self.assertLess(len(first), 437, "the difference is in the first part")
        self.expect(pa, pb, 437)
        same = replay("--bisect", *pa, *pa)
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertIn("no difference", same.stdout)
        # Parts out of order, or one recording only: exit 2, by name.
        p = replay("--bisect", pa[0], pa[2], pa[1], *pb)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"{pa[2]} is not part 1 of the recording {pa[0]}", p.stderr)
        p = replay("--bisect", *pa)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("1 of the files given start one", p.stderr)

    def test_other_runs_refused(self):
        a, c = self.path("a.traj"), self.path("c.traj")
        record(a, "--num-envs", 4, "--steps", 400, "--seed", 1)
        record(c, "--num-envs", 4, "--steps", 400, "--seed", 2)
        p = replay("--bisect", a, c)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("are not recordings of one run", p.stderr)
        p = replay("--bisect", a)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--bisect takes two recordings, A.traj [A.traj.1 ...] B.traj", p.stderr)


if __name__ == "__main__":
    REPLAY, DRIFT, GRIDWORLD, DRIFT_STATE = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
    del sys.argv[3:7]
    nu.setup_from_argv()
    unittest.main(verbosity=2)
