"""Length-delimited frames: a protobuf varint byte count, then the bytes.

This is protobuf's standard delimited framing (writeDelimitedTo in Java,
``SerializeDelimitedToOstream`` in C++), so any protobuf library can read a
stream of frames.
"""
from .errors import FrameTooLarge, ProtocolError

DEFAULT_MAX_FRAME = 64 << 20  # bytes; the node tells its own in Welcome.max_frame
_MAX_VARINT_BYTES = 10  # a uint64 needs at most ten 7-bit groups


def encode_varint(value):
    """The varint encoding of a non-negative integer below 2**64."""
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf, pos=0):
    """Decode a varint at buf[pos:]. Returns (value, next position), or
    (None, pos) when buf ends before the varint does. Raises ProtocolError
    on a varint longer than ten bytes."""
    value = 0
    shift = 0
    i = pos
    end = len(buf)
    while i < end:
        if i - pos >= _MAX_VARINT_BYTES:
            raise ProtocolError("frame length prefix is longer than 10 bytes")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            if value >= 1 << 64:
                raise ProtocolError("frame length prefix overflows 64 bits")
            return value, i
        shift += 7
    if i - pos >= _MAX_VARINT_BYTES:
        raise ProtocolError("frame length prefix is longer than 10 bytes")
    return None, pos


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
