"""Protobuf wire format read and written in place with numpy: the hot frames
of the learner protocol without protobuf's per-element work. The package's
one reader and writer of varints and fields (framing.py's length prefixes,
stream.py's segments and this module's frames use these).

An Observations frame (proto/rollout.proto) is mostly packed fields: floats
(``obs``, ``reward``, ``final_obs``) are read as numpy views of the received
bytes, bools as bytes, and varints (``env``, ``step``, ``final_index``) are
decoded vectorised, with a shortcut when every byte is below 0x80. An
Actions frame is written from a numpy array the same way. Every other
frame, and any Observations frame that is not laid out as protobuf encoders
write it (each field once, repeated fields packed), goes through the
generated protobuf module instead, so both paths accept exactly what
protobuf accepts and give the same values.

Nothing here trusts the bytes: a length that runs past its frame, a
truncated or overlong varint, or a float field whose byte count is not a
multiple of 4 raises ProtocolError. No allocation is larger than a small
multiple of the frame, whose size the caller bounded (``max_frame``).
"""
import numpy as np

from .errors import ProtocolError
from .hotpath import hot

_F32 = np.dtype("<f4")
_MAX_VARINT = 10  # bytes of a 64-bit varint
# Observations fields 2..10 (field number: name); all are packed repeated.
_OBS_FIELDS = {2: "env", 3: "step", 4: "obs", 5: "reward", 6: "terminated", 7: "truncated",
               8: "episode_start", 9: "final_index", 10: "final_obs"}
_FLOAT_FIELDS = (4, 5, 10)
_ENV_CACHE_MAX = 64       # distinct env lists remembered per connection
_SHIFTS = np.arange(0, 7 * _MAX_VARINT, 7, dtype=np.uint64)  # of each byte of a varint
_WEIGHTS = 2.0 ** np.arange(0, 49, 7)  # the same as factors, for up to 7 bytes
_FEW_BYTES = 160          # packed varints shorter than this are decoded in Python
_MASK64, _MASK32 = (1 << 64) - 1, (1 << 32) - 1
_HIGH_BITS = bytes(b >> 7 for b in range(256))  # bytes.translate table: a byte's top bit
_OVERLONG = b"\x01" * _MAX_VARINT  # ten continuing bytes: no varint is that long


def read_varint(buf, pos, end, what="a frame"):
    """The varint at buf[pos:end] (a bytes-like object indexed as ints):
    (value, next position). Raises ProtocolError when it is truncated or
    longer than ten bytes."""
    if pos < end and buf[pos] < 0x80:  # most of them: one byte
        return buf[pos], pos + 1
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ProtocolError(f"a truncated or overlong varint in {what}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def fields(buf, pos, end, what="a frame"):
    """(field number, wire type, value or (start, length)) of the fields of
    the message in buf[pos:end], for wire types 0 (varint) and 2 (length
    delimited); fixed-size fields (wire types 1 and 5) are skipped. Raises
    ProtocolError on a field that runs past ``end`` or a group (wire types
    3, 4) or unknown wire type."""
    while pos < end:
        tag, pos = read_varint(buf, pos, end, what)
        field, wt = tag >> 3, tag & 7
        if wt == 0:
            v, pos = read_varint(buf, pos, end, what)
            yield field, wt, v
        elif wt == 2:
            n, pos = read_varint(buf, pos, end, what)
            if n > end - pos:
                raise ProtocolError(f"{what} field runs past its frame")
            yield field, wt, (pos, n)
            pos += n
        elif wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
        else:
            raise ProtocolError(f"wire type {wt} in {what}")
        if pos > end:
            raise ProtocolError(f"{what} field runs past its frame")


def decode_varints(data, what="a packed field", count=None):
    """The values of the packed varints in ``data`` (bytes) as a numpy
    array: uint8 (read-only) when every value has one byte, else uint64.

    The usual layouts take a few operations: every byte below 0x80; with
    ``count`` (the number of values expected), ``count`` copies of one value
    (the step counts of envs that step together) or values of one width;
    values of one or two bytes (env indices below 16384). Any other layout
    takes the general way. Raises ProtocolError on a truncated varint at the
    end or one longer than ten bytes. Bits beyond 64 are dropped, as
    protobuf does."""
    if data.isascii():
        return np.frombuffer(data, np.uint8)
    size = len(data)
    if count and size % count == 0 and size // count <= _MAX_VARINT:
        width = size // count
        first = data[:width]
        if data == first * count:
            value, end = read_varint(first, 0, width, what)
            if end == width:
                return np.full(count, value & _MASK64, np.uint64)
        elif data.translate(_HIGH_BITS) == _width_pattern(width) * count:
            rows = np.frombuffer(data, np.uint8).reshape(count, width) & 0x7F
            if width <= 7:  # below 2**49: exact in float64, and a matrix product is fast
                return (rows @ _WEIGHTS[:width]).astype(np.uint64)
            return np.bitwise_or.reduce(rows.astype(np.uint64) << _SHIFTS[:width], axis=1)
    high = data.translate(_HIGH_BITS)  # 1 for each byte that continues its varint
    if high[-1]:
        raise ProtocolError(f"{what} ends inside a varint")
    if _OVERLONG in high:
        raise ProtocolError(f"{what} has a varint longer than {_MAX_VARINT} bytes")
    d = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(np.frombuffer(high, np.uint8) == 0)  # the last byte of each value
    if b"\x01\x01" not in high:
        # One or two bytes each: the byte before a last byte is its first
        # if it continues (ends[0] - 1 is -1: the last byte, which does not).
        last = d[ends].astype(np.uint64)
        prev = d[ends - 1]
        return np.where(prev >= 0x80, (last << np.uint64(7)) | (prev & 0x7F), last)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    within = np.arange(size) - np.repeat(starts, ends - starts + 1)
    return np.bitwise_or.reduceat((d & 0x7F).astype(np.uint64) << _SHIFTS[within], starts)


def _width_pattern(width):
    """The continuation bits of one varint of width bytes, as bytes."""
    return b"\x01" * (width - 1) + b"\x00"


def _few_varints(mv, pos, end, what, mask):
    """Varints in mv[pos:end] decoded one by one, each ANDed with mask: for
    a few bytes (final_index entries) cheaper than array operations."""
    out = []
    append = out.append
    while pos < end:
        b = mv[pos]
        if b < 0x80:  # one byte (below 128) or two (below 16384): most of them
            append(b)
            pos += 1
        elif pos + 1 < end and mv[pos + 1] < 0x80:
            append((b & 0x7F) | (mv[pos + 1] << 7))
            pos += 2
        else:
            v, pos = read_varint(mv, pos, end, what)
            append(v & mask)
    return out


def encode_varints(values):
    """The packed varint bytes of non-negative integers ``values`` (any
    integer array), vectorised."""
    v = np.asarray(values)
    if v.size == 0:
        return b""
    if v.dtype == np.uint8:
        packed = v.tobytes()
        if packed.isascii():  # every value below 128: one byte each
            return packed
    elif int(v.min()) >= 0 and int(v.max()) < 0x80:
        return v.astype(np.uint8).tobytes()
    # Negative values are int32/int64 two's complement: ten bytes, as
    # protobuf writes them.
    v = v.astype(np.int64).view(np.uint64)
    nbytes = np.ones(len(v), np.int64)
    for k in range(1, _MAX_VARINT):
        nbytes += v >= np.uint64(1 << (7 * k))
    starts = np.cumsum(nbytes) - nbytes
    within = np.arange(int(nbytes.sum())) - np.repeat(starts, nbytes)
    low7 = (np.repeat(v, nbytes) >> (within * 7).astype(np.uint64)) & np.uint64(0x7F)
    more = within < np.repeat(nbytes, nbytes) - 1
    return (low7.astype(np.uint8) | (more.astype(np.uint8) << 7)).tobytes()


def encode_varint(value):
    """The varint bytes of one non-negative integer below 2**64."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"varint out of range: {value}")
        return bytes((value,))
    if value >= 1 << 64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf, pos=0):
    """A length prefix: the varint at buf[pos:], read as it arrives.
    Returns (value, next position), or (None, pos) when buf ends before the
    varint does. Raises ProtocolError on a varint longer than ten bytes or
    above 64 bits."""
    stop = min(len(buf), pos + _MAX_VARINT)
    for i in range(pos, stop):
        if buf[i] < 0x80:  # its last byte is here: read it whole
            value, nxt = read_varint(buf, pos, i + 1, "a frame length prefix")
            if value >= 1 << 64:
                raise ProtocolError("frame length prefix overflows 64 bits")
            return value, nxt
    if stop - pos >= _MAX_VARINT:
        raise ProtocolError("frame length prefix is longer than 10 bytes")
    return None, pos


class ObsFrame:
    """The fields of one Observations message as numpy arrays: ``seq``;
    ``env`` (uint32), ``step`` (uint64), ``final_index`` (int64: the
    positions, 0..n-1, whose final observation is sent), ``flags`` (bool
    [3, n]: the rows ``terminated``, ``truncated``, ``episode_start``);
    ``obs``, ``reward``, ``final_obs`` (flat float32, possibly unaligned
    views of the received bytes: copy what you keep).
    :func:`parse_observations` sets ``env_key`` (the env field's bytes, the
    key of a cache of checked env lists) and, when the cache knew them,
    ``env_known`` and ``env_range``. The client sets ``node`` and
    ``env_range`` ((first, stop) when env is one range in order, else None).
    Nothing is checked against a node's spaces here: the client does that."""

    __slots__ = ("seq", "env", "step", "obs", "reward", "flags", "final_index", "final_obs",
                 "env_key", "env_known", "env_range", "node", "in_memory", "ranges")

    def __init__(self, seq, env, step, obs, reward, flags, final_index, final_obs,
                 env_key=None, env_known=False, env_range=None, in_memory=False):
        self.in_memory = in_memory  # the columns are in the node's memory (the client reads them)
        self.ranges = None  # in_memory: the envs as (first, count) pairs
        self.seq, self.env, self.step, self.obs, self.reward = seq, env, step, obs, reward
        self.flags, self.final_index, self.final_obs = flags, final_index, final_obs
        self.env_key, self.env_known, self.env_range = env_key, env_known, env_range
        self.node = None

    @property
    def terminated(self):
        return self.flags[0]

    @property
    def truncated(self):
        return self.flags[1]

    @property
    def episode_start(self):
        return self.flags[2]


_EMPTY_F32 = np.empty(0, np.float32)
_NO_FINAL = np.empty(0, np.int64)
_NO_ENV = np.empty(0, np.uint32)
_NO_STEP = np.empty(0, np.uint64)
_NO_FLAGS = np.empty((3, 0), bool)


def parse_observations(mv, arr, start, end, env_cache=None):
    """The Frame in ``arr[start:end]`` (a uint8 array; ``mv`` a memoryview
    of the same bytes, indexed as ints) as an :class:`ObsFrame` when it is a
    Frame{observations} in the usual layout, else None: then parse it with
    protobuf (another frame kind, a field repeated or not packed, a group).

    ``env_cache`` (a dict, or None) maps the bytes of env fields already
    seen and checked to (env indices, env_range) (:func:`remember_env`); a
    hit is not decoded again (``env_known``; the array is the cache's: copy
    it to keep it). Raises ProtocolError on bytes no protobuf parser takes."""
    try:  # the walk over the fields, in C (_hotpath.scan_observations)
        scanned = hot.scan_observations(mv, start, end)
    except ValueError as e:
        raise ProtocolError(str(e)) from None
    if scanned is None:
        return None  # another frame kind, or a layout protobuf judges
    seq, in_memory, spans, ranges = scanned

    def raw(field):
        span = spans[field]
        return bytes(mv[span[0]:span[1]]) if span is not None else b""

    if in_memory:  # only ranges: the client reads the rows from the node's memory
        o = ObsFrame(seq, _NO_ENV, _NO_STEP, _EMPTY_F32, _EMPTY_F32, _NO_FLAGS, _NO_FINAL,
                     _EMPTY_F32, in_memory=True)
        o.ranges = ranges
        return o

    floats = []
    for field in _FLOAT_FIELDS:
        span = spans[field]
        if span is None:
            floats.append(_EMPTY_F32)
            continue
        if (span[1] - span[0]) % 4:
            raise ProtocolError(f"observations field {_OBS_FIELDS[field]} has "
                                f"{span[1] - span[0]} bytes, not a whole number of floats")
        floats.append(arr[span[0]:span[1]].view(_F32))
    env_bytes = raw(2)
    known = env_cache.get(env_bytes) if env_cache is not None else None
    if known is not None:
        env, env_range = known
    else:
        env = decode_varints(env_bytes, "observations field env").astype(np.uint32)
        env_range = None
    n = len(env)
    step = decode_varints(raw(3), "observations field step", n).astype(np.uint64, copy=False)
    # terminated, truncated, episode_start: n one-byte bools each, written
    # one after the other with the same tag and length bytes between: one
    # array [3, n] in one cast.
    s6, s7, s8 = spans[6], spans[7], spans[8]
    if n and s6 and s7 and s8 and s6[1] - s6[0] == n and s7[1] - s7[0] == n and \
            s8[1] - s8[0] == n and s8[0] - s7[0] == s7[0] - s6[0] and \
            bytes(mv[s6[0]:s6[1]]).isascii() and bytes(mv[s7[0]:s7[1]]).isascii() and \
            bytes(mv[s8[0]:s8[1]]).isascii():
        flags = np.ndarray((3, n), np.uint8, arr, s6[0], (s7[0] - s6[0], 1)).astype(bool)
    else:
        flags = [decode_varints(raw(f), f"observations field {_OBS_FIELDS[f]}", n) != 0
                 for f in (6, 7, 8)]
        if len(flags[0]) == len(flags[1]) == len(flags[2]):
            flags = np.array(flags)
        else:  # counts that disagree: the client names them
            flags = _Ragged(flags)
    span = spans[9]
    if span is None:
        final_index = _NO_FINAL
    elif span[1] - span[0] < _FEW_BYTES:
        final_index = np.array(_few_varints(mv, span[0], span[1],
                                            "observations field final_index", _MASK32),
                               np.int64)
    else:
        final_index = decode_varints(raw(9), "observations field final_index") \
            .astype(np.uint32).astype(np.int64)
    return ObsFrame(seq, env, step, floats[0], floats[1], flags, final_index,
                    floats[2], env_bytes if env_cache is not None else None,
                    known is not None, env_range, in_memory)


def remember_env(cache, key, env, env_range):
    """Remember env indices checked against the node's welcome under the
    env field's bytes ``key``, with their env_range. The arrays are made
    read-only (a hit hands out the cache's own array). At most
    _ENV_CACHE_MAX entries: a full cache is emptied first (a node sends the
    same few lists again and again; anything else is not worth keeping)."""
    if len(cache) >= _ENV_CACHE_MAX:
        cache.clear()
    env.setflags(write=False)
    cache[key] = (env, env_range)


def observations_from_pb(m):
    """An :class:`ObsFrame` from a parsed protobuf Observations message (the
    layouts parse_observations leaves to protobuf). Its arrays are its own."""
    n = len(m.env)
    flags = [np.array(m.terminated, bool), np.array(m.truncated, bool),
             np.array(m.episode_start, bool)]
    flags = np.array(flags) if len(flags[0]) == len(flags[1]) == len(flags[2]) == n \
        else _Ragged(flags)
    o = ObsFrame(int(m.seq), np.array(m.env, np.uint32), np.array(m.step, np.uint64),
                 np.array(m.obs, np.float32), np.array(m.reward, np.float32), flags,
                 np.array(m.final_index, np.int64), np.array(m.final_obs, np.float32),
                 in_memory=m.in_memory)
    if m.in_memory or len(m.ranges):
        o.ranges = np.array(m.ranges, np.uint32)
    return o


class _Ragged(list):
    """Three flag arrays of different lengths (a malformed frame): indexed
    like the [3, n] array, so that the client can name the bad field."""


def actions_message(seq, discrete=None, box=None, hold=None):
    """The bytes of Frame{actions} answering ``seq`` (frame it with
    framing.encode_frame): ``discrete`` (non-negative integers, any integer
    array) or ``box`` (float32 values, any shape, row-major), and ``hold``
    (env indices not to step: Actions.hold). They are the bytes protobuf
    writes for the same message."""
    if discrete is not None:
        packed, tag = encode_varints(discrete), b"\x12"
    else:
        packed, tag = np.ascontiguousarray(box, _F32).tobytes(), b"\x1a"
    inner = (b"\x08" + encode_varint(seq) if seq else b"") + \
        (tag + encode_varint(len(packed)) + packed if packed else b"")
    return b"\x22" + encode_varint(len(inner) + hold_size(hold)) + inner + hold_field(hold)


def actions_in_memory(seq, hold=None):
    """The bytes of Frame{actions} answering the in-memory frame ``seq``
    (Actions.in_memory: the actions are in the connection's action memory),
    with ``hold`` as actions_message's."""
    inner = (b"\x08" + encode_varint(seq) if seq else b"") + b"\x20\x01" + hold_field(hold)
    return b"\x22" + encode_varint(len(inner)) + inner


def hold_field(hold):
    """Actions.hold (field 5, packed) of env indices, or b"" for none."""
    if hold is None or not len(hold):
        return b""
    packed = encode_varints(np.asarray(hold, np.int64))
    return b"\x2a" + encode_varint(len(packed)) + packed


def hold_size(hold):
    return len(hold_field(hold))


__all__ = ["ObsFrame", "actions_in_memory", "actions_message", "hold_field", "decode_varints", "encode_varint", "encode_varints",
           "fields", "observations_from_pb", "parse_observations", "read_varint",
           "remember_env"]
