"""An env that crashes (SIGSEGV in step) takes the node down, but not
silently: one line names the signal, the env, the env index and the step."""
import signal
import subprocess
import unittest

import nodeutil as nu


class Crash(unittest.TestCase):
    def test_segv_in_step_is_reported(self):
        p = subprocess.run([nu.NODE, "--env", nu.PLUGIN, "--env-arg", "crash_at=7",
                            "--num-envs", "8", "--seconds", "10", "--quiet"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, -signal.SIGSEGV, p.stderr)
        self.assertIn("rollout: fatal: SIGSEGV in env 'crash' during step of env 3, "
                      "episode 0, step 7", p.stderr)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
