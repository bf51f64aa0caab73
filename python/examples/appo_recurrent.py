#!/usr/bin/python3
"""APPO with a GRU on partially observed CartPole, learning from stream nodes.

CartPole with ``--env-arg observe_velocity=false`` observes only the cart's
position and the pole's angle: a memoryless policy cannot tell which way
the pole is falling. The nodes act with the same network as this learner's
actor, a 64-64 tanh MLP then a GRU cell (``rollout-node --recurrent
gru:H``) then the logits, keeping each env's state and zeroing it at every
episode start; each segment they stream carries its rows' states before
its first step (``batch.state["h"]``) and ``is_first``:

    /usr/bin/python3 python/examples/appo_recurrent.py --launch 64

The learner is appo_cartpole.py's (V-trace targets, PPO's clipped loss,
pushes every --push-every updates) with the unroll made recurrent: for each
[T, N] group of segments it runs the GRU from the segments' ``state/h``
over the T steps, zeroing the rows where ``is_first`` is set, as the node
did; the critic is a value head on the same GRU state. A truncated
episode's final observation is valued from the state after its last step,
a segment's next observation from the state after the segment. Gradients
flow through the whole segment (backpropagation through time over T
steps); each minibatch is a set of envs' whole sequences.

``--recurrent none`` runs appo_cartpole.py's MLP learner on the same task
(the baseline that stays far from 475). ``--check-state`` keeps the last 64
pushed actors and replays each segment with the actors of its steps'
versions from its ``state/h``: the node's log-probabilities must be theirs
(the state handling checked end to end). It stops when the last 20
episodes average --target (or after --total-steps) and prints one JSON line
last.
"""
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppo_common as pc  # noqa: E402  (before torch: one thread)

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import appo_cartpole as ac  # noqa: E402  (Episodes, merge, the MLP learner)
from ppo_cartpole import ActorCritic  # noqa: E402

rc = pc.rc

DEFAULTS = dict(total_steps=3_000_000, target=475.0, quick_steps=200_000, quick_target=None,
                unroll=16, batch=4096, minibatch=512, epochs=2, lr=5e-4, gamma=0.99,
                gae_lambda=0.95, ent_coef=0.001)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    pc.connection_flags(ap, "start a local stream node with this many envs instead of --node")
    pc.run_flags(ap, DEFAULTS)
    ap.add_argument("--recurrent", default="gru:64", metavar="gru:H|none",
                    help="the actor's cell (default gru:64); none: appo_cartpole's MLP")
    ap.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                    help="with --launch: cartpole's args (default observe_velocity=false)")
    ap.add_argument("--unroll", type=int, default=DEFAULTS["unroll"], metavar="T",
                    help="with --launch: steps per segment")
    ap.add_argument("--batch", type=int, default=DEFAULTS["batch"],
                    help="transitions per update (whole segments)")
    ap.add_argument("--window", type=int, default=0, help="segments in flight (0: the node's)")
    ap.add_argument("--max-policy-lag", type=int, default=0, metavar="K",
                    help="ask the nodes to drop segments more than K versions behind")
    ap.add_argument("--push-every", type=int, default=1, metavar="K")
    ap.add_argument("--rho-clip", type=float, default=1.0)
    ap.add_argument("--check-state", action="store_true",
                    help="replay each segment from its state/h with the pushed actors of its "
                         "versions: the node's log-probs must be theirs")
    ap.add_argument("--check-logp", action="store_true", help=argparse.SUPPRESS)
    pc.loss_flags(ap, DEFAULTS)
    pc.output_flags(ap)
    args = pc.finish_args(ap, DEFAULTS, argv)
    kind, _, hid = args.recurrent.partition(":")
    if args.recurrent != "none" and (kind != "gru" or not hid.isdigit() or
                                     not 1 <= int(hid) <= 512):
        ap.error("--recurrent: expected gru:H (H in 1..512) or none")
    args.cell_hidden = int(hid) if args.recurrent != "none" else 0
    args.env_arg = args.env_arg or ["observe_velocity=false"]
    args.check_logp = args.check_state  # the MLP learner's own check
    return args


class RecurrentActorCritic(nn.Module):
    """The node's network (torso, GRU, logits) and a critic: its own MLP
    over the observation and the GRU's state, which it reads but does not
    train (the value loss would otherwise pull the actor's features, as a
    shared trunk does). step() is one step of every row; unroll() a [T, N]
    sequence."""

    def __init__(self, obs_dim, n_actions, hidden, cell_hidden):
        super().__init__()
        g = np.sqrt(2.0)
        self.torso = nn.Sequential(pc.layer(obs_dim, hidden, g), nn.Tanh(),
                                   pc.layer(hidden, hidden, g), nn.Tanh())
        self.cell = nn.GRUCell(hidden, cell_hidden)
        self.pi = pc.layer(cell_hidden, n_actions, 0.01)
        self.critic = pc.mlp(obs_dim + cell_hidden, hidden, 1, 1.0)

    def value(self, obs, h):
        return self.critic(torch.cat([obs, h.detach()], -1)).squeeze(-1)

    def step(self, obs, h, first):
        """obs [N, obs_dim], h [N, H], first [N] bool: the new h."""
        return self.cell(self.torso(obs), torch.where(first[:, None], torch.zeros_like(h), h))

    def unroll(self, obs, h, first):
        """obs [T, N, d], h [N, H] before step 0, first [T, N]: the states
        after each step [T, N, H]."""
        hs = []
        for t in range(obs.shape[0]):
            h = self.step(obs[t], h, first[t])
            hs.append(h)
        return torch.stack(hs)

    def params(self, version):
        """The actor as a format-3 PolicyParams (rollout-node --recurrent)."""
        lin = [m for m in self.torso if isinstance(m, nn.Linear)] + [self.pi]
        c = self.cell
        return rc.policy_params(
            [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in lin],
            activation="tanh", action_kind="discrete", version=version,
            cell=("gru", c.weight_ih.detach().numpy(), c.weight_hh.detach().numpy(),
                  c.bias_ih.detach().numpy(), c.bias_hh.detach().numpy()))


def group(segs):
    """Segments of one T side by side (appo_cartpole.merge) with their
    states and is_first."""
    t, n, b = ac.merge(segs)
    b["h0"] = np.concatenate([s.state["h"] for s in segs])
    b["first"] = np.concatenate([s.is_first for s in segs], axis=1).astype(bool)
    return t, n, b


class RecurrentLearner(ac.Learner):
    """appo_cartpole's Learner (its statistics, version checks and PPO
    step) over a recurrent model: history holds the models pushed
    (--check-state)."""

    def pushed(self, version):
        if self.args.check_state:
            self.history[version] = copy.deepcopy(self.model)
            self.history.pop(version - 64, None)

    @torch.no_grad()
    def check(self, segs):
        """Versions never go back within a shard; --check-state: the node's
        log-probs are those of the pushed actors unrolled from state/h."""
        for b in segs:
            v = self.note_versions(b)
            if not self.args.check_state or any(int(x) not in self.history for x in v):
                continue
            h = torch.from_numpy(b.state["h"].copy())
            first = torch.from_numpy(b.is_first.astype(bool))
            for t in range(b.t):
                actor = self.history[int(v[t])]
                h = actor.step(torch.from_numpy(b.obs[t].copy()), h, first[t])
                lp = torch.distributions.Categorical(logits=actor.pi(h)).log_prob(
                    torch.from_numpy(b.action[t].astype(np.int64)))
                err = (lp - torch.from_numpy(b.logp[t].copy())).abs().max()
                self.logp_err = max(self.logp_err, float(err))
                self.logp_err_rows += b.n

    def forward(self, t, n, b):
        """The unroll of a group: logits [T*N, A], values [T*N], and the
        values of next_obs [N] and final_obs [K]."""
        m = self.model
        obs = torch.from_numpy(b["obs"])
        nxt, fin = torch.from_numpy(b["next_obs"]), torch.from_numpy(b["final_obs"])
        first = torch.from_numpy(b["first"])
        hs = m.unroll(obs, torch.from_numpy(b["h0"]), first)
        ended = torch.from_numpy(b["terminated"] | b["truncated"]).bool()
        # next_obs: a new episode's first where the last step ended one
        h_next = m.step(nxt, hs[-1], ended[-1])
        fi = torch.from_numpy(b["final_index"])
        h_fin = m.step(fin, hs.reshape(t * n, -1)[fi], torch.zeros(len(fi), dtype=torch.bool))
        v = m.value(torch.cat([obs.reshape(t * n, -1), nxt, fin]),
                    torch.cat([hs.reshape(t * n, -1), h_next, h_fin]))
        return m.pi(hs.reshape(t * n, -1)), v[:t * n], v[t * n:t * n + n], v[t * n + n:]

    @torch.no_grad()
    def targets(self, t, n, b, version):
        """V-trace over a group, as appo_cartpole.Learner.targets."""
        a = self.args
        logits, v, v_next, v_fin = self.forward(t, n, b)
        act = torch.from_numpy(b["action"]).reshape(-1).long()
        mu = torch.from_numpy(b["logp"]).reshape(-1)
        rew = torch.from_numpy(b["reward"]).float()
        term = torch.from_numpy(b["terminated"]).bool()
        ended = term | torch.from_numpy(b["truncated"]).bool()
        v = v.reshape(t, n)
        nv = torch.empty(t, n)
        nv[:-1] = v[1:]
        nv[-1] = v_next
        nv.view(-1)[torch.from_numpy(b["final_index"])] = v_fin
        logp_old = torch.distributions.Categorical(logits=logits).log_prob(act)
        self.note_lag(version, b)
        rho = torch.exp(logp_old - mu).clamp(max=a.rho_clip).reshape(t, n)
        adv = ac.vtrace(a, rho, rew, term, ended, v, nv)
        return logp_old.reshape(t, n), adv, v + adv

    def update(self, segs, version, lr):
        a = self.args
        self.check(segs)
        for g in self.opt.param_groups:
            g["lr"] = lr
        groups = {}
        for s in segs:
            groups.setdefault(s.t, []).append(s)
        for t, n, b in (group(g) for g in groups.values()):
            logp_old, adv, vs = self.targets(t, n, b, version)
            act = torch.from_numpy(b["action"]).long()
            cols = max(1, min(n, a.minibatch // t))  # whole sequences per minibatch
            for _ in range(a.epochs):
                perm = torch.randperm(n)
                for s in range(0, n, cols):
                    j = perm[s:s + cols].numpy()
                    sub = {k: b[k][:, j] for k in ("obs", "first", "terminated", "truncated")}
                    sub["h0"], sub["next_obs"] = b["h0"][j], b["next_obs"][j]
                    sub["final_obs"] = b["final_obs"][:0]
                    sub["final_index"] = b["final_index"][:0]
                    logits, v, _, _ = self.forward(t, len(j), sub)
                    d = torch.distributions.Categorical(logits=logits)
                    lp = d.log_prob(act[:, j].reshape(-1)).reshape(t, len(j))
                    self.ppo_step(d, lp, logp_old[:, j], adv[:, j], v.reshape(t, len(j)),
                                  vs[:, j])


def launch(args):
    """One stream node of partially observed CartPole with the actor's shape."""
    per_update = -(-args.batch // (args.unroll * args.launch))
    extra = ["--unroll", args.unroll, "--stream-window", args.window or max(8, 2 * per_update),
             "--hidden", f"{args.hidden},{args.hidden}", "--activation", "tanh"]
    if args.cell_hidden:
        extra += ["--recurrent", f"gru:{args.cell_hidden}"]
    env_args = dict(kv.split("=", 1) for kv in args.env_arg)
    return rc.launch_node(env="cartpole", num_envs=args.launch, seed=args.seed, learner="stream",
                          env_args=env_args, token_file=args.token_file, extra_args=extra)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    node = launch(args) if args.launch is not None else None
    addresses = [node.address] if node else args.node
    try:
        stream = rc.Stream(addresses, name="appo_recurrent", window=args.window,
                           max_policy_lag=args.max_policy_lag,
                           connect_timeout=args.connect_timeout, **pc.token_args(args))
        obs_dim, n_act = ac.check_spaces(stream, addresses)
        cell = stream.welcomes[0].recurrent
        if cell != (f"gru:{args.cell_hidden}" if args.cell_hidden else ""):
            raise SystemExit(f"appo_recurrent: the node's cell is {cell or 'none'!r}, we train "
                             f"{args.recurrent!r}: start it with the same --recurrent")
    except BaseException:
        if "stream" in locals():
            stream.close("wrong node")
        if node:
            node.stop()
        raise
    if args.cell_hidden:
        model = RecurrentActorCritic(obs_dim, n_act, args.hidden, args.cell_hidden)
        learner = RecurrentLearner(args, model)

        def params(version):
            return model.params(version)
    else:
        model = ActorCritic(obs_dim, n_act, args.hidden)
        learner = ac.Learner(args, model)

        def params(version):
            return ac.actor_params(model.actor, version)
    t0 = time.monotonic()
    w = stream.welcomes[0]
    print(f"appo_recurrent: {w.spec.env} {' '.join(args.env_arg)} ({obs_dim} observed), "
          f"{w.spec.num_envs} envs, unroll {w.unroll}; cell {args.recurrent}; batch "
          f"{args.batch}", flush=True)
    run = ac.Run(args, stream, learner, params)
    last_log = t0
    curve = []  # (steps, wall s, last-20 return) at each progress line
    for _ in run.rounds():
        now, steps, mean20 = time.monotonic(), run.steps, run.mean20
        if now - last_log >= args.log_interval or run.reached or run.closed is not None:
            last_log = now
            curve.append((steps, round(now - t0, 2), None if np.isnan(mean20) else mean20))
            print(f"steps {steps:8d}  episodes {len(run.eps.returns):6d}  last-20 return "
                  f"{mean20:7.1f}  {steps / (now - t0):6.0f} steps/s  {now - t0:7.1f} s  "
                  f"updates {run.updates}", flush=True)
    wall = time.monotonic() - t0
    accepted = stream.accepted_version(0)
    stream.close("appo_recurrent done")
    if node:
        node.stop()
    extra = {"criterion": "last20", "cell": args.recurrent, "env_args": args.env_arg,
             "versions_pushed": len(run.pushed), "last_version": run.version,
             "accepted_version": accepted, "version_regressions": learner.regressions,
             "lag_mean": round(learner.lag_sum / max(1, learner.lag_rows), 3),
             "logp_err_max": learner.logp_err, "logp_err_rows": learner.logp_err_rows,
             "best_last20": max((c[2] for c in curve if c[2] is not None), default=None),
             "curve": curve}
    return pc.result(args, run.steps, run.updates, run.reached, wall, run.eps.returns,
                     w.spec.num_envs, addresses, extra)


if __name__ == "__main__":
    sys.exit(main())
