"""Recurrent policies (--recurrent, docs/policy.md "Recurrent policies")
through the modes: stream segments carry each row's state at their first
step (state/h, state/c) and rollout-learner checks them.

Each test waits for what the processes report (summaries, segments), with
the hang guard of nodeutil; none decides by the clock.

Run as: test_recurrent.py ROLLOUT_NODE PLUGIN_SO (rollout-learner lies
beside the node; rollout_pb2 comes from $ROLLOUT_PROTO_OUT).
"""
import json
import os
import sys
import unittest

import numpy as np

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import rollout_client as rc  # noqa: E402
from recurrent_ref import RefPolicy, log_softmax  # noqa: E402

LEARNER = None


def stream_segments(test, *args):
    """Every segment of a stream node run with args, by (shard, shard_seq),
    copied; and the node's summary."""
    p, addr, log = nu.start_listening("stream", "--quiet", *args)
    got = {}
    with rc.Stream([addr]) as st:
        while True:
            try:
                b = st.recv(timeout=nu.HANG_GUARD_S)
            except rc.ConnectionClosed:
                break
            test.assertIsNotNone(b, "no segment within the hang guard")
            seg = {k: v.copy() for k, v in b.tensors.items()}
            seg["state"] = {k: v.copy() for k, v in b.state.items()}
            got[(b.shard, b.shard_seq)] = seg
    return got, nu.json_summary(p, log)


class Stream(nu.TempDirCase):
    def check_segments(self, cell, unroll=8):
        # The states the node sent are the acting policy's: run the saved
        # policy over each segment from its state/h (and c), the log-
        # probabilities of the actions taken must be the node's, and the
        # state after the last step must be the next segment's first.
        weights = self.path("w.pb")
        got, s = stream_segments(self, "--num-envs", 12, "--shard", 4, "--unroll", unroll,
                                 "--steps", 12 * unroll * 30, "--recurrent", cell,
                                 "--save-policy", weights, "--seed", 5)
        ref = RefPolicy(weights)
        self.assertEqual(s["steps"], 12 * unroll * 30)
        worst_logp = worst_state = 0.0
        nonzero = 0
        for (shard, seq), seg in got.items():
            first = seg["is_first"]
            want = {"gru": ["h"], "lstm": ["h", "c"]}[cell.split(":")[0]]
            self.assertEqual(sorted(seg["state"]), sorted(want))
            state = np.concatenate([seg["state"][k] for k in want], axis=1)
            self.assertEqual(state.shape, (seg["reward"].shape[1], ref.floats))
            self.assertFalse(np.any(state[first[0] != 0]), "a first step's state is not zero")
            nonzero += int(np.any(state != 0))
            for t in range(first.shape[0]):
                logits, state = ref.step(seg["obs"][t], state, first[t])
                a = seg["action"][t]
                lp = log_softmax(logits)[np.arange(len(a)), a]
                worst_logp = max(worst_logp, float(np.abs(lp - seg["logp"][t]).max()))
            nxt = got.get((shard, seq + 1))
            if nxt is None:
                continue
            after = np.concatenate([nxt["state"][k] for k in want], axis=1)
            keep = nxt["is_first"][0] == 0
            if keep.any():
                worst_state = max(worst_state, float(np.abs(after[keep] - state[keep]).max()))
        print(f"{cell}: {len(got)} segments; largest logp difference {worst_logp:.3g}, state "
              f"difference at a segment boundary {worst_state:.3g}")
        self.assertGreater(nonzero, len(got) // 2, "the states stay zero")
        self.assertLess(worst_logp, 1e-4)
        self.assertLess(worst_state, 1e-5)

    def test_gru_segments_carry_the_acting_state(self):
        self.check_segments("gru:16")

    def test_lstm_segments_carry_the_acting_state(self):
        self.check_segments("lstm:8", unroll=5)

    def test_rollout_learner_checks_the_states(self):
        n = 16 * 8 * 40
        p, addr, log = nu.start_listening("stream", "--quiet", "--num-envs", 16, "--unroll", 8,
                                          "--steps", n, "--recurrent", "lstm:8")
        q = nu.run_cmd([LEARNER, "--connect", addr, "--json", "--quiet"], capture_output=True,
                       text=True)
        s = nu.json_summary(p, log)
        self.assertEqual(q.returncode, 0, q.stderr)
        ls = json.loads(q.stdout.strip().splitlines()[-1])
        self.assertEqual((s["steps"], ls["steps"]), (n, n))


if __name__ == "__main__":
    nu.setup_from_argv()
    LEARNER = os.path.join(os.path.dirname(nu.NODE), "rollout-learner")
    unittest.main(verbosity=2)
