#!/usr/bin/env python3
"""Asynchronous PPO (APPO) with a small CNN on Atari Breakout, from rollout's
Python env workers.

    python python/examples/appo_breakout.py --num-envs 16 --total-steps 2000000

The envs are ``rollout_client.make_vec("py:rollout_client.atari:make", N,
game="Breakout")``: ALE Breakout with the standard preprocessing (84x84
gray, frame skip 4, 4 stacked frames: uint8 [4, 84, 84]) in rollout's env
worker processes (``--procs``, one command each way per step). The actor (this
process's main thread) acts with a copy of the policy and puts [T, N]
segments, each step with its behaviour log-probability and the policy
version that chose it, into a bounded queue; the learner thread trains on
them and hands new weights to the actor after every update, so acting and
learning overlap and segments are stale by the updates they spent queued.
The learner corrects for that lag with V-trace (Espeholt et al. 2018):
truncated importance weights rho = min(1, pi_old / mu) against the
behaviour log-probabilities mu, value targets vs with c = lambda x min(1,
rho), and PPO's clipped surrogate on pi / pi_old with the advantage vs - V,
a value loss towards vs and an entropy bonus. A terminated step is not
bootstrapped; a truncated one bootstraps from V(final observation) (the
NEXT_STEP autoreset hands it over as the last observation before the reset
step, which is masked out).

The network: conv 8x8/4 (16) -> conv 4x4/2 (32) -> fc 256 -> policy logits
and value (uint8 frames scaled by 1/255). Prints one JSON line per
--report-every updates (steps, updates, mean return of the last 20
episodes, policy lag) and one last JSON line with the whole run.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppo_common as pc  # noqa: E402  (before torch: one thread)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

rc = pc.rc

# The loss's flags (ppo_common.loss_flags) for this example: no minibatches,
# the whole segment per epoch; a constant step size.
LOSS_DEFAULTS = dict(epochs=2, lr=2.5e-4, gamma=0.99, gae_lambda=0.95, clip=0.1, ent_coef=0.01)


class CNN(nn.Module):
    """Policy and value over stacked uint8 frames."""

    def __init__(self, frames: int, actions: int) -> None:
        super().__init__()
        self.torso = nn.Sequential(
            nn.Conv2d(frames, 16, 8, stride=4), nn.ReLU(),
            nn.Conv2d(16, 32, 4, stride=2), nn.ReLU(), nn.Flatten(),
            nn.Linear(32 * 9 * 9, 256), nn.ReLU())
        self.pi = nn.Linear(256, actions)
        self.v = nn.Linear(256, 1)
        nn.init.orthogonal_(self.pi.weight, 0.01)
        nn.init.zeros_(self.pi.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs.float() / 255.0)
        return self.pi(h), self.v(h).squeeze(-1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--game", default="Breakout")
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--procs", type=int, default=2, help="env worker processes")
    ap.add_argument("--unroll", type=int, default=32, help="T of a [T, N] segment")
    ap.add_argument("--total-steps", type=int, default=2_000_000)
    pc.loss_flags(ap, LOSS_DEFAULTS)
    ap.add_argument("--queue", type=int, default=2, help="segments the actor may run ahead")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--curve", default="", help="CSV of (steps, mean return of the last 20)")
    return ap.parse_args(argv)


def vtrace(rew: torch.Tensor, disc: torch.Tensor, v: torch.Tensor, v_next: torch.Tensor,
           rho: torch.Tensor, lam: float) -> torch.Tensor:
    """V-trace targets vs [T, N]; disc = gamma x (not terminated), 0 across an
    episode end's reset step."""
    T = rew.shape[0]
    c = lam * rho.clamp(max=1.0)
    delta = rho.clamp(max=1.0) * (rew + disc * v_next - v)
    acc = torch.zeros_like(v[0])
    vs_minus_v = torch.zeros_like(v)
    for t in reversed(range(T)):
        acc = delta[t] + disc[t] * c[t] * acc
        vs_minus_v[t] = acc
    return vs_minus_v + v


class Learner(threading.Thread):
    """Trains on queued segments; publishes weights after each update."""

    def __init__(self, model: CNN, args: argparse.Namespace, q: "queue.Queue[Any]") -> None:
        super().__init__(daemon=True)
        self.model, self.args, self.q = model, args, q
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
        self.lock = threading.Lock()
        self.version = 0
        self.weights = {k: v.clone() for k, v in model.state_dict().items()}
        self.lags: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while True:
                seg = self.q.get()
                if seg is None:
                    return
                self.update(seg)
        except BaseException as e:  # noqa: BLE001 (reported by the actor's thread)
            self.error = e

    def update(self, seg: dict[str, Any]) -> None:
        a = self.args
        obs = torch.from_numpy(seg["obs"])            # [T+1, N, 4, 84, 84] uint8
        act = torch.from_numpy(seg["act"]).long()     # [T, N]
        mu = torch.from_numpy(seg["logp"])            # [T, N]
        rew = torch.from_numpy(seg["rew"]).float()
        disc = torch.from_numpy(seg["disc"]).float()  # gamma x live, [T, N]
        valid = torch.from_numpy(seg["valid"]).float()
        T, N = act.shape
        self.lags.append(self.version - seg["version"])
        with torch.no_grad():
            logits, v = self.model(obs.flatten(0, 1))
            logits, v = logits.view(T + 1, N, -1), v.view(T + 1, N)
            old = torch.distributions.Categorical(logits=logits[:T]).log_prob(act)
            rho = (old - mu).exp()
            vs = vtrace(rew, disc, v[:T], v[1:], rho, a.gae_lambda)
            adv = vs - v[:T]
            adv = (adv - adv[valid > 0].mean()) / (adv[valid > 0].std() + 1e-8)
        flat = obs[:T].flatten(0, 1)
        for _ in range(a.epochs):
            logits, value = self.model(flat)
            dist = torch.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(act.flatten()) - old.flatten()).exp()
            advf, m = adv.flatten(), valid.flatten()
            pg = -torch.min(ratio * advf, ratio.clamp(1 - a.clip, 1 + a.clip) * advf)
            loss = ((pg + a.vf_coef * (value - vs.flatten()) ** 2
                     - a.ent_coef * dist.entropy()) * m).sum() / m.sum()
            self.opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
            self.opt.step()
        with self.lock:
            self.version += 1
            self.weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def latest(self) -> tuple[int, dict[str, torch.Tensor]]:
        with self.lock:
            return self.version, self.weights


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    envs = rc.make_vec("py:rollout_client.atari:make", args.num_envs, game=args.game,
                       num_threads=args.procs, seed=args.seed)
    sp, nact = envs.single_observation_space, int(envs.single_action_space.n)
    assert sp.dtype == np.uint8 and sp.shape == (4, 84, 84), sp
    learner_model = CNN(sp.shape[0], nact)
    actor = CNN(sp.shape[0], nact)
    actor.load_state_dict(learner_model.state_dict())
    q: "queue.Queue[Any]" = queue.Queue(maxsize=args.queue)
    initial = [p.detach().clone() for p in learner_model.parameters()]
    learner = Learner(learner_model, args, q)
    learner.start()
    N, T = args.num_envs, args.unroll
    obs, _ = envs.reset(seed=args.seed)
    ret = np.zeros(N)
    returns: list[float] = []
    curve: list[tuple[int, float]] = []
    ended = np.zeros(N, bool)  # the next step is the reset step (NEXT_STEP)
    steps, version, t0 = 0, 0, time.time()
    while steps < args.total_steps and learner.error is None:
        seg = {"obs": np.empty((T + 1, N) + sp.shape, np.uint8),
               "act": np.empty((T, N), np.int64), "logp": np.empty((T, N), np.float32),
               "rew": np.empty((T, N), np.float32), "disc": np.empty((T, N), np.float32),
               "valid": np.empty((T, N), np.float32), "version": version}
        for t in range(T):
            seg["obs"][t] = obs
            with torch.no_grad():
                logits, _ = actor(torch.from_numpy(obs))
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
            seg["act"][t], seg["logp"][t] = a.numpy(), dist.log_prob(a).numpy()
            seg["valid"][t] = ~ended  # a reset step's action does nothing
            obs, r, te, tr, _ = envs.step(a.numpy())
            seg["rew"][t] = np.where(ended, 0.0, r)
            # Bootstraps from the next row: the final observation before a
            # reset step (truncated), nothing after a termination or across
            # a reset step.
            seg["disc"][t] = args.gamma * ~(te | ended)
            ret += np.where(ended, 0.0, r)
            for i in np.flatnonzero(te | tr):
                returns.append(float(ret[i]))
                ret[i] = 0.0
            ended = te | tr
            steps += N
        seg["obs"][T] = obs
        q.put(seg)
        v, w = learner.latest()
        if v != version:
            actor.load_state_dict(w)
            version = v
        if returns and version and version % args.report_every == 0:
            last = float(np.mean(returns[-20:]))
            curve.append((steps, last))
            print(json.dumps({"steps": steps, "updates": version, "episodes": len(returns),
                              "mean_return_last20": last,
                              "mean_lag": float(np.mean(learner.lags[-20:] or [0]))}),
                  flush=True)
    q.put(None)
    learner.join()
    envs.close()
    if learner.error is not None:
        raise learner.error
    out = {"steps": steps, "updates": learner.version, "episodes": len(returns),
           "mean_return_first20": float(np.mean(returns[:20])) if returns else None,
           "mean_return_last20": float(np.mean(returns[-20:])) if returns else None,
           "mean_lag": float(np.mean(learner.lags)) if learner.lags else 0.0,
           "weight_change": float(sum((p.detach() - p0).norm() ** 2 for p, p0 in
                                      zip(learner_model.parameters(), initial)) ** 0.5),
           "wall_s": time.time() - t0, "game": args.game, "num_envs": N}
    if args.curve:
        with open(args.curve, "w") as f:
            f.write("steps,mean_return_last20\n")
            f.writelines(f"{s},{r}\n" for s, r in curve)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
