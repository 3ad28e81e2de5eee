"""The batch builder of a replayed capture, and its due times at the recorded pace.

:class:`ReplayBuilder` plugs in where :class:`~tgen_tui.packets.batch.BatchBuilder` does
(``build(start, n, ts_ns) -> (buf, lens)``): frame ``i`` of the stream is row ``i mod N``
of the templates (:mod:`tgen_tui.packets.replay`) in loop ``i // N``. A batch is one
fancy-indexed row copy, then, vectorised over its rows:

- ``unique``: the sources of loop k move on by ``k x span`` (IPv4: the 32-bit address;
  IPv6: its low 64 bits), span = the distinct range of the rewritten sources, with the
  IPv4 header and the L4 (pseudo-header) checksums fixed incrementally;
- the signature's sequence number (i) and timestamp, in the rows that carry one, with
  their words added to the L4 checksum.

:class:`RecordedDueTimes` gives frame i the due time ``(k * period + o[r]) / speed``
(o: the recorded offsets from the first selected frame, each gap capped at max_gap;
period: one loop, the last offset plus the mean gap), with the same interface the
worker's pacer uses of :class:`~tgen_tui.packets.schedule.DueTimes`. A rate change
scales the speed (the schedule's pps is the loop's mean rate times the speed).

Imports: numpy and this package's plain-data modules (workers use this).
"""

from __future__ import annotations

import math
import time

import numpy as np

from tgen_tui.packets.batch import frames_of
from tgen_tui.packets.pcapread import Capture, PcapError, read_capture
from tgen_tui.packets.program import SIG_LEN, ReplayProgram, Schedule, StreamProgram
from tgen_tui.packets.replay import Replay, be, build_templates, fold, select
from tgen_tui.packets.schedule import DueTimes

_M32 = np.uint64(0xFFFFFFFF)
_FFFF_U = np.uint64(0xFFFF)
_FF = np.uint64(0xFF)
_S16 = np.uint64(16)


def _words_of(v: np.ndarray, width: int) -> np.ndarray:
    """Sum of the 16-bit big-endian words of ``width``-byte values (uint64)."""
    s = np.zeros_like(v)
    for j in range(0, width, 2):
        s += (v >> np.uint64(8 * (width - 2 - j))) & _FFFF_U
    return s


def _bswap16(v: np.ndarray) -> np.ndarray:
    return ((v & _FF) << np.uint64(8)) | ((v >> np.uint64(8)) & _FF)


def bpf_keep(rp: ReplayProgram):
    """The frame filter of ``rp`` (libpcap's bpf_filter over the capture's buffer)."""

    def keep(cap: Capture, idx: np.ndarray) -> np.ndarray:
        from tgen_tui.packets.bpf import filter_frames

        ok = filter_frames(
            rp.filter,
            cap.data.ctypes.data,
            cap.offset[idx].tolist(),
            cap.caplen[idx].tolist(),
            cap.origlen[idx].tolist(),
        )
        return np.array(ok, dtype=bool)

    return keep


def load_replay(rp: ReplayProgram, index: int) -> Replay:
    """Read, select and rewrite the capture of ``rp`` (PcapError naming the file)."""
    cap = read_capture(rp.file)
    idx = select(cap, rp, bpf_keep(rp))
    if not len(idx):
        what = f"frames {rp.first}-{rp.last or len(cap)}" + (
            f" with filter {rp.filter!r}" if rp.filter else ""
        )
        raise NothingSelected(f"{rp.file}: no frame selected ({len(cap)} in the file; {what})")
    return build_templates(cap, idx, rp, index)


def recorded_offsets(ts_ns: np.ndarray, max_gap_s: float) -> tuple[np.ndarray, float]:
    """(offset of each frame from the first, s, gaps capped at max_gap_s; one loop's period)."""
    gaps = np.diff(ts_ns.astype(np.float64)) / 1e9
    gaps = np.maximum(gaps, 0.0)  # a capture out of order: no negative gaps
    if max_gap_s > 0:
        gaps = np.minimum(gaps, max_gap_s)
    o = np.concatenate(([0.0], np.cumsum(gaps)))
    mean = float(o[-1]) / (len(o) - 1) if len(o) > 1 and o[-1] > 0 else 1e-3
    return o, float(o[-1]) + mean


class NothingSelected(PcapError):
    """The range and filter of a pcap: stream keep no frame of its file."""


class RecordedDueTimes:
    """Due times at the recorded pace (see the module docstring); DueTimes' interface."""

    def __init__(self, schedule: Schedule, offsets: np.ndarray, period_s: float) -> None:
        if not (schedule.pps > 0 and math.isfinite(schedule.pps)):
            raise ValueError(f"schedule pps must be > 0, got {schedule.pps!r}")
        self.schedule = schedule
        self.start_s = float(schedule.start_s)
        self.o = offsets
        self.n = len(offsets)
        self.period = period_s
        self.speed = schedule.pps * period_s / self.n  # pps = n / period * speed

    def due(self, start: int, n: int) -> np.ndarray:
        i = np.arange(start, start + n, dtype=np.int64)
        k, r = np.divmod(i, self.n)
        return self.start_s + (k * self.period + self.o[r]) / self.speed

    def due_one(self, i: int) -> float:
        k, r = divmod(i, self.n)
        return self.start_s + (k * self.period + float(self.o[r])) / self.speed

    def _count_le(self, t: float) -> int:
        if t < self.start_s:
            return 0
        x = (t - self.start_s) * self.speed
        k = math.floor(x / self.period)
        c = k * self.n + int(np.searchsorted(self.o, x - k * self.period, side="right"))
        while c > 0 and self.due_one(c - 1) > t:  # float rounding: due(i) <= t <=> i < c
            c -= 1
        while self.due_one(c) <= t:
            c += 1
        return c

    def total(self) -> int | None:
        s = self.schedule
        tot = s.count
        if s.stop_s is not None:
            n_stop = self._count_le(math.nextafter(float(s.stop_s), -math.inf))
            tot = n_stop if tot is None else min(tot, n_stop)
        return tot

    def count_until(self, t: float) -> int:
        n = self._count_le(t)
        tot = self.total()
        return n if tot is None else min(n, tot)

    def mean_pps(self) -> float:
        return float(self.schedule.pps)


class ReplayBuilder:
    """Batches of a replayed capture's frames (the BatchBuilder interface)."""

    def __init__(self, program: StreamProgram, max_batch: int = 1024) -> None:
        rp = program.replay
        assert rp is not None
        self.p = program
        self.rp = rp
        self.max_batch = int(max_batch)
        self.r = load_replay(rp, program.index)
        if rp.frames and len(self.r) != rp.frames:
            raise PcapError(
                f"{rp.file}: {len(self.r)} frames selected now, {rp.frames} when the profile "
                "was compiled: the file changed"
            )
        t = self.r.t
        if rp.macs:
            t[:, :12] = np.frombuffer(program.template[:12], dtype=np.uint8)
        self.n = len(self.r)
        self.stride = t.shape[1]
        self.max_len = int(self.r.lens.max())
        self._buf = np.zeros((self.max_batch, self.stride), dtype=np.uint8)
        self._setup_rows()
        self._offsets: tuple[np.ndarray, float] | None = None

    def _setup_rows(self) -> None:
        """Per template row, everything a batch needs: checksum offsets and values, the
        signature's place, the source address (unique loops)."""
        lay, t, n = self.r.layout, self.r.t, self.n
        rows = np.arange(n)
        self.l4c = lay.csum.astype(np.int64)
        self.l4c_val = np.where(self.l4c >= 0, be(t, rows, np.maximum(self.l4c, 0), 2), 0)
        self.udp = lay.proto == 17
        self.v4 = lay.l3 == 4
        self.ipc = np.where(self.v4, lay.l3off + 10, -1)
        self.ipc_val = np.where(self.v4, be(t, rows, lay.l3off + 10, 2), 0)
        self.sig = self.r.sig & (self.l4c >= -1)
        self.sig_pos = self.r.lens - SIG_LEN + 4  # seq, then ts
        self.odd = ((self.sig_pos - lay.l4off) & 1).astype(bool)
        self.pseudo = (self.l4c >= 0) & lay.pseudo
        self.src_pos = np.where(self.v4, lay.l3off + 12, lay.l3off + 16)  # IPv6: low 64 bits
        v6 = lay.l3 == 6
        self.src4 = np.where(self.v4, be(t, rows, np.where(self.v4, self.src_pos, 0), 4), 0)
        self.src6 = np.where(v6, be(t, rows, np.where(v6, self.src_pos, 0), 8), 0)
        self.span4 = self.span6 = 0
        if self.rp.unique:
            if self.v4.any():
                self.span4 = int(self.src4[self.v4].max()) - int(self.src4[self.v4].min()) + 1
            if v6.any():
                self.span6 = int(self.src6[v6].max()) - int(self.src6[v6].min()) + 1
        self.rows_v6 = v6
        # the signature rows, for batches that do not wrap: their place, parity, checksum
        sr = np.flatnonzero(self.sig)
        self._s_rows, self._s_pos, self._s_odd = sr, self.sig_pos[sr], self.odd[sr]
        self._s_coff, self._s_cval, self._s_udp = self.l4c[sr], self.l4c_val[sr], self.udp[sr]
        self._ar8 = np.arange(8)

    def due_times(self, schedule: Schedule):
        """The pacer's due times: recorded (timing: recorded) or the schedule's rate."""
        if self.rp.timing != "recorded":
            return DueTimes(schedule)
        if self._offsets is None:
            self._offsets = recorded_offsets(self.r.ts_ns, self.rp.max_gap_s)
        o, period = self._offsets
        return RecordedDueTimes(schedule, o, period)

    def _put(self, flat: np.ndarray, pos: np.ndarray, v: np.ndarray, width: int) -> None:
        """Big-endian ``width``-byte values ``v`` at flat positions ``pos``."""
        for j in range(width):
            flat[pos + j] = (v >> np.uint64(8 * (width - 1 - j))) & _FF

    def _unique(self, flat, base, rows, loop, l4add) -> None:
        """Sources of loop k > 0 moved on by k x span: the words' change goes into the
        IPv4 header checksum here and into the L4 checksum's sum (``l4add``)."""
        k = loop.astype(np.uint64)
        for fam, span, width in ((4, self.span4, 4), (6, self.span6, 8)):
            on = (self.v4[rows] if fam == 4 else self.rows_v6[rows]) & (loop > 0)
            sel = np.flatnonzero(on)
            if not span or not len(sel):
                continue
            r = rows[sel]
            old = (self.src4 if fam == 4 else self.src6)[r]
            with np.errstate(over="ignore"):
                new = old + k[sel] * np.uint64(span)
            if fam == 4:
                new &= _M32
            self._put(flat, base[sel] + self.src_pos[r], new, width)
            d = _words_of(new, width) + (np.uint64(0xFFFF * (width // 2)) - _words_of(old, width))
            if fam == 4:
                c = ~fold((~self.ipc_val[r] & _FFFF_U) + d) & _FFFF_U
                self._put(flat, base[sel] + self.ipc[r], c, 2)
            l4add[sel] += np.where(self.pseudo[r], d, np.uint64(0))

    def build(
        self, start: int, n: int, ts_ns: int | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``start .. start+n-1`` -> (buf (n, stride) view, lengths (n,)); the
        buffer is reused by the next call."""
        if n > self.max_batch:
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        loop0, r0 = divmod(start, self.n)
        if r0 + n <= self.n and not (loop0 and (self.span4 or self.span6)):
            return self._build_slice(start, r0, n, ts_ns)
        idx = np.arange(start, start + n, dtype=np.int64)
        loop, rows = np.divmod(idx, self.n)
        buf = self._buf[:n]
        r0 = int(rows[0])
        if r0 + n <= self.n:  # no wrap: one slice copy
            buf[:] = self.r.t[r0 : r0 + n]
        else:
            np.take(self.r.t, rows, axis=0, out=buf)
        lens = self.r.lens[rows]
        flat = self._buf.reshape(-1)
        base = np.arange(n, dtype=np.int64) * self.stride
        l4add = np.zeros(n, dtype=np.uint64)
        if self.span4 or self.span6:
            self._unique(flat, base, rows, loop, l4add)
        if ts_ns is None:
            ts_ns = time.monotonic_ns()
        sel = np.flatnonzero(self.sig[rows])
        if len(sel):
            r = rows[sel]
            seq = idx[sel].astype(np.uint64) & _M32
            ts = np.broadcast_to(np.asarray(ts_ns, dtype=np.uint64), idx.shape)[sel] & _M32
            word = np.empty((len(sel), 2), dtype="<u4")
            word[:, 0], word[:, 1] = seq, ts
            pos = (base[sel] + self.sig_pos[r])[:, None] + np.arange(8)
            flat[pos] = word.view(np.uint8).reshape(-1, 8)
            ssum = fold((seq & _FFFF_U) + (seq >> _S16) + (ts & _FFFF_U) + (ts >> _S16))
            l4add[sel] += np.where(self.odd[r], ssum, _bswap16(ssum))
        fix = np.flatnonzero((l4add != 0) & (self.l4c[rows] >= 0))
        if len(fix):
            r = rows[fix]
            c = ~fold((~self.l4c_val[r] & _FFFF_U) + l4add[fix]) & _FFFF_U
            c = np.where(self.udp[r] & (c == 0), _FFFF_U, c)
            self._put(flat, base[fix] + self.l4c[r], c, 2)
        return buf, lens

    def _build_slice(self, start: int, r0: int, n: int, ts_ns) -> tuple[np.ndarray, np.ndarray]:
        """A batch of consecutive rows of one loop without address offsets (the common
        case): one slice copy, then only the signature rows' seq, ts and checksum."""
        buf = self._buf[:n]
        buf[:] = self.r.t[r0 : r0 + n]
        lens = self.r.lens[r0 : r0 + n]
        lo, hi = np.searchsorted(self._s_rows, (r0, r0 + n))
        if hi > lo:
            j = self._s_rows[lo:hi] - r0
            seq = (j + start).astype(np.uint64) & _M32
            if ts_ns is None:
                ts_ns = time.monotonic_ns()
            if isinstance(ts_ns, np.ndarray):
                ts = ts_ns.astype(np.uint64)[j] & _M32
            else:
                ts = np.full(len(j), int(ts_ns) & 0xFFFFFFFF, dtype=np.uint64)
            word = np.empty((len(j), 2), dtype="<u4")
            word[:, 0], word[:, 1] = seq, ts
            flat = self._buf.reshape(-1)
            at = j * self.stride
            flat[(at + self._s_pos[lo:hi])[:, None] + self._ar8] = word.view(np.uint8).reshape(
                -1, 8
            )
            ssum = (seq & _FFFF_U) + (seq >> _S16) + (ts & _FFFF_U) + (ts >> _S16)
            ssum = (ssum & _FFFF_U) + (ssum >> _S16)
            ssum = (ssum & _FFFF_U) + (ssum >> _S16)
            add = np.where(self._s_odd[lo:hi], ssum, _bswap16(ssum))
            coff = self._s_coff[lo:hi]
            c = (~self._s_cval[lo:hi] & _FFFF_U) + add
            c = (c & _FFFF_U) + (c >> _S16)
            c = ~((c & _FFFF_U) + (c >> _S16)) & _FFFF_U
            c[(c == 0) & self._s_udp[lo:hi]] = 0xFFFF
            ok = coff >= 0
            pos = at[ok] + coff[ok]
            flat[pos] = (c[ok] >> np.uint64(8)).astype(np.uint8)
            flat[pos + 1] = (c[ok] & _FF).astype(np.uint8)
        return buf, lens

    def frames(self, start: int, n: int, ts_ns: int | np.ndarray | None = None) -> list[bytes]:
        """The frames as bytes objects (tests, pcap export)."""
        return frames_of(self, start, n, ts_ns)


__all__ = [
    "NothingSelected",
    "RecordedDueTimes",
    "ReplayBuilder",
    "load_replay",
    "recorded_offsets",
    "PcapError",
]
