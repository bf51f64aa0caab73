"""Transition-level fidelity of rollout's built-in envs against Gymnasium's
own (issue 32): CartPole-v1, Pendulum-v1 and the MuJoCo v5 envs.

For one recording made by rollout-node (--record), each entry is re-created
by fidelity_states (the state the node's env was in, bit-checked against the
recording's obs and reward), then Gymnasium's env is put into the state
before each step (MuJoCo: mj_setState with mjSTATE_INTEGRATION, the bodies'
xpos, which Ant-v5 reads before the step, set too), the recorded action is
applied, and Gymnasium's next observation, reward, terminated, truncated (its
TimeLimit, with the episode's step count) and reward terms (info) are
compared with the recording's and the env's. Reset observations are checked
against Gymnasium's reset distribution: inside its support, and the same
mean and spread as Gymnasium's own resets.

Usage (what bench/mujoco_fidelity.py and test_fidelity.py call):
    check(node, states_tool, env, policy, seed, num_envs, steps, env_args, tmpdir)
returns a Result; python3 fidelity.py NODE TOOL ENV ... prints it as JSON.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import fidelity_traj as ft

GYM_IDS = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1",
           "inverted_pendulum": "InvertedPendulum-v5", "hopper": "Hopper-v5",
           "walker2d": "Walker2d-v5", "half_cheetah": "HalfCheetah-v5", "ant": "Ant-v5"}
MUJOCO = {"inverted_pendulum", "hopper", "walker2d", "half_cheetah", "ant"}
# Gymnasium's info keys for ro_mj_terms_t's order (forward, ctrl_cost,
# contact_cost, survive, x_velocity) and the sign Gymnasium gives each.
TERM_KEYS = [("reward_forward", 1.0), ("reward_ctrl", -1.0), ("reward_contact", -1.0),
             ("reward_survive", 1.0), ("x_velocity", 1.0)]
HANG_GUARD_S = 600


@dataclass
class Result:
    """What one env's check found (every count over the recording)."""
    env: str
    gym_id: str
    policy: str
    transitions: int = 0          # steps compared with Gymnasium
    resets: int = 0               # reset observations checked
    terminated: int = 0           # steps the recording marks terminated
    truncated: int = 0            # ... and truncated
    flag_mismatches: int = 0      # terminated or truncated differ from Gymnasium's
    obs_mismatches: int = 0       # steps whose float32 obs differs anywhere
    obs_worst_abs: float = 0.0    # largest |rollout - gymnasium| of any obs value
    obs_worst_ulp: int = 0        # ... in float32 units in the last place
    reward_mismatches: int = 0    # steps whose float32 reward differs
    reward_worst_abs: float = 0.0
    terms_worst_abs: float = 0.0  # largest |difference| of any info reward term (float64)
    terms_mismatches: int = 0
    reset_obs_mismatches: int = 0  # Gymnasium's obs of a reset state differs
    reset_outside: int = 0        # reset observations outside Gymnasium's support
    reset_moments_ok: bool = True  # mean and spread agree with Gymnasium's own resets
    reset_moments_n: int = 0      # resets in recordings with enough of them to compare
    reset_moments_note: str = ""
    replay_mismatches: int = 0    # fidelity_states did not reproduce the recording
    mujoco_version: str = ""
    problems: list[str] = field(default_factory=list)

    def note(self, msg: str) -> None:
        """Keeps the first few problems, for the report."""
        if len(self.problems) < 8:
            self.problems.append(msg)

    def ok(self) -> bool:
        """The issue's targets: every count of a difference is 0."""
        return not (self.flag_mismatches or self.obs_mismatches or self.reward_mismatches
                    or self.terms_mismatches or self.reset_obs_mismatches
                    or self.reset_outside or self.replay_mismatches
                    or not self.reset_moments_ok)


def record(node: str, env: str, policy: str, seed: int, num_envs: int, steps: int,
           env_args: list[str], path: str) -> dict[str, Any]:
    """Runs the node and returns its --json summary."""
    argv = [node, "--env", env, "--policy", policy, "--num-envs", str(num_envs), "--steps",
            str(steps), "--seed", str(seed), "--record", path, "--quiet", "--json"]
    for a in env_args:
        argv += ["--env-arg", a]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S)
    if p.returncode != 0:
        raise RuntimeError(f"rollout-node failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


BOOL_KEYS = {"terminate_when_unhealthy", "exclude_current_positions_from_observation",
             "include_cfrc_ext_in_observation"}


def gym_value(key: str, value: str) -> Any:
    """An --env-arg string as the Python value Gymnasium's keyword takes."""
    if key in BOOL_KEYS:
        return value in ("true", "True", "1")
    if "," in value:
        return tuple(float(v) for v in value.split(","))
    if key in ("frame_skip", "main_body") and value.lstrip("-").isdigit():
        return int(value)
    try:
        return float(value)
    except ValueError:
        return value


class StateTool:
    """fidelity_states, fed the recording's entries from a file, read back
    answer by answer from a pipe."""

    def __init__(self, tool: str, tr: ft.Trajectory, cmd_path: str) -> None:
        h = tr.header
        node_seed = h.seed if h.node_index == 0 else None
        if node_seed is None:
            raise ValueError("recordings of node index 0 only")
        with open(cmd_path, "wb") as f:
            for k in range(len(tr.env)):
                reset = bool(tr.flags[k] & ft.RESET)
                f.write(np.array([tr.env[k], 0 if reset else 1], dtype=np.uint32).tobytes())
                if not reset:
                    f.write(tr.action[k].tobytes())
        args = [f"{a.key}={a.value}" for a in h.env_args]
        with open(cmd_path, "rb") as cmds:
            self.proc = subprocess.Popen([tool, h.env, str(node_seed), *args], stdin=cmds,
                                         stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        self.out = self.proc.stdout
        start = np.frombuffer(self._read(24), dtype=np.uint32)
        if start[0] != 0x31534652:
            raise RuntimeError("fidelity_states: bad start")
        self.obs_dim, self.act_dim, self.nstate, self.nxpos, self.nterms = map(int, start[1:])
        self.answer = np.dtype([("rc", "<i4"), ("obs", "<f4", (self.obs_dim,)),
                                ("reward", "<f4"), ("terminated", "<u4"),
                                ("state", "<f8", (self.nstate,)),
                                ("xpos", "<f8", (self.nxpos,)),
                                ("terms", "<f8", (self.nterms,))])

    def _read(self, n: int) -> bytes:
        b = self.out.read(n)
        if len(b) != n:
            raise RuntimeError(f"fidelity_states ended early (exit {self.proc.wait()})")
        return b

    def next(self) -> Any:
        """The answer to the next entry."""
        return np.frombuffer(self._read(self.answer.itemsize), dtype=self.answer)[0]

    def close(self) -> None:
        self.out.close()
        if self.proc.wait(timeout=HANG_GUARD_S) != 0:
            raise RuntimeError(f"fidelity_states exited {self.proc.returncode}")


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in float32 steps between a and b (finite)."""
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int(np.max(np.abs(ia - ib))) if ia.size else 0


def make_gym(env: str, tr: ft.Trajectory,
             overrides: dict[str, Any] | None = None) -> tuple[Any, Any, Any]:
    """Gymnasium's env with the recording's args (and overrides, to show
    that the check fails) and time limit: (the made env, its unwrapped env,
    its TimeLimit wrapper)."""
    import gymnasium as gym
    kwargs = {a.key: gym_value(a.key, a.value) for a in tr.header.env_args}
    kwargs.update(overrides or {})
    g = gym.make(GYM_IDS[env], max_episode_steps=tr.header.max_episode_steps or None, **kwargs)
    g.reset(seed=0)
    w, limit = g, None
    while hasattr(w, "env"):
        if type(w).__name__ == "TimeLimit":
            limit = w
        w = w.env
    return g, g.unwrapped, limit


def set_state(env: str, u: Any, ans: Any) -> None:
    """Puts Gymnasium's unwrapped env into the state fidelity_states gave."""
    if env in MUJOCO:
        import mujoco
        mujoco.mj_setState(u.model, u.data, ans["state"], mujoco.mjtState.mjSTATE_INTEGRATION)
        u.data.xpos[:] = ans["xpos"].reshape(-1, 3)
    elif env == "cartpole":
        u.state = np.array(ans["state"], dtype=np.float64)
        u.steps_beyond_terminated = None
    else:
        u.state = np.array(ans["state"], dtype=np.float64)


def reset_obs(env: str, u: Any, ans: Any) -> np.ndarray:
    """Gymnasium's observation of a reset state: MuJoCo through its own
    reset path (mj_resetData, then set_state's qpos, qvel and mj_forward)."""
    if env in MUJOCO:
        import mujoco
        st = ans["state"]
        nq, nv = u.model.nq, u.model.nv
        mujoco.mj_resetData(u.model, u.data)
        u.set_state(st[1:1 + nq].copy(), st[1 + nq:1 + nq + nv].copy())
        return np.asarray(u._get_obs())
    u.state = np.array(ans["state"], dtype=np.float64)
    return np.array(u.state, dtype=np.float32) if env == "cartpole" else u._get_obs()


def check_step(res: Result, env: str, g: Any, u: Any, limit: Any, tr: ft.Trajectory, k: int,
               prev: Any, ans: Any) -> None:
    """One transition: Gymnasium from prev's state with entry k's action."""
    set_state(env, u, prev)
    limit._elapsed_steps = int(tr.step[k]) - 1
    a = tr.action[k].copy()
    obs, rew, term, trunc, info = g.step(int(a[0]) if env == "cartpole" else a)
    res.transitions += 1
    fl = int(tr.flags[k])
    res.terminated += bool(fl & ft.TERMINATED)
    res.truncated += bool(fl & ft.TRUNCATED)
    if bool(term) != bool(fl & ft.TERMINATED) or bool(trunc) != bool(fl & ft.TRUNCATED):
        res.flag_mismatches += 1
        res.note(f"entry {k}: terminated/truncated {bool(fl & 1)}/{bool(fl & 2)}, "
                 f"Gymnasium {term}/{trunc}")
    gobs = np.asarray(obs, dtype=np.float64).astype(np.float32)
    if not np.array_equal(ft.float_bits(gobs), ft.float_bits(tr.obs[k])):
        res.obs_mismatches += 1
        diff = np.abs(gobs.astype(np.float64) - tr.obs[k].astype(np.float64))
        res.obs_worst_abs = max(res.obs_worst_abs, float(np.nanmax(diff)))
        res.obs_worst_ulp = max(res.obs_worst_ulp, ulps(gobs, tr.obs[k]))
        res.note(f"entry {k} (env {tr.env[k]} step {tr.step[k]}): obs differs by up to "
                 f"{float(np.nanmax(diff)):.3g}")
    grew = np.float32(float(rew))
    if ft.float_bits(np.array([grew]))[0] != ft.float_bits(tr.reward[k:k + 1])[0]:
        res.reward_mismatches += 1
        err = abs(float(grew) - float(tr.reward[k]))
        res.reward_worst_abs = max(res.reward_worst_abs, err)
        res.note(f"entry {k}: reward {tr.reward[k]!r}, Gymnasium {float(rew)!r}")
    if env in MUJOCO:
        for (key, sign), mine in zip(TERM_KEYS, ans["terms"]):
            if key in info:
                err = abs(float(info[key]) - sign * float(mine))
                res.terms_worst_abs = max(res.terms_worst_abs, err)
                if err != 0.0:
                    res.terms_mismatches += 1
                    res.note(f"entry {k}: info {key} {float(info[key])!r}, rollout "
                             f"{sign * float(mine)!r}")


def replay_matches(res: Result, tr: ft.Trajectory, k: int, ans: Any) -> None:
    """fidelity_states must reproduce entry k bit for bit (so its states
    are the recorded run's)."""
    reset = bool(tr.flags[k] & ft.RESET)
    same = int(ans["rc"]) == 0 and np.array_equal(ft.float_bits(ans["obs"]),
                                                  ft.float_bits(tr.obs[k]))
    if not reset:
        same = same and ft.float_bits(np.array([ans["reward"]]))[0] == \
            ft.float_bits(tr.reward[k:k + 1])[0]
        same = same and bool(ans["terminated"]) == bool(tr.flags[k] & ft.TERMINATED)
    if not same:
        res.replay_mismatches += 1
        res.note(f"entry {k}: fidelity_states does not reproduce the recording")


def reset_support(env: str, u: Any) -> tuple[np.ndarray, np.ndarray]:
    """The bounds of Gymnasium's reset observations (inf where its noise is
    normal), from its env's own init state and noise scale."""
    if env == "cartpole":
        return np.full(4, -0.05), np.full(4, 0.05)
    if env == "pendulum":
        return np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 1.0])
    s = u._reset_noise_scale
    skip = {"ant": 2}.get(env, 0 if env == "inverted_pendulum" else 1)
    if not getattr(u, "_exclude_current_positions_from_observation", True):
        skip = 0
    qlo, qhi = u.init_qpos[skip:] - s, u.init_qpos[skip:] + s
    normal = env in ("half_cheetah", "ant")
    vlo = np.full(u.model.nv, -np.inf if normal else -s) + u.init_qvel
    vhi = np.full(u.model.nv, np.inf if normal else s) + u.init_qvel
    lo, hi = np.concatenate([qlo, vlo]), np.concatenate([qhi, vhi])
    extra = u.observation_space.shape[0] - lo.size  # ant's contact forces: 0 at a reset
    return np.concatenate([lo, np.zeros(extra)]), np.concatenate([hi, np.zeros(extra)])


def check_resets(res: Result, env: str, g: Any, u: Any, ours: np.ndarray) -> None:
    """Our reset observations against Gymnasium's reset distribution."""
    lo, hi = reset_support(env, u)
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    res.reset_outside = int(np.sum(np.any((ours < lo32) | (ours > hi32), axis=1)))
    if res.reset_outside:
        res.note(f"{res.reset_outside} reset observations outside Gymnasium's support")
    n = len(ours)
    if n < 100:  # the moment check's z and ratio bounds assume this many
        res.reset_moments_note = f"{n} resets: too few for the moment check"
        return
    theirs = np.array([g.reset(seed=s)[0] for s in range(max(n, 1000))], dtype=np.float64)
    o = ours.astype(np.float64)
    m1, m2 = o.mean(axis=0), theirs.mean(axis=0)
    v1, v2 = o.var(axis=0, ddof=1), theirs.var(axis=0, ddof=1)
    live = (v1 > 0) | (v2 > 0)
    z = np.abs(m1 - m2)[live] / np.sqrt(v1 / n + v2 / len(theirs))[live]
    ratio = np.sqrt(v1[live] / np.where(v2[live] > 0, v2[live], np.inf))
    worst_z = float(np.max(z)) if z.size else 0.0
    res.reset_moments_n = n
    res.reset_moments_ok = bool(worst_z <= 5.0 and np.all((ratio >= 0.7) & (ratio <= 1.4)))
    res.reset_moments_note = (f"{n} resets against {len(theirs)} of Gymnasium's: largest mean "
                              f"z {worst_z:.2f}, std ratios {float(np.min(ratio)):.2f}.."
                              f"{float(np.max(ratio)):.2f}")
    if not res.reset_moments_ok:
        res.note("reset moments differ: " + res.reset_moments_note)


def check_file(path: str, tool: str, policy: str, tmpdir: str,
               gym_overrides: dict[str, Any] | None = None) -> Result:
    """Checks every entry of one recording."""
    tr = ft.read(path)
    env = tr.header.env
    res = Result(env=env, gym_id=GYM_IDS[env], policy=policy,
                 mujoco_version=tr.header.mujoco_version)
    g, u, limit = make_gym(env, tr, gym_overrides)
    tool_p = StateTool(tool, tr, os.path.join(tmpdir, os.path.basename(path) + ".cmd"))
    prev: dict[int, Any] = {}
    resets = []
    for k in range(len(tr.env)):
        ans = tool_p.next()
        replay_matches(res, tr, k, ans)
        e = int(tr.env[k])
        if tr.flags[k] & ft.FAILED:
            res.note(f"entry {k}: the env failed in the recording")
            res.replay_mismatches += 1
        elif tr.flags[k] & ft.RESET:
            res.resets += 1
            resets.append(tr.obs[k])
            gobs = np.asarray(reset_obs(env, u, ans), dtype=np.float64).astype(np.float32)
            if not np.array_equal(ft.float_bits(gobs), ft.float_bits(tr.obs[k])):
                res.reset_obs_mismatches += 1
                res.note(f"entry {k}: Gymnasium's obs of the reset state differs")
        else:
            check_step(res, env, g, u, limit, tr, k, prev[e], ans)
        prev[e] = ans
    tool_p.close()
    check_resets(res, env, g, u, np.array(resets, dtype=np.float32))
    return res


def check(node: str, tool: str, env: str, policy: str, seed: int, num_envs: int, steps: int,
          env_args: list[str], tmpdir: str) -> Result:
    """Records a run with the node and checks it."""
    path = os.path.join(tmpdir, f"{env}-{policy}-{seed}.traj")
    record(node, env, policy, seed, num_envs, steps, env_args, path)
    try:
        return check_file(path, tool, policy, tmpdir)
    finally:
        os.unlink(path)


def merge(results: list[Result]) -> Result:
    """One env's results over several runs."""
    r = Result(env=results[0].env, gym_id=results[0].gym_id,
               policy="+".join(sorted({x.policy for x in results})),
               mujoco_version=results[0].mujoco_version)
    for x in results:
        for f in ("transitions", "resets", "terminated", "truncated", "flag_mismatches",
                  "obs_mismatches", "reward_mismatches", "terms_mismatches",
                  "reset_obs_mismatches", "reset_outside", "replay_mismatches",
                  "reset_moments_n"):
            setattr(r, f, getattr(r, f) + getattr(x, f))
        for f in ("obs_worst_abs", "obs_worst_ulp", "reward_worst_abs", "terms_worst_abs"):
            setattr(r, f, max(getattr(r, f), getattr(x, f)))
        r.reset_moments_ok = r.reset_moments_ok and x.reset_moments_ok
        r.reset_moments_note = "; ".join(filter(None, [r.reset_moments_note,
                                                       x.reset_moments_note]))
        for p in x.problems:
            r.note(p)
    return r


def main(argv: list[str]) -> int:
    """fidelity.py NODE TOOL ENV POLICY SEED NUM_ENVS STEPS TMPDIR [KEY=VALUE]..."""
    node, tool, env, policy, seed, num_envs, steps, tmpdir = argv[1:9]
    res = check(node, tool, env, policy, int(seed), int(num_envs), int(steps), argv[9:], tmpdir)
    print(json.dumps(asdict(res)))
    return 0 if res.ok() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
