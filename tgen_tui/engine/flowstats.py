"""Stateful stream figures, live: from each worker's flow table and the rx rows' receive
gap gauges (:mod:`tgen_tui.worker.counters`, written by :mod:`tgen_tui.worker.liveflow`).

Each figure is defined here once, and the run's result copies the final snapshot's:

- ``learned`` (a ``learn: true`` stream): distinct tuples its port's learner holds;
  ``learned_samples``: the first few, ``NAT address:port -> own address:port``;
- ``flows`` / ``flows_verified`` (a forward stream, whose port receives the replies):
  distinct flows its port sent, and of those the flows whose reply arrived;
  ``setup_latency_ns``: first reply received minus first frame sent, per verified flow
  (min, p50, p90, p99, max, avg; percentiles from the worker's log-linear histogram);
- ``outage_ms`` (any received stream): the longest gap between two of its frames (kernel
  receive times), ``outage_at_s``: when it began, in s from the first start. A gap that
  lasts to the end counts too (:func:`tail_gap`): from the last frame received (or the
  first sent, when none arrived) to the last frame sent, when that is the longest; then
  ``outage_recovered`` is False ("not recovered"), else True. Live, a tail counts once it
  is longer than ``LIVE_TAIL_NS`` (shorter, its frames may still be on the way).

The flow table is not baselined by a clear (the worker keeps its flows and tuples); the
gap gauges are reset by the worker at a clear.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tgen_tui.engine import figures as F
from tgen_tui.engine import lanes as L
from tgen_tui.engine.snapshot import SetupLatency, StreamStats
from tgen_tui.engine.stateful import tuple_text
from tgen_tui.packets.program import LIVE_TABLE
from tgen_tui.worker import counters as C

#: live, a stream's receive tail (last frame sent minus last received) shorter than this
#: is frames on the way (latency, the rx ring's block timeout, the worker's loop), not an
#: outage; settled (stopped, final), every frame has arrived and any tail counts
LIVE_TAIL_NS = 250_000_000
ROLE_LEARN = "learn"  # replies to learned tuples
ROLE_VERIFY = "verify"  # its port verifies its flows


def stream_roles(programs) -> list[str]:
    """Per program position: ROLE_LEARN, ROLE_VERIFY or "" (as engine/stateful.py
    ``live_options`` assigns learning and verification)."""
    live = [p for p in programs if p.table == LIVE_TABLE]
    out = []
    for p in programs:
        if p.table == LIVE_TABLE:
            out.append(ROLE_LEARN)
        elif any(q.port == p.rx_port and q.rx_port == p.port for q in live):
            out.append(ROLE_VERIFY)
        else:
            out.append("")
    return out


class FlowRead:
    """One sample's flow rows (per port name, over the port's workers) and receive gaps
    (per rx row, the longest over every receiver)."""

    def __init__(self, n_streams: int) -> None:
        self.rows: dict[str, np.ndarray] = {}
        self.gap = np.zeros(n_streams, dtype=np.int64)
        self.gap_at = np.zeros(n_streams, dtype=np.int64)
        self.last_rx = np.zeros(n_streams, dtype=np.int64)  # latest over the receivers

    def add(self, flows: np.ndarray, ports, rx: np.ndarray) -> None:
        """A worker's flow table (rows in ``ports`` order) and rx tables (gauges)."""
        for pn, row in zip(ports, flows, strict=True):
            self._port(pn, row)
        for t in rx:
            g = t[:, C.R_MAX_GAP]
            more = g > self.gap
            self.gap = np.where(more, g, self.gap)
            self.gap_at = np.where(more, t[:, C.R_GAP_START], self.gap_at)
            self.last_rx = np.maximum(self.last_rx, t[:, C.R_LAST_RX_NS])

    def _port(self, pn: str, row: np.ndarray) -> None:
        cur = self.rows.get(pn)
        if cur is None:
            self.rows[pn] = row.copy()
            return
        cur[C.F_LEARNED : C.F_SETUP_SUM + 1] += row[C.F_LEARNED : C.F_SETUP_SUM + 1]
        cur[C.F_SETUP_MIN] = min(cur[C.F_SETUP_MIN], row[C.F_SETUP_MIN])
        cur[C.F_SETUP_MAX] = max(cur[C.F_SETUP_MAX], row[C.F_SETUP_MAX])
        if cur[C.F_N_SAMPLES] == 0:
            cur[C.F_N_SAMPLES : C.F_HIST] = row[C.F_N_SAMPLES : C.F_HIST]
        cur[C.F_HIST :] += row[C.F_HIST :]

    def apply(
        self,
        st: StreamStats,
        sc,
        block: int,
        lanes: int,
        t0: float | None,
        tx_row: np.ndarray | None = None,
        settled: bool = False,
    ) -> StreamStats:
        """``st`` with its stateful figures (``sc``: its stats.StreamCtx; ``tx_row``: its
        tx row over its lanes, None: not sent here; ``settled``: its port is not sending,
        or this is the final snapshot)."""
        kw: dict = {}
        rows = L.rx_rows(sc.index, block, lanes)
        k = max(rows, key=lambda r: int(self.gap[r]))
        gap = int(self.gap[k])
        tail = None
        if sc.rx_port is not None and tx_row is not None:
            last_rx = max(int(self.last_rx[r]) for r in rows) if st.rx_frames > 0 else 0
            tail = tail_gap(tx_row, last_rx, st.lost, settled)
        if tail is not None and (tail[0] > gap or st.rx_frames == 0):
            kw.update(outage(tail[0], tail[1], t0, recovered=False))
        elif st.rx_frames > 0:
            kw.update(outage(gap, int(self.gap_at[k]), t0))
        row = self.rows.get(sc.port)
        role = getattr(sc, "role", "")
        if row is not None and role == ROLE_LEARN:
            kw["learned"] = int(row[C.F_LEARNED])
            kw["learned_samples"] = samples(row)
        elif row is not None and role == ROLE_VERIFY:
            kw["flows"] = int(row[C.F_FLOWS])
            kw["flows_verified"] = int(row[C.F_VERIFIED])
            kw["setup_latency_ns"] = setup_latency(row)
        return dataclasses.replace(st, **kw) if kw else st


def outage(gap_ns: int, start_ns: int, t0: float | None, recovered: bool = True) -> dict:
    """outage_ms (and outage_at_s when the gap began after the first start), and whether
    the stream's frames came back after it (False: the gap lasts to the end)."""
    out: dict = {"outage_ms": round(gap_ns / 1e6, 3), "outage_recovered": recovered}
    if start_ns > 0 and t0 is not None:
        out["outage_at_s"] = round(start_ns / 1e9 - t0, 3)
    return out


def tail_gap(
    tx_row: np.ndarray, last_rx_ns: int, lost: int, settled: bool
) -> tuple[int, int] | None:
    """The receive gap that lasts to the end, (ns, began at ns), or None: from the last
    frame received (``last_rx_ns``; 0: none arrived, from the first frame sent) to the
    last frame sent (the stream's tx row, CLOCK_MONOTONIC ns). Settled, only when frames
    were lost; live, only when longer than :data:`LIVE_TAIL_NS` (``lost`` does not count
    frames after the highest sequence received yet, so it is not asked)."""
    last_tx, first_tx = int(tx_row[C.T_LAST_TX_NS]), int(tx_row[C.T_FIRST_TX_NS])
    if last_tx <= 0:
        return None
    start = last_rx_ns if last_rx_ns > 0 else first_tx
    tail = last_tx - start
    if tail <= 0 or (settled and lost <= 0) or (not settled and tail < LIVE_TAIL_NS):
        return None
    return tail, start


def samples(row: np.ndarray) -> tuple[str, ...]:
    n = min(int(row[C.F_N_SAMPLES]), C.SAMPLES)
    t = row[C.F_SAMPLES : C.F_SAMPLES + 4 * n].reshape(n, 4)
    return tuple(tuple_text(r) for r in t)


def setup_latency(row: np.ndarray) -> SetupLatency | None:
    n = int(row[C.F_VERIFIED])
    if n <= 0:
        return None
    lo, hi = float(row[C.F_SETUP_MIN]), float(row[C.F_SETUP_MAX])
    h = row[C.F_HIST :]
    return SetupLatency(
        min=lo,
        p50=F.percentile_from_hist(h, 0.50, lo, hi),
        p90=F.percentile_from_hist(h, 0.90, lo, hi),
        p99=F.percentile_from_hist(h, 0.99, lo, hi),
        max=hi,
        avg=float(row[C.F_SETUP_SUM]) / n,
    )


def outage_note(recovered: bool | None) -> str:
    """ " (not recovered)" after an outage that lasts to the end, else ""."""
    return " (not recovered)" if recovered is False else ""


def short_text(st: StreamStats) -> str:
    """A table cell: ``256/256`` (flows verified / sent), ``L 256`` (tuples learned), "-"."""
    if st.flows is not None:
        return f"{st.flows_verified or 0:,}/{st.flows:,}"
    if st.learned is not None:
        return f"L {st.learned:,}"
    return "-"


def detail_line(st: StreamStats) -> str | None:
    """One line of a stream's stateful figures (the console), None when it has none:
    ``learned 256 (e.g. 198.19.0.1:40123 -> 198.19.0.2:7), verified 256/256, setup p50
    11.4 ms p99 18.8 ms, outage 0.1 ms``."""
    parts = []
    if st.learned is not None:
        eg = f" (e.g. {st.learned_samples[0]})" if st.learned_samples else ""
        parts.append(f"learned {st.learned:,}{eg}")
    if st.flows is not None:
        parts.append(f"verified {st.flows_verified or 0:,}/{st.flows:,}")
    sl = st.setup_latency_ns
    if sl is not None and sl.p50 is not None and sl.p99 is not None:
        parts.append(f"setup p50 {sl.p50 / 1e6:.1f} ms p99 {sl.p99 / 1e6:.1f} ms")
    if parts and st.outage_ms is not None:
        parts.append(f"outage {st.outage_ms:.1f} ms{outage_note(st.outage_recovered)}")
    return f"{st.name}: " + ", ".join(parts) if parts else None


__all__ = [
    "LIVE_TAIL_NS",
    "ROLE_LEARN",
    "ROLE_VERIFY",
    "FlowRead",
    "detail_line",
    "outage",
    "outage_note",
    "tail_gap",
    "samples",
    "setup_latency",
    "short_text",
    "stream_roles",
]
