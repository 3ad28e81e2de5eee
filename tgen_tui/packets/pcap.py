"""pcap export: the first N frames of each enabled stream, interleaved in schedule order.

Each record's timestamp is the frame's due time (seconds since the port start, from
:mod:`tgen_tui.packets.schedule`), and the signature carries the same time, so a pcap
of the same profile and seed is byte-identical from run to run. Nanosecond pcap
(magic 0xa1b23c4d), link type Ethernet; tshark, tcpdump and scapy read it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.program import StreamProgram
from tgen_tui.packets.schedule import DueTimes

PCAP_NS_MAGIC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1


def scheduled_frames(streams: list[StreamProgram], count: int) -> list[tuple[float, int, bytes]]:
    """(due time s, stream index, frame) for the first ``count`` frames of each stream, in due order."""
    out: list[tuple[float, int, int, bytes]] = []
    for p in streams:
        dt = DueTimes(p.schedule)
        total = dt.total()
        n = count if total is None else min(count, total)
        if n <= 0:
            continue
        due = dt.due(0, n)
        ts = np.round(due * 1e9).astype(np.uint64)
        frames = BatchBuilder(p, max_batch=min(n, 4096)).frames(0, n, ts)
        out.extend((float(due[i]), p.index, i, frames[i]) for i in range(n))
    out.sort(key=lambda r: (r[0], r[1], r[2]))
    return [(t, s, f) for t, s, _, f in out]


def write_pcap(path: str | Path, records: list[tuple[float, int, bytes]]) -> int:
    """Write records to a nanosecond pcap file; returns the number of frames written."""
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET))
        for t, _, frame in records:
            ns = round(t * 1e9)
            sec, nsec = divmod(ns, 1_000_000_000)
            fh.write(struct.pack("<IIII", sec, nsec, len(frame), len(frame)))
            fh.write(frame)
    return len(records)
