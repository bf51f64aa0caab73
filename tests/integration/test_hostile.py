"""Hostile peers and files (issue 14): what a stranger on the node's port,
a crafted trajectory file, a plugin with bad spaces or a file cut under
rollout-replay can do, and what they must not. Each test waits for what the
processes report (an error frame, a log line, a summary, an exit status);
memory is judged by the node's RSS read from /proc, never by time.

usage: test_hostile.py ROLLOUT_NODE PLUGIN_SO ROLLOUT_REPLAY HOSTILE_SO"""
import array
import json
import mmap
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import unittest

import nodeutil as nu
import wireutil as w

REPLAY = None
HOSTILE = None
LEARNER = None


def strict_json(text):
    """json.loads that refuses NaN and Infinity, as strict parsers do."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return nu.run_cmd([str(c) for c in cmd], capture_output=True, text=True, env=e)


def replay(*args, env=None):
    return run([REPLAY, *args], env=env)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---- trajectory files, rewritten by hand (wireutil.rewrite_header) ----

def record(path, *args):
    s, _ = nu.run("--record", path, *args)
    return s


class CraftedFiles(nu.TempDirCase):
    """D1: a trajectory file never makes rollout-replay load code."""

    def test_header_naming_a_plugin_loads_nothing(self):
        f, bad = self.path("c.traj"), self.path("bad.traj")
        record(f, "--num-envs", 4, "--steps", 400)
        marker = self.path("loaded")
        # The header says the env is a plugin at an absolute path, and then
        # at a relative one (a "part file" that is an ELF): neither is loaded.
        rel = os.path.join("sub", "run.traj.1")
        os.makedirs(self.path("sub"))
        with open(HOSTILE, "rb") as src, open(self.path(rel), "wb") as dst:
            dst.write(src.read())
        for spec in (HOSTILE, rel):
            w.rewrite_header(f, bad, env="hostile", env_spec=spec)
            for mode in (["--verify"], ["--serve", "127.0.0.1:0"]):
                p = run([REPLAY, *mode, bad], env={"RO_TEST_LOADED": marker})
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--plugin", p.stderr)
                self.assertIn("never loads code", p.stderr)
                self.assertFalse(os.path.exists(marker), f"{spec} was loaded: {p.stderr}")
                self.assertNotIn("verify OK", p.stderr)

    def test_builtin_env_is_opened_by_name(self):
        # A header naming a built-in env with a plugin path as its spec: the
        # built-in is used, the path never opened.
        f, bad = self.path("c.traj"), self.path("bad.traj")
        s = record(f, "--num-envs", 4, "--steps", 400)
        w.rewrite_header(f, bad, env_spec=HOSTILE)
        marker = self.path("loaded")
        p = replay("--verify", bad, env={"RO_TEST_LOADED": marker})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"verify OK: {s['steps']} steps", p.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_plugin_must_be_the_recorded_env(self):
        f = self.path("c.traj")
        record(f, "--num-envs", 4, "--steps", 400)
        p = replay("--verify", "--plugin", HOSTILE, f)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("is env 'hostile', the recording is of env 'cartpole'", p.stderr)
        self.assertNotIn("verify OK", p.stderr)

    def test_plugin_recording_verifies_with_plugin(self):
        f = self.path("h.traj")
        s = record(f, "--env", HOSTILE, "--policy", "random", "--num-envs", 4, "--steps", 400)
        p = replay("--verify", f)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("give the plugin with --plugin PATH", p.stderr)
        p = replay("--verify", "--plugin", HOSTILE, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"verify OK: {s['steps']} steps", p.stderr)


class ShrinkingFile(nu.TempDirCase):
    """D7: a file truncated while rollout-replay reads it."""

    def test_file_cut_under_replay(self):
        f = self.path("big.traj")
        record(f, "--env", HOSTILE, "--policy", "random", "--num-envs", 64, "--steps", 64 * 4000)
        size = os.path.getsize(f)
        self.assertGreater(size, 4 << 20)  # several read windows
        cut = size // 2
        # The plugin's create() cuts the file once replay has read the header.
        p = replay("--verify", "--plugin", HOSTILE, f,
                   env={"RO_TEST_SHRINK_FILE": f, "RO_TEST_SHRINK_TO": str(cut)})
        self.assertGreaterEqual(p.returncode, 0, f"killed by signal {-p.returncode}")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"the file shrank from {size} to {cut} bytes while it was read", p.stderr)
        m = re.search(r"verify FAILED: (\d+) steps", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        self.assertGreater(int(m.group(1)), 0)  # the records before the cut were used


class ReplayVerdicts(nu.TempDirCase):
    """Issue 16: no "verify OK" after a fatal error; --env outside the file."""

    def test_no_verify_ok_after_a_fatal_error(self):
        a, b = self.path("a.traj"), self.path("b.traj")
        record(a, "--num-envs", 4, "--steps", 400, "--seed", 1)
        record(b, "--num-envs", 4, "--steps", 400, "--seed", 2)
        junk = self.path("junk.traj")
        with open(junk, "w") as fh:
            fh.write("not a trajectory\n")
        for files in ([a, b], [a, junk], [a, self.path("missing.traj")]):
            p = replay("--verify", *files)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertNotIn("verify OK", p.stderr)
            self.assertIn("verify not done", p.stderr)

    def test_env_outside_the_file(self):
        f = self.path("a.traj")
        record(f, "--num-envs", 4, "--steps", 400)
        for mode in ("--verify", "--dump", "--stats"):
            p = replay(mode, "--env", "9999", f)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--env 9999", p.stderr)
            self.assertIn("envs 0 to 3 only", p.stderr)
            self.assertEqual(p.stdout, "")


class ServeRules(nu.TempDirCase):
    """rollout-replay --serve follows the node's rules for strangers."""

    def start(self, *args):
        f = self.path("s.traj")
        if not os.path.exists(f):
            record(f, "--num-envs", 4, "--steps", 200, "--seed", 5)
        p = nu.spawn([REPLAY, "--serve", *args, f], stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "serving on" in line:
                return p, line.split()[-1]
        p.wait()
        self.fail(f"replay did not serve: exit {p.returncode}")

    def test_hello_timeout_and_other_learners(self):
        p, addr = self.start("127.0.0.1:0", "--hello-timeout", 1)
        idle = w.Conn(addr)
        f = idle.recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("no hello within 1.0 s", f.error.message)
        q = run([LEARNER, "--connect", addr, "--seed", 5, "--quiet"])
        self.assertEqual(q.returncode, 0, q.stderr)
        p.wait(timeout=nu.HANG_GUARD_S)
        err = p.stderr.read()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(": 0 mismatch(es)", err)

    def test_token_and_loopback(self):
        tok = self.path("token")
        with open(tok, "w") as fh:
            fh.write("serve-secret\n")
        os.chmod(tok, 0o600)
        f = self.path("s.traj")
        record(f, "--num-envs", 4, "--steps", 200, "--seed", 5)
        p = replay("--serve", "0.0.0.0:0", f)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("not a loopback address", p.stderr)
        srv, addr = self.start("127.0.0.1:0", "--token-file", tok)
        c = w.Conn(addr)
        g = c.hello(token="guess")
        self.assertEqual(g.WhichOneof("body"), "error")
        self.assertIn("missing or wrong token", g.error.message)
        q = run([LEARNER, "--connect", addr, "--token-file", tok, "--quiet"])
        self.assertEqual(q.returncode, 0, q.stderr)
        srv.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(srv.returncode, 0)
        self.assertNotIn("serve-secret", srv.stderr.read())

    def test_token_file_of_two_lines_is_refused(self):
        tok = self.path("token")
        with open(tok, "w") as fh:
            fh.write("first-line\nsecond-line\n")
        os.chmod(tok, 0o600)
        f = self.path("s.traj")
        record(f, "--num-envs", 4, "--steps", 200)
        for cmd in ([REPLAY, "--serve", "127.0.0.1:0", "--token-file", tok, f],
                    [nu.NODE, "--learner", "remote", "--token-file", tok, "--seconds", 0.1],
                    [LEARNER, "--connect", "127.0.0.1:1", "--token-file", tok]):
            p = run(cmd)
            self.assertEqual(p.returncode, 2, (cmd, p.stderr))
            self.assertIn("expected one line", p.stderr)


class Strangers(nu.TempDirCase):
    """D2, D3, D6 and EMFILE: strangers on the node's port."""

    def node(self, *args, env=None, preexec=None):
        p = nu.spawn([nu.NODE, "--learner", "remote", "--listen", "127.0.0.1:0", "--quiet",
                      "--json", "--num-envs", 16, "--seconds", 0, *map(str, args)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                     preexec_fn=preexec)
        addr = w.listen_address(p)
        return p, addr, nu.Lines(p.stderr)

    def good_learner(self, addr):
        q = nu.spawn([sys.executable, os.path.join(os.path.dirname(__file__), "fixed_learner.py"),
                      addr], stdout=subprocess.PIPE, text=True)
        return q, nu.Lines(q.stdout, tally=("answered",))

    def served(self, out, node, more=5):
        before = out.count("answered")
        nu.wait_for(lambda: out.count("answered") > before + more,
                    f"the good learner answering {more} more frames", proc=node)

    def stop(self, node, err):
        node.send_signal(signal.SIGINT)
        node.wait(timeout=nu.HANG_GUARD_S)
        err.thread.join()
        out = node.stdout.read()
        self.assertEqual(node.returncode, 0, err.text())
        return strict_json(out.strip().splitlines()[-1])

    def test_prehello_frames_are_refused_from_their_prefix(self):
        node, addr, err = self.node()
        for size in (4097, 16 << 20):
            c = w.Conn(addr)
            c.send_raw(w.varint(size))
            f = c.recv()
            self.assertEqual(f.WhichOneof("body"), "error")
            self.assertIn(f"frame of {size} bytes at byte 0 exceeds the limit of 4096",
                          f.error.message)
            self.assertIsNone(c.recv())
        self.stop(node, err)

    def test_63_hostile_connections_hold_little_memory(self):
        node, addr, err = self.node()
        good, out = self.good_learner(addr)
        self.served(out, node)
        base = rss_kib(node.pid)
        # Strangers: 63 partial 15 MiB frames (4 MiB of each sent) before
        # any hello.
        chunk = b"\0" * (4 << 20)
        hostile = []
        for _ in range(63):
            c = w.Conn(addr)
            try:
                c.send_raw(w.varint(15 << 20) + chunk)
            except OSError:
                pass  # refused from the prefix, closed while we sent
            hostile.append(c)
        nu.wait_for(lambda: err.count("exceeds the limit of 4096") >= 63,
                    lambda: "63 strangers refused from their prefix; log:\n" + err.text(),
                    proc=node)
        grown = rss_kib(node.pid) - base
        for c in hostile:
            c.close()
        self.served(out, node)
        if not nu.sanitized():
            self.assertLess(grown, 64 << 10, f"RSS grew by {grown} KiB")
        s = self.stop(node, err)
        good.wait(timeout=nu.HANG_GUARD_S)
        self.assertGreaterEqual(s["learners_rejected"], 63)

    def test_attached_peers_share_one_frame_budget(self):
        # Peers that said hello (trainers, on a node with local lanes) and
        # then each send most of a 15 MiB frame: at most twice
        # --max-frame-bytes is held for all of them; the rest are closed.
        node = nu.spawn([nu.NODE, "--listen", "127.0.0.1:0", "--quiet", "--json", "--seconds", 0,
                         "--num-envs", 4], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)
        addr = w.listen_address(node)
        err = nu.Lines(node.stderr)
        base = rss_kib(node.pid)
        peers = []
        for _ in range(63):
            c = w.Conn(addr)
            self.assertEqual(c.hello(role="trainer").WhichOneof("body"), "welcome")
            try:
                c.send_raw(w.varint(15 << 20) + b"\x3a" + b"\0" * (14 << 20))
            except OSError:
                pass
            peers.append(c)
        nu.wait_for(lambda: err.count("held for frames being received") >= 60,
                    lambda: "60 peers closed for the frame budget; log:\n" + err.text(),
                    proc=node)
        grown = rss_kib(node.pid) - base
        if not nu.sanitized():
            self.assertLess(grown, 64 << 10, f"RSS grew by {grown} KiB")
        for c in peers:
            c.close()
        self.stop(node, err)

    def test_idle_sockets_do_not_lock_learners_out(self):
        node, addr, err = self.node("--max-learners", 4)
        idle = [w.Conn(addr) for _ in range(64)]
        # The gate keeps 16 of them (--max-learners 4 is below its minimum):
        # the oldest are dropped as the later ones come.
        f = idle[0].recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("dropped: 16 connections wait for their hello", f.error.message)
        q = run([LEARNER, "--connect", addr, "--steps", 1000, "--quiet"])
        self.assertEqual(q.returncode, 0, q.stderr)
        for c in idle:
            c.close()
        s = self.stop(node, err)
        self.assertEqual(s["learners_attached"], 1)

    def test_peer_strings_are_escaped(self):
        node, addr, err = self.node()
        evil = "evil\x1b[2J\nrollout-node: FORGED line\x07"
        c = w.Conn(addr)
        self.assertEqual(c.hello(name=evil).WhichOneof("body"), "welcome")
        c.send(goodbye=w.pb2().Goodbye(reason=evil))
        c.close()
        c = w.Conn(addr)
        self.assertEqual(c.hello(name="x").WhichOneof("body"), "welcome")
        c.send(error=w.pb2().Error(code=5, message=evil))
        c.close()
        c = w.Conn(addr)
        f = c.hello(role=evil)
        self.assertEqual(f.WhichOneof("body"), "error")
        nu.wait_for(lambda: err.count("sent error 5") and err.count("said goodbye")
                    and err.count("is not served here"), "the three lines about the peer",
                    proc=node)
        self.stop(node, err)
        text = err.text()
        self.assertNotIn("\x1b", text)
        self.assertNotIn("\x07", text)
        self.assertFalse(any(line.startswith("rollout-node: FORGED") for line in text.splitlines()),
                         text)
        self.assertIn("evil\\x1b[2J\\x0arollout-node: FORGED line\\x07", text)

    def test_out_of_file_descriptors_is_logged_and_served_after(self):
        def few_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
        node, addr, err = self.node(preexec=few_fds)
        socks = []
        for _ in range(80):
            s = socket.socket()
            s.connect(tuple([addr.rsplit(":", 1)[0], int(addr.rsplit(":", 1)[1])]))
            socks.append(s)
        nu.wait_for(lambda: err.count("cannot accept a connection: too many open files"),
                    lambda: "the node saying it cannot accept; log:\n" + err.text(), proc=node)
        for s in socks:
            s.close()
        q = run([LEARNER, "--connect", addr, "--steps", 1000, "--quiet"])
        self.assertEqual(q.returncode, 0, q.stderr)
        self.stop(node, err)
        # At most one line a second, not one per refused peer.
        self.assertLess(err.count("cannot accept a connection"), 40, err.text())


class PluginSpaces(nu.TempDirCase):
    """D5: every plugin space is checked at start-up, the same in every mode."""

    def test_bad_spaces_are_refused_in_every_mode(self):
        cases = {
            "null_low": "the action box's low bounds are NULL",
            "null_high": "the action box's high bounds are NULL",
            "nan_bound": "the action box's bounds [-1, nan] at 1 are not a range",
            "zero_dims": "the action box has 0 dims",
            "big_dims": "the action box has 1000 dims",
            "discrete_zero": "the action space has 0 discrete actions",
            "obs_discrete": "the observation space must be a box",
        }
        for defect, needle in cases.items():
            for mode in (["--steps", 100], ["--learner", "remote", "--listen", "127.0.0.1:0",
                                            "--seconds", 0.5]):
                p = run([nu.NODE, "--env", HOSTILE, "--env-arg", f"defect={defect}",
                         "--num-envs", 4, *mode])
                self.assertEqual(p.returncode, 2, (defect, mode, p.stderr))
                self.assertIn("env 'hostile': " + needle, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


class StrictJson(nu.TempDirCase):
    """D8 and issue 16: every JSON line parses strictly; no mean without
    an episode."""

    def test_nan_returns_are_null(self):
        m = self.path("m.jsonl")
        p = run([nu.NODE, "--env", HOSTILE, "--env-arg", "reward=nan", "--policy", "random",
                 "--num-envs", 4, "--steps", 400, "--json", "--metrics", m,
                 "--metrics-episodes"])
        self.assertEqual(p.returncode, 0, p.stderr)
        s = strict_json(p.stdout.strip().splitlines()[-1])
        self.assertGreater(s["episodes"], 0)
        self.assertIsNone(s["mean_return"])
        self.assertIn("mean return n/a", p.stderr)
        with open(m) as fh:
            lines = [strict_json(line) for line in fh]
        eps = [r for r in lines if r["type"] == "episode"]
        self.assertTrue(eps)
        self.assertTrue(all(r["return"] is None for r in eps))

    def test_replay_stats_of_nan_returns_are_null(self):
        f = self.path("nan.traj")
        record(f, "--env", HOSTILE, "--env-arg", "reward=nan", "--policy", "random",
               "--num-envs", 4, "--steps", 400)
        p = replay("--stats", f)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [strict_json(line) for line in p.stdout.splitlines()]
        self.assertEqual(rows[-1]["env"], "all")
        self.assertGreater(rows[-1]["episodes"], 0)
        self.assertIsNone(rows[-1]["return_mean"])
        for line in replay("--dump", "--env", 0, f).stdout.splitlines():
            strict_json(line)

    def test_no_finished_episode_is_null(self):
        p = run([nu.NODE, "--env", HOSTILE, "--policy", "random", "--num-envs", 4, "--steps", 8,
                 "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        s = strict_json(p.stdout.strip().splitlines()[-1])
        self.assertEqual(s["episodes"], 0)
        self.assertIsNone(s["mean_return"])
        self.assertIn("0 episodes, mean return n/a", p.stderr)

    def test_learner_summary_is_strict(self):
        node, addr = w.start_node(nu.NODE, "--env", HOSTILE, "--env-arg", "reward=nan",
                                  "--num-envs", 4, "--seconds", 0)
        # --no-upgrade: in frames (a NaN in shared memory is refused by name,
        # test_python_hostile.py).
        q = run([LEARNER, "--connect", addr, "--steps", 400, "--json", "--quiet", "--no-upgrade"])
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = strict_json(q.stdout.strip().splitlines()[-1])
        self.assertGreater(ls["nodes"][0]["episodes"], 0)
        self.assertIsNone(ls["nodes"][0]["mean_return"])
        node.send_signal(signal.SIGINT)
        out, _ = node.communicate(timeout=nu.HANG_GUARD_S)
        s = strict_json(out.strip().splitlines()[-1])
        self.assertIsNone(s["mean_return"])
        # No episode finished: null, not 0.
        node, addr = w.start_node(nu.NODE, "--env", HOSTILE, "--num-envs", 4, "--seconds", 0)
        q = run([LEARNER, "--connect", addr, "--steps", 4, "--json", "--quiet"])
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = strict_json(q.stdout.strip().splitlines()[-1])
        self.assertEqual(ls["nodes"][0]["episodes"], 0)
        self.assertIsNone(ls["nodes"][0]["mean_return"])
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)


def unix_learner(path, **hello):
    """A learner on the node's Unix-domain socket at path: sends a hello
    with the fields given, and returns (the socket, the welcome frame, the
    file descriptors that came with it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(nu.HANG_GUARD_S)
    s.connect(path)
    s.sendall(w.frame_bytes(w.pb2().Frame(hello=w.pb2().Hello(
        protocol_version=1, role="learner", name="hostile", **hello))))
    buf, fds = b"", []
    while True:
        data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", cdata[:len(cdata) - len(cdata) % 4]))
        if not data:
            raise AssertionError("the node closed before its welcome")
        buf += data
        n, shift, i = 0, 0, 0
        for i, b in enumerate(buf):
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if len(buf) >= i + 1 + n:
            f = w.pb2().Frame()
            f.ParseFromString(buf[i + 1:i + 1 + n])
            return s, f, fds


# Run by an outsider: a process of the node's user that never connected.
# It tries every descriptor of the node through /proc and prints the
# memories it could open for writing.
OUTSIDER = textwrap.dedent("""
    import os, sys
    pid = sys.argv[1]
    got, tried = [], 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        tried += 1
        try:
            fd = os.open(f"/proc/{pid}/fd/{name}", os.O_RDWR)
        except OSError:
            continue
        target = os.readlink(f"/proc/self/fd/{fd}")
        if "rollout" in target:
            got.append(target)
        os.close(fd)
    print(tried, *got)
""")


class SharedMemoryPrincipals(nu.TempDirCase):
    """A (issue 31): who may touch which memory of a node on this host
    (docs/protocol.md "Who may touch which memory")."""

    def node(self, *args, prefix=()):
        path = self.path("node.sock")
        p = nu.spawn([*prefix, nu.NODE, "--listen", "unix:" + path, "--quiet", "--num-envs", 8,
                      "--seconds", 0, *map(str, args)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(w.listen_address(p), "unix:" + path)
        return p, path

    def test_an_outsider_reaches_none_of_the_nodes_memory(self):
        # The node shares observation, action and ring memory with its
        # learner; another process of the same user can open none of it
        # through /proc/PID/fd. As root, both run without CAP_SYS_PTRACE
        # (and so with the same capabilities): what two processes of one
        # ordinary user are to each other.
        same_user = []
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                self.skipTest("running as root, and no setpriv to drop CAP_SYS_PTRACE")
            same_user = ["setpriv", "--bounding-set", "-sys_ptrace"]
        node, path = self.node("--learner", "remote", prefix=same_user)
        s, f, fds = unix_learner(path, shared_memory=True, seed_memory=True, seed_ring=True)
        self.assertEqual(f.WhichOneof("body"), "welcome")
        self.assertEqual(len(fds), 3)
        out = nu.run_cmd([*same_user, sys.executable, "-c", OUTSIDER, str(node.pid)],
                         capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        tried, *got = out.stdout.split()
        self.assertGreater(int(tried), 3)  # it saw the descriptors ...
        self.assertEqual(got, [])          # ... and reached none of them
        s.close()
        for fd in fds:
            os.close(fd)
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)

    def assert_read_only(self, fd, size):
        """Memory fd (size bytes) can be read, but neither mapped writable
        nor written, not even reopened read-write through /proc."""
        mmap.mmap(fd, size, prot=mmap.PROT_READ).close()
        with self.assertRaises(PermissionError):
            mmap.mmap(fd, size)
        again = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        try:
            with self.assertRaises(PermissionError):
                os.pwrite(again, b"\xff" * 4, 0)
            with self.assertRaises(PermissionError):
                mmap.mmap(again, size)
        finally:
            os.close(again)

    def test_memory_a_learner_reads_it_cannot_write(self):
        node, path = self.node("--learner", "remote")
        s, f, fds = unix_learner(path, shared_memory=True, seed_memory=True, seed_ring=True)
        m = f.welcome.seed_memory
        self.assertEqual((m.obs_fd, m.act_fd, m.ring_fd, len(fds)), (1, 2, 3, 3))
        self.assert_read_only(fds[0], m.obs_bytes)  # the observations: the node's alone
        for fd, size in ((fds[1], m.act_bytes), (fds[2], m.ring_bytes)):
            mm = mmap.mmap(fd, size)  # its actions and rings: this learner's to write
            mm[0:4] = b"\0\0\0\0"
            mm.close()
        s.close()
        for fd in fds:
            os.close(fd)
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)
        node, path = self.node("--learner", "stream")
        s, f, fds = unix_learner(path, shared_memory=True)
        self.assertEqual((f.welcome.segment_memory_fd, len(fds)), (1, 1))
        self.assert_read_only(fds[0], f.welcome.segment_memory_bytes)
        s.close()
        os.close(fds[0])
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)

    def test_a_tcp_learner_gets_no_memory(self):
        node, addr = w.start_node(nu.NODE, "--num-envs", "4", "--seconds", "0")
        c = w.Conn(addr)
        self.addCleanup(c.close)
        c.send(hello=w.pb2().Hello(protocol_version=1, role="learner", shared_memory=True,
                                   seed_memory=True))
        f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "welcome")
        self.assertFalse(f.welcome.HasField("seed_memory"))
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)


class SocketFiles(nu.TempDirCase):
    """E (issue 31): a stopping node removes its own socket file only."""

    def start(self, path):
        p = nu.spawn([nu.NODE, "--learner", "remote", "--listen", "unix:" + path, "--quiet",
                      "--num-envs", 4, "--seconds", 0],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(w.listen_address(p), "unix:" + path)
        return p

    def test_a_stopping_node_leaves_another_nodes_socket(self):
        path = self.path("node.sock")
        first = self.start(path)
        os.unlink(path)  # someone removes it; a second node takes the path
        second = self.start(path)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(first.returncode, 0)
        # The second node's socket is still there, and still its own.
        s, f, _ = unix_learner(path)
        self.assertEqual(f.WhichOneof("body"), "welcome")
        s.close()
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=nu.HANG_GUARD_S)
        self.assertFalse(os.path.exists(path))  # its own, it removes


class TokenBytes(nu.TempDirCase):
    """Issue 31: a token is compared whole: the real one followed by a NUL
    byte and junk is no token (the decoder cut strings at a NUL)."""

    def test_a_token_with_a_nul_and_junk_is_refused(self):
        tok = self.path("token")
        with open(tok, "w") as fh:
            fh.write("the-secret\n")
        os.chmod(tok, 0o600)
        node, addr = w.start_node(nu.NODE, "--num-envs", "4", "--seconds", "0",
                                  "--token-file", tok)
        for token, name, says in (("the-secret\0junk", "x", "the hello's token holds a NUL byte"),
                                  ("the-secret", "a\0b", "the hello's name holds a NUL byte")):
            c = w.Conn(addr)
            self.addCleanup(c.close)
            g = c.hello(token=token, name=name)
            self.assertEqual(g.WhichOneof("body"), "error")
            self.assertIn(says, g.error.message)
        c = w.Conn(addr)  # the whole token still gets in
        self.addCleanup(c.close)
        self.assertEqual(c.hello(token="the-secret").WhichOneof("body"), "welcome")
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=nu.HANG_GUARD_S)

# ---- the Prometheus endpoint (issue 36): read-only, bounded ----

def http_exchange(addr, data, shut=True):
    """Send data to the endpoint at addr ("host:port"), half-close, and
    return everything it answers up to its close."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=nu.HANG_GUARD_S) as s:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b


class PrometheusStrangers(nu.TempDirCase):
    """--prometheus serves GET/HEAD /metrics and refuses the rest by name;
    it holds at most 16 connections, a bounded head each, for a bounded
    time; the node steps on through all of it."""

    def start(self):
        p = nu.spawn([nu.NODE, "--seconds", 0, "--quiet", "--json", "--num-envs", 8,
                      "--prometheus", "127.0.0.1:0"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "serving Prometheus metrics on" in line:
                self.addCleanup(nu.kill, p)
                return p, line.split(" on ")[1].split()[0]
        p.wait()
        self.fail(f"the node did not serve Prometheus metrics: exit {p.returncode}")

    def steps(self, addr):
        r = http_exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(r.startswith(b"HTTP/1.1 200 OK\r\n"), r[:200])
        m = re.search(rb"^rollout_steps_total\{[^}]*\} (\d+)$", r, re.M)
        self.assertIsNotNone(m, r[:2000])
        return int(m.group(1))

    def test_refused_by_name(self):
        p, addr = self.start()
        cases = [
            (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"405 Method Not Allowed"),
            (b"DELETE /metrics HTTP/1.1\r\n\r\n", b"405 Method Not Allowed"),
            (b"GET / HTTP/1.1\r\n\r\n", b"404 Not Found"),
            (b"GET /metrics/../etc/passwd HTTP/1.1\r\n\r\n", b"404 Not Found"),
            (b"GET /metrics HTTP/2.0\r\n\r\n", b"505 HTTP Version Not Supported"),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"505 HTTP Version Not Supported"),
            (b"GET /metrics\r\n\r\n", b"400 Bad Request"),
            (b"GET /met\x00rics HTTP/1.1\r\n\r\n", b"400 Bad Request"),
            (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n", b"400 Bad Request"),
            (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n",
             b"431 Request Header Fields Too Large"),
        ]
        for req, status in cases:
            r = http_exchange(addr, req)
            self.assertTrue(r.startswith(b"HTTP/1.1 " + status + b"\r\n"), (req[:40], r[:200]))
            self.assertIn(b"Connection: close\r\n", r)
        r = http_exchange(addr, b"POST /metrics HTTP/1.1\r\n\r\n")
        self.assertIn(b"Allow: GET, HEAD\r\n", r)
        # HEAD: the headers only; a query is ignored.
        r = http_exchange(addr, b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n")
        self.assertTrue(r.startswith(b"HTTP/1.1 200 OK\r\n"), r[:200])
        self.assertTrue(r.endswith(b"\r\n\r\n"), r[-200:])
        # The node stepped on through all of it.
        a = self.steps(addr)
        nu.wait_for(lambda: self.steps(addr) > a, "the node's steps to grow after the strangers")
        self.assertIsNone(p.poll())

    def test_connections_are_bounded_and_time_out(self):
        p, addr = self.start()
        host, port = addr.rsplit(":", 1)
        idle = [socket.create_connection((host, int(port))) for _ in range(16)]
        for s in idle:
            s.sendall(b"GET /metr")  # a head that never ends
        # A 17th connection is closed at once, unanswered.
        extra = socket.create_connection((host, int(port)), timeout=nu.HANG_GUARD_S)
        self.assertEqual(extra.recv(100), b"")
        extra.close()
        # Freeing one slot lets a scrape in while the 15 others still wait.
        idle.pop().close()
        nu.wait_for(lambda: self._scrape_ok(addr), "a scrape once a slot was freed")
        # The slow ones are closed by the endpoint's timeout (10 s), not by us.
        for s in idle:
            s.settimeout(nu.HANG_GUARD_S)
            self.assertEqual(s.recv(100), b"", "an idle connection was answered")
            s.close()
        self.assertGreater(self.steps(addr), 0)
        self.assertIsNone(p.poll())

    def _scrape_ok(self, addr):
        try:
            return self.steps(addr) > 0
        except (ConnectionError, AssertionError):
            return False


def first_error(c):
    """The first error frame the node sends on c (frames before it, its
    other batches, are passed over); fails if it closes without one."""
    while True:
        f = c.recv()
        if f is None:
            raise AssertionError("the node closed without an error frame")
        if f.WhichOneof("body") == "error":
            return f


class ActionCodes(nu.TempDirCase):
    """Issue 31: an action outside the space is error 34 (ERANGE), as
    docs/protocol.md lists it; a frame that breaks the protocol, 71."""

    def test_out_of_range_actions_are_erange(self):
        for env, bad in (("cartpole", {"discrete": [9]}), ("pendulum", {"box": [5.0]})):
            with self.subTest(env=env):
                node, addr = w.start_node(nu.NODE, "--env", env, "--num-envs", "4",
                                          "--seconds", "0")
                c = w.Conn(addr)
                self.addCleanup(c.close)
                self.assertEqual(c.hello().WhichOneof("body"), "welcome")
                f = c.recv()
                n = len(f.observations.env)
                c.send(actions=w.pb2().Actions(seq=f.observations.seq,
                                               **{k: v * n for k, v in bad.items()}))
                f = first_error(c)
                self.assertEqual(f.error.code, 34, f.error.message)
                c2 = w.Conn(addr)
                self.addCleanup(c2.close)
                self.assertEqual(c2.hello().WhichOneof("body"), "welcome")
                f = c2.recv()
                c2.send(actions=w.pb2().Actions(seq=f.observations.seq + 1000, discrete=[0]))
                self.assertEqual(first_error(c2).error.code, 71)
                node.send_signal(signal.SIGINT)
                node.communicate(timeout=nu.HANG_GUARD_S)


if __name__ == "__main__":
    REPLAY, HOSTILE = sys.argv[3], sys.argv[4]
    del sys.argv[3:5]
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
