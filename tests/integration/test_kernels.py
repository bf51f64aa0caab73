"""Every instruction set of the exact kernels (--kernels scalar, avx2,
avx512: those this CPU runs) gives every env the same episodes, bit for bit:
discrete (categorical) and box (Gaussian) actions, tanh and relu, and a
layout with odd batch sizes so that rows sit in every lane position."""
import unittest

import nodeutil as nu

PATHS = ["scalar", "avx2", "avx512"]
LAYOUT = ["--workers", 2, "--shard", 3, "--batch", 7, "--max-wait-us", 50]


class Kernels(nu.TempDirCase):
    def runs(self, common):
        """{path: episodes by env} for every path this CPU runs."""
        out = {}
        for path in PATHS:
            m = self.path(f"{path}.jsonl")
            s, p = nu.run(*common, *LAYOUT, "--kernels", path, "--metrics", m,
                          "--metrics-episodes", check=False)
            if p.returncode != 0:
                # The only acceptable failure: a CPU without that instruction set.
                self.assertIn(f"this CPU cannot run the {path} kernels", p.stderr)
                continue
            self.assertEqual(s["dropped_metrics"], 0)
            out[path] = nu.episodes_by_env(nu.read_metrics(m))
        self.assertIn("scalar", out)  # the portable path runs everywhere
        return out

    def check(self, common, min_episodes):
        got = self.runs(common)
        ref = got["scalar"]
        self.assertGreaterEqual(sum(len(v) for v in ref.values()), min_episodes)
        for path, eps in got.items():
            self.assertEqual(eps, ref, f"--kernels {path} differs from --kernels scalar")
        print(f"paths compared: {sorted(got)}")

    def test_cartpole_tanh(self):
        self.check(["--num-envs", 32, "--steps", 32 * 1500, "--seed", 5], 1500)

    def test_cartpole_relu_wide(self):
        self.check(["--num-envs", 16, "--steps", 16 * 600, "--seed", 6, "--hidden", "37,19",
                    "--activation", "relu"], 300)

    def test_pendulum_gaussian(self):
        for act in ("tanh", "relu"):
            self.check(["--env", "pendulum", "--num-envs", 16, "--steps", 16 * 600, "--seed", 7,
                        "--activation", act], 40)

    def test_unknown_path(self):
        _, p = nu.run("--kernels", "sse9", "--steps", 1, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--kernels 'sse9': expected auto, avx512, avx2 or scalar", p.stderr)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
