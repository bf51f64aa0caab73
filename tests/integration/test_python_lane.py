"""The lane (python/hotpath/lane.c, vecenv_lane.py) without a node: a Lane
on one end of a socketpair, with numpy arrays for the node's memory; the
test writes frames on the other end as a node would, or as a broken or
hostile one would, and reads the answers back.

What it checks: rows come out as the memory holds them, in arrival order,
whatever the frames' sizes and however the bytes are split; episodes count
as hot.episodes counts them; answers go out once a frame's last env has
an action, with the actions in the action memory; every bad frame (a seq
that goes back, ranges outside the envs, an env twice, a length prefix
above max_frame, bytes protobuf would refuse) is reported with nothing
taken; frames the lane does not handle come back whole; refused sends
change nothing; an end of stream is reported. No clock decides anything:
every read waits on bytes that are already written, under the hang guard.

Run as: test_python_lane.py [ROLLOUT_NODE] [BUILD_DIR] (the arguments of
the other python.* tests).
"""
import os
import socket
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_POSITIONAL = [a for a in sys.argv[1:3] if not a.startswith("-")]
BUILD = _POSITIONAL[1] if len(_POSITIONAL) > 1 else None
del sys.argv[1:1 + len(_POSITIONAL)]
if BUILD:
    os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

from rollout_client import spin, wire  # noqa: E402
from rollout_client.framing import FrameDecoder, encode_frame, encode_varint  # noqa: E402
from rollout_client.hotpath import hot  # noqa: E402

IN_FLIGHT, READY, HANDED, HELD = 0, 1, 2, 3
GUARD = 60.0  # seconds; a read that needs longer has lost its bytes
TERMINATED, TRUNCATED, START, HAS_FINAL = 1, 2, 4, 8


def obs_frame(seq, ranges, in_memory=True, extra=b""):
    """Frame{observations{seq, in_memory, ranges}} as the node encodes it
    (actors/hub/obs_codec.c), length-prefixed."""
    packed = b"".join(encode_varint(v) for v in ranges)
    inner = b"\x08" + encode_varint(seq)
    if in_memory:
        inner += b"\x58\x01"  # field 11, in_memory
    if ranges:
        inner += b"\x62" + encode_varint(len(packed)) + packed  # field 12, packed
    inner += extra
    return encode_frame(b"\x1a" + encode_varint(len(inner)) + inner)


class Node:
    """The node's side: memory columns, a socket, and the lane under test."""

    def __init__(self, n=16, d=3, discrete=True, action_n=4, width=2, seed=0,
                 max_frame=1 << 16):
        rng = np.random.default_rng(seed)
        self.n, self.d = n, d
        self.obs = rng.standard_normal((n, d)).astype(np.float32)
        self.final = rng.standard_normal((n, d)).astype(np.float32)
        self.reward = rng.standard_normal(n).astype(np.float32)
        self.flags = np.zeros(n, np.uint8)
        self.step = np.ones(n, np.uint64)
        self.act = np.zeros(n, np.int32) if discrete else np.zeros((n, width), np.float32)
        self.state = np.zeros(n, np.int8)
        self.frame_of = np.full(n, -1, np.int64)
        self.ep_ret = np.zeros(n, np.float64)
        self.ep_len = np.zeros(n, np.int64)
        self.mine, theirs = socket.socketpair()
        self.mine.settimeout(GUARD)
        self.spin = spin.Spin(0)
        self.sock = theirs
        self.lane = hot.Lane(theirs.fileno(), (d,), self.obs, self.final, self.reward,
                             self.flags, self.step, self.act, discrete, action_n, self.state,
                             self.frame_of, self.ep_ret, self.ep_len, n, 0, max_frame,
                             self.spin, (theirs,))
        self.dec = FrameDecoder()

    def close(self):
        self.lane.detach()
        for sock in (self.mine, self.sock):
            if sock.fileno() >= 0:
                sock.close()

    def write(self, data):
        self.mine.sendall(data)

    def answers(self, count):
        """The next count frames from the lane: (seq, in_memory) of each
        Frame{actions}."""
        got = []
        while len(got) < count:
            chunk = self.mine.recv(4096)
            if not chunk:
                raise AssertionError("the lane's socket closed before its answers")
            for body in self.dec.feed(chunk):
                got.append(body)
        out = []
        for body in got:
            self.assert_actions(body)
            inner = body[2:]
            seq, pos = 0, 0
            if inner[:1] == b"\x08":
                seq, pos = wire.read_varint(inner, 1, len(inner))
            out.append((seq, inner[pos:] == b"\x20\x01"))
        return out

    @staticmethod
    def assert_actions(body):
        if body[:1] != b"\x22" or body[1] != len(body) - 2:
            raise AssertionError(f"not a Frame{{actions}}: {body!r}")

    def recv(self, want):
        return self.lane.recv(want, GUARD)


class LaneCase(unittest.TestCase):
    def node(self, **kw):
        nd = Node(**kw)
        self.addCleanup(nd.close)
        return nd


class Rows(LaneCase):

    def test_rows_come_out_as_the_memory_holds_them(self):
        nd = self.node(n=16)
        nd.flags[3] = TERMINATED
        nd.flags[5] = TRUNCATED | HAS_FINAL
        nd.flags[7] = TRUNCATED  # without its final observation: not counted
        nd.flags[9] = START
        nd.step[9] = 0  # a first observation: no transition
        nd.write(obs_frame(1, [0, 8]) + obs_frame(2, [8, 8]))
        obs, reward, term, trunc, infos, stepped, ended = nd.recv(12)
        np.testing.assert_array_equal(infos["env_id"], np.arange(12))
        np.testing.assert_array_equal(obs, nd.obs[:12])
        np.testing.assert_array_equal(reward, nd.reward[:12])
        np.testing.assert_array_equal(infos["step"], nd.step[:12])
        self.assertEqual(np.flatnonzero(term).tolist(), [3])
        self.assertEqual(np.flatnonzero(trunc).tolist(), [5, 7])
        self.assertEqual(np.flatnonzero(infos["episode_start"]).tolist(), [9])
        self.assertEqual(np.flatnonzero(infos["_final_obs"]).tolist(), [5])
        np.testing.assert_array_equal(infos["final_obs"][5], nd.final[5])
        self.assertTrue(np.isnan(infos["final_obs"][np.arange(12) != 5]).all())
        self.assertEqual(stepped, 11)
        self.assertEqual(np.flatnonzero(infos["_rollout_episode"]).tolist(), [3, 5])
        self.assertEqual(ended[0], [float(nd.reward[3]), float(nd.reward[5])])
        self.assertEqual(ended[1], [1, 1])
        self.assertEqual(infos["rollout_episode"]["r"] is infos["episode_return"], True)
        self.assertEqual(nd.state[:12].tolist(), [HANDED] * 12)
        self.assertEqual(nd.state[12:].tolist(), [READY] * 4)
        self.assertEqual(nd.lane.counts, (4, 0, 2))
        # The rest of frame 2 comes next, in order.
        got = nd.recv(4)
        np.testing.assert_array_equal(got[4]["env_id"], np.arange(12, 16))

    def test_ordered_puts_env_e_in_row_e(self):
        """step()'s form: every env, whatever order its frames came in."""
        nd = self.node(n=16)
        nd.flags[2] = TRUNCATED | HAS_FINAL
        nd.write(obs_frame(1, [8, 8]) + obs_frame(2, [4, 4, 0, 2]) + obs_frame(3, [2, 2]))
        with self.assertRaisesRegex(ValueError, "ordered"):
            nd.lane.recv(8, GUARD, True)
        obs, reward, term, trunc, infos, stepped, ended = nd.lane.recv(16, GUARD, True)
        np.testing.assert_array_equal(obs, nd.obs)
        np.testing.assert_array_equal(reward, nd.reward)
        np.testing.assert_array_equal(infos["final_obs"][2], nd.final[2])
        self.assertNotIn("env_id", infos)
        self.assertEqual(np.flatnonzero(trunc).tolist(), [2])
        self.assertEqual(stepped, 16)

    def test_episodes_match_hot_episodes(self):
        """Many steps of random flags: the lane's counts equal
        hot.episodes' over the same rows."""
        rng = np.random.default_rng(5)
        nd = self.node(n=32, d=2)
        ret, length = np.zeros(32), np.zeros(32, np.int64)
        seq = 0
        for _ in range(40):
            nd.flags[:] = rng.integers(0, 16, 32)
            nd.reward[:] = rng.standard_normal(32)
            nd.step[:] = rng.integers(0, 3, 32)
            seq += 1
            nd.write(obs_frame(seq, [0, 32]))
            _, reward, term, trunc, infos, stepped, ended = nd.recv(32)
            hf = (nd.flags & HAS_FINAL) != 0
            want = hot.episodes(nd.reward.copy(), (nd.flags & TERMINATED) != 0,
                                (nd.flags & TRUNCATED) != 0, hf, nd.step.copy(), 0, ret,
                                length)
            np.testing.assert_array_equal(infos["episode_return"], want[0])
            np.testing.assert_array_equal(infos["episode_length"], want[1])
            np.testing.assert_array_equal(infos["_rollout_episode"], want[2])
            self.assertEqual(stepped, want[3])
            self.assertEqual(0 if ended is None else len(ended[0]), want[4])
            nd.lane.send(np.arange(32), np.zeros(32, np.int64))
            self.assertEqual(nd.answers(1), [(seq, True)])
        np.testing.assert_array_equal(nd.ep_ret, ret)
        np.testing.assert_array_equal(nd.ep_len, length)

    def test_bytes_split_anyhow(self):
        """Frames written one byte at a time, and many in one write."""
        nd = self.node(n=16)
        data = b"".join(obs_frame(i + 1, [2 * i, 2]) for i in range(8))
        for b in data[:10]:
            nd.write(bytes([b]))
        nd.write(data[10:])
        got = nd.recv(16)
        np.testing.assert_array_equal(got[4]["env_id"], np.arange(16))

    def test_several_ranges_and_arrival_order(self):
        nd = self.node(n=16)
        nd.write(obs_frame(1, [10, 2, 1, 3]) + obs_frame(2, [0, 1, 12, 4]))
        got = nd.recv(10)
        self.assertEqual(got[4]["env_id"].tolist(), [10, 11, 1, 2, 3, 0, 12, 13, 14, 15])
        np.testing.assert_array_equal(got[0], nd.obs[got[4]["env_id"]])


class Answers(LaneCase):

    def test_a_frame_is_answered_when_its_last_env_is(self):
        nd = self.node(n=8)
        nd.write(obs_frame(7, [0, 4]) + obs_frame(9, [4, 4]))
        ids = nd.recv(8)[4]["env_id"]
        self.assertIsNone(nd.lane.send(ids[[0, 5]], np.array([1, 2], np.int64)))
        self.assertEqual(nd.state.tolist(), [HELD, HANDED, HANDED, HANDED,
                                             HANDED, HELD, HANDED, HANDED])
        self.assertIsNone(nd.lane.send(ids[[1, 2, 3]], np.array([3, 0, 1], np.int32)))
        self.assertEqual(nd.answers(1), [(7, True)])
        self.assertEqual(nd.act[:4].tolist(), [1, 3, 0, 1])
        self.assertEqual(nd.state[:4].tolist(), [IN_FLIGHT] * 4)
        self.assertIsNone(nd.lane.send(ids[[4, 6, 7]], np.array([3, 3, 3], np.int64)))
        self.assertEqual(nd.answers(1), [(9, True)])
        self.assertEqual(nd.act[4:].tolist(), [3, 2, 3, 3])
        self.assertEqual(nd.lane.counts, (0, 8, 0))
        self.assertEqual(nd.frame_of.tolist(), [-1] * 8)

    def test_box_actions_need_checking_first(self):
        nd = self.node(n=4, discrete=False, width=2)
        nd.write(obs_frame(1, [0, 4]))
        ids = nd.recv(4)[4]["env_id"]
        acts = np.arange(8, dtype=np.float32).reshape(4, 2)
        self.assertEqual(nd.lane.send(ids, acts), ("actions",))  # not checked: not taken
        self.assertEqual(nd.state.tolist(), [HANDED] * 4)
        self.assertIsNone(nd.lane.send(ids, acts, True))
        self.assertEqual(nd.answers(1), [(1, True)])
        np.testing.assert_array_equal(nd.act, acts)

    def test_refusals_take_nothing(self):
        nd = self.node(n=8, action_n=4)
        nd.write(obs_frame(1, [0, 8]))
        ids = nd.recv(6)[4]["env_id"]  # envs 6, 7 stay READY
        before = (nd.state.copy(), nd.act.copy())
        cases = [
            (ids.astype(np.int32), np.zeros(6, np.int64), ("ids",)),
            (ids[:, None].copy(), np.zeros(6, np.int64), ("ids",)),
            (ids, np.zeros(6, np.float64), ("actions",)),
            (ids, np.zeros(5, np.int64), ("actions",)),
            (ids, np.array([0, 1, 2, 3, 4, 0], np.int64), ("actions",)),  # 4 >= action_n
            (ids, np.array([0, 1, -1, 3, 0, 0], np.int64), ("actions",)),
            (np.array([0, 1, 8], np.int64), np.zeros(3, np.int64), (2, "range")),
            (np.array([0, 1, 0], np.int64), np.zeros(3, np.int64), (2, "twice")),
            (np.array([0, 6], np.int64), np.zeros(2, np.int64), (1, "state")),  # READY
        ]
        for env_ids, acts, want in cases:
            with self.subTest(env_ids=env_ids.tolist(), acts=acts.tolist()):
                self.assertEqual(nd.lane.send(env_ids, acts), want)
                np.testing.assert_array_equal(nd.state, before[0])
                np.testing.assert_array_equal(nd.act, before[1])
        self.assertIsNone(nd.lane.send(ids, np.ones(6, np.int64)))
        self.assertEqual(nd.lane.send(ids[:1], np.ones(1, np.int64)), (0, "state"))  # HELD


class BadFrames(LaneCase):
    """Each bad frame is reported as ("bad", why) with nothing taken."""

    def bad(self, data, why, n=8, taken=0, **kw):
        nd = self.node(n=n, **kw)
        nd.write(data)
        got = nd.recv(n)
        self.assertEqual(got[0], "bad", got)
        self.assertRegex(got[1], why)
        self.assertEqual(int(np.count_nonzero(nd.state)), taken)
        return nd

    def test_seq_must_grow(self):
        self.bad(obs_frame(5, [0, 4]) + obs_frame(5, [4, 4]), "seq 5 after seq 5", taken=4)

    def test_ranges_inside_the_envs(self):
        for ranges in ([0, 9], [8, 1], [3, 0], [0, 4, 4, 5], [4294967295, 2], []):
            with self.subTest(ranges=ranges):
                self.bad(obs_frame(1, ranges), "range|without ranges")

    def test_odd_range_values(self):
        self.bad(obs_frame(1, [0, 4, 5]), "not \\(first, count\\) pairs")

    def test_an_env_twice(self):
        self.bad(obs_frame(1, [0, 4, 2, 3]), "env 2 came again")
        self.bad(obs_frame(1, [0, 4]) + obs_frame(2, [3, 2]), "env 3 came again", taken=4)

    def test_a_length_above_max_frame(self):
        self.bad(encode_varint(1 << 20) + b"\x1a", "above the node's max_frame",
                 max_frame=4096)
        self.bad(b"\xff" * 11, "longer than 10 bytes")

    def test_bytes_protobuf_refuses(self):
        self.bad(encode_frame(b"\x1a\x05\x08\x01\x62\x09\x00"), "malformed")
        # in memory, yet with a column in the frame
        self.bad(obs_frame(1, [0, 2], extra=b"\x2a\x00"), "columns in the frame")


class Handback(LaneCase):

    def test_other_frames_come_back_whole(self):
        nd = self.node(n=4)
        error = encode_frame(b"\x2a\x06\x08\x05\x12\x02hi")  # some other frame
        outside = obs_frame(2, [], in_memory=False, extra=b"\x12\x01\x00")
        nd.write(obs_frame(1, [0, 2]) + error + outside)
        got = nd.recv(4)
        self.assertEqual(got, ("frame", error[1:]))
        self.assertEqual(nd.lane.counts[0], 2)  # the frame before it was taken
        got = nd.recv(4)
        self.assertEqual(got, ("frame", outside[1:]))

    def test_end_of_stream_and_short(self):
        nd = self.node(n=4)
        nd.write(obs_frame(1, [0, 4]))
        got = nd.recv(3)
        self.assertEqual(len(got), 7)
        self.assertEqual(nd.recv(3), ("short", 1))  # 3 handed out, 1 READY: no more can come
        nd.lane.send(got[4]["env_id"], np.zeros(3, np.int64))
        self.assertEqual(nd.recv(3), ("short", 1))  # held until the frame's last env is answered
        last = nd.recv(1)[4]["env_id"]
        nd.lane.send(last, np.zeros(1, np.int64))
        self.assertEqual(nd.answers(1), [(1, True)])
        nd.mine.shutdown(socket.SHUT_WR)
        got = nd.recv(3)
        self.assertEqual(got[0], "closed")
        self.assertRegex(got[1], "without goodbye")

    def test_a_peer_that_closed_is_reported_by_recv(self):
        """The node wrote a last frame and closed: send() drops its answer
        (the peer is gone, EPIPE), and recv() still hands back what the
        node said before the end, then the end."""
        nd = self.node(n=4)
        nd.write(obs_frame(1, [0, 4]))
        ids = nd.recv(4)[4]["env_id"]
        goodbye = encode_frame(b"\x32\x04\x0a\x02ok")  # another frame kind
        nd.write(goodbye)
        nd.mine.close()
        self.assertIsNone(nd.lane.send(ids, np.zeros(4, np.int64)))
        self.assertIsNone(nd.lane.send(np.zeros(0, np.int64), np.zeros(0, np.int64)))
        self.assertEqual(nd.recv(4), ("frame", goodbye[1:]))
        got = nd.recv(4)
        self.assertEqual(got[0], "closed")

    def test_timeout_and_detach(self):
        nd = self.node(n=4)
        self.assertIsNone(nd.lane.recv(2, 0.0))  # nothing written: the time runs out at once
        nd.write(obs_frame(1, [0, 2]))
        got = nd.recv(2)
        nd.lane.send(got[4]["env_id"], np.zeros(2, np.int64))
        nd.lane.detach()
        self.assertEqual(nd.lane.recv(2, 0.0)[0], "closed")
        self.assertEqual(nd.lane.send(np.arange(2), np.zeros(2, np.int64))[0], "closed")
        self.assertEqual(nd.lane.detach(), b"")
        with self.assertRaisesRegex(ValueError, "detached"):
            nd.lane.feed(b"\x00")
        with self.assertRaisesRegex(ValueError, "detached"):
            nd.lane.adopt(9, np.array([0, 1], np.uint32), READY)

    def test_bytes_read_before_the_lane(self):
        nd = self.node(n=4)
        data = obs_frame(1, [0, 4])
        nd.lane.feed(data[:3])
        nd.write(data[3:])
        self.assertEqual(nd.recv(4)[4]["env_id"].tolist(), [0, 1, 2, 3])

    def test_adopt(self):
        nd = self.node(n=8)
        nd.lane.adopt(3, np.array([0, 4], np.uint32), HANDED)
        nd.lane.adopt(4, np.array([4, 4], np.uint32), READY)
        with self.assertRaisesRegex(ValueError, "came again"):
            nd.lane.adopt(5, np.array([2, 1], np.uint32), READY)
        self.assertEqual(nd.lane.counts, (4, 0, 2))
        nd.write(obs_frame(4, [0, 1]))  # seq 4 is not after the adopted 4
        self.assertEqual(nd.lane.send(np.arange(4), np.zeros(4, np.int64)), None)
        self.assertEqual(nd.answers(1), [(3, True)])
        got = nd.recv(4)
        self.assertEqual(got[4]["env_id"].tolist(), [4, 5, 6, 7])  # adopted READY first
        got = nd.recv(1)
        self.assertEqual(got[0], "bad")
        self.assertRegex(got[1], "seq 4 after seq 4")


if __name__ == "__main__":
    unittest.main(verbosity=2)
