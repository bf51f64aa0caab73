"""An env that crashes (SIGSEGV in step) takes the node down, but not
silently: one line names the signal, the env, the env index and the step."""
import json
import signal
import unittest

import nodeutil as nu


class Crash(nu.TempDirCase):
    def test_segv_in_step_is_reported(self):
        # No time limit: only the crash can end this run.
        p = nu.run_cmd([nu.NODE, "--env", nu.PLUGIN, "--env-arg", "crash_at=7",
                        "--num-envs", "8", "--seconds", "0", "--quiet"],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, -signal.SIGSEGV, p.stderr)
        self.assertIn("rollout: fatal: SIGSEGV in env 'crash' during step of env 3, "
                      "episode 0, step 7", p.stderr)

    def test_nan_observation_is_reset_and_counted(self):
        m = self.tmp + "/m.jsonl"
        p = nu.run_cmd([nu.NODE, "--env", nu.PLUGIN, "--env-arg", "crash_at=0",
                        "--env-arg", "nan_at=5", "--check-finite", "--num-envs", "8",
                        "--steps", "8000", "--quiet", "--json", "--metrics", m],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(s["env_failures"], 1)
        self.assertEqual(s["steps"], 8000)  # the node went on
        fails = [r for r in nu.read_metrics(m) if r["type"] == "env_failure"]
        self.assertEqual([(r["env"], r["episode"], r["step"]) for r in fails], [(3, 0, 5)])
        # Without --check-finite the NaN goes through as data: nothing is reset.
        p = nu.run_cmd([nu.NODE, "--env", nu.PLUGIN, "--env-arg", "crash_at=0",
                        "--env-arg", "nan_at=5", "--num-envs", "8", "--steps", "800",
                        "--quiet", "--json"], capture_output=True, text=True)
        self.assertEqual(json.loads(p.stdout.strip().splitlines()[-1])["env_failures"], 0)

    def test_failed_step_and_infinite_reward_are_reset_and_counted(self):
        # A step that returns an error is always a failure; an infinite
        # reward is one with --check-finite.
        for arg, flags in [("fail_at=9", []), ("inf_at=9", ["--check-finite"])]:
            m = self.tmp + "/m.jsonl"
            p = nu.run_cmd([nu.NODE, "--env", nu.PLUGIN, "--env-arg", "crash_at=0",
                            "--env-arg", arg, *flags, "--num-envs", "8", "--steps", "8000",
                            "--quiet", "--json", "--metrics", m],
                           capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            s = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertEqual(s["env_failures"], 1, arg)
            self.assertEqual(s["steps"], 8000)
            fails = [r for r in nu.read_metrics(m) if r["type"] == "env_failure"]
            self.assertEqual([(r["env"], r["episode"], r["step"]) for r in fails], [(3, 0, 9)])
            # The env started over: its next episode is 1 and complete.
            eps = nu.episodes_by_env(nu.read_metrics(m))[3]
            self.assertEqual(eps[0][0], 1, eps[:3])


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
