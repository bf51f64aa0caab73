#!/usr/bin/python3
"""Asynchronous PPO (APPO) on CartPole, learning from stream nodes.

A stream node acts with its own copy of the policy and streams every
transition; this learner trains on the segments and pushes new weights back:

    build/rollout-node --env cartpole --num-envs 64 --learner stream \\
        --listen 127.0.0.1:5555 --unroll 16 --seconds 0 &
    /usr/bin/python3 python/examples/appo_cartpole.py --node 127.0.0.1:5555

or let it start its own node: ``appo_cartpole.py --launch 64``.

The node never waits for this learner's forward passes: it runs the actor
(the same 64-64 tanh MLP as ppo_cartpole.py's, in C) on its envs and sends
[T, N] segments, each step stamped with the policy version that chose its
action and that action's log-probability. Segments are stale by the few
updates they spent in flight, so the learner corrects for it with V-trace
(Espeholt et al. 2018): per update it gathers --batch transitions, computes
pi_old, its own policy's log-probabilities of the actions taken, the
truncated importance weights rho = min(1, pi_old / mu) against the node's
behaviour log-probabilities mu, and the V-trace value targets vs with
c = lambda * min(1, rho) (GAE(lambda) when on-policy). The policy loss is
PPO's clipped surrogate on the ratio pi / pi_old with the V-trace advantage
vs - V (the decoupled form: rho corrects the lag, the clip bounds the
step), plus a value loss towards vs and an entropy bonus. A terminated step
is not bootstrapped, a truncated one bootstraps from V(final_obs), a
segment's last step from V(next_obs), and nothing crosses an episode end.
Every --push-every updates the actor goes back to the nodes as PolicyParams
with the next version.

Returns are those of the episodes that ended in the segments (episodes
already running when the learner attached are left out). It stops when the
last 20 average --target (or after --total-steps) and prints one JSON line
last, with ``wall_s`` from attaching to the last update.
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

from ppo_cartpole import ActorCritic  # noqa: E402  (the same network)

rc = pc.rc

DEFAULTS = dict(total_steps=2_000_000, target=475.0, quick_steps=500_000, quick_target=150.0,
                unroll=16, batch=1024, minibatch=512, epochs=2, lr=1e-3, gamma=0.98,
                gae_lambda=0.9, ent_coef=0.001)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    pc.connection_flags(ap, "start local stream nodes (rollout-node --learner stream) with this "
                            "many envs each instead of --node (rollout_client.launch_node)")
    ap.add_argument("--launch-nodes", type=int, default=1, metavar="K",
                    help="with --launch: how many nodes (default 1)")
    pc.run_flags(ap, DEFAULTS)
    ap.add_argument("--unroll", type=int, default=DEFAULTS["unroll"], metavar="T",
                    help="with --launch: steps per segment (the node's --unroll)")
    ap.add_argument("--shard", type=int, metavar="K",
                    help="with --launch: envs per segment (the node's --shard; default half "
                         "the envs, one shard per worker)")
    ap.add_argument("--batch", type=int, default=DEFAULTS["batch"],
                    help="transitions per update (whole segments; at least this many)")
    ap.add_argument("--window", type=int, default=0,
                    help="segments a node may have in flight to us (the hello's window; "
                         "default: the node's --stream-window, which --launch sets to twice the "
                         "segments of an update)")
    ap.add_argument("--max-policy-lag", type=int, default=0, metavar="K",
                    help="ask the nodes to drop segments more than K versions behind (default "
                         "0: keep all; V-trace corrects them)")
    ap.add_argument("--push-every", type=int, default=1, metavar="K",
                    help="push the actor to the nodes every K updates")
    ap.add_argument("--rho-clip", type=float, default=1.0,
                    help="V-trace: importance weights truncated at this (rho bar and c bar)")
    ap.add_argument("--check-logp", action="store_true",
                    help="keep the last 64 pushed actors and compare the nodes' log-probs "
                         "with theirs (a check that the node runs our network; costs time)")
    pc.loss_flags(ap, DEFAULTS)
    pc.output_flags(ap)
    args = pc.finish_args(ap, DEFAULTS, argv)
    for name in ("launch_nodes", "unroll", "batch", "minibatch", "epochs", "push_every"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.launch is not None and args.launch < 1:
        ap.error("--launch must be at least 1")
    return args


def launch(args):
    """Start --launch-nodes stream nodes with the learner's network shape."""
    shard = args.shard or max(1, args.launch // 2)
    per_update = -(-args.batch // (args.unroll * min(shard, args.launch)))
    window = args.window or max(8, 2 * per_update)
    nodes = []
    try:
        for i in range(args.launch_nodes):
            nodes.append(rc.launch_node(
                # One seed, node i its own streams (--node-index): K nodes, K different
                # experiences, all repeated by the same --seed.
                env="cartpole", num_envs=args.launch, seed=args.seed, node_index=i,
                learner="stream", token_file=args.token_file,
                extra_args=["--unroll", args.unroll, "--shard", shard, "--stream-window", window,
                            "--hidden", f"{args.hidden},{args.hidden}", "--activation", "tanh"]))
    except BaseException:
        for n in nodes:
            n.stop()
        raise
    return nodes


class Episodes:
    """Episode returns from the segments, per (node, env): a return counts
    from a first step (is_first) to a terminated or truncated step."""

    def __init__(self):
        self.returns = []
        self._running = {}  # node -> (running return [envs], whole episode [envs])

    def add(self, b):
        if b.node not in self._running:
            self._running[b.node] = (np.zeros(0), np.zeros(0, bool))
        run, whole = self._running[b.node]
        end = b.first_env + b.n
        if len(run) < end:  # first sight of these envs: they count from their next episode
            run = np.concatenate([run, np.zeros(end - len(run))])
            whole = np.concatenate([whole, np.zeros(end - len(whole), bool)])
            self._running[b.node] = (run, whole)
        cols = slice(b.first_env, end)
        first0 = b.is_first[0].astype(bool)
        base = np.where(first0, 0.0, run[cols])
        ok = whole[cols] | first0
        cs = np.cumsum(b.reward, axis=0, dtype=np.float64)
        done = b.terminated.astype(bool) | b.truncated.astype(bool)
        last = np.zeros(b.n)
        for t, n in zip(*np.nonzero(done)):  # row-major: in time order
            if ok[n]:
                self.returns.append(float(base[n] + cs[t, n] - last[n]))
            ok[n], base[n], last[n] = True, 0.0, cs[t, n]
        run[cols] = base + cs[-1] - last
        whole[cols] = ok


def merge(segs):
    """Segments with the same T as one [T, N] batch (envs side by side);
    final_index remapped to the merged flat t * N + n."""
    t = segs[0].t
    ns = [s.n for s in segs]
    offs = np.cumsum([0] + ns[:-1])
    n = sum(ns)
    cat = {k: np.concatenate([getattr(s, k) for s in segs], axis=1)
           for k in ("obs", "action", "logp", "reward", "terminated", "truncated")}
    cat["version"] = np.concatenate([np.repeat(s.policy_version.astype(np.int64)[:, None],
                                               s.n, axis=1) for s in segs], axis=1)
    cat["next_obs"] = np.concatenate([s.next_obs for s in segs])
    d = cat["obs"].shape[2]
    cat["final_obs"] = np.concatenate([s.final_obs.reshape(-1, d) for s in segs])
    cat["final_index"] = np.concatenate([
        (s.final_index.astype(np.int64) // s.n) * n + off + s.final_index % s.n
        for s, off in zip(segs, offs)])
    return t, n, cat


def vtrace(a, rho, rew, term, ended, v, nv):
    """V-trace advantages [T, N] of one group: rho the clipped importance
    ratios, v the values and nv the next steps' values ([T, N] each);
    term and ended the steps that ended an episode (terminated, or
    either)."""
    delta = rho * (rew + a.gamma * (~term).float() * nv - v)
    cont = a.gamma * (~ended).float() * (a.gae_lambda * rho)
    adv = torch.empty(v.shape)
    acc = torch.zeros(v.shape[1])
    for i in reversed(range(v.shape[0])):
        acc = delta[i] + cont[i] * acc
        adv[i] = acc
    return adv


class Learner:
    def __init__(self, args, model):
        self.args = args
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
        self.lag_sum = self.lag_rows = self.lag_max = 0
        self.logp_err = 0.0  # max |node's - learner's| log-prob (--check-logp)
        self.logp_err_rows = 0
        self.history = {}  # version -> a copy of the actor pushed with it (--check-logp)
        self.last_version = {}  # (node, shard) -> newest policy version seen
        self.regressions = 0    # a shard's segment older than one before it

    def check(self, segs):
        """Versions never go back within a shard; with --check-logp, the
        node's log-probs equal those of the actor we pushed as that version."""
        for b in segs:
            v = self.note_versions(b)
            if not self.args.check_logp:
                continue
            for ver in np.unique(v):
                actor = self.history.get(int(ver))
                if actor is None:
                    continue
                rows = v == ver
                with torch.no_grad():
                    logits = actor(torch.from_numpy(b.obs[rows]).reshape(-1, b.obs.shape[2]))
                    lp = torch.distributions.Categorical(logits=logits).log_prob(
                        torch.from_numpy(b.action[rows].reshape(-1)).long())
                err = (lp - torch.from_numpy(b.logp[rows].reshape(-1))).abs().max()
                self.logp_err = max(self.logp_err, float(err))
                self.logp_err_rows += int(lp.numel())

    def note_versions(self, b):
        """Counts segment b in regressions if its versions go back within
        its shard; returns them (int64 [T])."""
        key = (b.node, b.shard)
        v = b.policy_version.astype(np.int64)
        if (np.diff(v) < 0).any() or v[0] < self.last_version.get(key, 0):
            self.regressions += 1
        self.last_version[key] = int(v[-1])
        return v

    def note_lag(self, version, b):
        """Adds the policy lag of a merged group's rows to the statistics."""
        lag = version - torch.from_numpy(b["version"]).reshape(-1)
        self.lag_sum += int(lag.sum())
        self.lag_rows += len(lag)
        self.lag_max = max(self.lag_max, int(lag.max()))

    def ppo_step(self, d, logp, logp_old, adv, v, vs):
        """One gradient step of PPO's clipped loss on a minibatch: d the
        policy's distribution, logp its log-probs of the actions taken,
        adv the V-trace advantages (normalised here), v the values and vs
        their targets."""
        a = self.args
        ratio = torch.exp(logp - logp_old)
        A = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -torch.min(ratio * A, torch.clamp(ratio, 1 - a.clip, 1 + a.clip) * A)
        v_loss = 0.5 * ((v - vs) ** 2).mean()
        loss = pg.mean() + a.vf_coef * v_loss - a.ent_coef * d.entropy().mean()
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), a.max_grad_norm)
        self.opt.step()

    def pushed(self, version):
        if self.args.check_logp:
            self.history[version] = copy.deepcopy(self.model.actor)
            self.history.pop(version - 64, None)

    @torch.no_grad()
    def targets(self, t, n, b, version):
        """V-trace over one merged [T, N] group: flat tensors for the loss."""
        a = self.args
        obs = torch.from_numpy(b["obs"]).reshape(t * n, -1)
        act = torch.from_numpy(b["action"]).reshape(-1).long()
        mu = torch.from_numpy(b["logp"]).reshape(-1)
        rew = torch.from_numpy(b["reward"]).float()
        term = torch.from_numpy(b["terminated"]).bool()
        ended = term | torch.from_numpy(b["truncated"]).bool()
        allobs = torch.cat([obs, torch.from_numpy(b["next_obs"]),
                            torch.from_numpy(b["final_obs"])])
        vall = self.model.value(allobs)
        v = vall[:t * n].reshape(t, n)
        nv = torch.empty(t, n)
        nv[:-1] = v[1:]
        nv[-1] = vall[t * n:t * n + n]
        nv.view(-1)[torch.from_numpy(b["final_index"])] = vall[t * n + n:]
        logp_old = self.model.dist(obs).log_prob(act)
        self.note_lag(version, b)
        rho = torch.exp(logp_old - mu).clamp(max=a.rho_clip).reshape(t, n)
        adv = vtrace(a, rho, rew, term, ended, v, nv)
        vs = v + adv
        return obs, act, logp_old, adv.reshape(-1), vs.reshape(-1)

    def update(self, segs, version, lr):
        a = self.args
        self.check(segs)
        groups = {}
        for s in segs:
            groups.setdefault(s.t, []).append(s)
        parts = [self.targets(*merge(g), version) for g in groups.values()]
        obs, act, logp_old, adv, vs = (torch.cat(x) for x in zip(*parts))
        for g in self.opt.param_groups:
            g["lr"] = lr
        size = len(obs)
        mb = min(a.minibatch, size)
        for _ in range(a.epochs):
            perm = torch.randperm(size)
            for s in range(0, size - mb + 1, mb):
                i = perm[s:s + mb]
                d = self.model.dist(obs[i])
                self.ppo_step(d, d.log_prob(act[i]), logp_old[i], adv[i],
                              self.model.value(obs[i]), vs[i])


def actor_params(actor, version):
    """The actor as PolicyParams (torch's [out, in] layout, as the node takes it)."""
    layers = [(m.weight.detach().numpy(), m.bias.detach().numpy())
              for m in actor if isinstance(m, nn.Linear)]
    return rc.policy_params(layers, activation="tanh", action_kind="discrete", version=version)


def check_spaces(stream, addresses):
    """(obs_dim, actions): every node must have the first one's spaces."""
    w = stream.welcomes[0].spec
    for address, wi in zip(addresses, stream.welcomes):
        sp = wi.spec
        if (sp.action.kind != "discrete" or sp.action.n != w.action.n
                or list(sp.observation.shape) != list(w.observation.shape)):
            raise SystemExit(f"appo_cartpole: node {address} has {sp.action.kind} actions and "
                             f"observations {list(sp.observation.shape)}: every node needs the "
                             "first one's discrete action space and observation shape")
    return int(np.prod(w.observation.shape)), int(w.action.n)


def recv_batch(stream, batch):
    """Segments from the stream until they hold batch transitions: returns
    them, their transitions and the ConnectionClosed that ended them early
    (None when they are whole)."""
    segs, got = [], 0
    try:
        while got < batch:
            b = stream.recv(timeout=60)
            if b is None:
                raise TimeoutError("no segment from the nodes for 60 s")
            segs.append(b)
            got += b.num_transitions
    except rc.ConnectionClosed as e:
        return segs, got, e
    return segs, got, None


class Run:
    """The learning loop of the APPO examples (appo_recurrent.py's too):
    rounds of --batch transitions from the stream, an update each with the
    step size annealed over --total-steps, and the actor pushed (``params``:
    version -> its PolicyParams) every --push-every updates, until
    --total-steps, the --target or the end of the streams (``closed``, the
    ConnectionClosed that ended them)."""

    def __init__(self, args, stream, learner, params):
        self.args, self.stream, self.learner, self.params = args, stream, learner, params
        self.eps = Episodes()
        self.steps = self.updates = self.version = 0
        self.pushed = []
        self.reached = False
        self.closed = None
        self.mean20 = float("nan")
        self.push()  # version 1: the nodes start with their own seeded MLP, version 0

    def push(self):
        self.version += 1
        self.stream.push_policy(self.params(self.version))
        self.learner.pushed(self.version)
        self.pushed.append(self.version)

    def rounds(self):
        """Runs the loop, yielding each round's segments (none when the
        streams ended first) once its figures are in."""
        a = self.args
        anneal = max(1, a.anneal_steps)
        while self.steps < a.total_steps and not self.reached:
            segs, got, self.closed = recv_batch(self.stream, a.batch)
            for b in segs:
                self.eps.add(b)
            self.steps += got
            if segs:
                self.learner.update(segs, self.version,
                                    a.lr * max(0.0, 1.0 - self.steps / anneal))
                self.updates += 1
                if self.updates % a.push_every == 0 and self.closed is None:
                    self.push()
            self.mean20 = pc.last20(self.eps.returns)
            self.reached = (a.target is not None and len(self.eps.returns) >= 20
                            and self.mean20 >= a.target)
            yield segs
            if self.closed is not None:
                return


def last_version_shown(stream, version, learner, guard=60.0):
    """After the run: wait (at most guard seconds) until every node accepted
    our last push and a segment shows it chose actions; returns whether it
    did. Only the run's end waits so: within the run a push may be
    superseded before the node's lanes have used it."""
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        try:
            b = stream.recv(timeout=max(0.0, deadline - time.monotonic()))
        except rc.ConnectionClosed:
            return False
        if b is None:
            return False
        learner.check([b])
        if b.policy_version_max >= version:
            break
    while time.monotonic() < deadline:
        if all(stream.accepted_version(i) == version for i in range(len(stream.welcomes))):
            return True
        stream.pump(0.05)
    return False


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    nodes = launch(args) if args.launch is not None else []
    addresses = [n.address for n in nodes] or args.node
    try:
        stream = rc.Stream(addresses, name="appo_cartpole", window=args.window,
                           max_policy_lag=args.max_policy_lag,
                           connect_timeout=args.connect_timeout, **pc.token_args(args))
        obs_dim, n_act = check_spaces(stream, addresses)
    except BaseException:
        if "stream" in locals():
            stream.close("wrong spaces")
        for n in nodes:
            n.stop()
        raise
    t0 = time.monotonic()
    w = stream.welcomes[0]
    num_envs = sum(wi.spec.num_envs for wi in stream.welcomes)
    model = ActorCritic(obs_dim, n_act, args.hidden)
    learner = Learner(args, model)
    print(f"appo: {len(addresses)} stream node(s) {', '.join(addresses)}: {w.spec.env}, "
          f"{num_envs} envs, unroll {w.unroll}, window {w.window}; batch {args.batch}, "
          f"{args.epochs} epochs of {args.minibatch}, push every {args.push_every}", flush=True)
    run = Run(args, stream, learner, lambda version: actor_params(model.actor, version))
    seen = set()  # versions that chose some streamed action
    last_log = t0
    curves = pc.Curves(args.tensorboard)
    for segs in run.rounds():
        for b in segs:
            seen.update(np.unique(b.policy_version).tolist())
        now, steps, mean20 = time.monotonic(), run.steps, run.mean20
        if segs:
            curves.add(steps, charts__last20_return=mean20 if run.eps.returns else None,
                       charts__steps_per_s=steps / (now - t0), charts__policy_version=run.version,
                       charts__policy_lag=learner.lag_sum / max(1, learner.lag_rows))
        if now - last_log >= args.log_interval or run.reached or run.closed is not None:
            last_log = now
            lag = learner.lag_sum / max(1, learner.lag_rows)
            print(f"steps {steps:7d}  episodes {len(run.eps.returns):5d}  "
                  f"last-20 return {mean20:8.1f}  {steps / (now - t0):7.0f} steps/s  "
                  f"{now - t0:6.1f} s  updates {run.updates}  lag {lag:.2f}", flush=True)
    if run.closed is not None:
        print(f"appo: the nodes closed their streams ({run.closed})", flush=True)
    curves.close()
    wall = time.monotonic() - t0
    shown = run.closed is None and last_version_shown(stream, run.version, learner)
    accepted = [stream.accepted_version(i) for i in range(len(addresses))]
    stream.close("appo done")
    summaries = []
    for n in nodes:
        code = n.stop()
        s = n.summary() or {}
        summaries.append({"exit": code, **{k: s.get(k) for k in (
            "steps", "policy_pushes", "policy_version", "stream_segments_dropped_lag")}})
    if args.save_policy:
        pc.save_policy(args.save_policy, model.actor, obs_dim, "discrete", n_act, run.version)
    seen |= set(learner.last_version.values())
    print(f"appo: {'reached' if run.reached else 'did not reach'} a last-20 mean return of "
          f"{args.target} ({pc.last20(run.eps.returns):.1f}) in {wall:.2f} s and {run.steps} "
          f"env steps, {run.updates} updates", flush=True)
    extra = {"criterion": "last20", "versions_pushed": len(run.pushed),
             "last_version": run.version, "accepted_versions": accepted,
             "last_version_shown": shown, "versions_seen": len(seen - {0}),
             "foreign_versions": sorted(seen - set(run.pushed) - {0})[:20],
             "version_regressions": learner.regressions,
             "lag_mean": round(learner.lag_sum / max(1, learner.lag_rows), 3),
             "lag_max": learner.lag_max, "logp_err_max": learner.logp_err,
             "logp_err_rows": learner.logp_err_rows, "node_summaries": summaries}
    return pc.result(args, run.steps, run.updates, run.reached, wall, run.eps.returns, num_envs,
                     addresses, extra)


if __name__ == "__main__":
    sys.exit(main())
