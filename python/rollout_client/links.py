"""What Client and Stream share of a connection to a node: the addresses,
token and name they are given, the hello, the same-host upgrade on the way
to the welcome (upgrade.py), and the goodbye.

Each keeps its own connection objects (client._Conn, stream._Node: a Link
and what the class reads and writes on it) and says, through the methods
NodeLinks leaves to it, what its hello adds, how it reads a node's first
frame and how it fails a node.
"""
import selectors
import socket
import time
from typing import Any, NoReturn, Optional, Sequence, TypeVar, Union

from . import _proto, shared_memory, upgrade
from .address import open_node_socket, parse_address, read_token
from .errors import ConnectionClosed, ProtocolError
from .framing import encode_frame

PROTOCOL_VERSION = 1

_Self = TypeVar("_Self", bound="NodeLinks")


def node_addresses(addresses: Union[str, Sequence[str]], who: str) -> "list[str]":
    """The node addresses a Client or Stream is given (one, or a list),
    each checked by parse_address; ValueError for none."""
    if isinstance(addresses, str):
        addresses = [addresses]
    if not addresses:
        raise ValueError(f"{who} needs at least one node address")
    for a in addresses:
        parse_address(a)
    return list(addresses)


class Link:
    """What every connection to a node has. Touched only by its owner."""

    def __init__(self, index: int, address: str) -> None:
        self.index = index
        self.address = address
        self.sock: Optional[socket.socket] = None
        self.open = False
        self.shared = False  # a Unix-domain socket on which we asked for the node's memory
        self.fds: "Optional[list[int]]" = None  # in the handshake: what came with the welcome
        self.upgraded = False  # moved from TCP to the node's private socket (upgrade.py)
        self.goodbye: Optional[str] = None  # the node's goodbye reason, once received


class NodeLinks:
    """The handshake and the goodbye of Client and Stream (a mixin)."""

    _sel: selectors.BaseSelector

    def _setup(self, token: Optional[str], token_file: Optional[str], name: str,
               shared_memory_: bool, upgrade_: bool) -> None:
        """The settings every hello carries; the selector and protobuf module."""
        self._token = read_token(token, token_file)
        self._name = name
        self._shared_memory = shared_memory_
        self._upgrade = bool(upgrade_)
        self._pb = _proto.load()
        self._sel = selectors.DefaultSelector()

    # -- what Client and Stream each say ------------------------------------
    def _links(self) -> "list[Any]":
        """Every connection, in node order."""
        raise NotImplementedError

    def _hello_fields(self, c: Any, hello: Any) -> None:
        """Fill this class's own fields of the Hello to c's node."""

    def _first_frame(self, c: Any, deadline: float) -> Any:
        """The node's first frame on c's fresh socket (c.fds: what came
        with it), parsed."""
        raise NotImplementedError

    def _fail(self, c: Any, message: str) -> NoReturn:
        """A protocol violation by c's node: close and raise ProtocolError."""
        raise NotImplementedError

    def _close_conn(self, c: Any) -> None:
        """Close c (once): out of the selector, its socket closed."""
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

    def _unsent(self, c: Any) -> bytes:
        """What is queued for c's node and not sent yet (taken): it goes
        before the goodbye."""
        return b""

    # -- the handshake ------------------------------------------------------
    def _handshake(self, c: Any, deadline: float) -> Any:
        """Connect c and return the node's first frame after the hellos
        (what came with it in c.fds, for the caller to map and close): over
        TCP asking for the same-host upgrade (unless upgrade=False); an
        offer moves c to the node's private socket, or back to TCP, not
        asking again, when that fails."""
        ask = self._upgrade and parse_address(c.address)[1] is not None  # over TCP
        c.upgraded = False
        first = self._hello(c, open_node_socket(c.address, deadline), deadline, upgrade_=ask)
        if first.WhichOneof("body") != "upgrade":
            return first
        if not ask:
            self._fail(c, "an upgrade we did not ask for")
        try:
            offer = upgrade.check_offer(first.upgrade)
        except ProtocolError as e:
            self._fail(c, str(e))
        self._close_conn(c)  # the TCP connection: its part is done
        first = self._upgraded(c, offer, deadline)
        if first is None:  # back to TCP, not asking again
            first = self._hello(c, open_node_socket(c.address, deadline), deadline)
        return first

    def _hello(self, c: Any, sock: socket.socket, deadline: float, upgrade_: bool = False,
               nonce: Optional[bytes] = None) -> Any:
        """Say our hello to the node on sock (c's socket from now on) and
        return its first frame, parsed. ``upgrade_``: ask for the same-host
        upgrade (over TCP); ``nonce``: the one its offer gave (on its
        private socket)."""
        c.sock = sock
        c.open = True
        c.shared = self._shared_memory and shared_memory.local(sock)
        self._drop_fds(c)
        c.fds = [] if c.shared else None
        f = self._pb.Frame()
        f.hello.protocol_version = PROTOCOL_VERSION
        f.hello.role = "learner"
        f.hello.token = self._token
        f.hello.name = self._name
        f.hello.shared_memory = c.shared
        f.hello.upgrade = upgrade_
        if nonce is not None:
            f.hello.upgrade_nonce = nonce
        self._hello_fields(c, f.hello)
        sock.sendall(encode_frame(f.SerializeToString()))
        return self._first_frame(c, deadline)

    def _upgraded(self, c: Any, offer: upgrade.Offer, deadline: float) -> Any:
        """Move c to the node's private socket (upgrade.py): the first
        frame there, a welcome from the node that made the offer, or None
        (logged, the socket closed) when the move failed and c goes back
        to TCP."""
        deadline = min(deadline, time.monotonic() + upgrade.ATTEMPT_S)
        try:
            first = self._hello(c, upgrade.open_private(offer, deadline), deadline,
                                nonce=offer.nonce)
            if upgrade.first_frame(c.address, offer, c.shared, first):
                c.upgraded = True
            return first
        except (OSError, ProtocolError, ConnectionClosed) as e:
            why: Exception = e
        self._close_conn(c)
        self._drop_fds(c)
        upgrade.staying(c.address, offer, why)
        return None

    @staticmethod
    def _drop_fds(c: Any) -> None:
        """Close what came with c's welcome (mapped by now, or not wanted)."""
        if c.fds:
            shared_memory.close_fds(c.fds)
        c.fds = None

    # -- the goodbye ----------------------------------------------------------
    def close(self, reason: str = "learner done", timeout: float = 2.0) -> None:
        """Send Frame{goodbye} to every open node (after what is queued for
        it), waiting at most timeout seconds for each, then close. What
        this learner held unanswered (a Client's batches, a Stream's
        unacknowledged segments) the node hands to another learner."""
        f = self._pb.Frame()
        f.goodbye.reason = reason
        bye = encode_frame(f.SerializeToString())
        for c in self._links():
            if c.open:
                try:
                    c.sock.setblocking(True)
                    c.sock.settimeout(timeout)
                    c.sock.sendall(self._unsent(c) + bye)
                    c.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            self._close_conn(c)
        self._sel.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Link", "NodeLinks", "PROTOCOL_VERSION", "node_addresses"]
