"""Stream mode (rollout-node --learner stream, docs/protocol.md): the node acts
and streams every transition as [T, N] segments; learners acknowledge them and
may push weights back.

Each test waits for what the processes report (summaries, metrics lines,
segments received), with the hang guard of nodeutil.wait_for; none decides by
the clock.

Run as: test_stream.py ROLLOUT_NODE PLUGIN_SO (rollout-learner lies beside the
node; rollout_pb2 comes from $ROLLOUT_PROTO_OUT).
"""
import json
import os
import signal
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402

LEARNER = None


def start_node(*args, metrics=None, quiet=True, listen="127.0.0.1:0"):
    """A stream node on a free loopback port (or `listen`): (Popen, address,
    stderr Lines)."""
    extra = ["--metrics", metrics, "--metrics-interval", "0.05"] if metrics else []
    extra += ["--quiet"] if quiet else []
    return nu.start_listening("stream", *extra, *args, listen=listen)


summary = nu.json_summary


def fixed_policy(obs_dim, logits, version):
    """Weights whose head ignores the input: fixed logits."""
    hidden = 8
    return rc.policy_params([(np.zeros((hidden, obs_dim)), np.zeros(hidden)),
                             (np.zeros((len(logits), hidden)), np.asarray(logits))],
                            activation="tanh", action_kind="discrete", version=version)


class CLearner(nu.TempDirCase):
    def test_every_transition_counted_once(self):
        n, workers = 64 * 300, 2
        p, addr, log = start_node("--num-envs", 64, "--workers", workers, "--unroll", 16,
                                  "--steps", n)
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet"], capture_output=True,
                       text=True)
        s = summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = json.loads(q.stdout.strip().splitlines()[-1])
        node = ls["nodes"][0]
        self.assertEqual(node["mode"], "stream")
        self.assertEqual(s["steps"], n)
        self.assertEqual(ls["steps"], n)  # every transition, once
        self.assertEqual(node["episodes"], s["episodes"])
        self.assertAlmostEqual(node["mean_return"], s["mean_return"], places=6)
        self.assertEqual((node["duplicates"], node["gaps"]), (0, 0))
        self.assertEqual(s["stream_transitions_acked"], n)
        self.assertEqual(s["stream_segments_acked"], s["stream_segments_sent"])
        self.assertEqual(s["stream_segments_unsent"], 0)


    def test_segments_in_shared_memory_on_a_unix_socket(self):
        # Over unix:PATH the learner maps the node's segment memory and reads
        # every segment in place; --no-shared-memory and TCP carry the bytes;
        # over TCP to a node on this host the learner moves to its private
        # socket and memory unless --no-upgrade.
        n = 64 * 400
        for name, listen, extra, in_memory in (
                ("shared", "unix:" + self.path("a.sock"), [], True),
                ("unix bytes", "unix:" + self.path("b.sock"), ["--no-shared-memory"], False),
                ("tcp upgraded", "127.0.0.1:0", [], True),
                ("tcp", "127.0.0.1:0", ["--no-upgrade"], False)):
            with self.subTest(name):
                p, addr, log = start_node("--num-envs", 64, "--workers", 2, "--unroll", 16,
                                          "--steps", n, listen=listen)
                q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet", *extra],
                               capture_output=True, text=True)
                s = summary(p, log)
                self.assertEqual(q.returncode, 0, q.stderr)
                node = json.loads(q.stdout.strip().splitlines()[-1])["nodes"][0]
                self.assertEqual(node["steps"], n)
                self.assertEqual(node["episodes"], s["episodes"])
                self.assertAlmostEqual(node["mean_return"], s["mean_return"], places=6)
                self.assertEqual((node["duplicates"], node["gaps"]), (0, 0))
                self.assertGreater(node["segments"], 0)
                self.assertEqual(node["segments_in_memory"],
                                 node["segments"] if in_memory else 0)
                self.assertEqual(node["upgraded"], name == "tcp upgraded")
                self.assertEqual(s["learners_upgraded"], int(name == "tcp upgraded"))
                self.assertEqual(s["stream_transitions_acked"], n)


class PythonStream(nu.TempDirCase):
    def test_shared_memory_segments_equal_socket_ones(self):
        # Two nodes with one seed: each shard's segments are the same
        # transitions, whether read in the node's memory or off the socket.
        n = 32 * 8 * 12

        def collect(sock, shared):
            p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--steps", n,
                                      "--seed", 7, "--shard", 8, listen="unix:" + self.path(sock))
            got = {}
            with rc.Stream([addr], shared_memory=shared) as st:
                while True:
                    try:
                        b = st.recv(timeout=nu.HANG_GUARD_S)
                    except rc.ConnectionClosed:
                        break
                    self.assertIsNotNone(b, "no segment within the hang guard")
                    self.assertEqual(b.in_memory, shared)
                    got[(b.shard, b.shard_seq)] = {k: v.copy() for k, v in b.tensors.items()}
            summary(p, log)
            return got

        a, b = collect("a.sock", True), collect("b.sock", False)
        self.assertEqual(sum(x["reward"].size for x in a.values()), n)
        self.assertEqual(a.keys(), b.keys())
        for key in a:
            self.assertEqual(a[key].keys(), b[key].keys())
            for name in a[key]:
                self.assertTrue(np.array_equal(a[key][name], b[key][name]), (key, name))


    def test_over_a_unix_socket(self):
        n = 16 * 64
        p, addr, log = start_node("--num-envs", 16, "--unroll", 16, "--steps", n,
                                  listen="unix:" + self.path("stream.sock"))
        self.assertEqual(addr, "unix:" + self.path("stream.sock"))
        got = 0
        with rc.Stream([addr]) as st:
            with self.assertRaises(rc.ConnectionClosed):  # the node's goodbye, once all is acked
                while True:
                    b = st.recv(timeout=nu.HANG_GUARD_S)
                    self.assertIsNotNone(b, "no segment and no goodbye within the hang guard")
                    got += b.num_transitions
        self.assertEqual(got, n)
        self.assertEqual(summary(p, log)["stream_transitions_acked"], n)

    def test_segments_are_whole_and_in_order(self):
        n = 32 * 200
        p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--steps", n)
        got, last = 0, {}
        with rc.Stream([addr]) as st:
            self.assertEqual(st.welcomes[0].unroll, 8)
            while True:
                try:
                    b = st.recv(timeout=nu.HANG_GUARD_S)
                except rc.ConnectionClosed as e:
                    self.assertTrue(e.clean, e)
                    break
                self.assertIsNotNone(b, "no segment within the hang guard")
                self.assertEqual(b.obs.shape, (b.t, b.n, 4))
                self.assertEqual(b.action.shape, (b.t, b.n))
                self.assertEqual(b.next_obs.shape, (b.n, 4))
                self.assertEqual(b.final_obs.shape, (len(b.final_index), 4))
                # The obs after step t is the obs of step t + 1 unless an
                # episode ended there (then it is a reset, and final_obs holds
                # the ended one's last observation).
                ended = b.terminated.astype(bool) | b.truncated.astype(bool)
                self.assertTrue(np.array_equal(b.is_first[1:].astype(bool), ended[:-1]))
                self.assertEqual(b.shard_seq, last.get(b.shard, -1) + 1)
                last[b.shard] = b.shard_seq
                got += b.num_transitions
        s = summary(p, log)
        self.assertEqual(got, n)
        self.assertEqual(s["stream_transitions_acked"], n)

    def test_kept_batches_stay_valid_and_poison_shows_released_ones(self):
        # Off the socket, and out of the node's shared memory (which the
        # node refills once the segment is acknowledged).
        for listen in ("127.0.0.1:0", "unix:" + self.path("kept.sock")):
            with self.subTest(listen):
                p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--seconds", 0,
                                          listen=listen)
                # TCP stays TCP (upgrade=False): off the socket.
                with rc.Stream([addr], poison=True, upgrade=False) as st:
                    a = st.recv(timeout=nu.HANG_GUARD_S)
                    self.assertEqual(a.in_memory, listen.startswith("unix:"))
                    obs, act = a.obs.copy(), a.action.copy()
                    for _ in range(50):  # more than fill a receive buffer, or the node's pool
                        self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
                    self.assertTrue(np.array_equal(a.obs, obs),
                                    "a kept batch changed under its owner")
                    self.assertTrue(np.array_equal(a.action, act))
                    a.release()
                    self.assertTrue(np.isnan(a.obs).all(), "a released batch was not poisoned")
                    self.assertTrue((a.action == -1).all())
                p.send_signal(signal.SIGINT)
                summary(p, log)

    def test_detach_and_reattach_lose_nothing(self):
        p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--seconds", 0,
                                  "--stream-window", 4)
        seen = {}  # shard -> the shard_seqs the first learner received

        def note(b):
            seen.setdefault(b.shard, []).append(b.shard_seq)

        a = rc.Stream([addr], name="first")
        for _ in range(20):
            b = a.recv(timeout=nu.HANG_GUARD_S)
            note(b)
        # Gone without a goodbye, with segments unacknowledged (the last one
        # received and those in flight): the node must send them again.
        a._nodes[0].sock.close()
        a._nodes[0].open = False
        # Logged as "disconnected", or as a reset when unread bytes were left.
        nu.wait_for(lambda: log.count("'first': ") >= 2, "the node to log 'first' gone",
                    proc=p)
        got = {}
        with rc.Stream([addr], name="second") as b2:
            while sum(len(v) for v in got.values()) < 40:
                b = b2.recv(timeout=nu.HANG_GUARD_S)
                got.setdefault(b.shard, []).append(b.shard_seq)
            p.send_signal(signal.SIGINT)
            while True:  # the node drains what is still to come, then says goodbye
                try:
                    b = b2.recv(timeout=nu.HANG_GUARD_S)
                except rc.ConnectionClosed:
                    break
                got.setdefault(b.shard, []).append(b.shard_seq)
        s = summary(p, log)
        self.assertGreaterEqual(s["stream_segments_resent"], 1)
        self.assertEqual(s["stream_transitions_acked"], s["steps"])  # every step, acknowledged
        self.assertEqual(s["stream_segments_unsent"], 0)
        for shard, seqs in got.items():
            # The second learner gets each shard's segments in order, from
            # where the first one's acknowledgements stopped (so perhaps a
            # few it had received again), with no hole in between.
            self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), (shard, seqs))
            before = seen.get(shard, [])
            self.assertLessEqual(seqs[0], (max(before) + 1) if before else 0, (shard, before))

    def test_a_stopping_node_refuses_newcomers_and_drains_to_its_learner(self):
        p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--seconds", 0, quiet=False)
        with rc.Stream([addr], name="first") as st:
            self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
            # Not acknowledged: the node cannot finish before "first" reads on.
            p.send_signal(signal.SIGINT)
            nu.wait_for(lambda: log.count("SIGINT: finishing"), "the node to log that it stops",
                        proc=p)
            with self.assertRaises(rc.RemoteError) as e:
                rc.Stream([addr], name="second")
            self.assertEqual(e.exception.code, 108)
            while True:
                try:
                    self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
                except rc.ConnectionClosed as c:
                    self.assertTrue(c.clean, c)
                    break
        s = summary(p, log)
        self.assertEqual(s["stream_segments_unsent"], 0)
        self.assertEqual(s["stream_transitions_acked"], s["steps"])

    def test_stopping_with_no_learner_exits_and_counts_the_unsent(self):
        p, addr, log = start_node("--num-envs", 32, "--unroll", 8, "--seconds", 0,
                                  "--stream-window", 2)
        with rc.Stream([addr]) as st:
            self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
        nu.wait_for(lambda: log.count("said goodbye"), "the node to see the learner leave",
                    proc=p)
        p.send_signal(signal.SIGINT)  # the shards wait for segments no one will take
        s = summary(p, log)
        self.assertGreater(s["stream_segments_unsent"], 0)
        self.assertLess(s["stream_transitions_acked"], s["steps"])

    def test_a_slow_learner_makes_the_envs_wait(self):
        m = self.path("m.jsonl")
        p, addr, log = start_node("--num-envs", 16, "--workers", 1, "--shard", 8, "--unroll", 4,
                                  "--seconds", 0, "--stream-window", 2, metrics=m)
        metrics = nu.Metrics(m)
        with rc.Stream([addr]) as st:
            st.recv(timeout=nu.HANG_GUARD_S)
            # Now no recv (no ack): the window fills, the pool empties, and
            # the shards wait for segments instead of stepping on.
            nu.wait_for(lambda: metrics.tput("stream_waits") > 0 and
                        metrics.tput("segments_in_flight") == 2, "the shards to wait for segments",
                        proc=p)
            a = metrics.next_tput()
            b = metrics.next_tput()
            self.assertEqual(a["steps"], b["steps"], "the node stepped on with its learner stalled")
            for _ in range(10):  # reading again lets it go on
                self.assertIsNotNone(st.recv(timeout=nu.HANG_GUARD_S))
            nu.wait_for(lambda: metrics.tput("steps") > b["steps"], "the node to step again",
                        proc=p)
        p.send_signal(signal.SIGINT)
        s = summary(p, log)
        self.assertGreater(s["stream_waits"], 0)
        self.assertGreater(s["stream_wait_s"], 0)

    def test_pushed_versions_stamp_the_transitions_they_chose(self):
        p, addr, log = start_node("--num-envs", 16, "--unroll", 4, "--seconds", 0)
        right = fixed_policy(4, [-50.0, 50.0], version=7)  # always action 1
        versions = {}
        with rc.Stream([addr]) as st:
            b = st.recv(timeout=nu.HANG_GUARD_S)
            self.assertEqual(b.policy_version_min, 0)
            st.push_policy(right)
            while True:
                b = st.recv(timeout=nu.HANG_GUARD_S)
                self.assertIsNotNone(b)
                v = b.policy_version
                self.assertTrue((np.diff(v.astype(np.int64)) >= 0).all(), v)  # never back
                self.assertTrue(b.policy_version_min <= v.min() and v.max() <= b.policy_version_max)
                prev = versions.get(b.shard, 0)
                self.assertGreaterEqual(v.min(), prev)
                versions[b.shard] = int(v.max())
                rows = v == 7
                # The rows version 7 chose: its action, with its log-probability.
                self.assertTrue((b.action[rows] == 1).all())
                self.assertTrue(np.allclose(b.logp[rows], 0.0, atol=1e-6))
                if b.policy_version_min == 7:
                    break
            self.assertEqual(st.accepted_version(0), 7)
        p.send_signal(signal.SIGINT)
        s = summary(p, log)
        self.assertEqual(s["policy_version"], 7)
        self.assertEqual(s["policy_pushes"], 1)
        self.assertGreaterEqual(s["policy_lag_max"], 1)  # some were sent after the switch

    def test_max_policy_lag_drops_old_segments(self):
        m = self.path("m.jsonl")
        p, addr, log = start_node("--num-envs", 16, "--workers", 1, "--shard", 8, "--unroll", 4,
                                  "--seconds", 0, metrics=m)
        metrics = nu.Metrics(m)
        with rc.Stream([addr], window=1, max_policy_lag=1) as st:
            st.recv(timeout=nu.HANG_GUARD_S)
            # The window is full (one unacknowledged): segments of version 0
            # wait at the node while versions 1..3 are pushed.
            for v in (1, 2, 3):
                st.push_policy(fixed_policy(4, [0.0, 0.0], version=v))
                nu.wait_for(lambda: st.pump() >= 0 and st.accepted_version(0) == v,
                            f"the node to accept version {v}", proc=p)
            while True:
                b = st.recv(timeout=nu.HANG_GUARD_S)
                if b.policy_version_min >= 2:
                    break
                self.fail(f"a segment of version {b.policy_version_min} came, 3 - 1 = 2 is the "
                          "oldest allowed")
            nu.wait_for(lambda: metrics.tput("segments_dropped_lag") > 0,
                        "a segment dropped for its lag", proc=p)
        p.send_signal(signal.SIGINT)
        s = summary(p, log)
        self.assertGreater(s["stream_segments_dropped_lag"], 0)


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
