"""Per-stream receive accounting, vectorised over a parsed batch (no per-frame Python).

:class:`RxStats` owns one rx table of the counter block (``n_streams x RX_STRIDE``
int64, see :mod:`tgen_tui.worker.counters`) plus private sequence state, and folds a
batch of frames into it:

- frames, bytes per stream;
- sequence numbers are extended from 32 to 64 bits against the stream's highest one
  (the nearest value modulo 2**32);
- **out of order**: a frame whose sequence number is below the highest seen before it
  (in earlier batches or earlier in this batch), duplicates excluded; frames older than
  the duplicate window also count as ``too_old``;
- **duplicates**: a per-stream ring of ``window`` slots remembers which sequence numbers
  arrived: slot ``seq % window`` holds ``(seq // window) + 1`` (uint16), so no clearing
  is needed when the window moves; duplicates inside one batch are found by sorting;
- **latency**, from one of two sources per stream:

  - *kernel* (``lat_every`` = K > 0): the stream's sender has the kernel stamp every
    K-th frame as the driver takes it (:mod:`tgen_tui.worker.txstamps`); for those
    frames latency = the kernel receive time - the kernel transmit time, both 64-bit
    CLOCK_MONOTONIC ns (no wrap). The other frames carry no latency. A sampled frame
    whose transmit time is not in the table yet waits (``resolve_pending``) and is
    counted in ``lat_unstamped`` if it never comes;
  - *signature* (K = 0: another send path, or another host): rx time (low 32 bits) -
    the signature's user-space tx timestamp, modulo 2**32. Values within NEG_LAT_NS
    below zero are negative (clock offset noise), clamped to 0 and counted in
    ``neg_lat``; a stream sent from another host's clock has that clock's measured offset
    subtracted first (``skew``: rx clock - tx clock, ns, per stream; see tgen_tui/cluster).
    When a local sender records the 64-bit send time of every K-th frame (table
    ``every`` = -K), the stamp is widened to 64 bits from the nearest one (no wrap at
    4.29 s); a frame sent so long ago that its reference was overwritten has no latency
    and counts in ``lat_unstamped``. Without references (another host) the largest
    measurable latency is 2**32 - NEG_LAT_NS ns (about 4.03 s).

  count/sum/min/max and a log-linear histogram (:func:`lat_bucket`);
- **jitter** (RFC 3550 style): sum and count of ``|D(i) - D(i-1)|`` between consecutive
  frames of a stream that carry a latency, D the (clamped) latency, across batches;
- the last outer VLAN tag seen and the number of tagged frames;
- **spacing**: the inter-arrival gap (kernel receive stamps) between two frames of a
  row with consecutive sequence numbers (n, then n + 1 next in arrival order, across
  batches): count, sum, a histogram (:func:`lat_bucket` geometry) and, against the
  asked mean gap the sender wrote into the stamp table (``gap_ns``; 0: unknown, then
  only count, sum and histogram), the sum of ``|gap - asked|`` and the gaps within 10 %
  of it. A lost or reordered frame breaks the chain for one gap, so a gap is never two
  gaps summed.

The window size adapts to the number of streams so that the state stays below about
16 MiB: ``min(2**20, 2**23 / n_streams)`` rounded down to a power of two, at least 1024.

Imports: numpy and the worker's own counters module.
"""

from __future__ import annotations

import numpy as np

from tgen_tui.packets.program import SIG_MAGIC, VLAN_TAG_LEN
from tgen_tui.worker.counters import (
    HIST_BUCKETS,
    HIST_LINEAR_SHIFT,
    HIST_MAX_EXP,
    HIST_MIN_EXP,
    HIST_SUB,
    INT64_MAX,
    R_BYTES,
    R_CLEARS,
    R_DUP,
    R_FIRST_RX_NS,
    R_FRAMES,
    R_HIST,
    R_IAT_ASKED,
    R_IAT_COUNT,
    R_IAT_HIST,
    R_IAT_WITHIN,
    R_JIT_COUNT,
    R_JIT_SUM,
    R_LAST_RX_NS,
    R_LAT_COUNT,
    R_LAT_EVERY,
    R_LAT_MAX,
    R_LAT_MIN,
    R_LAT_SUM,
    R_LAT_UNSTAMPED,
    R_MAX_SEQ,
    R_NEG_LAT,
    R_OOO,
    R_SEQ_WINDOW,
    R_TOO_OLD,
    R_VLAN_FRAMES,
    R_VLAN_LAST,
    RX_STRIDE,
)

NEG_LAT_NS = 1 << 28  # latencies within 268 ms below zero are "negative"
WINDOW_MAX = 1 << 20
WINDOW_BUDGET = 1 << 23  # slots (uint16) over all streams
WINDOW_MIN = 1 << 10
PENDING_NS = 1_000_000_000  # a sampled frame waits this long for its kernel tx time
_M32 = (1 << 32) - 1
_TWO31 = 1 << 31
_TWO32 = 1 << 32


def lat_bucket(v: np.ndarray) -> np.ndarray:
    """Histogram bucket of latencies ``v`` (int64 ns, 0 <= v < 2**32).

    Buckets 0..15: [64*b, 64*(b+1)) ns. Then for each exponent e = 10..31 sixteen
    sub-buckets of width 2**(e-4): bucket ``16 + (e-10)*16 + (v >> (e-4)) - 16``.
    Relative resolution 1/16 (6.25 %) from 1 µs to 4.29 s.
    """
    v = np.asarray(v, dtype=np.int64)
    # floor(log2 v) from the float64 exponent bits (exact: v < 2**53)
    e = (np.maximum(v, 1).astype(np.float64).view(np.int64) >> 52) - 1023
    e = np.minimum(np.maximum(e, HIST_MIN_EXP), HIST_MAX_EXP)  # (ufuncs: np.clip costs 4x)
    # below 2**10, e is clipped to 10 and this is the linear bucket v >> 6 (HIST_LINEAR_SHIFT)
    b = (e - HIST_MIN_EXP) * HIST_SUB + (v >> (e - 4))
    return np.minimum(np.maximum(b, 0), HIST_BUCKETS - 1)


def hist_edges_ns() -> np.ndarray:
    """HIST_BUCKETS + 1 bucket edges in ns (bucket b covers [edges[b], edges[b+1]))."""
    edges = [b << HIST_LINEAR_SHIFT for b in range(HIST_SUB)]
    for e in range(HIST_MIN_EXP, HIST_MAX_EXP + 1):
        edges += [(HIST_SUB + m) << (e - 4) for m in range(HIST_SUB)]
    edges.append(1 << 32)
    return np.array(edges, dtype=np.int64)


def hist_percentile_ns(hist: np.ndarray, q: float) -> float | None:
    """The q-quantile (0..1) of a histogram, as the upper edge of its bucket (conservative).

    Nearest rank as in METHODOLOGY (``sorted[ceil(q*n) - 1]``); None for an empty histogram.
    """
    h = np.asarray(hist, dtype=np.int64)
    n = int(h.sum())
    if n == 0:
        return None
    rank = max(1, int(np.ceil(q * n)))
    b = int(np.searchsorted(np.cumsum(h), rank))
    return float(hist_edges_ns()[b + 1])


def _segments(s: np.ndarray) -> tuple[np.ndarray, ...]:
    """Runs of equal stream indexes in ``s`` (grouped by stream): (starts, stream of each
    run, its length, the run of each frame, the last frame of each run)."""
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    seg_len = np.diff(np.r_[starts, len(s)])
    seg_id = np.repeat(np.arange(len(starts)), seg_len)
    return starts, s[starts], seg_len, seg_id, starts + seg_len - 1


def window_for(n_streams: int) -> int:
    w = WINDOW_BUDGET // max(1, n_streams)
    w = 1 << max(0, w.bit_length() - 1)
    return int(max(WINDOW_MIN, min(WINDOW_MAX, w)))


class RxStats:
    """Per-stream rx accounting into ``table`` (an (n_streams, RX_STRIDE) int64 view)."""

    def __init__(
        self,
        table: np.ndarray,
        window: int | None = None,
        skew: dict | None = None,
        stamps=None,
    ) -> None:
        if table.ndim != 2 or table.shape[1] != RX_STRIDE:
            raise ValueError("table must be (n_streams, RX_STRIDE)")
        self.t = table
        self.n_streams = table.shape[0]
        self.window = int(window or window_for(self.n_streams))
        if self.window & (self.window - 1):
            raise ValueError("window must be a power of two")
        self.wbits = self.window.bit_length() - 1
        self._win = np.zeros((self.n_streams, self.window), dtype=np.uint16)
        self._last_lat = np.full(self.n_streams, -1, dtype=np.int64)
        # spacing chain: each row's last frame (extended seq, -1 none; kernel rx ns)
        self._iat_seq = np.full(self.n_streams, -1, dtype=np.int64)
        self._iat_rx = np.zeros(self.n_streams, dtype=np.int64)
        self.t[:, R_SEQ_WINDOW] = self.window
        self._hist_iota = None
        # per stream: rx clock - tx clock (ns) for streams sent from another host
        self._skew = np.zeros(self.n_streams, dtype=np.int64)
        for k, v in (skew or {}).items():
            if 0 <= int(k) < self.n_streams:
                self._skew[int(k)] = int(v)
        self._has_skew = bool(self._skew.any())
        self._stamps = stamps  # a txstamps.StampTable: kernel tx times of sampled frames
        # sampled frames still waiting for their kernel tx time: stream, seq, rx_ns
        self._pend = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))

    def clear(self, streams: list[int] | None = None) -> None:
        """Reset the sequence state (window, highest seq, min/max, jitter chain) of every
        stream, or of ``streams`` (global indexes). Counters stay monotonic."""
        idx = slice(None) if streams is None else [s for s in streams if 0 <= s < self.n_streams]
        self._win[idx] = 0
        self._last_lat[idx] = -1
        self._iat_seq[idx] = -1
        if self.pending:
            ps = self._pend[0]
            keep = np.zeros(len(ps), bool) if streams is None else ~np.isin(ps, idx)
            self._pend = tuple(a[keep] for a in self._pend)
        t = self.t
        t[idx, R_MAX_SEQ] = -1
        t[idx, R_LAT_MIN] = INT64_MAX
        t[idx, R_LAT_MAX] = -1
        t[idx, R_CLEARS] += 1

    # ------------------------------------------------------------------ the batch
    def add(self, batch) -> tuple[int, int]:
        """Fold an :class:`~tgen_tui.worker.rxring.RxBatch` in. Returns (with_sig, other)."""
        n = len(batch)
        if n == 0:
            return 0, 0
        good = (batch.magic == SIG_MAGIC) & (batch.stream < self.n_streams)
        ng = int(np.count_nonzero(good))
        if ng == 0:
            return 0, n
        if ng < n:
            idx = np.flatnonzero(good)
            stream, seq, ts = batch.stream[idx], batch.seq[idx], batch.ts[idx]
            rx_ns, vlan, length = batch.rx_ns[idx], batch.vlan[idx], batch.length[idx]
        else:
            stream, seq, ts = batch.stream, batch.seq, batch.ts
            rx_ns, vlan, length = batch.rx_ns, batch.vlan, batch.length
        self.account(stream, seq, ts, rx_ns, vlan, length)
        return ng, n - ng

    def count_plain(self, stream, rx_ns, vlan, length) -> None:
        """Frames of known streams without a signature (a replayed capture's, matched by
        flow: worker.replayrx): frames, bytes, first and last receive time only."""
        s = np.asarray(stream, dtype=np.int64)
        if not len(s):
            return
        t = self.t
        byt = np.asarray(length, dtype=np.int64) + np.where(vlan >= 0, VLAN_TAG_LEN, 0)
        np.add.at(t[:, R_FRAMES], s, 1)
        np.add.at(t[:, R_BYTES], s, byt)
        for k in np.unique(s):
            mine = rx_ns[s == k]
            if t[k, R_FIRST_RX_NS] == 0:
                t[k, R_FIRST_RX_NS] = int(mine.min())
            t[k, R_LAST_RX_NS] = max(int(t[k, R_LAST_RX_NS]), int(mine.max()))

    def account(self, stream, seq, ts, rx_ns, vlan, length) -> None:
        """The arithmetic, on per-frame arrays of signature frames (arrival order)."""
        s = np.asarray(stream, dtype=np.int64)
        n = len(s)
        if n > 1 and (s != s[0]).any():
            order = np.argsort(s, kind="stable")  # arrival order kept within a stream
            s = s[order]
            seq, ts, rx_ns, vlan, length = (
                seq[order],
                ts[order],
                rx_ns[order],
                vlan[order],
                length[order],
            )
        seg = _segments(s)
        starts, uniq, _, seg_id, _ = seg
        # sequence extension against the stream's highest seq before this batch
        h_seg = self.t[uniq, R_MAX_SEQ]  # -1: none yet
        h = h_seg[seg_id]
        base = np.where(h >= 0, h, np.asarray(seq, dtype=np.int64)[starts][seg_id])
        ext = (base & ~_M32) | np.asarray(seq, dtype=np.int64)
        d = ext - base
        ext = ext - (d > _TWO31) * _TWO32 + (d < -_TWO31) * _TWO32
        dup, ooo, too_old, hnew = self._order(s, ext, h, h_seg, seg)
        self._sums(seg, length, vlan, rx_ns, (ooo, dup, too_old), hnew)
        self._spacing(seg, ext, np.asarray(rx_ns, dtype=np.int64))
        self._latency(s, ext, ts, rx_ns, dup)

    def _order(self, s, ext, h, h_seg, seg) -> tuple:
        """(duplicate, out of order, too old) per frame, and each stream's new highest seq."""
        starts, _, _, seg_id, ends = seg
        n = len(ext)
        # running max before each frame (earlier batches and earlier in this batch), per
        # segment through one global cummax of segment-offset values
        seg_lo = np.minimum(np.minimum.reduceat(ext, starts), h_seg)
        lo = seg_lo[seg_id]
        rel = ext - lo
        span = int(rel.max()) + 1
        incl = np.maximum.accumulate(seg_id * span + rel) - seg_id * span
        prev_rel = np.empty(n, dtype=np.int64)
        prev_rel[1:] = incl[:-1]
        prev_rel[starts] = -1
        prev = np.maximum(np.where(prev_rel >= 0, prev_rel + lo, -1), h)
        seg_max = incl[ends] + seg_lo
        # duplicates: within the batch (sort) and against the window
        dup = np.zeros(n, dtype=bool)
        if n > 1 and not (np.diff(ext)[np.diff(seg_id) == 0] > 0).all():
            o2 = np.lexsort((ext, seg_id))
            same = (ext[o2][1:] == ext[o2][:-1]) & (seg_id[o2][1:] == seg_id[o2][:-1])
            # the later arrival of equal (stream, seq) pairs is the duplicate: lexsort is
            # stable, so o2 lists equal pairs in arrival order
            dup[o2[1:][same]] = True
        w = self.window
        too_old = (h >= 0) & (ext <= h - w)
        chk = (h >= 0) & (ext <= h) & ~too_old
        slot = ext & (w - 1)
        tag = ((ext >> self.wbits) & 0xFFFF) + 1
        if chk.any():
            ci = np.flatnonzero(chk)
            dup[ci] |= self._win[s[ci], slot[ci]] == tag[ci]
        ooo = ~dup & (ext < prev)
        # remember every non-duplicate frame still inside the new window
        hnew = np.maximum(h_seg, seg_max)
        keep = ~dup & (ext > hnew[seg_id] - w)
        self._win[s[keep], slot[keep]] = tag[keep].astype(np.uint16)
        return dup, ooo, too_old, hnew

    def _sums(self, seg, length, vlan, rx_ns, flags, hnew) -> None:
        """Add each stream's counts to its row (segments are contiguous: reduceat)."""
        starts, uniq, seg_len, _, ends = seg
        ooo, dup, too_old = flags
        t = self.t
        byt = np.asarray(length, dtype=np.int64) + np.where(vlan >= 0, VLAN_TAG_LEN, 0)
        tagged = vlan >= 0
        row = t[uniq]  # copy of the rows, written back at once
        row[:, R_FRAMES] += seg_len
        row[:, R_BYTES] += np.add.reduceat(byt, starts)
        row[:, R_OOO] += np.add.reduceat(ooo.astype(np.int64), starts)
        row[:, R_DUP] += np.add.reduceat(dup.astype(np.int64), starts)
        row[:, R_TOO_OLD] += np.add.reduceat(too_old.astype(np.int64), starts)
        row[:, R_MAX_SEQ] = hnew
        row[:, R_VLAN_FRAMES] += np.add.reduceat(tagged.astype(np.int64), starts)
        if tagged.any():
            last_tag = np.maximum.reduceat(np.where(tagged, np.arange(len(vlan)), -1), starts)
            has = last_tag >= 0
            row[has, R_VLAN_LAST] = vlan[last_tag[has]]
        first_rx = rx_ns[starts]
        row[:, R_FIRST_RX_NS] = np.where(
            row[:, R_FIRST_RX_NS] == 0, first_rx, row[:, R_FIRST_RX_NS]
        )
        row[:, R_LAST_RX_NS] = rx_ns[ends]
        row[:, R_LAT_EVERY] = 0 if self._stamps is None else np.maximum(self._stamps.every[uniq], 0)
        t[uniq] = row

    # ------------------------------------------------------------------ spacing
    def _spacing(self, seg, ext, rx_ns) -> None:
        """Inter-arrival gaps of consecutive sequence numbers, per row (module docstring)."""
        starts, uniq, _, seg_id, ends = seg
        n = len(ext)
        prev_seq = np.empty(n, dtype=np.int64)
        prev_rx = np.empty(n, dtype=np.int64)
        prev_seq[1:], prev_rx[1:] = ext[:-1], rx_ns[:-1]
        prev_seq[starts], prev_rx[starts] = self._iat_seq[uniq], self._iat_rx[uniq]
        self._iat_seq[uniq], self._iat_rx[uniq] = ext[ends], rx_ns[ends]
        ok = (prev_seq >= 0) & (ext == prev_seq + 1)
        if not ok.any():
            return
        nseg = len(starts)
        oi = np.flatnonzero(ok)  # only the gaps from here on
        gap = np.maximum(rx_ns[oi] - prev_rx[oi], 0)
        sid = seg_id[oi]
        asked_seg = np.zeros(nseg, np.int64) if self._stamps is None else self._stamps.gap_ns[uniq]
        asked = asked_seg[sid]
        known = asked > 0
        err = np.abs(gap - asked) * known
        within = known & (err * 10 <= asked)
        b = lat_bucket(np.minimum(gap, _TWO32 - 1))
        # count, sum, asked count, |err| sum, within (contiguous slots R_IAT_COUNT..WITHIN)
        if sid[0] == sid[-1]:  # every gap of the batch in one row (the common case)
            segs = sid[:1]
            sums = np.array(
                [[len(gap)], [gap.sum()], [known.sum()], [err.sum()], [within.sum()]], np.int64
            )
            hc = np.bincount(b, minlength=HIST_BUCKETS)
        else:
            g_starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
            segs = sid[g_starts]
            vals = np.stack((np.ones_like(gap), gap, known, err, within)).astype(np.int64)
            sums = np.add.reduceat(vals, g_starts, axis=1)
            local = np.repeat(np.arange(len(segs)), np.diff(np.r_[g_starts, len(sid)]))
            hc = np.bincount(local * HIST_BUCKETS + b, minlength=len(segs) * HIST_BUCKETS)
        t = self.t
        rows = uniq[segs]
        row = t[rows]
        row[:, R_IAT_COUNT : R_IAT_WITHIN + 1] += sums.T
        a = asked_seg[segs]
        row[:, R_IAT_ASKED] = np.where(a > 0, a, row[:, R_IAT_ASKED])
        row[:, R_IAT_HIST:R_HIST] += hc.reshape(len(segs), HIST_BUCKETS)
        t[rows] = row

    # ------------------------------------------------------------------ latency
    def _latency(self, s, ext, ts, rx_ns, dup) -> None:
        """Which frames carry a latency (see the module docstring) and fold them in."""
        rx_ns = rx_ns.astype(np.int64)
        every = None if self._stamps is None else self._stamps.every[s]
        if every is None or not every.any():  # signature stamps only
            lat, neg = self._signature_latency(s, ts, rx_ns)
            self._fold(s, lat, neg)
            return
        if (every < 0).all():  # one mode in the batch: widened signatures, no subsets
            lat, neg = self._signature_latency(s, ts, rx_ns)
            lat, neg, old = self._widen(s, ext, ts, rx_ns, -every, lat, neg)
            if old.any():
                np.add.at(self.t[:, R_LAT_UNSTAMPED], s[old], 1)
                keep = ~old
                s, lat, neg = s[keep], lat[keep], neg[keep]
            self._fold(s, lat, neg)
            return
        kern = every > 0
        sel = ~kern
        lat = np.zeros(len(s), dtype=np.int64)
        neg = np.zeros(len(s), dtype=bool)
        if sel.any():
            si = np.flatnonzero(sel)
            lat[si], neg[si] = self._signature_latency(s[si], ts[si], rx_ns[si])
            ui = si[every[si] < 0]
            if len(ui):  # signature stamps with 64-bit references: widen them
                lat[ui], neg[ui], old = self._widen(
                    s[ui], ext[ui], ts[ui], rx_ns[ui], -every[ui], lat[ui], neg[ui]
                )
                if old.any():  # sent too long ago to tell: no value, counted
                    sel[ui[old]] = False
                    np.add.at(self.t[:, R_LAT_UNSTAMPED], s[ui[old]], 1)
        k = np.flatnonzero(kern & ~dup & ((ext & (np.maximum(every, 1) - 1)) == 0))
        if len(k):
            tx = self._stamps.lookup(s[k], ext[k], every[k])
            ok = tx >= 0
            kk = k[ok]
            lat[kk] = rx_ns[kk] - tx[ok]
            neg[kk] = lat[kk] < 0
            lat[kk] = np.maximum(lat[kk], 0)
            sel[kk] = True
            if not ok.all():
                w = k[~ok]
                self._pend = tuple(
                    np.concatenate([p, a[w]])
                    for p, a in zip(self._pend, (s, ext, rx_ns), strict=True)
                )
        if sel.any():
            si = np.flatnonzero(sel)
            self._fold(s[si], lat[si], neg[si])

    def _widen(self, s, ext, ts, rx_ns, k, lat32, neg32):
        """Signature latency without the 32-bit wrap: the send time of the nearest sampled
        frame before each (``seq - seq % K``, 64-bit, from the table) is within 2**31 ns
        of the frame's own stamp, so the stamp's high bits follow from it. Returns
        (latency, negative, too_old): too_old frames were sent more than the table's
        window of samples ago and have no trustworthy value."""
        q0 = ext - (ext & (k - 1))
        # one table lookup per run of frames that share a reference (consecutive frames
        # mostly do: K of them), not one per frame
        n = len(q0)
        head = np.ones(n, dtype=bool)
        head[1:] = (q0[1:] != q0[:-1]) | (s[1:] != s[:-1])
        ri = np.flatnonzero(head)
        run_len = np.diff(np.r_[ri, n])
        ref_r = self._stamps.lookup(s[ri], q0[ri], k[ri])
        old_r = (ref_r < 0) & self._stamps.overwritten(s[ri], q0[ri], k[ri])
        ref = np.repeat(ref_r, run_len)
        have = ref >= 0
        d = (np.asarray(ts, dtype=np.int64) - ref) & _M32
        d = np.where(d >= _TWO31, d - _TWO32, d)
        lat64 = rx_ns - (ref + d)
        lat = np.where(have, np.maximum(lat64, 0), lat32)
        neg = np.where(have, lat64 < 0, neg32)
        return lat, neg, np.repeat(old_r, run_len)

    def _signature_latency(self, s, ts, rx_ns) -> tuple[np.ndarray, np.ndarray]:
        lat = rx_ns - np.asarray(ts, dtype=np.int64)
        if self._has_skew:
            lat -= self._skew[s]
        lat &= _M32
        neg = lat > (_TWO32 - NEG_LAT_NS)
        return np.where(neg, 0, lat), neg

    @property
    def pending(self) -> int:
        """Sampled frames waiting for their kernel transmit time."""
        return len(self._pend[0])

    def resolve_pending(self, now_ns: int, final: bool = False) -> None:
        """Fold in the waiting sampled frames whose kernel transmit time has come; count
        those that waited longer than PENDING_NS (or all that are left, ``final``)."""
        if not self.pending:
            return
        s, ext, rx_ns = self._pend
        order = np.argsort(s, kind="stable")
        s, ext, rx_ns = s[order], ext[order], rx_ns[order]
        tx = self._stamps.lookup(s, ext, np.maximum(self._stamps.every[s], 1))
        ok = tx >= 0
        if ok.any():
            lat = rx_ns[ok] - tx[ok]
            self._fold(s[ok], np.maximum(lat, 0), lat < 0)
        gone = ~ok & (final | (rx_ns < now_ns - PENDING_NS))
        if gone.any():
            np.add.at(self.t[:, R_LAT_UNSTAMPED], s[gone], 1)
        wait = ~ok & ~gone
        self._pend = (s[wait], ext[wait], rx_ns[wait])

    def _fold(self, s, lat, neg) -> None:
        """Add latencies ``lat`` (ns, >= 0) of frames of streams ``s`` (grouped by stream,
        arrival order within one) to the table: count/sum/min/max, jitter, histogram."""
        n = len(s)
        if n == 0:
            return
        starts, uniq, seg_len, seg_id, ends = _segments(s)
        nseg = len(starts)
        # jitter: |D(i) - D(i-1)| within each stream, chained across batches
        dl = np.empty(n, dtype=np.int64)
        dl[1:] = np.abs(np.diff(lat))
        prev_lat = self._last_lat[uniq]
        dl[starts] = np.abs(lat[starts] - prev_lat)
        jv = np.ones(n, dtype=np.int64)
        jv[starts] = prev_lat >= 0
        dl[starts] *= jv[starts]
        self._last_lat[uniq] = lat[ends]
        t = self.t
        row = t[uniq]
        row[:, R_LAT_COUNT] += seg_len
        row[:, R_LAT_SUM] += np.add.reduceat(lat, starts)
        row[:, R_LAT_MIN] = np.minimum(row[:, R_LAT_MIN], np.minimum.reduceat(lat, starts))
        row[:, R_LAT_MAX] = np.maximum(row[:, R_LAT_MAX], np.maximum.reduceat(lat, starts))
        row[:, R_JIT_SUM] += np.add.reduceat(dl, starts)
        row[:, R_JIT_COUNT] += np.add.reduceat(jv, starts)
        row[:, R_NEG_LAT] += np.add.reduceat(neg.astype(np.int64), starts)
        b = lat_bucket(np.minimum(lat, _TWO32 - 1))
        hc = np.bincount(seg_id * HIST_BUCKETS + b, minlength=nseg * HIST_BUCKETS)
        row[:, R_HIST:] += hc.reshape(nseg, HIST_BUCKETS)
        t[uniq] = row
