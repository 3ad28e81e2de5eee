"""Which frames of a stream each sender lane sends, so that every flow stays on one lane.

A stream's header tuple is a function of the frame index ``i``. When every header field
is periodic (fixed, inc, dec, a unique group, a table read in fixed/inc/dec order), the
tuple of frame ``i`` depends only on ``i mod P``, P the least common multiple of the
fields' exact periods (an inc/dec field of span S and step s: ``S / gcd(s, S)``; a unique
group: its product space; a table: its rows), and two frames carry the same tuple
exactly when their indexes agree mod P. The flows are then the residues ``r`` in
``[0, P)``, and lane ``L`` of ``N`` owns the flows ``r mod N == L``:

- N divides P (or P is astronomically large): those are the frames ``i = k*N + L``, the
  plain frame split; every lane has ``P/N`` flows and a rate ``pps/N``;
- otherwise lane L has ``c_L = ceil((P - L) / N)`` flows, and its frame ``k`` is
  ``i = (k div c_L) * P + L + (k mod c_L) * N``; its rate is ``pps * c_L / P`` (a lane
  with no flow, P <= L, sends nothing).

Either way the lanes' frames together are exactly the one sender's frames, no tuple is
sent by two lanes, and each lane sends a flow's frames in the one sender's order.

A random field (RFC 4814 PRNG, span > 1) or a table in random order has no period: such a
stream is split by frame index (``k*N + L``), every tuple still once per draw, but a
flow's frames may go out on different lanes (per-flow order across lanes is not kept):
:func:`split_warnings` says so for ``tgen validate`` and ``tgen run``.

Imports: numpy and the packets' plain-data modules (workers use this).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tgen_tui.packets.program import (
    DEC,
    FIXED,
    INC,
    LIVE_TABLE,
    RANDOM,
    TABLE,
    UNIQUE,
    StreamProgram,
)

HUGE = 1 << 62  # a period this long never completes in a run: the frame split is the flow split
PAYLOAD_FIELDS = ("rtp.",)  # fields of the payload (RTP sequence, timestamp): not of the flow


def table_rows(program: StreamProgram) -> int | None:
    """Rows of the stream's learned table (a file), None when live or unreadable."""
    if not program.table or program.table == LIVE_TABLE:
        return None
    from tgen_tui.packets.batch import read_learned_table

    try:
        return len(read_learned_table(program.table))
    except (OSError, ValueError):
        return None


def _field_period(program: StreamProgram, fi: int, rows: int | None) -> int | None:
    f = program.fields[fi]
    if f.mode == FIXED or (f.mode == RANDOM and f.span <= 1):
        return 1
    if f.mode in (INC, DEC):
        s = f.span
        return s // math.gcd(f.step % s, s)
    if f.mode == UNIQUE:  # a unique field outside the group: its own permutation
        return f.span
    if f.mode == TABLE:
        if program.table_order == "fixed":
            return 1
        if program.table_order in ("inc", "dec") and rows:
            return rows
    return None  # random (or a table in random order, or of unknown length)


def flow_period(program: StreamProgram, rows: int | None = None) -> int | None:
    """P: frames i and j carry the same header tuple exactly when i = j (mod P); None
    when a field has no period (random). ``rows``: the table's rows (table fields)."""
    p = program.unique_space if program.unique else 1
    for fi in range(len(program.fields)):
        if fi in program.unique or program.fields[fi].name.startswith(PAYLOAD_FIELDS):
            continue
        q = _field_period(program, fi, rows)
        if q is None:
            return None
        p = math.lcm(p, q)
        if p >= HUGE:
            return HUGE
    return min(HUGE, p * max(1, program.blocks))  # flows in blocks: each tuple B frames


@dataclasses.dataclass(frozen=True)
class LaneSplit:
    """Lane ``lane`` of ``lanes`` of a stream of flow period ``period`` (None: random)."""

    lane: int
    lanes: int
    period: int | None

    @property
    def by_flow(self) -> bool:
        """True when the lane's frames are not simply ``k*N + L`` (N does not divide P)."""
        p = self.period
        return p is not None and p < HUGE and p % self.lanes != 0

    @property
    def flows(self) -> int:
        """c_L: the flows (residues mod P) this lane owns (only when :attr:`by_flow`)."""
        assert self.period is not None
        return max(0, (self.period - self.lane + self.lanes - 1) // self.lanes)

    @property
    def share(self) -> float:
        """The lane's share of the stream's frames (and rate)."""
        if not self.by_flow:
            return 1.0 / self.lanes
        assert self.period is not None
        return self.flows / self.period

    def index(self, k: np.ndarray) -> np.ndarray:
        """The stream's frame indexes of the lane's frames ``k`` (uint64)."""
        n, lane = np.uint64(self.lanes), np.uint64(self.lane)
        if not self.by_flow:
            return k * n + lane
        c = np.uint64(max(1, self.flows))
        return (k // c) * np.uint64(self.period) + lane + (k % c) * n

    def count(self, total: int | None) -> int | None:
        """Frames of a stream of ``total`` frames that the lane sends."""
        if total is None:
            return None
        n, lane = self.lanes, self.lane
        if not self.by_flow:
            return max(0, (total - lane + n - 1) // n)
        assert self.period is not None
        q, r = divmod(total, self.period)
        return q * self.flows + max(0, (r - lane + n - 1) // n)


def split_warnings(programs, lanes: dict[str, int]) -> list[str]:
    """One line per stream sent over several lanes whose flows cannot stay on one lane
    (random fields), and per stream whose lanes cannot all get a flow (P < lanes)."""
    out = []
    for p in programs:
        n = lanes.get(p.port, 1)
        if n <= 1:
            continue
        period = flow_period(p, table_rows(p) if any(f.mode == TABLE for f in p.fields) else None)
        if period is None:
            out.append(
                f"stream {p.name}: random fields over {n} lanes of port {p.port}: split by "
                "frame, so a flow's frames may leave on different lanes (per-flow order "
                "across lanes is not kept; inc/dec/unique fields keep each flow on one lane)"
            )
        elif period < n:
            out.append(
                f"stream {p.name}: {period} flow(s) over {n} lanes of port {p.port}: each "
                f"flow stays on one lane, so {n - period} lane(s) send none of it"
            )
    return out


__all__ = ["HUGE", "LaneSplit", "flow_period", "split_warnings", "table_rows"]
