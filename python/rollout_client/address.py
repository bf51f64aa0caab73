"""Where a node is and how a learner proves it may connect: node addresses
("host:port", "[v6]:port", "unix:PATH"), the connected socket (retried while
the node starts), and the token a learner presents (docs/protocol.md
"Handshake")."""
import os
import socket
import time
import warnings
from typing import Optional, Tuple, Union


def parse_address(address: str) -> Tuple[str, Optional[int]]:
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


def open_node_socket(address: str, deadline: float) -> socket.socket:
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


TOKEN_MAX = 254  # bytes, as the node's --token-file (src/wire/token.h)


def read_token(token: Optional[str] = None,
               token_file: Union[str, "os.PathLike[str]", None] = None) -> str:
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


__all__ = ["TOKEN_MAX", "open_node_socket", "parse_address", "read_token"]
