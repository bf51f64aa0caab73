"""SIGINT and SIGTERM stop a running node cleanly: exit 0, a summary, and a
complete metrics file. A second signal during that stop exits at once."""
import json
import os
import signal
import subprocess
import time
import unittest

import nodeutil as nu


class Shutdown(nu.TempDirCase):
    def stop_with(self, sig):
        m = self.path("m.jsonl")
        p = subprocess.Popen([nu.NODE, "--json", "--quiet", "--seconds", "0", "--num-envs", "64",
                              "--metrics", m], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1.5)
        self.assertIsNone(p.poll(), "node exited before the signal")
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        s = json.loads(out.strip().splitlines()[-1])
        self.assertGreater(s["steps"], 0)
        recs = nu.read_metrics(m)  # every line parses: nothing half-written
        eps = [r for r in recs if r["type"] == "episode"]
        # Every finished episode is either in the file or counted as dropped.
        self.assertEqual(len(eps) + s["dropped_metrics"], s["episodes"])
        self.assertEqual(recs[-1]["type"], "throughput")

    def test_sigint(self):
        self.stop_with(signal.SIGINT)

    def test_sigterm(self):
        self.stop_with(signal.SIGTERM)

    def test_second_signal_exits_at_once(self):
        # A recording draining to a very slow disk (100 ms per chunk) makes
        # the clean stop take many seconds; the second SIGINT cuts it short.
        env = dict(os.environ, RO_RECORD_DELAY_US="100000")
        p = subprocess.Popen([nu.NODE, "--quiet", "--seconds", "0", "--num-envs", "64",
                              "--record", self.path("x.traj")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        self.assertIsNone(p.poll(), "the clean stop was expected to take longer")
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
        self.assertIn("second signal: exiting without finishing", err)
        self.assertLess(time.monotonic() - t0, 5.0)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
