"""What the PPO examples share: flags, the connection (token from a file or
the environment, like the C tools), rollouts, GAE, the clipped PPO update,
progress lines and the result, and writing the actor as a PolicyParams file
that ``rollout-node --policy FILE`` runs.

The examples import this module before torch: it holds torch (and BLAS) at
one thread first, since the node's workers already use the cores and nested
pools oversubscribe them (our threading post-mortems).
"""
import argparse
import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass  # already set (only allowed once, before any inter-op work)

try:
    import rollout_client as rc  # an installed package (pip install .)
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import rollout_client as rc  # noqa: E402


def layer(n_in, n_out, gain):
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


def mlp(n_in, hidden, n_out, out_gain):
    """Two tanh hidden layers (the node's MLP with --activation tanh)."""
    g = np.sqrt(2.0)
    return nn.Sequential(layer(n_in, hidden, g), nn.Tanh(), layer(hidden, hidden, g), nn.Tanh(),
                         layer(hidden, n_out, out_gain))


def connection_flags(ap, launch_help):
    """--node/--connect, --launch, --token-file, --connect-timeout: how an
    example reaches its nodes (shared by the PPO and APPO examples)."""
    ap.add_argument("--node", "--connect", dest="node", action="append", metavar="HOST:PORT",
                    help="a node to learn from (repeatable; default 127.0.0.1:5555); a host "
                         "name or [IPv6] works too")
    ap.add_argument("--launch", type=int, metavar="NUM_ENVS", help=launch_help)
    ap.add_argument("--token-file", default=os.environ.get("ROLLOUT_TOKEN_FILE"),
                    help="file holding the nodes' shared token (default $ROLLOUT_TOKEN_FILE; "
                         "$ROLLOUT_TOKEN holds the token itself). Never on the command line: "
                         "other users can read it there")
    ap.add_argument("--connect-timeout", type=float, default=30.0,
                    help="seconds to wait for a node that is still starting (default 30)")


def run_flags(ap, defaults):
    """--total-steps, --target, --no-target, --quick."""
    ap.add_argument("--total-steps", type=int, default=defaults["total_steps"],
                    help="env steps at most, over all envs; the step size anneals to 0 over "
                         f"them (default {defaults['total_steps']})")
    ap.add_argument("--target", type=float, default=defaults["target"],
                    help="stop once the last 20 episodes average this (default "
                         f"{defaults['target']}); --no-target never stops early")
    ap.add_argument("--no-target", action="store_true", help="run all --total-steps")
    ap.add_argument("--quick", action="store_true",
                    help=f"a short run for tests: {defaults['quick_steps']} steps at most, stop "
                         f"at mean {defaults['quick_target']} (the step size anneals as in a "
                         "full run)")


def loss_flags(ap, defaults):
    """The clipped-objective PPO loss and its optimiser (the PPO and APPO
    examples); --minibatch where the defaults give one (an update on
    minibatches)."""
    if "minibatch" in defaults:
        ap.add_argument("--minibatch", type=int, default=defaults["minibatch"],
                        help="samples per minibatch")
    ap.add_argument("--epochs", type=int, default=defaults["epochs"],
                    help="passes over each rollout")
    ap.add_argument("--lr", type=float, default=defaults["lr"], help="Adam step size")
    ap.add_argument("--gamma", type=float, default=defaults["gamma"])
    ap.add_argument("--gae-lambda", type=float, default=defaults["gae_lambda"])
    ap.add_argument("--clip", type=float, default=defaults.get("clip", 0.2),
                    help="PPO clip range")
    ap.add_argument("--ent-coef", type=float, default=defaults["ent_coef"],
                    help="entropy bonus weight")
    ap.add_argument("--vf-coef", type=float, default=0.5, help="value loss weight")


def output_flags(ap):
    """--max-grad-norm, --hidden, --seed, --save-policy, --log-interval."""
    ap.add_argument("--max-grad-norm", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=64, help="hidden width (two layers)")
    ap.add_argument("--seed", type=int, default=1,
                    help="torch's seed (and the launched node's, with --launch)")
    ap.add_argument("--save-policy", metavar="FILE",
                    help="write the trained actor as PolicyParams for rollout-node --policy")
    ap.add_argument("--log-interval", type=float, default=2.0,
                    help="seconds between progress lines")
    ap.add_argument("--tensorboard", metavar="DIR",
                    help="log the training curves (return, losses, steps/s) to TensorBoard "
                         "event files in DIR (torch.utils.tensorboard); the nodes' own "
                         "curves come from rollout-node --tensorboard")


def parser(description, defaults):
    """The flags of the PPO examples; ``defaults`` overrides per example."""
    # No abbreviations: "--token" must not quietly mean "--token-file".
    ap = argparse.ArgumentParser(description=description, allow_abbrev=False)
    connection_flags(ap, "start a local rollout-node with this many envs instead of --node "
                         "(rollout_client.launch_node; $ROLLOUT_NODE or rollout-node on PATH)")
    run_flags(ap, defaults)
    ap.add_argument("--num-steps", type=int, default=defaults["num_steps"],
                    help="steps per env per update")
    loss_flags(ap, defaults)
    ap.add_argument("--reward-scale", type=float, default=defaults.get("reward_scale", 1.0),
                    help="rewards are multiplied by this for learning (returns are reported "
                         "unscaled)")
    output_flags(ap)
    return ap


def finish_args(ap, defaults, argv=None):
    args = ap.parse_args(argv)
    # The step size anneals over --total-steps; a --quick run stops early on
    # the same schedule as a full run, so it learns as fast as one starts.
    args.anneal_steps = args.total_steps
    if args.quick:
        args.total_steps = min(args.total_steps, defaults["quick_steps"])
        args.target = defaults["quick_target"]
    if args.no_target:
        args.target = None
    if args.launch is not None and args.node:
        ap.error("give --node or --launch, not both")
    args.node = args.node or ["127.0.0.1:5555"]
    return args


def token_args(args):
    """The token as the C tools take it: a file (--token-file or
    $ROLLOUT_TOKEN_FILE), or $ROLLOUT_TOKEN; never a command-line value."""
    if args.token_file:
        return {"token_file": args.token_file}
    if os.environ.get("ROLLOUT_TOKEN"):
        return {"token": os.environ["ROLLOUT_TOKEN"]}
    return {}


def open_env(args, name, env_name, action_kind):
    """(VecEnv, node or None): the nodes given, or one launched here; exits
    naming the node's action space unless it is action_kind."""
    node = None
    addresses = args.node
    if args.launch is not None:
        node = rc.launch_node(env=env_name, num_envs=args.launch, seed=args.seed,
                              token_file=args.token_file)
        addresses = [node.address]
    try:
        env = rc.VecEnv(addresses, name=name, connect_timeout=args.connect_timeout,
                        **token_args(args), autoreset_mode="same_step")
    except BaseException:
        if node is not None:
            node.stop()
        raise
    if env.action_kind != action_kind:
        env.close()
        sys.exit(f"{name} needs a {action_kind} action space, the node has {env.action_kind}")
    return env, node


def last20(returns):
    return float(np.mean(returns[-20:])) if returns else float("nan")


def train(args, env, model, to_env_action, action_shape, action_dtype):
    """PPO over env with model (``dist(obs)``, ``value(obs)``); returns
    (steps, updates, reached target). ``to_env_action`` turns a sampled
    action tensor into what env.step takes."""
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
    N, T, D = env.num_envs, args.num_steps, env.obs_dim
    obs_buf = torch.zeros(T, N, D)
    act_buf = torch.zeros((T, N) + action_shape, dtype=action_dtype)
    logp_buf = torch.zeros(T, N)
    val_buf = torch.zeros(T, N)
    rew_buf = torch.zeros(T, N)   # reward, plus gamma * V(final_obs) on truncation
    done_buf = torch.zeros(T, N)  # 1 where the step ended an episode: GAE stops there

    t0 = time.monotonic()
    obs_np, _ = env.reset()
    obs = torch.from_numpy(obs_np.reshape(N, D).astype(np.float32))
    steps = updates = 0
    num_updates = max(1, args.total_steps // (T * N))
    anneal_updates = max(num_updates, getattr(args, "anneal_steps", 0) // (T * N))
    last_log = t0
    reached = False
    curves = Curves(getattr(args, "tensorboard", None))
    for update in range(num_updates):
        for g in opt.param_groups:
            g["lr"] = args.lr * (1.0 - update / anneal_updates)
        for t in range(T):
            with torch.no_grad():
                d = model.dist(obs)
                a = d.sample()
                obs_buf[t] = obs
                act_buf[t] = a
                logp_buf[t] = d.log_prob(a)
                val_buf[t] = model.value(obs)
            nobs, rew, term, trunc, info = env.step(to_env_action(a))
            rew = torch.from_numpy(rew.astype(np.float32)) * args.reward_scale
            # Truncated, not terminated: the episode would have gone on, so
            # its last step is worth r + gamma * V(final_obs). An env failure
            # (truncated, no final_obs) bootstraps from the last observation.
            cut = trunc & ~term
            if cut.any():
                has = info["_final_obs"] & cut
                with torch.no_grad():
                    if has.any():
                        fin = torch.from_numpy(
                            info["final_obs"][has].reshape(-1, D).astype(np.float32))
                        rew[torch.from_numpy(has)] += args.gamma * model.value(fin)
                    bad = torch.from_numpy(cut & ~info["_final_obs"])
                    if bad.any():
                        rew[bad] += args.gamma * val_buf[t][bad]
            rew_buf[t] = rew
            done_buf[t] = torch.from_numpy((term | trunc).astype(np.float32))
            obs = torch.from_numpy(nobs.reshape(N, D).astype(np.float32))
        steps += T * N

        with torch.no_grad():
            next_val = model.value(obs)
            adv = torch.zeros(T, N)
            gae = torch.zeros(N)
            for t in reversed(range(T)):
                nv = next_val if t == T - 1 else val_buf[t + 1]
                live = 1.0 - done_buf[t]
                delta = rew_buf[t] + args.gamma * nv * live - val_buf[t]
                gae = delta + args.gamma * args.gae_lambda * live * gae
                adv[t] = gae
            ret = adv + val_buf

        b_obs = obs_buf.reshape(-1, D)
        b_act = act_buf.reshape((-1,) + action_shape)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), adv.reshape(-1), ret.reshape(-1)
        size = T * N
        mb = min(args.minibatch, size)
        for _ in range(args.epochs):
            perm = torch.randperm(size)
            for s in range(0, size - mb + 1, mb):
                i = perm[s:s + mb]
                d = model.dist(b_obs[i])
                logp = d.log_prob(b_act[i])
                ratio = torch.exp(logp - b_logp[i])
                A = b_adv[i]
                A = (A - A.mean()) / (A.std() + 1e-8)
                pg = -torch.min(ratio * A, torch.clamp(ratio, 1 - args.clip, 1 + args.clip) * A)
                v_loss = 0.5 * ((model.value(b_obs[i]) - b_ret[i]) ** 2).mean()
                ent = d.entropy().mean()
                loss = pg.mean() + args.vf_coef * v_loss - args.ent_coef * ent
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                opt.step()
        updates += 1
        curves.add(steps, charts__last20_return=last20(env.episode_returns) if
                   env.episode_returns else None,
                   charts__steps_per_s=steps / (time.monotonic() - t0),
                   charts__lr=opt.param_groups[0]["lr"], losses__policy=pg.mean().item(),
                   losses__value=v_loss.item(), losses__entropy=ent.item())

        now = time.monotonic()
        mean20 = last20(env.episode_returns)
        reached = (args.target is not None and len(env.episode_returns) >= 20
                   and mean20 >= args.target)
        if now - last_log >= args.log_interval or reached or update == num_updates - 1:
            last_log = now
            print(f"steps {steps:7d}  episodes {len(env.episode_returns):5d}  "
                  f"last-20 return {mean20:8.1f}  {steps / (now - t0):7.0f} steps/s  "
                  f"{now - t0:6.1f} s", flush=True)
        if reached:
            break
    curves.close()
    return steps, updates, reached, time.monotonic() - t0


class Curves:
    """Training curves for TensorBoard (``--tensorboard DIR``) through
    torch.utils.tensorboard's SummaryWriter, x axis the env steps; does
    nothing without a directory."""

    def __init__(self, logdir):
        self.w = None
        if logdir:
            from torch.utils.tensorboard import SummaryWriter
            self.w = SummaryWriter(logdir)

    def add(self, step, **values):
        """One point of each named curve ("charts/return" style names)."""
        if self.w is None:
            return
        for name, v in values.items():
            if v is not None and np.isfinite(v):
                self.w.add_scalar(name.replace("__", "/"), float(v), step)

    def close(self):
        if self.w is not None:
            self.w.close()


def save_policy(path, actor, obs_dim, action_kind, action_dim, version, log_std=None):
    """Write the actor (a Sequential of Linear and Tanh) as a PolicyParams
    file that `rollout-node --policy FILE` runs (docs/policy.md)."""
    pb = rc.pb2()
    p = pb.PolicyParams(format_version=1, activation="tanh", obs_dim=obs_dim,
                        action_kind=action_kind, action_dim=action_dim, version=version)
    for lin in (m for m in actor if isinstance(m, nn.Linear)):
        L = p.layers.add()
        L.weight.shape.extend(lin.weight.shape)
        L.weight.data.extend(lin.weight.detach().reshape(-1).tolist())
        L.bias.shape.extend(lin.bias.shape)
        L.bias.data.extend(lin.bias.detach().tolist())
    if log_std is not None:
        p.log_std.shape.append(action_dim)
        p.log_std.data.extend(log_std.detach().reshape(-1).tolist())
    with open(path, "wb") as f:
        f.write(rc.encode_frame(p.SerializeToString()))


def result(args, steps, updates, reached, wall, returns, num_envs, addresses, extra=None):
    """Print the JSON result line (the last line of every example's output);
    returns the exit status: 0 when the target was reached (or none set)."""
    mean20 = last20(returns)
    out = {"steps": steps, "wall_s": round(wall, 2),
           "last20_mean_return": mean20 if np.isfinite(mean20) else None,
           "episodes": len(returns), "updates": updates, "target": args.target,
           "reached_target": bool(reached), "num_envs": num_envs,
           "nodes": list(addresses), "seed": args.seed}
    out.update(extra or {})
    print(json.dumps(out), flush=True)
    return 0 if reached or args.target is None else 1


def report(args, env, node, steps, updates, reached, wall, extra=None):
    """Close the env (and a launched node), print the JSON result line;
    returns the exit status."""
    env.close("ppo done")
    if node is not None:
        node.stop()
    return result(args, steps, updates, reached, wall, env.episode_returns, env.num_envs,
                  [i.address for i in env.nodes], extra)
