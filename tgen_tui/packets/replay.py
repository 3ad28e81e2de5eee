"""A replayed capture as templates: the selected frames, rewritten for the test bed, in numpy.

Run once when a ``pcap:`` stream is built (never per frame while sending). The frames
(:mod:`tgen_tui.packets.pcapread`) go into the rows of an ``(N, stride)`` uint8 array,
and every step is vectorised over the rows:

1. VLAN: strip every tag, or set the outer tag's id (a tag is inserted into an untagged
   frame); the frames are re-parsed after it.
2. Parse: tags, IPv4 (IHL, fragments) or IPv6 (hop-by-hop, routing, destination options
   and fragment headers), UDP, TCP, ICMP, ICMPv6: per-row offsets (:class:`Layout`).
3. Addresses: the IPv4 and IPv6 prefix maps, source and destination, host bits kept
   modulo the target prefix; ports: the UDP/TCP map. Checksums are fixed incrementally
   (RFC 1624: ``HC' = ~(~HC + ~m + m')``): the IPv4 header's, and the L4 checksum through
   the pseudo-header (UDP, TCP, ICMPv6; ICMPv4 has none), in the first fragment of a
   fragmented datagram too, since its checksum covers the whole datagram.
4. The signature (DESIGN rule 8): where the payload has room (UDP, TCP, ICMP echo with
   at least 12 payload bytes, the IP packet filling the frame, not a fragment), the last
   12 bytes become magic, stream, and a zero sequence number and timestamp; the L4
   checksum is adjusted so that the builder only adds the words it writes per frame.

A byte at position p of a checksummed region starting at ``base`` adds ``b << 8`` when
``p - base`` is even, else ``b`` (:func:`byte_sums`): one rule for aligned and unaligned
fields alike.

Imports: numpy, the standard library and this package's plain-data modules.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import numpy as np

from tgen_tui.packets.pcapread import Capture, PcapError
from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC, ReplayProgram

TPIDS = (0x8100, 0x88A8, 0x9100)
MAX_TEMPLATE_BYTES = 1 << 30  # the templates of one stream at most (rows x stride)
HEADROOM = 8  # bytes per row for inserted VLAN tags
CHUNK_ROWS = 65536  # rows rewritten at a time
_FFFF = np.uint64(0xFFFF)


def fold(s: np.ndarray) -> np.ndarray:
    """A one's-complement sum (uint64) folded to 16 bits."""
    s = s.astype(np.uint64)
    for _ in range(3):
        s = (s & _FFFF) + (s >> np.uint64(16))
    return s


def byte_sums(t: np.ndarray, rows: np.ndarray, pos: np.ndarray, width: int, base: np.ndarray):
    """Checksum contribution (unfolded uint64) of bytes ``pos .. pos+width`` of each row,
    in a region that starts at ``base`` (the parity of ``p - base`` places each byte)."""
    p = pos[:, None] + np.arange(width)
    b = t[rows[:, None], p].astype(np.uint64)
    hi = ((p - base[:, None]) & 1) == 0
    return np.where(hi, b << np.uint64(8), b).sum(axis=1, dtype=np.uint64)


def be(t: np.ndarray, rows: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned values of ``width`` bytes at ``pos`` of each row (uint64)."""
    v = np.zeros(len(rows), dtype=np.uint64)
    top = t.shape[1] - 1
    for j in range(width):
        v = (v << np.uint64(8)) | t[rows, np.clip(pos + j, 0, top)].astype(np.uint64)
    return v


def put_be(t: np.ndarray, rows: np.ndarray, pos: np.ndarray, width: int, v: np.ndarray) -> None:
    v = v.astype(np.uint64)
    for j in range(width):
        t[rows, pos + j] = ((v >> np.uint64(8 * (width - 1 - j))) & np.uint64(0xFF)).astype(
            np.uint8
        )


def fix_csum(t, rows, at, old, new, k16, zero_is_ffff) -> None:
    """RFC 1624 on the checksums at ``at`` of ``rows``: old and new sums of ``k16`` words."""
    c = be(t, rows, at, 2)
    s = (~c & _FFFF) + (np.uint64(k16) * _FFFF - old) + new
    c2 = ~fold(s) & _FFFF
    if zero_is_ffff is not None:
        c2 = np.where(zero_is_ffff & (c2 == 0), _FFFF, c2)
    put_be(t, rows, at, 2, c2)


@dataclass
class Layout:
    """Per-row offsets of a parsed batch of frames (-1: absent)."""

    l3: np.ndarray  # 0, 4 or 6
    l3off: np.ndarray
    l4off: np.ndarray  # -1: no L4 header in this frame (not first fragment, or short)
    proto: np.ndarray
    frag: np.ndarray  # bool: part of a fragmented datagram
    csum: np.ndarray  # L4 checksum offset, -1 none (or a UDP/IPv4 zero checksum)
    pseudo: np.ndarray  # bool: the L4 checksum covers the pseudo-header
    payload: np.ndarray  # L4 payload offset, -1 none
    l3end: np.ndarray  # end of the IP packet (IP total length)
    ntags: np.ndarray


LAYOUT_FIELDS = tuple(Layout.__dataclass_fields__)


def _tags(t: np.ndarray, rows: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tag count, ethertype) of each row (up to two tags)."""
    n = np.zeros(len(rows), dtype=np.int64)
    et = be(t, rows, np.full(len(rows), 12), 2)
    for _ in range(2):
        tag = np.isin(et, TPIDS) & (lens >= 18 + 4 * n)
        n += tag
        et = np.where(tag, be(t, rows, 12 + 4 * n, 2), et)
    return n, et


def _v6_ext(t, rows, l3off):
    """(next header, L4 offset, fragment?, first fragment?) through IPv6 extension headers."""
    nh = t[rows, l3off + 6].astype(np.int64)
    pos = l3off + 40
    frag = np.zeros(len(rows), dtype=bool)
    first = np.ones(len(rows), dtype=bool)
    for _ in range(4):
        ext = np.isin(nh, (0, 43, 60))
        fh = nh == 44
        nxt = t[rows, np.minimum(pos, t.shape[1] - 2)].astype(np.int64)
        ln = (t[rows, np.minimum(pos + 1, t.shape[1] - 1)].astype(np.int64) + 1) * 8
        fo = be(t, rows, np.minimum(pos + 2, t.shape[1] - 2), 2).astype(np.int64)
        frag |= fh
        first &= ~fh | ((fo >> 3) == 0)
        nh = np.where(ext | fh, nxt, nh)
        pos = np.where(ext, pos + ln, np.where(fh, pos + 8, pos))
    return nh, pos, frag, first


def parse(t: np.ndarray, lens: np.ndarray) -> Layout:
    """The offsets of every row's headers (vectorised; see the module docstring)."""
    n = len(lens)
    rows = np.arange(n)
    ntags, et = _tags(t, rows, lens)
    l3off = 14 + 4 * ntags
    v4 = (et == 0x0800) & (lens >= l3off + 20)
    v6 = (et == 0x86DD) & (lens >= l3off + 40)
    top = t.shape[1] - 1

    def at(pos: np.ndarray) -> np.ndarray:  # a byte of each row, reads kept in the row
        return t[rows, np.clip(pos, 0, top)]

    l3o = l3off
    ihl = (at(l3o) & 0x0F).astype(np.int64) * 4
    fo = be(t, rows, l3o + 6, 2).astype(np.int64)
    proto4 = at(l3o + 9).astype(np.int64)
    nh6, l4o6, frag6, first6 = _v6_ext(t, rows, l3o)
    proto = np.where(v4, proto4, np.where(v6, nh6, -1))
    frag = np.where(v4, (fo & 0x3FFF) != 0, v6 & frag6)
    first = np.where(v4, (fo & 0x1FFF) == 0, first6)
    l4off = np.where(v4, l3off + ihl, np.where(v6, l4o6, -1))
    tot = np.where(v4, be(t, rows, l3o + 2, 2), be(t, rows, l3o + 4, 2) + 40).astype(np.int64)
    l3end = np.where(v4 | v6, l3off + tot, lens)
    hdr = np.select([proto == 6, np.isin(proto, (17, 1, 58))], [20, 8], 0)
    has4 = (v4 | v6) & first & (hdr > 0) & (l4off + hdr <= np.minimum(lens, l3end))
    l4off = np.where(has4, l4off, -1)
    l4c = np.maximum(l4off, 0)
    csum = np.select(
        [has4 & (proto == 17), has4 & (proto == 6), has4 & np.isin(proto, (1, 58))],
        [l4c + 6, l4c + 16, l4c + 2],
        -1,
    )
    udp_none = has4 & (proto == 17) & v4 & (be(t, rows, l4c + 6, 2) == 0)
    csum = np.where(udp_none, -1, csum)
    itype = at(l4c).astype(np.int64)
    echo = np.isin(proto, (1, 58)) & np.isin(itype, (0, 8, 128, 129))
    doff = (at(l4c + 12) >> 4).astype(np.int64) * 4
    payload = np.select(
        [has4 & (proto == 17), has4 & (proto == 6), has4 & echo], [l4c + 8, l4c + doff, l4c + 8], -1
    )
    return Layout(
        l3=np.where(v4, 4, np.where(v6, 6, 0)),
        l3off=l3off,
        l4off=l4off,
        proto=proto,
        frag=frag,
        csum=csum,
        pseudo=proto != 1,
        payload=payload,
        l3end=l3end,
        ntags=ntags,
    )


# ---------------------------------------------------------------------- rewrite steps
def rewrite_vlan(t: np.ndarray, lens: np.ndarray, rp: ReplayProgram) -> None:
    """Strip every tag, or set (insert) the outer tag (rows shift in place; lens change)."""
    if rp.vlan == "keep":
        return
    rows = np.arange(len(lens))
    ntags, _ = _tags(t, rows, lens)
    s = t.shape[1]
    if rp.vlan == "strip":
        for k in (1, 2):
            m = np.flatnonzero(ntags == k)
            if len(m):
                t[m, 12 : s - 4 * k] = t[m, 12 + 4 * k :].copy()
                t[m, s - 4 * k :] = 0
                lens[m] -= 4 * k
        return
    add = np.flatnonzero(ntags == 0)
    if len(add):
        t[add, 16:] = t[add, 12 : s - 4].copy()
        t[add, 12:14] = (0x81, 0x00)
        t[add, 14:16] = 0
        lens[add] += 4
    tci = be(t, rows, np.full(len(rows), 14), 2)
    pcp = (tci >> np.uint64(13)) if rp.vlan_pcp < 0 else np.uint64(rp.vlan_pcp)
    new = (pcp << np.uint64(13)) | (tci & np.uint64(0x1000)) | np.uint64(rp.vlan_id)
    put_be(t, rows, np.full(len(rows), 14), 2, new)


def _net(prefix: str) -> tuple[int, int, int]:
    n = ipaddress.ip_network(prefix, strict=False)
    bits = n.max_prefixlen
    mask = ((1 << bits) - 1) ^ ((1 << (bits - n.prefixlen)) - 1)
    return int(n.network_address), mask, bits


def _map_addr(vals: list[np.ndarray], rules, bits: int) -> tuple[list[np.ndarray], list[int]]:
    """Addresses as uint64 limbs (high first) mapped by ``rules`` (first match wins);
    returns the new limbs and each rule's match count."""
    limbs = len(vals)
    out = [v.copy() for v in vals]
    done = np.zeros(len(vals[0]), dtype=bool)
    hits = []
    for a, b in rules:
        net, mask, _ = _net(a)
        tnet, tmask, _ = _net(b)
        m = ~done
        for j in range(limbs):
            sh = 64 * (limbs - 1 - j)
            mj = np.uint64((mask >> sh) & 0xFFFFFFFFFFFFFFFF)
            nj = np.uint64((net >> sh) & 0xFFFFFFFFFFFFFFFF)
            m &= (vals[j] & mj) == nj
        for j in range(limbs):
            sh = 64 * (limbs - 1 - j)
            tm = np.uint64((tmask >> sh) & 0xFFFFFFFFFFFFFFFF)
            tn = np.uint64((tnet >> sh) & 0xFFFFFFFFFFFFFFFF)
            out[j] = np.where(m, tn | (vals[j] & ~tm), out[j])
        done |= m
        hits.append(int(m.sum()))
    return out, hits


def _rewrite_field(t, lay: Layout, rows, pos, width, new_vals, in_ip_header: bool) -> None:
    """Write ``new_vals`` (big-endian, ``width`` bytes) at ``pos`` of ``rows`` and fix the
    IPv4 header checksum (``in_ip_header``) and the L4 checksum where it covers them."""
    if not len(rows):
        return
    l4b = np.maximum(lay.l4off[rows], 0)
    old = byte_sums(t, rows, pos, width, l4b)
    oldh = byte_sums(t, rows, pos, width, lay.l3off[rows]) if in_ip_header else None
    put_be(t, rows, pos, width, new_vals)
    new = byte_sums(t, rows, pos, width, l4b)
    k = (width + 1) // 2 + 1
    if in_ip_header:
        v4 = lay.l3[rows] == 4
        r = rows[v4]
        newh = byte_sums(t, r, pos[v4], width, lay.l3off[r])
        fix_csum(t, r, lay.l3off[r] + 10, oldh[v4], newh, k, None)
    c = lay.csum[rows]
    is_l4 = pos >= lay.l4off[rows]
    ok = (c >= 0) & (lay.pseudo[rows] | is_l4)
    r = rows[ok]
    fix_csum(t, r, c[ok], old[ok], new[ok], k, lay.proto[r] == 17)


def rewrite_addresses(t, lay: Layout, rp: ReplayProgram) -> dict[str, list[int]]:
    """The prefix maps over sources and destinations; each rule's matches (src + dst)."""
    hits: dict[str, list[int]] = {}
    for fam, rules, width, offs in (
        (4, rp.ipv4, 4, (12, 16)),
        (6, rp.ipv6, 16, (8, 24)),
    ):
        if not rules:
            continue
        rows = np.flatnonzero(lay.l3 == fam)
        total = [0] * len(rules)
        for o in offs:
            pos = lay.l3off[rows] + o
            limbs = [be(t, rows, pos + 8 * j, min(8, width)) for j in range(max(1, width // 8))]
            new, h = _map_addr(limbs, rules, 8 * width)
            total = [a + b for a, b in zip(total, h, strict=True)]
            changed = np.zeros(len(rows), dtype=bool)
            for a, b in zip(limbs, new, strict=True):
                changed |= a != b
            r, p = rows[changed], pos[changed]
            for j, v in enumerate(new):
                w = min(8, width)
                _rewrite_field(t, lay, r, p + 8 * j, w, v[changed], fam == 4)
        hits[f"ipv{fam}"] = total
    return hits


def rewrite_ports(t, lay: Layout, rp: ReplayProgram) -> int:
    """The UDP/TCP port map (source and destination); the ports changed."""
    if not rp.ports:
        return 0
    lut = np.arange(65536, dtype=np.uint64)
    for a, b in rp.ports:
        lut[a] = b
    rows = np.flatnonzero((lay.l4off >= 0) & np.isin(lay.proto, (6, 17)))
    changed = 0
    for o in (0, 2):
        pos = lay.l4off[rows] + o
        v = be(t, rows, pos, 2)
        nv = lut[v.astype(np.int64)]
        m = nv != v
        changed += int(m.sum())
        _rewrite_field(t, lay, rows[m], pos[m], 2, nv[m], False)
    return changed


def place_signatures(t, lens, lay: Layout, index: int, on: bool) -> np.ndarray:
    """Rows whose payload carries the signature: magic and stream written, seq and ts
    zero, the L4 checksum adjusted (the builder adds the words of seq and ts)."""
    n = len(lens)
    room = (
        (lay.payload >= 0)
        & ~lay.frag
        & (lay.l3end == lens)
        & (lens - lay.payload >= SIG_LEN)
        & (lens >= 64 - 4)
    )
    if not on:
        return np.zeros(n, dtype=bool)
    rows = np.flatnonzero(room)
    pos = lens[rows] - SIG_LEN
    l4b = lay.l4off[rows]
    old = byte_sums(t, rows, pos, SIG_LEN, l4b)
    sig = np.zeros(SIG_LEN, dtype=np.uint8)
    sig[0:2] = (SIG_MAGIC & 0xFF, SIG_MAGIC >> 8)
    sig[2:4] = (index & 0xFF, (index >> 8) & 0xFF)
    t[rows[:, None], pos[:, None] + np.arange(SIG_LEN)] = sig
    new = byte_sums(t, rows, pos, SIG_LEN, l4b)
    c = lay.csum[rows]
    ok = c >= 0
    r = rows[ok]
    fix_csum(t, r, c[ok], old[ok], new[ok], SIG_LEN // 2 + 1, lay.proto[r] == 17)
    return room


# ---------------------------------------------------------------------- the whole
@dataclass
class Replay:
    """The templates of one replayed stream, and what the rewrite did."""

    t: np.ndarray  # (N, stride) uint8
    lens: np.ndarray  # int64 (N,), without FCS
    ts_ns: np.ndarray  # int64 (N,), recorded times since the first selected frame
    layout: Layout
    sig: np.ndarray  # bool (N,)
    frame_numbers: np.ndarray  # the file's frame number (from 1) of each row
    hits: dict[str, list[int]] = field(default_factory=dict)
    ports_changed: int = 0
    before: list[bytes] = field(default_factory=list)  # the first selected frames, as read

    def __len__(self) -> int:
        return len(self.lens)


def fill_rows(t: np.ndarray, data: np.ndarray, off: np.ndarray, lens: np.ndarray) -> None:
    """``t[i, :lens[i]] = data[off[i] : off[i] + lens[i]]``, in chunks of rows whose index
    arrays stay near 4 M entries (a million frames would otherwise need GBs of them)."""
    width = int(lens.max())
    step = max(1, (4 << 20) // max(1, width))
    cols = np.arange(width)
    top = len(data) - 1
    for a in range(0, len(lens), step):
        o, ln = off[a : a + step], lens[a : a + step]
        block = data[np.minimum(o[:, None] + cols, top)]
        block[cols >= ln[:, None]] = 0
        t[a : a + step, :width] = block


def select(cap: Capture, rp: ReplayProgram, keep) -> np.ndarray:
    """Indexes of the frames of the range that pass the filter (``keep``: frames -> bools)."""
    lo = rp.first - 1
    hi = len(cap) if rp.last <= 0 else min(rp.last, len(cap))
    idx = np.arange(lo, hi, dtype=np.int64)
    if rp.filter and len(idx):
        idx = idx[keep(cap, idx)]
    return idx


def build_templates(cap: Capture, idx: np.ndarray, rp: ReplayProgram, index: int) -> Replay:
    """The rewritten templates of the selected frames ``idx`` of ``cap``."""
    n = len(idx)
    if n == 0:
        raise PcapError("no frames selected")
    lens = cap.caplen[idx].copy()
    stride = max(96, (int(lens.max()) + HEADROOM + 15) & ~15)
    if n * stride > MAX_TEMPLATE_BYTES:
        raise PcapError(
            f"{n:,} frames of up to {int(lens.max())} B need {n * stride / (1 << 20):,.0f} MiB "
            f"of templates; at most {MAX_TEMPLATE_BYTES >> 20} MiB: select fewer frames"
        )
    t = np.zeros((n, stride), dtype=np.uint8)
    fill_rows(t, cap.data, cap.offset[idx], lens)
    before = [bytes(t[i, : lens[i]]) for i in range(min(n, 8))]
    lays, sigs, hits, changed = [], [], {}, 0
    for a in range(0, n, CHUNK_ROWS):  # in blocks of rows: the temporaries stay small
        tb, lb = t[a : a + CHUNK_ROWS], lens[a : a + CHUNK_ROWS]  # views: changed in place
        rewrite_vlan(tb, lb, rp)
        lay = parse(tb, lb)
        for fam, h in rewrite_addresses(tb, lay, rp).items():
            hits[fam] = [x + y for x, y in zip(hits.get(fam, [0] * len(h)), h, strict=True)]
        changed += rewrite_ports(tb, lay, rp)
        sigs.append(place_signatures(tb, lb, lay, index, rp.signature))
        lays.append(lay)
    lay = Layout(**{f: np.concatenate([getattr(x, f) for x in lays]) for f in LAYOUT_FIELDS})
    ts = cap.ts_ns[idx] - cap.ts_ns[idx[0]]
    return Replay(t, lens, ts, lay, np.concatenate(sigs), idx + 1, hits, changed, before)


__all__ = ["Layout", "Replay", "build_templates", "byte_sums", "fold", "parse", "select"]
