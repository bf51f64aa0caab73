"""FakeNode: the node side of the learner protocol in Python, for tests.

A real TCP server on 127.0.0.1 (its own thread) that serves one learner
connection at a time: it checks the hello, sends a welcome, then steps
``num_envs`` CartPole-v1 envs (the classic dynamics, auto-reset as in
docs/env-api.md) in ``groups`` batches of envs, each batch sent as soon as
its previous actions arrive. Unanswered batches are sent again, with fresh
seqs, to the next learner that connects. It is a test double: it is not the
node, and it is not fast.
"""
import socket
import threading

import numpy as np

from . import _proto
from .framing import FrameDecoder, encode_frame
from .launch import NodeProcess  # noqa: F401  (the real node for tests: the one launcher)

_G, _MCART, _MPOLE, _HALF_LEN, _FORCE, _TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
_X_LIMIT, _THETA_LIMIT = 2.4, 12 * 2 * np.pi / 360


class CartPoles:
    """``n`` CartPole-v1 envs stepped together, with auto-reset."""

    def __init__(self, n, seed=0, max_episode_steps=500):
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, (n, 4))
        self.t = np.zeros(n, np.int64)
        self.steps = np.zeros(n, np.int64)
        self.max_episode_steps = max_episode_steps

    def step(self, idx, actions, held=None):
        """Step envs idx (not those ``held`` marks: Actions.hold, their
        first observation again); returns (obs, reward, terminated,
        truncated, episode_start, final_obs rows or NaN)."""
        if held is not None and held.any():
            out = [np.empty((len(idx), 4)), np.zeros(len(idx)), np.zeros(len(idx), bool),
                   np.zeros(len(idx), bool), np.ones(len(idx), bool),
                   np.full((len(idx), 4), np.nan)]
            out[0][held] = self.state[idx[held]]
            if (~held).any():
                for k, v in enumerate(self.step(idx[~held], np.asarray(actions)[~held])):
                    out[k][~held] = v
            return tuple(out)
        x, x_dot, th, th_dot = self.state[idx].T
        force = np.where(np.asarray(actions) == 1, _FORCE, -_FORCE)
        cos, sin = np.cos(th), np.sin(th)
        total = _MCART + _MPOLE
        pml = _MPOLE * _HALF_LEN
        tmp = (force + pml * th_dot ** 2 * sin) / total
        th_acc = (_G * sin - cos * tmp) / (_HALF_LEN * (4.0 / 3.0 - _MPOLE * cos ** 2 / total))
        x_acc = tmp - pml * th_acc * cos / total
        x = x + _TAU * x_dot
        x_dot = x_dot + _TAU * x_acc
        th = th + _TAU * th_dot
        th_dot = th_dot + _TAU * th_acc
        new = np.stack([x, x_dot, th, th_dot], 1)
        self.t[idx] += 1
        self.steps[idx] += 1
        terminated = (np.abs(x) > _X_LIMIT) | (np.abs(th) > _THETA_LIMIT)
        truncated = self.t[idx] >= self.max_episode_steps if self.max_episode_steps else \
            np.zeros(len(idx), bool)
        done = terminated | truncated
        final = np.where(done[:, None], new, np.nan)
        fresh = self.rng.uniform(-0.05, 0.05, (len(idx), 4))
        new = np.where(done[:, None], fresh, new)
        self.state[idx] = new
        self.t[idx] = np.where(done, 0, self.t[idx])
        return new, np.ones(len(idx)), terminated, truncated, done, final

    def restart(self, idx, seed=None):
        """A learner's Reseed: envs idx start new episodes (from a fresh
        random stream of seed when given); returns their first batch."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        z = len(idx)
        self.state[idx] = self.rng.uniform(-0.05, 0.05, (z, 4))
        self.t[idx] = 0
        return (idx, self.state[idx].copy(), np.zeros(z), np.zeros(z, bool), np.zeros(z, bool),
                np.ones(z, bool), np.full((z, 4), np.nan))


class FakeNode:
    """``with FakeNode(num_envs=8) as node: Client(node.address)``.

    Options: ``token`` (required in the hello when set), ``groups``
    (batches per round), ``shuffle`` (env order inside a batch),
    ``protocol_version`` (announced in the welcome), ``max_steps`` (total
    env steps, then goodbye and close), ``max_frame`` (frames from the
    learner larger than this get Frame{error} 90), ``host`` (the address
    to listen on, e.g. "::1"), ``obs_dtype`` (the observation dtype
    declared in the welcome; for an integer dtype the observations sent are
    the CartPole state times 100, rounded and clipped to the dtype's
    range), ``node_seed`` and ``node_index`` (the seed and node index
    announced in the welcome), ``node_id`` (the welcome's), ``unix_path``
    (listen on a Unix-domain socket there instead of TCP), ``offer``
    ((path, nonce, node_id): a hello that asks for the same-host upgrade
    gets this Frame{upgrade} instead of a welcome, whatever it says; with
    ``offer_unasked`` every hello does).
    """

    def __init__(self, num_envs=8, groups=2, token="", seed=0, shuffle=True,
                 protocol_version=1, max_steps=0, max_frame=1 << 20, max_episode_steps=500,
                 host="127.0.0.1", obs_dtype="", node_seed=7, node_index=0, node_id=1234,
                 unix_path=None, offer=None, offer_unasked=False):
        self.pb = _proto.load()
        self.num_envs, self.groups, self.token = num_envs, groups, token
        self.shuffle, self.protocol_version = shuffle, protocol_version
        self.max_steps, self.max_frame = max_steps, max_frame
        self.max_episode_steps = max_episode_steps
        self.obs_dtype, self.node_seed = obs_dtype, node_seed
        self.node_index, self.node_id = node_index, node_id
        self.offer, self.offer_unasked = offer, offer_unasked
        self.envs = CartPoles(num_envs, seed, max_episode_steps)
        self.rng = np.random.default_rng(seed + 1)
        if unix_path is not None:
            self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.srv.bind(unix_path)
            self.srv.listen()
            self.address = "unix:" + unix_path
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.srv = socket.create_server((host, 0), family=family)
            port = self.srv.getsockname()[1]
            self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.actions = []      # (env indices, actions) of every answer, in order
        self.hellos = []       # every Hello received
        self.errors_sent = []  # (code, message)
        self.learner_errors = []  # Error frames received from learners
        self.goodbyes = []     # reasons received
        self.steps = 0
        self._pending = {}     # env group key -> (env indices, obs rows...) awaiting actions
        self._first = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    # -- frames ---------------------------------------------------------------
    def _send(self, sock, **body):
        f = self.pb.Frame()
        (kind, msg), = body.items()
        getattr(f, kind).CopyFrom(msg)
        sock.sendall(encode_frame(f.SerializeToString()))

    def _error(self, sock, code, message):
        self.errors_sent.append((code, message))
        self._send(sock, error=self.pb.Error(code=code, message=message))

    def _welcome(self):
        pb = self.pb
        spec = pb.EnvSpec(env="cartpole", num_envs=self.num_envs,
                          max_episode_steps=self.max_episode_steps)
        spec.observation.kind = "box"
        spec.observation.shape.append(4)
        spec.observation.dtype = self.obs_dtype
        spec.action.kind = "discrete"
        spec.action.n = 2
        return pb.Welcome(protocol_version=self.protocol_version, node_id=self.node_id, spec=spec,
                          seed=self.node_seed, max_frame=self.max_frame,
                          node_index=self.node_index)

    # -- serving --------------------------------------------------------------
    def _serve(self):
        self.srv.settimeout(0.1)
        while not self._stop.is_set():
            try:
                sock, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with sock:
                try:
                    self._session(sock)
                except (OSError, ValueError):
                    pass

    def _frames(self, sock, dec):
        """Yield frames from sock until EOF or stop."""
        sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            for fr in dec.feed(data):
                f = self.pb.Frame()
                f.ParseFromString(fr)
                yield f

    def _session(self, sock):
        dec = FrameDecoder(self.max_frame)
        frames = self._frames(sock, dec)
        try:
            hello = next(frames)
        except StopIteration:
            return
        except Exception as e:  # a too-large frame or undecodable bytes
            self._error(sock, 90 if "exceeds" in str(e) else 71, str(e))
            return
        if hello.WhichOneof("body") != "hello":
            self._error(sock, 71, "expected hello")
            return
        self.hellos.append(hello.hello)
        if hello.hello.protocol_version != 1:
            self._error(sock, 71, f"protocol version {hello.hello.protocol_version} unsupported")
            return
        if self.token and hello.hello.token != self.token:
            self._error(sock, 13, "wrong token")
            return
        if self.offer is not None and (hello.hello.upgrade or self.offer_unasked):
            path, nonce, node_id = self.offer
            self._send(sock, upgrade=self.pb.Upgrade(path=path, nonce=nonce, node_id=node_id))
            for f in frames:  # until the learner closes this connection
                if f.WhichOneof("body") == "error":
                    self.learner_errors.append(f.error)
            return
        self._send(sock, welcome=self._welcome())
        seq = 0
        outstanding = {}  # seq -> env indices
        groups = list(self._pending.values()) if self._pending else None
        self._pending = {}
        if groups is None:
            if self._first:
                self._first = False
                order = np.arange(self.num_envs)
                groups = []
                for g in np.array_split(order, self.groups):
                    z = len(g)
                    groups.append((g, self.envs.state[g].copy(), np.zeros(z), np.zeros(z, bool),
                                   np.zeros(z, bool), np.ones(z, bool), np.full((z, 4), np.nan)))
            else:
                groups = []
        for grp in groups:
            seq += 1
            outstanding[seq] = self._send_obs(sock, seq, grp)
        try:
            for f in frames:
                kind = f.WhichOneof("body")
                if kind == "goodbye":
                    self.goodbyes.append(f.goodbye.reason)
                    break
                if kind == "error":
                    self.learner_errors.append(f.error)
                    break
                if kind == "reseed":  # every batch awaiting an answer starts over
                    seed = f.reseed.seed if f.reseed.has_seed else None
                    waiting, outstanding = list(outstanding.values()), {}
                    for grp in waiting:
                        seq += 1
                        outstanding[seq] = self._send_obs(sock, seq,
                                                          self.envs.restart(grp[0], seed))
                        seed = None  # one stream for the node, as its envs share it
                    continue
                if kind != "actions":
                    self._error(sock, 71, f"unexpected {kind}")
                    break
                a = f.actions
                grp = outstanding.pop(a.seq, None)
                if grp is None:
                    self._error(sock, 71, f"actions for unknown seq {a.seq}")
                    break
                idx = grp[0]
                if len(a.discrete) != len(idx) or any(v not in (0, 1) for v in a.discrete):
                    self._error(sock, 71, f"seq {a.seq}: bad actions {list(a.discrete)}")
                    break
                held = np.isin(idx, np.array(a.hold, np.int64))
                if int(held.sum()) != len(set(a.hold)):
                    self._error(sock, 71, f"actions for seq {a.seq} hold an env not in it")
                    break
                self.actions.append((idx.copy(), np.array(a.discrete)))
                out = self.envs.step(idx, np.array(a.discrete), held)
                self.steps += len(idx)
                if self.max_steps and self.steps >= self.max_steps:
                    self._send(sock, goodbye=self.pb.Goodbye(reason="steps done"))
                    return
                seq += 1
                outstanding[seq] = self._send_obs(sock, seq, (idx, *out))
        except Exception as e:
            if "exceeds" in str(e):
                self._error(sock, 90, str(e))
            else:
                raise
        finally:
            # What the learner did not answer goes to the next learner.
            for i, grp in enumerate(outstanding.values()):
                self._pending[i] = grp

    def _wire_obs(self, obs):
        """Observations as sent: float32, or for an integer obs_dtype the
        state x 100, rounded and clipped to the dtype's range."""
        obs = np.asarray(obs, np.float64)
        if self.obs_dtype and np.dtype(self.obs_dtype).kind in "iu":
            info = np.iinfo(np.dtype(self.obs_dtype))
            obs = np.clip(np.round(obs * 100), info.min, info.max)
        return obs.astype(np.float32)

    def _send_obs(self, sock, seq, grp):
        """Send one batch (env order shuffled when asked); return the
        batch's arrays in the order sent, which is the actions' order."""
        order = self.rng.permutation(len(grp[0])) if self.shuffle else np.arange(len(grp[0]))
        grp = tuple(np.asarray(x)[order] for x in grp)
        idx, obs, reward, term, trunc, start, final = grp
        m = self.pb.Observations(seq=seq)
        m.env.extend(int(i) for i in idx)
        m.step.extend(int(s) for s in self.envs.steps[idx])
        m.obs.extend(self._wire_obs(obs).reshape(-1).tolist())
        m.reward.extend(np.asarray(reward, np.float32).tolist())
        m.terminated.extend(bool(v) for v in term)
        m.truncated.extend(bool(v) for v in trunc)
        m.episode_start.extend(bool(v) for v in start)
        for pos in range(len(idx)):
            if not np.isnan(final[pos]).any():
                m.final_index.append(pos)
                m.final_obs.extend(self._wire_obs(final[pos]).tolist())
        self._send(sock, observations=m)
        return grp

    def close(self):
        self._stop.set()
        self.srv.close()
        self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

