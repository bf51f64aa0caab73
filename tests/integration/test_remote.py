"""Remote learners over TCP: the C rollout-learner on one and two nodes, a
learner SIGKILLed mid-run and replaced with no transition lost or repeated,
rollout-learner reconnecting to a node that dropped it (and only then), a
pushed policy (the episodes it plays say so), and every kind of bad input
from a peer. Every wait is for something the processes report."""
import json
import os
import signal
import subprocess
import sys
import unittest

import nodeutil as nu
import wireutil as w

HERE = os.path.dirname(os.path.abspath(__file__))
LEARNER = None  # rollout-learner, next to rollout-node


def learner(*args, timeout=nu.HANG_GUARD_S):
    return nu.run_cmd([LEARNER, "--json", "--quiet", *args], capture_output=True, text=True,
                      timeout=timeout)


def finish(node, timeout=nu.HANG_GUARD_S, err_lines=None):
    """Wait for a node; returns (--json summary or None, stderr). err_lines:
    the Lines already draining its stderr, if any."""
    if err_lines is None:
        out, err = node.communicate(timeout=timeout)
    else:
        node.wait(timeout=timeout)
        out = node.stdout.read()
        err_lines.thread.join()
        err = err_lines.text()
    summary = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    return summary, err


class CLearner(nu.TempDirCase):
    def test_one_node(self):
        node, addr = w.start_node(nu.NODE, "--num-envs", 64, "--steps", 64 * 300)
        p = learner("--connect", addr)
        s, err = finish(node)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(node.returncode, 0, err)
        self.assertEqual(s["steps"], 64 * 300)
        self.assertEqual(s["learners_attached"], 1)
        ls = json.loads(p.stdout.strip().splitlines()[-1])
        # Every env step was answered by the learner: the last observation of
        # each env (after its final step) is never sent.
        self.assertEqual(ls["nodes"][0]["steps"], 64 * 300)
        self.assertGreater(ls["nodes"][0]["episodes"], 500)
        self.assertAlmostEqual(ls["nodes"][0]["mean_return"], s["mean_return"], delta=2.0)

    def test_learner_threads_are_loop_plus_workers(self):
        node, addr = w.start_node(nu.NODE, "--num-envs", 32, "--steps", 32 * 200)
        extra = 1 if nu.linked_with("libtsan") else 0
        p = learner("--connect", addr, "--workers", 2, "--gemm", "openblas")
        finish(node)
        ls = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(ls["threads"], 1 + 2 + extra)
        self.assertEqual(ls["nodes"][0]["steps"], 32 * 200)

    def test_workers_0_node_and_learner_run_on_their_loops_and_repeat_the_local_run(self):
        # --workers 0 on both sides: the node's envs step on its loop thread,
        # the learner's forward passes run on its own; one thread each. With
        # the node's seed the learner chooses the local policy's actions, so
        # the run repeats the local one exactly.
        steps = 64 * 300
        local, _ = nu.run("--num-envs", 64, "--steps", steps, "--seed", 5)
        node, addr = w.start_node(nu.NODE, "--num-envs", 64, "--steps", steps, "--seed", 5,
                                  "--workers", 0)
        p = learner("--connect", addr, "--workers", 0, "--seed", 5)
        s, err = finish(node)
        self.assertEqual(node.returncode, 0, err)
        self.assertEqual(p.returncode, 0, p.stderr)
        # One thread (TSan starts its own helper thread with the first
        # pthread_create, if any).
        one = (1, 2) if nu.linked_with("libtsan") else (1,)
        self.assertEqual((s["workers"], s["threads_expected"]), (0, 1), s)
        self.assertIn(s["threads"], one, s)
        ls = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(ls["workers"], 0, ls)
        self.assertIn(ls["threads"], one, ls)
        self.assertEqual(s["steps"], steps)
        self.assertEqual(ls["nodes"][0]["steps"], steps)
        self.assertEqual((s["episodes"], s["mean_return"]), (local["episodes"], local["mean_return"]))

    def test_learner_errors(self):
        p = nu.run_cmd([LEARNER], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--connect", p.stderr)
        p = nu.run_cmd([LEARNER, "--connect", "nowhere"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--connect 'nowhere'", p.stderr)
        p = nu.run_cmd([LEARNER, "--connect", "127.0.0.1:1", "--quiet", "--reconnect-s", "0"],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot connect", p.stderr)
        p = nu.run_cmd([LEARNER, "--connect", "127.0.0.1:1", "--reconnect-s", "-1"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--reconnect-s '-1'", p.stderr)
        p = nu.run_cmd([LEARNER, "--help"], capture_output=True, text=True)
        self.assertIn("--reconnect-s S", p.stdout)

    def test_two_nodes_one_learner(self):
        a, addr_a = w.start_node(nu.NODE, "--num-envs", 32, "--steps", 32 * 200, "--seed", 1)
        b, addr_b = w.start_node(nu.NODE, "--env", "cartpole", "--num-envs", 16,
                                 "--steps", 16 * 400, "--seed", 2)
        p = learner("--connect", addr_a, "--connect", addr_b)
        sa, _ = finish(a)
        sb, _ = finish(b)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sa["steps"], 32 * 200)
        self.assertEqual(sb["steps"], 16 * 400)
        ls = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual([n["steps"] for n in ls["nodes"]], [32 * 200, 16 * 400])
        self.assertNotEqual(ls["nodes"][0]["node_id"], ls["nodes"][1]["node_id"])

    def test_two_learners_split_envs(self):
        # The node runs until stopped: with a fixed step count the first
        # learner (on shared memory since the same-host upgrade) could take
        # every step before the second attached. Stopped once both were
        # attached and it stepped on, the node's steps are the sum of both
        # learners', each of which answered some.
        m = self.path("m.jsonl")
        node, addr = w.start_node(nu.NODE, "--num-envs", 64, "--seconds", 0, "--shard", 4,
                                  "--metrics", m, "--metrics-every", 0.05)
        ps = [nu.spawn([LEARNER, "--connect", addr, "--json", "--quiet"],
                       stdout=subprocess.PIPE, text=True) for _ in range(2)]
        mt = nu.Metrics(m)
        nu.wait_for(lambda: mt.tput("learners") == 2, "both learners attached", proc=node)
        both = mt.tput("steps")
        nu.wait_for(lambda: mt.tput("steps") >= both + 64 * 100,
                    "the node stepping with two learners", proc=node)
        node.send_signal(signal.SIGTERM)
        s, _ = finish(node)
        outs = [p.communicate(timeout=nu.HANG_GUARD_S)[0] for p in ps]
        self.assertEqual(s["learners_attached"], 2)
        steps = [json.loads(o.strip().splitlines()[-1])["nodes"][0]["steps"] for o in outs]
        self.assertEqual(sum(steps), s["steps"])
        self.assertTrue(all(k > 0 for k in steps), steps)

    def test_a_node_stopped_by_a_signal_and_its_learner_count_the_same_steps(self):
        # Issue 31: the node counts the env steps it took; the learner
        # counted the observations served, one frame per held env more
        # after a SIGTERM (630,016 against 629,952). The node's goodbye now
        # says how many steps the connection's answers made.
        for via in ("tcp", "unix"):
            with self.subTest(via=via):
                m = self.path(f"m-{via}.jsonl")
                listen = "127.0.0.1:0" if via == "tcp" else "unix:" + self.path("n.sock")
                node = nu.spawn([nu.NODE, "--learner", "remote", "--listen", listen, "--json",
                                 "--quiet", "--num-envs", 64, "--seconds", 0, "--workers", 0,
                                 "--metrics", m, "--metrics-every", 0.05],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                addr = w.listen_address(node)
                lr = nu.spawn([LEARNER, "--connect", addr, "--json", "--quiet", "--workers", 0],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                mt = nu.Metrics(m)
                nu.wait_for(lambda: mt.tput("steps") >= 64 * 200,
                            "the node stepping with its learner", proc=node)
                node.send_signal(signal.SIGTERM)
                s, err = finish(node)
                out, lerr = lr.communicate(timeout=nu.HANG_GUARD_S)
                self.assertEqual((node.returncode, lr.returncode), (0, 0), err + lerr)
                ls = json.loads(out.strip().splitlines()[-1])
                self.assertEqual(ls["nodes"][0]["steps"], s["steps"], lerr)
                self.assertEqual(ls["steps"], s["steps"])

    def test_learner_refuses_policy_that_does_not_fit(self):
        wfile = self.path("w.pb")
        nu.run("--env", "pendulum", "--steps", 10, "--save-policy", wfile)
        # No time limit: only the test's SIGINT ends the node.
        node, addr = w.start_node(nu.NODE, "--num-envs", 4, "--steps", 40, "--seconds", 0)
        p = learner("--connect", addr, "--policy", wfile)
        node.send_signal(signal.SIGINT)
        finish(node)
        self.assertEqual(p.returncode, 2)
        self.assertIn("w.pb", p.stderr)


wait_for = nu.wait_for
Lines = nu.Lines


class UnixSocket(nu.TempDirCase):
    """--listen unix:PATH and --connect unix:PATH: the same frames over a
    Unix-domain socket."""

    def start(self, path, *args):
        node = nu.spawn([nu.NODE, "--learner", "remote", "--listen", "unix:" + path, "--quiet",
                         "--json", *map(str, args)], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
        self.assertEqual(w.listen_address(node), "unix:" + path)
        return node

    def test_node_and_learner_over_a_unix_socket(self):
        path = self.path("node.sock")
        node = self.start(path, "--num-envs", 64, "--steps", 64 * 300, "--workers", 0)
        # Owner-only while it listens: other users on the host cannot attach.
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        p = learner("--connect", "unix:" + path, "--workers", 0)
        s, err = finish(node)
        self.assertEqual((node.returncode, p.returncode), (0, 0), err + p.stderr)
        self.assertEqual(s["steps"], 64 * 300)
        ls = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(ls["nodes"][0]["steps"], 64 * 300)
        self.assertEqual(ls["nodes"][0]["address"], "unix:" + path)
        self.assertFalse(os.path.exists(path), "the node left its socket file behind")

    def test_shared_memory_frames_repeat_the_local_run(self):
        # Over unix:PATH the learner maps the node's observation memory and
        # writes its actions into memory of its connection (protocol.md
        # "Observations in shared memory"): every frame goes that way, and
        # with the node's seed the run repeats the local one exactly, as it
        # does with the columns in the frames (--no-shared-memory). While
        # the learner is awake the node posts its frames in the frame ring
        # instead of the socket ("Frames in a ring"); --no-ring: never.
        steps = 64 * 300
        local, _ = nu.run("--num-envs", 64, "--steps", steps, "--seed", 5)
        # Each side spins up to 100 ms for the other's next frame, so it is
        # awake when the other posts: the rings carry frames and answers
        # unless every one of about 600 waits runs past 100 ms.
        awake = ("--spin-us", 100000)
        for extra, in_memory, ring in ((awake, True, True), (("--no-ring",), True, False),
                                       (("--no-shared-memory",), False, False)):
            path = self.path("mem.sock")
            node = self.start(path, "--num-envs", 64, "--steps", steps, "--seed", 5,
                              "--workers", 0, "--batch", 32, *awake)
            p = learner("--connect", "unix:" + path, "--workers", 0, "--seed", 5,
                        "--batch", 32, *extra)
            s, err = finish(node)
            self.assertEqual((node.returncode, p.returncode), (0, 0), err + p.stderr)
            ls = json.loads(p.stdout.strip().splitlines()[-1])["nodes"][0]
            self.assertEqual(ls["mode"], "seed")
            self.assertGreater(ls["frames"], 0)
            self.assertEqual(ls["frames_in_memory"], ls["frames"] if in_memory else 0, extra)
            if ring:
                self.assertGreater(ls["frames_in_ring"], 0)
                self.assertLessEqual(ls["frames_in_ring"], ls["frames"])
                self.assertGreater(ls["answers_in_ring"], 0)
            else:
                self.assertEqual((ls["frames_in_ring"], ls["answers_in_ring"]), (0, 0), extra)
            self.assertEqual((s["steps"], ls["steps"]), (steps, steps))
            self.assertEqual((s["episodes"], s["mean_return"]),
                             (local["episodes"], local["mean_return"]), extra)

    def ring_of(self, pid):
        """The node's frame ring (its memfd, found in /proc: root alone may), mapped
        read-write, as its learner maps it."""
        import mmap
        fds = f"/proc/{pid}/fd"
        for name in nu.open_fds(pid):
            try:
                target = os.readlink(os.path.join(fds, name))
            except OSError:
                continue
            if "rollout-seed-ring" in target:
                with open(os.path.join(fds, name), "r+b") as f:
                    return mmap.mmap(f.fileno(), 0)
        self.fail("the node has no frame ring")

    def attached(self, path, *learner_args):
        """A SEED node at unix:PATH (for up to 120 s) and a rollout-learner
        attached to it."""
        node = self.start(path, "--num-envs", 64, "--seed", 5, "--workers", 0, "--batch", 32,
                          "--seconds", 120)
        node_err = Lines(node.stderr)
        lr = nu.spawn([LEARNER, "--connect", "unix:" + path, "--json", "--quiet", "--workers", 0,
                       "--seed", 5, "--batch", 32, *map(str, learner_args)],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: node_err.count("attached") >= 1, "the learner attached", proc=node)
        return node, node_err, lr

    def test_a_ring_not_to_be_believed_ends_the_connection(self):
        # The ring is the node's bytes to the learner: a head that runs
        # past what the ring holds is refused by name, like a bad frame.
        import struct
        node, node_err, lr = self.attached(self.path("bad.sock"), "--reconnect-s", 0)
        ring = self.ring_of(node.pid)
        ring[0:8] = struct.pack("<Q", 1000000 << 1)  # head_state: a million frames posted
        out, err = lr.communicate(timeout=nu.HANG_GUARD_S)
        self.assertNotEqual(lr.returncode, 0, err)
        self.assertIn("the frame ring says 1000000 were posted", err)
        wait_for(lambda: node_err.count("sent error 71: the frame ring says") >= 1,
                 "the node logging the learner's error", proc=node)
        node.send_signal(signal.SIGTERM)
        s, _ = finish(node, err_lines=node_err)
        self.assertEqual(node.returncode, 0, node_err.text())
        ring.close()

    def test_an_answer_ring_not_to_be_believed_ends_the_session(self):
        # The other way: the learner's answer ring is its bytes to the
        # node, which refuses a head past what the ring holds by name and
        # serves on (the learner's envs wait for another learner).
        import struct
        node, node_err, lr = self.attached(self.path("ans.sock"), "--reconnect-s", 0)
        ring = self.ring_of(node.pid)
        answers = 128 + 64 * 128  # the answer ring follows the frame ring
        ring[answers:answers + 8] = struct.pack("<Q", 777777 << 1)
        wait_for(lambda: node_err.count("the answer ring says 777777 were posted") >= 1,
                 "the node refusing the learner's answer ring", proc=node)
        out, err = lr.communicate(timeout=nu.HANG_GUARD_S)
        self.assertNotEqual(lr.returncode, 0)
        self.assertIn("the answer ring says 777777 were posted", err)  # the node's error frame
        node.send_signal(signal.SIGTERM)
        s, _ = finish(node, err_lines=node_err)
        self.assertEqual(node.returncode, 0, node_err.text())
        ring.close()

    def test_a_stale_socket_is_replaced_a_live_one_or_a_file_is_not(self):
        import socket
        path = self.path("stale.sock")
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(path)  # a socket file nobody listens on: a node that died
        dead.close()
        node = self.start(path, "--num-envs", 8, "--seconds", 0)
        # A second node on the same path would steal the first one's learners.
        q = nu.run_cmd([nu.NODE, "--learner", "remote", "--listen", "unix:" + path, "--quiet"],
                       capture_output=True, text=True)
        self.assertNotEqual(q.returncode, 0)
        self.assertIn("another process listens on this socket", q.stderr)
        node.send_signal(signal.SIGTERM)
        finish(node)
        self.assertEqual(node.returncode, 0)
        self.assertFalse(os.path.exists(path))
        plain = self.path("notes.txt")
        with open(plain, "w") as f:
            f.write("keep me")
        q = nu.run_cmd([nu.NODE, "--learner", "remote", "--listen", "unix:" + plain, "--quiet"],
                       capture_output=True, text=True)
        self.assertNotEqual(q.returncode, 0)
        self.assertIn("the path exists and is not a socket", q.stderr)
        with open(plain) as f:
            self.assertEqual(f.read(), "keep me")
        q = nu.run_cmd([nu.NODE, "--learner", "remote", "--listen", "unix:" + "x" * 108],
                       capture_output=True, text=True)
        self.assertEqual(q.returncode, 2)
        self.assertIn("PATH a socket file of 1 to 107 bytes", q.stderr)

    def test_a_learner_started_first_waits_for_the_socket(self):
        path = self.path("later.sock")
        lr = nu.spawn([LEARNER, "--connect", "unix:" + path, "--json"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = nu.Lines(lr.stderr)
        nu.wait_for(lambda: lines.count("not accepting connections yet"),
                    "the learner to say it waits for the socket", proc=lr)
        node = self.start(path, "--num-envs", 16, "--steps", 16 * 100)
        s, err = finish(node)
        lr.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual((node.returncode, lr.returncode), (0, 0), err + lines.text())
        self.assertEqual(json.loads(lr.stdout.read().strip().splitlines()[-1])["steps"], 1600)


class Reconnect(nu.TempDirCase):
    """rollout-learner comes back to a node that dropped it without a goodbye,
    gives up after --reconnect-s, and leaves a node that said goodbye."""

    def node(self, *args):
        m = nu.Metrics(self.path(f"m{len(os.listdir(self.tmp))}.jsonl"))
        node, addr = w.start_node(nu.NODE, "--num-envs", 8, "--metrics", m.path,
                                  "--metrics-interval", 0.1, *args)
        return node, addr, Lines(node.stderr), m

    def learner(self, *args):
        p = nu.spawn([LEARNER, "--json", "--quiet", *args], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
        return p, Lines(p.stderr)

    def wait(self, p, log, timeout=nu.HANG_GUARD_S):
        """Wait for a node or learner whose stderr a Lines reads; returns its
        --json summary, or None."""
        p.wait(timeout=timeout)
        out = p.stdout.read()
        p.stdout.close()
        log.thread.join(timeout=10)
        lines = out.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def test_a_learner_started_first_waits_for_its_node(self):
        import socket
        with socket.socket() as s:  # a free port, for the node to take later
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        addr = f"127.0.0.1:{port}"
        lp, llog = self.learner("--connect", addr)
        nu.wait_for(lambda: llog.count("not accepting connections yet"),
                    "the learner to say it waits for the node", proc=lp)
        node = nu.spawn([nu.NODE, "--learner", "remote", "--listen", addr, "--quiet", "--json",
                         "--num-envs", 8, "--steps", 8 * 50], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
        s = self.wait(lp, llog)
        node.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(lp.returncode, 0, llog.text())
        self.assertEqual(s["steps"], 8 * 50)
        self.assertEqual(llog.count("not accepting connections yet"), 1, llog.text())  # once
        self.assertEqual(llog.count("connected after"), 1, llog.text())

    def test_reconnects_after_the_node_timed_it_out(self):
        node, addr, log, m = self.node("--seconds", 0, "--learner-timeout", 1)
        lp, llog = self.learner("--connect", addr)
        wait_for(lambda: m.tput("steps") > 1000, "the learner serving the node", proc=node)
        # Frozen, the learner leaves its batches unanswered: the node closes
        # its session after --learner-timeout and holds the envs.
        lp.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: log.count("no actions for") == 1, "the node timing the learner out",
                     proc=node)
            # The session is gone once a throughput line counts no learner.
            wait_for(lambda: m.next_tput()["learners"] == 0,
                     "a throughput line without the timed-out learner", proc=node)
        finally:
            lp.send_signal(signal.SIGCONT)
        wait_for(lambda: log.count("attached (") == 2, "the learner attaching again", proc=node)
        before = m.tput("steps")
        wait_for(lambda: m.tput("steps") > before + 1000, "the node stepping again", proc=node)
        node.send_signal(signal.SIGINT)
        s = self.wait(node, log)
        ls = self.wait(lp, llog)["nodes"][0]
        self.assertEqual(node.returncode, 0, log.text())
        self.assertEqual(lp.returncode, 0, llog.text())
        self.assertGreaterEqual(s["learners_attached"], 2)
        self.assertGreaterEqual(s["batches_resent"], 1)
        self.assertEqual(ls["reconnects"], 1, llog.text())
        self.assertFalse(ls["failed"])
        self.assertEqual(llog.count("connection lost"), 1, llog.text())
        self.assertEqual(llog.count("reconnected after"), 1, llog.text())
        # Batches sent again after the reconnect are not counted twice (the
        # node may count an episode or so more: ended, never sent at the stop).
        self.assertLessEqual(ls["episodes"], s["episodes"])
        # Every env step once: the learner also counts the observations in
        # flight at the stop, at most one per env (8), never a resent one.
        self.assertGreaterEqual(ls["steps"], s["steps"])
        self.assertLessEqual(ls["steps"], s["steps"] + 8, (ls, s))
        self.assertGreaterEqual(ls["episodes"], s["episodes"] - 8)
        self.assertAlmostEqual(ls["mean_return"], s["mean_return"], delta=2.0)

    def test_goodbye_ends_the_learner_promptly_without_reconnecting(self):
        node, addr, log, _ = self.node("--steps", 8 * 400)
        lp, llog = self.learner("--connect", addr)
        s = self.wait(node, log)
        ls = self.wait(lp, llog)  # the goodbye ends it: no reconnect attempts (below)
        self.assertEqual(lp.returncode, 0, llog.text())
        self.assertEqual(ls["nodes"][0]["reconnects"], 0)
        self.assertNotIn("reconnect", llog.text())
        self.assertEqual(s["learners_attached"], 1)

    def test_gives_up_on_a_dead_node_and_serves_the_other(self):
        a, addr_a, alog, _ = self.node("--seconds", 0)
        b, addr_b, blog, mb = self.node("--seconds", 0, "--seed", 2)
        lp, llog = self.learner("--connect", addr_a, "--connect", addr_b, "--reconnect-s", 1)
        wait_for(lambda: mb.tput("steps") > 1000, "the learner serving node B", proc=b)
        a.kill()  # no goodbye: refused reconnects until --reconnect-s
        self.wait(a, alog)
        wait_for(lambda: llog.count("giving up") == 1, "the learner giving up on node A",
                 proc=lp)
        before = mb.tput("steps")
        wait_for(lambda: mb.tput("steps") > before + 1000, "node B still being served", proc=b)
        self.assertIsNone(lp.poll())
        b.send_signal(signal.SIGINT)
        self.wait(b, blog)
        na, nb = self.wait(lp, llog)["nodes"]
        self.assertEqual(lp.returncode, 1, llog.text())
        self.assertTrue(na["failed"])
        self.assertFalse(nb["failed"])
        self.assertEqual(na["reconnects"] + nb["reconnects"], 0)
        self.assertEqual(llog.count("connection lost"), 1, llog.text())
        self.assertLessEqual(llog.count("reconnect attempt"), 3, llog.text())  # no flood

    def test_reconnect_s_0_drops_the_node(self):
        node, addr, log, m = self.node("--seconds", 0)
        lp, llog = self.learner("--connect", addr, "--reconnect-s", 0)
        wait_for(lambda: m.tput("steps") > 1000, "the learner serving the node", proc=node)
        node.kill()
        self.wait(node, log)
        self.wait(lp, llog)
        self.assertEqual(lp.returncode, 0, llog.text())
        self.assertNotIn("reconnect", llog.text())


def write_policy(path, obs_dim, logits, version=1):
    """A PolicyParams file whose head ignores the input: fixed logits."""
    pb = w.pb2()
    hidden = 8
    p = pb.PolicyParams(format_version=1, activation="tanh", obs_dim=obs_dim,
                        action_kind="discrete", action_dim=len(logits), version=version)
    l1 = p.layers.add()
    l1.weight.shape[:] = [hidden, obs_dim]
    l1.weight.data[:] = [0.0] * (hidden * obs_dim)
    l1.bias.shape[:] = [hidden]
    l1.bias.data[:] = [0.0] * hidden
    l2 = p.layers.add()
    l2.weight.shape[:] = [len(logits), hidden]
    l2.weight.data[:] = [0.0] * (hidden * len(logits))
    l2.bias.shape[:] = [len(logits)]
    l2.bias.data[:] = logits
    with open(path, "wb") as f:
        f.write(w.frame_bytes(p))


class PushPolicy(nu.TempDirCase):
    def test_push_switches_the_node_policy(self):
        # Every episode record names the version of the policy that chose its
        # first and last action (policy_first, policy_last): the test looks
        # at episodes played wholly by one version, whenever they ran.
        m = nu.Metrics(self.path("m.jsonl"))
        p = nu.spawn([nu.NODE, "--listen", "127.0.0.1:0", "--seconds", "0", "--quiet", "--json",
                      "--num-envs", "32", "--metrics", m.path, "--metrics-episodes"],
                     stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
        addr = w.listen_address(p)

        def played_by(version, n):
            eps = [r for r in m.episodes()
                   if r["policy_first"] == version and r["policy_last"] == version]
            return eps if len(eps) >= n else None

        # The seeded MLP (version 0) plays first.
        before = wait_for(lambda: played_by(0, 100), "100 episodes played by the seeded policy",
                          proc=p)
        # Always push the cart right: every episode ends within about 10 steps.
        right = self.path("right.pb")
        write_policy(right, 4, [-50.0, 50.0], version=7)
        q = learner("--connect", addr, "--push-policy", right)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertIn("pushed the policy to 1 of 1 nodes", q.stderr)
        # A policy that does not fit the env is refused; the node goes on.
        bad = self.path("bad.pb")
        write_policy(bad, 3, [0.0, 1.0])
        q = learner("--connect", addr, "--push-policy", bad)
        self.assertEqual(q.returncode, 1)
        after = wait_for(lambda: played_by(7, 100), "100 episodes played by pushed version 7",
                         proc=p)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 0)
        s = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(s["policy_pushes"], 1)
        self.assertEqual(s["policy_version"], 7)
        self.assertGreater(s["learners_rejected"], 0)
        # One switch, forward: an episode is played by 0, by 7, or begun by 0
        # and finished by 7; never 7 then 0.
        pairs = {(r["policy_first"], r["policy_last"])
                 for r in nu.read_metrics(m.path) if r["type"] == "episode"}
        self.assertLessEqual(pairs, {(0, 0), (0, 7), (7, 7)})
        self.assertGreater(sum(r["length"] for r in before) / len(before), 15)
        self.assertLess(max(r["length"] for r in after), 12)
        self.assertTrue(all(r["terminated"] for r in after))

    def test_learner_role_refused_by_a_local_node(self):
        p = nu.spawn([nu.NODE, "--listen", "127.0.0.1:0", "--seconds", "0", "--quiet"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        addr = w.listen_address(p)
        c = w.Conn(addr)
        f = c.hello()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("not served here", f.error.message)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 0)


class ReplayServe(nu.TempDirCase):
    """rollout-replay --serve acts as a node for one learner."""

    def serve(self, traj, *learner_args):
        replay = os.path.join(os.path.dirname(nu.NODE), "rollout-replay")
        p = nu.spawn([replay, "--serve", "127.0.0.1:0", traj], stderr=subprocess.PIPE, text=True)
        addr = None
        for line in p.stderr:
            if "serving on" in line:
                addr = line.split()[-1]
                break
        q = learner("--connect", addr, *learner_args)
        err = p.stderr.read()
        p.wait(timeout=nu.HANG_GUARD_S)
        return p.returncode, err, q

    def test_same_seed_learner_repeats_the_recording(self):
        traj = self.path("run.traj")
        nu.run("--num-envs", 8, "--steps", 8 * 100, "--record", traj, "--seed", 3)
        rc, err, q = self.serve(traj, "--seed", 3)
        self.assertEqual(rc, 0, err)
        self.assertEqual(q.returncode, 0, q.stderr)
        # The learner got every recorded observation and, with the node's seed
        # and init, chose exactly the recorded actions.
        self.assertIn("compared 800 actions", err)
        self.assertIn(": 0 mismatch(es)", err)
        rc, err, q = self.serve(traj, "--seed", 4)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r": [1-9][0-9]* mismatch\(es\); first: env \d+")

    def test_bad_learner(self):
        traj = self.path("run.traj")
        nu.run("--num-envs", 4, "--steps", 40, "--record", traj)
        replay = os.path.join(os.path.dirname(nu.NODE), "rollout-replay")
        p = nu.spawn([replay, "--serve", "127.0.0.1:0", traj], stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "serving on" in line:
                addr = line.split()[-1]
                break
        # A stranger's garbage closes that connection only: the replay goes
        # on waiting for a learner, as a node would.
        c = w.Conn(addr)
        c.send_raw(b"\x03abc")
        f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIsNone(c.recv())
        self.assertIsNone(p.poll())
        # The served learner breaking the protocol ends the replay: exit 1.
        c = w.Conn(addr)
        self.assertEqual(c.hello().WhichOneof("body"), "welcome")
        f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "observations")
        c.send(actions=w.pb2().Actions(seq=f.observations.seq, discrete=[9] * len(f.observations.env)))
        f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("outside [0, 2)", f.error.message)
        p.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(p.returncode, 1)


def fd_count(pid):
    return len(nu.open_fds(pid))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fixed_learner(addr, *args, **kw):
    """tests/integration/fixed_learner.py; one stdout line per answered frame."""
    return nu.spawn([sys.executable, os.path.join(HERE, "fixed_learner.py"), addr, *args],
                    stdout=subprocess.PIPE, text=True, **kw)


class Churn(nu.TempDirCase):
    def test_200_connections_leave_no_fd_or_memory_behind(self):
        node, addr = w.start_node(nu.NODE, "--num-envs", 16, "--seconds", 0)
        node_err = Lines(node.stderr)  # a line or two per connection: never let the pipe fill
        good = fixed_learner(addr)
        answered = Lines(good.stdout, tally=("answered",))  # drained: a full pipe stalls it
        # Attached and served: its socket is one of the node's fds from now on.
        wait_for(lambda: answered.count("answered"), "the good learner being served", proc=node)
        fds = fd_count(node.pid)

        def churn(i):
            c = w.Conn(addr)
            kind = i % 4
            if kind == 0:
                c.send_raw(b"\x07garbage")
                c.recv()
            elif kind == 1:
                c.hello()
            elif kind == 2:
                c.hello()
                c.recv()  # take some envs' observations, then vanish unanswered
            c.close()

        def all_closed(what):
            wait_for(lambda: fd_count(node.pid) == fds, f"the node closing {what} "
                     f"(open fds back to {fds}, now {fd_count(node.pid)})", proc=node)

        for i in range(40):  # warm-up: every path runs, the allocator settles
            churn(i)
        all_closed("the 40 warm-up connections")
        rss = rss_kib(node.pid)
        for i in range(200):
            churn(i)
        all_closed("the 200 connections")
        rss_after = rss_kib(node.pid)
        if not nu.sanitized():  # the sanitizers hold freed memory on purpose
            self.assertLess(rss_after - rss, 2048, f"RSS {rss} -> {rss_after} KiB")
        self.assertIsNone(good.poll(), "the good learner was dropped")
        node.send_signal(signal.SIGINT)
        s, _ = finish(node, err_lines=node_err)
        good.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(node.returncode, 0)
        self.assertGreaterEqual(s["learners_rejected"], 60)  # the garbage senders
        self.assertGreater(s["steps"], 0)


class Slots(nu.TempDirCase):
    def test_silent_connections_cannot_hold_the_slots(self):
        # Connections that have not said hello wait apart (wire/gate.h): they
        # never count against --max-learners, and are closed after
        # --hello-timeout. Only attached learners fill the slots.
        node, addr = w.start_node(nu.NODE, "--num-envs", 16, "--seconds", 0, "--max-learners",
                                  2, "--hello-timeout", 3)
        silent = [w.Conn(addr), w.Conn(addr)]
        first, second, third = w.Conn(addr), w.Conn(addr), w.Conn(addr)
        self.assertEqual(first.hello().WhichOneof("body"), "welcome")
        self.assertEqual(second.hello().WhichOneof("body"), "welcome")
        refused = third.hello()
        while refused is not None and refused.WhichOneof("body") != "error":
            refused = third.recv()
        self.assertIsNotNone(refused, "the third learner was neither welcomed nor refused")
        self.assertIn("too many learners attached (limit 2)", refused.error.message)
        third.close()
        for c in silent:
            f = c.recv()
            self.assertEqual(f.WhichOneof("body"), "error")
            self.assertIn("no hello within 3.0 s", f.error.message)
            self.assertIsNone(c.recv())
            c.close()
        for c in (first, second):
            f = c.recv()
            while f is not None and f.WhichOneof("body") != "observations":
                f = c.recv()
            self.assertIsNotNone(f, "an attached learner got no observations")
            c.close()
        node.send_signal(signal.SIGINT)
        s, err = finish(node)
        self.assertEqual(node.returncode, 0, err)
        self.assertEqual(err.count("no hello within"), 2, err)
        self.assertGreaterEqual(s["learners_rejected"], 3)

    def test_token_file_readable_by_others_is_warned_about(self):
        tok = self.path("token")
        with open(tok, "w") as f:
            f.write("a-long-random-secret\n")
        for mode, warned in [(0o644, True), (0o600, False)]:
            os.chmod(tok, mode)
            _, p = nu.run("--learner", "remote", "--listen", "127.0.0.1:0", "--token-file", tok,
                          "--seconds", 0.2)
            self.assertEqual("accessible to other users" in p.stderr, warned, p.stderr)
            # The learner says the same (here with no node to reach).
            lp = learner("--connect", "127.0.0.1:1", "--token-file", tok, "--reconnect-s", 0)
            self.assertEqual("accessible to other users" in lp.stderr, warned, lp.stderr)
        self.assertNotIn("a-long-random-secret", p.stderr + lp.stderr)


class SlowLearner(nu.TempDirCase):
    def test_slow_learner_backpressure_is_bounded_and_visible(self):
        # A learner that answers only when the test lets it (--paced): the
        # envs wait for it (no queue grows, memory stays flat), every env
        # step is one it answered, and the throughput lines say where the
        # envs wait.
        m = nu.Metrics(self.path("m.jsonl"))
        node, addr = w.start_node(nu.NODE, "--num-envs", 64, "--seconds", 0, "--metrics",
                                  m.path, "--metrics-interval", 0.05)
        slow = fixed_learner(addr, "--paced", stdin=subprocess.PIPE)
        answered = Lines(slow.stdout)

        def rows_answered():
            return sum(int(line.split()[2]) for line in list(answered.lines))

        def waiting_line(frames):
            """Let the learner answer `frames` more frames, then wait for a
            throughput line with every answer stepped and every env waiting
            for the learner again; returns that line."""
            want = answered.count("answered") + frames
            slow.stdin.write("\n" * frames)
            slow.stdin.flush()
            wait_for(lambda: answered.count("answered") == want,
                     f"the learner answering {want} frames", proc=slow)
            steps = rows_answered()

            def all_waiting():
                r = m.next_tput()
                return r if (r["steps"] == steps and r["learners"] == 1 and
                             r["envs_in_flight"] + r["envs_unsent"] == 64) else None
            return wait_for(all_waiting, f"a throughput line with {steps} steps (the rows "
                            "answered) and all 64 envs waiting for the learner", proc=node)

        held = waiting_line(0)
        self.assertEqual(held["steps"], 0)  # nothing steps before the learner answers
        self.assertGreater(held["envs_in_flight"], 0)
        held = waiting_line(20)  # warm-up: every path ran
        rss = rss_kib(node.pid)
        held = waiting_line(200)
        rss_after = rss_kib(node.pid)
        # Held, the node reports how long the oldest batch has waited, and no
        # env steps until the learner answers again.
        self.assertGreater(held["oldest_wait_ms"], 0.0)
        self.assertEqual(m.next_tput()["steps"], held["steps"])
        if not nu.sanitized():  # the sanitizers hold freed memory on purpose
            self.assertLess(rss_after - rss, 1024, f"RSS {rss} -> {rss_after} KiB")
        slow.stdin.close()  # answer freely: the goodbye gets through
        node.send_signal(signal.SIGINT)
        s, err = finish(node)
        slow.wait(timeout=nu.HANG_GUARD_S)
        self.assertEqual(node.returncode, 0, err)
        self.assertGreaterEqual(s["steps"], held["steps"])


class Reattach(nu.TempDirCase):
    def run_node_with_learners(self, metrics, kill_after_frames):
        """Serve a node with fixed learners; if kill_after_frames, SIGKILL the
        first after that many frames and start a second. --seed 1: the runs
        compared play the same envs (a node without --seed draws its own)."""
        node, addr = w.start_node(nu.NODE, "--num-envs", 24, "--steps", 24 * 300,
                                  "--shard", 3, "--metrics", metrics, "--metrics-episodes",
                                  "--metrics-interval", 0.05, "--max-wait-us", 0, "--seed", 1)
        if kill_after_frames:
            # A paced learner answers exactly that many frames and holds the
            # next: once the node reports envs in flight with every answer
            # stepped, frames it sent are unanswered when the learner is
            # killed, and must go again to the next (a learner killed with
            # nothing in flight, as a loaded machine could time it, tests
            # no resend).
            first = fixed_learner(addr, "--paced", stdin=subprocess.PIPE)
            answered = Lines(first.stdout)  # kept: the rows answered are summed
            first.stdin.write("\n" * kill_after_frames)
            first.stdin.flush()
            wait_for(lambda: answered.count("answered") == kill_after_frames,
                     f"the learner answering {kill_after_frames} frames", proc=first)
            rows = sum(int(line.split()[2]) for line in list(answered.lines))
            m = nu.Metrics(metrics)

            def held():
                r = m.next_tput()
                return r if r["steps"] == rows and r["envs_in_flight"] > 0 else None
            wait_for(held, f"a throughput line with {rows} steps and envs in flight", proc=node)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = fixed_learner(addr)
            second.communicate(timeout=nu.HANG_GUARD_S)
        else:
            first = fixed_learner(addr)
            first.communicate(timeout=nu.HANG_GUARD_S)
        s, err = finish(node)
        self.assertEqual(node.returncode, 0, err)
        return s, err

    def test_sigkill_and_reattach_loses_nothing(self):
        ref, _ = self.run_node_with_learners(self.path("ref.jsonl"), 0)
        got, err = self.run_node_with_learners(self.path("got.jsonl"), 150)
        self.assertEqual(got["learners_attached"], 2)
        self.assertGreater(got["batches_resent"], 0, err)
        self.assertEqual(got["steps"], ref["steps"])
        # Same actions for the same (env, step): identical episodes for every
        # env mean no step was skipped or applied twice.
        a = nu.episodes_by_env(nu.read_metrics(self.path("ref.jsonl")))
        b = nu.episodes_by_env(nu.read_metrics(self.path("got.jsonl")))
        self.assertEqual(sorted(a), list(range(24)))
        self.assertEqual(a, b)


class BadPeers(nu.TempDirCase):
    """Each bad peer gets an error frame (where one can still be sent) and a
    closed connection, and the node keeps serving a good learner meanwhile."""

    def setUp(self):
        super().setUp()
        tok = self.path("token")
        with open(tok, "w") as f:
            f.write("s3cret\n")
        # A learner-timeout far above what the good learner ever takes to
        # answer: only the one that never answers is timed out.
        self.node, self.addr = w.start_node(
            nu.NODE, "--num-envs", 16, "--seconds", 0, "--token-file", tok,
            "--max-frame-bytes", 4096, "--learner-timeout", 5)
        self.node_err = Lines(self.node.stderr)
        self.good = fixed_learner(self.addr, "--token", "s3cret")
        self.good_out = Lines(self.good.stdout, tally=("answered",))

    def tearDown(self):
        self.node.send_signal(signal.SIGINT)
        self.node.wait(timeout=nu.HANG_GUARD_S)
        out = self.node.stdout.read()
        self.good.wait(timeout=nu.HANG_GUARD_S)
        self.summary = json.loads(out.strip().splitlines()[-1])
        super().tearDown()
        if hasattr(self, "expected_rejected"):
            # Every bad peer was counted; the good learner never was.
            self.assertEqual(self.summary["learners_rejected"], self.expected_rejected)
            self.assertGreater(self.summary["steps"], 0)

    def expect_closed_with_error(self, c, needle):
        f = c.recv()
        self.assertIsNotNone(f, "expected an error frame")
        self.assertEqual(f.WhichOneof("body"), "error", f)
        self.assertIn(needle, f.error.message)
        self.assertIsNone(c.recv(), "connection should be closed")

    def good_still_served(self):
        before = self.good_out.count("answered")
        wait_for(lambda: self.good_out.count("answered") > before + 5,
                 "the good learner answering 5 more frames; node log:\n" + self.node_err.text(),
                 proc=self.node)

    def test_bad_inputs(self):
        pb = w.pb2()
        cases = 0
        # Garbage bytes: not a frame.
        c = w.Conn(self.addr)
        c.send_raw(b"\x05\xff\xff\xff\xff\xff")
        self.expect_closed_with_error(c, "not a valid Frame")
        cases += 1
        # A frame over the limit (only its length prefix is needed).
        c = w.Conn(self.addr)
        c.send_raw(w.varint(1 << 20))
        self.expect_closed_with_error(c, "exceeds the limit")
        cases += 1
        # A malformed varint.
        c = w.Conn(self.addr)
        c.send_raw(b"\xff" * 11)
        self.expect_closed_with_error(c, "malformed length")
        cases += 1
        # Wrong protocol version.
        c = w.Conn(self.addr)
        f = c.hello(token="s3cret", version=99)
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("protocol version 99", f.error.message)
        self.assertIsNone(c.recv())
        cases += 1
        # Missing and wrong token.
        for tok in ("", "guess"):
            c = w.Conn(self.addr)
            f = c.hello(token=tok)
            self.assertEqual(f.WhichOneof("body"), "error")
            self.assertIn("token", f.error.message)
            self.assertIsNone(c.recv())
            cases += 1
        # Out of order: actions before hello.
        c = w.Conn(self.addr)
        c.send(actions=pb.Actions(seq=1, discrete=[0]))
        self.expect_closed_with_error(c, "expected hello first")
        cases += 1
        # Out of order: a second hello.
        c = w.Conn(self.addr)
        self.assertEqual(c.hello(token="s3cret").WhichOneof("body"), "welcome")
        c.send(hello=pb.Hello(protocol_version=1, role="learner", token="s3cret"))
        f = c.recv()
        while f is not None and f.WhichOneof("body") == "observations":
            f = c.recv()
        self.assertEqual(f.WhichOneof("body"), "error")
        self.assertIn("unexpected hello", f.error.message)
        cases += 1
        self.good_still_served()
        # Wrong count, out-of-range action, unknown seq: each on a fresh learner
        # that first gets some observations.
        for mutate, needle in (
            (lambda o: pb.Actions(seq=o.seq, discrete=[0] * (len(o.env) + 1)), "expected"),
            (lambda o: pb.Actions(seq=o.seq, discrete=[7] * len(o.env)), "outside [0, 2)"),
            (lambda o: pb.Actions(seq=o.seq + 1000, discrete=[0] * len(o.env)),
             "not awaiting"),
        ):
            c = w.Conn(self.addr)
            self.assertEqual(c.hello(token="s3cret").WhichOneof("body"), "welcome")
            # A new learner gets shards from the good one (rebalancing), so
            # observations come.
            f = c.recv()
            while f is not None and f.WhichOneof("body") != "observations":
                f = c.recv()
            self.assertIsNotNone(f, "a new learner got no observations")
            c.send(actions=mutate(f.observations))
            f = c.recv()
            while f is not None and f.WhichOneof("body") == "observations":
                f = c.recv()
            self.assertIsNotNone(f)
            self.assertEqual(f.WhichOneof("body"), "error")
            self.assertIn(needle, f.error.message)
            cases += 1
        # A learner that stops reading and answering: closed after the
        # timeout, its envs move to the good learner.
        c = w.Conn(self.addr)
        self.assertEqual(c.hello(token="s3cret").WhichOneof("body"), "welcome")
        wait_for(lambda: self.node_err.count("no actions for"),
                 "the node timing out the learner that never answers", proc=self.node)
        cases += 1
        self.good_still_served()
        self.assertIn("closing", self.node_err.text())
        self.expected_rejected = cases


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
