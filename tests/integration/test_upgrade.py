"""The same-host upgrade (docs/protocol.md "Same-host upgrade"): rollout-learner
connecting over TCP to a node on its host moves to the node's private Unix-domain
socket and shared memory, saying so; --no-upgrade stays on TCP; and the private
socket refuses, by name, everyone the node did not send there: a wrong nonce, a
spent one, a wrong token, no nonce, a nonce carried to TCP or to another node's
socket, while the node keeps serving its learner. A learner offered a socket where
another node answers leaves it and stays on TCP. (A learner in another network
namespace is test_netns.py's.) Every wait is for something the processes report.

Run as: test_upgrade.py ROLLOUT_NODE PLUGIN_SO (rollout-learner lies beside the node)."""
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import unittest

import nodeutil as nu
import wireutil as w

LEARNER = None
MOVED = "on this host: moved from TCP to unix:"
NODE_SIDE = "moved here from TCP: the same host"


def learner_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def private_socket(log, proc):
    """The private socket a node said learners move to."""
    line = nu.wait_for(lambda: next((ln for ln in list(log.lines)
                                     if "learners on this host move to" in ln), None),
                       "the node's line naming its private socket", proc=proc)
    return line.split("move to unix:", 1)[1].split(" ", 1)[0]


class UnixConn(w.Conn):
    """A raw connection to a node's Unix-domain socket."""

    def __init__(self, path, timeout=nu.HANG_GUARD_S):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""


def hello(conn, token="", upgrade=False, nonce=b""):
    conn.send(hello=w.pb2().Hello(protocol_version=1, role="learner", token=token, name="hostile",
                                  upgrade=upgrade, upgrade_nonce=nonce))
    return conn.recv()


def offer(addr, token):
    """An Upgrade the node offers a TCP hello that asks for one."""
    c = w.Conn(addr)
    f = hello(c, token, upgrade=True)
    c.close()
    assert f is not None and f.WhichOneof("body") == "upgrade", f
    return f.upgrade


class Upgrade(nu.TempDirCase):
    def run_pair(self, *learner_args):
        n = 64 * 400
        p, addr, log = nu.start_listening("remote", "--num-envs", 64, "--steps", n)
        path = private_socket(log, p)
        d = os.path.dirname(path)
        # Owner-only: the directory only the node's user may enter, the socket 0600.
        self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", *learner_args],
                       capture_output=True, text=True)
        s = nu.json_summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertFalse(os.path.exists(d), "the node left its private socket's directory")
        node = learner_json(q.stdout)["nodes"][0]
        self.assertEqual(node["steps"], n)
        self.assertGreater(node["frames"], 0)
        self.assertEqual(s["learners_rejected"], 0, log.text())
        return node, s, q.stderr, log.text()

    def test_learner_on_the_nodes_host_moves_to_its_socket_and_memory(self):
        node, s, lerr, nlog = self.run_pair()
        self.assertIn(MOVED, lerr)
        self.assertIn(NODE_SIDE, nlog)
        self.assertTrue(node["upgraded"])
        self.assertEqual(s["learners_upgraded"], 1)
        self.assertEqual(node["frames_in_memory"], node["frames"])  # every frame in shared memory

    def test_no_upgrade_stays_on_tcp(self):
        node, s, lerr, nlog = self.run_pair("--no-upgrade")
        self.assertNotIn(MOVED, lerr)
        self.assertNotIn(NODE_SIDE, nlog)
        self.assertFalse(node["upgraded"])
        self.assertEqual(s["learners_upgraded"], 0)
        self.assertEqual(node["frames_in_memory"], 0)


class Refusals(nu.TempDirCase):
    def setUp(self):
        super().setUp()
        self.token = self.path("token")
        with open(self.token, "w") as f:
            f.write("upgrade-secret\n")
        os.chmod(self.token, 0o600)

    def node(self, metrics=None):
        args = ["--num-envs", 16, "--workers", 1, "--seconds", 300, "--token-file", self.token]
        if metrics:
            args += ["--metrics", metrics, "--metrics-interval", 0.1]
        p, addr, log = nu.start_listening("remote", *args)
        return p, addr, log, private_socket(log, p)

    def refused(self, path, words, **kw):
        c = UnixConn(path)
        f = hello(c, **kw)
        c.close()
        self.assertIsNotNone(f, f"no answer; expected an error saying {words!r}")
        self.assertEqual(f.WhichOneof("body"), "error", f)
        self.assertIn(words, f.error.message)
        return f.error

    def test_the_private_socket_refuses_all_it_did_not_invite(self):
        m = nu.Metrics(self.path("a.jsonl"))
        a, addr, log, path = self.node(m.path)
        b, addr_b, log_b, path_b = self.node()
        good = nu.spawn([LEARNER, "--connect", addr, "--token-file", self.token, "--json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        glog = nu.Lines(good.stderr)
        nu.wait_for(lambda: glog.count(MOVED), "the good learner's upgrade", proc=good)
        nu.wait_for(lambda: m.tput("steps") > 1000, "node A serving its learner")

        u = offer(addr, "upgrade-secret")
        self.assertEqual(u.path, path)
        self.assertEqual(len(u.nonce), 16)
        nonce = u.nonce
        e = self.refused(path, "no upgrade was offered with this nonce", token="upgrade-secret",
                         nonce=bytes(16))
        self.assertEqual(e.code, 13)  # EACCES
        # The token rules hold on the private socket: a right nonce with a
        # wrong token is refused (and the nonce is not spent by it).
        self.refused(path, "missing or wrong token", token="wrong", nonce=nonce)
        self.refused(path, "takes only upgrades from TCP", token="upgrade-secret")
        # A path that is not the node's socket: node B never offered A's nonce.
        self.refused(path_b, "no upgrade was offered with this nonce", token="upgrade-secret",
                     nonce=nonce)
        # A nonce is for the private socket only, never TCP.
        c = w.Conn(addr)
        f = hello(c, "upgrade-secret", nonce=nonce)
        c.close()
        self.assertEqual(f.WhichOneof("body"), "error", f)
        self.assertIn("good only on the node's private socket", f.error.message)
        # The nonce itself still works, once.
        c = UnixConn(path)
        f = hello(c, "upgrade-secret", nonce=nonce)
        self.assertEqual(f.WhichOneof("body"), "welcome", f)
        c.close()
        self.refused(path, "no upgrade was offered with this nonce", token="upgrade-secret",
                     nonce=nonce)
        # No TCP learner without the token gets an offer at all.
        c = w.Conn(addr)
        f = hello(c, "wrong", upgrade=True)
        c.close()
        self.assertEqual(f.WhichOneof("body"), "error", f)
        self.assertIn("missing or wrong token", f.error.message)

        # Node A kept serving its learner through all of it.
        steps = m.tput("steps")
        nu.wait_for(lambda: m.tput("steps") > steps + 1000, "node A serving after the refusals")
        for p in (a, b):
            p.send_signal(signal.SIGINT)
        sa = nu.json_summary(a, log)
        nu.json_summary(b, log_b)
        good.wait(timeout=nu.HANG_GUARD_S)
        glog.thread.join(timeout=10)
        self.assertEqual(good.returncode, 0, glog.text())
        self.assertEqual(sa["learners_upgraded"], 2)  # the good learner, the nonce used once
        self.assertEqual(sa["learners_rejected"], 6, log.text())  # node B had the seventh
        for words in ("no upgrade was offered with this nonce", "missing or wrong token",
                      "takes only upgrades from TCP", "good only on the node's private socket"):
            self.assertIn(words, log.text())
        self.assertIn("no upgrade was offered with this nonce", log_b.text())

    def test_learner_leaves_a_socket_where_another_node_answers(self):
        # A node (here the test) that offers another node's socket: the
        # learner goes there, is welcomed by a node id that is not the one
        # offered, leaves, and says its hello again over TCP without upgrade.
        b, addr_b, log_b, path_b = self.node()
        real = offer(addr_b, "upgrade-secret")  # a nonce node B will take
        srv = socket.create_server(("127.0.0.1", 0))
        port = srv.getsockname()[1]
        hellos = []

        def fake_node():
            for _ in range(2):
                s, _ = srv.accept()
                c = w.Conn.__new__(w.Conn)
                c.sock, c.buf = s, b""
                f = c.recv()
                hellos.append(f.hello)
                if f.hello.upgrade:
                    c.send(upgrade=w.pb2().Upgrade(path=path_b, nonce=real.nonce, node_id=12345))
                else:
                    c.send(error=w.pb2().Error(code=108, message="fake node: done"))
                c.recv()  # until the learner closes
                c.close()

        t = threading.Thread(target=fake_node, daemon=True)
        t.start()
        q = nu.run_cmd([LEARNER, "--connect", f"127.0.0.1:{port}", "--token-file", self.token,
                        "--json"], capture_output=True, text=True)
        t.join(timeout=nu.HANG_GUARD_S)
        srv.close()
        self.assertIn("not 0000000000003039: not its socket", q.stderr)
        self.assertIn("staying on TCP", q.stderr)
        self.assertEqual([h.upgrade for h in hellos], [True, False])
        b.send_signal(signal.SIGINT)
        sb = nu.json_summary(b, log_b)
        self.assertEqual(sb["learners_upgraded"], 1)  # B welcomed it; the learner left


class Threads(nu.TempDirCase):
    """Threads chosen for the work: a SEED node and rollout-learner given no
    --workers time their work at start and say what they chose; a flag wins."""

    def pair(self, node_args=(), learner_args=()):
        """The node's summary, the learner's, the node's stderr (its start
        line included) and the learner's."""
        n = 64 * 200
        p = nu.spawn([nu.NODE, "--learner", "remote", "--listen", "127.0.0.1:0", "--json",
                      "--num-envs", 64, "--steps", n, *node_args],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        head, addr = [], None
        for line in p.stderr:  # up to the line that says where it listens
            head.append(line)
            if "listening for learners on" in line:
                addr = line.strip().rsplit(" ", 1)[1]
                break
        self.assertIsNotNone(addr, f"the node did not start: {''.join(head)}")
        log = nu.Lines(p.stderr)
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", *learner_args],
                       capture_output=True, text=True)
        s = nu.json_summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        return s, learner_json(q.stdout), "".join(head) + log.text(), q.stderr

    def test_chosen_from_what_they_measure(self):
        s, ls, nlog, lerr = self.pair()
        self.assertEqual(s["workers_chosen"], "measured")
        self.assertGreater(s["env_step_ns"], 0)
        # The node weighs what its workers, one per CPU, would save a frame
        # (all of its steps but their 1/W) against a hand-off (50 us):
        # CartPole's frame of 32 steps saves far less, whatever the CPUs, so
        # the loop steps it, spinning for the learner's answer.
        w = max(s["cpus"], 1)
        saved_ns = s["env_step_ns"] * s["batch"] * (w - 1) / w
        self.assertIn(f"{w} workers would save", nlog)
        if saved_ns < 50000:
            self.assertEqual((s["workers"], s["spin_us"]), (0, 300), nlog)
            self.assertIn("the loop steps the envs", nlog)
        else:
            self.assertEqual((s["workers"], s["spin_us"]), (s["cpus"], 0), nlog)
        self.assertEqual(ls["workers_chosen"], "measured")
        self.assertGreater(ls["forward_ns"], 0)
        self.assertIn("rollout-learner: threads: a forward pass over 64 rows took", lerr)
        # A pass cheaper than a hand-off, or fewer than 2 CPUs for workers
        # beside the loop and the node's (one worker would run the passes
        # one after another, as the loop does): on the loop.
        spare = s["cpus"] - 2  # the learner's loop, and the node's on this host
        if ls["forward_ns"] < 50000 or spare < 2:
            self.assertEqual((ls["workers"], ls["spin_us"]), (0, 50), lerr)
        else:
            self.assertEqual((ls["workers"], ls["spin_us"]), (spare, 0), lerr)

    def test_flags_win(self):
        s, ls, nlog, lerr = self.pair(("--workers", 1, "--spin-us", 0),
                                      ("--workers", 1, "--spin-us", 7))
        self.assertEqual((s["workers_chosen"], s["workers"], s["spin_us"]), ("flag", 1, 0))
        self.assertEqual(s["env_step_ns"], 0)
        self.assertEqual((ls["workers_chosen"], ls["workers"], ls["spin_us"]), ("flag", 1, 7))
        self.assertEqual(ls["forward_ns"], 0)
        self.assertNotIn("threads: a forward pass", lerr)


def main():
    nu.setup_from_argv()
    global LEARNER
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
