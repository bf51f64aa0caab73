"""The same-host upgrade, learner side (docs/protocol.md "Same-host
upgrade"): a TCP hello that asks for it may be answered with Frame{upgrade}
(the node's private Unix-domain socket, a one-use nonce, the node's id)
instead of a welcome. This module checks that offer as strictly as
rollout-learner does (src/wire/checks.c ro__check_upgrade), opens the
private socket, and judges whoever answers there; Client and Stream do the
hellos. What happened is logged on the ``rollout_client`` logger: "on this
host: moved from TCP to unix:PATH" or "staying on TCP: ...".
"""
import logging
import socket
import time
from typing import Any, NamedTuple

from .errors import ConnectionClosed, ProtocolError

log = logging.getLogger("rollout_client")

MAX_PATH = 107   # bytes: sockaddr_un's sun_path less its NUL
NONCE_BYTES = 16
ATTEMPT_S = 5.0  # the private socket's welcome within this, else back to TCP (as rollout-learner)


class Offer(NamedTuple):
    """A checked Frame{upgrade}."""
    path: str
    nonce: bytes
    node_id: int


def check_offer(u: Any) -> Offer:
    """The Offer of a node's Upgrade message, or
    ProtocolError naming what is wrong: a path that is not absolute, longer
    than MAX_PATH bytes, or holds a NUL or another control character (the
    kernel would cut it or read another name: a path we would not reach as
    the node named it), or a nonce that is not NONCE_BYTES bytes."""
    path = u.path
    n = len(path.encode("utf-8", "surrogatepass"))
    if n == 0 or n > MAX_PATH or not path.startswith("/"):
        raise ProtocolError(f"an upgrade to a path of {n} bytes, not an absolute "
                            f"socket path of at most {MAX_PATH}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise ProtocolError(f"an upgrade path with a control character "
                            f"({path[:MAX_PATH]!r})")
    if len(u.nonce) != NONCE_BYTES:
        raise ProtocolError(f"an upgrade nonce of {len(u.nonce)} bytes, "
                            f"not {NONCE_BYTES}")
    return Offer(path, bytes(u.nonce), int(u.node_id))


def open_private(offer: Offer, deadline: float) -> socket.socket:
    """A socket connected to the offer's path, with the rest of the attempt
    (ATTEMPT_S at most, and not past ``deadline``) as its timeout. No
    retries: a node that offered its socket listens on it already. OSError
    (or TimeoutError) when it cannot be reached."""
    left = min(ATTEMPT_S, deadline - time.monotonic())
    if left <= 0:
        raise TimeoutError("no time left for the upgrade")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(left)
        sock.connect(offer.path)
    except BaseException:
        sock.close()
        raise
    return sock


def check_welcome_id(offer: Offer, node_id: int) -> None:
    """ProtocolError unless the welcome on the private socket comes from the
    node that offered it: whoever else answers there is not that node (a
    hostile node's offer of another node's socket)."""
    if int(node_id) != offer.node_id:
        raise ProtocolError(f"welcomed by node id {int(node_id):016x}, not "
                            f"{offer.node_id:016x}: not its socket")


def first_frame(address: str, offer: Offer, shared: bool, first: Any) -> bool:
    """The node's first frame on the private socket: an error raises
    ConnectionClosed; a welcome must come from the node that made the offer,
    and then the move is done (logged: True); anything else is for the
    caller's welcome check to name, as over TCP (False)."""
    kind = first.WhichOneof("body")
    if kind == "error":
        raise ConnectionClosed(f"refused: {first.error.message[:200]}")
    if kind != "welcome":
        return False
    check_welcome_id(offer, first.welcome.node_id)
    moved(address, offer, shared)
    return True


def moved(address: str, offer: Offer, shared: bool) -> None:
    """Log a done upgrade."""
    log.info("node %s: on this host: moved from TCP to unix:%s, %s", address, offer.path,
             "shared memory" if shared else "no shared memory (shared_memory=False)")


def staying(address: str, offer: Offer, why: object) -> None:
    """Log a failed upgrade: the caller connects over TCP again, without
    asking."""
    # why may hold the words of whoever answered there: one line, printable.
    shown = "".join(ch if ch.isprintable() else "?" for ch in str(why)[:300])
    log.warning("node %s: staying on TCP: the node's private socket %s: %s", address,
                offer.path, shown)


__all__ = ["ATTEMPT_S", "MAX_PATH", "NONCE_BYTES", "Offer", "check_offer", "check_welcome_id",
           "first_frame", "log", "moved", "open_private", "staying"]
