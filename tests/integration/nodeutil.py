"""Helpers for driving rollout-node in tests.

No test decides its outcome by the clock: a test waits for something the
processes report (a line, a metrics record, a summary field, a counter) with
wait_for, whose one generous hang guard only fires when that never happens,
and says what it was. Every process a test starts goes through spawn (or
run_cmd): it runs in its own process group and is killed and reaped at exit,
on SIGTERM (meson's timeout) too, whatever the test did."""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

NODE = None
PLUGIN = None

# Only an event that never comes takes this long; sanitizer builds on a
# loaded 2-core machine are slow, never this slow.
HANG_GUARD_S = 120.0
# Pause between two looks at an event's source (a file, a pipe, /proc).
POLL_S = 0.02


def setup_from_argv():
    """The test files are run as: test_x.py ROLLOUT_NODE PLUGIN_SO."""
    global NODE, PLUGIN
    NODE, PLUGIN = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]


def linked_with(lib, binary=None):
    """Whether a binary (the node by default) links a library (e.g. a
    sanitizer runtime)."""
    p = subprocess.run(["ldd", binary or NODE], capture_output=True, text=True)
    return lib in p.stdout


def sanitized():
    """Whether the node runs under ASan or TSan, which keep freed memory and
    history on purpose: RSS then says nothing about leaks."""
    return linked_with("libasan") or linked_with("libtsan")


# ---- processes ----

def open_fds(pid):
    """The names of the descriptors process pid holds open (/proc/PID/fd).
    rollout-node and rollout-learner are not dumpable (their shared memory
    is theirs: runtime/shared_mem.h), so only root (CAP_SYS_PTRACE) may
    list them: raises unittest.SkipTest, saying so, for anyone else."""
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except PermissionError:
        raise unittest.SkipTest(f"/proc/{pid}/fd: the node is not dumpable; only root may "
                                "look at its descriptors") from None


_started = []
_tmpdirs = set()


def spawn(argv, **kw):
    """subprocess.Popen in a new process group, killed at exit if the test
    leaves it running."""
    p = subprocess.Popen([str(a) for a in argv], start_new_session=True, **kw)
    _started.append(p)
    return p


def kill(p):
    """Kill p's process group (p and anything it started) and reap p."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def run_cmd(argv, timeout=HANG_GUARD_S, input=None, **kw):
    """subprocess.run through spawn: the child is killed if the test is."""
    if kw.pop("capture_output", False):
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    p = spawn(argv, stdin=subprocess.PIPE if input is not None else None, **kw)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(p)
        p.communicate()
        raise AssertionError(f"{argv[0]} did not exit within the {timeout} s hang guard")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def cleanup_now():
    """Kill every process the test started and remove its temp dirs."""
    for p in _started:
        kill(p)
    for d in list(_tmpdirs):
        shutil.rmtree(d, ignore_errors=True)
        _tmpdirs.discard(d)


atexit.register(cleanup_now)


def _on_sigterm(signum, frame):
    # Meson stops a test that overruns with SIGTERM: leave nothing behind
    # (this module's cleanup, and every other atexit handler, e.g. the
    # Python client's NodeProcess).
    cleanup_now()
    atexit._run_exitfuncs()
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, _on_sigterm)


# ---- waiting for events ----

def wait_for(cond, what, guard=HANG_GUARD_S, proc=None):
    """Poll cond() until it returns something true, and return that. Fails
    naming `what` (a string, or a function making one then) when the hang
    guard runs out or `proc` exits first."""
    deadline = time.monotonic() + guard
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            v = cond()  # what it did just before it exited
            if v:
                return v
            what = what() if callable(what) else what
            raise AssertionError(f"never happened: {what} (the process exited {proc.returncode})")
        if time.monotonic() > deadline:
            what = what() if callable(what) else what
            raise AssertionError(f"never happened within the {guard:.0f} s hang guard: {what}")
        time.sleep(POLL_S)


class Metrics:
    """Follows a node's --metrics file while it is written: whole lines
    only (a line is complete once its newline is there)."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.rest = ""
        self.records = []
        self.last_tput = None

    def poll(self):
        """Read what was added; returns self (records, last_tput updated)."""
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            return self
        lines = (self.rest + data).split("\n")
        self.rest = lines.pop()
        for line in lines:
            if line:
                r = json.loads(line)
                self.records.append(r)
                if r["type"] == "throughput":
                    self.last_tput = r
        return self

    def tput(self, key, default=0):
        """A field of the latest throughput line (default before one)."""
        self.poll()
        return self.last_tput[key] if self.last_tput else default

    def episodes(self):
        return [r for r in self.poll().records if r["type"] == "episode"]

    def next_tput(self):
        """Wait for a throughput line written after this call; returns it."""
        n = sum(r["type"] == "throughput" for r in self.poll().records)
        return wait_for(lambda: ([r for r in self.poll().records if r["type"] == "throughput"]
                                 [n:n + 1] or [None])[0],
                        f"a new throughput line in {self.path}")


class Lines:
    """A pipe's lines, collected by a thread. ``tally``: needles whose lines
    are only counted, not kept (a learner that prints a line per frame for
    as long as a test runs would otherwise grow without bound, and each
    count() would scan more lines: both worse the slower the machine)."""

    def __init__(self, pipe, tally=()):
        import threading
        self.lines = []
        self.tallies = dict.fromkeys(tally, 0)
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe):
        for line in pipe:
            for needle in self.tallies:
                if needle in line:
                    self.tallies[needle] += 1
                    break
            else:
                self.lines.append(line)
        pipe.close()

    def count(self, needle):
        if needle in self.tallies:
            return self.tallies[needle]
        return sum(needle in line for line in list(self.lines))

    def text(self):
        return "".join(self.lines)


def start_listening(mode, *args, listen="127.0.0.1:0"):
    """A node with --learner `mode` (remote, stream) on a free loopback port
    (or `listen`), --json: (Popen, the address it listens on, stderr
    Lines). Raises AssertionError when it exits before listening."""
    p = spawn([NODE, "--learner", mode, "--listen", listen, "--json", *map(str, args)],
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p, listen_address(p, f"the {mode} node"), Lines(p.stderr)


def listen_address(p, what="the node"):
    """The address a node started with --listen printed on stderr (it says
    so even for port 0), reading its stderr up to that line. Raises
    AssertionError when it exits first."""
    for line in p.stderr:
        if "listening for learners on" in line:
            return line.strip().rsplit(" ", 1)[1]
    p.wait()
    raise AssertionError(f"{what} did not start (exit {p.returncode})")


def json_summary(p, log, guard=HANG_GUARD_S):
    """The --json summary of a node started by start_listening, once it
    exits 0. stderr is log's thread's; stdout holds only the summary
    (--json --quiet), so waiting for the exit first cannot fill its pipe."""
    try:
        p.wait(timeout=guard)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the node did not exit within {guard} s: {log.text()}") from None
    out = p.stdout.read()
    log.thread.join(timeout=10)
    assert p.returncode == 0, f"node exited {p.returncode}: {log.text()}"
    return json.loads(out.strip().splitlines()[-1])


# ---- a disk that stalls on demand ----

def slow_disk_node():
    """rollout-node built with tests/slow_disk.c (write(2) wrapped): its
    trajectory writes wait while a DiskGate is closed. Test-only."""
    return os.environ.get("RO_SLOW_DISK_NODE") or os.path.join(
        os.path.dirname(NODE), "tests", "rollout-node-slow-disk")


class DiskGate:
    """The gate file of slow_disk_node(): created closed; env() is the
    environment that points the node at it."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "disk-gate")
        open(self.path, "w").close()

    def env(self):
        return dict(os.environ, RO_TEST_DISK_GATE=self.path)

    def held(self):
        """Whether a trajectory write has been held (the recorder stalls)."""
        return os.path.exists(self.path + ".held")

    def open(self):
        if os.path.exists(self.path):
            os.unlink(self.path)


# ---- running the node ----

def run(*args, timeout=HANG_GUARD_S, check=True):
    """Run the node with --json --quiet; return (summary dict, completed)."""
    cmd = [NODE, "--json", "--quiet", *map(str, args)]
    p = run_cmd(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}: {p.stderr}")
    summary = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    return summary, p


def read_metrics(path):
    """Parse a metrics file; every line must be one JSON object."""
    out = []
    with open(path) as f:
        for line in f:
            out.append(json.loads(line))
    return out


def episodes_by_env(records):
    """{env: [(episode, return, length), ...]} in episode order."""
    by = {}
    for r in records:
        if r["type"] == "episode":
            by.setdefault(r["env"], []).append((r["episode"], r["return"], r["length"]))
    for v in by.values():
        v.sort()
    return by


def temp_dir(what="run"):
    """A scratch directory removed at exit (and on SIGTERM), for tests that
    are not TestCases."""
    d = tempfile.mkdtemp(prefix=f"ro_test_{what}_")
    _tmpdirs.add(d)
    return d


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ro_test_")
        _tmpdirs.add(self.tmp)
        self.addCleanup(self._remove_tmp)

    def _remove_tmp(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        _tmpdirs.discard(self.tmp)

    def path(self, name):
        return os.path.join(self.tmp, name)
