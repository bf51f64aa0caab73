"""A one-host SLURM cluster for tests: munged, slurmctld and slurmd started
from a scratch directory with their own key, socket, ports, state and spool,
and stopped again (jobs, daemons and any process left behind) by stop().

Run as root (slurmd launches jobs). Nothing outside the scratch directory is
read or written apart from the daemons' TCP ports, which are picked free.
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Executables the cluster needs, and the Debian package of each.
PROGRAMS = {
    "munged": "munge", "munge": "munge",
    "slurmctld": "slurmctld", "slurmd": "slurmd",
    "sbatch": "slurm-client", "srun": "slurm-client", "scontrol": "slurm-client",
    "sinfo": "slurm-client", "squeue": "slurm-client", "scancel": "slurm-client",
}

# One generous hang guard for each thing the cluster waits for (the machine
# is shared and its speed varies): the failure names what never happened.
HANG_GUARD_S = 90


def missing_programs():
    """'prog (package)' for each executable that is not installed."""
    return [f"{p} ({pkg})" for p, pkg in PROGRAMS.items() if shutil.which(p) is None]


def _die_with_parent():
    """preexec_fn: the daemon gets SIGTERM if the test process dies, even by
    SIGKILL, so that a killed test leaves no daemon behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_ports(count):
    """`count` consecutive TCP ports that nothing listens on now (bound and
    released; other tests on the machine pick theirs the same way)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + count):
                t = socket.socket()
                socks.append(t)
                t.bind(("", p))
            return list(range(base, base + count))
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError(f"found no {count} consecutive free TCP ports")


def cluster_processes(scratch, exclude=()):
    """(pid, command line) of the live processes that belong to the cluster
    in `scratch`: their command line or environment names it (daemons,
    slurmstepd, the jobs' processes: they inherit SLURM_CONF and ROLLOUT_*)."""
    exclude = set(exclude) | {os.getpid()}
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in exclude:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if scratch.encode() in cmdline or scratch.encode() in environ:
            found.append((int(pid), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def kill_cluster_processes(scratch, exclude=()):
    """SIGTERM to every process of the cluster, SIGKILL to those left after
    10 s; returns what was found."""
    found = cluster_processes(scratch, exclude)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in cluster_processes(scratch, exclude):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        while cluster_processes(scratch, exclude) and time.monotonic() < deadline:
            time.sleep(0.2)
    return found


def reap(scratch):
    """The reaper: started by Cluster() in its own session with a pipe on
    stdin, it waits for EOF, which comes when the test process exits however
    it exits (SIGKILL, meson's timeout included), then kills whatever of the
    cluster is still running. After a clean stop() it finds nothing."""
    while sys.stdin.buffer.read(4096):
        pass
    for pid, cmdline in kill_cluster_processes(scratch):
        print(f"reaper: the test process is gone; killed pid {pid}: {cmdline}", flush=True)


class ClusterError(Exception):
    pass


class Cluster:
    """start() brings the cluster up (node idle in sinfo); stop() takes it
    down. stop() is safe to call at any point of start()."""

    def __init__(self, sockets):
        self.short = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count()
        if self.cpus % sockets:
            raise ValueError(f"{self.cpus} CPUs do not split into {sockets} sockets")
        self.sockets = sockets
        self.dir = tempfile.mkdtemp(prefix="rollout-slurm-")
        # munged wants every directory above its socket searchable by all.
        os.chmod(self.dir, 0o755)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.logs = os.path.join(self.dir, "log")
        self.procs = {}  # name -> Popen, in start order
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = self.conf
        # The reaper holds the read end of this pipe, the test the write end
        # until it exits. Its output goes to a file: it must not hold
        # meson's pipes open.
        rfd, self._reaper_pipe = os.pipe()
        os.makedirs(self.logs)
        with open(os.path.join(self.logs, "reaper.log"), "w") as log:
            self.reaper = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--reap", self.dir],
                stdin=rfd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(rfd)

    # -- commands ---------------------------------------------------------
    def cmd(self, *args, check=True, timeout=60, env=None, cwd=None):
        p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                           env=env or self.env, cwd=cwd)
        if check and p.returncode != 0:
            raise ClusterError(f"{' '.join(args)} exited {p.returncode}: "
                               f"{p.stderr.strip() or p.stdout.strip()}")
        return p.stdout

    def log_tail(self, name, lines=40):
        path = os.path.join(self.logs, name + ".log")
        try:
            with open(path, errors="replace") as f:
                return f"--- {path} (last {lines} lines):\n" + "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"--- {path}: {e}"

    def _spawn(self, name, args):
        log = open(os.path.join(self.logs, name + ".log"), "w")
        try:
            self.procs[name] = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env, start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()

    def wait_for(self, what, ready):
        """Polls ready() until true; fails naming `what` if a daemon exits
        first or the hang guard passes."""
        self._wait(what, ready, list(self.procs))

    def _wait(self, what, ready, daemons):
        """Polls ready() until true; fails naming `what` if a daemon in
        `daemons` exits first or the hang guard passes."""
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            if ready():
                return
            for d in daemons:
                rc = self.procs[d].poll()
                if rc is not None:
                    raise ClusterError(f"{d} exited with status {rc} before {what}\n"
                                       + self.log_tail(d))
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} did not happen within {HANG_GUARD_S} s\n"
                                   + "\n".join(self.log_tail(d) for d in daemons))
            time.sleep(0.2)

    # -- start ------------------------------------------------------------
    def start(self):
        mdir = os.path.join(self.dir, "munge")
        os.makedirs(mdir, mode=0o755)
        os.chmod(mdir, 0o755)
        key = os.path.join(mdir, "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        os.write(fd, os.urandom(1024))
        os.close(fd)
        self.munge_socket = os.path.join(mdir, "munge.sock")
        self._spawn("munged", [
            "munged", "--foreground", f"--socket={self.munge_socket}", f"--key-file={key}",
            f"--pid-file={mdir}/munged.pid", f"--seed-file={mdir}/munged.seed"])

        def munge_works():
            p = subprocess.run(["munge", "-n", "-S", self.munge_socket],
                               capture_output=True, env=self.env)
            return p.returncode == 0
        self._wait("munged answering on its socket", munge_works, ["munged"])

        ctld_port, slurmd_port = free_ports(2)
        self.write_conf(ctld_port, slurmd_port)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self._spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.short])

        def node_idle():
            p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                               text=True, env=self.env)
            return p.returncode == 0 and f"{self.short} idle" in p.stdout.split("\n")
        self._wait(f"sinfo showing node {self.short} idle", node_idle,
                   ["munged", "slurmctld", "slurmd"])

    def write_conf(self, ctld_port, slurmd_port):
        d = self.dir
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub))
        # The node is declared with `sockets` sockets of equal CPUs
        # (config_overrides makes slurmd bind tasks by this layout, not the
        # hardware's): one socket per CPU makes the per-socket script run one
        # rollout-node per CPU here; one socket holding every CPU is a real
        # machine's kind of socket, of several cores. OverSubscribe=FORCE:2
        # lets the long-run learner job share this one host with the
        # --exclusive nodes job, as it would run on a machine of its own on a
        # cluster.
        node = (f"NodeName={self.short} NodeAddr=127.0.0.1 CPUs={self.cpus} "
                f"Sockets={self.sockets} CoresPerSocket={self.cpus // self.sockets} "
                "ThreadsPerCore=1 State=UNKNOWN")
        conf = f"""\
ClusterName=rollouttest
SlurmctldHost={self.short}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
{node}
PartitionName=rollout Nodes={self.short} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2
"""
        with open(self.conf, "w") as f:
            f.write(conf)

    # -- jobs -------------------------------------------------------------
    def job_state(self, jobid):
        """The job's state (RUNNING, COMPLETED, CANCELLED...), and its exit code."""
        out = self.cmd("scontrol", "show", "job", "-o", str(jobid))
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return fields.get("JobState"), fields.get("ExitCode")

    def wait_job(self, jobid, what, final=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                           "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                                           "BOOT_FAIL", "DEADLINE")):
        """Waits until job `jobid` has left the queue (no longer pending,
        running or completing); returns its final state and exit code."""
        deadline = time.monotonic() + 3 * HANG_GUARD_S
        while True:
            state, code = self.job_state(jobid)
            queued = self.cmd("squeue", "-h", "-j", str(jobid), "-o", "%i", check=False)
            if state in final and not queued.strip():
                return state, code
            if time.monotonic() > deadline:
                raise ClusterError(f"job {jobid} ({what}) did not end within "
                                   f"{3 * HANG_GUARD_S} s: last state {state}")
            time.sleep(0.5)

    # -- stop -------------------------------------------------------------
    def cancel_all(self):
        """Cancels every queued job and waits until the queue is empty, so
        that a failed test's jobs do not hold the node's CPUs from the next
        test's; returns a list of problems (empty: clean)."""
        try:
            jobs = self.cmd("squeue", "-h", "-o", "%i", check=False).split()
            if not jobs:
                return []
            self.cmd("scancel", *jobs, check=False)
            deadline = time.monotonic() + HANG_GUARD_S
            while self.cmd("squeue", "-h", "-o", "%i", check=False).strip():
                if time.monotonic() > deadline:
                    return [f"jobs still queued {HANG_GUARD_S} s after scancel"]
                time.sleep(0.5)
        except (ClusterError, subprocess.TimeoutExpired) as e:
            return [f"cancelling jobs: {e}"]
        return []

    def stop(self):
        """Cancels every job, stops the daemons, kills anything of the
        cluster still running; returns a list of problems (empty: clean)."""
        problems = []
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            problems += self.cancel_all()
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    problems.append(f"{name} ignored SIGTERM for 30 s: killed")
                    p.kill()
                    p.wait()
        for pid, cmdline in kill_cluster_processes(self.dir, exclude=[self.reaper.pid]):
            problems.append(f"left behind, killed: pid {pid}: {cmdline}")
        os.close(self._reaper_pipe)
        self.reaper.wait()
        return problems

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--reap"]:
    reap(sys.argv[2])
