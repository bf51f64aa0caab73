"""The benchmark suite's tooling (issue 16, defects 8 and 9), not its speed:

- every bench program answers --help with its usage (exit 0, nothing
  measured) and a bad flag with one line (exit 2);
- `bench/run_all.sh --quick` runs every program once, briefly, and writes
  every CSV file, results.md and the plots; the batch-sweep plot has its x
  tick labels (each batch size of the CSV), and results.md cites no file
  that does not exist.

Run as: test_bench.py SOURCE_ROOT BUILD_DIR. Nothing here is timed: the
meson timeout is only a hang guard.
"""
import csv
import os
import re
import shutil
import sys
import unittest

import nodeutil as nu

ROOT, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
PROGRAMS = ["bench_engine", "bench_kernels", "bench_scaling", "bench_overhead", "bench_rss",
            "bench_wire"]
# issue 17: bench_mujoco, where the build has MuJoCo.
MUJOCO = os.path.exists(os.path.join(BUILD, "bench", "bench_mujoco"))
if MUJOCO:
    PROGRAMS.append("bench_mujoco")


class BenchTools(nu.TempDirCase):
    def test_help_and_bad_flags(self):
        for prog in PROGRAMS:
            exe = os.path.join(BUILD, "bench", prog)
            p = nu.run_cmd([exe, "--help"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, f"{prog} --help: {p.stderr}")
            self.assertTrue(p.stdout.startswith(f"usage: {prog}"), p.stdout[:200])
            self.assertIn("--help", p.stdout)
            self.assertNotIn("|---|", p.stdout, f"{prog} --help ran the benchmark")
            p = nu.run_cmd([exe, "--bogus"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, prog)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn("--bogus", p.stderr)
        p = nu.run_cmd([os.path.join(BUILD, "bench", "bench_engine"), "--seconds", "soon"],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--seconds 'soon'", p.stderr)

    def test_run_all_quick(self):
        out = self.path("out")
        p = nu.run_cmd(["bash", os.path.join(ROOT, "bench", "run_all.sh"), "--quick", "--build",
                        BUILD, "--no-build", "--out", out, "--plot-format", "svg"],
                       capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        for f in ("engine", "kernels", "scaling", "overhead", "batch_sweep", "rss",
                  "rss_summary") + (("mujoco",) if MUJOCO else ()):
            self.assertTrue(os.path.getsize(os.path.join(out, f + ".csv")) > 0, f)
        with open(os.path.join(out, "results.md")) as f:
            results = f.read()
        self.assertIn("--quick", results)
        for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", results):
            self.assertTrue(os.path.exists(os.path.join(ROOT, name)), f"results.md cites {name}")
        for path in re.findall(r"\b(docs/[\w./-]+\.md)\b", results):
            self.assertTrue(os.path.exists(os.path.join(ROOT, path)), f"results.md cites {path}")
        if not shutil.which("gnuplot"):
            self.skipTest("gnuplot is not installed: no plots to check (install gnuplot-nox)")
        for plot in ("scaling_sps", "scaling_efficiency", "rss", "batch_sweep", "engine_vs_machine",
                     "kernels") + (("mujoco",) if MUJOCO else ()):
            self.assertTrue(os.path.exists(os.path.join(out, plot + ".svg")), plot)
        with open(os.path.join(out, "batch_sweep.csv")) as f:
            batches = sorted({int(r["batch"]) for r in csv.DictReader(f)})
        with open(os.path.join(out, "batch_sweep.svg")) as f:
            labels = set(re.findall(r"<text><tspan[^>]*>\s*([^<]*?)\s*</tspan>", f.read()))
        missing = [b for b in batches if str(b) not in labels]
        self.assertEqual(missing, [], f"batch sweep x tick labels missing (labels: {labels})")


if __name__ == "__main__":
    unittest.main(verbosity=2)
