"""Exceptions raised by rollout_client. All derive from RolloutError."""


class RolloutError(Exception):
    """Base class of every error this package raises on purpose."""


class ProtocolError(RolloutError):
    """The peer sent something the protocol does not allow (bad frame,
    unexpected message, inconsistent field lengths, ...)."""


class FrameTooLarge(ProtocolError):
    """A frame's declared length exceeds the allowed maximum."""

    def __init__(self, size, limit, where=""):
        self.size, self.limit = size, limit
        at = f" from {where}" if where else ""
        super().__init__(f"frame of {size} bytes{at} exceeds the maximum of {limit} bytes")


class VersionMismatch(ProtocolError):
    """The node speaks another protocol version."""

    def __init__(self, ours, theirs, where=""):
        self.ours, self.theirs = ours, theirs
        at = f"node {where} " if where else "node "
        super().__init__(f"{at}speaks protocol version {theirs}, this client speaks {ours}")


class RemoteError(RolloutError):
    """The node sent Frame{error} (and closes the connection)."""

    def __init__(self, code, message, where=""):
        self.code, self.message, self.where = code, message, where
        at = f"node {where}" if where else "node"
        super().__init__(f"{at} sent error {code}: {message}")


class AuthenticationError(RemoteError):
    """The node refused the token (error code 13, EACCES)."""


class ConnectionClosed(RolloutError):
    """A connection ended. ``clean`` is true when the node said goodbye
    first; ``reason`` holds its reason."""

    def __init__(self, message, clean=False, reason=""):
        self.clean, self.reason = clean, reason
        super().__init__(message)
