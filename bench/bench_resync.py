#!/usr/bin/python3
"""Resynchronising through crafted damage (docs/benchmarks.md#hardening):
the time rollout-replay --stats takes on a file of 2 MiB of crafted bytes.

A small CartPole recording gets a header that allows records of 256 MiB
(the header is the attacker's too) and, after its first record, 2 MiB of
bytes that at three offsets in four look like the start of a 1 MiB record
(a length prefix, then the byte every batch starts with). A reader that
checks each candidate's CRC over its whole length does a quadratic amount of
work; ours does a linear one. Wall time of the replay, median of --repeats.

usage: bench_resync.py BUILD_DIR [--repeats N] [--mib M]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        n |= (c & 0x7F) << shift
        shift += 7
        i += 1
        if not c & 0x80:
            return n, i


def set_max_record(header, value):
    """The header with field 16 (max_record_bytes) replaced."""
    out, i = bytearray(), 0
    while i < len(header):
        start = i
        key, i = read_varint(header, i)
        wt = key & 7
        if wt == 0:
            _, i = read_varint(header, i)
        elif wt == 2:
            n, i = read_varint(header, i)
            i += n
        else:
            raise ValueError("unexpected wire type")
        if key >> 3 != 16:
            out += header[start:i]
    return bytes(out) + varint(16 << 3) + varint(value)


def crafted(src, dst, mib):
    with open(src, "rb") as f:
        data = f.read()
    n, i = read_varint(data, 8)
    header = set_max_record(data[i:i + n], 256 << 20)
    rest = data[i + n + 4:]
    m, j = read_varint(rest, 0)
    first = rest[:j + m + 4]
    unit = bytes([0x80, 0x80, 0x40, 0x08])  # 1 MiB, 8 KiB, 64 bytes
    damage = unit * ((mib << 20) // len(unit))
    with open(dst, "wb") as f:
        f.write(data[:8] + varint(len(header)) + header + crc32c(header).to_bytes(4, "little"))
        f.write(first + damage + rest[len(first):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mib", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ro_bench_resync_")
    src, dst = os.path.join(tmp, "run.traj"), os.path.join(tmp, "crafted.traj")
    subprocess.run([f"{a.build}/rollout-node", "--quiet", "--num-envs", "8", "--steps", "4000",
                    "--record", src], check=True, stderr=subprocess.DEVNULL)
    crafted(src, dst, a.mib)
    times = []
    for _ in range(a.repeats):
        t0 = time.monotonic()
        p = subprocess.run([f"{a.build}/rollout-replay", "--stats", dst], capture_output=True,
                           text=True, timeout=3600)
        times.append(time.monotonic() - t0)
    notes = [line for line in p.stderr.splitlines() if "resynchronised" in line]
    print(f"crafted file: {os.path.getsize(dst)} bytes ({a.mib} MiB of crafted damage)")
    print(f"rollout-replay --stats: {statistics.median(times):.3f} s (median of {a.repeats}),"
          f" exit {p.returncode}; {notes[0].split('note: ')[-1] if notes else 'no resync'}")
    for f in (src, dst):
        os.unlink(f)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
