"""The receive path: a TPACKET_V3 memory-mapped RX ring, parsed per block with numpy.

The socket is created with protocol 0 (receives nothing), the ring is set up, and only
then is it bound to the interface with ``ETH_P_ALL``, so nothing arrives before the ring
exists. ``PACKET_IGNORE_OUTGOING`` keeps frames sent from the same host out of it.

Blocks are retired to user space when full or after ``retire_ms``. :meth:`RxRing.poll`
takes every retired block in ring order, parses it with numpy (no per-frame Python),
and gives it back to the kernel. Within a V3 block, frame headers form a chain through
``tp_next_offset``. Two ways to find them vectorially:

- *fast path*: read the first header's ``tp_next_offset`` as a stride ``s``, assume
  offsets ``first + k*s``, and verify every ``tp_next_offset`` at once (all frames of
  one size: the common case);
- *pointer doubling* otherwise: every 8-byte-aligned position of the block is a
  candidate header (the kernel aligns headers to 8 bytes, ``V3_ALIGNMENT``); a jump table
  ``J[c] = c + next_offset(c)`` is squared ``ceil(log2 n)`` times and the chain from the
  first header is expanded from the powers (cost O(block/8 * log n), still vectorised).

Per frame: ``tp_len``, ``tp_snaplen``, the 12-byte signature at
``tp_mac + tp_snaplen - 12`` (magic, stream, seq, ts), the kernel rx time (``tp_sec``,
``tp_nsec``: CLOCK_REALTIME, converted to CLOCK_MONOTONIC with an offset measured at each
poll), and the stripped outer VLAN tag (``tp_vlan_tci``/``tp_vlan_tpid`` when
``TP_STATUS_VLAN_VALID``/``TP_STATUS_VLAN_TPID_VALID``; veth moves the outer tag into
the packet metadata).

With ``headers=True`` (the RFC 9693 Responder's learning port), each parsed block also
yields the IPv4 source and destination address and the UDP/TCP source and destination
port of every frame (:func:`parse_l3l4`): ethertype at ``tp_mac + 12``, one or two
in-packet 802.1Q/802.1ad tags skipped by ethertype, the L4 header at the IHL read from
the IPv4 header. Frames that are not unfragmented IPv4 UDP/TCP are flagged, not dropped.
The default path does none of this.

Kernel drops come from ``PACKET_STATISTICS`` (read-and-reset; :meth:`RxRing.kernel_stats`
accumulates them).

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import mmap
import socket
import time
from dataclasses import dataclass

import numpy as np

from tgen_tui.packets.program import SIG_DTYPE, SIG_LEN, SIG_MAGIC
from tgen_tui.worker.kernel import (
    ETH_P_ALL,
    PACKET_IGNORE_OUTGOING,
    PACKET_RX_RING,
    PACKET_STATISTICS,
    PACKET_VERSION,
    SOL_PACKET,
    TPACKET_V3,
)
from tgen_tui.worker.responder import control_frames

SO_ATTACH_FILTER = 26
# A block goes to user space when full or after retire_ms. Each retired block wakes the
# worker for one turn of numpy whose cost hardly depends on the frames in it: 4 ms woke a
# 20 kpps worker 250 times/s for ~80 frames each; 50 ms matches the TBF-paced sender's
# 50 ms turns (spaced.qdisc_horizon). A port that answers ARP/ND keeps 20 ms: its replies
# leave from the ring's turn (worker.responder).
RETIRE_MS = 50
RESPOND_RETIRE_MS = 20
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_LOSING = 1 << 2
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
V3_ALIGNMENT = 8

# struct tpacket_block_desc (version, offset_to_priv, tpacket_hdr_v1)
BD_STATUS = 8  # u32 block_status
BD_NUM_PKTS = 12  # u32
BD_FIRST = 16  # u32 offset_to_first_pkt
BD_BLK_LEN = 20  # u32
BD_SEQ = 24  # u64
# struct tpacket3_hdr
H_NEXT = 0  # u32 tp_next_offset
H_SEC = 4  # u32
H_NSEC = 8  # u32
H_SNAPLEN = 12  # u32
H_LEN = 16  # u32
H_STATUS = 20  # u32
H_MAC = 24  # u16
H_NET = 26  # u16
H_RXHASH = 28  # u32 (hv1)
H_VLAN_TCI = 32  # u32 (hv1)
H_VLAN_TPID = 36  # u16 (hv1)


# what one parsed batch holds, per frame (see RxBatch)
_EMPTY_U32 = np.empty(0, dtype=np.uint32)


@dataclass
class RxBatch:
    """Parsed frames of one or more blocks, as parallel numpy arrays (one row per frame)."""

    length: np.ndarray  # uint32, tp_len (wire length without FCS and without a stripped tag)
    snaplen: np.ndarray  # uint32
    magic: np.ndarray  # uint16
    stream: np.ndarray  # uint16
    seq: np.ndarray  # uint32
    ts: np.ndarray  # uint32, tx CLOCK_MONOTONIC ns low 32 bits, from the signature
    rx_ns: np.ndarray  # int64, CLOCK_MONOTONIC ns of kernel reception
    vlan: np.ndarray  # int64: -1 no stripped tag, else (tpid << 16) | tci (tpid 0 if unknown)
    # only with RxRing(headers=True): (n, 4) uint32 src ip, dst ip, src port, dst port, and
    # whether the frame is an unfragmented IPv4 UDP/TCP frame those were read from
    hdr: np.ndarray | None = None
    hdr_ok: np.ndarray | None = None
    # only with RxRing.replay_keys: each frame's destination key (worker.replayrx)
    rkey: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.length)

    @property
    def has_sig(self) -> np.ndarray:
        return self.magic == SIG_MAGIC

    @staticmethod
    def concat(parts: list[RxBatch]) -> RxBatch:
        if len(parts) == 1:
            return parts[0]
        out = RxBatch(*(np.concatenate([getattr(p, f) for p in parts]) for f in RxBatch.FIELDS))
        full = [p for p in parts if len(p)]
        if full and all(p.hdr is not None for p in full):
            out.hdr = np.concatenate([p.hdr for p in full])
            out.hdr_ok = np.concatenate([p.hdr_ok for p in full])
        if full and all(p.rkey is not None for p in full):
            out.rkey = np.concatenate([p.rkey for p in full])
        return out

    FIELDS = ("length", "snaplen", "magic", "stream", "seq", "ts", "rx_ns", "vlan")


def empty_batch() -> RxBatch:
    z16 = np.empty(0, dtype=np.uint16)
    z64 = np.empty(0, dtype=np.int64)
    return RxBatch(_EMPTY_U32, _EMPTY_U32, z16, z16, _EMPTY_U32, _EMPTY_U32, z64, z64)


def mono_minus_real_ns() -> int:
    """CLOCK_MONOTONIC - CLOCK_REALTIME in ns (the tightest of three sandwiched readings)."""
    best = None
    for _ in range(3):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - r)
    return best[1]


def chain_offsets_fast(u32: np.ndarray, first: int, n: int) -> np.ndarray | None:
    """Header offsets when all frames share one stride (verified), else None."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    s = int(u32[first >> 2])
    if n == 1:
        return np.array([first], dtype=np.int64)
    if s <= 0 or s % V3_ALIGNMENT:
        return None
    offs = first + np.arange(n, dtype=np.int64) * s
    if offs[-1] + 48 > len(u32) * 4:
        return None
    if (u32[(offs[:-1] >> 2) + (H_NEXT >> 2)] != s).any():
        return None
    return offs


def chain_offsets_doubling(u32: np.ndarray, first: int, n: int, blk_len: int) -> np.ndarray:
    """Header offsets by pointer doubling over plausible 8-byte-aligned candidates.

    Candidates are the 8-aligned positions whose ``tp_next_offset`` is 0 or a multiple of
    8 of at least 48 and whose ``tp_mac`` equals the first header's (the kernel puts the
    MAC header at the same offset in every frame of a socket). ``J[c]`` = the candidate
    that ``c``'s next offset points at (else an absorbing sink). Starting from
    ``{first}``, step k adds ``J^(2^k)`` of every node so far, so after ``ceil(log2 n)``
    steps the set holds the chain nodes at distances ``0 .. 2^m - 1``; pointers only go
    forward, so the ``n`` smallest are the chain. Cost: one strided pass over the block,
    then O(k log n) for k candidates (about n).
    """
    if n <= 1:
        return np.array([first], dtype=np.int64)[:n]
    used = min(int(blk_len), len(u32) * 4 - 48)
    ncand = used // V3_ALIGNMENT + 1
    u16 = u32.view(np.uint16)
    nxt = u32[: ncand * 2 : 2]  # tp_next_offset at every 8-byte position (strided view)
    mac = u16[H_MAC >> 1 : (H_MAC >> 1) + ncand * 4 : 4]
    mac0 = u16[(first + H_MAC) >> 1]
    ok = (mac[: len(nxt)] == mac0) & ((nxt & 7) == 0) & ((nxt == 0) | (nxt >= 48))
    cand = np.flatnonzero(ok).astype(np.int64)  # in units of 8 bytes
    k = len(cand)
    tgt = cand + nxt[cand].astype(np.int64) // V3_ALIGNMENT
    j = np.searchsorted(cand, tgt)
    jc = np.minimum(j, k - 1)
    valid = (j < k) & (cand[jc] == tgt) & (tgt > cand)
    jump = np.append(np.where(valid, j, k), k).astype(np.int32)  # node k is the sink
    start = int(np.searchsorted(cand, first // V3_ALIGNMENT))
    nodes = np.array([start], dtype=np.int32)
    for _ in range((n - 1).bit_length()):
        nodes = np.concatenate([nodes, jump[nodes]])
        jump = jump[jump]
    nodes = np.unique(nodes)  # sorted; the sink (k) is last
    nodes = nodes[nodes < k][:n]
    return cand[nodes] * V3_ALIGNMENT


class RxRing:
    """A TPACKET_V3 RX ring on one interface (create it inside the port's netns)."""

    def __init__(
        self,
        interface: str,
        block_size: int = 1 << 20,
        block_nr: int = 32,
        frame_size: int = 2048,
        retire_ms: int = RETIRE_MS,
        ignore_outgoing: bool = True,
        headers: bool = False,
        respond: bool = False,
        fprog: bytes | None = None,
    ):
        self.interface = interface
        # the responder's control frames (ARP, ICMP, ICMPv6 without a signature) as
        # (bytes, vlan meta), taken out of each block before it goes back (worker/responder.py)
        self.respond = bool(respond)
        self.ctl: list[tuple[bytes, int]] = []
        self.headers = bool(headers)  # also gather IPv4/L4 addresses and ports (parse_l3l4)
        self.replay_keys = False  # also each frame's destination key (worker.replayrx)
        self.block_size = int(block_size)
        self.block_nr = int(block_nr)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.fd = self.sock.fileno()
            self.sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
            # struct tpacket_req3: block_size, block_nr, frame_size, frame_nr,
            # retire_blk_tov, sizeof_priv, feature_req_word
            frame_nr = self.block_size * self.block_nr // frame_size
            req = np.array(
                [self.block_size, self.block_nr, frame_size, frame_nr, retire_ms, 0, 0],
                dtype=np.uint32,
            )
            self.sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req.tobytes())
            if ignore_outgoing:
                self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            if fprog is not None:  # a classic BPF filter (a capture's), before the bind
                self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
            self._mm = mmap.mmap(
                self.fd,
                self.block_size * self.block_nr,
                mmap.MAP_SHARED,
                mmap.PROT_READ | mmap.PROT_WRITE,
            )
            self.sock.bind((interface, ETH_P_ALL))
        except OSError:
            self.sock.close()
            raise
        self._u8 = np.frombuffer(self._mm, dtype=np.uint8).reshape(self.block_nr, self.block_size)
        self._u32 = np.frombuffer(self._mm, dtype=np.uint32).reshape(
            self.block_nr, self.block_size // 4
        )
        self._u16 = np.frombuffer(self._mm, dtype=np.uint16).reshape(
            self.block_nr, self.block_size // 2
        )
        self._cur = 0
        self.kernel_packets = 0
        self.kernel_drops = 0
        self.freeze_q = 0
        self.blocks = 0
        self.frames = 0
        self.slow_blocks = 0  # blocks that needed pointer doubling

    # ------------------------------------------------------------------ blocks
    def _ready(self, b: int) -> bool:
        return bool(self._u32[b, BD_STATUS >> 2] & TP_STATUS_USER)

    def parse_block(self, b: int, off_ns: int) -> RxBatch:
        u32 = self._u32[b]
        n = int(u32[BD_NUM_PKTS >> 2])
        if n == 0:
            return empty_batch()
        first = int(u32[BD_FIRST >> 2])
        offs = chain_offsets_fast(u32, first, n)
        if offs is None:
            self.slow_blocks += 1
            offs = chain_offsets_doubling(u32, first, n, int(u32[BD_BLK_LEN >> 2]))
        out = parse_headers(self._u8[b], u32, self._u16[b], offs, off_ns)
        if self.headers:
            mac = self._u16[b][(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
            out.hdr, out.hdr_ok = parse_l3l4(self._u8[b], offs + mac, out.snaplen)
        if self.replay_keys:  # a replayed capture arrives here: unsigned frames by flow
            from tgen_tui.worker.replayrx import frame_keys

            mac = self._u16[b][(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
            out.rkey = frame_keys(self._u8[b], offs + mac, out.snaplen)
        if self.respond:  # test frames cost one compare per frame; the rest only if unsigned
            has_sig = out.magic == SIG_MAGIC
            if not has_sig.all():
                mac = self._u16[b][(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
                self.ctl += control_frames(self._u8[b], offs + mac, out.snaplen, has_sig, out.vlan)
        return out

    def poll(self, max_blocks: int | None = None) -> RxBatch:
        """Parse and release every retired block (up to ``max_blocks``)."""
        parts = []
        off_ns = mono_minus_real_ns()
        k = 0
        while self._ready(self._cur) and (max_blocks is None or k < max_blocks):
            parts.append(self.parse_block(self._cur, off_ns))
            self._u32[self._cur, BD_STATUS >> 2] = TP_STATUS_KERNEL  # give it back
            self._cur = (self._cur + 1) % self.block_nr
            k += 1
        self.blocks += k
        if not parts:
            return empty_batch()
        out = RxBatch.concat(parts)
        self.frames += len(out)
        return out

    def poll_frames(self) -> list[tuple[bytes, int]]:
        """Tests and tools only (per-frame Python): every retired frame as (bytes, vlan)."""
        out = []
        while self._ready(self._cur):
            b = self._cur
            u32 = self._u32[b]
            n = int(u32[BD_NUM_PKTS >> 2])
            first = int(u32[BD_FIRST >> 2])
            offs = chain_offsets_doubling(u32, first, n, int(u32[BD_BLK_LEN >> 2]))
            pb = parse_headers(self._u8[b], u32, self._u16[b], offs, 0)
            mac = self._u16[b][(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
            for o, m, sn, v in zip(offs, mac, pb.snaplen, pb.vlan, strict=True):
                out.append((bytes(self._u8[b, o + m : o + m + sn]), int(v)))
            self._u32[b, BD_STATUS >> 2] = TP_STATUS_KERNEL
            self._cur = (b + 1) % self.block_nr
            self.blocks += 1
            self.frames += n
        return out

    def kernel_stats(self) -> tuple[int, int]:
        """Accumulated (packets, drops) from PACKET_STATISTICS (read-and-reset in the kernel)."""
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12)
        pk, dr, fq = np.frombuffer(raw, dtype=np.uint32)
        self.kernel_packets += int(pk)
        self.kernel_drops += int(dr)
        self.freeze_q += int(fq)
        return self.kernel_packets, self.kernel_drops

    def close(self) -> None:
        self._u8 = self._u32 = self._u16 = None  # type: ignore[assignment]
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_headers(
    u8: np.ndarray, u32: np.ndarray, u16: np.ndarray, offs: np.ndarray, off_ns: int
) -> RxBatch:
    """Extract the per-frame fields of the headers at byte offsets ``offs`` of a block."""
    w = offs >> 2
    snap = u32[w + (H_SNAPLEN >> 2)]
    length = u32[w + (H_LEN >> 2)]
    status = u32[w + (H_STATUS >> 2)]
    mac = u16[(offs >> 1) + (H_MAC >> 1)].astype(np.int64)
    sec = u32[w + (H_SEC >> 2)].astype(np.int64)
    nsec = u32[w + (H_NSEC >> 2)].astype(np.int64)
    rx_ns = sec * 1_000_000_000 + nsec + off_ns
    # signature: the last 12 captured bytes (any alignment -> gather bytes)
    sig_pos = offs + mac + snap.astype(np.int64) - SIG_LEN
    ok = snap >= SIG_LEN
    sig_pos = np.where(ok, sig_pos, 0)
    raw = u8[sig_pos[:, None] + np.arange(SIG_LEN)]
    sig = raw.view(SIG_DTYPE).reshape(-1)
    magic = sig["magic"].copy()
    if not ok.all():
        magic[~ok] = 0
    vlan = np.full(len(offs), -1, dtype=np.int64)
    vv = (status & TP_STATUS_VLAN_VALID) != 0
    if vv.any():
        tci = u32[w + (H_VLAN_TCI >> 2)].astype(np.int64) & 0xFFFF
        tpid = u16[(offs >> 1) + (H_VLAN_TPID >> 1)].astype(np.int64)
        tpid = np.where((status & TP_STATUS_VLAN_TPID_VALID) != 0, tpid, 0)
        vlan = np.where(vv, (tpid << 16) | tci, -1)
    return RxBatch(
        length=length.copy(),
        snaplen=snap.copy(),
        magic=magic,
        stream=sig["stream"].copy(),
        seq=sig["seq"].copy(),
        ts=sig["ts"].copy(),
        rx_ns=rx_ns,
        vlan=vlan,
    )


ETH_P_IP = 0x0800
_TAG_TPIDS = (0x8100, 0x88A8)  # 802.1Q, 802.1ad (QinQ outer)
IPPROTO_TCP, IPPROTO_UDP = 6, 17


def _be16(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (u8[pos].astype(np.uint32) << 8) | u8[pos + 1]


def parse_l3l4(u8: np.ndarray, start: np.ndarray, snaplen: np.ndarray) -> tuple:
    """IPv4 addresses and L4 ports of the frames whose Ethernet header is at byte ``start``.

    ``u8``: the block (or any byte buffer); ``start`` (int64): each frame's ``tp_mac``
    position in it; ``snaplen``: its captured length. Returns ``(hdr, ok)``: ``hdr`` an
    (n, 4) uint32 array of source address, destination address, source port and
    destination port, and ``ok`` where those were read from an unfragmented IPv4 UDP or
    TCP frame captured far enough (other rows hold garbage). Up to two in-packet VLAN tags
    (802.1Q or 802.1ad) are skipped by ethertype; a tag the NIC stripped into the ring's
    metadata is not in the packet. The IPv4 header length comes from its IHL nibble. One
    pass of fancy indexing per field: no per-frame Python.
    """
    n = len(start)
    hdr = np.empty((n, 4), dtype=np.uint32)
    if n == 0:
        return hdr, np.zeros(0, dtype=bool)
    top = len(u8) - 4  # every read stays inside the buffer (rows that would not are not ok)
    start = start.astype(np.int64)
    snap = snaplen.astype(np.int64)

    def at(pos: np.ndarray) -> np.ndarray:
        return np.clip(pos, 0, top)

    l3 = start + 14
    et = _be16(u8, at(start + 12))
    for _ in range(2):  # outer tag, then an inner (QinQ) one
        tag = (et == _TAG_TPIDS[0]) | (et == _TAG_TPIDS[1])
        if not tag.any():
            break
        et = np.where(tag, _be16(u8, at(l3 + 2)), et)
        l3 = l3 + 4 * tag
    # the IPv4 header and the 4 bytes after it (the ports when IHL is 5) in one gather
    wpos = np.clip(l3, 0, len(u8) - 24)
    w = np.lib.stride_tricks.sliding_window_view(u8, 24)[wpos]  # (n, 24) copy, one gather
    vihl = w[:, 0]
    ihl = (vihl & 15).astype(np.int64) * 4
    l4 = l3 + ihl
    ok = (et == ETH_P_IP) & ((vihl >> 4) == 4) & (ihl >= 20) & (l4 + 4 - start <= snap)
    ok &= (wpos == l3) & (l4 <= top)
    ok &= (w[:, 9] == IPPROTO_UDP) | (w[:, 9] == IPPROTO_TCP)
    ok &= ((w[:, 6] & 0x1F) | w[:, 7]) == 0  # not a later fragment (no L4 header)
    x = w[:, 12:24].copy().view(">u4").astype(np.uint32)  # src, dst, sport << 16 | dport
    hdr[:, :2] = x[:, :2]
    hdr[:, 2] = x[:, 2] >> 16
    hdr[:, 3] = x[:, 2] & 0xFFFF
    opt = np.flatnonzero(ihl > 20)  # IPv4 options: the ports come later
    if len(opt):
        hdr[opt, 2] = _be16(u8, at(l4[opt]))
        hdr[opt, 3] = _be16(u8, at(l4[opt] + 2))
    return hdr, ok
