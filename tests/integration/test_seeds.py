"""Seeds (docs/architecture.md#auto-reset-and-determinism): without --seed
every run draws a fresh seed, says which in its summaries and records it, so
two nodes started alike play different episodes and any run can be repeated
with --seed; --node-index I gives nodes that share a --seed their own env
streams, and node index 0 is the run seed's streams as they always were.

Run as: test_seeds.py ROLLOUT_NODE PLUGIN_SO ROLLOUT_REPLAY. Judged by the
--json summaries, the episode records of --metrics-episodes, the trajectory
header and rollout-replay's --verify and --stats; no clock."""
import json
import sys
import unittest

import nodeutil as nu
import wireutil as w

REPLAY = None

# Small and quick; one worker and shard so the layout is fixed (the episodes
# do not depend on it, test_determinism.py shows that; this keeps it cheap).
COMMON = ["--num-envs", 8, "--steps", 8 * 400, "--workers", 1]


class Seeds(nu.TempDirCase):
    def episodes(self, tag, *args):
        """(summary, {env: [(episode, return, length)]}) of one run."""
        m = self.path(f"{tag}.jsonl")
        s, _ = nu.run(*COMMON, *args, "--metrics", m, "--metrics-episodes")
        self.assertEqual(s["dropped_metrics"], 0)
        eps = nu.episodes_by_env(nu.read_metrics(m))
        self.assertEqual(sorted(eps), list(range(8)), f"{tag}: an env finished no episode")
        return s, eps

    def test_fresh_seed_per_run(self):
        a, ea = self.episodes("a")
        b, eb = self.episodes("b")
        for s in (a, b):
            self.assertTrue(s["seed_drawn"])
            self.assertEqual(s["node_index"], 0)
        self.assertNotEqual(a["seed"], b["seed"])
        self.assertNotEqual(ea, eb, "two runs without --seed played the same episodes")

    def test_same_seed_same_episodes(self):
        a, ea = self.episodes("a", "--seed", 12345)
        b, eb = self.episodes("b", "--seed", 12345)
        for s in (a, b):
            self.assertEqual(s["seed"], 12345)
            self.assertFalse(s["seed_drawn"])
        self.assertEqual(ea, eb)
        self.assertEqual((a["episodes"], a["mean_return"]), (b["episodes"], b["mean_return"]))

    def test_drawn_seed_repeats_with_seed(self):
        a, ea = self.episodes("drawn")
        b, eb = self.episodes("again", "--seed", a["seed"])
        self.assertEqual(b["seed"], a["seed"])
        self.assertEqual(ea, eb, f"--seed {a['seed']} did not repeat the run that drew it")

    def test_seed_is_in_the_summary_line(self):
        s, p = nu.run(*COMMON)
        self.assertIn(f"seed {s['seed']} (fresh: --seed repeats it), node index 0", p.stderr)
        _, p = nu.run(*COMMON, "--seed", 9, "--node-index", 4)
        self.assertIn("seed 9, node index 4\n", p.stderr)

    def test_node_index(self):
        _, plain = self.episodes("plain", "--seed", 7)
        _, zero = self.episodes("zero", "--seed", 7, "--node-index", 0)
        s1, one = self.episodes("one", "--seed", 7, "--node-index", 1)
        _, one_again = self.episodes("one_again", "--seed", 7, "--node-index", 1)
        _, two = self.episodes("two", "--seed", 7, "--node-index", 2)
        # Index 0 is the derivation every run had before --node-index.
        self.assertEqual(zero, plain)
        self.assertEqual(s1["node_index"], 1)
        self.assertNotEqual(one, zero, "--node-index 1 played node 0's episodes")
        self.assertNotEqual(two, one, "--node-index 2 played node 1's episodes")
        self.assertEqual(one, one_again, "--seed 7 --node-index 1 did not repeat itself")

    def test_help_says_the_default(self):
        p = nu.run_cmd([nu.NODE, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("a fresh one from the OS", p.stdout)
        self.assertIn("--node-index I", p.stdout)


class Welcome(unittest.TestCase):
    def welcome(self, *args):
        p, addr = w.start_node(nu.NODE, "--num-envs", 2, "--seconds", 0, *map(str, args))
        c = w.Conn(addr)
        f = c.hello()
        c.close()
        nu.kill(p)
        self.assertEqual(f.WhichOneof("body"), "welcome", f)
        return f.welcome

    def test_welcome_carries_seed_and_node_index(self):
        wl = self.welcome("--seed", 9, "--node-index", 5)
        self.assertEqual((wl.seed, wl.node_index), (9, 5))
        a, b = self.welcome(), self.welcome()  # fresh seeds, node index 0
        self.assertNotEqual(a.seed, b.seed)
        self.assertEqual((a.node_index, b.node_index), (0, 0))


class Recording(nu.TempDirCase):
    def replay(self, *args):
        return nu.run_cmd([REPLAY, *args], capture_output=True, text=True)

    def test_fresh_seed_node_index_2_replays(self):
        f = self.path("n2.traj")
        s, _ = nu.run(*COMMON, "--node-index", 2, "--record", f)
        self.assertTrue(s["seed_drawn"])
        h = w.read_header(f)
        self.assertEqual((h.seed, h.node_index), (s["seed"], 2))
        v = self.replay("--verify", "--stats", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertRegex(v.stderr, r"verify OK: \d+ steps .* bit for bit")
        self.assertIn(f"seed {s['seed']}, node index 2", v.stderr)
        total = json.loads(v.stdout.splitlines()[-1])
        self.assertEqual((total["env"], total["seed"], total["node_index"]),
                         ("all", s["seed"], 2))
        self.assertEqual(total["steps"], 8 * 400)
        # The replay uses the node index: the same file claiming node 0
        # re-creates other envs, and --verify says they diverge.
        bad = self.path("claims0.traj")
        w.rewrite_header(f, bad, node_index=0)
        v = self.replay("--verify", bad)
        self.assertEqual(v.returncode, 1, v.stderr)
        self.assertIn("verify FAILED", v.stderr)

    def test_old_file_without_node_index_replays(self):
        # A file of node index 0 has no node_index field at all (proto3
        # leaves zeros out): what every recording before it was.
        f = self.path("n0.traj")
        s, _ = nu.run(*COMMON, "--seed", 3, "--record", f)
        h = w.read_header(f)
        self.assertEqual((h.seed, h.node_index), (3, 0))
        v = self.replay("--verify", f)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("seed 3, node index 0", v.stderr)


if __name__ == "__main__":
    REPLAY = sys.argv[3]
    del sys.argv[3]
    nu.setup_from_argv()
    unittest.main(verbosity=2)
