"""The Python client (python/rollout_client): framing, handshake, batches,
actions and errors, against a fake node written in Python and against the
real rollout-node.

Run as: test_python_client.py ROLLOUT_NODE [BUILD_DIR]. rollout_pb2 is the
one the build generated (BUILD_DIR/proto; meson's test env names it). Every
wait is for a frame or a count, with GUARD as the only clock: a hang guard.
"""
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_POSITIONAL = [a for a in sys.argv[1:3] if not a.startswith("-")]
NODE = _POSITIONAL[0] if _POSITIONAL else None
BUILD = _POSITIONAL[1] if len(_POSITIONAL) > 1 else None
del sys.argv[1:1 + len(_POSITIONAL)]  # the rest is for unittest (-k, -v, ...)
if BUILD:
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import nodeutil as nu  # noqa: E402  (processes killed at exit and on SIGTERM)

import rollout_client as rc  # noqa: E402
from rollout_client.testing import FakeNode, NodeProcess  # noqa: E402

GUARD = nu.HANG_GUARD_S  # the one clock in these tests: only a lost event takes this long


def node_speaks_protocol():
    if not NODE or not os.access(NODE, os.X_OK):
        return False
    p = subprocess.run([NODE, "--help"], capture_output=True, text=True)
    return "--listen" in p.stdout + p.stderr


def balance(obs):
    """A hand-written CartPole controller: lasts about 500 steps if, and
    only if, every env gets its own action."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


class Framing(unittest.TestCase):
    def test_varint_round_trip(self):
        for v in (0, 1, 127, 128, 300, 16383, 16384, 2 ** 32, 2 ** 63, 2 ** 64 - 1):
            enc = rc.encode_varint(v)
            self.assertEqual(rc.decode_varint(enc), (v, len(enc)))
            self.assertEqual(rc.decode_varint(enc[:-1]), (None, 0))
        with self.assertRaises(ValueError):
            rc.encode_varint(-1)
        with self.assertRaises(ValueError):
            rc.encode_varint(2 ** 64)

    def test_frames_survive_any_split(self):
        rng = random.Random(5)
        bodies = [b"", b"x", bytes(range(200)), os.urandom(70000), b"tail"]
        stream = b"".join(rc.encode_frame(b) for b in bodies)
        for trial in range(20):
            dec = rc.FrameDecoder(max_frame=1 << 20)
            got, i = [], 0
            while i < len(stream):
                k = 1 if trial == 0 else rng.randint(1, 9000)
                got += dec.feed(stream[i:i + k])
                i += k
            self.assertEqual(got, bodies)
            self.assertEqual(dec.pending(), 0)

    def test_protobuf_frame_round_trip(self):
        pb = rc.pb2()
        f = pb.Frame(hello=pb.Hello(protocol_version=1, role="learner", token="t", name="n"))
        (body,) = rc.FrameDecoder().feed(rc.encode_frame(f.SerializeToString()))
        g = pb.Frame()
        g.ParseFromString(body)
        self.assertEqual(g, f)

    def test_max_frame_size(self):
        self.assertEqual(rc.FrameDecoder(max_frame=100).feed(rc.encode_frame(b"a" * 100)),
                         [b"a" * 100])
        dec = rc.FrameDecoder(max_frame=100, where="test")
        # Rejected on the length prefix alone, before any body arrives.
        with self.assertRaises(rc.FrameTooLarge) as cm:
            dec.feed(rc.encode_varint(101))
        self.assertEqual((cm.exception.size, cm.exception.limit), (101, 100))
        self.assertIn("exceeds the maximum of 100 bytes", str(cm.exception))
        with self.assertRaises(rc.FrameTooLarge):
            rc.encode_frame(b"a" * 101, max_frame=100)

    def test_overlong_length_prefix(self):
        with self.assertRaises(rc.ProtocolError):
            rc.FrameDecoder().feed(b"\x80" * 11)


class RawServer:
    """A one-connection TCP server whose behaviour is a function of the
    accepted socket: for protocol errors the fake node does not make."""

    def __init__(self, behave):
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.t = threading.Thread(target=self._run, args=(behave,), daemon=True)
        self.t.start()

    def _run(self, behave):
        s, _ = self.srv.accept()
        with s:
            s.settimeout(GUARD)
            try:
                behave(s)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.close()
        self.t.join(5)


def read_frame(sock):
    """One frame from sock (reads byte by byte: nothing after it is lost)."""
    dec = rc.FrameDecoder()
    while True:
        data = sock.recv(1)
        if not data:
            raise ConnectionError("closed")
        frames = dec.feed(data)
        if frames:
            f = rc.pb2().Frame()
            f.ParseFromString(frames[0])
            return f


def send(sock, **body):
    sock.sendall(rc.encode_frame(rc.pb2().Frame(**body).SerializeToString()))


def welcome():
    pb = rc.pb2()
    return pb.Welcome(protocol_version=1, node_id=9, max_frame=1 << 20, spec=pb.EnvSpec(
        env="t", num_envs=2, observation=pb.Space(kind="box", shape=[3]),
        action=pb.Space(kind="discrete", n=2)))


class AgainstFakeNode(unittest.TestCase):
    def test_handshake_batches_and_actions(self):
        with FakeNode(num_envs=8, groups=3) as node:
            with rc.Client([node.address], name="unit") as c:
                (info,) = c.nodes
                self.assertEqual((info.env, info.num_envs, info.obs_dim, info.action_kind,
                                  info.action_n), ("cartpole", 8, 4, "discrete", 2))
                seen = set()
                for _ in range(9):
                    b = c.recv(GUARD)
                    self.assertIsInstance(b, rc.Batch)
                    n = b.n
                    self.assertEqual(b.obs.shape, (n, 4))
                    self.assertEqual(b.obs.dtype, np.float32)
                    self.assertEqual(b.final_obs.shape, (n, 4))
                    for a in (b.reward, b.terminated, b.truncated, b.episode_start, b.env):
                        self.assertEqual(a.shape, (n,))
                    self.assertEqual(b.terminated.dtype, bool)
                    self.assertTrue(np.isnan(b.final_obs[~b.has_final_obs]).all())
                    seen.update(b.env.tolist())
                    c.send_actions(b, np.ones(n, np.int32))
                self.assertEqual(seen, set(range(8)))
            self.assertEqual(node.hellos[0].role, "learner")
            self.assertEqual(node.hellos[0].name, "unit")
            self.assertEqual(node.hellos[0].protocol_version, 1)
            self.assertEqual(node.errors_sent, [])

    def test_bad_actions_are_refused_locally(self):
        with FakeNode(num_envs=4, groups=1) as node, rc.Client(node.address) as c:
            b = c.recv(GUARD)
            with self.assertRaises(ValueError):
                c.send_actions(b, np.zeros(b.n + 1, np.int64))  # wrong count
            with self.assertRaises(ValueError):
                c.send_actions(b, np.full(b.n, 2))               # out of range
            with self.assertRaises(ValueError):
                c.send_actions(b, np.zeros(b.n, np.float32))     # not integers
            c.send_actions(b, np.zeros(b.n, np.int64))
            with self.assertRaises(ValueError):
                c.send_actions(b, np.zeros(b.n, np.int64))       # answered twice

    def test_vecenv_over_two_nodes(self):
        with FakeNode(num_envs=5, groups=2, seed=1) as n0, \
                FakeNode(num_envs=3, groups=2, seed=2) as n1:
            with rc.VecEnv([n0.address, n1.address], timeout=GUARD,
                           autoreset_mode="same_step") as env:
                self.assertEqual(env.num_envs, 8)
                self.assertEqual(env.env_ids()[:6], [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4),
                                                      (1, 0)])
                obs, _ = env.reset()
                self.assertEqual(obs.shape, (8, 4))
                for _ in range(1100):
                    obs, rew, term, trunc, info = env.step(balance(obs))
                self.assertEqual(rew.shape, (8,))
                self.assertEqual(info["final_obs"].shape, (8, 4))
                # Every env balanced to the time limit: actions reached the
                # right envs of the right nodes.
                self.assertGreaterEqual(len(env.episode_returns), 16)
                self.assertEqual(set(env.episode_returns), {500.0})
            nu.wait_for(lambda: n0.goodbyes and n1.goodbyes, "a goodbye at both fake nodes")
            self.assertEqual(n0.goodbyes + n1.goodbyes, ["learner done"] * 2)

    def test_wrong_and_right_token(self):
        with FakeNode(token="s3cret") as node:
            with self.assertRaises(rc.AuthenticationError) as cm:
                rc.Client(node.address, token="wrong")
            self.assertEqual(cm.exception.code, 13)
            with tempfile.NamedTemporaryFile("w") as f:
                f.write("s3cret\n")
                f.flush()
                with rc.Client(node.address, token_file=f.name) as c:
                    self.assertIsNotNone(c.recv(GUARD))

    def test_version_mismatch(self):
        with FakeNode(protocol_version=2) as node:
            with self.assertRaises(rc.VersionMismatch) as cm:
                rc.Client(node.address)
            self.assertEqual(cm.exception.theirs, 2)

    def test_goodbye_ends_iteration(self):
        with FakeNode(num_envs=4, groups=2, max_steps=40) as node, rc.Client(node.address) as c:
            got = 0
            for b in c.batches(timeout=GUARD):
                c.send_actions(b, np.zeros(b.n, np.int64))
                got += 1
            self.assertGreaterEqual(got, 10)
            with self.assertRaises(rc.ConnectionClosed) as cm:
                c.recv(1)
            self.assertTrue(cm.exception.clean)


class AgainstRawServer(unittest.TestCase):
    def test_close_without_goodbye(self):
        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
        with RawServer(behave) as srv, rc.Client(srv.address) as c:
            with self.assertRaises(rc.ConnectionClosed) as cm:
                c.recv(GUARD)
            self.assertFalse(cm.exception.clean)

    def test_error_frame_mid_stream(self):
        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
            send(s, error=rc.pb2().Error(code=71, message="bad actions"))
        with RawServer(behave) as srv, rc.Client(srv.address) as c:
            with self.assertRaises(rc.RemoteError) as cm:
                c.recv(GUARD)
            self.assertEqual((cm.exception.code, cm.exception.message), (71, "bad actions"))

    def test_oversized_frame_from_node(self):
        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
            s.sendall(rc.encode_varint(1 << 30))
            self.reply = read_frame(s)
        with RawServer(behave) as srv:
            # The prefix may arrive with the welcome or after it.
            with self.assertRaises(rc.FrameTooLarge):
                with rc.Client(srv.address, max_frame=1 << 20) as c:
                    c.recv(GUARD)
        self.assertEqual(self.reply.error.code, 71)  # the client told the node why

    def test_inconsistent_observations(self):
        pb = rc.pb2()

        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
            send(s, observations=pb.Observations(seq=1, env=[0, 1], step=[0, 0],
                                                 obs=[0.0] * 5, reward=[0, 0],
                                                 terminated=[0, 0], truncated=[0, 0],
                                                 episode_start=[1, 1]))
            read_frame(s)
        with RawServer(behave) as srv, rc.Client(srv.address) as c:
            with self.assertRaises(rc.ProtocolError) as cm:
                c.recv(GUARD)
            self.assertIn("obs has 5 values, expected 6", str(cm.exception))

    def test_malformed_observations_frame(self):
        """A frame the in-place parser refuses (a float field of 5 bytes)
        ends the connection with a one-line ProtocolError, and the node is
        told why (EPROTO)."""
        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
            inner = b"\x08\x01\x12\x02\x00\x01\x22\x05" + bytes(5)
            s.sendall(rc.encode_frame(b"\x1a" + rc.encode_varint(len(inner)) + inner))
            self.reply = read_frame(s)
        with RawServer(behave) as srv, rc.Client(srv.address) as c:
            with self.assertRaises(rc.ProtocolError) as cm:
                c.recv(GUARD)
            self.assertIn("malformed observations frame: observations field obs has 5 bytes",
                          str(cm.exception))
            self.assertNotIn("\n", str(cm.exception))
        self.assertEqual(self.reply.error.code, 71)

    def test_batches_own_their_arrays(self):
        """Batches from recv() are copies: later frames, read into the same
        receive buffer, do not change them (VecEnv alone takes views)."""
        pb = rc.pb2()

        def behave(s):
            read_frame(s)
            send(s, welcome=welcome())
            # One write: both frames usually land in one fill of the buffer.
            s.sendall(b"".join(rc.encode_frame(pb.Frame(observations=pb.Observations(
                seq=seq, env=[0, 1], step=[seq, seq], obs=[float(seq)] * 6,
                reward=[seq, seq], terminated=[0, 0], truncated=[0, 0], episode_start=[0, 0],
                final_index=[1], final_obs=[-float(seq)] * 3)).SerializeToString())
                for seq in (1, 2)))
            read_frame(s)
        with RawServer(behave) as srv, rc.Client(srv.address) as c:
            b1 = c.recv(GUARD)
            b2 = c.recv(GUARD)
            buf = c._conns[0].reader.buf
            for b in (b1, b2):
                for a in (b.obs, b.reward, b.final_obs, b.final_rows, b.step, b.env):
                    self.assertFalse(np.shares_memory(a, buf))
            self.assertTrue((b1.obs == 1).all() and (b2.obs == 2).all())
            self.assertEqual(b1.final_obs[1].tolist(), [-1.0] * 3)
            self.assertTrue(np.isnan(b1.final_obs[0]).all())
            self.assertEqual(b1.has_final_obs.tolist(), [False, True])

    def test_observation_dtypes_checked(self):
        """A declared integer dtype takes whole numbers in its range only;
        an unknown dtype is refused at the welcome."""
        pb = rc.pb2()

        def welcome_of(dtype):
            w = welcome()
            w.spec.observation.dtype = dtype
            return w

        def obs_frame(values):
            return pb.Observations(seq=1, env=[0, 1], step=[0, 0], obs=values, reward=[0, 0],
                                   terminated=[0, 0], truncated=[0, 0], episode_start=[1, 1])

        def serving(dtype, values):
            def behave(s):
                read_frame(s)
                send(s, welcome=welcome_of(dtype))
                send(s, observations=obs_frame(values))
                read_frame(s)
            return behave
        with RawServer(serving("uint8", [0, 1, 255, 3, 4, 5])) as srv, rc.Client(srv.address) as c:
            b = c.recv(GUARD)
            self.assertEqual(b.obs.dtype, np.uint8)
            self.assertEqual(b.obs.tolist(), [[0, 1, 255], [3, 4, 5]])
            self.assertEqual(c.nodes[0].obs_high.tolist(), [255] * 3)
        for values, needle in (([0, 1.5, 2, 3, 4, 5], "1.5 is not a uint8"),
                               ([0, 1, 256, 3, 4, 5], "256.0 is not a uint8")):
            with RawServer(serving("uint8", values)) as srv, rc.Client(srv.address) as c:
                with self.assertRaises(rc.ProtocolError) as cm:
                    c.recv(GUARD)
                self.assertIn(needle, str(cm.exception))

        def bad_dtype(s):
            read_frame(s)
            send(s, welcome=welcome_of("complex64"))
            read_frame(s)
        with RawServer(bad_dtype) as srv:
            with self.assertRaises(rc.ProtocolError) as cm:
                rc.Client(srv.address)
            self.assertIn("observation dtype 'complex64'", str(cm.exception))

    def test_unreachable_node(self):
        s = socket.create_server(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(TimeoutError):
            rc.Client(f"127.0.0.1:{port}", connect_timeout=0.3)


@unittest.skipUnless(node_speaks_protocol(), f"{NODE} has no --listen (node side not built)")
class AgainstRealNode(unittest.TestCase):
    def start(self, *args):
        node = NodeProcess(NODE, "--env", "cartpole", "--num-envs", 8, "--seconds", 0,
                           "--quiet", *args)
        self.addCleanup(node.stop)
        return node

    def test_handshake_batches_and_actions(self):
        node = self.start()
        with rc.Client(node.address) as c:
            (info,) = c.nodes
            self.assertEqual(info.env, "cartpole")
            self.assertEqual(info.num_envs, 8)
            self.assertEqual(info.obs_shape, (4,))
            self.assertEqual((info.action_kind, info.action_n), ("discrete", 2))
            self.assertGreater(info.max_frame, 0)
            first = {}
            while len(first) < 8:
                b = c.recv(GUARD)
                self.assertIsNotNone(b, "no observations from the node")
                self.assertEqual(b.obs.shape, (b.n, 4))
                self.assertEqual(b.obs.dtype, np.float32)
                self.assertTrue(np.isfinite(b.obs).all())
                for i, e in enumerate(b.env.tolist()):
                    if e in first:
                        # Answered envs step on while others' first observations
                        # are still coming: a later step, never a repeat.
                        self.assertGreater(int(b.step[i]), first[e][0])
                        continue
                    first[e] = (int(b.step[i]), bool(b.episode_start[i]))
                c.send_actions(b, np.zeros(b.n, np.int64))
            self.assertEqual(first, {e: (0, True) for e in range(8)})
            b = c.recv(GUARD)  # the answer was accepted: the envs stepped
            self.assertIsNotNone(b)
            self.assertTrue((b.step >= 1).all(), b.step)

    def test_vecenv_actions_reach_their_envs(self):
        node = self.start()
        with rc.VecEnv([node.address], timeout=GUARD, autoreset_mode="same_step") as env:
            obs, _ = env.reset()
            truncated_with_final = terminated = 0
            for _ in range(1100):
                obs, rew, term, trunc, info = env.step(balance(obs))
                truncated_with_final += int((trunc & info["has_final_obs"]).sum())
                terminated += int(term.sum())
                self.assertTrue(info["episode_start"][term | trunc].all())
            self.assertGreaterEqual(len(env.episode_returns), 8)
            self.assertGreater(np.mean(env.episode_returns), 400)
            self.assertGreaterEqual(truncated_with_final, 8)  # 500-step limit, final_obs sent

    def test_box_actions_pendulum(self):
        node = NodeProcess(NODE, "--env", "pendulum", "--num-envs", 4, "--seconds", 0, "--quiet")
        self.addCleanup(node.stop)
        with rc.VecEnv([node.address], timeout=GUARD, autoreset_mode="same_step") as env:
            info = env.nodes[0]
            self.assertEqual((info.action_kind, info.action_shape), ("box", (1,)))
            self.assertEqual(info.obs_dim, 3)
            obs, _ = env.reset()
            for k in range(250):
                # Out of bounds on purpose: the client clips to [low, high].
                obs, rew, term, trunc, _ = env.step(np.full((4, 1), 10.0 * (-1) ** k))
            self.assertEqual(obs.shape, (4, 3))
            self.assertEqual(len(env.episode_returns), 4)  # 200-step episodes, truncated

    def test_two_learners_share_a_node(self):
        node = self.start()
        steps = {e: [] for e in range(8)}  # every step of every env, across both learners
        got = [0, 0]
        with rc.Client(node.address, name="a") as a, rc.Client(node.address, name="b") as b:
            # Until each learner has answered 20 batches (the node moves envs
            # to the second one as it attaches), with the hang guard.
            def both_served():
                for k, c in enumerate((a, b)):
                    batch = c.recv(0.005)
                    if batch is not None:
                        got[k] += 1
                        for e, st in zip(batch.env.tolist(), batch.step.tolist()):
                            steps[e].append(st)
                        c.send_actions(batch, np.zeros(batch.n, np.int64))
                return min(got) >= 20
            nu.wait_for(both_served, "20 batches answered by each of two learners on one node")
        self.assertTrue(all(got), f"batches per learner: {got}")
        for e, seen in steps.items():
            # Each observation went to exactly one learner, none twice.
            self.assertEqual(sorted(seen), list(range(len(seen))), f"env {e}")

    def test_wrong_token_gets_error_frame(self):
        with tempfile.NamedTemporaryFile("w") as f:
            f.write("s3cret\n")
            f.flush()
            node = self.start("--token-file", f.name)
            with self.assertRaises(rc.AuthenticationError) as cm:
                rc.Client(node.address, token="wrong")
            self.assertEqual(cm.exception.code, 13)
            with rc.Client(node.address, token_file=f.name) as c:
                self.assertIsNotNone(c.recv(GUARD))

    def test_next_learner_gets_unanswered_observations(self):
        node = self.start()
        # A learner that takes observations and dies: no goodbye, no answer.
        host, port = rc.parse_address(node.address)
        with socket.create_connection((host, port), timeout=GUARD) as s:
            send(s, hello=rc.pb2().Hello(protocol_version=1, role="learner", name="dies"))
            self.assertEqual(read_frame(s).WhichOneof("body"), "welcome")
        try:
            with rc.VecEnv([node.address], timeout=GUARD, autoreset_mode="same_step") as env:
                obs, _ = env.reset()  # every env's observation arrives again
                self.assertEqual(obs.shape, (8, 4))
                env.step(np.zeros(8, np.int64))
        except rc.RolloutError:
            try:
                code = node.proc.wait(2)  # a node that crashed may still be exiting
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                self.fail(f"the node exited with {code} after a learner died"
                          + (" (SIGPIPE: the node must ignore it or send with MSG_NOSIGNAL)"
                             if code == -13 else ""))
            raise


class Examples(unittest.TestCase):
    def test_ars_box_launches_its_own_node(self):
        # Issue 31: ars_box.py has --launch, as the other examples.
        import json
        p = nu.run_cmd([sys.executable, os.path.join(HERE, "..", "..", "python", "examples",
                                                     "ars_box.py"),
                        "--launch", 4, "--env", "pendulum", "--iterations", 1, "--directions", 2,
                        "--top", 1, "--target", 1e9], capture_output=True, text=True,
                       env=dict(os.environ, ROLLOUT_NODE=NODE))
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual((out["env"], out["iterations"]), ("pendulum", 1))


if __name__ == "__main__":
    unittest.main(verbosity=2)
