"""Turn worker counter blocks and probe readings into StatsSnapshots.

The sampler knows nothing of the engine: it takes a frozen :class:`SampleContext`
(ports, streams, workers as configured), the engine's :class:`LiveState` at this instant
(port states, rates, pauses, sequence floors, worker liveness) and the probe readings
(:class:`Readings`), so it can be tested on its own with a temporary counter file.

The accumulator copies each worker's int64 counter block (a few KiB, one numpy copy),
subtracts the baselines taken at ``clear``, and computes rates from the deltas between
two samples over the measured monotonic interval. Latency percentiles come from the
workers' log-linear histograms (16 sub-buckets per power of two: ≤ 6 % bucket width).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

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
    C.R_LAT_UNSTAMPED,
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


# ---------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class PortCtx:
    """A port as configured: where it is and which worker serves it."""

    name: str
    interface: str
    netns: str | None
    worker: int
    core: int
    speed_bps: float = 0.0
    streams: tuple[int, ...] = ()  # positions in SampleContext.streams sent from this port
    host: str | None = None  # tester host under --cluster (None: the engine's machine)


def ifc_key(host: str | None, netns: str | None):
    """Where a port's interface counters are in ``Readings.ifc``: by netns on this
    machine, by (host, netns) for a port on another tester host."""
    return netns if host is None else (host, netns)


@dataclass(frozen=True)
class StreamCtx:
    """A stream as configured (position = its place in SampleContext.streams)."""

    name: str
    index: int  # global stream index (the signature's)
    port: str
    rx_port: str | None


@dataclass(frozen=True)
class WorkerCtx:
    """A worker as configured: its core, its ports and streams, its counter file."""

    id: int
    core: int
    ports: tuple[str, ...]
    streams: tuple[str, ...]
    shm_path: str
    tx_rows: tuple[tuple[int, int], ...]  # (stream position, row in the worker's tx table)


@dataclass(frozen=True)
class SampleContext:
    """Everything fixed between reloads."""

    ports: tuple[PortCtx, ...]
    streams: tuple[StreamCtx, ...]
    n_streams: int
    warnings: tuple[str, ...] = ()
    dut_source: str = "none"


@dataclass(frozen=True)
class WorkerLive:
    pid: int | None
    alive: bool
    exit_reason: str | None = None
    tx_path: str | None = None
    tx_path_why: str | None = None
    proc_cpu_pct: float = 0.0


@dataclass(frozen=True)
class LiveState:
    """The engine's state at the sampling instant (frozen copies, no engine objects)."""

    t0: float | None  # monotonic s of the first start
    port_state: dict[str, str]
    port_failure: dict[str, str | None]
    port_link: dict[str, str]
    rates: dict[int, float]  # stream position -> requested fps
    paused: frozenset[int] = frozenset()  # stream positions
    seq_floor: dict[int, int] = field(default_factory=dict)  # position -> first seq since clear
    workers: dict[int, WorkerLive] = field(default_factory=dict)


@dataclass(frozen=True)
class Readings:
    """Probe readings of one sample: interface counters per netns, per-core CPU, the DUT."""

    ifc: dict
    cores: list[float]
    dut: object | None = None  # probes.DutReading
    dut_settings: tuple[tuple[str, str], ...] = ()


@dataclass
class _Worker:
    ctx: WorkerCtx
    view: C.CounterView
    base: np.ndarray
    port_rows: dict[str, int]  # port name -> row in view.ports
    tx_rows: dict[int, int]  # stream position -> row in view.tx


@dataclass
class _Prev:
    t: float
    port: dict[str, tuple[int, int, int, int]] = field(
        default_factory=dict
    )  # tx_f, tx_b, rx_f, rx_b
    ifc: dict[str, tuple[int, int]] = field(default_factory=dict)
    stream: dict[int, tuple[int, int]] = field(default_factory=dict)
    busy: dict[int, int] = field(default_factory=dict)
    ct: int | None = None


def _split(view: C.CounterView, arr: np.ndarray):
    """The port, tx and rx tables of a counter block copy."""
    pb, tb, rb = (
        int(view.header[C.H_PORT_BASE]),
        int(view.header[C.H_TX_BASE]),
        int(view.header[C.H_RX_BASE]),
    )
    ports = arr[pb : pb + view.n_ports * C.PORT_STRIDE].reshape(view.n_ports, C.PORT_STRIDE)
    tx = arr[tb : tb + view.n_tx * C.TX_STRIDE].reshape(view.n_tx, C.TX_STRIDE)
    rx = arr[rb : rb + view.n_rx * view.n_streams * C.RX_STRIDE].reshape(
        view.n_rx, view.n_streams, C.RX_STRIDE
    )
    return ports, tx, rx


def _if_tuple(c) -> tuple[int, int, int, int, int]:
    return (c.tx_packets, c.rx_packets, c.tx_bytes, c.rx_bytes, c.rx_dropped)


class Accumulator:
    """Reads counter blocks and builds snapshots. Knows only its context and its inputs."""

    def __init__(self, ctx: SampleContext) -> None:
        self.ctx = ctx
        self.w: dict[int, _Worker] = {}
        self.if_base: dict[str, tuple[int, int, int, int, int]] = {}
        self.prev: _Prev | None = None
        self.seq = 0
        self.ct_peak = 0
        self.ct_start: int | None = None
        self.full_at: float | None = None
        self.cpu_acc: dict[int, list[float]] = {}  # worker -> [n, core sum, proc sum]

    def attach(self, wctx: WorkerCtx, view: C.CounterView | None = None) -> None:
        """Map a worker's counter block (read-only). The file may be unlinked afterwards.
        ``view``: a block that is already open (a remote worker's copy, refreshed by the
        engine before each sample); it is read exactly like a mapped one."""
        old = self.w.pop(wctx.id, None)
        if old is not None:
            old.view.close()
        if view is None:
            view = C.CounterView.open(wctx.shm_path)
        port_rows = {pn: i for i, pn in enumerate(wctx.ports)}
        self.w[wctx.id] = _Worker(
            wctx, view, np.zeros_like(view.arr), port_rows, dict(wctx.tx_rows)
        )

    def prime(self, ifc: dict) -> None:
        """Baseline the interface counters now, before any port starts."""
        self.prev = None
        for pc in self.ctx.ports:
            c = ifc.get(ifc_key(pc.host, pc.netns), {}).get(pc.interface)
            if c is not None:
                self.if_base[pc.name] = _if_tuple(c)

    def clear(
        self, ifc: dict, ports: set[str] | None = None, streams: set[int] | None = None
    ) -> None:
        """Baselines for the monotonic counters of ``ports`` (their port rows and interface
        counters) and of ``streams`` (stream positions: tx rows and rx rows); None = all.
        Gauges are not baselined."""
        everything = ports is None and streams is None
        ports = {p.name for p in self.ctx.ports} if ports is None else set(ports)
        streams = set(range(len(self.ctx.streams))) if streams is None else set(streams)
        gidx = [self.ctx.streams[i].index for i in streams]
        for w in self.w.values():
            raw = np.array(w.view.arr, copy=True)
            if everything:
                w.base = raw
                continue
            p_raw, t_raw, r_raw = _split(w.view, raw)
            p_b, t_b, r_b = _split(w.view, w.base)
            for pn, r in w.port_rows.items():
                if pn in ports:
                    p_b[r] = p_raw[r]
            for i, r in w.tx_rows.items():
                if i in streams:
                    t_b[r] = t_raw[r]
            if r_raw.shape[0] and gidx:
                r_b[:, gidx] = r_raw[:, gidx]
        for pc in self.ctx.ports:
            if pc.name in ports:
                c = ifc.get(ifc_key(pc.host, pc.netns), {}).get(pc.interface)
                if c is not None:
                    self.if_base[pc.name] = _if_tuple(c)
        if everything:
            self.ct_peak = 0
            self.ct_start = None
            self.full_at = None
            self.cpu_acc.clear()
        self.prev = None

    def tx_raw_base(self, pos: int) -> int:
        """The raw tx frame counter of stream position ``pos`` at its last baseline."""
        for w in self.w.values():
            r = w.tx_rows.get(pos)
            if r is not None:
                _, t_b, _ = _split(w.view, w.base)
                return int(t_b[r, C.T_TX_FRAMES])
        return 0

    def close(self) -> None:
        for w in self.w.values():
            w.view.close()
        self.w.clear()

    # ------------------------------------------------------------------ sample
    def sample(self, rd: Readings, live: LiveState, final: bool = False) -> StatsSnapshot:
        ctx = self.ctx
        now = time.monotonic()
        now_ns = time.monotonic_ns()
        t = 0.0 if live.t0 is None else max(0.0, now - live.t0)
        dt = (now - self.prev.t) if self.prev else 0.0
        prev = self.prev
        cur = _Prev(now)
        n_streams = ctx.n_streams

        # copy every block once, subtract baselines for monotonic slots
        port_vals: dict[str, np.ndarray] = {}
        tx_vals: dict[int, np.ndarray] = {}
        heartbeat: dict[int, int] = {}
        busy: dict[int, int] = {}
        rx_sum = np.zeros((n_streams, C.RX_STRIDE), dtype=np.int64)
        rx_maxseq = np.full(n_streams, -1, dtype=np.int64)
        rx_min = np.full(n_streams, C.INT64_MAX, dtype=np.int64)
        rx_max = np.full(n_streams, -1, dtype=np.int64)
        rx_vlan = np.full(n_streams, -1, dtype=np.int64)
        rx_every = np.zeros(n_streams, dtype=np.int64)
        for wid, w in self.w.items():
            raw = np.array(w.view.arr, copy=True)
            heartbeat[wid] = int(raw[C.H_HEARTBEAT_NS])
            p_raw, t_raw, r_raw = _split(w.view, raw)
            p_b, t_b, r_b = _split(w.view, w.base)
            busy[wid] = int(p_raw[:, C.P_BUSY_NS].sum())
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
                rx_every = np.maximum(rx_every, rx[:, :, C.R_LAT_EVERY].max(axis=0))
                has = rx[:, :, C.R_VLAN_LAST] >= 0
                if has.any():
                    rx_vlan = np.maximum(
                        rx_vlan, np.where(has, rx[:, :, C.R_VLAN_LAST], -1).max(axis=0)
                    )
        cur.busy = busy

        # ---- ports
        ports_out = []
        for pc in ctx.ports:
            pv = port_vals.get(pc.name)
            if pv is None:
                pv = np.zeros(C.PORT_STRIDE, dtype=np.int64)
            txf, txb, rxf, rxb = (
                int(pv[C.P_TX_FRAMES]),
                int(pv[C.P_TX_BYTES]),
                int(pv[C.P_RX_FRAMES]),
                int(pv[C.P_RX_BYTES]),
            )
            cur.port[pc.name] = (txf, txb, rxf, rxb)
            rates = (0.0, 0.0, 0.0, 0.0)
            if prev and dt > 0 and pc.name in prev.port:
                a = prev.port[pc.name]
                rates = ((txf - a[0]) / dt, (rxf - a[2]) / dt, (txb - a[1]) / dt, (rxb - a[3]) / dt)
            c = rd.ifc.get(ifc_key(pc.host, pc.netns), {}).get(pc.interface)
            b = self.if_base.get(pc.name, (0, 0, 0, 0, 0))
            if c is not None:
                iftx, ifrx = c.tx_packets - b[0], c.rx_packets - b[1]
                iftxb, ifrxb, ifdrop = c.tx_bytes - b[2], c.rx_bytes - b[3], c.rx_dropped - b[4]
            else:
                iftx = ifrx = iftxb = ifrxb = ifdrop = 0
            cur.ifc[pc.name] = (iftx, ifrx)
            if_rates = (0.0, 0.0)
            if prev and dt > 0 and pc.name in prev.ifc:
                a2 = prev.ifc[pc.name]
                if_rates = ((iftx - a2[0]) / dt, (ifrx - a2[1]) / dt)
            req = sum(live.rates.get(i, 0.0) for i in pc.streams if i not in live.paused)
            due = int(pv[C.P_TX_DUE])
            achieved = req * txf / due if due > 0 else 0.0
            ports_out.append(
                PortStats(
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
                    speed_bps=pc.speed_bps,
                    backlog=max(0, due - txf),
                    late_max_ns=int(pv[C.P_LATE_MAX_NS]),
                    host=pc.host,
                )
            )

        # ---- streams
        streams_out = []
        for i, sc in enumerate(ctx.streams):
            tv = tx_vals.get(i)
            txf = int(tv[C.T_TX_FRAMES]) if tv is not None else 0
            txb = int(tv[C.T_TX_BYTES]) if tv is not None else 0
            sdue = int(tv[C.T_DUE]) if tv is not None else 0
            s = sc.index
            row = rx_sum[s]
            rxf, rxb, dup = int(row[C.R_FRAMES]), int(row[C.R_BYTES]), int(row[C.R_DUP])
            uniq = rxf - dup
            port_state = live.port_state.get(sc.port, "idle")
            if final or port_state in ("idle", "stopped", "failed"):
                lost = max(0, txf - uniq)
            else:  # live: gaps below the highest sequence seen (frames in flight are not lost)
                floor = live.seq_floor.get(i, 0)
                lost = (
                    max(0, min(txf, int(rx_maxseq[s]) + 1 - floor) - uniq)
                    if rx_maxseq[s] >= 0
                    else 0
                )
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
            req = live.rates.get(i, 0.0)
            paused = i in live.paused
            streams_out.append(
                StreamStats(
                    name=sc.name,
                    index=s,
                    port=sc.port,
                    rx_port=sc.rx_port,
                    requested_pps=req,
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
                    due_frames=sdue,
                    achieved_pps=req * txf / sdue if sdue > 0 else 0.0,
                    paused=paused,
                    latency_every=int(rx_every[s]),
                    latency_unstamped=int(row[C.R_LAT_UNSTAMPED]),
                )
            )

        # ---- workers
        workers_out = []
        for wid, w in self.w.items():
            wc = w.ctx
            wl = live.workers.get(wid, WorkerLive(None, False))
            tx_pps = sum(p.tx_pps for p in ports_out if p.name in wc.ports)
            rx_pps = sum(p.rx_pps for p in ports_out if p.name in wc.ports)
            core_pct = rd.cores[wc.core] if wc.core < len(rd.cores) else 0.0
            proc_pct = wl.proc_cpu_pct if wl.alive else 0.0
            acc = self.cpu_acc.setdefault(wid, [0, 0.0, 0.0])
            if any(live.port_state.get(pn) == "running" for pn in wc.ports) and prev is not None:
                acc[0] += 1
                acc[1] += core_pct
                acc[2] += proc_pct
            busy_pct = 0.0
            if prev and dt > 0 and wid in prev.busy:
                busy_pct = min(100.0, 100.0 * (busy[wid] - prev.busy[wid]) / (dt * 1e9))
            hb = heartbeat.get(wid, 0)
            workers_out.append(
                WorkerStats(
                    id=wid,
                    core=wc.core,
                    pid=wl.pid,
                    ports=wc.ports,
                    streams=wc.streams,
                    alive=wl.alive,
                    tx_pps=tx_pps,
                    rx_pps=rx_pps,
                    core_cpu_pct=core_pct,
                    proc_cpu_pct=proc_pct,
                    core_cpu_mean=acc[1] / acc[0] if acc[0] else 0.0,
                    proc_cpu_mean=acc[2] / acc[0] if acc[0] else 0.0,
                    exit_reason=wl.exit_reason,
                    heartbeat_age_s=max(0.0, (now_ns - hb) / 1e9) if hb else None,
                    busy_pct=busy_pct,
                    tx_path=wl.tx_path,
                    tx_path_why=wl.tx_path_why,
                )
            )

        # ---- DUT
        dut_out = None
        dut = rd.dut
        if dut is not None:
            new_ps = 0.0
            if dut.count is not None:
                if self.ct_start is None:
                    self.ct_start = dut.count
                self.ct_peak = max(self.ct_peak, dut.count)
                if prev and prev.ct is not None and dt > 0:
                    new_ps = max(0.0, (dut.count - prev.ct) / dt)
                if (
                    dut.max
                    and dut.count >= dut.max
                    and self.full_at is None
                    and live.t0 is not None
                ):
                    self.full_at = t
                cur.ct = dut.count
            dut_out = DutStats(
                source=ctx.dut_source,
                conntrack_count=dut.count,
                conntrack_max=dut.max,
                conntrack_peak=self.ct_peak,
                conntrack_start=self.ct_start,
                new_per_s=new_ps,
                full_at_s=self.full_at,
                mem_available_bytes=dut.mem_available,
                error=dut.error,
                settings=rd.dut_settings,
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
            warnings=ctx.warnings,
            final=final,
        )
