#!/usr/bin/env python3
"""CleanRL-style continuous PPO on rollout/Hopper-v5, with Gymnasium's own
wrappers, on rollout's in-process vector env:

    .venv/bin/python python/examples/ppo_hopper.py            # 1 M steps
    .venv/bin/python python/examples/ppo_hopper.py --total-steps 50000 --json

The training script is CleanRL's ppo_continuous_action.py as a user has it;
the only rollout line is the env: ``gym.make_vec("rollout/Hopper-v5",
num_envs=N)`` in place of ``gym.make_vec("Hopper-v5", ...)``. The wrappers
are Gymnasium's, unchanged: RecordEpisodeStatistics, ClipAction,
NormalizeObservation, TransformObservation (clip to +-10), NormalizeReward
and TransformReward (clip to +-10). With --tensorboard DIR the curves go to
TensorBoard through torch.utils.tensorboard.

Prints one line per update (global step, mean return of the last 20
episodes) and, with --json, a summary: steps, wall time, the final mean
return and the best.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from typing import Any

import numpy as np

# One BLAS/OpenMP thread (the seeds' lesson) before torch loads; torch's own
# intra-op threads follow --torch-threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributions.normal import Normal  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rollout_client  # noqa: E402,F401  (registers the rollout/ ids)


def layer_init(layer: nn.Linear, std: float = float(np.sqrt(2)), bias: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0))
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01))
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mean = self.actor_mean(x)
        std = torch.exp(self.actor_logstd.expand_as(mean))
        probs = Normal(mean, std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def make_envs(env_id: str, num_envs: int, gamma: float, seed: int) -> gym.vector.VectorEnv:
    envs = gym.make_vec(env_id, num_envs=num_envs)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = gym.wrappers.vector.ClipAction(envs)
    envs = gym.wrappers.vector.NormalizeObservation(envs)
    envs = gym.wrappers.vector.TransformObservation(envs, lambda o: np.clip(o, -10, 10))
    envs = gym.wrappers.vector.NormalizeReward(envs, gamma=gamma)
    envs = gym.wrappers.vector.TransformReward(envs, lambda r: np.clip(r, -10, 10))
    return envs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env-id", default="rollout/Hopper-v5")
    ap.add_argument("--total-steps", type=int, default=1_000_000)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--num-steps", type=int, default=256, help="steps per env per update")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--gae-lambda", type=float, default=0.95)
    ap.add_argument("--minibatches", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--clip-coef", type=float, default=0.2)
    ap.add_argument("--ent-coef", type=float, default=0.0)
    ap.add_argument("--vf-coef", type=float, default=0.5)
    ap.add_argument("--max-grad-norm", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--tensorboard", metavar="DIR", help="write the curves with SummaryWriter")
    ap.add_argument("--json", action="store_true", help="print a JSON summary at the end")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    envs = make_envs(args.env_id, args.num_envs, args.gamma, args.seed)
    obs_dim = int(np.prod(envs.single_observation_space.shape or ()))
    act_dim = int(np.prod(envs.single_action_space.shape or ()))
    agent = Agent(obs_dim, act_dim)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    writer = None
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(args.tensorboard)

    T, N = args.num_steps, args.num_envs
    obs_b = torch.zeros((T, N, obs_dim))
    act_b = torch.zeros((T, N, act_dim))
    logp_b = torch.zeros((T, N))
    rew_b = torch.zeros((T, N))
    done_b = torch.zeros((T, N))
    val_b = torch.zeros((T, N))
    batch = T * N
    minibatch = batch // args.minibatches
    updates = max(1, args.total_steps // batch)

    returns: deque[float] = deque(maxlen=20)
    curve: list[tuple[int, float]] = []
    best = -np.inf
    step = 0
    t0 = time.perf_counter()
    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
    next_done = torch.zeros(N)
    for update in range(1, updates + 1):
        optimizer.param_groups[0]["lr"] = args.lr * (1.0 - (update - 1.0) / updates)
        for t in range(T):
            step += N
            obs_b[t], done_b[t] = next_obs, next_done
            with torch.no_grad():
                action, logp, _, value = agent.get_action_and_value(next_obs)
            val_b[t] = value.flatten()
            act_b[t], logp_b[t] = action, logp
            next_obs_np, reward, term, trunc, infos = envs.step(action.numpy())
            rew_b[t] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
            next_done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32)
            if "episode" in infos:
                for r in infos["episode"]["r"][infos["_episode"]]:
                    returns.append(float(r))
                    if writer:
                        writer.add_scalar("charts/episodic_return", float(r), step)

        # GAE, as CleanRL computes it (the autoreset step of NEXT_STEP is a
        # done boundary: its value never bootstraps the ended episode).
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            adv = torch.zeros_like(rew_b)
            last = torch.zeros(N)
            for t in reversed(range(T)):
                nonterminal = 1.0 - (next_done if t == T - 1 else done_b[t + 1])
                nv = next_value if t == T - 1 else val_b[t + 1]
                delta = rew_b[t] + args.gamma * nv * nonterminal - val_b[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                adv[t] = last
            ret_b = adv + val_b

        b_obs, b_act = obs_b.reshape(-1, obs_dim), act_b.reshape(-1, act_dim)
        b_logp, b_adv = logp_b.reshape(-1), adv.reshape(-1)
        b_ret, b_val = ret_b.reshape(-1), val_b.reshape(-1)
        idx = np.arange(batch)
        for _ in range(args.epochs):
            np.random.shuffle(idx)
            for s in range(0, batch, minibatch):
                mb = idx[s:s + minibatch]
                _, newlogp, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_act[mb])
                ratio = (newlogp - b_logp[mb]).exp()
                mb_adv = b_adv[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                newvalue = newvalue.view(-1)
                v_clipped = b_val[mb] + torch.clamp(newvalue - b_val[mb], -args.clip_coef,
                                                    args.clip_coef)
                v_loss = 0.5 * torch.max((newvalue - b_ret[mb]) ** 2,
                                         (v_clipped - b_ret[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        mean = float(np.mean(returns)) if returns else float("nan")
        if returns:
            best = max(best, mean)
        curve.append((step, mean))
        wall = time.perf_counter() - t0
        print(f"update {update}/{updates} step {step} mean_return_20 {mean:.1f} "
              f"wall {wall:.0f}s", flush=True)
        if writer:
            writer.add_scalar("charts/mean_return_20", mean, step)
            writer.add_scalar("charts/sps", step / wall, step)
    envs.close()
    if writer:
        writer.close()
    summary = {"env": args.env_id, "steps": step, "wall_s": round(time.perf_counter() - t0, 1),
               "final_mean_return": curve[-1][1], "best_mean_return": best,
               "episodes_in_last_mean": len(returns), "curve": curve}
    if args.json:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
