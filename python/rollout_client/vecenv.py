"""VecEnv: the envs of one or more nodes as one Gymnasium vector env.

It follows ``gymnasium.vector.VectorEnv``: ``reset(seed=None, options=None)
-> (obs, infos)``, ``step(actions) -> (obs, rewards, terminations,
truncations, infos)``, ``num_envs``, ``single_observation_space``,
``single_action_space``, ``observation_space``, ``action_space``,
``metadata["autoreset_mode"]``, ``close()`` and ``with``. When gymnasium
(>= 1.0) is importable it *is* a ``gymnasium.vector.VectorEnv`` with
gymnasium spaces; gymnasium is never required (rollout_client.spaces).

Envs are ordered by (node index, env index): global env ``k`` is env
``k - offset[node]`` of its node. ``step(actions)`` answers every
outstanding batch with its slice of ``actions`` and waits until every env
has delivered its next transition.

Auto-reset, for step() and send()/recv() alike: Gymnasium's NEXT_STEP mode
by default (autoreset.py: the node holds an ended env for its reset step,
Actions.hold; the lane keeps the holds in C); SAME_STEP, the node's own
(docs/env-api.md), with ``autoreset_mode="same_step"``: the step that ends
an episode returns that episode's reward
and flags, the first observation of the next episode, and the ended
episode's last observation in ``infos["final_obs"]`` (mask
``infos["_final_obs"]``); DISABLED with ``autoreset_mode="disabled"``.
``reset(seed=S)`` / ``reset()`` any number of times, as Gymnasium's: env i
of a node is seeded from (S, its --node-index, i), as ``rollout-node --seed
S`` seeds it; a reset after the first is a Reseed to each node
(docs/protocol.md "Reseed"), which a node refuses while other learners
share it; an asynchronous VecEnv first waits for its envs in flight.

One implementation for both env ABIs (issue 30): an env ABI 1 node's
spaces are adapted to an env ABI 2 layout (vecenv_layout.py: one tensor
"obs", one agent), and every env is a row of that layout. Env ABI 2 nodes
(typed tensors, composite actions, masks, agents as rows) get
Gymnasium-shaped Dict / Tuple / MultiDiscrete / MultiBinary spaces
(docs/python.md "Env ABI 2 nodes"): observations as a dict of batched
arrays (or one array), ``infos["env_id"]`` and ``infos["agent_id"]`` say
which env and agent each row is, ``infos["action_mask"]`` which discrete
values each row may take, and ``step(actions)`` takes the action space's
batched form, refusing an out-of-range or masked action by name.

VecEnv needs to receive every env of its nodes; when other learners share a
node's envs it waits until ``timeout`` and raises TimeoutError naming the
envs that never came. Use :class:`Client` directly in that case.

Asynchronous stepping, EnvPool's way (vecenv_async.py): ``VecEnv(...,
batch_size=B)``, ``async_reset()`` (or ``reset()``), then ``recv()`` returns
the next B envs whose observation came in, with ``infos["env_id"]``, and
``send(actions, env_ids)`` answers them; the node steps those while the
policy works on the next batch (env ABI 2 nodes: over rows). A VecEnv is
synchronous (``step()``) or
asynchronous (``send()``/``recv()``), whichever is called first.
"""
import numbers
from typing import Any, Optional, Sequence, Union

import gymnasium
import numpy as np

from . import abi2, autoreset, remote_state, spaces
from .client import Client
from .hotpath import hot
from .errors import ConnectionClosed, ProtocolError
from .vecenv_actions import Actions
from .vecenv_async import AsyncMixin
from .vecenv_lane import LaneMixin
from .vecenv_layout import RowLayout


class VecEnv(AsyncMixin, LaneMixin, gymnasium.vector.VectorEnv):
    """``VecEnv(["127.0.0.1:7000"])``, ``VecEnv("host:7000")`` or
    ``VecEnv(client)``. ``timeout`` bounds each wait for observations, in
    seconds; ``clip_box`` clips box actions to the action space's bounds;
    ``batch_size`` is how many envs recv() returns (default num_envs);
    other keyword arguments go to :class:`Client` (``token_file``,
    ``connect_timeout``, ``name``, ...)."""

    render_mode = None
    spec = None

    def __init__(self, nodes, timeout=60.0, clip_box=True, batch_size=None,
                 autoreset_mode=None, **client_kwargs):
        self.closed = True  # until the connections exist (gymnasium's __del__ reads it)
        self._last_seen = None  # per row: the step last handed out (_mark_first)
        # Gymnasium's default, NEXT_STEP, for step() and send()/recv() alike.
        mode = "next_step" if autoreset_mode is None else autoreset.parse_mode(autoreset_mode)
        self.client = nodes if isinstance(nodes, Client) else Client(nodes, **client_kwargs)
        self.closed = False
        self.timeout = timeout
        self.clip_box = clip_box
        infos = self.client.nodes
        try:
            rows = RowLayout(infos)
        except ValueError:
            self.client.close("spaces differ")
            raise
        self._row_layout = rows
        self.layout = rows.abi2  # the nodes' env ABI 2 layout, None for env ABI 1 nodes
        self.nodes = infos
        self.agents = rows.agents
        self._actions = Actions(rows, clip_box)
        self._dict_obs = rows.dict_obs
        first = infos[0]
        if rows.abi1 is not None:  # an env ABI 1 node's own figures (the lane reads them)
            self.obs_shape = first.obs_shape
            self.obs_dim = first.obs_dim
            self.action_kind = first.action_kind
            self.action_n = first.action_n
            self.action_shape = first.action_shape
            self.action_size = first.action_size
        self._obs_dtype = rows.tensors[0][1]  # (the lane takes float32 alone)
        self.offsets = np.cumsum([0] + [i.num_envs for i in infos])
        self.num_envs = n = int(self.offsets[-1])
        self.metadata = {"autoreset_mode": spaces.same_step_mode()}
        self.single_observation_space = rows.single_observation_space
        self.single_action_space = rows.single_action_space
        self.observation_space = spaces.batch(self.single_observation_space, n)
        self.action_space = spaces.batch(self.single_action_space, n)
        # Row k: env (global, over the nodes' envs in order) and agent.
        self._agent_id = np.arange(n, dtype=np.int64) % rows.agents
        self._env_id = np.arange(n, dtype=np.int64) // rows.agents
        self._fresh()
        self._have = np.zeros(n, bool)
        self._outstanding = []  # (batch, its rows: a slice or global indices)
        self._ep_return = np.zeros(n, np.float64)
        self._ep_length = np.zeros(n, np.int64)
        self._started = False
        self.episode_returns = []  # every finished episode's return, in order seen
        self.episode_lengths = []
        self.total_steps = 0       # env transitions received after reset()
        try:
            self._async_init(batch_size)
        except ValueError:
            self.close("bad batch_size")
            raise
        self._autoreset_init(mode)

    def _autoreset_init(self, mode):
        """The autoreset mode: same-step (the node's own), or Gymnasium's
        NEXT_STEP or DISABLED shown over it (autoreset.py)."""
        self._disabled = autoreset.DisabledAutoreset(self.num_envs) \
            if mode == "disabled" else None
        # NEXT_STEP through the lane: its pending marks are the lane's holds
        # (vecenv_lane.py), kept in C.
        self._next = autoreset.NextStepAutoreset(self.num_envs) if mode == "next_step" else None
        self.metadata["autoreset_mode"] = autoreset.gym_mode(mode)

    def _hold_of(self, b, g):
        """NEXT_STEP: the node's env indices of frame b (rows g) whose step
        is their reset (Actions.hold: an env, all its rows), or None."""
        if self._next is None or not self._next.pending.any():
            return None
        rows = np.arange(g.start, g.stop) if isinstance(g, slice) else np.asarray(g, np.int64)
        held = self._next.held(rows) - int(self.offsets[b.node])
        if not len(held):
            return None
        return np.unique(held // self.agents) if self.agents > 1 else held

    def _label(self, k):
        """What row k is, for messages."""
        node = int(np.searchsorted(self.offsets, k, side="right")) - 1
        r = k - int(self.offsets[node])
        if self.layout is None:
            return f"env {k} (node {self.nodes[node].address} env {r})"
        return (f"env {int(self._env_id[k])} agent {int(self._agent_id[k])} (row {k}: node "
                f"{self.nodes[node].address} env {r // self.agents})")

    def env_ids(self) -> "list[tuple[int, int]]":
        """[(node index, env index)] in global order (env ABI 2: one per row, the
        node's row index)."""
        return [(i.index, e) for i in self.nodes for e in range(i.num_envs)]

    # -- the rows' arrays and what fills them -----------------------------------
    def _fresh(self):
        """New arrays for the next transitions, one per tensor of a row and
        per column: step() hands them out as they are (no copies), so they
        are never written again. _ingest writes every row of each frame."""
        n = self.num_envs
        self._t = {name: np.empty((n,) + shape, dt) for name, dt, shape in self._row_layout.tensors}
        self._final = {name: np.empty((n,) + shape, dt)
                       for name, dt, shape in self._row_layout.tensors}
        self._has_final = np.empty(n, bool)
        self._reward = np.empty(n, np.float32)
        self._flags = np.empty((3, n), bool)  # terminated, truncated, episode_start
        self._step = np.empty(n, np.uint64)
        w = self._row_layout.mask_width
        self._mask = np.ones((n, w), np.uint8) if w else None

    def _collect(self):
        """Receive until every row has one observation waiting."""
        have = self._have
        missing = self.num_envs - int(np.count_nonzero(have))
        while missing > 0:
            if len(self.client.open_nodes) != len(self.nodes):
                gone = [i.address for i in self.nodes if i.index not in self.client.open_nodes]
                raise ConnectionClosed(f"node(s) {', '.join(gone)} closed: this VecEnv "
                                       "cannot step their envs any more",
                                       clean=True, reason="node closed")
            b = self.client._recv_frame(self.timeout)  # views: copied below, at once
            if b is None:
                left = [self._label(int(k)) for k in np.flatnonzero(~have)[:4]]
                raise TimeoutError(
                    f"no observation for {missing} of {self.num_envs} envs "
                    f"after {self.timeout:g}s (first: {left}); is another "
                    "learner sharing these envs?")
            g = self._rows_of(b)
            if have[g].any():
                raise ProtocolError(f"node {self.nodes[b.node].address}: an env came twice "
                                    "before its action was answered")
            self._ingest(b, g)
            have[g] = True
            self._outstanding.append((b, g))
            missing -= len(b.env)

    def _rows_of(self, b):
        """Frame b's rows: a slice when they are one range in order, else
        global indices."""
        off = int(self.offsets[b.node])
        if b.env_range is not None:
            return slice(off + b.env_range[0], off + b.env_range[1])
        return off + b.env.astype(np.int64)

    def _ingest(self, b, g):
        """Frame b's transitions into the rows g, every column (a final
        observation or the fill, has_final). The one place that knows the
        wire's two forms: an env ABI 2 frame's tensors, or an env ABI 1
        frame's observations as the one tensor "obs" (vecenv_layout.py),
        from the frame or the node's shared memory."""
        if isinstance(b, abi2.Abi2Batch):
            self._put_rows(g, b.tensors, b.final_index, b.final_tensors)
            self._reward[g] = b.reward
            self._flags[:, g] = (b.terminated, b.truncated, b.episode_start)
            self._step[g] = b.step
            if self._mask is not None:
                self._mask[g] = b.mask
            return
        if b.in_memory:
            self._ingest_memory(b, g)
            return
        n = len(b.env)
        shape = self._row_layout.tensors[0][2]
        fin = b.final_obs.reshape((-1,) + shape) if len(b.final_index) else None
        self._put_rows(g, {"obs": b.obs.reshape((n,) + shape)}, b.final_index, {"obs": fin})
        self._reward[g] = b.reward
        self._flags[:, g] = b.flags
        self._step[g] = b.step
        b.obs = b.reward = b.final_obs = None  # views of the receive buffer: not kept

    def _put_rows(self, g, tensors, final_index, final_tensors):
        """Each tensor's rows, and the final ones where final_index says
        (the fill elsewhere: NaN, or 0 for integer dtypes)."""
        for name, a in tensors.items():
            self._t[name][g] = a
            f = self._final[name]
            f[g] = self._row_layout.fill(f.dtype)
        self._has_final[g] = False
        if len(final_index):
            rows = np.arange(g.start, g.stop)[final_index] if isinstance(g, slice) \
                else g[final_index]
            for name, a in final_tensors.items():
                self._final[name][rows] = a
            self._has_final[rows] = True

    def _ingest_memory(self, b, g):
        """An env ABI 1 frame whose columns are in the node's shared memory
        (docs/protocol.md): read once, straight into the rows' arrays, by
        _hotpath.take_frame (float32 observations, the node's memory's own
        dtype; other dtypes are converted here)."""
        mem = self.client._conns[b.node].mem
        n = self.num_envs
        obs, final = self._t["obs"].reshape(n, -1), self._final["obs"].reshape(n, -1)
        same = obs.dtype == np.float32
        try:
            hot.take_frame(b.ranges, int(self.offsets[b.node]), mem.obs, mem.final_obs,
                           mem.reward, mem.flags, mem.step, obs if same else None,
                           final if same else None, self._reward, self._flags, self._step,
                           self._has_final)
        except ValueError as e:  # the client checked the ranges: a bug if seen
            raise ProtocolError(f"node {self.nodes[b.node].address}: {e}") from None
        if not same:
            rows = slice(*b.env_range) if b.env_range is not None else b.env
            obs[g] = mem.obs[rows]
            final[g] = self._row_layout.fill(final.dtype)
            k = np.flatnonzero(self._has_final[g])
            if len(k):
                src = k + b.env_range[0] if b.env_range is not None else b.env[k]
                dst = k + g.start if isinstance(g, slice) else g[k]
                final[dst] = mem.final_obs[src]

    def _obs_of(self, arrays):
        """Observations as the space's batched form: one tensor's array, or
        a dict of them."""
        return arrays if self._dict_obs else next(iter(arrays.values()))

    def _infos(self, copy=False):
        """step()'s and reset()'s infos columns (copy: the caller's, for
        arrays a later frame would write)."""
        c = np.copy if copy else (lambda a: a)
        infos = {"step": c(self._step), "episode_start": c(self._flags[2])}
        if self.layout is not None:
            infos["env_id"] = self._env_id.copy()
            infos["agent_id"] = self._agent_id.copy()
            if self._mask is not None:
                infos["action_mask"] = c(self._mask)
        return infos

    def _check_open(self, what):
        if self.closed:
            raise RuntimeError(f"{what} on a closed VecEnv")

    def _check_seed(self, seed):
        """One int seed in [0, 2**64), or Gymnasium's list of one int or
        None per env (env ABI 2: per row, every row of an env the same):
        returned as a list of one per env, or None when all are None."""
        if isinstance(seed, (list, tuple, np.ndarray)):
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset(seed=[...]): {len(seeds)} seeds for {self.num_envs} "
                                 "envs: one int (or None) per env")
            if all(s is None for s in seeds):
                return None
            for k, s in enumerate(seeds):
                if s is not None:
                    self._one_seed(s, f"seed[{k}]")
            if self.layout is not None and self.agents > 1:
                a = self.agents
                if any(seeds[k] != seeds[k - k % a] for k in range(len(seeds))):
                    raise ValueError("reset(seed=[...]): the rows of an env (its agents) are one "
                                     "env, seeded once: give them the same seed")
                seeds = seeds[::a]
            return [None if s is None else int(s) for s in seeds]
        return self._one_seed(seed, "seed")

    @staticmethod
    def _one_seed(seed, what):
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or \
                not 0 <= int(seed) < 1 << 64:
            raise ValueError(f"reset({what}={seed!r}): a seed is an int in [0, 2**64)")
        return int(seed)

    def reset(self, *, seed: Union[int, Sequence[Optional[int]], None] = None,
              options: Optional["dict[str, Any]"] = None) -> "tuple[Any, dict[str, Any]]":
        """Start new episodes in every env; returns (obs, infos): obs
        [num_envs, *obs_shape]; infos["step"] each env's step count,
        infos["episode_start"] and infos["is_first"] (see step()).

        As Gymnasium's, any number of times: ``seed=S`` seeds env i of a
        node from (S, its --node-index, i), as ``rollout-node --seed S``
        does (a node that already runs with S and has not stepped is used
        as it is); ``seed=[s0, s1, ...]`` (one int or None per env) seeds
        env i of a node from (its own seed, i), as make_vec does for a
        list, None keeping that env's stream; ``seed=None`` the first time takes each env's first
        observation, and afterwards starts new episodes with the envs'
        random streams continuing. A later reset is a Reseed to every node
        (docs/protocol.md "Reseed"): each must have this VecEnv as its sole
        learner (a node shared with others refuses by name: RemoteError).
        Options: ``{"reset_mask": mask}`` with autoreset_mode "disabled"
        (autoreset.py); no other (ValueError)."""
        return self._mark_first(self._reset(seed, options))

    def _reset(self, seed, options):
        self._check_open("reset()")
        if self._disabled is not None and self._started and options and \
                set(options) == {"reset_mask"} and seed is None:
            obs = self._disabled.reset(options["reset_mask"], self.num_envs, self._label)
            # (no step columns: the rows reset are not all of them)
            infos = {k: v for k, v in self._infos(copy=True).items()
                     if k not in ("step", "episode_start")}
            return obs, infos
        if options:
            raise ValueError(f"reset(options={options!r}): a node takes no reset options "
                             "(autoreset_mode 'disabled' takes reset_mask once envs ran)")
        if seed is not None:
            seed = self._check_seed(seed)
        if self._started and self._mode == "async":
            self._drain()  # every env back from its node: all can be restarted
        if not self._started:
            self._collect()
        restarted = self._started or (seed is not None and not self._runs_with(seed))
        if restarted:
            self._restart(seed)
        self._started = True
        if isinstance(seed, int):
            super().reset(seed=seed)  # gymnasium's np_random, as its envs do
        out = self._obs_of({k: v.copy() for k, v in self._t.items()}), self._infos(copy=True)
        if self._disabled is not None:
            self._disabled.started(out[0])
        if restarted and self._mode == "async":
            self._rejoin()  # the new first observations are handed out
        return out

    def _runs_with(self, seed):
        """Whether every env is at the start of a node run with seed (its
        first observations are then those of the seed): no reseed needed."""
        return isinstance(seed, int) and all(i.seed == seed for i in self.nodes) and \
            not (self._step != 0).any()

    def _restart(self, seed):
        """reset() with every env here (step() and reset() wait for all):
        a Reseed to each node (Client._reseed), then every env's first
        observation of its new episode."""
        self._lane_detach()
        self._lane, self._lane_tried = None, False  # the next step() may take it again
        self._outstanding.clear()
        self._state[:] = 0  # every env in flight (vecenv_async.py), as at the start
        self._frame_of[:] = -1
        self._frames.clear()
        self._ready.clear()
        self._nready = 0
        self._nflight = self.num_envs
        if isinstance(seed, list):  # one per env: each node its own envs'
            per = self.agents if self.layout is not None else 1
            cut = [int(o) // per for o in self.offsets]
            self.client._reseed(None, [seed[a:b] for a, b in zip(cut, cut[1:])])
        else:
            self.client._reseed(seed)
        self._have[:] = False
        self._fresh()
        self._collect()
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        if self._disabled is not None:
            self._disabled.waiting[:] = False
        if self._next is not None:
            self._next.pending[:] = False

    def step(self, actions: Any) -> "tuple[Any, Any, Any, Any, dict[str, Any]]":
        """Send one action per env (shape [num_envs] for discrete spaces,
        [num_envs, *action_shape] for box) and wait for the next transition
        of every env.

        Returns (obs, rewards, terminations, truncations, infos). In the
        default NEXT_STEP mode an ended episode's row is its last
        observation and the env's next step is its reset (autoreset.py); in
        SAME_STEP mode ``obs`` rows of envs whose episode ended are the
        first observation of the next episode and ``infos`` holds arrays
        over envs: ``final_obs`` (the ended
        episode's last observation; NaN rows, or 0 for integer dtypes, where
        absent) with mask ``_final_obs`` (also ``has_final_obs``),
        ``rollout_episode`` = {"r": return, "l": length} with mask
        ``_rollout_episode`` for episodes that ended (also ``episode_return``
        / ``episode_length``, NaN / 0 elsewhere), ``episode_start``, ``step``
        and ``is_first`` (a row a recurrent policy starts from zeros: its
        episode starts, or its previous step did not come here). Every array is
        new and the caller's: the VecEnv never writes it again. With
        ``autoreset_mode="disabled"`` an ended episode's row is its last
        observation instead, with no ``final_obs``, and the env waits for
        ``reset(options={"reset_mask": ...})`` (autoreset.py).

        Actions the node would refuse (wrong shape or dtype, a discrete
        action out of range, a NaN or infinite box action) raise ValueError
        naming the first bad env; nothing is sent then, and the VecEnv
        stays usable: call step() again with valid actions.
        """
        return self._mark_first(self._step_actions(actions))

    def recv(self, timeout: Optional[float] = None) -> "tuple[Any, Any, Any, Any, dict[str, Any]]":
        """AsyncMixin.recv, with infos["is_first"] (see step())."""
        out = super().recv(timeout)
        return self._mark_first(out, np.asarray(out[-1]["env_id"], np.int64))

    def _mark_first(self, out, rows=None):
        """infos["is_first"]: the rows a recurrent learner starts from zeros
        (issue 34): an episode's first observation, or a row whose previous
        step this VecEnv did not see (another learner served it; a node that
        restarted). What Client's Batch.is_first says, for the VecEnv's rows
        (every row in order, or recv()'s rows): so Python users keep no
        bookkeeping."""
        infos = out[-1]
        if "step" not in infos or "episode_start" not in infos:
            return out
        step = np.asarray(infos["step"], np.int64).reshape(-1)
        start = np.asarray(infos["episode_start"], bool).reshape(-1)
        rows = np.arange(len(step)) if rows is None else rows
        if self._last_seen is None or len(self._last_seen) <= int(rows.max(initial=0)):
            grown = np.full(int(rows.max(initial=0)) + 1, -2, np.int64)
            if self._last_seen is not None:
                grown[:len(self._last_seen)] = self._last_seen
            self._last_seen = grown
        infos["is_first"] = start | (step != self._last_seen[rows] + 1)
        self._last_seen[rows] = step
        return out

    def _step_actions(self, actions):
        self._check_open("step()")
        if not self._started:
            raise RuntimeError("call reset() before step()")
        self._enter("sync", "step()")
        if self._disabled is not None:
            self._disabled.check_step(self._label)
            return self._disabled.stepped(self._step_same_step(actions))
        out = self._step_same_step(actions)
        if self._next is not None and self._lane is None:  # (the lane shows it in C)
            out = self._next_step_rows(out, None)
        return out

    def _next_step_rows(self, out, rows):
        """A same-step result of every row (rows None) or of rows, shown the
        NEXT_STEP way (autoreset.py); a held row's step was its reset, not
        a step: no transition, no episode step."""
        out, held = self._next.stepped(out, rows)
        if held.any():
            self._ep_length[held if rows is None else rows[held]] -= 1
            self.total_steps -= int(held.sum())
        return out

    def _step_same_step(self, actions):
        """step() in the node's own autoreset mode."""
        if self._lane is not None or (not self._lane_tried and self._lane_sync_start()):
            return self._lane_step(actions)  # vecenv_lane.py: one C call each way
        # Checked as a whole before anything is sent: a refused action
        # leaves every batch outstanding and the VecEnv as it was.
        acts = self._actions.check(actions, self.num_envs, self._mask, self._label)
        # Every answer is queued, then each node's are sent at once: one
        # send per node and step.
        conns = {}
        outstanding = self._outstanding
        queued = 0
        try:
            for b, g in outstanding:
                wire = self._actions.wire(tuple(a[g] for a in acts), b)
                c = self.client._queue_checked(b, wire, self._hold_of(b, g))
                conns[id(c)] = c
                queued += 1
        finally:
            del outstanding[:queued]
            for c in conns.values():
                if c.open:
                    self.client._flush(c)
        self._have[:] = False
        self._fresh()
        self._collect()
        self.total_steps += self.num_envs
        has_final = self._has_final
        terminated, truncated = self._flags[0], self._flags[1]
        ep_ret, ep_len, counted, _, ended = hot.episodes(
            self._reward, terminated, truncated, has_final, None, 0, self._ep_return,
            self._ep_length)
        if ended:
            self.episode_returns.extend(ep_ret[counted].tolist())
            self.episode_lengths.extend(ep_len[counted].tolist())
        infos = self._infos()
        infos.update({"final_obs": self._obs_of(self._final), "_final_obs": has_final,
                      "has_final_obs": has_final, "rollout_episode": {"r": ep_ret, "l": ep_len},
                      "_rollout_episode": counted, "episode_return": ep_ret,
                      "episode_length": ep_len})
        return self._obs_of(self._t), self._reward, terminated, truncated, infos

    def get_state(self, env_ids: Any = None) -> "list[bytes]":
        """Each env's state (of ``env_ids``, default all) as bytes, as
        make_vec's get_state (remote_state.py, docs/python.md "Env state")."""
        return remote_state.get_state(self, env_ids)

    def set_state(self, env_ids: Any, states: Sequence[bytes]) -> None:
        """Restores envs ``env_ids`` from get_state blobs; each one's next
        step() starts from its state (remote_state.py)."""
        remote_state.set_state(self, env_ids, states)

    def close_extras(self, reason: str = "learner done", **kwargs: Any) -> None:
        """Say goodbye to every node (unanswered batches go to the next
        learner)."""
        self._lane_detach()
        self._lane = None
        self._outstanding.clear()  # their views of the node's memory: unmapped at close
        self.client.close(reason)

    def close(self, reason: str = "learner done", **kwargs: Any) -> None:
        """Close the connections (once); ``closed`` is then True."""
        if self.closed:
            return
        self.closed = True
        self.close_extras(reason=reason, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if not getattr(self, "closed", True):
            try:
                self.close("learner gone")
            except Exception:  # noqa: BLE001  (interpreter shutdown: nothing to report to)
                pass

    def __repr__(self):
        return (f"VecEnv({', '.join(i.address for i in self.nodes)}, "
                f"num_envs={self.num_envs})")



__all__ = ["VecEnv"]
