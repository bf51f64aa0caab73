"""Client: a learner's connections to one or more rollout nodes.

One TCP connection per node, all driven from the caller's thread through a
``selectors`` selector (no threads). The client performs the handshake,
turns every Frame{observations} into a :class:`Batch` of numpy arrays, and
sends the answer of each batch with :meth:`Client.send_actions`.
"""
import collections
import os
import selectors
import socket
import time
from typing import Any, Iterator, Optional, Union

import numpy as np

from . import abi2, shared_memory, spin, wire
from .actions import check_actions
from .address import parse_address
from .batch import Batch
from .errors import (AuthenticationError, ConnectionClosed, ProtocolError, RemoteError,
                     VersionMismatch)
from .framing import DEFAULT_MAX_FRAME, FrameReader, encode_frame
from .links import PROTOCOL_VERSION, Link, NodeLinks, node_addresses
from .observations import ObservationChecks
from .welcome import node_info

EPROTO, EACCES = 71, 13


class _Conn(Link):
    """One node connection's state. Touched only by the owning Client."""

    def __init__(self, index, address, max_frame):
        super().__init__(index, address)
        self.reader = FrameReader(max_frame, where=address)
        self.outbuf = bytearray()
        self.info = None
        self.last_seq = 0
        self.unanswered = set()  # seqs delivered to the caller and not answered yet
        self.env_cache = {}      # env field bytes -> validated env indices (wire.py)
        self.mem = None          # shared_memory.SeedMemory, when the node offered it
        self.events = 0          # the selector events registered for sock
        self.last_step = np.zeros(0, np.int64)  # per env (row): the last step delivered, or -1
        self.node_id = None      # whose envs last_step describes
        self.states = None       # the node's last EnvStates answer (remote_state.py)


class Client(ObservationChecks, NodeLinks):
    """Connections from one learner to one or more nodes.

    ``Client(["127.0.0.1:7000", "10.0.0.2:7000"], token_file="tok")`` connects
    at once (``connect=False`` defers to :meth:`connect`). Nodes are indexed
    in the order given; ``client.nodes[i]`` is node i's :class:`NodeInfo`.

    ``connect_timeout`` bounds, per node, the time spent retrying a refused
    connection (a node that is still starting) plus the handshake.
    ``max_frame`` bounds incoming frames.

    ``shared_memory`` (default True): a node on this host (``unix:PATH``)
    puts the observations in memory this process maps and takes the
    actions from memory it writes, instead of in the frames
    (docs/protocol.md "Observations in shared memory"); the batches are the
    same either way.

    ``spin_us``: how long a wait for frames polls the sockets before it
    sleeps (spin.py: bounded, and adaptive: spins that keep running out are
    stopped for a while). Default: 200 when every node is on this host
    (``unix:PATH``), where an answer takes tens of microseconds and a
    wake-up as long; 0 (never) otherwise. Nodes reached over TCP that
    moved to their private socket (``upgrade``) count as on this host.

    ``upgrade`` (default True): over TCP, ask each node for the same-host
    upgrade (docs/protocol.md "Same-host upgrade"): a node on this host
    moves the connection to its private Unix-domain socket, with shared
    memory as ``unix:PATH`` has; any failure there goes back to TCP. Each
    outcome is logged on the ``rollout_client`` logger ("on this host:
    moved from TCP to unix:PATH" or "staying on TCP: ..."), and
    ``client.upgraded[i]`` says whether node i moved. ``upgrade=False``
    stays on TCP.
    """

    upgraded: "list[bool]"

    def __init__(self, addresses, token=None, token_file=None, name=None,
                 max_frame=DEFAULT_MAX_FRAME, connect_timeout=10.0, connect=True,
                 shared_memory=True, spin_us=None, upgrade=True):
        addresses = node_addresses(addresses, "Client")
        self._setup(token, token_file, name or f"rollout_client/{os.getpid()}", shared_memory,
                    upgrade)
        self._connect_timeout = connect_timeout
        self._conns = [_Conn(i, a, max_frame) for i, a in enumerate(addresses)]
        self._spin_auto = spin_us is None  # chosen again once the transports are known
        if spin_us is None:
            local = all(parse_address(a)[1] is None for a in addresses)  # unix:PATH
            spin_us = spin.DEFAULT_UNIX_US if local else 0
        self._spin = spin.Spin(spin_us)
        self._ready = collections.deque()  # decoded batches not yet returned
        self._early = []  # connections whose reader holds frames that came with a welcome
        self.nodes = []
        self.upgraded = []  # per node: moved to its private socket (see above)
        if connect:
            self.connect()

    # -- connection set-up ------------------------------------------------
    def connect(self) -> "Client":
        """Connect to every node and do the handshakes. Raises
        AuthenticationError / RemoteError when a node refuses,
        VersionMismatch, ProtocolError, or OSError / TimeoutError when a node
        cannot be reached within connect_timeout. On error every connection
        already opened is closed."""
        try:
            for c in self._conns:
                self._connect_one(c)
        except BaseException:
            self._teardown()
            raise
        self.nodes = [c.info for c in self._conns]
        self.upgraded = [c.upgraded for c in self._conns]
        if self._spin_auto and all(shared_memory.local(c.sock) for c in self._conns):
            self._spin = spin.Spin(spin.DEFAULT_UNIX_US)  # every node on this host after all
        return self

    def _connect_one(self, c):
        try:
            self._welcome(c, self._handshake(c, time.monotonic() + self._connect_timeout))
        finally:
            self._drop_fds(c)  # the mappings keep the memory

    def _links(self):
        return self._conns

    def _hello_fields(self, c, hello):
        hello.seed_memory = c.shared
        hello.seed_memory_abi2 = c.shared  # env ABI 2 columns too (abi2.py)

    def _first_frame(self, c, deadline):
        """The node's first frame on c's fresh socket, parsed (what comes
        with it in c.fds)."""
        c.reader = FrameReader(c.reader.max_frame, where=c.address)
        span = None
        while span is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"node {c.address} sent no welcome within "
                                   f"{self._connect_timeout:g}s")
            c.sock.settimeout(left)
            try:
                got = c.reader.fill(c.sock, c.fds)
            except socket.timeout:
                continue
            except ConnectionResetError as e:
                raise ConnectionClosed(f"node {c.address} reset the connection during the "
                                       f"handshake: {e}") from e
            if not got:
                raise ConnectionClosed(f"node {c.address} closed the connection during the "
                                       "handshake (no welcome)")
            span = self._next_frame(c)
        return self._parse(c, bytes(c.reader.mv[span[0]:span[1]]))

    def _welcome(self, c, first):
        """Check c's welcome (its first frame); map the memories it offers
        from c.fds."""
        kind = first.WhichOneof("body")
        if kind == "error":
            raise self._remote_error(c, first.error)
        if kind != "welcome":
            self._fail(c, f"expected welcome, got {kind or 'an empty frame'}")
        w = first.welcome
        if w.protocol_version != PROTOCOL_VERSION:
            self._send_error(c, EPROTO, f"learner speaks protocol version {PROTOCOL_VERSION}")
            raise VersionMismatch(PROTOCOL_VERSION, w.protocol_version, c.address)
        try:
            c.info = node_info(c, w)
        except ProtocolError as e:
            self._fail(c, str(e))
        c.mem = None
        if first.welcome.HasField("seed_memory"):
            if not c.shared:
                self._fail(c, "offered shared memory we did not ask for")
            i = c.info
            discrete = i.action_kind == "discrete"
            c.mem = abi2.SeedMemory2(c.fds, first.welcome.seed_memory, i.layout,
                                     i.num_envs, c.address) if i.layout is not None else \
                shared_memory.SeedMemory(c.fds, first.welcome.seed_memory, i.num_envs,
                                             i.obs_dim, 1 if discrete else i.action_size,
                                             discrete, c.address)
        c.sock.setblocking(False)
        self._sel.register(c.sock, selectors.EVENT_READ, c)
        c.events = selectors.EVENT_READ
        # Frames that came with the welcome stay in the reader: recv()
        # dispatches them, so that connect() raises only for the handshake.
        if c.reader.pending():
            self._early.append(c)

    # -- errors -------------------------------------------------------------
    def _parse(self, c, data):
        f = self._pb.Frame()
        try:
            f.ParseFromString(data)
        except Exception as e:  # protobuf raises DecodeError; be broad on purpose
            self._fail(c, f"undecodable frame ({len(data)} bytes): {e}")
        return f

    def _remote_error(self, c, err):
        self._close_conn(c)
        cls = AuthenticationError if err.code == EACCES else RemoteError
        return cls(int(err.code), err.message, c.address)

    def _send_error(self, c, code, message):
        """Best effort: tell the node what was wrong before closing."""
        if c.sock is None:
            return
        f = self._pb.Frame()
        f.error.code = code
        f.error.message = message
        try:
            c.sock.setblocking(True)
            c.sock.settimeout(1.0)
            c.sock.sendall(bytes(c.outbuf) + encode_frame(f.SerializeToString()))
            c.outbuf.clear()
        except OSError:
            pass

    def _fail(self, c, message):
        """A protocol violation by node c: error frame, close, raise."""
        self._send_error(c, EPROTO, message)
        self._close_conn(c)
        raise ProtocolError(f"node {c.address}: {message}")

    # -- receiving ------------------------------------------------------------
    def _next_frame(self, c):
        """The next complete frame's span in c's reader, or None; a bad
        length prefix is reported to the node, closes the connection and
        raises."""
        try:
            return c.reader.next_frame()
        except ProtocolError as e:
            self._send_error(c, EPROTO, str(e))
            self._close_conn(c)
            raise

    def _drain(self, c):
        """Decode every complete frame c's reader holds. Observations are
        checked and queued as wire.ObsFrame, whose float arrays view the
        reader's buffer: it is read again only once they are all taken."""
        rd = c.reader
        while c.open:
            span = self._next_frame(c)
            if span is None:
                return
            try:
                o = None if getattr(c.info, "layout", None) is not None else \
                    wire.parse_observations(rd.mv, rd.buf, span[0], span[1], c.env_cache)
            except ProtocolError as e:
                self._fail(c, f"malformed observations frame: {e}")
            if o is not None:
                self._ready.append(self._checked(c, o))
            else:
                self._dispatch(c, self._parse(c, bytes(rd.mv[span[0]:span[1]])))

    def _dispatch(self, c, frame):
        kind = frame.WhichOneof("body")
        if kind == "observations" and getattr(c.info, "layout", None) is not None:
            self._ready.append(self._checked_abi2(c, frame.observations))
        elif kind == "observations":
            o = wire.observations_from_pb(frame.observations)
            self._ready.append(self._checked(c, o))
        elif kind == "error":
            raise self._remote_error(c, frame.error)
        elif kind == "env_states":  # remote_state.py waits for it
            c.states = frame.env_states
        elif kind == "goodbye":
            c.goodbye = frame.goodbye.reason
            self._close_conn(c)
        else:
            self._fail(c, f"unexpected {kind or 'empty frame'} after the handshake")

    def _on_readable(self, c):
        """Read what c has and decode it; False when there was nothing."""
        try:
            got = c.reader.fill(c.sock)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as e:
            self._close_conn(c)
            raise ConnectionClosed(f"node {c.address}: connection lost: {e}") from e
        if not got:
            self._drain(c)  # a goodbye may have come just before the close
            if c.open:
                self._close_conn(c)
                raise ConnectionClosed(f"node {c.address} closed the connection without "
                                       "goodbye")
            return True
        self._drain(c)
        return True

    def _spin_read(self, until):
        """Poll the open connections without sleeping until something is read
        or perf_counter passes ``until`` (spin.py). True when something was."""
        conns = [c for c in self._conns if c.open]
        if any(c.outbuf for c in conns):
            return False  # a send is pending: select() handles both
        clock = time.perf_counter
        while True:
            for c in conns:
                if self._on_readable(c):
                    self._spin.hit()
                    return True
            if clock() >= until:
                self._spin.miss()
                return False

    def _flush(self, c):
        try:
            sent = c.sock.send(c.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._close_conn(c)
            raise ConnectionClosed(f"node {c.address}: send failed: {e}") from e
        del c.outbuf[:sent]
        self._watch(c)

    def _watch(self, c):
        if c.open:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.outbuf else 0)
            if events != c.events:  # most sends leave nothing queued: no change
                self._sel.modify(c.sock, events, c)
                c.events = events

    def recv(self, timeout: Optional[float] = None) -> Union[Batch, "abi2.Abi2Batch", None]:
        """The next batch from any node, or None when ``timeout`` seconds
        pass first (None: wait as long as it takes).

        Raises RemoteError when a node sends Frame{error}, ConnectionClosed
        when a node's connection ends without goodbye (the client then goes
        on with the other nodes), ProtocolError on a malformed frame, and
        ConnectionClosed(clean=True) once every node has said goodbye.
        """
        o = self._recv_frame(timeout)
        return None if o is None else self._batch(o)

    def _recv_frame(self, timeout=None):
        """recv() without the Batch: the next checked wire.ObsFrame, whose
        float arrays may view the receive buffer and are valid only until
        the next call (VecEnv copies them into its arrays at once); a frame
        in_memory has its columns in the connection's SeedMemory instead."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._early and not self._ready:
            c = self._early.pop(0)
            if c.open:
                self._drain(c)
        while not self._ready:
            if not any(c.open for c in self._conns):
                reasons = "; ".join(f"{c.address}: {c.goodbye!r}" for c in self._conns
                                    if c.goodbye is not None)
                raise ConnectionClosed(f"every node has closed (goodbye: {reasons or 'none'})",
                                       clean=all(c.goodbye is not None for c in self._conns),
                                       reason=reasons)
            until = self._spin.begin()
            if until is not None and self._spin_read(until):
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = self._sel.select(left)
            for key, mask in events:
                c = key.data
                if c.open and mask & selectors.EVENT_WRITE:
                    self._flush(c)
                if c.open and mask & selectors.EVENT_READ:
                    self._on_readable(c)
            if not self._ready and deadline is not None and time.monotonic() >= deadline:
                return None
        return self._ready.popleft()

    def batches(self, timeout: Optional[float] = None) -> Iterator[Any]:
        """Iterate over batches until every node has said goodbye."""
        while True:
            try:
                b = self.recv(timeout)
            except ConnectionClosed as e:
                if e.clean:
                    return
                raise
            if b is None:
                raise TimeoutError(f"no observations for {timeout:g}s")
            yield b

    # -- sending --------------------------------------------------------------
    def send_actions(self, batch: Any, actions: Any, clip_box: bool = True) -> None:
        """Answer ``batch`` with one action per row, in the batch's order.

        Discrete spaces: integers in [0, n), shape [n]. Box spaces: floats,
        shape [n, *action_shape] (or [n * action_size]); with ``clip_box``
        they are clipped to the space's bounds when the node gave bounds,
        without, one outside them is refused (the node would end the session).
        Raises ValueError on a wrong shape, an out-of-range action,
        a non-finite box action or a batch already answered (nothing is sent
        then: the batch can still be answered), and ConnectionClosed when
        the batch's node is gone.

        An env ABI 2 node's batch (abi2.Abi2Batch): the action space's
        batched form, checked by abi2.check_actions (a value its row's mask
        forbids is refused too).
        """
        c = self._answerable(batch)
        if c.info.layout is not None:  # (int32 [n, ndisc], float32 [n, nbox])
            lay = c.info.layout
            wire = abi2.check_actions(
                lay, actions, batch.n, batch.mask, clip_box,
                where=lambda k: f"env {int(batch.env[k]) // lay.agents} agent "
                f"{int(batch.env[k]) % lay.agents} (row {k})")
        else:
            wire = check_actions(c.info, actions, batch.n, clip_box,
                                 where=lambda k: f"env {int(batch.env[k])} (row {k})")
        self._send_checked(batch, wire)

    def _answerable(self, batch):
        """The connection of a batch that can be answered now, or raise."""
        c = self._conns[batch.node]
        if not c.open:
            raise ConnectionClosed(f"node {c.address} is closed; batch seq {batch.seq} "
                                   "cannot be answered", clean=c.goodbye is not None,
                                   reason=c.goodbye or "")
        if batch.seq not in c.unanswered:
            raise ValueError(f"batch seq {batch.seq} of node {c.address} was already "
                             "answered or never delivered")
        return c

    def _send_checked(self, batch, actions):
        """Send actions that check_actions returned for this batch."""
        self._flush(self._queue_checked(batch, actions))

    def _queue_checked(self, batch, actions, hold=None):
        """Queue the answer of batch (actions that check_actions returned)
        without sending it yet: a caller with several batches to answer
        sends them together (_flush). ``hold``: the node's env indices of
        the batch not to step (Actions.hold: NEXT_STEP). Returns the
        connection."""
        c = self._answerable(batch)
        if batch.in_memory and c.info.layout is None:  # into the node's memory, at the batch's env rows
            rows = slice(*batch.env_range) if batch.env_range is not None else batch.env
            act = c.mem.act
            act[rows] = actions if act.ndim == 1 else np.reshape(actions, (-1, act.shape[1]))
            body = wire.actions_in_memory(batch.seq, hold)
        elif c.info.layout is not None and batch.in_memory:  # at the batch's rows
            c.mem.act[batch.env] = actions[0]
            c.mem.act_box[batch.env] = actions[1]
            body = wire.actions_in_memory(batch.seq, hold)
        elif c.info.layout is not None:
            body = abi2.actions_message(batch.seq, *actions, hold=hold)
        elif c.info.action_kind == "discrete":
            body = wire.actions_message(batch.seq, discrete=actions, hold=hold)
        else:
            body = wire.actions_message(batch.seq, box=actions, hold=hold)
        c.outbuf += encode_frame(body, c.info.max_frame or None)
        c.unanswered.discard(batch.seq)
        return c

    # -- closing ----------------------------------------------------------------
    def _reseed(self, seed=None, env_seeds=None):
        """Frame{reseed} to every open node (docs/protocol.md "Reseed"):
        each resets, instead of stepping, the envs of every frame awaiting
        this learner's answer (re-created from (seed, its node index, env)
        first when seed is an int; with env_seeds, one list per node of an
        int or None per env, env i from (its own seed, i), None keeping its
        stream) and sends their first observations in new frames. Those
        frames count as answered here: the caller (a VecEnv that holds
        every env of its nodes) drops their batches. A node shared with
        other learners refuses with an error frame, which the next receive
        raises as RemoteError."""
        for i, c in enumerate(self._conns):
            if not c.open:
                continue
            f = self._pb.Frame()
            f.reseed.has_seed = seed is not None
            f.reseed.seed = 0 if seed is None else int(seed)
            if env_seeds is not None:
                mine = env_seeds[i]
                f.reseed.seeds.extend(0 if x is None else int(x) for x in mine)
                f.reseed.unseeded.extend(e for e, x in enumerate(mine) if x is None)
            c.unanswered.clear()
            c.outbuf += encode_frame(f.SerializeToString())
            self._flush(c)
        self._ready.clear()

    def _close_conn(self, c):
        if not c.open:
            return
        super()._close_conn(c)
        # Batches of a closed node cannot be answered: drop them.
        if any(b.node == c.index for b in self._ready):
            self._ready = collections.deque(b for b in self._ready if b.node != c.index)
        c.unanswered.clear()
        if c.mem is not None:  # its memories unmapped now, not when collected
            shared_memory.unmap(c.mem)
            c.mem = None

    def _teardown(self):
        for c in self._conns:
            if c.sock is not None and c.open:
                self._close_conn(c)
            elif c.sock is not None:
                try:
                    c.sock.close()
                except OSError:
                    pass

    def _unsent(self, c):
        data = bytes(c.outbuf)
        c.outbuf.clear()
        return data

    @property
    def open_nodes(self) -> "list[int]":
        """Indices of the nodes still connected."""
        return [c.index for c in self._conns if c.open]


__all__ = ["Client", "PROTOCOL_VERSION"]
