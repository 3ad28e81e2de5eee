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
    header is at ``start`` of the byte buffer ``u8``, ``snaplen`` bytes captured."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    top = len(u8) - 64
    start = np.clip(start.astype(np.int64), 0, top)
    snap = snaplen.astype(np.int64)
    l3 = start + 14
    et = _be16(u8, start + 12)
    for _ in range(2):
        tag = np.isin(et, _TPIDS)
        et = np.where(tag, _be16(u8, np.clip(l3 + 2, 0, top)), et)
        l3 = np.where(tag, l3 + 4, l3)
    l3 = np.clip(l3, 0, top)
    v4 = (et == 0x0800) & (snap >= l3 - start + 20)
    v6 = (et == 0x86DD) & (snap >= l3 - start + 40)
    ihl = (u8[l3] & 15).astype(np.int64) * 4
    fo = _be16(u8, l3 + 6).astype(np.int64) & 0x1FFF
    proto = np.where(v4, u8[np.clip(l3 + 9, 0, top)], u8[np.clip(l3 + 6, 0, top)]).astype(np.uint64)
    l4 = np.clip(np.where(v4, l3 + ihl, l3 + 40), 0, top)
    dst = np.where(v4, _be32(u8, l3 + 16), _fold6(u8, l3 + 24))
    ported = np.isin(proto, (6, 17)) & (snap >= l4 - start + 4)
    port = np.where(ported, _be16(u8, l4 + 2), np.uint64(0))
    port = np.where(v4 & (fo > 0), np.uint64(FRAG_PORT), port)
    fam = np.where(v4, np.uint64(4), np.uint64(6))
    key = (fam << np.uint64(60)) | (proto << np.uint64(52)) | (dst << np.uint64(17)) | port
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
        keys, owner = [], []
        for stream, k in streams:
            u = np.unique(k[k != NO_KEY])
            keys.append(u)
            owner.append(np.full(len(u), stream, dtype=np.int64))
        allk = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
        allo = np.concatenate(owner) if owner else np.zeros(0, dtype=np.int64)
        allk, first = np.unique(allk, return_index=True)  # a key two streams share: the first's
        self.keys = allk
        self.owner = allo[first]
        self.frames = np.zeros(len(allk), dtype=np.int64)

    def match(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows that are a replayed stream's, that stream's index) of ``keys``."""
        if not len(self.keys) or not len(keys):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.keys, keys), 0, len(self.keys) - 1)
        hit = np.flatnonzero(self.keys[pos] == keys)
        np.add.at(self.frames, pos[hit], 1)
        return hit, self.owner[pos[hit]]

    def report(self) -> list[dict]:
        """Frames received per destination flow (the keys as numbers: family, protocol,
        destination and port are its bit fields, see frame_keys)."""
        out = []
        for k, s, n in zip(
            self.keys.tolist(), self.owner.tolist(), self.frames.tolist(), strict=True
        ):
            out.append({"stream": s, "key": k, "rx_frames": n})
        return out


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
        streams.append((p.index, template_keys(r.t, r.lens)[~r.sig]))
    return ReplayRx(streams)


__all__ = ["FRAG_PORT", "ReplayRx", "frame_keys", "replay_receiver", "template_keys"]
