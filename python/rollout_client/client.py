"""Client: a learner's connections to one or more rollout nodes.

One TCP connection per node, all driven from the caller's thread through a
``selectors`` selector (no threads). The client performs the handshake,
turns every Frame{observations} into a :class:`Batch` of numpy arrays, and
sends the answer of each batch with :meth:`Client.send_actions`.
"""
import collections
import dataclasses
import os
import selectors
import socket
import time
import warnings
from typing import Optional, Tuple

import numpy as np

from . import _proto, abi2, shared_memory, spaces, spin, wire
from .hotpath import hot
from .errors import (AuthenticationError, ConnectionClosed, ProtocolError, RemoteError,
                     VersionMismatch)
from .framing import DEFAULT_MAX_FRAME, FrameReader, encode_frame

PROTOCOL_VERSION = 1
EPROTO, EACCES = 71, 13


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What a node told us in its Welcome."""
    index: int               # position of the node in the client's address list
    address: str             # "host:port" as given
    node_id: int
    seed: int
    env: str
    num_envs: int
    max_episode_steps: int   # 0: none
    obs_shape: Tuple[int, ...]
    obs_dim: int             # product of obs_shape: obs rows are flattened
    obs_dtype: np.dtype      # the observations' element type (Space.dtype; float32 by default)
    obs_low: np.ndarray      # [obs_dim] in obs_dtype: the bounds the node sent, else the
    obs_high: np.ndarray     # dtype's range (-inf/inf for floats)
    action_kind: str         # "discrete" or "box"
    action_n: int            # discrete: number of actions (0 for box)
    action_shape: Tuple[int, ...]  # box: shape of one action (() for discrete)
    action_low: Optional[np.ndarray]   # box: float32 [action_size]
    action_high: Optional[np.ndarray]
    max_frame: int           # largest frame the node accepts (0: not said)
    node_index: int = 0      # its --node-index: env i seeds from (seed, node_index, i)
    # An env ABI 2 node (docs/protocol.md "SEED mode and env ABI 2"): its
    # welcome's layout (abi2.SeedLayout), and its agents per env. num_envs
    # then counts rows (envs x agents); the obs_* and action_* fields are
    # placeholders (action_kind "abi2"): the layout says it all.
    layout: object = None
    agents: int = 1

    @property
    def action_size(self):
        """Floats per action (box), 1 for discrete."""
        return int(np.prod(self.action_shape)) if self.action_kind == "box" else 1


class Batch:
    """One Frame{observations}: the transitions of some envs of one node.

    Row i is env ``env[i]`` of node ``node``. Per docs/env-api.md, a row
    whose step ended an episode carries the reward and flags of the ended
    episode, the first observation of the next one (``episode_start``) and,
    in ``final_obs[i]``, the ended episode's last observation
    (``has_final_obs[i]``; NaN rows where absent). The same rows come
    compact as ``final_index`` (positions 0..n-1, int64) and ``final_rows``
    (one observation each); ``final_obs`` and ``has_final_obs`` are made
    from them when first read. Every array is the batch's own.

    ``is_first`` (bool [n]) says which rows a recurrent learner starts from
    a zero state: the episode starts, and the rows whose previous step this
    Client did not deliver (envs it takes over from another learner that
    left, a restarted node's envs, a step sent again after a reconnect), so
    that no state is carried into a step it was not computed for
    (docs/python.md "Recurrent learners").
    """

    __slots__ = ("node", "seq", "env", "step", "obs", "reward", "terminated", "truncated",
                 "episode_start", "final_index", "final_rows", "env_range", "_final_obs",
                 "_has_final_obs", "in_memory", "is_first")

    def __init__(self, node, seq, env, step, obs, reward, terminated, truncated,
                 episode_start, final_obs=None, has_final_obs=None, final_index=None,
                 final_rows=None, env_range=None, in_memory=False):
        self.in_memory = in_memory  # came in the node's shared memory: answered there
        self.node = node
        self.seq = seq
        self.env = env                      # uint32 [n]
        self.step = step                    # uint64 [n]
        self.obs = obs                      # [n, obs_dim] of the node's obs_dtype
        self.reward = reward                # float32 [n]
        self.terminated = terminated        # bool [n]
        self.truncated = truncated          # bool [n]
        self.episode_start = episode_start  # bool [n]
        self.is_first = episode_start       # bool [n]; the Client widens it (_mark_first)
        if final_index is None:  # given as final_obs / has_final_obs
            final_index = np.flatnonzero(has_final_obs)
            final_rows = final_obs[final_index]
        self.final_index = final_index      # int64 [k]: rows with a final observation
        self.final_rows = final_rows        # [k, obs_dim]: their final observations
        # (first, stop) when env is the range first .. stop - 1 in order, else None.
        self.env_range = env_range
        self._final_obs = final_obs
        self._has_final_obs = has_final_obs

    @property
    def final_obs(self):
        """[n, obs_dim]: the final observation of rows that have one; NaN
        (float dtypes) or 0 elsewhere."""
        if self._final_obs is None:
            o = self.obs
            f = np.full(o.shape, np.nan if o.dtype.kind == "f" else 0, o.dtype)
            f[self.final_index] = self.final_rows
            self._final_obs = f
        return self._final_obs

    @property
    def has_final_obs(self):
        """bool [n]: the rows that carry a final observation."""
        if self._has_final_obs is None:
            h = np.zeros(len(self.env), bool)
            h[self.final_index] = True
            self._has_final_obs = h
        return self._has_final_obs

    @property
    def n(self):
        return len(self.env)

    def __len__(self):
        return len(self.env)

    def __repr__(self):
        return f"Batch(node={self.node}, seq={self.seq}, n={len(self.env)})"


def parse_address(address):
    """("host", port) from "host:port" (a name or an IPv4 address) or
    "[v6]:port" (an IPv6 address in brackets); (path, None) from
    "unix:PATH", a node's Unix-domain socket on this host. Names are
    resolved when the client connects (every address the name has is
    tried)."""
    if not isinstance(address, str):
        raise ValueError(f"node address {address!r} is not a 'host:port' string")
    if address.startswith("unix:"):
        path = address[5:]
        if not 0 < len(path.encode()) <= 107:
            raise ValueError(f"node address {address!r}: expected unix:PATH, PATH a socket "
                             "file of 1 to 107 bytes")
        return path, None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"node address {address!r} is not host:port (port 1 to 65535; "
                         "IPv6 addresses in brackets: [::1]:5555)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if not host or ":" not in host:
            raise ValueError(f"node address {address!r}: only IPv6 addresses go in brackets")
    elif ":" in host or "[" in host or "]" in host:
        raise ValueError(f"node address {address!r}: put an IPv6 address in brackets, "
                         f"e.g. [{host.strip('[]')}]:{port}")
    return host, int(port)


def open_node_socket(address, deadline):
    """A socket connected to the node at `address` (see parse_address). A
    node that is still starting refuses connections (or has no socket file
    yet): retried with backoff until `deadline` (time.monotonic()), then
    TimeoutError."""
    host, port = parse_address(address)
    delay = 0.02
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            if port is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(left)
                    sock.connect(host)
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((host, port), timeout=left)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except (ConnectionRefusedError, ConnectionResetError, FileNotFoundError) as e:
            if isinstance(e, FileNotFoundError) and port is not None:
                raise
            if time.monotonic() + delay >= deadline:
                raise TimeoutError(f"node {address} refused connections: {e}") from e
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


# Element types an observation space may declare (Space.dtype): numpy names.
# What a welcome may ask of us, as rollout-learner bounds it
# (src/wire/checks.c, src/learner/learner.h): envs (rows) per node, values
# in one space, and the bytes of one observation column (every env's
# observation), which a VecEnv holds a few of. A welcome over these is
# refused, naming the field, before anything of its size is allocated.
MAX_NUM_ENVS = 1 << 20
MAX_SPACE_VALUES = 1 << 20
MAX_OBS_COLUMN_BYTES = 1 << 30
OBS_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64")


def check_actions(info, actions, n, clip_box=True, where=None):
    """The actions for n envs of a node described by ``info`` (a NodeInfo),
    checked and in the wire's types: int64 [n] (discrete) or float32
    [n, action_size] (box: clipped to the bounds with clip_box, else
    refused outside them, as the node would).

    Raises ValueError naming the problem and the first bad row; ``where(k)``
    says what row k is (default "row k"). Nothing is sent: a caller that
    gets ValueError can try again with other actions.
    """
    where = where or (lambda k: f"row {k}")
    a = np.asarray(actions)
    if info.action_kind == "discrete":
        if a.shape not in ((n,), (n, 1)):
            raise ValueError(f"discrete actions for {n} envs must have shape ({n},), "
                             f"got {a.shape}")
        if a.dtype.kind not in "iub":
            raise ValueError(f"discrete actions must be integers, got dtype {a.dtype}")
        a = np.ascontiguousarray(a.reshape(n), np.int64)
        k = hot.first_outside(a, info.action_n)
        if k >= 0:
            bad = int(np.count_nonzero((a < 0) | (a >= info.action_n)))
            raise ValueError(f"discrete actions must lie in [0, {info.action_n}): action "
                             f"{int(a[k])} for {where(k)} ({bad} out of range)")
        return a
    size = info.action_size
    if a.size != n * size or (a.ndim > 1 and a.shape[0] != n):
        raise ValueError(f"box actions for {n} envs must have shape "
                         f"({n}, {', '.join(map(str, info.action_shape))}), got {a.shape}")
    if a.dtype.kind not in "fiub":
        raise ValueError(f"box actions must be numbers, got dtype {a.dtype}")
    a = a.astype(np.float32).reshape(n, size)
    finite = np.isfinite(a).all(axis=1)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"box actions must be finite: {where(k)} has {a[k].tolist()}")
    if info.action_low is None:
        return a
    if clip_box:
        return np.clip(a, info.action_low, info.action_high)
    # Unclipped: the node refuses an action outside the box (error 34) and
    # ends the session of every env; refused here instead, naming the env.
    bad = ((a < info.action_low) | (a > info.action_high)).any(axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"box actions must lie inside the bounds (clip_box=False): "
                         f"{where(k)} has {a[k].tolist()}")
    return a


TOKEN_MAX = 254  # bytes, as the node's --token-file (src/wire/token.h)


def read_token(token=None, token_file=None):
    """The token to present: ``token`` if given, else the contents of
    ``token_file``, else "". A token file holds one line of 1 to 254
    characters (trailing whitespace trimmed), as the node's --token-file; a
    file that others may read gets a warning, as from the C tools."""
    if token is not None and token_file is not None:
        raise ValueError("give token or token_file, not both")
    if token_file is not None:
        token_file = os.fspath(token_file)
        with open(token_file, "rb") as f:
            raw = f.read(TOKEN_MAX + 64)
        try:
            token = raw.decode("utf-8").rstrip()
        except UnicodeDecodeError:
            raise ValueError(f"token file {token_file} is not UTF-8 text") from None
        if "\n" in token or "\r" in token:
            raise ValueError(f"token file {token_file} has more than one line")
        if not token:
            raise ValueError(f"token file {token_file} is empty")
        if os.stat(token_file).st_mode & 0o077:
            warnings.warn(f"token file {token_file} can be read or written by other users: "
                          f"chmod 600 {token_file}", stacklevel=2)
    token = token or ""
    if len(token.encode("utf-8")) > TOKEN_MAX:
        raise ValueError(f"token is longer than {TOKEN_MAX} bytes")
    return token


class _Conn:
    """One node connection's state. Touched only by the owning Client."""

    def __init__(self, index, address, max_frame):
        self.index = index
        self.address = address
        self.sock = None
        self.reader = FrameReader(max_frame, where=address)
        self.outbuf = bytearray()
        self.info = None
        self.last_seq = 0
        self.unanswered = set()  # seqs delivered to the caller and not answered yet
        self.env_cache = {}      # env field bytes -> validated env indices (wire.py)
        self.shared = False      # a Unix-domain socket on which we asked for the node's memory
        self.mem = None          # shared_memory.SeedMemory, when the node offered it
        self.open = False
        self.goodbye = None      # the node's goodbye reason, once received
        self.events = 0          # the selector events registered for sock
        self.last_step = np.zeros(0, np.int64)  # per env (row): the last step delivered, or -1
        self.node_id = None      # whose envs last_step describes


class Client:
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
    wake-up as long; 0 (never) otherwise.
    """

    def __init__(self, addresses, token=None, token_file=None, name=None,
                 max_frame=DEFAULT_MAX_FRAME, connect_timeout=10.0, connect=True,
                 shared_memory=True, spin_us=None):
        if isinstance(addresses, str):
            addresses = [addresses]
        if not addresses:
            raise ValueError("Client needs at least one node address")
        for a in addresses:
            parse_address(a)
        self._token = read_token(token, token_file)
        self._name = name or f"rollout_client/{os.getpid()}"
        self._connect_timeout = connect_timeout
        self._shared_memory = shared_memory
        self._conns = [_Conn(i, a, max_frame) for i, a in enumerate(addresses)]
        if spin_us is None:
            local = all(parse_address(a)[1] is None for a in addresses)  # unix:PATH
            spin_us = spin.DEFAULT_UNIX_US if local else 0
        self._spin = spin.Spin(spin_us)
        self._sel = selectors.DefaultSelector()
        self._ready = collections.deque()  # decoded batches not yet returned
        self._early = []  # connections whose reader holds frames that came with a welcome
        self._pb = _proto.load()
        self.nodes = []
        if connect:
            self.connect()

    # -- connection set-up ------------------------------------------------
    def connect(self):
        """Connect to every node and do the handshakes. Raises
        AuthenticationError / RemoteError when a node refuses,
        VersionMismatch, ProtocolError, or OSError / TimeoutError when a node
        cannot be reached within connect_timeout. On error every connection
        already opened is closed."""
        try:
            for c in self._conns:
                self._handshake(c)
        except BaseException:
            self._teardown()
            raise
        self.nodes = [c.info for c in self._conns]
        return self

    def _handshake(self, c):
        deadline = time.monotonic() + self._connect_timeout
        c.sock = open_node_socket(c.address, deadline)
        c.open = True
        c.shared = self._shared_memory and shared_memory.local(c.sock)
        pb = self._pb
        hello = pb.Frame()
        hello.hello.protocol_version = PROTOCOL_VERSION
        hello.hello.role = "learner"
        hello.hello.token = self._token
        hello.hello.name = self._name
        hello.hello.shared_memory = hello.hello.seed_memory = c.shared
        hello.hello.seed_memory_abi2 = c.shared  # env ABI 2 columns too (abi2.py)
        c.sock.sendall(encode_frame(hello.SerializeToString()))
        fds = []  # what comes with the welcome: its memories (SCM_RIGHTS)
        try:
            self._welcome(c, deadline, fds)
        finally:
            shared_memory.close_fds(fds)  # the mappings keep the memory

    def _welcome(self, c, deadline, fds):
        """Read and check c's welcome; map the memories it offers from fds."""
        span = None
        while span is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"node {c.address} sent no welcome within "
                                   f"{self._connect_timeout:g}s")
            c.sock.settimeout(left)
            try:
                got = c.reader.fill(c.sock, fds if c.shared else None)
            except socket.timeout:
                continue
            except ConnectionResetError as e:
                raise ConnectionClosed(f"node {c.address} reset the connection during the "
                                       f"handshake: {e}") from e
            if not got:
                raise ConnectionClosed(f"node {c.address} closed the connection during the "
                                       "handshake (no welcome)")
            span = self._next_frame(c)
        first = self._parse(c, bytes(c.reader.mv[span[0]:span[1]]))
        kind = first.WhichOneof("body")
        if kind == "error":
            raise self._remote_error(c, first.error)
        if kind != "welcome":
            self._fail(c, f"expected welcome, got {kind or 'an empty frame'}")
        c.info = self._node_info(c, first.welcome)
        c.mem = None
        if first.welcome.HasField("seed_memory"):
            if not c.shared:
                self._fail(c, "offered shared memory we did not ask for")
            i = c.info
            discrete = i.action_kind == "discrete"
            c.mem = abi2.SeedMemory2(fds, first.welcome.seed_memory, i.layout,
                                     i.num_envs, c.address) if i.layout is not None else \
                shared_memory.SeedMemory(fds, first.welcome.seed_memory, i.num_envs,
                                             i.obs_dim, 1 if discrete else i.action_size,
                                             discrete, c.address)
        c.sock.setblocking(False)
        self._sel.register(c.sock, selectors.EVENT_READ, c)
        c.events = selectors.EVENT_READ
        # Frames that came with the welcome stay in the reader: recv()
        # dispatches them, so that connect() raises only for the handshake.
        if c.reader.pending():
            self._early.append(c)

    def _node_info(self, c, w):
        if w.protocol_version != PROTOCOL_VERSION:
            self._send_error(c, EPROTO, f"learner speaks protocol version {PROTOCOL_VERSION}")
            raise VersionMismatch(PROTOCOL_VERSION, w.protocol_version, c.address)
        if not w.HasField("spec"):
            self._fail(c, "welcome has no spec")
        s = w.spec
        if w.HasField("layout"):
            return self._node_info_abi2(c, w)
        o = s.observation
        if o.kind != "box" or not o.shape:
            self._fail(c, f"observation space must be a box with a shape, got kind "
                          f"{o.kind[:20]!r} shape {list(o.shape)[:8]}")
        if not 1 <= s.num_envs <= MAX_NUM_ENVS:
            self._fail(c, f"welcome spec.num_envs {s.num_envs} is not in [1, {MAX_NUM_ENVS}]")
        obs_shape = self._shape(c, "spec.observation.shape", o.shape)
        obs_dim = int(np.prod(obs_shape))
        if (o.dtype or "float32") not in OBS_DTYPES:
            self._fail(c, f"observation dtype {o.dtype[:40]!r} is not one of "
                          f"{', '.join(OBS_DTYPES)}")
        obs_dtype = np.dtype(o.dtype or "float32")
        if s.num_envs * obs_dim * obs_dtype.itemsize > MAX_OBS_COLUMN_BYTES:
            self._fail(c, f"welcome spec.num_envs {s.num_envs} x spec.observation.shape "
                          f"{list(obs_shape)} ({obs_dtype.name}) is over "
                          f"{MAX_OBS_COLUMN_BYTES >> 20} MiB of observations")
        lo, hi = spaces.dtype_bounds(obs_dtype)
        obs_low = np.full(obs_dim, lo, obs_dtype)
        obs_high = np.full(obs_dim, hi, obs_dtype)
        if len(o.low) == obs_dim and len(o.high) == obs_dim:
            # Bounds travel as floats: infinite ones mean the dtype's range.
            fl, fh = np.array(o.low, np.float64), np.array(o.high, np.float64)
            if np.isnan(fl).any() or np.isnan(fh).any() or (fl > fh).any():
                self._fail(c, "observation bounds have NaN or low > high")
            for bound, out in ((fl, obs_low), (fh, obs_high)):
                finite = np.isfinite(bound)
                if (bound[finite] < lo).any() or (bound[finite] > hi).any():
                    self._fail(c, f"observation bounds lie outside {obs_dtype.name}'s range")
                out[finite] = bound[finite].astype(obs_dtype)
        elif len(o.low) or len(o.high):
            self._fail(c, f"observation bounds have {len(o.low)}/{len(o.high)} values, "
                          f"shape needs {obs_dim}")
        a = s.action
        low = high = None
        if a.kind == "discrete":
            if not 1 <= a.n <= MAX_SPACE_VALUES:
                self._fail(c, f"welcome spec.action.n {a.n} is not in [1, {MAX_SPACE_VALUES}]")
            action_n, action_shape = int(a.n), ()
        elif a.kind == "box":
            action_n, action_shape = 0, self._shape(c, "spec.action.shape", a.shape)
            size = int(np.prod(action_shape))
            if len(a.low) == size and len(a.high) == size:
                low = np.array(a.low, dtype=np.float32)
                high = np.array(a.high, dtype=np.float32)
            elif len(a.low) or len(a.high):
                self._fail(c, f"box action bounds have {len(a.low)}/{len(a.high)} values, "
                              f"shape needs {size}")
        else:
            self._fail(c, f"unknown action space kind {a.kind[:20]!r}")
        return NodeInfo(index=c.index, address=c.address, node_id=int(w.node_id),
                        seed=int(w.seed), env=s.env, num_envs=int(s.num_envs),
                        max_episode_steps=int(s.max_episode_steps), obs_shape=obs_shape,
                        obs_dim=obs_dim, obs_dtype=obs_dtype, obs_low=obs_low,
                        obs_high=obs_high, action_kind=a.kind, action_n=action_n,
                        action_shape=action_shape, action_low=low, action_high=high,
                        max_frame=int(w.max_frame), node_index=int(w.node_index))

    def _shape(self, c, field, shape):
        """A box's shape from a welcome: 1 to 4 dims of at least 1, at most
        MAX_SPACE_VALUES values (checked before anything is allocated)."""
        dims = list(shape)
        if not 1 <= len(dims) <= 4 or min(dims) < 1 or \
                int(np.prod(dims, dtype=object)) > MAX_SPACE_VALUES:
            self._fail(c, f"welcome {field} {dims[:8]} is not 1 to 4 dims of at most "
                          f"{MAX_SPACE_VALUES} values")
        return tuple(int(d) for d in dims)

    def _node_info_abi2(self, c, w):
        """NodeInfo of an env ABI 2 node: its layout, rows as num_envs."""
        try:
            lay = abi2.SeedLayout(w.layout)
        except ProtocolError as e:
            self._fail(c, str(e))
        s = w.spec
        if not 1 <= s.num_envs <= MAX_NUM_ENVS // lay.agents:
            self._fail(c, f"welcome spec.num_envs {s.num_envs} of {lay.agents} agents is over "
                          f"{MAX_NUM_ENVS} rows")
        row = sum(int(np.prod(shape)) * dt.itemsize for _, dt, shape in lay.tensors)
        if s.num_envs * lay.agents * row > MAX_OBS_COLUMN_BYTES:
            self._fail(c, f"welcome spec.num_envs {s.num_envs} x {lay.agents} agents x layout "
                          f"tensors of {row} bytes a row is over {MAX_OBS_COLUMN_BYTES >> 20} MiB "
                          "of observations")
        none = np.zeros(0, np.float32)
        return NodeInfo(index=c.index, address=c.address, node_id=int(w.node_id),
                        seed=int(w.seed), env=s.env, num_envs=int(s.num_envs) * lay.agents,
                        max_episode_steps=int(s.max_episode_steps), obs_shape=(), obs_dim=0,
                        obs_dtype=np.dtype(np.float32), obs_low=none, obs_high=none,
                        action_kind="abi2", action_n=0, action_shape=(), action_low=None,
                        action_high=None, max_frame=int(w.max_frame),
                        node_index=int(w.node_index), layout=lay, agents=lay.agents)

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
        elif kind == "goodbye":
            c.goodbye = frame.goodbye.reason
            self._close_conn(c)
        else:
            self._fail(c, f"unexpected {kind or 'empty frame'} after the handshake")

    def _checked_abi2(self, c, m):
        """An abi2.Abi2Batch of an env ABI 2 node's frame, checked."""
        seq = int(m.seq)
        if seq <= c.last_seq:
            self._fail(c, f"observations seq {seq} after seq {c.last_seq}")
        try:
            b = c.mem.batch(m, c.index, c.address) if m.in_memory and c.mem is not None else \
                abi2.batch_of(c.info.layout, m, c.info.num_envs, c.index)
        except ProtocolError as e:
            self._fail(c, str(e))
        c.last_seq = seq
        c.unanswered.add(seq)
        return b

    def _checked(self, c, o):
        """o (a wire.ObsFrame) with every field checked against the node's
        welcome, observations in the node's dtype, and node and env_range
        set."""
        info = c.info
        seq = o.seq
        if seq <= c.last_seq:
            self._fail(c, f"observations seq {seq} after seq {c.last_seq}")
        if o.ranges is not None and not o.in_memory:
            self._fail(c, f"observations seq {seq}: ranges, but not in memory")
        if o.in_memory:
            if c.mem is None:
                self._fail(c, f"observations seq {seq} in memory, but no shared memory was "
                              "agreed")
            if len(o.env) or len(o.obs) or len(o.reward) or len(o.final_obs) or \
                    len(o.final_index):
                self._fail(c, f"observations seq {seq} in memory, yet with columns in the frame")
            try:
                o.env, o.env_range = c.mem.rows(o.ranges, c.address)
            except ProtocolError as e:
                self._fail(c, f"observations seq {seq}: {e}")
            o.env_known = o.env_range is not None  # one range: nothing repeats
            o.step = c.mem.step[o.env_range[0]:o.env_range[1]] \
                if o.env_range is not None else c.mem.step[o.env]
        env = o.env
        n = len(env)
        d = info.obs_dim
        flags = o.flags
        if not o.in_memory and (len(o.step) != n or len(o.obs) != n * d or len(o.reward) != n or
                                len(flags[0]) != n or len(flags[1]) != n or len(flags[2]) != n):
            for field, got, want in (("step", len(o.step), n), ("obs", len(o.obs), n * d),
                                     ("reward", len(o.reward), n),
                                     ("terminated", len(flags[0]), n),
                                     ("truncated", len(flags[1]), n),
                                     ("episode_start", len(flags[2]), n)):
                if got != want:
                    self._fail(c, f"observations seq {seq}: {field} has {got} values, "
                                  f"expected {want} ({n} envs, obs_dim {d})")
        if not o.env_known and n:
            top = int(env.max())
            if top >= info.num_envs:
                self._fail(c, f"observations seq {seq}: env index {top} "
                              f">= num_envs {info.num_envs}")
            if n > 1 and int(np.bincount(env).max()) > 1:  # at most num_envs counters
                self._fail(c, f"observations seq {seq}: an env index appears twice")
            if top - int(env[0]) == n - 1 and (n < 3 or (np.diff(env.astype(np.int64)) == 1).all()):
                o.env_range = (int(env[0]), top + 1)
            if o.env_key is not None:
                wire.remember_env(c.env_cache, o.env_key, env, o.env_range)
        k = len(o.final_index)
        if len(o.final_obs) != k * d:
            self._fail(c, f"observations seq {seq}: final_obs has {len(o.final_obs)} "
                          f"values for {k} final_index entries (obs_dim {d})")
        if k:
            fidx = o.final_index
            if k <= 16:  # the usual few: cheaper as Python ints
                listed = fidx.tolist()
                bad = max(listed) >= n or len(set(listed)) != k
            else:
                bad = int(fidx.max()) >= n or int(np.bincount(fidx).max()) > 1
            if bad:
                self._fail(c, f"observations seq {seq}: final_index out of range or repeated")
        if info.obs_dtype != np.float32:
            o.obs = self._as_obs_dtype(c, seq, "obs", o.obs)
            o.final_obs = self._as_obs_dtype(c, seq, "final_obs", o.final_obs)
        o.node = c.index
        c.last_seq = seq
        c.unanswered.add(seq)
        return o

    def _from_memory(self, c, o):
        """Fill the columns of a checked frame in memory from the node's
        memory: copies, valid until the frame is answered, checked (a NaN or
        infinite value, or flags no node sets, are refused by name: no node
        writes them). (VecEnv reads the memory itself, hotpath.take_frame.)"""
        mem = c.mem
        rows = slice(*o.env_range) if o.env_range is not None else o.env
        f = mem.flags[rows].copy()
        o.obs = mem.obs[rows].reshape(-1).copy()
        o.reward = mem.reward[rows].copy()
        fi = np.flatnonzero(f & shared_memory.HAS_FINAL)
        o.final_index = fi
        o.final_obs = mem.final_obs[o.env[fi]].reshape(-1)
        d = max(1, c.info.obs_dim)
        for name, col, width in (("flags", f, 1), ("reward", o.reward, 1),
                                 ("observation", o.obs, d), ("final observation", o.final_obs, d)):
            bad = np.flatnonzero(f & ~np.uint8(15)) if name == "flags" else \
                np.flatnonzero(~np.isfinite(col))
            if not len(bad):
                continue
            v = col[bad[0]]
            env = int((o.env[fi] if name == "final observation" else o.env)[bad[0] // width])
            what = f"are 0x{int(v):02x}, bits no node sets" if name == "flags" else \
                f"is {'NaN' if np.isnan(v) else 'infinite'}" if name == "reward" else \
                f"holds {'NaN' if np.isnan(v) else 'an infinity'}"
            self._fail(c, f"observations seq {o.seq} in memory: the {name} of env {env} {what}")
        o.flags = shared_memory.flag_rows(f)

    def _mark_first(self, b):
        """b.is_first: its episode starts, and each row whose previous step
        this Client did not deliver (Batch). Per connection; a new node id
        (a restarted node) forgets every env."""
        c = self._conns[b.node]
        env = np.asarray(b.env, np.int64)
        if c.node_id != c.info.node_id:
            c.node_id, c.last_step = c.info.node_id, np.zeros(0, np.int64)
        if len(env) and env.max() >= len(c.last_step):
            grown = np.full(int(env.max()) + 1, -1, np.int64)
            grown[:len(c.last_step)] = c.last_step
            c.last_step = grown
        step = np.asarray(b.step, np.int64)
        b.is_first = np.asarray(b.episode_start, bool) | (step != c.last_step[env] + 1)
        c.last_step[env] = step
        return b

    def _batch(self, o):
        """A Batch, with arrays of its own, from a checked wire.ObsFrame
        (an env ABI 2 node's abi2.Abi2Batch is one already)."""
        if isinstance(o, abi2.Abi2Batch):
            return self._mark_first(o)
        if o.in_memory:
            self._from_memory(self._conns[o.node], o)
        info = self._conns[o.node].info
        n, d, k = len(o.env), info.obs_dim, len(o.final_index)
        dtype = info.obs_dtype
        flags = o.flags
        return self._mark_first(Batch(o.node, o.seq, o.env.copy() if o.env_known else o.env,
                                      o.step.copy() if o.in_memory else o.step,
                                      o.obs.reshape(n, d).astype(dtype),
                                      o.reward.astype(np.float32), flags[0], flags[1], flags[2],
                                      final_index=o.final_index,
                                      final_rows=o.final_obs.reshape(k, d).astype(dtype),
                                      env_range=o.env_range, in_memory=o.in_memory))

    def _as_obs_dtype(self, c, seq, field, values):
        """float32 values from the wire in the node's observation dtype; an
        integer dtype takes only whole numbers in its range (vectorised)."""
        dtype = c.info.obs_dtype
        if dtype.kind in "iu":
            lo, hi = spaces.dtype_bounds(dtype)
            ok = (values == np.floor(values)) & (values >= lo) & (values <= hi)
            if not ok.all():
                k = np.argwhere(~ok)[0]
                self._fail(c, f"observations seq {seq}: {field} value {values[tuple(k)].item()!r} "
                              f"is not a {dtype.name}")
        return values.astype(dtype)

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

    def recv(self, timeout=None):
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

    def batches(self, timeout=None):
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
    def send_actions(self, batch, actions, clip_box=True):
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

    def _queue_checked(self, batch, actions):
        """Queue the answer of batch (actions that check_actions returned)
        without sending it yet: a caller with several batches to answer
        sends them together (_flush). Returns the connection."""
        c = self._answerable(batch)
        if batch.in_memory and c.info.layout is None:  # into the node's memory, at the batch's env rows
            rows = slice(*batch.env_range) if batch.env_range is not None else batch.env
            act = c.mem.act
            act[rows] = actions if act.ndim == 1 else np.reshape(actions, (-1, act.shape[1]))
            body = wire.actions_in_memory(batch.seq)
        elif c.info.layout is not None and batch.in_memory:  # at the batch's rows
            c.mem.act[batch.env] = actions[0]
            c.mem.act_box[batch.env] = actions[1]
            body = wire.actions_in_memory(batch.seq)
        elif c.info.layout is not None:
            body = abi2.actions_message(batch.seq, *actions)
        elif c.info.action_kind == "discrete":
            body = wire.actions_message(batch.seq, discrete=actions)
        else:
            body = wire.actions_message(batch.seq, box=actions)
        c.outbuf += encode_frame(body, c.info.max_frame or None)
        c.unanswered.discard(batch.seq)
        return c

    # -- closing ----------------------------------------------------------------
    def _close_conn(self, c):
        if not c.open:
            return
        c.open = False
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        try:
            c.sock.close()
        except OSError:
            pass
        # Batches of a closed node cannot be answered: drop them.
        if any(b.node == c.index for b in self._ready):
            self._ready = collections.deque(b for b in self._ready if b.node != c.index)
        c.unanswered.clear()

    def _teardown(self):
        for c in self._conns:
            if c.sock is not None and c.open:
                self._close_conn(c)
            elif c.sock is not None:
                try:
                    c.sock.close()
                except OSError:
                    pass

    def close(self, reason="learner done", timeout=2.0):
        """Send Frame{goodbye} to every open node (after any queued
        actions), then close. Unanswered batches are left to the node,
        which resends them to the next learner."""
        f = self._pb.Frame()
        f.goodbye.reason = reason
        bye = encode_frame(f.SerializeToString())
        for c in self._conns:
            if not c.open:
                continue
            try:
                c.sock.setblocking(True)
                c.sock.settimeout(timeout)
                c.sock.sendall(bytes(c.outbuf) + bye)
                c.outbuf.clear()
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._close_conn(c)
        self._sel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def open_nodes(self):
        """Indices of the nodes still connected."""
        return [c.index for c in self._conns if c.open]


__all__ = ["Batch", "Client", "NodeInfo", "OBS_DTYPES", "PROTOCOL_VERSION", "check_actions",
           "open_node_socket", "parse_address", "read_token"]
