"""EnvPool-style asynchronous stepping for VecEnv: ``send(actions,
env_ids)`` and ``recv()``.

A node answers envs in batches of its own (``--batch``): each Observations
frame it sends must be answered by one Actions frame for all of its envs.
``recv()`` hands the user the next ``batch_size`` envs whose observation
came in, whatever frames they arrived in; ``send()`` takes actions for any
envs handed out, keeps each one in its frame's answer, and sends a frame's
answer as soon as the last of its envs has an action. So the node steps
the envs answered while the user's policy works on the next batch: the
transport and the node's stepping overlap the policy instead of adding to
it.

Each env is in one of four states (``_state``):

    IN_FLIGHT  at the node, stepping (or never received yet)
    READY      received, queued for recv()
    HANDED     returned by recv() (or reset()/step()), waiting for send()
    HELD       answered, its frame waiting for others' actions

recv() refuses at once (RuntimeError) to wait for envs that cannot come:
those HANDED or HELD come back only after send(). Every array recv()
returns is new and the caller's.

Autoreset modes as step()'s (autoreset.py): in NEXT_STEP an env that
recv() returned with its episode's end is held in its frame's answer
(the lane keeps those marks in C); in DISABLED send() refuses it until
reset(options={"reset_mask": ...}). reset() and async_reset() work at
any time: they first wait for the envs in flight (_drain), so that every
frame awaits an answer, then restart every env with a Reseed.

This is a mixin of VecEnv (vecenv.py), which owns the connections, the
per-row receive arrays (``_ingest``) and the episode counters; one
implementation for both env ABIs (vecenv_layout.py). For env ABI 2 nodes
the envs here are rows (envs x agents): ``recv()`` hands out rows, and
``send(actions, env_ids)`` takes the action space's batched form for them,
checked against the masks those rows came with, each row's action held in
its frame's answer until the frame's last row has one.
"""
import collections

import gymnasium
import numpy as np

from .errors import ConnectionClosed, ProtocolError
from .hotpath import hot

IN_FLIGHT, READY, HANDED, HELD = 0, 1, 2, 3


def _ids(g):
    """A frame's envs (a slice or global indices, as _ingest returns them)
    as an int64 array of global ids."""
    return np.arange(g.start, g.stop) if isinstance(g, slice) else np.asarray(g, np.int64)


class _Frame:
    """One Observations frame being answered: its batch, its envs (global
    ids, in frame order) and the actions given so far."""

    __slots__ = ("batch", "ids", "acts", "left")

    def __init__(self, batch, ids, acts):
        self.batch, self.ids, self.acts, self.left = batch, ids, acts, len(ids)


class AsyncMixin:
    """send()/recv()/async_reset() for VecEnv."""

    def _async_init(self, batch_size):
        n = self.num_envs
        if batch_size is None:
            batch_size = n
        if not isinstance(batch_size, (int, np.integer)) or not 1 <= batch_size <= n:
            raise ValueError(f"batch_size={batch_size!r}: an int in [1, num_envs={n}]")
        self.batch_size = int(batch_size)
        self._mode = None  # "sync" once step() ran, "async" once send()/recv() did
        self._state = np.zeros(n, np.int8)
        self._frame_of = np.full(n, -1, np.int64)  # key into _frames, while HANDED/HELD
        self._pos_of = np.zeros(n, np.int64)       # the env's row in its frame
        self._frames = {}
        self._next_key = 0
        # (global env ids, the first id when they are one range in order or
        # None), in arrival order
        self._ready = collections.deque()
        self._nready = 0
        self._nflight = n  # envs IN_FLIGHT: what recv() may still wait for

    # -- state ------------------------------------------------------------------
    def _enter(self, mode, what):
        if self._mode is None or self._mode == mode:
            self._mode = mode
            return
        raise RuntimeError(
            f"{what}: this VecEnv is {'asynchronous' if self._mode == 'async' else 'synchronous'}"
            f" now ({'send()/recv()' if self._mode == 'async' else 'step()'} was called): use "
            f"{'send() and recv()' if self._mode == 'async' else 'step()'}, or a new VecEnv")

    def _adopt(self, batch, ids, state, rows=None):
        """Track a received frame's envs (ids; rows: the same as _hotpath
        takes them, an int for one range): queued for recv() (READY) or
        already given to the user (HANDED, by reset() or step()). Raises
        ProtocolError when one of them is not in flight (came again before
        its action was sent)."""
        key = self._next_key
        bad = hot.adopt(ids.astype(np.int64, copy=False) if rows is None else rows, len(ids),
                        self._state, self._frame_of, self._pos_of, key, IN_FLIGHT, state)
        if bad >= 0:
            raise ProtocolError(f"{self._label(bad)} came again before its action was sent")
        self._nflight -= len(ids)
        self._next_key += 1
        self._frames[key] = _Frame(batch, ids, self._actions.blank(len(ids)))
        if state == READY:
            self._ready.append((ids, rows if isinstance(rows, int) else None))
            self._nready += len(ids)

    def _go_async(self, what):
        """Enter async mode; the frames reset() or step() handed out become
        answerable by send()."""
        first = self._mode is None
        self._enter("async", what)
        if first:
            self._rejoin()

    def _rejoin(self, state=HANDED):
        """The frames outstanding (reset() handed them out: HANDED; or
        async_reset()'s: READY) become send()/recv()'s, in the lane when
        this VecEnv may take it (vecenv_lane.py)."""
        if self._lane_start(state):
            return
        for b, g in self._outstanding:
            self._adopt(b, _ids(g), state)
        self._outstanding.clear()

    def _drain(self):
        """Before a reset of an asynchronous VecEnv: wait until no env is in
        flight (each answered env's next observation came), so that every
        frame awaits this VecEnv's answer and a Reseed restarts them all.
        What comes is dropped: the reset starts new episodes."""
        timeout = self.timeout
        if self._lane is not None:
            ready, flight = self._lane_counts()
            if ready + flight:  # taken as recv() takes them, then not counted
                steps, ended = self.total_steps, len(self.episode_returns)
                self._lane_recv(ready + flight, timeout)
                self.total_steps = steps
                del self.episode_returns[ended:]
                del self.episode_lengths[ended:]
            return
        while self._nflight:
            self._recv_one(timeout, self._nflight)

    # -- the API ----------------------------------------------------------------
    def async_reset(self, *, seed=None):
        """Start without waiting: recv() returns each env's first observation
        as it arrives (``infos["step"]`` 0). Any number of times, as
        reset(): a later call waits for the envs in flight, then restarts
        every env (a Reseed; ``seed`` as reset() takes it), and recv()
        returns the new first observations."""
        self._check_open("async_reset()")
        if seed is not None:
            seed = self._check_seed(seed)
        self._enter("async", "async_reset()")
        collected = self._started or seed is not None
        if self._started:
            self._drain()
            self._restart(seed)
        elif seed is not None:  # every first observation here: is it seed's?
            self._collect()
            if not self._runs_with(seed):
                self._restart(seed)
        if collected:
            # A restarted env's first observation comes with its node's step
            # count (a reset is no step), which recv() takes for a
            # transition (only step 0 is none): taken off here, so that it
            # counts none.
            counted = self._step != 0
            self._ep_length[counted] = -1
            self.total_steps -= int(np.count_nonzero(counted))
        self._started = True
        if isinstance(seed, int):
            gymnasium.vector.VectorEnv.reset(self, seed=seed)  # its np_random, as reset()'s
        self._rejoin(READY)

    def send(self, actions, env_ids):
        """Actions for the envs ``env_ids`` (global ids, as recv() returned
        them in ``infos["env_id"]``, any order, any number including none):
        shape [len(env_ids)] for discrete spaces, [len(env_ids),
        *action_shape] for box. Each env must have been handed out by recv()
        (or reset()/step()) and not answered since. Checked as a whole first:
        on ValueError nothing was taken. A frame's answer goes to its node
        as soon as its last env has an action."""
        lane = self._lane
        if lane is None or self._mode != "async":  # (a lane of step()'s: refused below)
            self._check_open("send()")
            if not self._started:
                raise RuntimeError("call reset() or async_reset() before send()")
            self._go_async("send()")  # may take the lane
            lane = self._lane
        if self._disabled is not None:  # an env that ended waits for its reset
            self._disabled.check_send(env_ids, self._label)
        if lane is not None:  # vecenv_lane.py: one C call, when it takes them as they are
            r = lane.send(env_ids, actions)
            if r is not None:
                self._lane_send(actions, env_ids, r)
            return
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(f"env_ids must be a 1-D array of ints, got shape {ids.shape} "
                             f"dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False)
        k = len(ids)
        if k == 0:
            self._actions.check(actions, 0, self._masks(ids), self._label)
            return
        # hold() checks the envs and takes them all, or none; actions the
        # checks refuse then give them back: on ValueError nothing was taken.
        bad, frames, pos = hot.hold(ids, self._state, self._frame_of, self._pos_of, HANDED, HELD)
        if bad >= 0:
            self._refuse(ids, bad, frames)
        try:
            acts = self._actions.check(actions, k, self._masks(ids),
                                       lambda r: self._label(int(ids[r])))
        except BaseException:
            self._state[ids] = HANDED
            raise
        conns = {}
        try:
            if len(frames) == 1:  # the usual: the answer of one whole frame
                parts = [(frames[0][0], slice(None), frames[0][1])]
            else:
                keys = self._frame_of[ids]
                parts = []
                for key in dict.fromkeys(key for key, _ in frames):
                    mine = keys == key
                    parts.append((key, mine, int(np.count_nonzero(mine))))
            for key, mine, count in parts:
                fr = self._frames[key]
                for held, given in zip(fr.acts, acts):
                    held[pos[mine]] = given[mine]
                fr.left -= count
                if fr.left == 0:
                    del self._frames[key]
                    self._state[fr.ids] = IN_FLIGHT
                    self._nflight += len(fr.ids)
                    # NEXT_STEP: the envs whose step is their reset are held.
                    c = self.client._queue_checked(fr.batch,
                                                   self._actions.wire(fr.acts, fr.batch),
                                                   self._hold_of(fr.batch, fr.ids))
                    conns[id(c)] = c
        finally:
            for c in conns.values():
                if c.open:
                    self.client._flush(c)

    def recv(self, timeout=None):
        """The next ``batch_size`` envs whose observation came in, in arrival
        order: (obs, rewards, terminations, truncations, infos) as step()
        returns them for those envs, with ``infos["env_id"]`` their global
        ids. An env's first observation (after async_reset()) has reward 0,
        no flags and ``infos["step"]`` 0. Waits at most ``timeout`` seconds
        (default: the VecEnv's) for frames; raises RuntimeError at once when
        fewer than batch_size envs can come before the user sends actions."""
        lane = self._lane
        if lane is not None and self._mode == "async" and self._lane_conn.open:
            # vecenv_lane.py: the usual, inline
            got = lane.recv(self.batch_size, self._lane_timeout(timeout))
            if got is not None and len(got) == 7:
                self.total_steps += got[5]
                if got[6] is not None:
                    self.episode_returns.extend(got[6][0])
                    self.episode_lengths.extend(got[6][1])
                out = got[:5]
            else:
                out = self._lane_recv(self.batch_size,
                                      self.timeout if timeout is None else timeout, got)
            if self._disabled is not None:  # (NEXT_STEP: the lane shows it in C)
                out = self._disabled.stepped(out, out[4]["env_id"])
            return out
        self._check_open("recv()")
        if not self._started:
            raise RuntimeError("call reset() or async_reset() before recv()")
        self._go_async("recv()")  # may take the lane
        want = self.batch_size
        if self._lane is not None:
            out = self._lane_recv(want, self.timeout if timeout is None else timeout)
            if self._disabled is not None:  # (NEXT_STEP: the lane shows it in C)
                out = self._disabled.stepped(out, out[4]["env_id"])
            return out
        while self._nready < want:
            coming = self._nflight
            if self._nready + coming < want:
                self._recv_short(want, self._nready + coming)
            self._recv_one(self.timeout if timeout is None else timeout, coming)
        ids, first = self._take(want)
        out = self._transitions(ids, first)
        if self._disabled is not None:
            return self._disabled.stepped(out, ids)
        if self._next is not None:
            return self._next_step_rows(out, ids)
        return out

    # -- internals ----------------------------------------------------------------
    def _refuse(self, ids, bad, why):
        """send()'s ValueError for env_ids[bad]: why is "range", "twice" or
        else its state says."""
        e = int(ids[bad])
        if why == "range":
            raise ValueError(f"env_ids: {e} is not an env id (0..{self.num_envs - 1})")
        if why == "twice":
            raise ValueError(f"env_ids: env {e} is given twice")
        why = {IN_FLIGHT: "is stepping at its node (answered already)",
               READY: "has an observation recv() has not returned yet",
               HELD: "was answered already"}[int(self._state[e])]
        raise ValueError(f"send(): {self._label(e)} {why}; send() takes envs that "
                         "recv() returned and that have no action yet")

    def _recv_short(self, want, can_come):
        """recv()'s RuntimeError: at most can_come of the want envs can come."""
        waiting = int(np.count_nonzero(self._state == HANDED))
        held = int(np.count_nonzero(self._state == HELD))
        raise RuntimeError(
            f"recv() waits for {want} envs but at most {can_come} can come: "
            f"{waiting} env(s) returned by recv() have no action yet and {held} "
            "answered env(s) wait for the other envs of their frames; send() their "
            "actions first")

    def _recv_one(self, timeout, coming):
        if len(self.client.open_nodes) != len(self.nodes):
            gone = [i.address for i in self.nodes if i.index not in self.client.open_nodes]
            raise ConnectionClosed(f"node(s) {', '.join(gone)} closed: this VecEnv "
                                   "cannot step their envs any more",
                                   clean=True, reason="node closed")
        b = self.client._recv_frame(timeout)
        if b is None:
            raise TimeoutError(f"recv(): no observation after {timeout:g}s ({coming} envs "
                               "are stepping at their nodes)")
        g = self._rows_of(b)
        self._ingest(b, g)
        self._adopt(b, _ids(g), READY, g.start if isinstance(g, slice) else None)

    def _take(self, want):
        """The next want envs queued: (their ids, the first id when they are
        one range in order, else None)."""
        parts, got = [], 0
        while got < want:
            ids, first = self._ready[0]
            need = want - got
            if len(ids) <= need:
                parts.append(self._ready.popleft())
                got += len(ids)
            else:
                parts.append((ids[:need], first))
                self._ready[0] = (ids[need:], None if first is None else first + need)
                got += need
        self._nready -= want
        if len(parts) == 1:
            ids, first = parts[0]
        else:
            ids = np.concatenate([p[0] for p in parts])
            g = self._rows(ids)  # frames that arrived in order are one range again
            first = g.start if isinstance(g, slice) else None
        self._state[ids] = HANDED
        return ids, first

    @staticmethod
    def _rows(ids):
        """ids as a slice when they are one increasing range (a frame of a
        range of envs, the usual case): gathers are then plain copies."""
        lo, hi = int(ids[0]), int(ids[-1]) + 1
        if hi - lo == len(ids) and (len(ids) < 2 or (ids[1:] > ids[:-1]).all()):
            return slice(lo, hi)
        return ids

    def _transitions(self, ids, first):
        """What recv() returns for ids (first: the first of them when they
        are one range in order, else None): gathered copies (the caller's),
        by _hotpath in one pass over every column, and the episodes they
        end."""
        rows = first if first is not None else ids
        names = list(self._t)
        cols = [self._reward, self._step, self._has_final]
        cols += [self._t[k] for k in names] + [self._final[k] for k in names]
        if self._mask is not None:
            cols.append(self._mask)
        got = hot.gather(rows, len(ids), tuple(cols), self._flags)
        reward, step, has_final = got[0], got[1], got[2]
        t = len(names)
        obs, final = dict(zip(names, got[3:3 + t])), dict(zip(names, got[3 + t:3 + 2 * t]))
        terminated, truncated, start = got[-1][0], got[-1][1], got[-1][2]
        # A first observation (step 0) is no transition.
        ep_ret, ep_len, counted, nstepped, ended = hot.episodes(
            reward, terminated, truncated, has_final, step, rows, self._ep_return,
            self._ep_length)
        self.total_steps += nstepped
        if ended:
            self.episode_returns.extend(ep_ret[counted].tolist())
            self.episode_lengths.extend(ep_len[counted].tolist())
        infos = {"env_id": ids.copy(), "final_obs": self._obs_of(final),
                 "_final_obs": has_final, "has_final_obs": has_final,
                 "rollout_episode": {"r": ep_ret, "l": ep_len}, "_rollout_episode": counted,
                 "episode_return": ep_ret, "episode_length": ep_len,
                 "episode_start": start, "step": step}
        if self.layout is not None:
            infos["agent_id"] = self._agent_id[ids]
            if self._mask is not None:
                infos["action_mask"] = got[3 + 2 * t]
        return self._obs_of(obs), reward, terminated, truncated, infos

    def _masks(self, ids):
        """The action masks rows ids were handed out with (None: no mask)."""
        return self._mask[ids] if self._mask is not None else None


__all__ = ["AsyncMixin", "IN_FLIGHT", "READY", "HANDED", "HELD"]
