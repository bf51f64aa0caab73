"""Fault injection over real links: two rollout-nodes and one rollout-learner,
each in its own network namespace, the learner joined to each node by a veth
pair (learner<->A on 10.N.1.0/24, learner<->B on 10.N.2.0/24). The link to
node A is cut by setting A's end of its veth down, then restored:

- a short cut (shorter than A's --learner-timeout and the learner's TCP
  timeouts) is ridden out: A goes on over the same connection, no new attach;
- a long cut (held until A has timed the learner out): meanwhile the learner
  keeps serving B while A stands still; once the link is back the learner
  reconnects, A steps again, and the batch in flight at the cut was resent;
- a cut with no --learner-timeout on the node: the node's own keepalive and
  TCP user timeout close the dead session, and the learner comes back.

Both nodes and the learner exit 0 at the end. Everything is judged by what the
processes report (metrics, logs, summaries), each wait with one generous hang
guard; a sleep only holds a cut link for a while. The short cut is 0.5 s
against timeouts of 3 s and more. Times are printed, never judged.

Run as: test_netns.py ROLLOUT_NODE PLUGIN_SO (rollout-learner lies beside the
node). Needs root and iproute2's `ip`; exits 77 (skipped), saying why, where
network namespaces cannot be created."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

import nodeutil as nu

SKIP = 77
PID = os.getpid()
NS_L, NS_A, NS_B = f"ro{PID}l", f"ro{PID}a", f"ro{PID}b"
NET = 1 + PID % 250  # concurrent runs (release, ASan, TSan builds) use different subnets
ADDR_A, ADDR_B = f"10.{NET}.1.2", f"10.{NET}.2.2"
PORT = 5555
TIMEOUT_A = 3.0  # node A's --learner-timeout
SHORT_CUT = 0.5  # a sixth of TIMEOUT_A, a tenth of the 5 s TCP user timeouts
# How node A may see the dead session end: its --learner-timeout, or its own
# TCP keepalive/user timeout (whichever the kernel and the loop make first).
# A learner in another namespace that reaches the node's private socket.
NETNS_REFUSED = "upgrade refused: the peer is in another network namespace"
DEAD_SESSION = ("no actions for", "connection timed out", "network is unreachable",
                "host is unreachable")
IP = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip")
                                 if os.access(p, os.X_OK)), None)
LEARNER = None


def ip(*args, check=True):
    p = nu.run_cmd([IP, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


def create_namespaces():
    """The three namespaces and the two veth pairs, up. Returns None, or why
    this machine cannot have them."""
    if IP is None:
        return "iproute2's ip is not installed"
    delete_namespaces()  # left over by a killed run that had our pid
    p = ip("netns", "add", NS_L, check=False)
    if p.returncode != 0:
        return f"cannot create network namespaces: {p.stderr.strip()}"
    try:
        ip("netns", "add", NS_A)
        ip("netns", "add", NS_B)
        for peer, ns, k in (("va", NS_A, 1), ("vb", NS_B, 2)):
            ip("-n", NS_L, "link", "add", peer, "type", "veth", "peer", "name", "v0", "netns", ns)
            ip("-n", NS_L, "addr", "add", f"10.{NET}.{k}.1/24", "dev", peer)
            ip("-n", ns, "addr", "add", f"10.{NET}.{k}.2/24", "dev", "v0")
            ip("-n", NS_L, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "v0", "up")
        for ns in (NS_L, NS_A, NS_B):
            ip("-n", ns, "link", "set", "lo", "up")
    except RuntimeError as e:
        return f"cannot set up veth links between network namespaces: {e}"
    return None


def delete_namespaces():
    """Deleting a namespace deletes its veth ends (and their peers)."""
    if IP is not None:
        for ns in (NS_L, NS_A, NS_B):
            ip("netns", "del", ns, check=False)


class Proc:
    """A process in a namespace (`ip netns exec` execs it: same pid); a thread
    keeps its stderr lines with their arrival times."""

    def __init__(self, ns, argv):
        self.p = nu.spawn([IP, "netns", "exec", ns, *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def log(self):
        return "\n".join(line for _, line in list(self.lines))

    def find(self, needle, after=0.0):
        """Arrival time of the first line with needle (or, for a tuple, any
        of them) at or after `after`."""
        needles = needle if isinstance(needle, tuple) else (needle,)
        for t, line in list(self.lines):
            if t >= after and any(n in line for n in needles):
                return t
        return None

    def count(self, needle):
        return sum(needle in line for _, line in list(self.lines))

    def wait_line(self, needle, after=0.0):
        """Arrival time of the first line with needle at or after `after`,
        waiting for it (with the hang guard)."""
        return nu.wait_for(lambda: self.find(needle, after),
                           lambda: f"a line with {needle!r}; the log:\n{self.log()}", proc=self.p)

    def finish(self, timeout=nu.HANG_GUARD_S):
        """Wait for the exit; return (status, the --json summary or None)."""
        self.p.wait(timeout=timeout)
        out = self.p.stdout.read()
        self.reader.join()
        self.close()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return self.p.returncode, json.loads(lines[-1]) if lines else None

    def close(self):
        self.p.stdout.close()
        if not self.reader.is_alive():
            self.p.stderr.close()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
            self.reader.join(timeout=10)
        if not self.p.stdout.closed:
            self.close()


def wait_rising(m, above, what):
    """Wait until the steps of m (a nu.Metrics) exceed `above`; returns when
    (for the printed figures only)."""
    nu.wait_for(lambda: m.tput("steps") > above, f"{what}: steps above {above}")
    return time.monotonic()


def link(ns, state):
    ip("-n", ns, "link", "set", "v0", state)


class CutLink(nu.TempDirCase):
    def setUp(self):
        super().setUp()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
        for ns in (NS_A, NS_B):  # a test that failed mid-cut leaves the next one a link
            ip("-n", ns, "link", "set", "v0", "up", check=False)
        super().tearDown()

    def node(self, ns, addr, timeout, metrics, token):
        """A node the test stops with SIGINT (--seconds only bounds a stray one)."""
        p = Proc(ns, [nu.NODE, "--learner", "remote", "--listen", f"{addr}:{PORT}",
                      "--token-file", token, "--learner-timeout", timeout, "--seconds", 300,
                      "--env", "cartpole", "--num-envs", 8, "--workers", 1,
                      "--metrics", metrics, "--metrics-interval", 0.1, "--json", "--quiet"])
        self.procs.append(p)
        return p

    def test_cut_links_are_ridden_out_or_reconnected(self):
        token = self.path("token")
        with open(token, "w") as f:
            f.write("netns-secret\n")
        ma, mb = nu.Metrics(self.path("a.jsonl")), nu.Metrics(self.path("b.jsonl"))
        a = self.node(NS_A, ADDR_A, TIMEOUT_A, ma.path, token)
        b = self.node(NS_B, ADDR_B, 30, mb.path, token)
        a.wait_line("listening for learners on")
        b.wait_line("listening for learners on")
        lrn = Proc(NS_L, [LEARNER, "--connect", f"{ADDR_A}:{PORT}", "--connect",
                          f"{ADDR_B}:{PORT}", "--token-file", token, "--json", "--quiet"])
        self.procs.append(lrn)
        wait_rising(ma, 1000, "node A before any cut")
        wait_rising(mb, 1000, "node B before any cut")

        # A short cut, held 0.5 s: TCP retransmits carry the same connection
        # through it.
        link(NS_A, "down")
        time.sleep(SHORT_CUT)
        link(NS_A, "up")
        t_up = time.monotonic()
        t_resumed = wait_rising(ma, ma.tput("steps") + 1000, "node A after a short cut")
        short_resume = t_resumed - t_up
        self.assertEqual(a.count("attached ("), 1, a.log())
        # The learner asked for the same-host upgrade over TCP; the node
        # offered its private socket, which the learner could open (the
        # namespaces share the file system) but the node refused: the peer
        # is in another network namespace. It stays on TCP.
        self.assertEqual(a.count(NETNS_REFUSED), 1, a.log())
        self.assertEqual(lrn.count("staying on TCP"), 2, lrn.log())  # one per node
        self.assertEqual(a.count("closing") + a.count("disconnected"), a.count(NETNS_REFUSED),
                         a.log())
        self.assertEqual(lrn.count("connection lost"), 0, lrn.log())

        # A long cut, held until node A has closed the dead session; B is
        # served all along.
        t_cut = time.monotonic()
        link(NS_A, "down")
        a.wait_line(DEAD_SESSION, after=t_cut)
        # A throughput line written after the timeout holds every step A
        # took; with its learner gone and the link down, A cannot step again
        # until the learner is back.
        a1, b1 = ma.next_tput()["steps"], mb.tput("steps")
        wait_rising(mb, b1 + 100, "node B served while A's link is down")
        a2 = ma.next_tput()["steps"]
        link(NS_A, "up")
        t_up = time.monotonic()
        self.assertEqual(a2, a1, "node A stepped while its link was down")
        t_resumed = wait_rising(ma, a2 + 1000, "node A after the link came back")
        wait_rising(mb, mb.tput("steps") + 1000, "node B after the cut")
        t_lost = lrn.find("connection lost", after=t_cut)
        t_back = lrn.wait_line("reconnected", after=t_cut)

        for p in (a, b):
            p.p.send_signal(signal.SIGINT)
        rc_a, sa = a.finish()
        rc_b, sb = b.finish()
        rc_l, ls = lrn.finish()
        self.assertEqual(rc_a, 0, a.log())
        self.assertEqual(rc_b, 0, b.log())
        self.assertEqual(rc_l, 0, lrn.log())
        self.assertGreaterEqual(sa["learners_attached"], 2, a.log())
        self.assertGreaterEqual(sa["batches_resent"], 1, a.log())
        self.assertEqual(sb["learners_attached"], 1, b.log())
        na, nb = ls["nodes"]
        # The batches resent after the cut are not counted twice: the
        # learner's steps for each node are the node's, plus at most the
        # observations in flight at the stop (one per env, 8).
        for n, s in ((na, sa), (nb, sb)):
            self.assertGreaterEqual(n["steps"], s["steps"])
            self.assertLessEqual(n["steps"], s["steps"] + 8, (n, s))
        self.assertGreaterEqual(na["reconnects"], 1, lrn.log())
        self.assertEqual(nb["reconnects"], 0, lrn.log())
        self.assertFalse(na["failed"] or nb["failed"], lrn.log())
        self.assertFalse(na["upgraded"] or nb["upgraded"], lrn.log())
        self.assertEqual((sa["learners_upgraded"], sb["learners_upgraded"]), (0, 0))
        self.assertEqual(a.count(NETNS_REFUSED), 1, a.log())  # not again on the reconnect
        print(f"measured: short cut ({SHORT_CUT} s): A stepping again {short_resume:.2f} s "
              f"after the restore, same connection; long cut ({t_up - t_cut:.1f} s): node A "
              f"closed the dead session after {a.find(DEAD_SESSION, t_cut) - t_cut:.2f} s, "
              + (f"the learner found the link dead after {t_lost - t_cut:.2f} s, "
                 if t_lost is not None else "")
              + f"reconnected {t_back - t_up:.2f} s and A stepped again "
              f"{t_resumed - t_up:.2f} s after the restore; A: {sa['batches_resent']} "
              f"batches resent, {na['reconnects']} reconnect(s)", file=sys.stderr)
        print("learner log:\n" + lrn.log(), file=sys.stderr)

    def test_node_notices_a_dead_link_by_itself(self):
        # With no --learner-timeout, the node's own keepalive and user
        # timeout close the session of a learner behind a cut link, so its
        # envs are free for the next one (and an idle learner frees its slot).
        token = self.path("token")
        with open(token, "w") as f:
            f.write("netns-secret\n")
        ma = nu.Metrics(self.path("a.jsonl"))
        a = self.node(NS_A, ADDR_A, 0, ma.path, token)
        a.wait_line("listening for learners on")
        lrn = Proc(NS_L, [LEARNER, "--connect", f"{ADDR_A}:{PORT}", "--token-file", token,
                          "--json", "--quiet"])
        self.procs.append(lrn)
        wait_rising(ma, 1000, "node A before the cut")
        t_cut = time.monotonic()
        link(NS_A, "down")
        # The probes go unanswered ("connection timed out"), or, with the
        # node's end of the link down, cannot even be sent ("network is
        # unreachable"): either way the node closes the session itself.
        t_closed = a.wait_line(DEAD_SESSION[1:], after=t_cut)
        link(NS_A, "up")
        t_up = time.monotonic()
        t_resumed = wait_rising(ma, ma.tput("steps") + 1000, "node A after the link came back")
        a.p.send_signal(signal.SIGINT)
        rc_a, sa = a.finish()
        rc_l, ls = lrn.finish()
        self.assertEqual(rc_a, 0, a.log())
        self.assertEqual(rc_l, 0, lrn.log())
        self.assertEqual(sa["learners_attached"], 2, a.log())
        self.assertEqual(ls["nodes"][0]["reconnects"], 1, lrn.log())
        print(f"measured: with no learner timeout the node closed the dead session "
              f"{t_closed - t_cut:.2f} s after the cut; A stepped again "
              f"{t_resumed - t_up:.2f} s after the restore", file=sys.stderr)


def main():
    nu.setup_from_argv()
    global LEARNER
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    # Meson stops a test that overruns with SIGTERM: kill what the test
    # started and still delete the namespaces.
    def on_sigterm(signum, frame):
        nu.cleanup_now()
        delete_namespaces()
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        why = create_namespaces()
        if why:
            print(f"SKIP: {why}")
            sys.exit(SKIP)
        unittest.main(verbosity=2)
    finally:
        delete_namespaces()


if __name__ == "__main__":
    main()
