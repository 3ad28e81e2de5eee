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
from tgen_tui.packets.replay import Replay, build_templates, byte_sums, fix_csum, put_be, select
from tgen_tui.packets.schedule import DueTimes

_M32 = np.uint64(0xFFFFFFFF)


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
        self._setup_unique()
        self._offsets: tuple[np.ndarray, float] | None = None

    def _setup_unique(self) -> None:
        lay = self.r.layout
        self.span4 = self.span6 = 0
        if not self.rp.unique:
            return
        t, rows = self.r.t, np.arange(self.n)
        from tgen_tui.packets.replay import be

        for fam, o, w in ((4, 12, 4), (6, 16, 8)):
            m = lay.l3 == fam
            if m.any():
                v = be(t, rows[m], lay.l3off[m] + o, w)
                span = int(v.max()) - int(v.min()) + 1
                setattr(self, f"span{fam}", span)

    def due_times(self, schedule: Schedule):
        """The pacer's due times: recorded (timing: recorded) or the schedule's rate."""
        if self.rp.timing != "recorded":
            return DueTimes(schedule)
        if self._offsets is None:
            self._offsets = recorded_offsets(self.r.ts_ns, self.rp.max_gap_s)
        o, period = self._offsets
        return RecordedDueTimes(schedule, o, period)

    def _unique(self, buf: np.ndarray, rows: np.ndarray, loop: np.ndarray) -> None:
        """Move the sources of loop k > 0 on by k x span; fix the checksums."""
        lay = self.r.layout
        for fam, o, w, span in ((4, 12, 4, self.span4), (6, 16, 8, self.span6)):
            sel = np.flatnonzero((lay.l3[rows] == fam) & (loop > 0))
            if not span or not len(sel):
                continue
            r = rows[sel]
            pos = lay.l3off[r] + o
            from tgen_tui.packets.replay import be

            with np.errstate(over="ignore"):
                v = be(buf, sel, pos, w) + loop[sel].astype(np.uint64) * np.uint64(span)
            if w == 4:
                v &= _M32
            l4b = np.maximum(lay.l4off[r], 0)
            old = byte_sums(buf, sel, pos, w, l4b)
            oldh = byte_sums(buf, sel, pos, w, lay.l3off[r])
            put_be(buf, sel, pos, w, v)
            if fam == 4:
                newh = byte_sums(buf, sel, pos, w, lay.l3off[r])
                fix_csum(buf, sel, lay.l3off[r] + 10, oldh, newh, w // 2 + 1, None)
            c = lay.csum[r]
            ok = (c >= 0) & lay.pseudo[r]
            new = byte_sums(buf, sel[ok], pos[ok], w, l4b[ok])
            fix_csum(buf, sel[ok], c[ok], old[ok], new, w // 2 + 1, lay.proto[r[ok]] == 17)

    def _signatures(self, buf, rows, lens, idx, ts_ns) -> None:
        lay = self.r.layout
        sel = np.flatnonzero(self.r.sig[rows])
        if not len(sel):
            return
        r = rows[sel]
        pos = lens[sel] - SIG_LEN + 4
        seq = (idx[sel].astype(np.uint64) & _M32).astype("<u4")
        ts = np.asarray(ts_ns, dtype=np.uint64)
        ts = np.broadcast_to(ts, idx.shape)[sel] & _M32
        word = np.empty((len(sel), 2), dtype="<u4")
        word[:, 0], word[:, 1] = seq, ts.astype("<u4")
        buf[sel[:, None], pos[:, None] + np.arange(8)] = word.view(np.uint8).reshape(-1, 8)
        c = lay.csum[r]
        ok = c >= 0
        new = byte_sums(buf, sel[ok], pos[ok], 8, lay.l4off[r[ok]])
        zero = np.zeros(int(ok.sum()), dtype=np.uint64)
        fix_csum(buf, sel[ok], c[ok], zero, new, 5, lay.proto[r[ok]] == 17)

    def build(
        self, start: int, n: int, ts_ns: int | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``start .. start+n-1`` -> (buf (n, stride) view, lengths (n,)); the
        buffer is reused by the next call."""
        if n > self.max_batch:
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        idx = np.arange(start, start + n, dtype=np.int64)
        loop, rows = np.divmod(idx, self.n)
        buf = self._buf[:n]
        np.take(self.r.t, rows, axis=0, out=buf)
        lens = self.r.lens[rows]
        if self.span4 or self.span6:
            self._unique(buf, rows, loop)
        if ts_ns is None:
            ts_ns = time.monotonic_ns()
        self._signatures(buf, rows, lens, idx, ts_ns)
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
