"""The APPO example on Atari Breakout (python/examples/appo_breakout.py) end to
end, briefly: uint8 [4, 84, 84] frames from rollout's env worker processes,
a CNN acting, segments queued to a learner thread, V-trace updates that
change the weights, episodes that end and are counted. It asserts the
pipeline, not a score and not time (a learning curve takes millions of
steps: docs/python.md). Exits 77 (skipped) without torch, ale-py or OpenCV.

Run as: test_python_appo_breakout.py BUILD_DIR"""
import math
import os
import sys
import unittest

BUILD = os.path.abspath(sys.argv[1])
del sys.argv[1:2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "examples"))
os.environ.setdefault("ROLLOUT_PROTO_OUT", os.path.join(BUILD, "proto"))

try:
    import ale_py  # noqa: F401
    import cv2  # noqa: F401
    import torch  # noqa: F401
except ImportError as e:
    print(f"skipped: the Breakout example needs torch, ale-py and opencv: {e}")
    sys.exit(77)

import appo_breakout  # noqa: E402


class AppoBreakout(unittest.TestCase):
    def test_pipeline(self):
        out = appo_breakout.main(["--num-envs", "4", "--procs", "2", "--unroll", "16",
                                  "--total-steps", str(4 * 16 * 40), "--seed", "3"])
        self.assertEqual(out["steps"], 4 * 16 * 40)
        self.assertEqual(out["updates"], 40)  # every segment, the queued ones too
        self.assertGreater(out["weight_change"], 0.0)
        self.assertGreater(out["episodes"], 0)  # episodes ended, were reset and counted
        self.assertTrue(math.isfinite(out["mean_return_last20"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
