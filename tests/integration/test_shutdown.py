"""SIGINT and SIGTERM stop a running node cleanly: exit 0, a summary, and a
complete metrics file."""
import json
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


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
