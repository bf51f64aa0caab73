"""Python envs in env worker processes (issue 33): --env gym:ID and
--env py:MODULE:CALLABLE under the local policy, their spaces mapped, their
episodes independent of the number of processes, refusals named, and the
faults of a worker (a raise, a SIGKILL, a hang) counted as env failures while
the node finishes its run. The test envs are tests/integration/pyenv_envs.py,
found through PYTHONPATH. Nothing is decided by the clock: each run ends by
its --steps quota, and the hang is the node's own --env-timeout."""
import json
import os
import unittest

import nodeutil as nu

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
DRIFT = "py:pyenv_envs:drift"


class PyEnv(nu.TempDirCase):
    def episodes(self, *args, tag):
        m = self.path(f"{tag}.jsonl")
        s, p = nu.run(*args, "--metrics", m, "--metrics-episodes")
        self.assertEqual(s["dropped_metrics"], 0)
        return s, p, nu.episodes_by_env(nu.read_metrics(m))

    def test_gym_cartpole(self):
        s, _, eps = self.episodes("--env", "gym:CartPole-v1", "--num-envs", 8, "--workers", 2,
                                  "--steps", 8 * 200, "--seed", 4, tag="cp")
        self.assertEqual(s["env"], "gym:CartPole-v1")
        self.assertEqual(s["env_failures"], 0)
        self.assertIsNone(s["env_error"])
        self.assertEqual(s["steps"], 8 * 200)
        self.assertEqual(sorted(eps), list(range(8)))
        # An untrained policy on CartPole: short episodes, each at least 8 steps.
        lengths = [n for v in eps.values() for _, _, n in v]
        self.assertGreaterEqual(min(lengths), 8)
        self.assertTrue(all(r == n for v in eps.values() for _, r, n in v))

    def test_episodes_do_not_depend_on_processes(self):
        common = ["--env", DRIFT, "--num-envs", 6, "--steps", 6 * 120, "--seed", 9]
        _, _, ref = self.episodes(*common, "--workers", 1, "--env-procs", 1, tag="p1")
        self.assertGreaterEqual(sum(len(v) for v in ref.values()), 12)
        for procs, workers in ((2, 2), (3, 2), (6, 1)):
            _, _, got = self.episodes(*common, "--workers", workers, "--env-procs", procs,
                                      tag=f"p{procs}w{workers}")
            self.assertEqual(got, ref, f"--env-procs {procs} --workers {workers}")
        _, _, other = self.episodes("--env", DRIFT, "--num-envs", 6, "--steps", 6 * 120,
                                    "--seed", 10, "--workers", 1, tag="seed10")
        self.assertNotEqual(other, ref)

    def test_refusals_named(self):
        for env, needle in (("py:pyenv_envs:texty", "rollout cannot carry a Text space"),
                            ("py:no_such_module:make", "No module named 'no_such_module'"),
                            ("gym:NoSuchEnv-v0", "NoSuchEnv")):
            p = nu.run_cmd([nu.NODE, "--env", env, "--num-envs", 2, "--json", "--quiet"],
                           capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stderr)
            err = json.loads(p.stdout)["error"]
            self.assertIn(needle, err)
            self.assertIn("Traceback", p.stderr)  # the whole of it, in the log line
        p = nu.run_cmd([nu.NODE, "--env", "gym:CartPole-v1", "--env-arg", "1x=2", "--quiet"],
                       capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("arg '1x' is not a Python keyword", p.stderr)

    def fault(self, kind, *extra):
        once = self.path(f"once-{kind}")
        s, p = nu.run("--env", DRIFT, "--env-arg", f"fault={kind!r}", "--env-arg", "at=15",
                      "--env-arg", f"once={once!r}", "--num-envs", 4, "--workers", 2,
                      "--steps", 4 * 150, "--seed", 2, *extra)
        self.assertTrue(os.path.exists(once), f"the {kind} fault never fired")
        self.assertEqual(s["steps"], 4 * 150)  # the node served on, to its quota
        return s, p.stderr

    def test_fault_raise(self):
        s, log = self.fault("raise")
        self.assertEqual(s["env_failures"], 1, log)
        self.assertIn("RuntimeError: injected fault", log)
        self.assertIn("Traceback (most recent call last)", log)
        # ... and in --json's summary, whole.
        self.assertIn("Traceback (most recent call last)", s["env_error"])
        self.assertIn("RuntimeError: injected fault", s["env_error"])

    def test_fault_sigkill(self):
        s, log = self.fault("kill")
        self.assertEqual(s["env_failures"], 2, log)  # both envs of the killed worker
        self.assertIn("was killed by signal 9", log)
        self.assertIn("was killed by signal 9", s["env_error"])
        self.assertIn("restarting it", log)

    def test_fault_hang(self):
        # A worker slower than --env-timeout is a hung one too: on a loaded
        # machine another may overrun it; each costs its process's 2 envs.
        s, log = self.fault("hang", "--env-timeout", 5)
        self.assertGreaterEqual(s["env_failures"], 2, log)
        self.assertEqual(s["env_failures"] % 2, 0, log)
        self.assertIn("did not answer within 5000 ms", log)


if __name__ == "__main__":
    nu.setup_from_argv()
    unittest.main(verbosity=2)
