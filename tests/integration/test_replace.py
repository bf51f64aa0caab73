"""Replacing learners leaves the node as it was: a node served by K
rollout-learners in turn (alternately SIGKILLed mid-stream and stopped with
SIGTERM) ends, once the last one is gone, with exactly the open fds, threads
and hub gauges (learners, envs in flight, envs waiting, queued bytes) it had
before the first one came, and its memory did not grow. Judged on counters
the node and the OS report at two quiet points, never on how long anything
took. (The long form, with rates over 30 minutes, is bench/soak.py.)"""
import json
import os
import signal
import subprocess
import unittest

import nodeutil as nu
import wireutil as w

LEARNER = None
NUM_ENVS = 32
K = 6  # learner generations


def fd_count(pid):
    return len(nu.open_fds(pid))


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


GAUGES = ("learners", "envs_in_flight", "envs_unsent", "queued_bytes", "oldest_wait_ms")


class Replace(nu.TempDirCase):
    def test_learner_replacements_leave_the_node_as_it_started(self):
        m = nu.Metrics(self.path("m.jsonl"))
        node, addr = w.start_node(nu.NODE, "--num-envs", NUM_ENVS, "--seconds", 0, "--metrics",
                                  m.path, "--metrics-interval", 0.05)

        def quiet():
            """A throughput line written now with no learner attached and
            every env back at the node, waiting for one."""
            r = m.next_tput()
            return r if (r["learners"] == 0 and r["envs_unsent"] == NUM_ENVS
                         and r["envs_in_flight"] == 0) else None

        start = nu.wait_for(quiet, "every env waiting for a first learner", proc=node)
        threads = proc_status(node.pid, "Threads")
        fds = rss = None
        for gen in range(K):
            lp = nu.spawn([LEARNER, "--connect", addr, "--quiet", "--name", f"gen-{gen}"],
                          stderr=subprocess.PIPE, text=True)
            before = m.tput("steps")
            nu.wait_for(lambda: m.tput("learners") == 1 and m.tput("steps") > before + 2000,
                        f"learner {gen} attaching and stepping the node", proc=node)
            lp.send_signal(signal.SIGKILL if gen % 2 == 0 else signal.SIGTERM)
            _, err = lp.communicate(timeout=nu.HANG_GUARD_S)
            if gen % 2:
                self.assertEqual(lp.returncode, 0, err)  # SIGTERM: a goodbye, exit 0
            end = nu.wait_for(quiet, f"the node taking back learner {gen}'s envs", proc=node)
            if gen == 0:  # warm-up: every path ran once
                rss = proc_status(node.pid, "VmRSS")
                # (and libuv opened its one spare descriptor per loop, with
                # the first connection's stream)
                fds = fd_count(node.pid)
        self.assertEqual(fd_count(node.pid), fds, "open fds after the last learner left")
        self.assertEqual(proc_status(node.pid, "Threads"), threads, "threads")
        self.assertEqual({k: end[k] for k in GAUGES}, {k: start[k] for k in GAUGES})
        rss_after = proc_status(node.pid, "VmRSS")
        if not nu.sanitized():  # the sanitizers hold freed memory on purpose
            self.assertLess(rss_after - rss, 4096, f"RSS {rss} -> {rss_after} KiB")
        node.send_signal(signal.SIGINT)
        out, err = node.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(node.returncode, 0, err)
        s = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(s["learners_attached"], K)


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
