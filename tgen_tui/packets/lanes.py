"""Sender lanes: one stream's frames split over N sender workers of one port.

Lane ``L`` of ``N`` sends the stream's frames ``i = k*N + L`` (k = 0, 1, 2, ...) when N
divides the stream's flow period P (:mod:`tgen_tui.packets.flowsplit`), else the frames
of the flows ``r mod N == L`` (r = i mod P): either way the union of the lanes' frames is
exactly the frame sequence one sender would send, so every field program keeps its
meaning, and with fixed/inc/dec/unique/table(fixed, inc, dec) fields each flow is sent by
one lane only, in order. A unique permutation still sends each tuple once per cycle (the
lanes split one cycle's indexes between them); RFC 4814 random values stay the ones the
single sender would draw (a stream with random fields is split by frame: its flows are
not kept on one lane, and the run says so).

Each lane has its own sequence space: its signature carries the lane-local frame number
``k`` as ``seq`` and, as the stream index, ``index + L * block`` (``block``: the number of
global stream indexes, so lane 0 keeps the stream's own index and one lane is exactly
today's frame). The receiver keeps one row per (stream, lane) and the engine merges the
rows of a stream (:mod:`tgen_tui.engine.lanes`).

Pacing: frame ``i`` of the stream is due at ``start + i/pps``; the lane's frame ``k`` is
``i = k*N + L``, due at ``start + L/pps + k/(pps/N)``: the lane runs at ``pps/N`` from
``start + L/pps``. Bursts and counts are divided the same way. A flow split (N does not
divide P) runs lane L at its share ``pps * c_L / P`` (c_L: its flows).

Imports: numpy and the packets' own plain-data modules (workers use this).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.flowsplit import LaneSplit, flow_period
from tgen_tui.packets.program import Schedule, StreamProgram


@dataclasses.dataclass(frozen=True)
class Lane:
    """Which lane of how many, and the signature's stream-index stride (``block``)."""

    lane: int = 0
    lanes: int = 1
    block: int = 0

    def __post_init__(self) -> None:
        if not (self.lanes >= 1 and 0 <= self.lane < self.lanes):
            raise ValueError(f"lane {self.lane} of {self.lanes}: need 0 <= lane < lanes")

    def sig_index(self, index: int) -> int:
        """The signature's stream index of this lane's frames of stream ``index``."""
        return index + self.lane * self.block


def lane_count(total: int | None, lane: Lane) -> int | None:
    """Frames of a stream of ``total`` frames that ``lane`` sends."""
    if total is None:
        return None
    return max(0, (total - lane.lane + lane.lanes - 1) // lane.lanes)


def lane_pps(pps: float, lane: Lane) -> float:
    return pps / lane.lanes


def lane_schedule(s: Schedule, lane: Lane, split: LaneSplit | None = None) -> Schedule:
    """The schedule of ``lane``'s share of a stream (see the module docstring); ``split``:
    the lane's flow split (LaneBuilder.split), None for the plain frame split."""
    if lane.lanes == 1:
        return s
    n = lane.lanes
    split = split or LaneSplit(lane.lane, n, None)
    start = s.start_s + (lane.lane / s.pps if s.pps > 0 else 0.0)
    share = split.share
    count = split.count(s.count)
    if share <= 0:  # a lane without a flow of this stream: nothing is ever due
        share, count = 1.0 / n, 0
    burst = s.burst
    if burst:
        burst = max(1, split.count(burst) or 0)
    return dataclasses.replace(s, pps=s.pps * share, count=count, start_s=start, burst=burst)


class LaneBuilder(BatchBuilder):
    """A :class:`BatchBuilder` for one lane: ``build(k, n)`` builds the lane's frames k ..
    k+n-1, i.e. the stream's frames ``k*N + L``, with the lane's signature (seq = k)."""

    def __init__(self, program: StreamProgram, lane: Lane, max_batch: int = 1024) -> None:
        self.lane = lane
        self._n = np.uint64(lane.lanes)
        self._l = np.uint64(lane.lane)
        self._lchunk_base = -1
        self._lchunk: list = []
        sig = dataclasses.replace(program, index=lane.sig_index(program.index))
        super().__init__(sig, max_batch=max_batch)
        rows = len(self._table_cols[0]) if self._table_cols else None
        self.split = LaneSplit(lane.lane, lane.lanes, flow_period(program, rows))

    def global_index(self, k: np.ndarray) -> np.ndarray:
        """The stream's frame indexes of the lane's frames ``k`` (flowsplit.LaneSplit)."""
        return self.split.index(k)

    def field_values(self, idx: np.ndarray, contiguous: bool = False) -> list[np.ndarray]:
        # lane frames k -> the stream's frames; the chunk caches of the parent assume
        # consecutive indexes, so random fields are hashed per batch and unique tuples
        # come from the lane's own chunk (_unique_values below)
        self._lane_k = idx
        return super().field_values(self.global_index(idx), contiguous=False)

    def lengths(self, idx: np.ndarray) -> np.ndarray:
        if self.p.sizes.mode == "fixed":
            return super().lengths(idx)
        return super().lengths(self.global_index(idx))

    def _unique_values(self, idx: np.ndarray, out: list) -> None:
        """Unique tuples of the lane's frames, from a cached chunk of UNIQUE_CHUNK lane
        frames (``idx``: their stream indexes, consecutive lane frames)."""
        p = self.p
        k = self._lane_k
        start, n = int(k[0]), len(k)
        c = self.UNIQUE_CHUNK
        base = start - start % c
        if n > c or start + n > base + c:
            self._unique_chunk(idx, out)
            return
        if self._lchunk_base != base:
            vals: list = [None] * len(p.fields)
            ks = np.arange(base, base + c, dtype=np.uint64)
            self._unique_chunk(self.global_index(ks), vals)
            self._lchunk = vals
            self._lchunk_base = base
        off = start - base
        for fi in p.unique:
            out[fi] = self._lchunk[fi][off : off + n]


def make_builder(program: StreamProgram, lane: Lane | None, max_batch: int) -> BatchBuilder:
    """The builder of ``program`` for ``lane`` (None or one lane: today's builder); a
    replayed capture's (packets.replaybuild) for a pcap: stream."""
    if program.replay is not None:
        from tgen_tui.packets.replaybuild import ReplayBuilder

        if lane is not None and lane.lanes > 1:
            raise ValueError(f"stream {program.name}: a pcap: stream is sent by one lane")
        return ReplayBuilder(program, max_batch=max_batch)  # type: ignore[return-value]
    if lane is None or lane.lanes == 1:
        return BatchBuilder(program, max_batch=max_batch)
    return LaneBuilder(program, lane, max_batch=max_batch)


__all__ = ["Lane", "LaneBuilder", "lane_count", "lane_pps", "lane_schedule", "make_builder"]
