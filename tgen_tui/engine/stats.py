"""Turn worker counter blocks and probe readings into StatsSnapshots.

The accumulator copies each worker's int64 counter block (a few KiB, one numpy copy),
subtracts the baselines taken at ``clear``, and computes rates from the deltas between
two samples over the measured monotonic interval. Latency percentiles come from the
workers' log-linear histograms (16 sub-buckets per power of two: ≤ 6 % bucket width).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tgen_tui.engine.snapshot import (
    DutStats,
    Latency,
    PortStats,
    StatsSnapshot,
    StreamStats,
    WorkerStats,
)
from tgen_tui.packets.program import FCS_LEN
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import hist_percentile_ns

if TYPE_CHECKING:
    from tgen_tui.engine.controller import Engine
    from tgen_tui.engine.probes import DutReading
    from tgen_tui.engine.workers import WorkerState

# counters that are monotonic (subtract baselines); everything else is a gauge
_PORT_MONO = [
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
_TX_MONO = [C.T_TX_FRAMES, C.T_TX_BYTES, C.T_DUE]
_RX_MONO = [
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
]


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


@dataclass
class _Worker:
    state: WorkerState
    view: C.CounterView
    base: np.ndarray
    port_rows: dict[str, int]  # port name -> row in view.ports
    tx_rows: dict[int, int]  # engine program position -> row in view.tx


@dataclass
class _Prev:
    t: float
    port: dict[str, tuple[int, int, int, int]] = field(
        default_factory=dict
    )  # tx_f, tx_b, rx_f, rx_b
    ifc: dict[str, tuple[int, int]] = field(default_factory=dict)
    stream: dict[int, tuple[int, int]] = field(default_factory=dict)
    ct: int | None = None


class Accumulator:
    """Reads counters for the engine and builds snapshots (engine task only)."""

    def __init__(self, engine: Engine) -> None:
        self.e = engine
        self.w: dict[int, _Worker] = {}
        self.if_base: dict[str, tuple[int, int, int, int, int]] = {}
        self.prev: _Prev | None = None
        self.seq = 0
        self.ct_peak = 0
        self.ct_start: int | None = None
        self.full_at: float | None = None
        self.cpu_acc: dict[int, list[float]] = {}  # worker -> [n, core sum, proc sum]

    def attach(self, wid: int, st: WorkerState) -> None:
        view = C.CounterView.open(st.shm_path)
        port_rows = {pn: i for i, pn in enumerate(st.plan.ports)}
        tx_rows: dict[int, int] = {}
        row = 0
        for pn in st.plan.ports:
            for i, p in enumerate(self.e.programs):
                if p.port == pn:
                    tx_rows[i] = row
                    row += 1
        self.w[wid] = _Worker(st, view, np.zeros_like(view.arr), port_rows, tx_rows)

    def prime(self, ifc: dict) -> None:
        """Baseline the interface counters now, before any port starts."""
        self.prev = None
        self._set_if_base(ifc)

    def _set_if_base(self, ifc: dict) -> None:
        for pr in self.e.ports.values():
            c = ifc.get(pr.netns, {}).get(pr.interface)
            if c is not None:
                self.if_base[pr.name] = (
                    c.tx_packets,
                    c.rx_packets,
                    c.tx_bytes,
                    c.rx_bytes,
                    c.rx_dropped,
                )

    def clear(self, ifc: dict) -> None:
        """Baselines for every monotonic counter (gauges are not baselined)."""
        for w in self.w.values():
            w.base = np.array(w.view.arr, copy=True)
        self._set_if_base(ifc)
        self.ct_peak = 0
        self.ct_start = None
        self.full_at = None
        self.cpu_acc.clear()
        self.prev = None

    def close(self) -> None:
        for w in self.w.values():
            w.view.close()

    # ------------------------------------------------------------------ views with baselines
    @staticmethod
    def _split(w: _Worker, arr: np.ndarray):
        v = w.view
        pb, tb, rb = (
            int(v.header[C.H_PORT_BASE]),
            int(v.header[C.H_TX_BASE]),
            int(v.header[C.H_RX_BASE]),
        )
        ports = arr[pb : pb + v.n_ports * C.PORT_STRIDE].reshape(v.n_ports, C.PORT_STRIDE)
        tx = arr[tb : tb + v.n_tx * C.TX_STRIDE].reshape(v.n_tx, C.TX_STRIDE)
        rx = arr[rb : rb + v.n_rx * v.n_streams * C.RX_STRIDE].reshape(
            v.n_rx, v.n_streams, C.RX_STRIDE
        )
        return ports, tx, rx

    # ------------------------------------------------------------------ sample
    def sample(
        self, ifc: dict, cores: list[float], dut: DutReading | None, final: bool = False
    ) -> StatsSnapshot:
        e = self.e
        now = time.monotonic()
        t = 0.0 if e.t0 is None else max(0.0, now - e.t0)
        dt = (now - self.prev.t) if self.prev else 0.0
        prev = self.prev
        cur = _Prev(now)
        n_streams = e.n_streams

        # copy every block once, subtract baselines for monotonic slots
        port_vals: dict[str, np.ndarray] = {}
        tx_vals: dict[int, np.ndarray] = {}
        rx_sum = np.zeros((n_streams, C.RX_STRIDE), dtype=np.int64)
        rx_maxseq = np.full(n_streams, -1, dtype=np.int64)
        rx_min = np.full(n_streams, C.INT64_MAX, dtype=np.int64)
        rx_max = np.full(n_streams, -1, dtype=np.int64)
        rx_vlan = np.full(n_streams, -1, dtype=np.int64)
        for w in self.w.values():
            raw = np.array(w.view.arr, copy=True)
            p_raw, t_raw, r_raw = self._split(w, raw)
            p_b, t_b, r_b = self._split(w, w.base)
            p = p_raw.copy()
            p[:, _PORT_MONO] -= p_b[:, _PORT_MONO]
            tx = t_raw.copy()
            tx[:, _TX_MONO] -= t_b[:, _TX_MONO]
            for pn, r in w.port_rows.items():
                port_vals[pn] = p[r]
            for i, r in w.tx_rows.items():
                tx_vals[i] = tx[r]
            if r_raw.shape[0]:
                rx = r_raw.copy()
                rx[:, :, _RX_MONO] -= r_b[:, :, _RX_MONO]
                rx[:, :, C.R_HIST :] -= r_b[:, :, C.R_HIST :]
                rx_sum[:, _RX_MONO] += rx[:, :, _RX_MONO].sum(axis=0)
                rx_sum[:, C.R_HIST :] += rx[:, :, C.R_HIST :].sum(axis=0)
                rx_maxseq = np.maximum(rx_maxseq, rx[:, :, C.R_MAX_SEQ].max(axis=0))
                rx_min = np.minimum(rx_min, rx[:, :, C.R_LAT_MIN].min(axis=0))
                rx_max = np.maximum(rx_max, rx[:, :, C.R_LAT_MAX].max(axis=0))
                has = rx[:, :, C.R_VLAN_LAST] >= 0
                if has.any():
                    rx_vlan = np.maximum(
                        rx_vlan, np.where(has, rx[:, :, C.R_VLAN_LAST], -1).max(axis=0)
                    )

        # ---- ports
        ports_out = []
        for pr in e.ports.values():
            pv = port_vals.get(pr.name)
            if pv is None:
                pv = np.zeros(C.PORT_STRIDE, dtype=np.int64)
            txf, txb, rxf, rxb = (
                int(pv[C.P_TX_FRAMES]),
                int(pv[C.P_TX_BYTES]),
                int(pv[C.P_RX_FRAMES]),
                int(pv[C.P_RX_BYTES]),
            )
            cur.port[pr.name] = (txf, txb, rxf, rxb)
            rates = (0.0, 0.0, 0.0, 0.0)
            if prev and dt > 0 and pr.name in prev.port:
                a = prev.port[pr.name]
                rates = ((txf - a[0]) / dt, (rxf - a[2]) / dt, (txb - a[1]) / dt, (rxb - a[3]) / dt)
            c = ifc.get(pr.netns, {}).get(pr.interface)
            b = self.if_base.get(pr.name, (0, 0, 0, 0, 0))
            if c is not None:
                iftx, ifrx = c.tx_packets - b[0], c.rx_packets - b[1]
                iftxb, ifrxb, ifdrop = c.tx_bytes - b[2], c.rx_bytes - b[3], c.rx_dropped - b[4]
            else:
                iftx = ifrx = iftxb = ifrxb = ifdrop = 0
            cur.ifc[pr.name] = (iftx, ifrx)
            if_rates = (0.0, 0.0)
            if prev and dt > 0 and pr.name in prev.ifc:
                a2 = prev.ifc[pr.name]
                if_rates = ((iftx - a2[0]) / dt, (ifrx - a2[1]) / dt)
            req = sum(e.requested_pps(i) for i in pr.streams)
            due = int(pv[C.P_TX_DUE])
            achieved = req * txf / due if due > 0 else 0.0
            ports_out.append(
                PortStats(
                    name=pr.name,
                    interface=pr.interface,
                    netns=pr.netns,
                    state=pr.state,
                    link=pr.link,
                    failure=pr.failure,
                    worker=pr.worker,
                    core=pr.core,
                    tx_frames=txf,
                    rx_frames=rxf,
                    tx_bytes=txb,
                    rx_bytes=rxb,
                    rx_other=int(pv[C.P_RX_OTHER]),
                    tx_errors=int(pv[C.P_TX_ERRORS]),
                    rx_drops=int(pv[C.P_RING_DROPS]),
                    late_events=int(pv[C.P_LATE_EVENTS]),
                    tx_pps=rates[0],
                    rx_pps=rates[1],
                    tx_bps=(rates[2] + FCS_LEN * rates[0]) * 8,
                    rx_bps=(rates[3] + FCS_LEN * rates[1]) * 8,
                    requested_pps=req,
                    achieved_pps=achieved,
                    if_tx_frames=iftx,
                    if_rx_frames=ifrx,
                    if_tx_bytes=iftxb,
                    if_rx_bytes=ifrxb,
                    if_rx_dropped=ifdrop,
                    if_tx_pps=if_rates[0],
                    if_rx_pps=if_rates[1],
                )
            )

        # ---- streams
        streams_out = []
        for i, prog in enumerate(e.programs):
            tv = tx_vals.get(i)
            txf = int(tv[C.T_TX_FRAMES]) if tv is not None else 0
            txb = int(tv[C.T_TX_BYTES]) if tv is not None else 0
            s = prog.index
            row = rx_sum[s]
            rxf, rxb, dup = int(row[C.R_FRAMES]), int(row[C.R_BYTES]), int(row[C.R_DUP])
            uniq = rxf - dup
            port_state = e.ports[prog.port].state
            if final or port_state in ("stopped", "failed"):
                lost = max(0, txf - uniq)
            else:  # live: gaps below the highest sequence seen (frames in flight are not lost)
                lost = max(0, int(rx_maxseq[s]) + 1 - uniq) if rx_maxseq[s] >= 0 else 0
            cur.stream[i] = (txf, rxf)
            sr = (0.0, 0.0)
            if prev and dt > 0 and i in prev.stream:
                a3 = prev.stream[i]
                sr = ((txf - a3[0]) / dt, (rxf - a3[1]) / dt)
            lc = int(row[C.R_LAT_COUNT])
            hist = row[C.R_HIST :]
            lmin = float(rx_min[s]) if lc and rx_min[s] != C.INT64_MAX else None
            lmax = float(rx_max[s]) if lc and rx_max[s] >= 0 else None
            lat = Latency(
                min=lmin,
                avg=(float(row[C.R_LAT_SUM]) / lc) if lc else None,
                p50=percentile_from_hist(hist, 0.50, lmin, lmax),
                p99=percentile_from_hist(hist, 0.99, lmin, lmax),
                p999=percentile_from_hist(hist, 0.999, lmin, lmax),
                max=lmax,
                jitter=(float(row[C.R_JIT_SUM]) / int(row[C.R_JIT_COUNT]))
                if row[C.R_JIT_COUNT]
                else None,
            )
            streams_out.append(
                StreamStats(
                    name=prog.name,
                    index=s,
                    port=prog.port,
                    rx_port=prog.rx_port,
                    requested_pps=e.requested_pps(i),
                    tx_frames=txf,
                    tx_bytes=txb,
                    rx_frames=rxf,
                    rx_bytes=rxb,
                    tx_pps=sr[0],
                    rx_pps=sr[1],
                    lost=lost,
                    loss_pct=(100.0 * lost / txf) if txf else 0.0,
                    out_of_order=int(row[C.R_OOO]),
                    duplicates=dup,
                    latency_ns=lat,
                    vlan_tci=int(rx_vlan[s]) & 0xFFFF if rx_vlan[s] >= 0 else None,
                )
            )

        # ---- workers
        workers_out = []
        for wid, w in self.w.items():
            st = w.state
            tx_pps = sum(p.tx_pps for p in ports_out if p.name in st.plan.ports)
            rx_pps = sum(p.rx_pps for p in ports_out if p.name in st.plan.ports)
            core_pct = cores[st.plan.core] if st.plan.core < len(cores) else 0.0
            proc_pct = e._cpu.process(st.pid) if (st.pid and st.alive) else 0.0
            acc = self.cpu_acc.setdefault(wid, [0, 0.0, 0.0])
            if any(e.ports[pn].state == "running" for pn in st.plan.ports) and prev is not None:
                acc[0] += 1
                acc[1] += core_pct
                acc[2] += proc_pct
            workers_out.append(
                WorkerStats(
                    id=wid,
                    core=st.plan.core,
                    pid=st.pid,
                    ports=st.plan.ports,
                    streams=st.plan.streams,
                    alive=st.alive,
                    tx_pps=tx_pps,
                    rx_pps=rx_pps,
                    core_cpu_pct=core_pct,
                    proc_cpu_pct=proc_pct,
                    core_cpu_mean=acc[1] / acc[0] if acc[0] else 0.0,
                    proc_cpu_mean=acc[2] / acc[0] if acc[0] else 0.0,
                    exit_reason=st.exit_reason if not st.quitting else None,
                )
            )

        # ---- DUT
        dut_out = None
        if dut is not None:
            new_ps = 0.0
            if dut.count is not None:
                if self.ct_start is None:
                    self.ct_start = dut.count
                self.ct_peak = max(self.ct_peak, dut.count)
                if prev and prev.ct is not None and dt > 0:
                    new_ps = max(0.0, (dut.count - prev.ct) / dt)
                if dut.max and dut.count >= dut.max and self.full_at is None and e.t0 is not None:
                    self.full_at = t
                cur.ct = dut.count
            dut_out = DutStats(
                source=e.dut_source(),
                conntrack_count=dut.count,
                conntrack_max=dut.max,
                conntrack_peak=self.ct_peak,
                conntrack_start=self.ct_start,
                new_per_s=new_ps,
                full_at_s=self.full_at,
                mem_available_bytes=dut.mem_available,
                error=dut.error,
            )

        self.prev = cur
        self.seq += 1
        return StatsSnapshot(
            t=t,
            seq=self.seq,
            ports=tuple(ports_out),
            streams=tuple(streams_out),
            workers=tuple(workers_out),
            dut=dut_out,
            warnings=tuple(e.warnings),
            final=final,
        )
