"""Whole runs: thread discipline, known random-policy baselines, plugin envs,
saved weights, metrics files."""
import importlib.util
import os
import shutil
import sys
import unittest

import nodeutil as nu

PLOT_METRICS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                            "plot_metrics.py")


class Run(nu.TempDirCase):
    def test_thread_count_is_loop_plus_workers(self):
        # With --gemm openblas every forward pass goes through OpenBLAS: its
        # thread pool must not exist. ThreadSanitizer adds a thread of its own.
        extra = 1 if nu.linked_with("libtsan") else 0
        for w in (1, 2):
            s, _ = nu.run("--workers", w, "--num-envs", 32, "--steps", 32 * 200,
                          "--gemm", "openblas")
            self.assertEqual(s["threads"], 1 + w + extra, s)
            self.assertEqual(s["threads_expected"], 1 + w)
            self.assertEqual(s["workers"], w)

    def test_cartpole_random_mean_length(self):
        # Random CartPole-v1 episodes last about 22 steps (reward 1 per step).
        s, _ = nu.run("--policy", "random", "--num-envs", 64, "--steps", 64 * 3000)
        self.assertGreater(s["episodes"], 5000)
        self.assertGreater(s["mean_return"], 21.0)
        self.assertLess(s["mean_return"], 23.7)

    def test_pendulum_random_mean_return(self):
        # Random Pendulum-v1 episodes (200 steps) return about -1200.
        s, _ = nu.run("--env", "pendulum", "--policy", "random", "--num-envs", 64,
                      "--steps", 64 * 200 * 12)
        self.assertEqual(s["episodes"], 64 * 12)
        self.assertGreater(s["mean_return"], -1320)
        self.assertLess(s["mean_return"], -1080)

    def test_steps_are_exact_and_split_evenly(self):
        s, _ = nu.run("--num-envs", 10, "--steps", 1000, "--workers", 2)
        self.assertEqual(s["steps"], 1000)
        s, _ = nu.run("--num-envs", 10, "--steps", 1001, "--workers", 2)
        self.assertEqual(s["steps"], 1010)  # rounded up to whole steps per env

    def test_plugin_env(self):
        # MountainCar under a random policy never reaches the flag: every
        # episode is cut at 200 steps.
        m = self.path("m.jsonl")
        s, _ = nu.run("--env", nu.PLUGIN, "--policy", "random", "--num-envs", 8,
                      "--steps", 8 * 400, "--metrics", m, "--metrics-episodes")
        self.assertEqual(s["env"], "mountaincar")
        self.assertEqual(s["episodes"], 16)
        self.assertAlmostEqual(s["mean_return"], -200.0)
        eps = [r for r in nu.read_metrics(m) if r["type"] == "episode"]
        self.assertTrue(all(r["truncated"] and r["length"] == 200 for r in eps))

    def test_burn_env(self):
        s, _ = nu.run("--env", "burn", "--env-arg", "cost_us=2", "--env-arg", "obs_dim=32",
                      "--num-envs", 16, "--steps", 16 * 100, "--check-finite")
        self.assertEqual(s["steps"], 1600)
        self.assertEqual(s["env_failures"], 0)

    def test_saved_weights_reproduce_the_run(self):
        w = self.path("w.pb")
        m1, m2 = self.path("a.jsonl"), self.path("b.jsonl")
        base = ["--num-envs", 8, "--steps", 8 * 300, "--seed", 5]
        nu.run(*base, "--hidden", "16,8", "--save-policy", w, "--metrics", m1,
               "--metrics-episodes")
        # The file sets the layers.
        nu.run(*base, "--policy", w, "--metrics", m2, "--metrics-episodes")
        a = nu.episodes_by_env(nu.read_metrics(m1))
        b = nu.episodes_by_env(nu.read_metrics(m2))
        self.assertTrue(a)
        self.assertEqual(a, b)

    def test_metrics_file_lines(self):
        m = self.path("m.jsonl")
        s, _ = nu.run("--num-envs", 16, "--steps", 16 * 500, "--metrics", m,
                      "--metrics-episodes", "--metrics-interval", "0.05")
        recs = nu.read_metrics(m)
        eps = [r for r in recs if r["type"] == "episode"]
        self.assertEqual(len(eps), s["episodes"])
        self.assertEqual(s["dropped_metrics"], 0)
        self.assertEqual(recs[-1]["type"], "throughput")
        self.assertEqual(recs[-1]["steps"], s["steps"])
        for r in eps:
            self.assertTrue(0 <= r["env"] < 16)
            self.assertEqual(r["return"], r["length"])  # cartpole: reward 1 per step
        tput = [r for r in recs if r["type"] == "throughput"]
        self.assertEqual(sum(r["interval_episodes"] for r in tput), s["episodes"])

    def test_metrics_every_throughput_only(self):
        """--metrics-every: throughput lines only, whose interval episodes
        and mean returns add up to the summary's (issue 16, defect 6); the
        plot script draws them."""
        m = self.path("m.jsonl")
        s, _ = nu.run("--env", "pendulum", "--num-envs", 16, "--steps", 16 * 200 * 40,
                      "--metrics", m, "--metrics-every", "0.05")
        recs = nu.read_metrics(m)
        self.assertEqual({r["type"] for r in recs}, {"throughput"})
        self.assertEqual(recs[-1]["steps"], s["steps"])
        self.assertEqual(sum(r["interval_episodes"] for r in recs), s["episodes"])
        self.assertEqual(s["episodes"], 16 * 40)
        total = sum(r["interval_episodes"] * r["interval_mean_return"] for r in recs
                    if r["interval_episodes"])
        self.assertAlmostEqual(total / s["episodes"], s["mean_return"],
                               delta=1e-9 * abs(s["mean_return"]))
        for r in recs:
            if r["interval_episodes"] == 0:
                self.assertIsNone(r["interval_mean_return"])
        png, table = self.path("m.png"), self.path("m.csv")
        p = nu.run_cmd([sys.executable, PLOT_METRICS, m, "-o", png, "--csv", table],
                       capture_output=True, text=True)
        if p.returncode == 1 and "gnuplot not found" in p.stderr:
            self.skipTest("gnuplot is not installed (gnuplot-nox)")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(table) as f:
            lines = f.read().strip().splitlines()
        self.assertEqual(len(lines), len(recs) + 1)
        # Issue 31: env steps on the x axis too (the CSV's last column is
        # each line's steps), one x range and margins for both panels, plain
        # tick labels (not 3.500k) and file names as they are (no
        # subscripts for underscores).
        self.assertEqual([float(x.split(",")[-1]) for x in lines[1:]],
                         [r["steps"] for r in recs])
        under = self.path("run_1.jsonl")
        shutil.copy(m, under)
        p = nu.run_cmd([sys.executable, PLOT_METRICS, under, "-o", png, "--x", "steps"],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        spec = importlib.util.spec_from_file_location("plot_metrics", PLOT_METRICS)
        pm = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pm)
        script = pm.gnuplot_script([(under, pm.read_series(under))], png, "t", "steps")
        self.assertIn("noenhanced", script)
        self.assertIn('title "run_1.jsonl"', script)
        self.assertEqual(script.count("set xrange [0:"), 1)  # before both panels
        self.assertIn("set lmargin", script)
        self.assertIn('set xlabel "env steps (thousands)"', script)
        self.assertNotIn("%.3s", script)
        with open(self.path("bad.jsonl"), "w") as f:
            f.write('{"type":"throughput","t":1,"sps":2}\nnot json\n')
        p = nu.run_cmd([sys.executable, PLOT_METRICS, self.path("bad.jsonl"), "-o", png],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad.jsonl:2: not a JSON line", p.stderr)

    def test_metrics_default_is_per_interval(self):
        # Without --metrics-episodes: throughput lines only, each with the
        # mean return of the episodes that ended in its interval; together
        # they give the summary's mean return.
        m = self.path("m.jsonl")
        s, _ = nu.run("--num-envs", 16, "--steps", 16 * 500, "--metrics", m,
                      "--metrics-interval", "0.02")
        recs = nu.read_metrics(m)
        self.assertTrue(recs)
        self.assertEqual({r["type"] for r in recs}, {"throughput"})
        self.assertEqual(recs[-1]["episodes"], s["episodes"])
        total, prev = 0.0, 0
        for r in recs:
            self.assertEqual(r["interval_episodes"], r["episodes"] - prev)
            prev = r["episodes"]
            if r["interval_episodes"] == 0:
                self.assertIsNone(r["interval_mean_return"])
            else:
                total += r["interval_mean_return"] * r["interval_episodes"]
        self.assertAlmostEqual(total / s["episodes"], s["mean_return"], places=6)

if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
