"""Length-delimited frames: a protobuf varint byte count, then the bytes.

This is protobuf's standard delimited framing (writeDelimitedTo in Java,
``SerializeDelimitedToOstream`` in C++), so any protobuf library can read a
stream of frames. The varints are wire.py's (the package's one reader and
writer of the protobuf wire format).
"""
import numpy as np

from . import shared_memory
from .errors import FrameTooLarge
from .wire import decode_varint, encode_varint

DEFAULT_MAX_FRAME = 64 << 20  # bytes; the node tells its own in Welcome.max_frame


def encode_frame(payload, max_frame=None):
    """One frame: varint length of payload, then payload. Raises
    FrameTooLarge when payload is larger than max_frame (if given)."""
    if max_frame is not None and len(payload) > max_frame:
        raise FrameTooLarge(len(payload), max_frame, "this client (outgoing)")
    return encode_varint(len(payload)) + bytes(payload)


class FrameDecoder:
    """Splits a byte stream into frames, whatever the read sizes.

    ``feed(data)`` appends bytes and returns the list of complete frames
    (bytes) now available; a partial frame stays buffered. A length prefix
    above ``max_frame`` raises FrameTooLarge as soon as the prefix is read,
    before the body is buffered.
    """

    def __init__(self, max_frame=DEFAULT_MAX_FRAME, where=""):
        self.max_frame = max_frame
        self.where = where
        self._buf = bytearray()
        self._pos = 0  # start of the first unconsumed byte in _buf

    def feed(self, data):
        if data:
            self._buf += data
        frames = []
        buf = self._buf
        while True:
            size, body = decode_varint(buf, self._pos)
            if size is None:
                break
            if size > self.max_frame:
                raise FrameTooLarge(size, self.max_frame, self.where)
            if len(buf) - body < size:
                break
            frames.append(bytes(buf[body:body + size]))
            self._pos = body + size
        if self._pos:
            del buf[:self._pos]
            self._pos = 0
        return frames

    def pending(self):
        """Bytes buffered that do not form a complete frame yet."""
        return len(self._buf) - self._pos


class FrameReader:
    """Frames read from a socket into one reusable buffer and parsed in place.

    ``fill(sock)`` reads what the socket has (``recv_into``, no copy) and
    returns the byte count (0: the peer closed); ``next_frame()`` returns
    the (start, end) span of the next complete frame's body in ``buf`` (a
    uint8 array; ``mv`` is a memoryview of it, indexed as ints), or None.
    Spans, and views of them, stay valid until the next ``fill``: only
    ``fill`` moves bytes. The buffer grows only for a frame larger than it,
    to that frame's size; a length prefix above ``max_frame`` raises
    FrameTooLarge before any of the body is read.
    """

    def __init__(self, max_frame=DEFAULT_MAX_FRAME, where="", size=1 << 18):
        self.max_frame = max_frame
        self.where = where
        self._size = size
        self.buf = np.empty(size, np.uint8)
        self.mv = memoryview(self.buf)
        self.start = 0  # first byte not yet returned as a frame
        self.end = 0    # end of the bytes read
        self._need = 0  # bytes from start that the incomplete frame there needs

    def fill(self, sock, fds=None):
        """Read from sock into the free room (made first if short). Returns
        the byte count, 0 at EOF; a non-blocking socket with nothing to read
        raises BlockingIOError, as recv_into does. With a list ``fds``, the
        file descriptors that come with the bytes are appended to it
        (shared_memory.recv_into); without, the kernel closes any."""
        if self.start == self.end:
            self.start = self.end = 0
            if len(self.buf) > 4 * self._size:  # grown for a large frame: give it back
                self.buf = np.empty(self._size, np.uint8)
                self.mv = memoryview(self.buf)
        size = len(self.buf)
        if size - self.end < 65536 or self.start + self._need > size:
            self._move(max(size, self._need + 65536))
        if fds is None:
            got = sock.recv_into(self.mv[self.end:])
        else:
            got = shared_memory.recv_into(sock, self.mv[self.end:], fds, self.where)
        self.end += got
        return got

    def _move(self, size):
        """Move the unread bytes to the start of a buffer of size bytes
        (this one when it is large enough)."""
        left = self.end - self.start
        if size > len(self.buf):
            fresh = np.empty(size, np.uint8)
            fresh[:left] = self.buf[self.start:self.end]
            self.buf, self.mv = fresh, memoryview(fresh)
        elif self.start:
            self.buf[:left] = self.buf[self.start:self.end]  # numpy copes with the overlap
        self.start, self.end = 0, left

    def next_frame(self):
        """The (start, end) of the next complete frame's body, or None."""
        mv, pos, end = self.mv, self.start, self.end
        if pos >= end:
            self._need = 0
            return None
        if mv[pos] < 0x80:
            size, body = mv[pos], pos + 1
        else:
            size, body = decode_varint(mv[:end], pos)
            if size is None:
                self._need = end - pos + 1
                return None
        if size > self.max_frame:
            raise FrameTooLarge(size, self.max_frame, self.where)
        if end - body >= size:
            self.start = body + size
            self._need = 0
            return body, body + size
        self._need = body - pos + size
        return None

    def pending(self):
        """Bytes read that do not form a complete frame yet."""
        return self.end - self.start
