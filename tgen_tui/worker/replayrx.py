"""Count a replayed capture's frames that carry no signature, by their flow, on receipt.

A replayed frame whose payload had no room for the signature (a SYN, a fragment, a
payload sent as captured) is still the stream's: the receiving port knows the flows of
every ``pcap:`` stream that arrives there and counts each such frame for its stream by
its *destination key*, the part of the 5-tuple a NAT leaves alone in the forward
direction: (family, protocol, destination address, destination port). ICMP has no port
(a NAT rewrites the echo id), and a later fragment of a datagram has none either: it
counts as (family, protocol, destination, "fragment"). Frames of a stream with that key
add to the stream's received frames and bytes (the same rx row as its signature frames),
so loss is sent − received as for every stream; per key, the counts are kept too
(:meth:`ReplayRx.report`: frames received per destination flow).

:func:`frame_keys` parses the frames in place (a ring block or the templates): one
fancy-index pass per field, no per-frame Python. The templates' keys are computed by the
same function, so sender and receiver agree by construction.

Imports: numpy and the packets' plain-data modules (workers use this).
"""

from __future__ import annotations

import numpy as np

_TPIDS = (0x8100, 0x88A8, 0x9100)
FRAG_PORT = 1 << 16  # the "port" of a later fragment (ports are 16 bits)
NO_KEY = np.uint64(0)


def _be16(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (u8[pos].astype(np.uint64) << np.uint64(8)) | u8[pos + 1].astype(np.uint64)


def _be32(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (_be16(u8, pos) << np.uint64(16)) | _be16(u8, pos + 2)


def frame_keys(u8: np.ndarray, start: np.ndarray, snaplen: np.ndarray) -> np.ndarray:
    """The destination key (uint64; 0: not IPv4/IPv6) of each frame whose Ethernet
    header is at ``start`` of the byte buffer ``u8``, ``snaplen`` bytes captured.
    (Plain comparisons and minimum, not isin and clip: tens of µs less per block.)"""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    top = len(u8) - 64
    start = np.minimum(start.astype(np.int64), top)
    snap = snaplen.astype(np.int64)
    l3 = start + 14
    et = _be16(u8, start + 12)
    for _ in range(2):
        tag = (et == _TPIDS[0]) | (et == _TPIDS[1]) | (et == _TPIDS[2])
        if not tag.any():
            break
        l3 = np.minimum(np.where(tag, l3 + 4, l3), top)
        et = np.where(tag, _be16(u8, l3 - 2), et)
    v4 = (et == 0x0800) & (snap >= l3 - start + 20)
    v6 = (et == 0x86DD) & (snap >= l3 - start + 40)
    ihl = (u8[l3] & 15).astype(np.int64) * 4
    fo = _be16(u8, l3 + 6).astype(np.int64) & 0x1FFF
    proto = np.where(v4, u8[l3 + 9], u8[l3 + 6]).astype(np.uint64)
    l4 = np.minimum(np.where(v4, l3 + ihl, l3 + 40), top)
    dst = _be32(u8, l3 + 16)
    if v6.any():  # rare: fold the IPv6 destinations only when there are any
        dst = np.where(v4, dst, _fold6(u8, l3 + 24))
    ported = ((proto == 6) | (proto == 17)) & (snap >= l4 - start + 4)
    port = np.where(ported, _be16(u8, l4 + 2), np.uint64(0))
    port = np.where(v4 & (fo > 0), np.uint64(FRAG_PORT), port)
    fam = np.where(v4, np.uint64(4 << 60), np.uint64(6 << 60))
    key = fam | (proto << np.uint64(52)) | (dst << np.uint64(17)) | port
    return np.where(v4 | v6, key, NO_KEY)


def _fold6(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """An IPv6 address folded to 32 bits (for keys, not display)."""
    a = _be32(u8, pos) ^ _be32(u8, pos + 4) ^ _be32(u8, pos + 8) ^ _be32(u8, pos + 12)
    return a & np.uint64(0xFFFFFFFF)


def template_keys(t: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """:func:`frame_keys` of the rows of a template array (packets.replay)."""
    stride = t.shape[1]
    flat = np.concatenate([t.reshape(-1), np.zeros(64, dtype=np.uint8)])
    return frame_keys(flat, np.arange(len(lens), dtype=np.int64) * stride, lens)


class ReplayRx:
    """The destination keys of the replayed streams arriving at one port, and counts."""

    def __init__(self, streams: list[tuple[int, np.ndarray]]) -> None:
        keys, owner, per_loop = [], [], []
        for stream, k in streams:
            u, c = np.unique(k[k != NO_KEY], return_counts=True)
            keys.append(u)
            owner.append(np.full(len(u), stream, dtype=np.int64))
            per_loop.append(c.astype(np.int64))
        allk = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
        allo = np.concatenate(owner) if owner else np.zeros(0, dtype=np.int64)
        allc = np.concatenate(per_loop) if per_loop else np.zeros(0, dtype=np.int64)
        allk, first = np.unique(allk, return_index=True)  # a key two streams share: the first's
        self.keys = allk
        self.owner = allo[first]
        self.per_loop = allc[first]  # frames of the key in one loop of its stream
        self.frames = np.zeros(len(allk), dtype=np.int64)

    def match(self, keys: np.ndarray, sig_stream: np.ndarray | None = None):
        """(rows of ``keys`` that are a replayed stream's, that stream's index, and whether
        each is to be counted by flow: no signature). Counts every frame of its flow: an
        unsigned one, or one whose signature names the flow's stream (``sig_stream``:
        each frame's signature stream, -1 for none)."""
        empty = np.zeros(0, dtype=np.int64)
        if not len(self.keys) or not len(keys):
            return empty, empty, np.zeros(0, dtype=bool)
        pos = np.clip(np.searchsorted(self.keys, keys), 0, len(self.keys) - 1)
        hit = np.flatnonzero(self.keys[pos] == keys)
        owner = self.owner[pos[hit]]
        plain = np.ones(len(hit), dtype=bool) if sig_stream is None else sig_stream[hit] < 0
        mine = plain | (sig_stream[hit] == owner) if sig_stream is not None else plain
        np.add.at(self.frames, pos[hit][mine], 1)
        return hit, owner, plain

    def report(self) -> list[dict]:
        """Per destination flow: its stream, frames per loop, frames received (the key's
        bit fields: family, protocol, destination, port; see frame_keys)."""
        out = []
        for k, s, per, n in zip(
            self.keys.tolist(), self.owner.tolist(), self.per_loop.tolist(),
            self.frames.tolist(), strict=True,
        ):  # fmt: skip
            out.append({"stream": s, "key": k, "per_loop": per, "rx_frames": n})
        return out


def describe_key(key: int) -> str:
    """A destination key as text: ``udp 198.19.1.53:53``, ``icmp 198.19.1.1``,
    ``udp 198.19.1.9 fragments`` (IPv6 destinations are folded: shown as a hash)."""
    fam, proto = key >> 60, (key >> 52) & 0xFF
    dst, port = (key >> 17) & 0xFFFFFFFF, key & 0x1FFFF
    name = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6"}.get(proto, f"proto {proto}")
    addr = ".".join(str((dst >> s) & 255) for s in (24, 16, 8, 0)) if fam == 4 else f"v6#{dst:08x}"
    if port == FRAG_PORT:
        return f"{name} {addr} fragments"
    return f"{name} {addr}:{port}" if proto in (6, 17) else f"{name} {addr}"


def interface_mtu(interface: str) -> int:
    """The MTU of ``interface`` in the calling thread's namespace (SIOCGIFMTU); 0 when
    it cannot be read (the send path then says what is wrong)."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16si", interface.encode()[:15], 0)
            return int(struct.unpack("16si", fcntl.ioctl(s, 0x8921, req))[1])
    except OSError:
        return 0


def replay_receiver(specs: list[dict] | None) -> ReplayRx | None:
    """The receiver of the replayed streams arriving at a port (their programs, as the
    port spec's ``rx_replays`` carries them), or None: the frames' keys come from the
    templates the sender builds (the capture is read here once, at configure)."""
    if not specs:
        return None
    from tgen_tui.packets.program import program_from_dict
    from tgen_tui.packets.replaybuild import load_replay

    streams = []
    for d in specs:
        p = program_from_dict(d)
        assert p.replay is not None
        r = load_replay(p.replay, p.index)
        streams.append((p.index, template_keys(r.t, r.lens)))
    return ReplayRx(streams)


__all__ = [
    "FRAG_PORT",
    "ReplayRx",
    "describe_key",
    "frame_keys",
    "interface_mtu",
    "replay_receiver",
    "template_keys",
]
