"""SIGINT and SIGTERM stop a running node cleanly: exit 0, a summary, and a
complete metrics file. A second signal during that stop exits at once, even
while the stop waits for a disk that does not return (tests/slow_disk.c)."""
import json
import signal
import subprocess
import unittest

import nodeutil as nu


class Shutdown(nu.TempDirCase):
    def stop_with(self, sig):
        m = nu.Metrics(self.path("m.jsonl"))
        p = nu.spawn([nu.NODE, "--json", "--quiet", "--seconds", "0", "--num-envs", "64",
                      "--metrics", m.path, "--metrics-interval", 0.05],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        nu.wait_for(lambda: m.tput("steps") > 0, "the node stepping (a throughput line)",
                    proc=p)
        p.send_signal(sig)
        out, err = p.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, err)
        s = json.loads(out.strip().splitlines()[-1])
        self.assertGreater(s["steps"], 0)
        recs = nu.read_metrics(m.path)  # every line parses: nothing half-written
        eps = [r for r in recs if r["type"] == "episode"]
        # Every finished episode is either in the file or counted as dropped.
        self.assertEqual(len(eps) + s["dropped_metrics"], s["episodes"])
        self.assertEqual(recs[-1]["type"], "throughput")

    def test_sigint(self):
        self.stop_with(signal.SIGINT)

    def test_sigterm(self):
        self.stop_with(signal.SIGTERM)

    def test_second_signal_exits_at_once(self):
        # The recording's disk stalls for good (its gate stays closed): the
        # clean stop cannot finish, and only the second SIGINT ends the node.
        gate = nu.DiskGate(self.tmp)
        p = nu.spawn([nu.slow_disk_node(), "--seconds", "0", "--num-envs", "64",
                      "--record", self.path("x.traj")], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, env=gate.env())
        err = nu.Lines(p.stderr)
        nu.wait_for(gate.held, "a trajectory write held by the stalled disk", proc=p)
        p.send_signal(signal.SIGINT)
        nu.wait_for(lambda: err.count("SIGINT: finishing the steps in flight"),
                    "the node saying it began its clean stop", proc=p)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=nu.HANG_GUARD_S)
        err.thread.join()
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err.text())
        self.assertIn("second signal: exiting without finishing", err.text())


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
