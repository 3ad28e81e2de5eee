"""pcap export: the first N frames of each enabled stream, interleaved in schedule order.

Each record's timestamp is the frame's due time (seconds since the port start, from
:mod:`tgen_tui.packets.schedule`), and the signature carries the same time, so a pcap
of the same profile and seed is byte-identical from run to run. Nanosecond pcap
(magic 0xa1b23c4d), link type Ethernet; tshark, tcpdump and scapy read it.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from tgen_tui.packets.lanes import make_builder
from tgen_tui.packets.program import StreamProgram
from tgen_tui.packets.schedule import DueTimes

PCAP_NS_MAGIC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1


def _stream_records(
    p: StreamProgram, count: int, chunk: int = 4096
) -> Iterator[tuple[float, int, int, bytes]]:
    """(due, stream index, seq, frame) of one stream's first ``count`` frames, built in chunks."""
    total = DueTimes(p.schedule).total()
    n = count if total is None else min(count, total)
    b = make_builder(p, None, max_batch=max(1, min(n, chunk)))
    own = getattr(b, "due_times", None)  # a replayed capture: its recorded pace
    dt = own(p.schedule) if own is not None else DueTimes(p.schedule)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        due = dt.due(start, k)
        ts = np.round(due * 1e9).astype(np.uint64)
        frames = b.frames(start, k, ts)
        for i in range(k):
            yield float(due[i]), p.index, start + i, frames[i]


def iter_scheduled_frames(
    streams: list[StreamProgram], count: int
) -> Iterator[tuple[float, int, bytes]]:
    """The first ``count`` frames of each stream, merged in due-time order (memory: one chunk per stream)."""
    merged = heapq.merge(
        *(_stream_records(p, count) for p in streams), key=lambda r: (r[0], r[1], r[2])
    )
    for t, s, _, f in merged:
        yield t, s, f


def write_pcap(path: str | Path, records: Iterable[tuple[float, int, bytes]]) -> int:
    """Write records to a nanosecond pcap file; returns the number of frames written."""
    n = 0
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET))
        for t, _, frame in records:
            ns = round(t * 1e9)
            sec, nsec = divmod(ns, 1_000_000_000)
            fh.write(struct.pack("<IIII", sec, nsec, len(frame), len(frame)))
            fh.write(frame)
            n += 1
    return n
