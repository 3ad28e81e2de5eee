"""A capture tap: a TPACKET_V3 ring on one interface with a kernel BPF filter, both
directions, whole frames, parsed per block with numpy.

It is a socket of its own next to the workers' (the kernel gives every packet socket
its copy), so a capture costs the send and receive paths nothing while none runs; with
one running, the kernel runs the filter on each frame and copies only what matches.
The egress copy is taken as the device transmits (after any qdisc): byte for byte the
frame the worker built, and only if it really left. What the ring could not hold the
kernel counts (``PACKET_STATISTICS`` drops: "ring full").

Per frame (:class:`CapBatch`): the direction (``sll_pkttype``: PACKET_OUTGOING is tx),
the kernel's CLOCK_REALTIME stamp in ns, the original length, the bytes with a tag the
device moved into the metadata put back in the frame (as libpcap does), and the
signature's stream and sequence number read from the frame's end.

The filter is attached before the socket is bound, so nothing unfiltered ever arrives.
Imports: the standard library and numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tgen_tui.packets.bpf import sock_fprog
from tgen_tui.packets.pcapng import ragged_copy
from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC
from tgen_tui.worker.rxring import (
    BD_BLK_LEN,
    BD_FIRST,
    BD_NUM_PKTS,
    BD_STATUS,
    H_LEN,
    H_MAC,
    H_NSEC,
    H_SEC,
    H_SNAPLEN,
    H_STATUS,
    H_VLAN_TCI,
    H_VLAN_TPID,
    TP_STATUS_KERNEL,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    RxRing,
    chain_offsets_doubling,
    chain_offsets_fast,
)

SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4
SLL_PKTTYPE = 48 + 10  # TPACKET_ALIGN(sizeof(tpacket3_hdr)) + offsetof(sockaddr_ll, pkttype)


@dataclass
class CapBatch:
    """Captured frames, one row each; ``data[at[i]:at[i] + caplen[i]]`` is frame i."""

    data: np.ndarray  # uint8, the frames back to back
    at: np.ndarray  # int64
    caplen: np.ndarray  # int64, bytes held (with a restored tag)
    origlen: np.ndarray  # int64, length on the wire (with a restored tag)
    ts_ns: np.ndarray  # int64, CLOCK_REALTIME ns of the kernel's stamp
    tx: np.ndarray  # bool, outgoing
    signed: np.ndarray  # bool, carries the test signature
    stream: np.ndarray  # int64, signature stream index (lane-strided)
    seq: np.ndarray  # int64

    ROWS = ("caplen", "origlen", "ts_ns", "tx", "signed", "stream", "seq")

    def __len__(self) -> int:
        return len(self.caplen)

    def take(self, idx: np.ndarray) -> CapBatch:
        """Rows ``idx`` (the frames' bytes stay where they are)."""
        return CapBatch(
            self.data,
            self.at[idx],
            self.caplen[idx],
            self.origlen[idx],
            self.ts_ns[idx],
            self.tx[idx],
            self.signed[idx],
            self.stream[idx],
            self.seq[idx],
        )


def concat(parts: list[CapBatch]) -> CapBatch:
    """One batch of several (the frames' bytes copied once into one buffer)."""
    if len(parts) == 1:
        return parts[0]
    lens = [len(p.data) for p in parts]
    base = np.cumsum(lens) - lens
    return CapBatch(
        np.concatenate([p.data for p in parts]),
        np.concatenate([p.at + b for p, b in zip(parts, base, strict=True)]),
        *(np.concatenate([getattr(p, f) for p in parts]) for f in CapBatch.ROWS),
    )


class CaptureRing(RxRing):
    """A filtered tap on ``interface`` (create it in the port's namespace): the receive
    ring's socket, ring and statistics, with a kernel filter and its own per-frame parse."""

    def __init__(
        self,
        interface: str,
        insns: list[tuple[int, int, int, int]],
        ring_mb: int = 32,
        rx: bool = True,
        tx: bool = True,
        frame_size: int = 2048,
        retire_ms: int = 10,
    ):
        fprog, keep = sock_fprog(insns)  # keep: the instructions, alive until set
        # small blocks, many of them: a block retires after ``retire_ms`` however full,
        # so the ring holds block_nr x retire_ms of traffic at low rates
        super().__init__(
            interface,
            block_size=1 << 18,
            block_nr=max(8, int(ring_mb) * 4),
            frame_size=frame_size,
            retire_ms=retire_ms,
            ignore_outgoing=not tx,
            fprog=fprog,
        )
        del keep
        self.want_rx, self.want_tx = rx, tx

    def _parse(self, b: int) -> CapBatch | None:
        u8, u16, u32 = self._u8[b], self._u16[b], self._u32[b]
        n = int(u32[BD_NUM_PKTS >> 2])
        if n == 0:
            return None
        first = int(u32[BD_FIRST >> 2])
        offs = chain_offsets_fast(u32, first, n)
        if offs is None:
            offs = chain_offsets_doubling(u32, first, n, int(u32[BD_BLK_LEN >> 2]))
        w = offs >> 2
        snap = u32[w + (H_SNAPLEN >> 2)].astype(np.int64)
        length = u32[w + (H_LEN >> 2)].astype(np.int64)
        status = u32[w + (H_STATUS >> 2)]
        mac = u16[(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
        ts = u32[w + (H_SEC >> 2)].astype(np.int64) * 1_000_000_000 + u32[w + (H_NSEC >> 2)]
        tx = u8[offs + SLL_PKTTYPE] == PACKET_OUTGOING
        keep = np.ones(n, dtype=bool)
        if not self.want_rx:
            keep &= tx
        if not self.want_tx:
            keep &= ~tx
        start = offs + mac
        tagged = (status & TP_STATUS_VLAN_VALID) != 0
        # the frame as it was on the wire: the stripped outer tag goes back after the MACs
        caplen = snap + 4 * tagged
        at = np.cumsum(caplen) - caplen
        data = np.zeros(int(caplen.sum()), dtype=np.uint8)
        head = np.minimum(snap, 12)
        ragged_copy(data, at, u8, start, head)
        ragged_copy(data, at + head + 4 * tagged, u8, start + head, snap - head)
        if tagged.any():
            t = np.flatnonzero(tagged)
            tci = u32[w[t] + (H_VLAN_TCI >> 2)] & 0xFFFF
            tpid = u16[(offs[t] >> 1) + (H_VLAN_TPID >> 1)].astype(np.uint32)
            tpid = np.where((status[t] & TP_STATUS_VLAN_TPID_VALID) != 0, tpid, 0)
            tpid = np.where(tpid == 0, 0x8100, tpid)
            p = at[t] + 12
            data[p], data[p + 1] = tpid >> 8, tpid & 0xFF
            data[p + 2], data[p + 3] = tci >> 8, tci & 0xFF
        # the signature: the frame's last 12 bytes (whole frames are captured)
        ok = snap >= SIG_LEN
        sp = np.where(ok, start + snap - SIG_LEN, 0)
        raw = u8[sp[:, None] + np.arange(SIG_LEN)].astype(np.int64)
        magic = raw[:, 0] | (raw[:, 1] << 8)
        stream = raw[:, 2] | (raw[:, 3] << 8)
        seq = raw[:, 4] | (raw[:, 5] << 8) | (raw[:, 6] << 16) | (raw[:, 7] << 24)
        out = CapBatch(
            data, at, caplen, length + 4 * tagged, ts, tx, ok & (magic == SIG_MAGIC), stream, seq
        )
        return out if keep.all() else out.take(np.flatnonzero(keep))

    def take(self, max_blocks: int = 256) -> list[CapBatch]:
        """Every retired block, parsed and given back to the kernel."""
        out = []
        for _ in range(max_blocks):
            if not self._ready(self._cur):
                break
            got = self._parse(self._cur)
            if got is not None and len(got):
                out.append(got)
            self._u32[self._cur, BD_STATUS >> 2] = TP_STATUS_KERNEL
            self._cur = (self._cur + 1) % self.block_nr
        return out
