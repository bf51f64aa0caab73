"""The Python client's in-place wire format (python/rollout_client/wire.py
and framing.FrameReader): Observations frames parsed as numpy views give
protobuf's values, unknown fields are skipped, layouts the fast path does
not take are left to protobuf, malformed and truncated frames raise a clear
ProtocolError, views are what the docs say they are, and Actions frames are
the bytes protobuf writes. No node and no clock: pure functions over bytes.

Run as: test_python_wire.py [ROLLOUT_NODE] [BUILD_DIR] (the arguments of
the other python.* tests; only BUILD_DIR/proto is used, for rollout_pb2).
"""
import os
import random
import socket
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_POSITIONAL = [a for a in sys.argv[1:3] if not a.startswith("-")]
BUILD = _POSITIONAL[1] if len(_POSITIONAL) > 1 else None
del sys.argv[1:1 + len(_POSITIONAL)]  # the rest is for unittest (-k, -v, ...)
if BUILD:
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import rollout_client as rc  # noqa: E402
from rollout_client import wire  # noqa: E402
from rollout_client.framing import FrameReader  # noqa: E402

PB = rc.pb2()


def obs_message(rng, n, d=4, final=2, envs=None, step=None):
    """A random Observations message of n envs (obs_dim d), with final
    observations for `final` of them."""
    envs = list(range(n)) if envs is None else envs
    fidx = sorted(rng.sample(range(n), min(final, n)))
    return PB.Observations(
        seq=rng.randrange(1, 2 ** 64), env=envs,
        step=step if step is not None else [rng.randrange(0, 2 ** 64) for _ in range(n)],
        obs=[rng.uniform(-5, 5) for _ in range(n * d)],
        reward=[rng.uniform(-1, 1) for _ in range(n)],
        terminated=[rng.random() < 0.3 for _ in range(n)],
        truncated=[rng.random() < 0.3 for _ in range(n)],
        episode_start=[rng.random() < 0.3 for _ in range(n)],
        final_index=fidx, final_obs=[rng.uniform(-5, 5) for _ in range(len(fidx) * d)])


def frame_bytes(m):
    return PB.Frame(observations=m).SerializeToString()


def parse(body, cache=None):
    """parse_observations over body placed at an odd offset of a larger
    buffer (floats unaligned, bytes around it that are not the frame's)."""
    arr = np.frombuffer(b"\xff" * 3 + body + b"\xff" * 5, np.uint8).copy()
    return wire.parse_observations(memoryview(arr), arr, 3, 3 + len(body), cache), arr


def as_pb(o):
    """An ObsFrame's values as a protobuf Observations, for comparison."""
    return PB.Observations(seq=o.seq, env=o.env.tolist(), step=o.step.tolist(),
                           obs=o.obs.tolist(), reward=o.reward.tolist(),
                           terminated=o.flags[0].tolist(), truncated=o.flags[1].tolist(),
                           episode_start=o.flags[2].tolist(),
                           final_index=o.final_index.tolist(), final_obs=o.final_obs.tolist())


def unknown_fields():
    """Bytes of fields Observations does not have: varint 15, length-
    delimited 20, fixed64 21, fixed32 22 and a two-byte tag (field 300)."""
    return (b"\x78\x96\x01" + b"\xa2\x01\x03abc" + b"\xa9\x01" + bytes(8)
            + b"\xb5\x01" + bytes(4) + wire.encode_varint(300 << 3) + b"\x05")


class ParseObservations(unittest.TestCase):
    def test_same_values_as_protobuf(self):
        rng = random.Random(1)
        for n in (0, 1, 2, 3, 17, 130, 1024):
            for envs in (None, "shuffled", "large"):
                ids = list(range(n))
                if envs == "shuffled":
                    rng.shuffle(ids)
                elif envs == "large":  # two- and three-byte varints
                    ids = rng.sample(range(100, 3_000_000), n)
                # final_index: a few (decoded in Python) or every row (numpy)
                final = {17: 17, 130: 130, 1024: 300}.get(n, min(n, 5))
                m = obs_message(rng, n, final=final, envs=ids)
                o, arr = parse(frame_bytes(m))
                self.assertIsNotNone(o, f"n={n} {envs}")
                self.assertEqual(as_pb(o), m, f"n={n} {envs}")
                self.assertEqual(o.env.dtype, np.uint32)
                self.assertEqual(o.step.dtype, np.uint64)
                self.assertEqual(o.flags.dtype, bool)

    def test_step_layouts(self):
        """Steps of one value, of one width, small, mixed: every decoder
        branch gives protobuf's values."""
        rng = random.Random(2)
        n = 300
        for step in ([7] * n, [2 ** 40] * n, [rng.randrange(2 ** 14, 2 ** 21) for _ in range(n)],
                     [rng.randrange(0, 2 ** 14) for _ in range(n)],
                     [rng.choice((0, 5, 2 ** 63, 2 ** 64 - 1, 300)) for _ in range(n)],
                     [2 ** 56 + rng.randrange(2 ** 20) for _ in range(n)]):
            m = obs_message(rng, n, step=step)
            o, _ = parse(frame_bytes(m))
            self.assertEqual(o.step.tolist(), step)

    def test_unknown_fields_are_skipped(self):
        rng = random.Random(3)
        m = obs_message(rng, 40)
        inner = m.SerializeToString()
        for at in (0, len(inner) // 2, len(inner)):
            # Between whole fields: find a field boundary at or after `at`.
            cut = next(p for p, _ in boundaries(inner) if p >= at)
            body = inner[:cut] + unknown_fields() + inner[cut:]
            frame = b"\x1a" + wire.encode_varint(len(body)) + body
            o, _ = parse(frame)
            self.assertIsNotNone(o)
            self.assertEqual(as_pb(o), m)
            ref = PB.Frame()
            ref.ParseFromString(frame)  # protobuf takes it too, with the same values
            ref.observations.DiscardUnknownFields()
            self.assertEqual(ref.observations, m)

    def test_other_layouts_go_to_protobuf(self):
        """None (parse it with protobuf) for another frame kind, a field in
        two parts, an unpacked field, and a frame with fields after the
        observations."""
        rng = random.Random(4)
        m = obs_message(rng, 8)
        inner = m.SerializeToString()
        hello = PB.Frame(hello=PB.Hello(protocol_version=1, role="learner")).SerializeToString()
        split = inner + b"\x2a\x04" + bytes(4)  # reward (field 5) again: protobuf appends
        unpacked = inner + b"\x10\x05"           # env (field 2) as a plain varint
        for body in (hello, b"", b"\x1a\x00\x22\x00",
                     b"\x1a" + wire.encode_varint(len(split)) + split,
                     b"\x1a" + wire.encode_varint(len(unpacked)) + unpacked):
            o, _ = parse(body)
            self.assertIsNone(o, body[:8])

    def test_truncated_frames_raise_or_defer(self):
        """Every cut of a frame either raises ProtocolError or is left to
        protobuf (None) -- never another exception, never a value read from
        past the frame's end."""
        rng = random.Random(5)
        body = frame_bytes(obs_message(rng, 20))
        for cut in range(len(body)):
            try:
                o, _ = parse(body[:cut])
            except rc.ProtocolError as e:
                self.assertTrue(str(e), cut)
                continue
            if o is not None:
                self.fail(f"a frame cut at {cut} of {len(body)} bytes parsed as observations")

    def test_malformed_fields_name_the_problem(self):
        def frame(inner):
            return b"\x1a" + wire.encode_varint(len(inner)) + inner
        cases = [
            (b"\x22\x05" + bytes(5), "obs has 5 bytes, not a whole number of floats"),
            (b"\x2a\x03" + bytes(3), "reward has 3 bytes"),
            (b"\x22\x09" + bytes(4), "a field of 9 bytes with 4 left"),
            (b"\x08" + b"\xff" * 10 + b"\x01", "overlong varint"),
            (b"\x08\xff", "truncated or overlong varint"),
            (b"\x12\x02\x01\x81", "env ends inside a varint"),
            (b"\x1a\x0b" + b"\x81" * 10 + b"\x01", "longer than 10 bytes"),
            (b"\x7d\x00\x00", "runs past its frame"),  # fixed32 field 15: 2 bytes of 4
        ]
        for inner, words in cases:
            with self.assertRaises(rc.ProtocolError, msg=inner) as cm:
                parse(frame(inner))
            self.assertIn(words, str(cm.exception))

    def test_float_fields_are_views_of_the_buffer(self):
        """obs, reward and final_obs view the received bytes (valid while
        those bytes are); everything else is the frame's own."""
        rng = random.Random(6)
        m = obs_message(rng, 16, final=3)
        o, arr = parse(frame_bytes(m))
        for name in ("obs", "reward", "final_obs"):
            self.assertTrue(np.shares_memory(getattr(o, name), arr), name)
        for name in ("env", "step", "flags", "final_index"):
            self.assertFalse(np.shares_memory(getattr(o, name), arr), name)
        before = o.obs.copy()
        arr[:] = 0  # the buffer reused: the view shows the new bytes
        self.assertTrue((o.obs == 0).all())
        self.assertFalse((before == 0).all())

    def test_env_cache(self):
        """A checked env list is remembered by its bytes (read-only); the
        same bytes are not decoded again, other bytes are."""
        rng = random.Random(7)
        cache = {}
        m = obs_message(rng, 64)
        o, _ = parse(frame_bytes(m), cache)
        self.assertFalse(o.env_known)
        wire.remember_env(cache, o.env_key, o.env, (0, 64))
        o2, _ = parse(frame_bytes(m), cache)
        self.assertTrue(o2.env_known)
        self.assertIs(o2.env, o.env)
        self.assertEqual(o2.env_range, (0, 64))
        self.assertFalse(o2.env.flags.writeable)
        m.env[:] = list(range(1, 65))
        o3, _ = parse(frame_bytes(m), cache)
        self.assertFalse(o3.env_known)
        self.assertEqual(o3.env.tolist(), list(range(1, 65)))
        for k in range(200):  # bounded
            wire.remember_env(cache, bytes([k % 128, k // 128]), np.zeros(2, np.uint32), None)
        self.assertLessEqual(len(cache), 64)


def boundaries(inner):
    """(position, None) of every field start in inner (a message of varint
    and length-delimited fields), and of its end."""
    out = []
    pos = 0
    while pos < len(inner):
        out.append((pos, None))
        tag, pos = wire.read_varint(inner, pos, len(inner))
        if tag & 7 == 0:
            _, pos = wire.read_varint(inner, pos, len(inner))
        else:
            k, pos = wire.read_varint(inner, pos, len(inner))
            pos += k
    out.append((len(inner), None))
    return out


class Actions(unittest.TestCase):
    def test_same_bytes_as_protobuf(self):
        rng = np.random.default_rng(8)
        for seq in (0, 1, 300, 2 ** 64 - 1):
            for a in (np.zeros(0, np.int64), rng.integers(0, 2, 1024).astype(np.uint8),
                      rng.integers(0, 100, 50), rng.integers(0, 2 ** 31 - 1, 300),
                      np.array([-1, 0, 5, -2 ** 31], np.int32)):
                ref = PB.Frame(actions=PB.Actions(seq=seq, discrete=a.tolist()))
                self.assertEqual(wire.actions_message(seq, discrete=a), ref.SerializeToString())
            box = rng.standard_normal((64, 3)).astype(np.float32)
            ref = PB.Frame(actions=PB.Actions(seq=seq, box=box.reshape(-1).tolist()))
            self.assertEqual(wire.actions_message(seq, box=box), ref.SerializeToString())


class Reader(unittest.TestCase):
    def test_frames_across_any_split(self):
        """Frames sent in pieces of any size come out whole, in order,
        including one larger than the reader's buffer."""
        rng = random.Random(9)
        bodies = [b"", b"x", bytes(range(200)), os.urandom(300_000), b"tail"] + \
            [os.urandom(rng.randrange(0, 3000)) for _ in range(50)]
        stream = b"".join(rc.encode_frame(b) for b in bodies)
        a, b = socket.socketpair()
        with a, b:
            rd = FrameReader(max_frame=1 << 20, size=4096)
            got, i = [], 0
            while len(got) < len(bodies):
                if i < len(stream):
                    k = rng.randrange(1, 9000)
                    a.sendall(stream[i:i + k])
                    i += k
                self.assertGreater(rd.fill(b), 0)
                while True:
                    span = rd.next_frame()
                    if span is None:
                        break
                    got.append(bytes(rd.mv[span[0]:span[1]]))
            self.assertEqual(got, bodies)
            self.assertEqual(rd.pending(), 0)

    def test_too_large_on_the_prefix(self):
        a, b = socket.socketpair()
        with a, b:
            rd = FrameReader(max_frame=100, where="test")
            a.sendall(rc.encode_varint(101))
            rd.fill(b)
            with self.assertRaises(rc.FrameTooLarge) as cm:
                rd.next_frame()
            self.assertEqual((cm.exception.size, cm.exception.limit), (101, 100))

    def test_eof(self):
        a, b = socket.socketpair()
        with b:
            a.close()
            self.assertEqual(FrameReader().fill(b), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
