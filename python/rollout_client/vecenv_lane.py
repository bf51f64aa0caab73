"""send()/recv() and step() in one C call each way: the lane
(python/hotpath/lane.c and the lane_*.c beside it).

With a torch policy of about 1 ms per batch of 1024 envs, the Python of
vecenv_async.py's recv() and send() cost 160-240 us per batch on a 2-CPU
VM, most of it cold after the policy; the lane does the same work (frames
read and checked, per-env states, rows copied out of the node's memory,
episodes counted, actions written into it, answers sent) in one call each
way (docs/python.md, "The lane").

It serves the common case: one node, env ABI 1, float32 observations in
the node's shared memory (a Unix-domain socket, Hello.shared_memory). A
VecEnv takes it at its first step() after reset(), or when it first goes
asynchronous, and keeps it until it closes; in every other case the
Python of vecenv.py and vecenv_async.py does the work, with the same
results (the tests compare the two).

The lane reads the connection's socket from then on. A frame it does not
take (an error, a goodbye, anything unexpected) comes back here whole and
goes to the client's dispatcher, as before; an observations frame outside
the shared memory agreed is a protocol error here.
"""
import numpy as np

from .errors import ConnectionClosed, ProtocolError
from .hotpath import hot
from .vecenv_async import HANDED as _HANDED, READY as _READY


def _conn(env):
    """The connection a lane may serve, or None."""
    if env.layout is not None or len(env.nodes) != 1 or env._obs_dtype != np.float32:
        return None
    c = env.client._conns[0]
    if not c.open or c.mem is None or c.sock is None:
        return None
    frames = [b for b, _ in env._outstanding] + list(env.client._ready)
    if any(not getattr(b, "in_memory", False) or getattr(b, "ranges", None) is None
           for b in frames):
        return None
    return c


class LaneMixin:
    """The lane of VecEnv (vecenv.py, vecenv_async.py): _lane is None or
    the hot.Lane serving send()/recv()."""

    _lane = None
    _lane_tried = False  # step() asks once whether it may take the lane

    def _lane_start(self, outstanding=_HANDED):
        """Take the lane when this VecEnv may (see the module): the frames
        handed out by reset()/step() become HANDED in it (``outstanding``:
        READY for async_reset()'s), those the client queued READY, and the
        bytes read but not framed yet move to it. True when it was taken.
        In NEXT_STEP mode the lane keeps the hold marks itself (lane.h):
        the autoreset state's ``pending`` array is the lane's."""
        c = _conn(self)
        if c is None:
            return False
        m = c.mem
        hold = self._next.pending if self._next is not None else None
        keep = (c.sock, m, self._state, self._frame_of, self._ep_return, self._ep_length, hold)
        lane = hot.Lane(c.sock.fileno(), tuple(self.obs_shape), m.obs, m.final_obs, m.reward,
                        m.flags, m.step, m.act, self.action_kind == "discrete",
                        self.action_n or 0, self._state, self._frame_of, self._ep_return,
                        self._ep_length, self._nflight, c.last_seq, c.reader.max_frame,
                        self.client._spin, keep, hold)
        for b, _ in self._outstanding:
            lane.adopt(b.seq, np.ascontiguousarray(b.ranges, np.uint32), outstanding)
        self._outstanding.clear()
        cl = self.client
        while cl._ready:
            b = cl._ready.popleft()
            lane.adopt(b.seq, np.ascontiguousarray(b.ranges, np.uint32), _READY)
        rd = c.reader
        if rd.end > rd.start:
            lane.feed(bytes(rd.mv[rd.start:rd.end]))
        rd.start = rd.end = 0
        if c in cl._early:
            cl._early.remove(c)
        self._lane = lane
        self._lane_conn = c
        return True

    def _lane_sync_start(self):
        """step()'s first call: take the lane when this VecEnv may; every
        env is then handed out (reset() gave it) and step() answers them
        all and waits for them all."""
        self._lane_tried = True
        if not self._lane_start():
            return False
        self._all_ids = np.arange(self.num_envs, dtype=np.int64)
        return True

    def _lane_step(self, actions):
        """step() through the lane: every env's action, then every env's
        next transition, env e in row e."""
        n = self.num_envs
        r = self._lane.send(self._all_ids, actions)
        if r is not None:
            self._lane_send(actions, self._all_ids, r)
        return self._lane_recv(n, self.timeout, ordered=True)

    def _lane_counts(self):
        """(READY envs, envs in flight) as the lane counts them."""
        ready, flight, _ = self._lane.counts
        return ready, flight

    def _lane_timeout(self, timeout):
        """recv()'s timeout as the lane takes it: seconds, < 0 for none."""
        if timeout is None:
            timeout = self.timeout
        return -1.0 if timeout is None else float(timeout)

    def _lane_recv(self, want, timeout, got=False, ordered=False):
        """recv()'s transitions through the lane, after its call returned
        got (False: not called yet): a timeout, or an event to handle
        before calling again. ordered: step()'s, every env in env order."""
        lane, c = self._lane, self._lane_conn
        while True:
            if got is False:
                if not c.open:
                    raise ConnectionClosed(f"node(s) {c.address} closed: this VecEnv cannot "
                                           "step their envs any more", clean=True,
                                           reason="node closed")
                got = lane.recv(want, self._lane_timeout(timeout), ordered)
            if got is None:
                raise TimeoutError(f"{'step()' if ordered else 'recv()'}: no observation after "
                                   f"{timeout:g}s ({self._lane_counts()[1]} envs are stepping "
                                   "at their nodes)")
            if len(got) == 7:
                obs, reward, terminated, truncated, infos, stepped, ended = got
                self.total_steps += stepped
                if ended is not None:
                    self.episode_returns.extend(ended[0])
                    self.episode_lengths.extend(ended[1])
                return obs, reward, terminated, truncated, infos
            self._lane_event(got, want)
            got = False

    def _lane_event(self, got, want):
        """What the lane handed back: handled as the client always did."""
        what, detail = got
        cl, c = self.client, self._lane_conn
        if what != "short":
            # Each of these closes the connection (a frame here is an error,
            # a goodbye or a violation): the lane lets go of its socket first.
            self._lane.detach()
        if what == "frame":
            frame = cl._parse(c, detail)
            if frame.WhichOneof("body") == "observations":
                cl._fail(c, f"observations seq {frame.observations.seq} not in the shared "
                            "memory agreed")
            cl._dispatch(c, frame)  # an error raises; a goodbye closes
        elif what == "bad":
            cl._fail(c, detail)
        elif what == "closed":
            cl._close_conn(c)
            raise ConnectionClosed(f"node {c.address}: {detail}")
        elif what == "short":
            self._recv_short(want, detail)
        else:  # pragma: no cover - lane.c says only these
            raise ProtocolError(f"lane: {what!r}")

    def _lane_send(self, actions, ids, r):
        """The rest of send() when the lane did not take (actions, ids) at
        once (r says why): ids as int64, actions through check_actions (the
        messages, the conversions, box clipping), then the lane again."""
        lane = self._lane
        if r[0] in ("ids", "actions"):
            ids = np.asarray(ids)
            if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
                raise ValueError(f"env_ids must be a 1-D array of ints, got shape {ids.shape} "
                                 f"dtype {ids.dtype}")
            ids = np.ascontiguousarray(ids, np.int64)
            r = lane.send(ids, actions)
        if r is not None and r[0] == "actions":
            r = lane.send(ids, self._lane_checked(actions, ids), True)
        if r is None:
            return
        if r[0] in ("closed", "bad"):
            self._lane.detach()
        if r[0] == "closed":
            self.client._close_conn(self._lane_conn)
            raise ConnectionClosed(f"node {self._lane_conn.address}: {r[1]}")
        if r[0] == "bad":
            self.client._fail(self._lane_conn, r[1])
        self._refuse(ids, int(r[0]), r[1])

    def _lane_checked(self, actions, ids):
        wire = self._actions.check(actions, len(ids), None, lambda r: self._label(int(ids[r])))
        return np.ascontiguousarray(wire[0])

    def _lane_detach(self):
        """Close time: the answers the lane has not written go first in the
        client's output, before its goodbye."""
        if self._lane is not None:
            rest = self._lane.detach()
            self._lane = None
            if rest and self._lane_conn.open:
                self._lane_conn.outbuf[:0] = rest


__all__ = ["LaneMixin"]
