"""SLURM end to end: examples/slurm/rollout.sbatch and rollout-long.sh,
unchanged, on a one-host cluster the test brings up and takes down.

    test_slurm.py ROLLOUT_NODE ROLLOUT_LEARNER

The jobs find the two binaries in one directory (ROLLOUT_BIN) of links in
the test's scratch directory. Exits 77 (skipped), saying why, where the
SLURM or MUNGE programs are missing or it does not run as root; under
CI=true those fail instead.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import Cluster, ClusterError, free_ports, missing_programs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "slurm"))
SBATCH_SCRIPT = os.path.join(EXAMPLES, "rollout.sbatch")
LONG_SCRIPT = os.path.join(EXAMPLES, "rollout-long.sh")
CLUSTER = None


def cpu_list(text):
    """'0-2,5' -> {0, 1, 2, 5}"""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


class SlurmCase(unittest.TestCase):
    """The tests of one node layout; main() runs each subclass on a cluster
    whose node has `sockets` sockets."""
    sockets = None

    def setUp(self):
        self.env = dict(CLUSTER.env)
        self.ports = free_ports(CLUSTER.sockets)
        # Prometheus endpoints: one per node task, then the learner's.
        self.prom_ports = free_ports(CLUSTER.sockets + 1)
        self.env.update(ROLLOUT_BIN=CLUSTER.bin, ROLLOUT_PORT=str(self.ports[0]),
                        ROLLOUT_PROMETHEUS_PORT=str(self.prom_ports[0]),
                        ROLLOUT_PROMETHEUS_LEARNER_PORT=str(self.prom_ports[-1]))
        self.cwd = os.path.join(CLUSTER.dir, self.id().rsplit(".", 1)[1] + f"-{self.sockets}")
        os.makedirs(self.cwd)

    def tearDown(self):
        # A failed test leaves its jobs queued or running: cancel them, or
        # they hold the CPUs every later test's job waits for.
        problems = CLUSTER.cancel_all()
        self.assertEqual(problems, [], "cancelling this test's jobs")

    def run_dir(self, jobid):
        return os.path.join(self.cwd, f"rollout-{jobid}")

    def dump(self, *jobids):
        """The jobs' output and every file of their run directories."""
        out = []
        for j in jobids:
            for path in [os.path.join(self.cwd, f"rollout-{j}.out")] + sorted(
                    os.path.join(self.run_dir(j), f) for f in
                    (os.listdir(self.run_dir(j)) if os.path.isdir(self.run_dir(j)) else [])):
                if path.endswith("/token"):
                    continue
                try:
                    with open(path, errors="replace") as f:
                        out.append(f"--- {path}:\n{f.read()}")
                except OSError as e:
                    out.append(f"--- {path}: {e}")
        out.append(CLUSTER.log_tail("slurmctld", 20))
        out.append(CLUSTER.log_tail("slurmd", 20))
        return "\n".join(out)

    def read_json(self, path):
        with open(path) as f:
            lines = [line for line in f if line.startswith("{")]
        self.assertEqual(len(lines), 1, f"{path}: expected one JSON summary line")
        return json.loads(lines[0])

    def check_nodes(self, jobid, learners, stepped=True):
        """One node task per socket wrote a summary; each ran on exactly its
        own socket's CPUs, its workers pinned to them, and served `learners`
        learners (one count, or a list: one per node), stepping unless not
        `stepped`."""
        run = self.run_dir(jobid)
        with open(os.path.join(run, "addresses")) as f:
            addresses = f.read().split()
        # The learner attaches by host name: SLURM's node name, port per task.
        self.assertEqual(addresses, [f"{CLUSTER.short}:{p}" for p in self.ports])
        nodes = [self.read_json(os.path.join(run, f"node-{t}.json"))
                 for t in range(len(addresses))]
        per_socket = CLUSTER.cpus // CLUSTER.sockets
        seen = set()
        for t, n in enumerate(nodes):
            allowed = cpu_list(n["allowed_cpus"])
            self.assertEqual(len(allowed), per_socket, f"node {t}: not its socket's CPUs: {n}")
            self.assertFalse(allowed & seen, f"node {t}: CPUs {allowed} bound twice")
            seen |= allowed
            self.assertEqual(n["cpus"], len(allowed))
            # A SEED node steps its envs on its loop when what its workers,
            # one per CPU, would save a frame (all of its steps but their
            # 1/W) is less than a hand-off's 50 us (docs/operations.md,
            # "rollout-node's threads"); else one worker per CPU, pinned.
            saved_ns = n["env_step_ns"] * n["batch"] * (1 - 1 / len(allowed))
            if n["workers"] == 0:
                self.assertEqual((n["workers_chosen"], n["worker_threads"]), ("measured", []),
                                 f"node {t}: no workers: {n}")
                self.assertLess(saved_ns, 50000, f"node {t}: workers would have saved more: {n}")
            else:
                self.assertEqual(n["workers"], len(allowed), f"node {t}: {n}")
                self.assertEqual({w["cpu"] for w in n["worker_threads"]}, allowed,
                                 f"node {t}: workers not pinned to its CPUs: {n}")
                if n["workers_chosen"] == "measured" and n["env_step_ns"] > 0:
                    self.assertGreaterEqual(saved_ns, 50000, f"node {t}: loop was cheaper: {n}")
            self.assertEqual(n["affinity_mismatches"], 0)
            self.assertEqual(n["pin_errors"], 0)
            want = learners[t] if isinstance(learners, list) else learners
            self.assertEqual(n["learners_attached"], want, f"node {t}: {n}")
            self.assertEqual(n["learners_rejected"], 0)
            if stepped:
                self.assertGreater(n["steps"], 0)
        self.assertEqual(seen, set(range(CLUSTER.cpus)))
        return nodes

    def check_targets(self, jobid, learner_too):
        """prometheus.json (file-based service discovery) lists every node
        task's endpoint by host name, each on the port its log says it
        serves, and with learner_too the learner's."""
        run = self.run_dir(jobid)
        with open(os.path.join(run, "prometheus.json")) as f:
            groups = json.load(f)
        by_role = {g["labels"]["role"]: g for g in groups}
        self.assertEqual(set(by_role), {"node", "learner"} if learner_too else {"node"})
        nodes = by_role["node"]["targets"]
        self.assertEqual(nodes, [f"{CLUSTER.short}:{p}" for p in self.prom_ports[:-1]])
        self.assertEqual(by_role["node"]["labels"]["slurm_job"], jobid)
        for t, port in enumerate(self.prom_ports[:-1]):
            # Bound where --listen is (ROLLOUT_LISTEN_HOST), listed by name.
            with open(os.path.join(run, f"node-{t}.log")) as f:
                self.assertRegex(f.read(), f"serving Prometheus metrics on [^ ]*:{port} at ")
        if learner_too:
            self.assertEqual(by_role["learner"]["targets"],
                             [f"{CLUSTER.short}:{self.prom_ports[-1]}"])
        return nodes

    def scrape(self, target, name="rollout_steps_total"):
        """The sample of metric `name` from target's /metrics: (labels, value)."""
        with urllib.request.urlopen(f"http://{target}/metrics", timeout=30) as r:
            text = r.read().decode()
        m = re.search(rf'^{name}\{{(.*)\}} (\d+)$', text, re.M)
        self.assertTrue(m, f"{target}: no {name} in\n{text[:1000]}")
        return m.group(1), int(m.group(2))

    def sample(self, target, name):
        """Metric `name` from target's /metrics, or None while the endpoint
        does not answer yet (for wait_for)."""
        try:
            return self.scrape(target, name)[1]
        except OSError:
            return None

    def one_job(self):
        """rollout.sbatch: nodes and learner in one job, run to --steps."""
        steps = 100000
        self.env["ROLLOUT_NODE_ARGS"] = f"--env cartpole --steps {steps}"
        jobid, rc = self.submit_wait()
        self.assertEqual(rc, 0, f"job {jobid} failed\n" + self.dump(jobid))
        try:
            nodes = self.check_nodes(jobid, learners=1)
            for n in nodes:
                self.assertGreaterEqual(n["steps"], steps)
            lrn = self.check_learner(os.path.join(self.run_dir(jobid), f"learner-{jobid}.json"),
                                     nodes)
            # One learner from start to end answered every step of every node.
            self.assertEqual(sorted(n["steps"] for n in lrn["nodes"]),
                             sorted(n["steps"] for n in nodes))
            self.check_targets(jobid, learner_too=True)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.dump(jobid)}") from None

    def check_learner(self, path, nodes, budget=None):
        """The learner's summary lists every node, none failed, each with
        steps; a learner that stopped after --steps budget has at least
        budget steps in all, but need not have steps from every node (on a
        loaded machine one node may fill the budget before another's first
        frame comes: issue 31)."""
        lrn = self.read_json(path)
        self.assertEqual(len(lrn["nodes"]), len(nodes), f"{path}: {lrn}")
        ports = sorted(int(n["address"].rsplit(":", 1)[1]) for n in lrn["nodes"])
        self.assertEqual(ports, self.ports)
        for n in lrn["nodes"]:
            self.assertFalse(n["failed"], f"{path}: {n}")
            if budget is None:
                self.assertGreater(n["steps"], 0, f"{path}: no steps from {n['address']}")
        if budget is not None:
            self.assertGreaterEqual(sum(n["steps"] for n in lrn["nodes"]), budget, f"{path}")
        return lrn

    def long_run(self):
        """rollout-long.sh: a nodes job serving until scancel and a learner
        job attaching with --dependency=after that stops after --steps; then
        a second learner job, chained with --dependency=afterany, takes over
        the same nodes and is still attached when the nodes job is
        cancelled: every node writes its summary, the learner finishes."""
        self.env["ROLLOUT_NODE_ARGS"] = "--env cartpole --seconds 0"
        self.env["ROLLOUT_LEARNER_ARGS"] = "--steps 40000"
        p = subprocess.run([LONG_SCRIPT, "--nodes=1"], cwd=self.cwd, env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        ids = dict(re.findall(r"^(nodes|learner) job: (\d+)$", p.stdout, re.M))
        self.assertEqual(set(ids), {"nodes", "learner"}, p.stdout)
        nodes_job, learner1 = ids["nodes"], ids["learner"]
        jobs = [nodes_job, learner1]
        run = self.run_dir(nodes_job)
        try:
            # The documented command for the next learner; this one has no
            # step budget: it serves until the nodes stop.
            env = {k: v for k, v in self.env.items() if k != "ROLLOUT_LEARNER_ARGS"}
            learner2 = CLUSTER.cmd(
                "sbatch", "--parsable", "--nodes=1", "--ntasks=1",
                f"--dependency=afterany:{learner1}",
                f"--export=ALL,ROLLOUT_ROLE=learner,ROLLOUT_NODES_JOB={nodes_job}",
                SBATCH_SCRIPT, env=env, cwd=self.cwd).strip().split(";")[0]
            jobs.append(learner2)
            state, code = CLUSTER.wait_job(learner1, "the first learner job")
            self.assertEqual((state, code), ("COMPLETED", "0:0"), f"learner job {learner1}")

            # The second learner takes over every node: it says so on its
            # endpoint (nodes welcomed now), and then each node steps again,
            # which only its actions make it do now that the first is gone.
            # Node attach counts cannot say it: the first learner may have
            # met its budget before some node welcomed it.
            learner_target = f"{CLUSTER.short}:{self.prom_ports[-1]}"
            CLUSTER.wait_for("the second learner connected to every node (its "
                             "rollout_nodes_connected)",
                             lambda: self.sample(learner_target, "rollout_nodes_connected")
                             == len(self.ports))
            node_targets = self.check_targets(nodes_job, learner_too=False)
            before = [self.scrape(t)[1] for t in node_targets]
            CLUSTER.wait_for("every node stepping for the second learner",
                             lambda: all((self.sample(t, "rollout_steps_total") or 0) > b
                                         for t, b in zip(node_targets, before)))
            # Every target of the run's file_sd list answers a scrape with
            # its own node index; the learner job listed its own.
            for t, target in enumerate(self.check_targets(nodes_job, learner_too=False)):
                labels, _ = self.scrape(target)
                self.assertIn(f'node_index="{t}"', labels)
            with open(os.path.join(run, f"prometheus-learner-{learner2}.json")) as f:
                self.assertEqual(json.load(f)[0]["targets"],
                                 [f"{CLUSTER.short}:{self.prom_ports[-1]}"])
            self.scrape(f"{CLUSTER.short}:{self.prom_ports[-1]}")
            state, _ = CLUSTER.job_state(nodes_job)
            self.assertEqual(state, "RUNNING", "the nodes job should serve until cancelled")
            CLUSTER.cmd("scancel", nodes_job)
            state, _ = CLUSTER.wait_job(nodes_job, "the nodes job, cancelled")
            self.assertEqual(state, "CANCELLED")
            state, code = CLUSTER.wait_job(learner2, "the second learner job")
            self.assertEqual((state, code), ("COMPLETED", "0:0"), f"learner job {learner2}")
            # Each node served the second learner, and the first where the
            # first's summary names the node (its welcome came).
            first = self.read_json(os.path.join(run, f"learner-{learner1}.json"))
            welcomed = {n["address"] for n in first["nodes"] if int(n["node_id"], 16) != 0}
            with open(os.path.join(run, "addresses")) as f:
                served = [1 + (a in welcomed) for a in f.read().split()]
            nodes = self.check_nodes(nodes_job, learners=served)
            self.check_learner(os.path.join(run, f"learner-{learner1}.json"), nodes,
                               budget=40000)
            self.check_learner(os.path.join(run, f"learner-{learner2}.json"), nodes)
        except (AssertionError, ClusterError) as e:
            raise AssertionError(f"{e}\n{self.dump(*jobs)}") from None

    def submit_wait(self):
        """sbatch --wait rollout.sbatch; (job id, sbatch's exit status)."""
        try:
            p = subprocess.run(["sbatch", "--wait", "--parsable", "--nodes=1", SBATCH_SCRIPT],
                               cwd=self.cwd, env=self.env, capture_output=True, text=True,
                               timeout=3 * 90)
        except subprocess.TimeoutExpired:
            jobs = CLUSTER.cmd("squeue", "-h", "-o", "%i", check=False).split()
            raise AssertionError(f"sbatch --wait: the job did not end within {3 * 90} s\n"
                                 + self.dump(*jobs)) from None
        m = re.match(r"(\d+)", p.stdout)
        self.assertTrue(m, f"sbatch printed no job id: {p.stdout} {p.stderr}")
        return m.group(1), p.returncode

    def job_output(self, jobid):
        with open(os.path.join(self.cwd, f"rollout-{jobid}.out")) as f:
            return f.read()

    def node_fails(self):
        """Nodes that cannot start fail the job, which says why."""
        self.env["ROLLOUT_NODE_ARGS"] = "--env no-such-env"
        jobid, rc = self.submit_wait()
        self.assertNotEqual(rc, 0, self.dump(jobid))
        out = self.job_output(jobid)
        self.assertIn("gave up waiting for node task 0", out)
        self.assertIn("unknown env 'no-such-env'", out)
        self.assertFalse(os.path.exists(os.path.join(self.run_dir(jobid), "addresses")))

    def learner_fails(self):
        """A learner that fails fails the job, which says why, and the
        nodes are stopped with SIGTERM: each still writes its summary."""
        self.env["ROLLOUT_NODE_ARGS"] = "--env cartpole --seconds 0"
        self.env["ROLLOUT_LEARNER_ARGS"] = "--no-such-flag"
        jobid, rc = self.submit_wait()
        self.assertNotEqual(rc, 0, self.dump(jobid))
        out = self.job_output(jobid)
        self.assertIn("the learner failed", out)
        self.assertIn("--no-such-flag", out)
        try:
            self.check_nodes(jobid, learners=0, stepped=False)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.dump(jobid)}") from None


class SocketPerCpu(SlurmCase):
    """One socket per CPU: the per-socket script runs one node per CPU."""
    sockets = os.cpu_count()

    def test_one_job(self):
        self.one_job()

    def test_long_run(self):
        self.long_run()

    def test_node_fails(self):
        self.node_fails()

    def test_learner_fails(self):
        self.learner_fails()


class OneSocket(SlurmCase):
    """One socket of every CPU: one node, bound to all of them."""
    sockets = 1

    def test_one_job(self):
        self.one_job()


def run_layout(case, binaries):
    """Brings a cluster up with case.sockets sockets, runs the case's tests
    on it, takes it down; whether all passed and the stop was clean."""
    global CLUSTER
    CLUSTER = Cluster(case.sockets)
    ok = False
    try:
        CLUSTER.bin = os.path.join(CLUSTER.dir, "bin")
        os.makedirs(CLUSTER.bin)
        for path, name in zip(binaries, ("rollout-node", "rollout-learner")):
            os.symlink(path, os.path.join(CLUSTER.bin, name))
        CLUSTER.start()
        print(f"slurm: cluster up in {CLUSTER.dir}: node {CLUSTER.short}, {CLUSTER.cpus} CPUs "
              f"in {CLUSTER.sockets} socket(s)", file=sys.stderr)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
        ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    except ClusterError as e:
        print(f"slurm: the cluster did not come up: {e}", file=sys.stderr)
    finally:
        problems = CLUSTER.stop()
        for p in problems:
            print(f"slurm: stop: {p}", file=sys.stderr)
        if problems:
            ok = False
        if ok:
            CLUSTER.remove()
        else:
            print(f"slurm: scratch directory kept: {CLUSTER.dir}", file=sys.stderr)
    return ok


def main():
    binaries = [os.path.abspath(sys.argv.pop(1)) for _ in range(2)]
    in_ci = os.environ.get("CI") == "true"
    why = None
    missing = missing_programs()
    if missing:
        why = "not installed: " + ", ".join(missing) + " (.ci/install-deps installs them)"
    elif os.geteuid() != 0:
        why = "needs root (slurmd launches the jobs)"
    if why:
        print(f"slurm: {why}", file=sys.stderr)
        sys.exit(1 if in_ci else 77)

    # The learner connects to the node's name, which must resolve here.
    short = socket.gethostname().split(".")[0]
    try:
        socket.getaddrinfo(short, None)
    except OSError as e:
        print(f"slurm: the host name {short!r} (hostname -s) does not resolve ({e}): the "
              "nodes listen on it and the learner connects to it", file=sys.stderr)
        sys.exit(1)

    # meson's timeout sends SIGTERM: unwind, so that the cluster is stopped.
    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    ok = True
    for case in (SocketPerCpu, OneSocket):
        ok = run_layout(case, binaries) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
