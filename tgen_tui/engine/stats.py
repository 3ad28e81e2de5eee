"""The sampler: turn worker counter blocks and probe readings into StatsSnapshots.

The sampler knows nothing of the engine: it takes a frozen :class:`SampleContext`
(ports, streams, workers as configured), the engine's :class:`LiveState` at this instant
(port states, rates, pauses, sequence floors, worker liveness) and the probe readings
(:class:`Readings`), so it can be tested on its own with a temporary counter file.

The accumulator copies each worker's int64 counter block (a few KiB, one numpy copy),
subtracts the baselines taken at ``clear``, and computes rates from the deltas between
two samples over the measured monotonic interval. Latency percentiles come from the
workers' log-linear histograms (16 sub-buckets per power of two: ≤ 6 % bucket width).
The counter layout is sliced in one place (``CounterView.tables``), and every figure is
defined once, in :mod:`tgen_tui.engine.figures`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgen_tui.engine import figures as F
from tgen_tui.engine import flowstats as FS
from tgen_tui.engine import lanes as L
from tgen_tui.engine import ownrows as OR
from tgen_tui.engine.flowsample import FlowSampler
from tgen_tui.engine.flowworkers import flow_worker_stats
from tgen_tui.engine.sampleinputs import (
    LiveState,
    PortSetup,
    Readings,
    SampleContext,
    StreamCtx,
    WorkerCtx,
    WorkerLive,
    ifc_key,
    with_asked_rates,
)
from tgen_tui.engine.snapshot import PortStats, StatsSnapshot, StreamStats, WorkerStats
from tgen_tui.worker import counters as C


@dataclass(frozen=True)
class Taken:
    """Blocks copied by :meth:`Accumulator.take`: the baselines' generation, when."""

    gen: int
    t: float
    copies: dict[int, np.ndarray]


@dataclass
class _Worker:
    ctx: WorkerCtx
    view: C.CounterView
    base: np.ndarray
    port_rows: dict[str, int]  # port name -> row in view.ports
    tx_rows: dict[int, int]  # stream position -> row in view.tx


#: rates come from counter deltas over at least this long: a sample taken right after a
#: command (start, stop, rate) is milliseconds after the last one, and workers write their
#: counters once per batch, so a delta over a few ms reads as a spike (60 k pps on a 20 k
#: pps port); such a sample takes its rates against the sample before
MIN_RATE_DT = 0.08
RECENT = 8  # samples kept to find that base


@dataclass
class _Prev:
    """What the next sample's rates are computed against."""

    t: float
    port: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # tx/rx f, b
    ifc: dict[str, tuple[int, int]] = field(default_factory=dict)
    stream: dict[int, tuple[int, int]] = field(default_factory=dict)
    busy: dict[int, int] = field(default_factory=dict)
    ct: int | None = None
    wframes: dict[int, tuple[int, int]] = field(default_factory=dict)  # worker: tx, rx frames
    flow: dict[int, tuple[int, ...]] = field(default_factory=dict)  # rx, tx bytes (app: ...)


@dataclass
class _Read:
    """One sample's counters, baselines subtracted."""

    ports: dict[str, np.ndarray]
    tx: dict[int, np.ndarray]
    rx: F.RxTotals
    heartbeat: dict[int, int]
    busy: dict[int, int]
    wframes: dict[int, tuple[int, int]] = field(default_factory=dict)  # its own port rows
    flow: FS.FlowRead | None = None  # flow rows and receive gaps (not baselined)
    away: np.ndarray | None = None  # per rx row: frames that arrived on another port


def _if_tuple(c: Any) -> tuple[int, ...]:
    return (c.tx_packets, c.rx_packets, c.tx_bytes, c.rx_bytes, c.rx_dropped, c.tx_dropped)


class Accumulator:
    """Reads counter blocks and builds snapshots. Knows only its context and its inputs."""

    def __init__(self, ctx: SampleContext, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.clock = clock  # monotonic seconds: the fake engine passes its simulated clock
        self.w: dict[int, _Worker] = {}
        self.if_base: dict[str, tuple[int, ...]] = {}
        self.recent: list[_Prev] = []  # the last samples, oldest first (see MIN_RATE_DT)
        self.seq = 0
        self.dut = F.DutTrack()
        self.cpu_acc: dict[int, list[float]] = {}  # worker -> [n, core sum, proc sum]
        self.flows = FlowSampler(ctx.flows)  # socket flows (flow workers' blocks)
        self._hosts = {p.name: p.host for p in ctx.ports}
        self._own = OR.own_rows(ctx)  # port -> the rx rows of the streams received there
        self._gen = 0  # baselines or workers changed: blocks copied before are stale
        # before the last sample: recent, cpu_acc
        self._undo: tuple[list[_Prev], dict[int, list[float]]] | None = None

    @property
    def ct_start(self) -> int | None:
        return self.dut.start

    @ct_start.setter
    def ct_start(self, count: int | None) -> None:
        """The DUT's conntrack count before any port starts (the 'rise' is measured from it)."""
        self.dut.start = count

    def attach(self, wctx: WorkerCtx, view: C.CounterView | None = None) -> None:
        """Read a worker's counter block (``view``: mapped or copied by the transport; None:
        map ``wctx.shm_path`` read-only). A copied view is refreshed before each sample."""
        self._gen += 1
        old = self.w.pop(wctx.id, None)
        if old is not None:
            old.view.close()
        if view is None:
            view = C.CounterView.open(wctx.shm_path)
        port_rows = {pn: i for i, pn in enumerate(wctx.ports)}
        self.w[wctx.id] = _Worker(
            wctx, view, np.zeros_like(view.arr), port_rows, dict(wctx.tx_rows)
        )

    def attach_flows(self, worker: int, view: Any) -> None:
        """A flow worker's counter block (:class:`~tgen_tui.worker.flowcounters.FlowCounterView`)."""
        self.flows.attach(worker, view)

    def _ifc(self, ifc: dict, pc: PortSetup) -> Any:
        return ifc.get(ifc_key(pc.host, pc.netns), {}).get(pc.interface)

    def prime(self, ifc: dict) -> None:
        """Baseline the interface counters now, before any port starts."""
        self.recent, self._undo = [], None
        for pc in self.ctx.ports:
            c = self._ifc(ifc, pc)
            if c is not None:
                self.if_base[pc.name] = _if_tuple(c)

    def clear(
        self, ifc: dict, ports: set[str] | None = None, streams: set[int] | None = None
    ) -> None:
        """Baselines for the monotonic counters of ``ports`` (their port rows and interface
        counters) and of ``streams`` (stream positions: tx rows and rx rows); None = all.
        Gauges are not baselined."""
        self._gen += 1
        everything = ports is None and streams is None
        ports = {p.name for p in self.ctx.ports} if ports is None else set(ports)
        streams = set(range(len(self.ctx.streams))) if streams is None else set(streams)
        gidx = [
            r
            for i in streams
            for r in L.rx_rows(self.ctx.streams[i].index, self.ctx.block, self.ctx.lanes)
        ]
        for w in self.w.values():
            raw = np.array(w.view.arr, copy=True)
            if everything:
                w.base = raw
                continue
            p_raw, t_raw, r_raw = w.view.tables(raw)
            p_b, t_b, r_b = w.view.tables(w.base)
            for pn, r in w.port_rows.items():
                if pn in ports:
                    p_b[r] = p_raw[r]
            for i, r in w.tx_rows.items():
                if i in streams:
                    t_b[r] = t_raw[r]
            if r_raw.shape[0] and gidx:
                r_b[:, gidx] = r_raw[:, gidx]
        for pc in self.ctx.ports:
            c = self._ifc(ifc, pc)
            if pc.name in ports and c is not None:
                self.if_base[pc.name] = _if_tuple(c)
        self.flows.clear(None if everything else ports)
        if everything:
            self.dut = F.DutTrack()
            self.cpu_acc.clear()
        self.recent, self._undo = [], None

    def tx_raw_base(self, pos: int) -> int:
        """The raw tx frame counter of stream position ``pos`` at its last baseline
        (summed over the stream's lanes)."""
        n = 0
        for w in self.w.values():
            r = w.tx_rows.get(pos)
            if r is not None:
                _, t_b, _ = w.view.tables(w.base)
                n += int(t_b[r, C.T_TX_FRAMES])
        return n

    def close(self) -> None:
        for w in self.w.values():
            w.view.close()
        self.w.clear()
        self.flows.close()

    # ------------------------------------------------------------------ sample
    def take(self) -> Taken:
        """Copies of this machine's workers' blocks now, for :meth:`sample` (``pre``):
        taken before the interface counters are read, a worker never counts a frame
        that its interface has not counted yet (the sample's time is the copies').
        Copied views (another host's, refreshed by the transport with its interface
        counters) are read in the sample."""
        copies = {
            wid: np.array(w.view.arr, copy=True)
            for wid, w in self.w.items()
            if type(w.view) is C.CounterView
        }
        return Taken(self._gen, self.clock(), copies)

    def _read(self, pre: Taken | None = None) -> _Read:
        """Copy every block once and subtract the baselines of the monotonic slots; a
        stream counts only on its rx_port (engine/ownrows.py)."""
        out = _Read({}, {}, F.RxTotals(self.ctx.n_streams), {}, {})
        out.flow = FS.FlowRead(self.ctx.n_streams)
        out.away = np.zeros(self.ctx.n_streams, dtype=np.int64)
        copies = pre.copies if pre is not None and pre.gen == self._gen else {}
        for wid, w in self.w.items():
            raw = copies[wid] if wid in copies else np.array(w.view.arr, copy=True)
            out.heartbeat[wid] = int(raw[C.H_HEARTBEAT_NS])
            p_raw, t_raw, r_raw = w.view.tables(raw)
            p_b, t_b, r_b = w.view.tables(w.base)
            tables = {
                int(p_raw[r, C.P_RX_TABLE]): pn
                for pn, r in w.port_rows.items()
                if int(p_raw[r, C.P_RX_TABLE]) >= 0
            }
            gauges = r_raw
            if r_raw.shape[0] and self._own:  # the gap gauges of the own rows only
                gauges = r_raw.copy()
                OR.keep_own_rows(gauges, tables, self._own)
            out.flow.add(w.view.flow_table(raw), w.ctx.ports, gauges)
            out.busy[wid] = int(p_raw[:, C.P_BUSY_NS].sum())
            p = p_raw.copy()
            p[:, F.PORT_MONO] -= p_b[:, F.PORT_MONO]
            out.wframes[wid] = (int(p[:, C.P_TX_FRAMES].sum()), int(p[:, C.P_RX_FRAMES].sum()))
            tx = t_raw.copy()
            tx[:, F.TX_MONO] -= t_b[:, F.TX_MONO]
            for pn, r in w.port_rows.items():  # a port's lanes: one row each, merged
                out.ports[pn] = L.merge_port_row(out.ports.get(pn), p[r], F.PORT_MONO)
            for i, r in w.tx_rows.items():
                out.tx[i] = L.merge_tx_row(out.tx.get(i), tx[r])
            if r_raw.shape[0]:
                rx = r_raw.copy()
                rx[:, :, F.RX_MONO] -= r_b[:, :, F.RX_MONO]
                rx[:, :, F.HIST_MONO :] -= r_b[:, :, F.HIST_MONO :]
                if self._own:
                    out.away += OR.keep_own_rows(rx, tables, self._own)
                out.rx.add(rx)
        return out

    def rate_base(self, now: float) -> _Prev | None:
        """The newest sample at least MIN_RATE_DT before ``now`` (else the oldest kept)."""
        for p in reversed(self.recent):
            if now - p.t >= MIN_RATE_DT:
                return p
        return self.recent[0] if self.recent else None

    def sample(
        self,
        rd: Readings,
        live: LiveState,
        final: bool = False,
        pre: Taken | None = None,
    ) -> StatsSnapshot:
        """A snapshot of the blocks (``pre``: copies from :meth:`take`, else read now)."""
        if pre is not None and pre.gen != self._gen:
            pre = None  # a clear or a new worker since: read now
        now = self.clock() if pre is None else pre.t
        now_ns = round(now * 1e9)
        if self.recent and now == self.recent[-1].t and self._undo is not None:
            # asked again at the same instant (the fake's simulated clock, after a command):
            # this sample replaces the last one instead of adding an empty interval
            self.recent, self.cpu_acc = self._undo
        self._undo = (list(self.recent), {k: list(v) for k, v in self.cpu_acc.items()})
        t = 0.0 if live.t0 is None else max(0.0, now - live.t0)
        prev = self.rate_base(now)
        dt = (now - prev.t) if prev else 0.0
        r = self._read(pre)
        live = with_asked_rates(live, self.ctx.streams, r.tx, C.T_REQ_MPPS)
        cur = _Prev(now, busy=r.busy, wframes=r.wframes)
        ports = tuple(self._port(pc, r, rd, live, prev, dt, cur) for pc in self.ctx.ports)
        streams = tuple(
            self._stream(i, sc, r, live, prev, dt, cur, final)
            for i, sc in enumerate(self.ctx.streams)
        )
        workers = tuple(
            self._worker(wid, w.ctx, ports, r, rd, live, prev, dt, now_ns)
            for wid, w in self.w.items()
        )
        dut = None
        if rd.dut is not None:
            dut = self._dut(rd, prev, dt, t if live.t0 is not None else None, cur)
        alive = {wid: wl.alive for wid, wl in live.workers.items()}
        flows, fair, fair_run, cur.flow = self.flows.sample(
            self.flows.read(), prev.flow if prev else None, dt, alive
        )
        workers += tuple(flow_worker_stats(self.ctx, rd, live))
        self.recent = [*self.recent[-(RECENT - 1) :], cur]
        self.seq += 1
        return StatsSnapshot(
            t=t,
            seq=self.seq,
            ports=ports,
            streams=streams,
            workers=workers,
            dut=dut,
            warnings=self.ctx.warnings,
            final=final,
            flows=flows,
            fairness_jain=fair,
            fairness_jain_run=fair_run,
        )

    def _port(
        self,
        pc: PortSetup,
        r: _Read,
        rd: Readings,
        live: LiveState,
        prev: _Prev | None,
        dt: float,
        cur: _Prev,
    ) -> PortStats:
        pv = r.ports.get(pc.name)
        if pv is None:
            pv = np.zeros(C.PORT_STRIDE, dtype=np.int64)
        now = tuple(int(pv[k]) for k in (C.P_TX_FRAMES, C.P_TX_BYTES, C.P_RX_FRAMES, C.P_RX_BYTES))
        cur.port[pc.name] = now  # type: ignore[assignment]
        rates = (0.0, 0.0, 0.0, 0.0)
        if prev and dt > 0 and pc.name in prev.port:
            a = prev.port[pc.name]
            rates = tuple(F.per_s(now[k], a[k], dt) for k in (0, 2, 1, 3))  # type: ignore[assignment]
        ifd = F.if_delta(self._ifc(rd.ifc, pc), self.if_base.get(pc.name))
        cur.ifc[pc.name] = (ifd.tx, ifd.rx)
        if_rates = (0.0, 0.0)
        if prev and dt > 0 and pc.name in prev.ifc:
            a2 = prev.ifc[pc.name]
            if_rates = (F.per_s(ifd.tx, a2[0], dt), F.per_s(ifd.rx, a2[1], dt))
        return F.port_stats(pc, pv, ifd, rates, if_rates, live)

    def _stream(
        self,
        i: int,
        sc: StreamCtx,
        r: _Read,
        live: LiveState,
        prev: _Prev | None,
        dt: float,
        cur: _Prev,
        final: bool,
    ) -> StreamStats:
        rx = L.merge_rx(r.rx, sc.index, self.ctx.block, self.ctx.lanes)
        tv = r.tx.get(i)
        txf = int(tv[C.T_TX_FRAMES]) if tv is not None else 0
        rxf = int(rx.row[C.R_FRAMES])
        cur.stream[i] = (txf, rxf)
        rates = (0.0, 0.0)
        if prev and dt > 0 and i in prev.stream:
            a = prev.stream[i]
            rates = (F.per_s(txf, a[0], dt), F.per_s(rxf, a[1], dt))
        st = F.stream_stats(i, sc, tv, rx, rates, live, final)
        if r.away is not None:
            away = sum(int(r.away[k]) for k in L.rx_rows(sc.index, self.ctx.block, self.ctx.lanes))
            if away:
                st = dataclasses.replace(st, rx_elsewhere=away)
        if r.flow is None:
            return st
        settled = final or live.port_state.get(sc.port, "idle") in F.STOPPED_STATES
        if self._hosts.get(sc.port) is not None or self._hosts.get(sc.rx_port or "") is not None:
            tv = None  # a port on another host: its clock is not the engine's
        return r.flow.apply(st, sc, self.ctx.block, self.ctx.lanes, live.t0, tv, settled)

    def _worker(
        self,
        wid: int,
        wc: WorkerCtx,
        ports: tuple[PortStats, ...],
        r: _Read,
        rd: Readings,
        live: LiveState,
        prev: _Prev | None,
        dt: float,
        now_ns: int,
    ) -> WorkerStats:
        wl = live.workers.get(wid, WorkerLive(None, False))
        core_pct = rd.cores[wc.core] if wc.core < len(rd.cores) else 0.0
        proc_pct = wl.proc_cpu_pct if wl.alive else 0.0
        acc = self.cpu_acc.setdefault(wid, [0, 0.0, 0.0])
        if any(live.port_state.get(pn) == "running" for pn in wc.ports) and prev is not None:
            acc[0] += 1
            acc[1] += core_pct
            acc[2] += proc_pct
        means = (acc[1] / acc[0], acc[2] / acc[0]) if acc[0] else (0.0, 0.0)
        busy = 0.0
        if prev and dt > 0 and wid in prev.busy:
            busy = F.busy_pct(r.busy[wid], prev.busy[wid], dt)
        hb = r.heartbeat.get(wid, 0)
        age = max(0.0, (now_ns - hb) / 1e9) if hb else None
        own = None  # a lane: its own share of the port's rates, not the port's
        if wc.lanes > 1:
            own = (0.0, 0.0)
            if prev and dt > 0 and wid in prev.wframes and wid in r.wframes:
                a, b = prev.wframes[wid], r.wframes[wid]
                own = (F.per_s(b[0], a[0], dt), F.per_s(b[1], a[1], dt))
        return F.worker_stats(wc, wl, ports, core_pct, means, busy, age, own)

    def _dut(self, rd: Readings, prev: _Prev | None, dt: float, t: float | None, cur: _Prev) -> Any:
        reading = rd.dut
        new_ps = 0.0
        if reading.count is not None:
            if prev and prev.ct is not None and dt > 0:
                new_ps = max(0.0, F.per_s(reading.count, prev.ct, dt))
            cur.ct = reading.count
        return F.dut_stats(self.dut, reading, self.ctx.dut_source, rd.dut_settings, new_ps, t)
