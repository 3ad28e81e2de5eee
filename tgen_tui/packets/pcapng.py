"""pcapng, written a batch at a time with numpy, and read back block by block.

The capture writes one Section Header Block, one Interface Description Block per port
and direction (``p1 rx``, ``p0 tx``), then Enhanced Packet Blocks with nanosecond
timestamps (``if_tsresol`` 9), the frame's direction in ``epb_flags`` and a comment
(the stream, its sequence number and lane). :func:`packet_blocks` lays out a whole batch
of EPBs with vectorised scatters (no per-frame Python: a capture may keep 100,000
frames a second); :func:`iter_packets` is the per-block reader for tests and the
console's few recent frames.

Byte order: the host's (the Section Header's byte-order magic says which); Wireshark,
tshark and scapy read both.

Imports: the standard library and numpy (workers use this).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

SHB_TYPE = 0x0A0D0D0A
IDB_TYPE = 1
EPB_TYPE = 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
LINKTYPE_ETHERNET = 1
FLAG_INBOUND = 1
FLAG_OUTBOUND = 2
EPB_FIXED = 28  # type, length, interface, ts high, ts low, captured, original


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("=HH", code, len(value)) + value + b"\0" * (_pad4(len(value)) - len(value))


def _block(btype: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("=II", btype, total) + body + struct.pack("=I", total)


def section_header(comment: str | None = None, application: str = "tgen-tui") -> bytes:
    """A Section Header Block (version 1.0, section length unknown)."""
    opts = b""
    if comment:
        opts += _option(1, comment.encode())
    opts += _option(4, application.encode()) + _option(0, b"")
    return _block(SHB_TYPE, struct.pack("=IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + opts)


def interface_block(name: str, description: str = "", snaplen: int = 262144) -> bytes:
    """An Interface Description Block: Ethernet, nanosecond timestamps."""
    opts = _option(2, name.encode())
    if description:
        opts += _option(3, description.encode())
    opts += _option(9, b"\x09") + _option(0, b"")
    return _block(IDB_TYPE, struct.pack("=HHI", LINKTYPE_ETHERNET, 0, snaplen) + opts)


def ragged_copy(
    dst: np.ndarray, dst_at: np.ndarray, src: np.ndarray, src_at: np.ndarray, lens: np.ndarray
) -> None:
    """``dst[dst_at[i] : dst_at[i] + lens[i]] = src[src_at[i] : src_at[i] + lens[i]]`` for
    every i, in one fancy-indexed copy."""
    lens = lens.astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return
    seg0 = np.cumsum(lens) - lens  # where each segment starts in the concatenation
    within = np.arange(total, dtype=np.int64) - np.repeat(seg0, lens)
    dst[np.repeat(dst_at.astype(np.int64), lens) + within] = src[
        np.repeat(src_at.astype(np.int64), lens) + within
    ]


def epb_lengths(caplen: np.ndarray, comment_len: np.ndarray) -> np.ndarray:
    """Each Enhanced Packet Block's length as :func:`packet_blocks` lays it out: the fixed
    part, the data padded to 4, the comment option (when there is one), epb_flags, the
    end of options and the trailing length."""
    cap = caplen.astype(np.int64)
    clen = comment_len.astype(np.int64)
    copt = np.where(clen > 0, 4 + ((clen + 3) & ~3), 0)
    return EPB_FIXED + ((cap + 3) & ~3) + copt + 8 + 4 + 4


def packet_blocks(
    data: np.ndarray,
    data_at: np.ndarray,
    caplen: np.ndarray,
    origlen: np.ndarray,
    ts_ns: np.ndarray,
    if_id: np.ndarray,
    flags: np.ndarray,
    comments: np.ndarray | None = None,
    comment_at: np.ndarray | None = None,
    comment_len: np.ndarray | None = None,
) -> bytes:
    """Enhanced Packet Blocks for a batch: frame ``i`` is ``data[data_at[i]:][:caplen[i]]``
    (uint8), its comment ``comments[comment_at[i]:][:comment_len[i]]`` (none when 0)."""
    n = len(caplen)
    if n == 0:
        return b""
    cap = caplen.astype(np.int64)
    dpad = (cap + 3) & ~3
    if comments is None or comment_at is None or comment_len is None:
        clen = np.zeros(n, dtype=np.int64)
        comments, comment_at = np.zeros(0, np.uint8), np.zeros(n, np.int64)
    else:
        clen = comment_len.astype(np.int64)
    has_c = clen > 0
    copt = np.where(has_c, 4 + ((clen + 3) & ~3), 0)
    total = epb_lengths(cap, clen)
    starts = np.cumsum(total) - total
    out = np.zeros(int(total.sum()), dtype=np.uint8)
    w = out.view(np.uint32)
    s4 = starts >> 2
    ts = ts_ns.astype(np.int64)
    w[s4] = EPB_TYPE
    w[s4 + 1] = total
    w[s4 + 2] = if_id
    w[s4 + 3] = (ts >> 32) & 0xFFFFFFFF
    w[s4 + 4] = ts & 0xFFFFFFFF
    w[s4 + 5] = cap
    w[s4 + 6] = origlen
    ragged_copy(out, starts + EPB_FIXED, data, data_at, cap)
    opt = starts + EPB_FIXED + dpad
    if has_c.any():
        w[opt[has_c] >> 2] = 1 | (clen[has_c] << 16)
        ragged_copy(out, opt[has_c] + 4, comments, comment_at[has_c], clen[has_c])
    fl = (opt + copt) >> 2
    w[fl] = 2 | (4 << 16)
    w[fl + 1] = flags
    w[((starts + total) >> 2) - 1] = total  # the end-of-options word stays 0
    return out.tobytes()


@dataclass(frozen=True)
class Packet:
    """One Enhanced Packet Block as read back."""

    interface: int
    ts_ns: int
    origlen: int
    data: bytes
    comment: str | None
    flags: int


def _options(body: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    i = 0
    while i + 4 <= len(body):
        code, ln = struct.unpack_from("=HH", body, i)
        if code == 0:
            break
        out.setdefault(code, body[i + 4 : i + 4 + ln])
        i += 4 + _pad4(ln)
    return out


def iter_packets(buf: bytes) -> Iterator[Packet]:
    """Every EPB of a host-order pcapng buffer (complete blocks only)."""
    i = 0
    while i + 12 <= len(buf):
        btype, total = struct.unpack_from("=II", buf, i)
        if total < 12 or i + total > len(buf):
            return
        if btype == EPB_TYPE:
            ifc, hi, lo, cap, orig = struct.unpack_from("=IIIII", buf, i + 8)
            data = buf[i + EPB_FIXED : i + EPB_FIXED + cap]
            opts = _options(buf[i + EPB_FIXED + _pad4(cap) : i + total - 4])
            comment = opts[1].decode(errors="replace") if 1 in opts else None
            flags = struct.unpack("=I", opts[2])[0] if len(opts.get(2, b"")) == 4 else 0
            yield Packet(ifc, (hi << 32) | lo, orig, data, comment, flags)
        i += total


def interface_names(buf: bytes) -> list[str]:
    """The ``if_name`` of every IDB in order (their index is an EPB's interface)."""
    names, i = [], 0
    while i + 12 <= len(buf):
        btype, total = struct.unpack_from("=II", buf, i)
        if total < 12 or i + total > len(buf):
            break
        if btype == IDB_TYPE:
            names.append(_options(buf[i + 16 : i + total - 4]).get(2, b"").decode())
        i += total
    return names
