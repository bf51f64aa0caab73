"""NUMA placement on a single-node machine: a declared two-node topology
(--topology / ROLLOUT_TOPOLOGY) gives two worker groups, pins read back from
the OS, node-local buffers, and --numa-node restricting the whole process."""
import json
import os
import signal
import subprocess
import unittest

import nodeutil as nu

ALLOWED = sorted(os.sched_getaffinity(0))


def node(*args, env=None):
    return nu.run_cmd([nu.NODE, *map(str, args)], capture_output=True, text=True, env=env)


def threads_of(pid):
    """{tid: (comm, affinity)} of a live process."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
            out[int(t)] = (comm, os.sched_getaffinity(int(t)))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


@unittest.skipIf(len(ALLOWED) < 2, "needs two allowed CPUs")
class Numa(nu.TempDirCase):
    def setUp(self):
        super().setUp()
        self.a, self.b = ALLOWED[0], ALLOWED[1]
        self.spec = f"0:{self.a};1:{self.b}"

    def expect_error(self, args, *needles, env=None):
        p = node(*args, env=env)
        self.assertEqual(p.returncode, 2, f"{args}: {p.stderr}")
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])

    def test_print_topology(self):
        p = node("--print-topology")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("distances:", p.stdout)
        self.assertIn("plan:", p.stdout)
        p = node("--print-topology", "--topology", self.spec)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 NUMA node(s)", p.stdout)
        self.assertIn(f"node 1: CPUs {self.b} (1)", p.stdout)
        self.assertIn(f"node 0: 1 worker(s): w0->cpu{self.a}", p.stdout)
        self.assertIn(f"node 1: 1 worker(s): w1->cpu{self.b}", p.stdout)
        self.assertRegex(p.stdout, r"\n\s+0\s+10\s+20\n")

    def check_two_nodes(self, s):
        self.assertEqual(s["numa_nodes"], 2)
        self.assertTrue(s["topology_declared"])
        self.assertEqual(s["workers"], 2)
        self.assertEqual(s["affinity_mismatches"], 0)
        self.assertEqual(s["pin_errors"], 0)
        self.assertEqual(s["mem_misplaced"], 0)
        w = s["worker_threads"]
        self.assertEqual([x["cpu"] for x in w], [self.a, self.b])
        self.assertEqual([x["node"] for x in w], [0, 1])
        self.assertTrue(all(x["tid"] > 0 for x in w))

    def test_declared_nodes_flag(self):
        s, _ = nu.run("--topology", self.spec, "--num-envs", 64, "--steps", 64 * 100)
        self.check_two_nodes(s)
        self.assertEqual(s["steps"], 64 * 100)

    def test_declared_nodes_environment(self):
        env = dict(os.environ, ROLLOUT_TOPOLOGY=self.spec)
        p = nu.run_cmd([nu.NODE, "--json", "--quiet", "--num-envs", "64", "--steps",
                        str(64 * 100)], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_two_nodes(json.loads(p.stdout.strip().splitlines()[-1]))
        self.expect_error([], "ROLLOUT_TOPOLOGY", "not in this process's allowed set",
                          env=dict(os.environ, ROLLOUT_TOPOLOGY="0:100000"))

    def test_pins_read_back_while_running(self):
        # The OS's view of every thread while the node runs: each worker is
        # pinned to exactly its planned CPU; the loop thread keeps the
        # allowed set.
        # No time limit: the test stops the node once it has looked.
        p = nu.spawn([nu.NODE, "--json", "--quiet", "--topology", self.spec, "--seconds", "0",
                      "--num-envs", "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)
        # A worker names itself ro-w-cpuN right after pinning itself: once
        # both names show, both masks are final.
        def both_workers_named():
            t = threads_of(p.pid)
            return t if sum(comm.startswith("ro-w") for comm, _ in t.values()) == 2 else None
        seen = nu.wait_for(both_workers_named, "both worker threads named (so pinned)", proc=p)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 0, err)
        s = json.loads(out.strip().splitlines()[-1])
        self.check_two_nodes(s)
        for w in s["worker_threads"]:
            self.assertIn(w["tid"], seen)
            comm, aff = seen[w["tid"]]
            self.assertEqual(comm, f"ro-w-cpu{w['cpu']}")
            self.assertEqual(aff, {w["cpu"]})
        self.assertEqual(seen[p.pid][1], set(ALLOWED))

    def test_numa_node_restricts_the_process(self):
        s, _ = nu.run("--topology", self.spec, "--numa-node", 1, "--num-envs", 32,
                      "--steps", 32 * 100)
        self.assertEqual(s["numa_node"], 1)
        self.assertEqual(s["numa_nodes"], 1)
        self.assertEqual(s["workers"], 1)
        self.assertEqual(s["cpus"], 1)
        self.assertEqual(s["allowed_cpus"], str(self.b))
        self.assertEqual(s["worker_threads"][0]["cpu"], self.b)
        self.assertEqual(s["worker_threads"][0]["node"], 1)
        self.assertEqual(s["affinity_mismatches"], 0)
        self.assertEqual(s["mem_misplaced"], 0)
        p = node("--print-topology", "--topology", self.spec, "--numa-node", 0)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"allowed CPUs {self.a};", p.stdout)
        self.assertIn(f"w0->cpu{self.a}", p.stdout)
        self.assertNotIn(f"cpu{self.b}", p.stdout)

    def test_numa_node_and_topology_errors(self):
        self.expect_error(["--topology", self.spec, "--numa-node", 5], "--numa-node 5",
                          "nodes: 0, 1")
        self.expect_error(["--topology", "0:0-1;1:1"], "--topology", "CPU 1 is in two nodes")
        self.expect_error(["--topology", "zero"], "--topology 'zero'")
        self.expect_error(["--numa-node", "x"], "--numa-node 'x'")
        self.expect_error(["--topology", self.spec, "--numa-node", 1, "--workers", 2],
                          "--workers 2", "only 1 CPUs", "--overcommit")

    def test_allowed_set_is_respected(self):
        # As under taskset, a cgroup cpuset or SLURM: the node sees only the
        # CPUs it is allowed, plans one worker on it, refuses a second.
        only_b = lambda: os.sched_setaffinity(0, {self.b})
        cmd = [nu.NODE, "--json", "--quiet", "--num-envs", "16", "--steps", "1600"]
        p = nu.run_cmd(cmd, capture_output=True, text=True, preexec_fn=only_b)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(s["cpus"], 1)
        self.assertEqual(s["workers"], 1)
        self.assertEqual(s["allowed_cpus"], str(self.b))
        self.assertEqual(s["worker_threads"][0]["cpu"], self.b)
        self.assertEqual(s["affinity_mismatches"], 0)
        p = nu.run_cmd(cmd + ["--workers", "2"], capture_output=True, text=True,
                       preexec_fn=only_b)
        self.assertEqual(p.returncode, 2)
        self.assertIn("only 1 CPUs are allowed", p.stderr)
        # A declared node over a CPU outside the allowed set is refused.
        p = nu.run_cmd([nu.NODE, "--topology", f"0:{self.a}"], capture_output=True,
                       text=True, preexec_fn=only_b)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"CPU {self.a} is not in this process's allowed set ({self.b})", p.stderr)

    def test_real_topology_numa_node(self):
        # The machine's own first node: every allowed CPU of it, bound.
        p = node("--print-topology")
        first = int(p.stdout.split("\nnode ")[1].split(":")[0])
        s, _ = nu.run("--numa-node", first, "--num-envs", 32, "--steps", 32 * 50)
        self.assertEqual(s["numa_node"], first)
        self.assertEqual(s["numa_nodes"], 1)
        self.assertFalse(s["topology_declared"])
        self.assertEqual(s["affinity_mismatches"], 0)
        self.assertEqual(s["mem_misplaced"], 0)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
