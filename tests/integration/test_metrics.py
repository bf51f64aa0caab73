"""Metrics where people look (issue 36): --tensorboard event files read back
by the real tensorboard package and checked against the --json summaries,
and --prometheus endpoints of a node and a learner scraped by Debian's real
prometheus server, whose HTTP API must then give the rate of
rollout_steps_total. Every wait is for what a process reports (a file, a
line, an API answer) under one hang guard.

usage: test_metrics.py ROLLOUT_NODE PLUGIN_SO

The Prometheus test is skipped (saying why) where the prometheus program is
missing, unless CI=true (.ci/install-deps installs it)."""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import unittest
import urllib.parse
import urllib.request

import nodeutil as nu

LEARNER = None


def accumulator(d):
    """TensorBoard's own reader of a run directory, every event kept."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def raw_events(d):
    """Every record of the one event file in d, through TensorBoard's
    record reader, which checks both masked CRC-32Cs of each record (a bad
    one raises DataLossError), parsed as tensorboard.Event."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    assert len(files) == 1, files
    r = PyRecordReader_New(files[0])
    out = []
    while True:
        try:
            r.GetNext()
        except errors.OutOfRangeError:
            return out
        ev = event_pb2.Event()
        ev.ParseFromString(r.record())
        out.append(ev)


def histo_totals(acc, tag):
    """(values, their sum) over every interval's histogram of tag."""
    hs = [h.histogram_value for h in acc.Histograms(tag)]
    return sum(h.num for h in hs), sum(h.sum for h in hs)


class TensorBoardFiles(nu.TempDirCase):
    def test_node_events_match_the_summary(self):
        d = self.path("tb")
        s, p = nu.run("--steps", 300000, "--num-envs", 64, "--seed", 3, "--metrics-interval",
                      0.1, "--tensorboard", d)
        self.assertIn("TensorBoard events in " + d, p.stderr)
        evs = raw_events(d)
        self.assertEqual(evs[0].file_version, "brain.Event:2")
        # The file_version event, then one per interval (how many depends on
        # the machine's speed), the last one written at the exit.
        self.assertGreaterEqual(len(evs), 2)
        self.assertTrue(all(e.HasField("summary") for e in evs[1:]))
        acc = accumulator(d)
        sps = acc.Scalars("rollout/steps_per_s")
        self.assertEqual(sps[-1].step, s["steps"], "the last event is at the run's last step")
        self.assertEqual([e.step for e in sps], sorted(e.step for e in sps))
        self.assertTrue(all(e.value >= 0 for e in sps))
        self.assertEqual(acc.Scalars("rollout/episodes")[-1].value, s["episodes"])
        self.assertEqual(acc.Scalars("rollout/env_failures")[-1].value, s["env_failures"])
        self.assertEqual(acc.Scalars("rollout/metrics_dropped")[-1].value, s["dropped_metrics"])
        self.assertEqual(s["dropped_metrics"], 0)
        # Every finished episode is in exactly one interval's histogram.
        n, total = histo_totals(acc, "rollout/episode_return")
        self.assertEqual(n, s["episodes"])
        self.assertAlmostEqual(total / n, s["mean_return"], places=9)
        n_len, steps_in_episodes = histo_totals(acc, "rollout/episode_length")
        self.assertEqual(n_len, s["episodes"])
        self.assertLessEqual(steps_in_episodes, s["steps"])
        self.assertAlmostEqual(steps_in_episodes, total)  # CartPole: a reward of 1 a step
        for e in acc.Scalars("rollout/mean_batch"):
            self.assertLessEqual(e.value, s["batch"])

    def test_start_up_failure_closes_what_was_opened(self):
        # The recorder fails after the event file and the endpoint opened:
        # exit 2 naming --record; the file holds its first event whole (and
        # under ASan nothing leaks).
        d = self.path("tb")
        s, p = nu.run("--record", self.path("no/such/dir/x.traj"), "--tensorboard", d,
                      "--prometheus", "127.0.0.1:0", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--record", p.stderr)
        evs = raw_events(d)
        self.assertEqual([e.file_version for e in evs], ["brain.Event:2"])

    def test_learner_events_match_its_summary(self):
        for mode in ("remote", "stream"):
            with self.subTest(mode=mode):
                self.learner_events(mode)

    def learner_events(self, mode):
        node, addr, log = nu.start_listening(mode, "--quiet", "--seconds", 0, "--num-envs", 32,
                                             "--tensorboard", self.path(f"node-{mode}"))
        d = self.path(f"learner-{mode}")
        q = nu.run_cmd([LEARNER, "--connect", addr, "--steps", 200000, "--json", "--quiet",
                        "--tensorboard", d, "--metrics-interval", 0.1],
                       capture_output=True, text=True)
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = json.loads(q.stdout.strip().splitlines()[-1])
        node.send_signal(signal.SIGINT)
        ns = nu.json_summary(node, log)
        acc = accumulator(d)
        self.assertEqual(acc.Scalars("learner/steps_per_s")[-1].step, ls["steps"])
        self.assertEqual(acc.Scalars("learner/episodes")[-1].value, ls["nodes"][0]["episodes"])
        if mode == "remote":  # forward passes: SEED only (a stream learner acts on nothing)
            rows, rows_sum = histo_totals(acc, "learner/batch_rows")
            self.assertEqual(rows, ls["batches"])
            self.assertEqual(rows_sum, ls["steps"])
        n, total = histo_totals(acc, "learner/episode_return")
        self.assertEqual(n, ls["nodes"][0]["episodes"])
        self.assertAlmostEqual(total / n, ls["nodes"][0]["mean_return"], places=9)
        # The node's own file, beside it, follows the node's summary.
        self.assertEqual(
            accumulator(self.path(f"node-{mode}")).Scalars("rollout/steps_per_s")[-1].step,
            ns["steps"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def addresses(p, program, *needles):
    """The addresses p printed on stderr after each of needles ("listening
    for learners on", "serving Prometheus metrics on"), in any order,
    reading its stderr up to the last of them."""
    found = {}
    for line in p.stderr:
        for n in needles:
            if n in line:
                found[n] = line.split(n, 1)[1].split()[0]
        if len(found) == len(needles):
            return [found[n] for n in needles]
    p.wait()
    raise AssertionError(f"{program} did not say {needles} (exit {p.returncode})")


PROM = "serving Prometheus metrics on"


class PrometheusServer(nu.TempDirCase):
    def api(self, base, query):
        url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)["data"]["result"]
        except OSError:
            return []  # not up yet

    def test_prometheus_scrapes_node_and_learner(self):
        prom = shutil.which("prometheus")
        if not prom:
            if os.environ.get("CI") == "true":
                self.fail("prometheus is not installed (.ci/install-deps installs it)")
            self.skipTest("prometheus is not installed (apt-get install prometheus)")
        node = nu.spawn([nu.NODE, "--learner", "remote", "--listen", "127.0.0.1:0", "--seconds",
                         0, "--quiet", "--num-envs", 32, "--node-index", 3, "--prometheus",
                         "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)
        addr, node_prom = addresses(node, "the node", "listening for learners on", PROM)
        learner = nu.spawn([LEARNER, "--connect", addr, "--quiet", "--name", "learner-a",
                            "--prometheus", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
        learner_prom, = addresses(learner, "the learner", PROM)
        # Targets as examples/slurm/rollout.sbatch lists them (file_sd).
        sd = self.path("targets.json")
        with open(sd, "w") as f:
            json.dump([{"targets": [node_prom], "labels": {"role": "node"}},
                       {"targets": [learner_prom], "labels": {"role": "learner"}}], f)
        cfg = self.path("prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: rollout\n    file_sd_configs:\n"
                    f"      - files: ['{sd}']\n")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with open(self.path("prometheus.log"), "w") as log:
            srv = nu.spawn([prom, f"--config.file={cfg}",
                            f"--storage.tsdb.path={self.path('data')}",
                            f"--web.listen-address=127.0.0.1:{port}"],
                           stdout=log, stderr=subprocess.STDOUT)

        def rates():
            res = self.api(base, "rate(rollout_steps_total[10s])")
            got = {r["metric"].get("role"): (r["metric"], float(r["value"][1])) for r in res}
            return got if all(got.get(k, (0, 0))[1] > 0 for k in ("node", "learner")) else None

        got = nu.wait_for(rates, lambda: "a rate of rollout_steps_total > 0 for the node and "
                          "the learner from Prometheus' API; its log: " +
                          open(self.path("prometheus.log")).read()[-2000:], proc=srv)
        labels, rate = got["node"]
        self.assertEqual((labels["node_index"], labels["numa_node"], labels["env"]),
                         ("3", "all", "cartpole"))
        self.assertEqual(got["learner"][0]["learner"], "learner-a")
        # A SEED node counts its loop's spins (--spin-us) for Prometheus too.
        self.assertTrue(self.api(base, 'rollout_spin_hits_total{role="node"}'))
        up = self.api(base, "up")
        self.assertEqual(sorted(r["value"][1] for r in up), ["1", "1"])
        # The histogram of returns is one Prometheus reads as a histogram.
        med = nu.wait_for(lambda: self.api(
            base, 'histogram_quantile(0.5, rate(rollout_episode_return_bucket{role="node"}[10s]))'),
            "a median episode return from the node's histogram", proc=srv)
        self.assertGreater(float(med[0]["value"][1]), 0)
        node.send_signal(signal.SIGINT)
        self.assertEqual(node.wait(timeout=nu.HANG_GUARD_S), 0)
        self.assertEqual(learner.wait(timeout=nu.HANG_GUARD_S), 0)
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=nu.HANG_GUARD_S)


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
