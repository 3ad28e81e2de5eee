"""Read a pcap or pcapng capture into numpy arrays: the frames of a replayed stream.

Run once when a ``pcap:`` stream is built (engine side to validate and summarise, worker
side to build its templates), never in the hot path: a loop over the file's records in
plain Python (``struct``), which reads about a million records a second. Both pcap
flavours (microsecond ``a1b2c3d4`` and nanosecond ``a1b23c4d``, either byte order) and
pcapng (section header, interface description with ``if_tsresol``, enhanced, simple and
obsolete packet blocks, either byte order) are read; only the Ethernet link type (1) is
accepted, since the frames go out of an Ethernet port as they are.

:class:`Capture` holds the frames as one flat ``uint8`` buffer with each frame's offset
and captured length, the original length and the timestamp (int64 ns since the epoch).
A damaged file is a :class:`PcapError` whose message says what is wrong and where (the
byte offset), in one line.

Imports: the standard library and numpy only (workers use this).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LINKTYPE_ETHERNET = 1
PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
PCAPNG_SHB = 0x0A0D0D0A
BYTE_ORDER_MAGIC = 0x1A2B3C4D
MAX_FRAME = 65535 + 4
MAX_BYTES = 2 << 30  # a capture larger than 2 GiB is refused: its templates would not fit


class PcapError(ValueError):
    """The file is not a capture tgen can replay (the message says why, in one line)."""


@dataclass(frozen=True)
class Capture:
    """The frames of a capture: ``data[offset[i] : offset[i] + caplen[i]]`` is frame i."""

    data: np.ndarray  # uint8, every frame's captured bytes, concatenated
    offset: np.ndarray  # int64 (n,)
    caplen: np.ndarray  # int64 (n,)
    origlen: np.ndarray  # int64 (n,)
    ts_ns: np.ndarray  # int64 (n,) ns since the epoch
    kind: str  # "pcap" | "pcapng"

    def __len__(self) -> int:
        return len(self.offset)

    def frame(self, i: int) -> bytes:
        o = int(self.offset[i])
        return bytes(self.data[o : o + int(self.caplen[i])])


def read_capture(path: str | Path) -> Capture:
    """The capture at ``path`` (pcap or pcapng, told apart by the magic number)."""
    try:
        buf = Path(path).read_bytes()
    except FileNotFoundError:
        raise PcapError(f"{path}: no such file") from None
    except OSError as e:
        raise PcapError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(buf) > MAX_BYTES:
        raise PcapError(f"{path}: {len(buf) / (1 << 30):.1f} GiB; at most 2 GiB can be replayed")
    if len(buf) < 4:
        raise PcapError(f"{path}: {len(buf)} bytes: not a pcap or pcapng file")
    if buf[:4] in PCAP_MAGICS:
        return _read_pcap(buf, str(path))
    if struct.unpack("<I", buf[:4])[0] == PCAPNG_SHB:
        return _read_pcapng(buf, str(path))
    raise PcapError(f"{path}: not a pcap or pcapng file (magic {buf[:4].hex()})")


class _Records:
    """(data offset, caplen, origlen, ts_ns) of each record, in compact int64 arrays
    (8 bytes a field: a million records take 32 MB, not a list of tuples' 200)."""

    def __init__(self) -> None:
        self.cols = [array("q"), array("q"), array("q"), array("q")]

    def append(self, rec: tuple[int, int, int, int]) -> None:
        a, b, c, d = self.cols
        a.append(rec[0])
        b.append(rec[1])
        c.append(rec[2])
        d.append(rec[3])

    def __len__(self) -> int:
        return len(self.cols[0])

    def last_ts(self) -> int:
        return self.cols[3][-1] if len(self) else 0


def _finish(buf: bytes, recs: _Records, kind: str) -> Capture:
    """The Capture of records ``recs`` into ``buf``."""
    a = [np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64) for c in recs.cols]
    return Capture(np.frombuffer(buf, dtype=np.uint8), a[0], a[1], a[2], a[3], kind)


def _fixed_size_records(buf: bytes, e: str, unit: int):
    """The records at once when every record has the first one's captured length (a
    generated capture, or a snap-length-cut one): (offset, caplen, origlen, ts_ns), or
    None when they do not (then the records are walked one by one)."""
    if len(buf) < 40:
        return None
    incl = struct.unpack_from(e + "I", buf, 32)[0]
    size = 16 + incl
    if incl == 0 or (len(buf) - 24) % size:
        return None
    k = (len(buf) - 24) // size
    dt = np.dtype([("sec", e + "u4"), ("frac", e + "u4"), ("incl", e + "u4"), ("orig", e + "u4"),
                   ("data", f"V{incl}")])  # fmt: skip
    hdr = np.frombuffer(buf, dtype=dt, count=k, offset=24)
    if not (hdr["incl"] == incl).all():
        return None
    off = 24 + 16 + np.arange(k, dtype=np.int64) * size
    ts = hdr["sec"].astype(np.int64) * 1_000_000_000 + hdr["frac"].astype(np.int64) * unit
    return off, np.full(k, incl, dtype=np.int64), hdr["orig"].astype(np.int64), ts


def _read_pcap(buf: bytes, name: str) -> Capture:
    e, unit = PCAP_MAGICS[buf[:4]]
    if len(buf) < 24:
        raise PcapError(f"{name}: truncated pcap header ({len(buf)} of 24 bytes)")
    link = struct.unpack(e + "I", buf[20:24])[0] & 0x0FFFFFFF
    if link != LINKTYPE_ETHERNET:
        raise PcapError(f"{name}: link type {link}, not Ethernet (1): cannot replay it")
    fast = _fixed_size_records(buf, e, unit)
    if fast is not None:
        return Capture(np.frombuffer(buf, dtype=np.uint8), *fast, "pcap")
    rec = struct.Struct(e + "IIII")
    recs = _Records()
    pos, n = 24, len(buf)
    while pos < n:
        if pos + 16 > n:
            raise PcapError(
                f"{name}: truncated record header at byte {pos} (frame {len(recs) + 1})"
            )
        sec, frac, incl, orig = rec.unpack_from(buf, pos)
        if incl > MAX_FRAME or pos + 16 + incl > n:
            raise PcapError(
                f"{name}: frame {len(recs) + 1} at byte {pos}: captured length {incl} runs past "
                "the end of the file (truncated or corrupt)"
            )
        recs.append((pos + 16, incl, orig, sec * 1_000_000_000 + frac * unit))
        pos += 16 + incl
    return _finish(buf, recs, "pcap")


def _pcapng_blocks(buf: bytes, name: str):
    """(byte order, block type, body start, body end, block start) of every block."""
    pos, n, e = 0, len(buf), "<"
    while pos < n:
        if pos + 12 > n:
            raise PcapError(f"{name}: truncated pcapng block at byte {pos}")
        btype = struct.unpack_from(e + "I", buf, pos)[0]
        if btype == PCAPNG_SHB:
            bom = struct.unpack_from("<I", buf, pos + 8)[0]
            if bom == BYTE_ORDER_MAGIC:
                e = "<"
            elif bom == 0x4D3C2B1A:
                e = ">"
            else:
                raise PcapError(f"{name}: bad section header at byte {pos} (byte-order magic)")
        blen = struct.unpack_from(e + "I", buf, pos + 4)[0]
        if blen < 12 or blen % 4 or pos + blen > n:
            raise PcapError(f"{name}: pcapng block at byte {pos} has length {blen}: corrupt")
        yield e, btype, pos + 8, pos + blen - 4, pos
        pos += blen


def _tsresol(buf: bytes, e: str, start: int, end: int) -> int:
    """ns per timestamp unit of an interface description block (option if_tsresol)."""
    pos = start + 8  # linktype, reserved, snaplen
    while pos + 4 <= end:
        code, ln = struct.unpack_from(e + "HH", buf, pos)
        if code == 0:
            break
        if code == 9 and ln >= 1:
            r = buf[pos + 4]
            units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** (r & 0x7F)
            return max(1, round(1e9 / units)) if units <= 1e9 else 1
        pos += 4 + ((ln + 3) & ~3)
    return 1000  # the default: microseconds


def _read_pcapng(buf: bytes, name: str) -> Capture:
    recs = _Records()
    ifaces: list[int] = []  # ns per unit, per interface of the current section
    for e, btype, start, end, at in _pcapng_blocks(buf, name):
        if btype == PCAPNG_SHB:
            ifaces = []
        elif btype == 1:  # interface description
            link = struct.unpack_from(e + "H", buf, start)[0]
            if link != LINKTYPE_ETHERNET:
                raise PcapError(
                    f"{name}: interface {len(ifaces)} has link type {link}, not Ethernet"
                )
            ifaces.append(_tsresol(buf, e, start, end))
        elif btype in (6, 2):  # enhanced packet, obsolete packet
            if btype == 6:
                iface, hi, lo, incl, orig = struct.unpack_from(e + "IIIII", buf, start)
            else:
                iface, _, hi, lo, incl, orig = struct.unpack_from(e + "HHIIII", buf, start)
            if iface >= len(ifaces):
                raise PcapError(
                    f"{name}: packet block at byte {at} names interface {iface}, not described"
                )
            if start + 20 + incl > end:
                raise PcapError(
                    f"{name}: packet block at byte {at}: captured length {incl} is corrupt"
                )
            recs.append((start + 20, incl, orig, ((hi << 32) | lo) * ifaces[iface]))
        elif btype == 3:  # simple packet: no timestamp
            if not ifaces:
                raise PcapError(f"{name}: simple packet block at byte {at} before any interface")
            orig = struct.unpack_from(e + "I", buf, start)[0]
            incl = min(orig, end - start - 4)
            recs.append((start + 4, incl, orig, recs.last_ts()))
    return _finish(buf, recs, "pcapng")


__all__ = ["Capture", "PcapError", "read_capture"]
