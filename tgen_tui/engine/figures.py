"""Every figure of a snapshot, defined once: short pure functions from counter deltas.

The sampler (:mod:`tgen_tui.engine.stats`) copies the counter blocks and subtracts the
baselines; the functions here turn what it read into the port, stream, worker and DUT
figures of a :class:`~tgen_tui.engine.snapshot.StatsSnapshot`. Each figure has one
definition in this module, and everything else (the result document, thresholds,
methodology trials, the console) copies or reuses it:

- **achieved** = requested × sent / due (:func:`achieved_pps`): what the sender kept up
  with, against the frames its schedule made due (DESIGN rule 7);
- rates are deltas over the measured interval (:func:`per_s`);
- **lost** is sent minus received (unique) once the sender is done, and the gaps below
  the highest sequence seen while it runs (:func:`lost_frames`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tgen_tui.engine.ownrows import tx_unsent
from tgen_tui.engine.snapshot import DutStats, Latency, PortStats, StreamStats, WorkerStats
from tgen_tui.engine.spacing import spacing
from tgen_tui.packets.program import FCS_LEN
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import hist_percentile_ns

# counters that are monotonic (subtract baselines); everything else is a gauge
PORT_MONO = [
    C.P_TX_FRAMES,
    C.P_TX_BYTES,
    C.P_TX_ERRORS,
    C.P_RX_FRAMES,
    C.P_RX_BYTES,
    C.P_RX_OTHER,
    C.P_RING_DROPS,
    C.P_LATE_EVENTS,
    C.P_BUSY_NS,
    C.P_RX_KERNEL_PACKETS,
    C.P_TX_DUE,
]
TX_MONO = [C.T_TX_FRAMES, C.T_TX_BYTES, C.T_DUE]
RX_MONO = [
    C.R_FRAMES,
    C.R_BYTES,
    C.R_OOO,
    C.R_DUP,
    C.R_LAT_COUNT,
    C.R_LAT_SUM,
    C.R_JIT_SUM,
    C.R_JIT_COUNT,
    C.R_NEG_LAT,
    C.R_VLAN_FRAMES,
    C.R_TOO_OLD,
    C.R_LAT_UNSTAMPED,
    C.R_IAT_COUNT,
    C.R_IAT_SUM,
    C.R_IAT_ASKED_COUNT,
    C.R_IAT_ABS_ERR,
    C.R_IAT_WITHIN,
]
HIST_MONO = C.R_IAT_HIST  # from here to the end of a row: the two histograms (monotonic)


STOPPED_STATES = ("idle", "stopped", "failed")


# ---------------------------------------------------------------------- one-line figures
def achieved_pps(requested_pps: float, sent: int, due: int) -> float:
    """The achieved rate: requested × sent / due (0 before anything is due)."""
    return requested_pps * sent / due if due > 0 else 0.0


def achieved_pct(achieved: float, requested_pps: float) -> float | None:
    """Achieved as % of requested (None when nothing was requested)."""
    return 100.0 * achieved / requested_pps if requested_pps else None


def mean_pps(frames: int, duration_s: float) -> float:
    """Frames per second over a whole run (0 for an empty one)."""
    return frames / duration_s if duration_s > 0 else 0.0


def per_s(now: float, before: float, dt: float) -> float:
    """A rate from two readings of a counter ``dt`` seconds apart."""
    return (now - before) / dt


def l2_bps(bytes_per_s: float, frames_per_s: float) -> float:
    """Bits/s on the wire at L2: frame bytes plus the FCS the counters do not see."""
    return (bytes_per_s + FCS_LEN * frames_per_s) * 8


def lost_frames(sent: int, unique_rx: int, max_seq: int, seq_floor: int, settled: bool) -> int:
    """Frames lost. ``settled`` (final, or the port is not sending): sent − received;
    live: the gaps below the highest sequence seen since the last clear (frames still
    in flight are not lost)."""
    if settled:
        return max(0, sent - unique_rx)
    if max_seq < 0:
        return 0
    return max(0, min(sent, max_seq + 1 - seq_floor) - unique_rx)


def loss_pct(lost: int, sent: int) -> float:
    return (100.0 * lost / sent) if sent else 0.0


def percentile_from_hist(
    hist: np.ndarray, q: float, lo: float | None = None, hi: float | None = None
) -> float | None:
    """The q-quantile from the worker's histogram (upper bucket edge, nearest rank as in
    METHODOLOGY), clamped to the exact min and max the worker also recorded."""
    v = hist_percentile_ns(hist, q)
    if v is None:
        return None
    if lo is not None:
        v = max(v, lo)
    if hi is not None:
        v = min(v, hi)
    return float(v)


def latency(row: np.ndarray, lat_min: int, lat_max: int) -> Latency:
    """A stream's latency from its summed rx row and its min/max over every rx table."""
    lc = int(row[C.R_LAT_COUNT])
    hist = row[C.R_HIST :]
    lmin = float(lat_min) if lc and lat_min != C.INT64_MAX else None
    lmax = float(lat_max) if lc and lat_max >= 0 else None
    jc = int(row[C.R_JIT_COUNT])
    return Latency(
        min=lmin,
        avg=(float(row[C.R_LAT_SUM]) / lc) if lc else None,
        p50=percentile_from_hist(hist, 0.50, lmin, lmax),
        p99=percentile_from_hist(hist, 0.99, lmin, lmax),
        p999=percentile_from_hist(hist, 0.999, lmin, lmax),
        max=lmax,
        jitter=(float(row[C.R_JIT_SUM]) / jc) if jc else None,
        p9999=percentile_from_hist(hist, 0.9999, lmin, lmax),
    )


# ---------------------------------------------------------------------- ports
@dataclass(frozen=True)
class IfDelta:
    """Interface counters since the port's baseline."""

    tx: int = 0
    rx: int = 0
    tx_bytes: int = 0
    rx_bytes: int = 0
    rx_dropped: int = 0
    tx_dropped: int = 0
    known: bool = False  # the interface's counters were read


def if_delta(counters: Any, base: tuple[int, ...] | None) -> IfDelta:
    """Interface counters (probes.IfCounters, or None) minus their baseline."""
    if counters is None:
        return IfDelta()
    b = base or (0, 0, 0, 0, 0, 0)
    c = counters
    return IfDelta(
        c.tx_packets - b[0],
        c.rx_packets - b[1],
        c.tx_bytes - b[2],
        c.rx_bytes - b[3],
        c.rx_dropped - b[4],
        c.tx_dropped - b[5] if len(b) > 5 else 0,
        known=True,
    )


def port_stats(
    pc: Any,  # stats.PortSetup
    pv: np.ndarray,  # the port's counter row, baselines subtracted
    ifd: IfDelta,
    rates: tuple[float, float, float, float],  # tx fps, rx fps, tx B/s, rx B/s
    if_rates: tuple[float, float],
    live: Any,  # stats.LiveState
) -> PortStats:
    txf, rxf = int(pv[C.P_TX_FRAMES]), int(pv[C.P_RX_FRAMES])
    req = sum(live.rates.get(i, 0.0) for i in pc.streams if i not in live.paused)
    due = int(pv[C.P_TX_DUE])
    return PortStats(
        name=pc.name,
        interface=pc.interface,
        netns=pc.netns,
        state=live.port_state.get(pc.name, "idle"),
        link=live.port_link.get(pc.name, "unknown"),
        failure=live.port_failure.get(pc.name),
        worker=pc.worker,
        core=pc.core,
        tx_frames=txf,
        rx_frames=rxf,
        tx_bytes=int(pv[C.P_TX_BYTES]),
        rx_bytes=int(pv[C.P_RX_BYTES]),
        rx_other=int(pv[C.P_RX_OTHER]),
        tx_errors=int(pv[C.P_TX_ERRORS]),
        rx_drops=int(pv[C.P_RING_DROPS]),
        late_events=int(pv[C.P_LATE_EVENTS]),
        tx_pps=rates[0],
        rx_pps=rates[1],
        tx_bps=l2_bps(rates[2], rates[0]),
        rx_bps=l2_bps(rates[3], rates[1]),
        requested_pps=req,
        achieved_pps=achieved_pps(req, txf, due),
        if_tx_frames=ifd.tx,
        if_rx_frames=ifd.rx,
        if_tx_bytes=ifd.tx_bytes,
        if_rx_bytes=ifd.rx_bytes,
        if_rx_dropped=ifd.rx_dropped,
        if_tx_dropped=ifd.tx_dropped,
        tx_unsent=tx_unsent(
            txf,
            ifd,
            live.port_state.get(pc.name, "idle") in STOPPED_STATES,
            pc.name in getattr(live, "link_lost", ()),
        ),
        if_tx_pps=if_rates[0],
        if_rx_pps=if_rates[1],
        speed_bps=pc.speed_bps,
        backlog=max(0, due - txf),
        late_max_ns=int(pv[C.P_LATE_MAX_NS]),
        host=pc.host,
        gateway_mac=getattr(pc, "gateway_mac", None),
        gateway6_mac=getattr(pc, "gateway6_mac", None),
        mac=getattr(pc, "mac", None),
        gateway=getattr(pc, "gateway", None),
        gateway6=getattr(pc, "gateway6", None),
    )


# ---------------------------------------------------------------------- streams
@dataclass(frozen=True)
class RxSum:
    """Every rx table's rows of one stream, summed (monotonic slots) or combined (gauges)."""

    row: np.ndarray  # RX_STRIDE slots: sums, histogram included
    max_seq: int
    lat_min: int
    lat_max: int
    vlan: int  # -1: none seen
    every: int
    iat_asked: int = 0  # the asked gap (ns) the receivers saw last; 0 none


class RxTotals:
    """Every worker's rx tables, summed per stream (monotonic slots) or combined (gauges)."""

    def __init__(self, n_streams: int) -> None:
        self.sum = np.zeros((n_streams, C.RX_STRIDE), dtype=np.int64)
        self.maxseq = np.full(n_streams, -1, dtype=np.int64)
        self.min = np.full(n_streams, C.INT64_MAX, dtype=np.int64)
        self.max = np.full(n_streams, -1, dtype=np.int64)
        self.vlan = np.full(n_streams, -1, dtype=np.int64)
        self.every = np.zeros(n_streams, dtype=np.int64)
        self.asked = np.zeros(n_streams, dtype=np.int64)
        # the lowest highest-seq over the receivers that saw the row (fanout: engine/lanes.py)
        self.minseq = np.full(n_streams, C.INT64_MAX, dtype=np.int64)

    def add(self, rx: np.ndarray) -> None:
        """One worker's rx tables (n_rx, n_streams, RX_STRIDE), baselines subtracted."""
        self.sum[:, RX_MONO] += rx[:, :, RX_MONO].sum(axis=0)
        self.sum[:, HIST_MONO:] += rx[:, :, HIST_MONO:].sum(axis=0)
        self.maxseq = np.maximum(self.maxseq, rx[:, :, C.R_MAX_SEQ].max(axis=0))
        ms = rx[:, :, C.R_MAX_SEQ]
        self.minseq = np.minimum(self.minseq, np.where(ms >= 0, ms, C.INT64_MAX).min(axis=0))
        self.min = np.minimum(self.min, rx[:, :, C.R_LAT_MIN].min(axis=0))
        self.max = np.maximum(self.max, rx[:, :, C.R_LAT_MAX].max(axis=0))
        self.every = np.maximum(self.every, rx[:, :, C.R_LAT_EVERY].max(axis=0))
        self.asked = np.maximum(self.asked, rx[:, :, C.R_IAT_ASKED].max(axis=0))
        has = rx[:, :, C.R_VLAN_LAST] >= 0
        if has.any():
            self.vlan = np.maximum(
                self.vlan, np.where(has, rx[:, :, C.R_VLAN_LAST], -1).max(axis=0)
            )

    def of(self, s: int) -> RxSum:
        return RxSum(
            self.sum[s],
            int(self.maxseq[s]),
            int(self.min[s]),
            int(self.max[s]),
            int(self.vlan[s]),
            int(self.every[s]),
            int(self.asked[s]),
        )


def stream_stats(
    pos: int,
    sc: Any,  # stats.StreamCtx
    tv: np.ndarray | None,  # the stream's tx row, baselines subtracted (None: not sent here)
    rx: RxSum,
    rates: tuple[float, float],  # tx fps, rx fps
    live: Any,  # stats.LiveState
    final: bool,
) -> StreamStats:
    txf = int(tv[C.T_TX_FRAMES]) if tv is not None else 0
    due = int(tv[C.T_DUE]) if tv is not None else 0
    row = rx.row
    rxf, dup = int(row[C.R_FRAMES]), int(row[C.R_DUP])
    settled = final or live.port_state.get(sc.port, "idle") in STOPPED_STATES
    lost = lost_frames(txf, rxf - dup, rx.max_seq, live.seq_floor.get(pos, 0), settled)
    req = live.rates.get(pos, 0.0)
    return StreamStats(
        name=sc.name,
        index=sc.index,
        port=sc.port,
        rx_port=sc.rx_port,
        requested_pps=req,
        tx_frames=txf,
        tx_bytes=int(tv[C.T_TX_BYTES]) if tv is not None else 0,
        rx_frames=rxf,
        rx_bytes=int(row[C.R_BYTES]),
        tx_pps=rates[0],
        rx_pps=rates[1],
        lost=lost,
        loss_pct=loss_pct(lost, txf),
        out_of_order=int(row[C.R_OOO]),
        duplicates=dup,
        latency_ns=latency(row, rx.lat_min, rx.lat_max),
        vlan_tci=rx.vlan & 0xFFFF if rx.vlan >= 0 else None,
        due_frames=due,
        achieved_pps=achieved_pps(req, txf, due),
        pacer_pps=int(tv[C.T_REQ_MPPS]) / 1000.0 if tv is not None else 0.0,
        paused=pos in live.paused,
        latency_every=rx.every,
        latency_unstamped=int(row[C.R_LAT_UNSTAMPED]),
        spacing=spacing(row, rx.iat_asked, getattr(sc, "schedule", None), req),
    )


# ---------------------------------------------------------------------- workers
def worker_stats(
    wc: Any,  # stats.WorkerCtx
    wl: Any,  # stats.WorkerLive
    ports: tuple[PortStats, ...] | list[PortStats],
    core_pct: float,
    cpu_mean: tuple[float, float],  # core, process: means over the samples while running
    busy_pct: float,
    heartbeat_age_s: float | None,
    own_pps: tuple[float, float] | None = None,  # a lane worker: its own tx, rx fps
) -> WorkerStats:
    mine = [p for p in ports if p.name in wc.ports]
    tx_pps = sum(p.tx_pps for p in mine) if own_pps is None else own_pps[0]
    rx_pps = sum(p.rx_pps for p in mine) if own_pps is None else own_pps[1]
    return WorkerStats(
        id=wc.id,
        core=wc.core,
        pid=wl.pid,
        ports=wc.ports,
        streams=wc.streams,
        alive=wl.alive,
        tx_pps=tx_pps,
        rx_pps=rx_pps,
        core_cpu_pct=core_pct,
        proc_cpu_pct=wl.proc_cpu_pct if wl.alive else 0.0,
        core_cpu_mean=cpu_mean[0],
        proc_cpu_mean=cpu_mean[1],
        exit_reason=wl.exit_reason,
        heartbeat_age_s=heartbeat_age_s,
        busy_pct=busy_pct,
        tx_path=wl.tx_path,
        tx_path_why=wl.tx_path_why,
        pacing=wl.pacing,
        lane=getattr(wc, "lane", 0),
        lanes=getattr(wc, "lanes", 1),
    )


def busy_pct(busy_ns: int, before_ns: int, dt: float) -> float:
    """Share of the interval the worker spent working (its loop's busy time), %."""
    return min(100.0, 100.0 * (busy_ns - before_ns) / (dt * 1e9))


# ---------------------------------------------------------------------- DUT
@dataclass
class DutTrack:
    """What the DUT figures remember between samples (reset by a full clear)."""

    peak: int = 0
    start: int | None = None  # the count before any port started (the rise is from it)
    full_at: float | None = None  # run time at which the table filled


def dut_stats(
    track: DutTrack,
    reading: Any,  # probes.DutReading
    source: str,
    settings: tuple[tuple[str, str], ...],
    new_per_s: float,
    t: float | None,  # run time (None: nothing started yet)
) -> DutStats:
    """DUT figures; updates ``track`` (peak, start, the time the table filled)."""
    if reading.count is not None:
        if track.start is None:
            track.start = reading.count
        track.peak = max(track.peak, reading.count)
        full = reading.max and reading.count >= reading.max
        if full and track.full_at is None and t is not None:
            track.full_at = t
    return DutStats(
        source=source,
        conntrack_count=reading.count,
        conntrack_max=reading.max,
        conntrack_peak=track.peak,
        conntrack_start=track.start,
        new_per_s=new_per_s,
        full_at_s=track.full_at,
        mem_available_bytes=reading.mem_available,
        error=reading.error,
        settings=settings,
    )


def conntrack_rise(peak: int, start: int | None) -> int | None:
    """Conntrack entries the run added: peak minus the count before it started."""
    return peak - start if start is not None else None


__all__ = [
    "RxTotals",
    "DutTrack",
    "IfDelta",
    "tx_unsent",
    "RxSum",
    "achieved_pct",
    "achieved_pps",
    "busy_pct",
    "conntrack_rise",
    "dut_stats",
    "if_delta",
    "l2_bps",
    "latency",
    "loss_pct",
    "mean_pps",
    "lost_frames",
    "per_s",
    "percentile_from_hist",
    "port_stats",
    "stream_stats",
    "worker_stats",
]
