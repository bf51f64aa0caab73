"""The Python client's C part (python/hotpath/) and its
spin policy (spin.py), without a node: each function against a plain numpy
rendering of what it does, over random inputs; every bad argument (a range
outside the memory, an env out of range, in the wrong state or given twice,
a wrong dtype) refused with nothing written; the spin policy's counts. No
clock decides anything.

Run as: test_python_hotpath.py [ROLLOUT_NODE] [BUILD_DIR] (the arguments of
the other python.* tests; BUILD_DIR is where _hotpath was built).
"""
import os
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

from rollout_client import spin  # noqa: E402
from rollout_client.hotpath import hot  # noqa: E402

IN_FLIGHT, READY, HANDED, HELD = 0, 1, 2, 3


def memory(rng, rows, d):
    """Random SEED memory columns (wire/seed_memory.h's flag bits)."""
    return dict(obs=rng.standard_normal((rows, d)).astype(np.float32),
                final=rng.standard_normal((rows, d)).astype(np.float32),
                reward=rng.standard_normal(rows).astype(np.float32),
                flags=rng.integers(0, 16, rows).astype(np.uint8),
                step=rng.integers(0, 1 << 40, rows).astype(np.uint64))


def per_env(n, d):
    return dict(obs=np.zeros((n, d), np.float32), final=np.zeros((n, d), np.float32),
                reward=np.zeros(n, np.float32), flags=np.zeros((3, n), bool),
                step=np.zeros(n, np.uint64), has_final=np.zeros(n, bool))


def take(ranges, offset, m, a):
    return hot.take_frame(np.asarray(ranges, np.uint32), offset, m["obs"], m["final"],
                          m["reward"], m["flags"], m["step"], a["obs"], a["final"], a["reward"],
                          a["flags"], a["step"], a["has_final"])


class TakeFrame(unittest.TestCase):
    def test_rows_land_where_numpy_puts_them(self):
        rng = np.random.default_rng(1)
        for _ in range(50):
            rows, d = int(rng.integers(1, 40)), int(rng.integers(1, 6))
            m = memory(rng, rows, d)
            offset = int(rng.integers(0, 10))
            n = offset + rows + int(rng.integers(0, 5))
            # disjoint sorted ranges over the memory's rows
            cuts = np.sort(rng.choice(np.arange(1, rows), size=min(rows - 1, 4), replace=False)) \
                if rows > 1 else np.array([], int)
            bounds = [0, *cuts.tolist(), rows]
            ranges = []
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                if rng.random() < 0.7:
                    ranges += [lo, hi - lo]
            if not ranges:
                ranges = [0, rows]
            a = per_env(n, d)
            count = take(ranges, offset, m, a)
            env = np.concatenate([np.arange(f, f + c) for f, c in zip(ranges[0::2],
                                                                     ranges[1::2])])
            g = env + offset
            self.assertEqual(count, len(env))
            np.testing.assert_array_equal(a["obs"][g], m["obs"][env])
            np.testing.assert_array_equal(a["reward"][g], m["reward"][env])
            np.testing.assert_array_equal(a["step"][g], m["step"][env])
            for plane, bit in enumerate((1, 2, 4)):
                np.testing.assert_array_equal(a["flags"][plane, g], (m["flags"][env] & bit) != 0)
            hf = (m["flags"][env] & 8) != 0
            np.testing.assert_array_equal(a["has_final"][g], hf)
            np.testing.assert_array_equal(a["final"][g[hf]], m["final"][env[hf]])
            self.assertTrue(np.isnan(a["final"][g[~hf]]).all())
            others = ~np.isin(np.arange(n), g)
            self.assertFalse(a["obs"][others].any() or a["reward"][others].any()
                             or a["has_final"][others].any())

    def test_bad_ranges_write_nothing(self):
        rng = np.random.default_rng(2)
        m = memory(rng, 8, 3)
        for ranges, offset, n, what in (([0, 9], 0, 8, "past the memory"),
                                        ([8, 1], 0, 9, "first past the memory"),
                                        ([0, 0], 0, 8, "empty"),
                                        ([0, 4, 6, 4], 0, 8, "second past the memory"),
                                        ([0, 8], 2, 8, "past the envs"),
                                        ([0, 2, 3], 0, 8, "odd count"),
                                        ([], 0, 8, "no ranges"),
                                        ([0, 2], 9, 8, "offset past the envs")):
            a = per_env(n, 3)
            before = {k: v.copy() for k, v in a.items()}
            with self.assertRaises(ValueError, msg=what):
                take(ranges, offset, m, a)
            for k in a:
                np.testing.assert_array_equal(a[k], before[k], err_msg=f"{what}: {k} written")

    def test_wrong_arrays_are_refused(self):
        rng = np.random.default_rng(3)
        m = memory(rng, 8, 3)
        a = per_env(8, 3)
        bad = dict(a, reward=np.zeros(8, np.float64))
        with self.assertRaises(TypeError):
            take([0, 8], 0, m, bad)
        bad = dict(a, flags=np.zeros((8, 3), bool))
        with self.assertRaises(ValueError):
            take([0, 8], 0, m, bad)
        bad = dict(a, obs=np.zeros((8, 4), np.float32))
        with self.assertRaises(ValueError):
            take([0, 8], 0, m, bad)
        ro = dict(a, step=np.zeros(8, np.uint64))
        ro["step"].setflags(write=False)
        with self.assertRaises(TypeError):
            take([0, 8], 0, m, ro)
        with self.assertRaises(TypeError):  # obs without final
            hot.take_frame(np.array([0, 8], np.uint32), 0, m["obs"], m["final"], m["reward"],
                           m["flags"], m["step"], a["obs"], None, a["reward"], a["flags"],
                           a["step"], a["has_final"])


def episodes_numpy(reward, term, trunc, has_final, step, ids, ret, length):
    """What episodes() does, in numpy (the VecEnv's code before _hotpath)."""
    stepped = np.ones(len(ids), bool) if step is None else step != 0
    np.add.at(ret, ids[stepped], reward[stepped].astype(np.float64))
    np.add.at(length, ids[stepped], 1)
    done = term | trunc
    counted = done & (term | has_final)
    ep_ret = np.where(counted, ret[ids], np.nan)
    ep_len = np.where(counted, length[ids], 0)
    ret[ids[done]] = 0.0
    length[ids[done]] = 0
    return ep_ret, ep_len, counted, int(stepped.sum()), int(counted.sum())


class Episodes(unittest.TestCase):
    def test_matches_numpy_over_many_steps(self):
        rng = np.random.default_rng(4)
        n = 64
        ret_c, len_c = np.zeros(n), np.zeros(n, np.int64)
        ret_p, len_p = np.zeros(n), np.zeros(n, np.int64)
        for it in range(300):
            k = int(rng.integers(0, n + 1))
            by_ids = it % 3 != 0
            ids = np.sort(rng.choice(n, k, replace=False)).astype(np.int64) if by_ids else None
            first = int(rng.integers(0, n - k + 1)) if not by_ids else 0
            idx = ids if by_ids else np.arange(first, first + k)
            reward = rng.standard_normal(k).astype(np.float32)
            term, trunc, hf = (rng.random(k) < 0.1, rng.random(k) < 0.05, rng.random(k) < 0.5)
            step = None if it % 2 else rng.integers(0, 3, k).astype(np.uint64)
            got = hot.episodes(reward, term, trunc, hf, step, ids if by_ids else first, ret_c,
                               len_c)
            want = episodes_numpy(reward, term, trunc, hf, step, idx, ret_p, len_p)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[2], want[2])
            self.assertEqual(got[3:], want[3:])
            np.testing.assert_array_equal(ret_c, ret_p)
            np.testing.assert_array_equal(len_c, len_p)

    def test_truncation_without_final_is_not_counted(self):
        ret, length = np.array([5.0, 5.0]), np.array([3, 3], np.int64)
        out = hot.episodes(np.ones(2, np.float32), np.array([False, False]),
                           np.array([True, True]), np.array([True, False]), None, 0, ret, length)
        np.testing.assert_array_equal(out[2], [True, False])
        self.assertEqual(out[0][0], 6.0)
        self.assertTrue(np.isnan(out[0][1]))
        np.testing.assert_array_equal(ret, [0.0, 0.0])  # both start again

    def test_rows_outside_are_refused(self):
        ret, length = np.zeros(4), np.zeros(4, np.int64)
        z = np.zeros(2, bool)
        with self.assertRaises(ValueError):
            hot.episodes(np.zeros(2, np.float32), z, z, z, None, 3, ret, length)
        with self.assertRaises(ValueError):
            hot.episodes(np.zeros(2, np.float32), z, z, z, None, np.array([0, 4]), ret, length)
        self.assertFalse(ret.any() or length.any())


class Gather(unittest.TestCase):
    def test_equals_fancy_indexing(self):
        rng = np.random.default_rng(5)
        n = 50
        arrays = (rng.standard_normal((n, 3)).astype(np.float32),
                  rng.integers(0, 9, n).astype(np.uint64), rng.random(n) < 0.5,
                  rng.standard_normal((n, 2, 2)))
        flags = rng.random((3, n)) < 0.5
        for rows in (np.array([4, 1, 1, 49, 0]), np.arange(10, 20), 7):
            k = 9 if isinstance(rows, int) else len(rows)
            idx = np.arange(rows, rows + k) if isinstance(rows, int) else rows
            got = hot.gather(rows if isinstance(rows, int) else rows.astype(np.int64), k,
                             arrays, flags)
            for g, a in zip(got, arrays):
                np.testing.assert_array_equal(g, a[idx])
                self.assertEqual(g.dtype, a.dtype)
            np.testing.assert_array_equal(got[-1], flags[:, idx])
        with self.assertRaises(ValueError):
            hot.gather(np.array([0, n], np.int64), 2, arrays, flags)
        with self.assertRaises(ValueError):
            hot.gather(45, 9, arrays, flags)
        with self.assertRaises(TypeError):
            hot.gather(0, 1, (np.zeros(n + 1),), flags)


class States(unittest.TestCase):
    def test_adopt_checks_then_moves(self):
        state = np.zeros(8, np.int8)
        frame_of, pos_of = np.full(8, -1, np.int64), np.zeros(8, np.int64)
        self.assertEqual(hot.adopt(2, 3, state, frame_of, pos_of, 7, IN_FLIGHT, READY), -1)
        np.testing.assert_array_equal(state, [0, 0, 1, 1, 1, 0, 0, 0])
        np.testing.assert_array_equal(frame_of[2:5], [7, 7, 7])
        np.testing.assert_array_equal(pos_of[2:5], [0, 1, 2])
        before = state.copy(), frame_of.copy(), pos_of.copy()
        # env 4 is READY already: refused, nothing moves
        self.assertEqual(hot.adopt(np.array([6, 4], np.int64), 2, state, frame_of, pos_of, 8,
                                   IN_FLIGHT, READY), 4)
        for a, b in zip((state, frame_of, pos_of), before):
            np.testing.assert_array_equal(a, b)

    def test_hold_takes_all_or_none(self):
        state = np.array([HANDED] * 6 + [READY, HELD], np.int8)
        frame_of = np.array([3, 3, 3, 5, 5, 9, 9, 9], np.int64)
        pos_of = np.array([0, 1, 2, 0, 1, 0, 1, 2], np.int64)
        for ids, bad, why in (([0, 8], 1, "range"), ([0, -1], 1, "range"),
                              ([1, 2, 1], 2, "twice"), ([0, 6], 1, "state"),
                              ([7], 0, "state")):
            before = state.copy()
            got = hot.hold(np.array(ids, np.int64), state, frame_of, pos_of, HANDED, HELD)
            self.assertEqual(got[:2], (bad, why), ids)
            np.testing.assert_array_equal(state, before, err_msg=f"{ids}: states changed")
        bad, frames, pos = hot.hold(np.array([4, 0, 3, 5, 2], np.int64), state, frame_of,
                                    pos_of, HANDED, HELD)
        self.assertEqual(bad, -1)
        self.assertEqual(frames, [(5, 2), (3, 2), (9, 1)])
        np.testing.assert_array_equal(pos, [1, 0, 0, 0, 2])
        np.testing.assert_array_equal(state, [HELD, HANDED, HELD, HELD, HELD, HELD, READY,
                                              HELD])

    def test_hold_over_many_frames(self):
        """More frames in one answer than the function's table holds."""
        n = 300
        state = np.full(n, HANDED, np.int8)
        frame_of = np.arange(n, dtype=np.int64) % 100
        pos_of = np.arange(n, dtype=np.int64) // 100
        bad, frames, pos = hot.hold(np.arange(n, dtype=np.int64), state, frame_of, pos_of,
                                    HANDED, HELD)
        self.assertEqual(bad, -1)
        counts = {}
        for key, c in frames:  # a key may come in more than one entry
            counts[key] = counts.get(key, 0) + c
        self.assertEqual(counts, {k: 3 for k in range(100)})
        np.testing.assert_array_equal(pos, pos_of)
        self.assertTrue((state == HELD).all())


class Scan(unittest.TestCase):
    """scan_observations on bytes no one vouches for: mutated and truncated
    in-memory frames and random bytes give None, a walk whose spans lie in
    the frame, or ValueError; never a crash or a read outside."""

    def test_mutated_frames(self):
        rng = np.random.default_rng(6)
        good = bytes([0x1A, 0x08, 0x08, 0x05, 0x58, 0x01, 0x62, 0x02, 0x00, 0x10])
        seq, in_memory, spans, ranges = hot.scan_observations(good, 0, len(good))
        self.assertEqual((seq, in_memory, ranges.tolist()), (5, True, [0, 16]))
        self.assertEqual(spans[12], (8, 10))
        outcomes = set()
        for it in range(20000):
            frame = bytearray(good if it % 2 else rng.bytes(int(rng.integers(0, 24))))
            for _ in range(int(rng.integers(0, 4))):
                if frame:
                    frame[int(rng.integers(0, len(frame)))] = int(rng.integers(0, 256))
            frame = bytes(frame[:int(rng.integers(0, len(frame) + 1))])
            pad = b"\xff" * 8  # bytes past end that a walk must not read
            try:
                got = hot.scan_observations(frame + pad, 0, len(frame))
            except ValueError:
                outcomes.add("refused")
                continue
            if got is None:
                outcomes.add("none")
                continue
            outcomes.add("walked")
            for span in got[2]:
                if span is not None:
                    self.assertTrue(0 <= span[0] <= span[1] <= len(frame), (frame, span))
            if got[3] is not None:
                self.assertLessEqual(len(got[3]), len(frame))
        self.assertEqual(outcomes, {"refused", "none", "walked"})

    def test_first_outside(self):
        self.assertEqual(hot.first_outside(np.array([0, 1, 2], np.int64), 3), -1)
        self.assertEqual(hot.first_outside(np.array([0, 3, -1], np.int64), 3), 1)
        self.assertEqual(hot.first_outside(np.array([0, -1], np.int64), 3), 1)
        self.assertEqual(hot.first_outside(np.array([], np.int64), 3), -1)


class SpinPolicy(unittest.TestCase):
    def test_misses_rest_then_retry(self):
        s = spin.Spin(100)
        for _ in range(7):
            self.assertIsNotNone(s.begin())
            s.miss()
        self.assertIsNotNone(s.begin())
        s.miss()  # the 8th in a row: the next 256 waits sleep
        self.assertEqual([s.begin() for _ in range(256)], [None] * 256)
        self.assertIsNotNone(s.begin())
        self.assertEqual((s.hits, s.misses), (0, 8))

    def test_a_hit_resets_the_streak(self):
        s = spin.Spin(100)
        for _ in range(7):
            s.begin()
            s.miss()
        s.begin()
        s.hit()
        for _ in range(7):
            self.assertIsNotNone(s.begin())
            s.miss()
        self.assertIsNotNone(s.begin())
        self.assertEqual(s.hits, 1)

    def test_cap_zero_never_spins(self):
        s = spin.Spin(0)
        self.assertEqual([s.begin() for _ in range(10)], [None] * 10)
        with self.assertRaises(ValueError):
            spin.Spin(-1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
