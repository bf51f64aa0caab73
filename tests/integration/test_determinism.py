"""The same seed gives each env the same episodes whatever the workers, shard
size, batch size and max-wait are."""
import unittest

import nodeutil as nu

LAYOUTS = [
    ["--workers", 1, "--shard", 1, "--batch", 1, "--max-wait-us", 0],
    ["--workers", 2, "--shard", 8, "--batch", 32, "--max-wait-us", 1000],
    ["--workers", 2, "--shard", 3, "--batch", 5, "--max-wait-us", 50],
    ["--workers", 3, "--overcommit", "--shard", 2, "--batch", 7],
]


class Determinism(nu.TempDirCase):
    def episodes(self, common, layout, tag):
        m = self.path(f"{tag}.jsonl")
        s, _ = nu.run(*common, *layout, "--metrics", m, "--metrics-episodes")
        self.assertEqual(s["dropped_metrics"], 0)
        return nu.episodes_by_env(nu.read_metrics(m))

    def check(self, common, min_episodes):
        ref = self.episodes(common, LAYOUTS[0], "ref")
        self.assertGreaterEqual(sum(len(v) for v in ref.values()), min_episodes)
        for i, layout in enumerate(LAYOUTS[1:]):
            got = self.episodes(common, layout, f"l{i}")
            self.assertEqual(sorted(got), sorted(ref))
            for env in ref:
                self.assertEqual(got[env], ref[env], f"env {env} differs under {layout}")

    def test_cartpole_mlp(self):
        self.check(["--num-envs", 64, "--steps", 64 * 3000, "--seed", 11], 5000)

    def test_pendulum_mlp_gaussian(self):
        self.check(["--env", "pendulum", "--num-envs", 32, "--steps", 32 * 1000, "--seed", 3,
                    "--hidden", "32,32", "--activation", "relu"], 160)

    def test_seed_matters(self):
        a = self.episodes(["--num-envs", 4, "--steps", 800, "--seed", 1], LAYOUTS[0], "s1")
        b = self.episodes(["--num-envs", 4, "--steps", 800, "--seed", 2], LAYOUTS[0], "s2")
        self.assertNotEqual(a, b)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
