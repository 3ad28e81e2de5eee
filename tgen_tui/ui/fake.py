"""A simulated engine that satisfies :class:`~tgen_tui.engine.api.EngineAPI` without root.

Pilot and snapshot tests (and ``tgen tui --fake``, a demo) run the console on it. It is a
*counter source* behind the real engine code: the real :class:`~tgen_tui.engine.setup.Setup`
describes the profile and plans the workers; rates are resolved by the real rate code
(:mod:`tgen_tui.engine.rate_plan`: ``25kpps``, ``100Mbit L1``/``L2``, ``10%``, line-rate
checks); simulated workers pace their streams with the worker's own pacer
(:class:`~tgen_tui.worker.main.TxStream`) over an injected clock and write counter blocks
in the real layout (:mod:`tgen_tui.worker.counters`: tx and rx rows, a fixed latency
distribution in the latency histogram); simulated flow workers run the profile's socket
flows (:mod:`tgen_tui.ui.fake_flows`: TCP near a fixed goodput with an RTT and some
retransmits, UDP at its rate with the fake's ``loss``) in flow counter blocks; UDP rates
are resolved by the real flow rate code (:mod:`tgen_tui.engine.flowrates`); and the real
accumulator (:class:`~tgen_tui.engine.stats.Accumulator`) turns those blocks, simulated
interface counters (each with a MAC of its own: nothing of this machine is read), CPU
loads and a simulated DUT reading into StatsSnapshots.

With ``clock`` fixed, snapshots stay put (snapshot tests). Port states and events follow
the real engine's for the same commands (tests/engine/test_contract.py). Its coroutines
await nothing, so they run on asyncio (``AsyncioEngineHost``) as well as on trio.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgen_tui.dut.counters import CounterReading
from tgen_tui.dut.probe import DutProbe, DutReading
from tgen_tui.engine import stats
from tgen_tui.engine.api import (
    TRANSITIONS,
    CountersCleared,
    EngineDescription,
    EngineEvent,
    EngineNotice,
    FlowRateChanged,
    PortState,
    PortStateChanged,
    RateChanged,
    StreamPaused,
)
from tgen_tui.engine.capture import CaptureSpec, CaptureView, SentFrames
from tgen_tui.engine.flowrates import flow_target, initial_flow_rates, plan_flow_rate
from tgen_tui.engine.losscauses import LossCauses, simulated_reading
from tgen_tui.engine.options import EngineOptions, Neighbours
from tgen_tui.engine.portcontrol import clear_targets, seq_floors
from tgen_tui.engine.probes import IfCounters
from tgen_tui.engine.rate_plan import changed, plan_rate, plan_scale
from tgen_tui.engine.setup import Setup, distinct_flows
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.results.models import RunResult
from tgen_tui.ui.fake_capture import SimCaptures
from tgen_tui.ui.fake_flows import SimFlows
from tgen_tui.ui.fake_spacing import write_iat
from tgen_tui.ui.fake_stateful import write_flows, write_gap
from tgen_tui.worker import counters as C
from tgen_tui.worker.main import TxStream
from tgen_tui.worker.rxstats import lat_bucket

FAKE_PID = 4000  # simulated worker pids: 4000 + worker id
FRAME_COST_NS = 600  # simulated CPU time a worker spends per frame sent or received
IDLE_CORE_PCT = 1.0  # load of a core with nothing to do
MEM_AVAILABLE = 3_500_000_000  # the simulated DUT's free memory

# ---------------------------------------------------------------------- latency
# A fixed latency distribution (ns): LAT_N quantiles of a stretched exponential
# (min ≈ 8 µs, median ≈ 19 µs, mean ≈ 22 µs, p99 ≈ 64 µs), in a fixed arrival order
# that received frames cycle through (each frame 31 quantiles on from the one before:
# a jitter of ≈ 3.3 µs). Every latency counter is a function of the number of frames
# received, so the histogram, sums and jitter are exact and deterministic.
LAT_N = 1000


def _latency_pattern() -> np.ndarray:
    q = (np.arange(LAT_N) + 0.5) / LAT_N
    lat = 8_000.0 + 11_000.0 * (-np.log1p(-q) / np.log(2.0)) ** 0.86
    order = (np.arange(LAT_N) * 31) % LAT_N  # 31 is prime to LAT_N: a permutation
    return np.rint(lat[order]).astype(np.int64)


_LAT = _latency_pattern()
_LAT_CUM = np.concatenate(([0], np.cumsum(_LAT)))
_LAT_BUCKET = lat_bucket(_LAT)
_LAT_HIST = np.bincount(_LAT_BUCKET, minlength=C.HIST_BUCKETS).astype(np.int64)
_JIT = np.abs(_LAT - np.roll(_LAT, 1))  # _JIT[k] = |L[k] - L[k - 1]| (cyclic)
_JIT_CUM = np.concatenate(([0], np.cumsum(_JIT)))


def write_rx_row(row: np.ndarray, frames: int, nbytes: int, mark: int, max_seq: int) -> None:
    """An rx row (RX_STRIDE slots) after ``frames`` frames of one stream arrived, the
    first ``mark`` of them before the last clear (the gauges cover the frames since)."""
    q, r = divmod(frames, LAT_N)
    row[C.R_FRAMES] = frames
    row[C.R_BYTES] = nbytes
    row[C.R_LAT_COUNT] = frames
    row[C.R_LAT_SUM] = q * _LAT_CUM[-1] + _LAT_CUM[r]
    row[C.R_JIT_COUNT] = max(0, frames - 1)
    row[C.R_JIT_SUM] = q * _JIT_CUM[-1] + _JIT_CUM[r] - _JIT[0] if frames else 0
    row[C.R_HIST :] = q * _LAT_HIST + np.bincount(_LAT_BUCKET[:r], minlength=C.HIST_BUCKETS)
    n = frames - mark
    if n <= 0:
        row[C.R_MAX_SEQ], row[C.R_LAT_MIN], row[C.R_LAT_MAX] = -1, C.INT64_MAX, -1
        return
    window = _LAT if n >= LAT_N else _LAT[(mark + np.arange(n)) % LAT_N]
    row[C.R_MAX_SEQ] = max_seq
    row[C.R_LAT_MIN], row[C.R_LAT_MAX] = int(window.min()), int(window.max())


def simulated_mac(compiled: CompiledProfile, port: str) -> str:
    """A simulated interface's MAC: the source MAC of the port's first stream (as a lab's
    port has), else a locally administered one by the port's position."""
    for s in compiled.streams:
        if s.port == port and len(s.template) >= 12:
            return ":".join(f"{b:02x}" for b in s.template[6:12])
    return f"02:00:00:00:00:{list(compiled.ports).index(port) + 1:02x}"


# ---------------------------------------------------------------------- simulated workers
@dataclass
class _SimPort:
    """One port of a simulated worker: its counter row, rx table and paced streams."""

    name: str
    worker: int
    ctr: np.ndarray  # the port's row (PORT_STRIDE)
    rx: np.ndarray  # its rx table (n_streams x RX_STRIDE)
    streams: dict[int, TxStream] = field(default_factory=dict)  # program position -> pacer
    state: int = C.STATE_IDLE
    t0: float = 0.0  # clock at the last start
    flow: np.ndarray | None = None  # its flow row (FLOW_STRIDE): fake_stateful

    def rel(self, now: float) -> float:
        """Seconds since the port's start (0 when it does not run: as the worker does)."""
        return now - self.t0 if self.state == C.STATE_RUNNING else 0.0


def _counter_block(n_ports: int, n_tx: int, n_streams: int) -> C.CounterView:
    """A writable counter block in the real layout (its file is unlinked at once)."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, path = tempfile.mkstemp(prefix="tgen-fake-", suffix=".ctr", dir=shm)
    os.close(fd)
    try:
        return C.CounterView.create(path, n_ports, n_tx, n_streams, n_ports)
    finally:
        os.unlink(path)


class SimWorkers:
    """The simulated workers of a Setup: they pace every stream with the worker's own
    pacer over simulated time, and write what they sent and received into counter
    blocks in the real layout. A frame arrives at its rx port the moment it is sent,
    unless it is one of the ``loss`` share that the simulated DUT drops."""

    def __init__(self, setup: Setup, loss: float, conntrack_max: int) -> None:
        self.setup = setup
        self.loss = loss
        self.conntrack_max = conntrack_max
        self.views: dict[int, C.CounterView] = {}
        self.ports: dict[str, _SimPort] = {}
        for plan in setup.plans:
            pos = [i for pn in plan.ports for i in setup.ports[pn].streams]
            view = _counter_block(len(plan.ports), len(pos), setup.n_streams)
            self.views[plan.id] = view
            for k, pn in enumerate(plan.ports):
                p = _SimPort(pn, plan.id, view.ports[k], view.rx[k], flow=view.flows[k])
                p.ctr[C.P_RX_TABLE] = k
                self.ports[pn] = p
            for row, i in enumerate(pos):  # the worker's tx rows: port by port (tx_rows)
                prog = setup.programs[i]
                k = plan.ports.index(prog.port)
                self.ports[prog.port].streams[i] = TxStream(prog, view.tx[row], k, 1)
        self.tx = {i: st for p in self.ports.values() for i, st in p.streams.items()}
        self.marks: dict[int, int] = {}  # program position -> frames received at its last clear
        self.flows = SimFlows(setup, loss)  # the socket flows: ui/fake_flows.py

    # ------------------------------------------------------------------ time
    def advance(self, now: float) -> None:
        """Send what is due by ``now`` on every running port; deliver it; heartbeats."""
        for p in self.ports.values():
            if p.state == C.STATE_RUNNING:
                self._send(p, now - p.t0)
        self._deliver()
        self.flows.advance(now)
        beat = round(now * 1e9)
        for view in self.views.values():
            view.header[C.H_HEARTBEAT_NS] = beat
        for p in self.ports.values():
            p.ctr[C.P_HEARTBEAT_NS] = beat
            work = int(p.ctr[C.P_TX_FRAMES]) + int(p.ctr[C.P_RX_FRAMES])
            p.ctr[C.P_BUSY_NS] = work * FRAME_COST_NS

    def _send(self, p: _SimPort, rel: float) -> None:
        """The worker's send loop, less the sending: every due frame goes out on time."""
        for st in p.streams.values():
            if st.done or st.paused:
                continue
            due = st.due_count(rel)
            if st.total is not None:
                due = min(due, st.total)
            st.row[C.T_DUE] = st.due_prev + (due - st.run_first)
            if due > st.sent:
                st.row[C.T_TX_FRAMES] += due - st.sent
                st.row[C.T_TX_BYTES] = round(int(st.row[C.T_TX_FRAMES]) * st.prog.sizes.mean)
                st.sent = due
            if st.total is not None and st.sent >= st.total:
                st.done = True
        rows = [st.row for st in p.streams.values()]
        p.ctr[C.P_TX_FRAMES] = sum(int(r[C.T_TX_FRAMES]) for r in rows)
        p.ctr[C.P_TX_BYTES] = sum(int(r[C.T_TX_BYTES]) for r in rows)
        p.ctr[C.P_TX_DUE] = sum(int(r[C.T_DUE]) for r in rows)

    def _sent(self, i: int) -> int:
        st = self.tx.get(i)
        return int(st.row[C.T_TX_FRAMES]) if st is not None else 0

    def received(self, i: int) -> int:
        """Frames of program position ``i`` that arrived so far (all time)."""
        sent = int(self.tx[i].row[C.T_TX_FRAMES])
        return sent - int(sent * self.loss)

    def _deliver(self) -> None:
        frames: dict[str, int] = dict.fromkeys(self.ports, 0)
        nbytes: dict[str, int] = dict.fromkeys(self.ports, 0)
        for i, prog in enumerate(self.setup.programs):
            rxp = self.ports.get(prog.rx_port or "")
            if rxp is None or i not in self.tx:
                continue
            n = self.received(i)
            b = round(n * prog.sizes.mean)
            st = self.tx[i]
            write_rx_row(rxp.rx[prog.index], n, b, self.marks.get(i, 0), st.sent - 1)
            write_iat(rxp.rx[prog.index], n, st.schedule.pps, prog.schedule.idt)
            t0 = round(self.ports[prog.port].t0 * 1e9)
            write_gap(rxp.rx[prog.index], prog.schedule.pps, n - self.marks.get(i, 0), t0)
            frames[rxp.name] += n
            nbytes[rxp.name] += b
        rows = {n: p.flow for n, p in self.ports.items() if p.flow is not None}
        write_flows(self.setup.programs, rows, self.received, self._sent)
        for name, p in self.ports.items():
            p.ctr[C.P_RX_FRAMES], p.ctr[C.P_RX_BYTES] = frames[name], nbytes[name]
            p.ctr[C.P_RX_KERNEL_PACKETS] = frames[name]

    # ------------------------------------------------------------------ commands
    def start(self, names: list[str], now: float) -> None:
        for n in names:
            p = self.ports[n]
            p.t0, p.state = now, C.STATE_RUNNING
            for st in p.streams.values():
                st.begin()
            p.ctr[C.P_STARTED_NS] = round(now * 1e9)
            p.ctr[C.P_STATE] = p.state
        self.flows.start(names, now)

    def stop(self, names: list[str], now: float) -> None:
        for n in names:
            self.ports[n].state = C.STATE_STOPPED
            self.ports[n].ctr[C.P_STATE] = C.STATE_STOPPED
        self.flows.stop(names, now)

    def set_rate(self, i: int, pps: float, now: float) -> None:
        st = self.tx[i]
        st.set_rate(pps, self.ports[st.prog.port].rel(now))

    def pause(self, i: int, paused: bool, now: float) -> None:
        st = self.tx[i]
        st.set_paused(paused, self.ports[st.prog.port].rel(now))

    def clear(self, positions: set[int]) -> dict[int, tuple[int, int]]:
        """The workers' clear of these streams: receivers start a new sequence window;
        a stream whose port is not sending starts again from sequence 0. Returns
        {stream index: (frames sent, raw tx count)}, as the workers acknowledge it."""
        seq = {}
        for i in sorted(positions):
            self.marks[i] = self.received(i)
            st = self.tx.get(i)
            if st is None:
                continue
            if self.ports[st.prog.port].state != C.STATE_RUNNING:
                st.clear_sequence()
            seq[st.index] = (st.sent, int(st.row[C.T_TX_FRAMES]))
        self._deliver()
        return seq

    # ------------------------------------------------------------------ probes
    def interfaces(self) -> dict[Any, dict]:
        """Kernel interface counters as the transport reads them: every frame counted."""
        out: dict[Any, dict] = {}
        for name, ps in self.setup.ports.items():
            c = self.ports[name].ctr
            out.setdefault(stats.ifc_key(ps.host, ps.netns), {})[ps.interface] = IfCounters(
                rx_bytes=int(c[C.P_RX_BYTES]),
                rx_packets=int(c[C.P_RX_FRAMES]),
                rx_dropped=0,
                tx_bytes=int(c[C.P_TX_BYTES]),
                tx_packets=int(c[C.P_TX_FRAMES]),
                tx_dropped=0,
            )
        return out

    def load_pct(self, worker: int) -> float:
        """CPU share a worker needs now: FRAME_COST_NS per frame it sends or receives."""
        fps = 0.0
        for p in self.ports.values():
            for st in p.streams.values():
                if p.state != C.STATE_RUNNING or st.paused or st.done:
                    continue
                rxp = self.ports.get(st.prog.rx_port or "")
                if p.worker == worker:
                    fps += st.schedule.pps
                if rxp is not None and rxp.worker == worker:
                    fps += st.schedule.pps * (1 - self.loss)
        return min(100.0, fps * FRAME_COST_NS / 1e7)

    def cores(self) -> list[float]:
        used = [p.core for p in self.setup.plans] + [p.core for p in self.setup.flow_plans]
        load = [IDLE_CORE_PCT] * (max(used) + 1)
        for plan in self.setup.plans:
            load[plan.core] = min(100.0, load[plan.core] + self.load_pct(plan.id))
        for fp in self.setup.flow_plans:
            load[fp.core] = min(100.0, load[fp.core] + self.flows.load_pct(fp.id))
        return load

    def dut(self, flows: dict[int, int]) -> DutReading:
        """The DUT's conntrack table: one entry per distinct flow sent through it (a stream
        cycles through its flows: it has sent min(flows, frames) of them); the streams
        from b to a are taken for the replies of those from a to b (the same entries)."""
        ways: dict[tuple[str, str], int] = {}
        for i, n in flows.items():
            p = self.setup.programs[i]
            key = (p.port, p.rx_port or "")
            ways[key] = ways.get(key, 0) + min(n, int(self.tx[i].row[C.T_TX_FRAMES]))
        seen = 0
        for (a, b), n in ways.items():
            back = ways.get((b, a))
            if back is None:
                seen += n
            elif (a, b) <= (b, a):  # a pair of directions, counted once
                seen += max(n, back)
        seen += self.flows.conntrack_entries()
        return DutReading(min(self.conntrack_max, seen), self.conntrack_max, MEM_AVAILABLE)

    def workers(self) -> dict[int, stats.WorkerLive]:
        return {
            plan.id: stats.WorkerLive(
                pid=FAKE_PID + plan.id,
                alive=True,
                tx_path="sendmmsg",
                tx_path_why="; ".join(
                    f"{pn}: simulated (--fake)" for pn in plan.ports if self.setup.ports[pn].streams
                )
                or None,  # a receiving worker chose no send path (as the real one)
                pacing="qdisc" if any(self.setup.ports[pn].streams for pn in plan.ports) else None,
                proc_cpu_pct=0.9 * self.load_pct(plan.id),
            )
            for plan in self.setup.plans
        } | {
            fp.id: stats.WorkerLive(
                pid=FAKE_PID + fp.id, alive=True, proc_cpu_pct=0.9 * self.flows.load_pct(fp.id)
            )
            for fp in self.setup.flow_plans
        }


# ---------------------------------------------------------------------- the engine
class FakeEngine:
    """EngineAPI on simulated time. ``loss`` drops that share of every stream's frames."""

    def __init__(
        self,
        compiled: CompiledProfile,
        *,
        clock: Callable[[], float] = time.monotonic,
        loss: float = 0.0,
        conntrack_max: int = 65536,
        cores: list[int] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.loss = loss
        self.conntrack_max = conntrack_max
        self._cores = cores
        self._t_open = clock()
        self._events: list[EngineEvent] = []
        self.calls: list[tuple] = []  # what the UI asked for, in order (tests read it)
        self._captures = SimCaptures()  # ui/fake_capture.py
        self._sent_frames = SentFrames()  # engine/capture.py, as the real engine
        self._configure(self._setup_of(compiled))

    def _setup_of(self, compiled: CompiledProfile) -> Setup:
        """The real Setup; by default one core per port (1, 2, ...), as if the machine had
        them. Nothing of this machine is read: Setup reads each port's interface MAC when
        ARP/ND gave none (a lab that is up would change what the fake shows), so the fake
        gives each simulated interface its MAC (:func:`simulated_mac`)."""
        cores = self._cores or list(range(1, len(compiled.ports) + 1))
        neigh = {n: Neighbours(mac=simulated_mac(compiled, n)) for n in compiled.ports}
        return Setup.build(compiled, EngineOptions(cores=cores, neighbours=neigh))

    def _configure(self, setup: Setup) -> None:
        """A new set-up: simulated workers spawned, ports idle, counters primed."""
        self.setup = setup
        self._dut_source = DutProbe(setup.dut_netns, setup.dut_ssh).source
        self._states = {n: PortState.IDLE for n in setup.ports}
        self._rates = setup.initial_rates()
        self._flow_rates = initial_flow_rates(setup)  # UDP flows, bit/s
        self._paused: set[int] = set()
        self._seq_floor: dict[int, int] = {}
        self._t0: float | None = None
        self._flows = {i: distinct_flows(p) for i, p in enumerate(setup.programs) if p.rx_port}
        self._sim = SimWorkers(setup, self.loss, self.conntrack_max)
        self._acc = stats.Accumulator(setup.sample_context(self._dut_source), clock=self.clock)
        for plan in setup.plans:
            self._acc.attach(setup.worker_ctx(plan, "(simulated)"), self._sim.views[plan.id])
            self._notice(
                f"worker {plan.id} (pid {FAKE_PID + plan.id}) pinned to core {plan.core}: "
                f"port {', '.join(plan.ports)}; streams {', '.join(plan.streams) or '(receive only)'}"
            )
        for fp in setup.flow_plans:  # the flow workers, after the frame workers (as spawned)
            self._acc.attach_flows(fp.id, self._sim.flows.views[fp.id])
            self._notice(
                f"flow worker {fp.id} (pid {FAKE_PID + fp.id}) pinned to core {fp.core}: "
                f"port {fp.port}; flows {', '.join(fp.names)}"
            )
        self._acc.prime(self._sim.interfaces())
        reading = self._dut()
        self._acc.ct_start = reading.count if reading is not None else None
        self._losses = LossCauses(setup.programs, [], None, through_dut=reading is not None)
        self._losses.base = self._losses.prev = self._counters(drops=0)
        self._snap: StatsSnapshot | None = None
        self._snap_at = 0.0
        self._dirty = True
        self.latest_snapshot()  # as the real engine's sampler: a first sample before any start

    # ------------------------------------------------------------- protocol: reading
    def describe(self) -> EngineDescription:
        workers: dict[int, tuple[int | None, str | None]] = {
            plan.id: (FAKE_PID + plan.id, "sendmmsg") for plan in self.setup.plans
        }
        workers |= {fp.id: (FAKE_PID + fp.id, None) for fp in self.setup.flow_plans}
        return self.setup.describe(
            self._rates, self._paused, workers, self._dut_source, self._flow_rates
        )

    def _now(self) -> float:
        return self.clock() - self._t_open

    def _dut(self) -> DutReading | None:
        return self._sim.dut(self._flows) if self._dut_source != "none" else None

    def _counters(self, drops: int) -> CounterReading | None:
        """The simulated DUT's drop counter (every lost frame: one nft rule) and CPU."""
        if self._dut_source == "none":
            return None
        return simulated_reading(self._now(), drops, self._sim.cores())

    def _live(self) -> stats.LiveState:
        return stats.LiveState(
            t0=self._t0,
            port_state={n: str(s) for n, s in self._states.items()},
            port_failure=dict.fromkeys(self._states),
            port_link=dict.fromkeys(self._states, "up"),
            rates=dict(self._rates),
            paused=frozenset(self._paused),
            seq_floor=dict(self._seq_floor),
            workers=self._sim.workers(),
        )

    def latest_snapshot(self) -> StatsSnapshot:
        """A sample of the simulated counters at ``clock()``. Asked again at the same
        instant, the last snapshot (or, after a command, that sample taken again)."""
        now = self.clock()
        if self._snap is not None and now == self._snap_at and not self._dirty:
            return self._snap
        self._sim.advance(now)
        settings = (
            ("conntrack_max", str(self.conntrack_max)),
            ("conntrack_buckets", "16384"),
            ("udp_timeout", "30"),
            ("udp_stream_timeout", "120"),
        )
        rd = stats.Readings(self._sim.interfaces(), self._sim.cores(), self._dut(), settings)
        snap = self._acc.sample(rd, self._live())
        drops = sum(s.tx_frames - s.rx_frames for s in snap.streams if s.rx_port)
        self._snap = self._losses.apply(snap, self._counters(max(0, drops)))
        self._snap_at, self._dirty = now, False
        return self._snap

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        return len(self._events), self._events[cursor:]

    async def sample_now(self) -> StatsSnapshot:
        self._dirty = True
        return self.latest_snapshot()

    async def final_snapshot(self) -> StatsSnapshot:
        return await self.sample_now()

    def plan_text(self) -> list[str]:
        return self.setup.plan_text()

    def report(
        self,
        final: StatsSnapshot,
        *,
        duration_s: float,
        partial: bool,
        profile_path: str,
        thresholds: list[str] | None = None,
    ) -> RunResult:
        """The run's result from a final snapshot, as the real engine builds it."""
        from tgen_tui.engine.result import build_result

        return build_result(
            self.setup.compiled,
            final,
            duration_s=duration_s,
            partial=partial,
            profile_path=profile_path,
            events=[f"{e.t:8.3f}s {e.text()}" for e in self._events],
            plan=self.plan_text(),
            thresholds=thresholds,
        )

    # ------------------------------------------------------------- protocol: commands
    def _emit(self, ev: EngineEvent) -> None:
        self._events.append(ev)
        self._dirty = True

    def _notice(self, message: str) -> None:
        self._emit(EngineNotice(self._now(), message, wall=self.wall()))

    def _set_state(self, name: str, new: PortState) -> None:
        old = self._states[name]
        if new not in TRANSITIONS[old]:
            raise RuntimeError(f"port {name}: illegal transition {old} -> {new}")
        self._states[name] = new
        self._emit(PortStateChanged(self._now(), name, str(old), str(new), wall=self.wall()))

    def _by_worker(self, names: list[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for n in names:
            out.setdefault(self.setup.ports[n].worker, []).append(n)
        return out

    async def start(self, ports: list[str] | None = None) -> None:
        """As the real engine: idle or stopped ports go starting -> running, worker by
        worker; a running one is left alone, with a notice."""
        self.calls.append(("start", ports))
        todo = []
        for n in self.setup.select(ports):
            if self._states[n] == PortState.RUNNING:
                self._notice(f"port {n} is already running: start does nothing")
            else:
                todo.append(n)
        if not todo:
            return
        now = self.clock()
        self._sim.advance(now)
        if self._t0 is None:
            self._t0 = now
        for pns in self._by_worker(todo).values():
            for n in pns:
                self._set_state(n, PortState.STARTING)
            self._sim.start(pns, now)
            for n in pns:
                self._set_state(n, PortState.RUNNING)

    async def stop(self, ports: list[str] | None = None, drain_ms: int | None = None) -> None:
        """As the real engine: running ports go stopping, then stopped (final counters);
        naming a port that does not run does nothing, with a notice."""
        self.calls.append(("stop", ports))
        todo = []
        for n in self.setup.select(ports):
            if self._states[n] == PortState.RUNNING:
                todo.append(n)
            elif ports is not None:
                self._notice(f"port {n} is not running ({self._states[n]}): stop does nothing")
        if todo:
            self._stop(todo)

    def _stop(self, names: list[str]) -> None:
        self._sim.advance(self.clock())
        groups = list(self._by_worker(names).values())
        for pns in groups:
            for n in pns:
                self._set_state(n, PortState.STOPPING)
            self._sim.stop(pns, self.clock())
        for pns in groups:
            for n in pns:
                self._set_state(n, PortState.STOPPED)

    async def set_rate(self, target: str, rate: str | float) -> float:
        """As the real engine: a stream or a port (frames/s), or a UDP flow or a port with
        only UDP flows (bit/s, engine/flowrates.py); a TCP flow is refused (RateError)."""
        self.calls.append(("set_rate", target, rate))
        if flow_target(self.setup, target):
            fnew, bps = plan_flow_rate(self.setup, self._flow_rates, target, rate)
            self._apply_flow_rates(fnew, str(rate))
            return bps
        new, result = plan_rate(self.setup, self._rates, target, rate)
        self._apply_rates(new, str(rate))
        return result

    def _apply_flow_rates(self, new: dict[int, float], request: str) -> None:
        """Each changed UDP flow rate to its simulated flow, then an event (as the real
        engine's flowcontrol.apply_flow_rates)."""
        now = self.clock()
        for i, bps in new.items():
            old = self._flow_rates.get(i, 0.0)
            if abs(bps - old) <= 1e-9 * max(bps, old):
                continue
            f = self.setup.flows[i]
            self._sim.flows.set_rate(i, bps, now)
            self._flow_rates[i] = float(bps)
            ev = FlowRateChanged(
                self._now(), f.name, f.port, old, float(bps), request, wall=self.wall()
            )
            self._emit(ev)

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        self.calls.append(("scale_rates", factor, ports))
        self._apply_rates(plan_scale(self.setup, self._rates, factor, ports), f"x{factor:g}")

    def _apply_rates(self, new: dict[int, float], request: str) -> None:
        now = self.clock()
        self._sim.advance(now)
        for i in changed(self._rates, new):
            old, self._rates[i] = self._rates[i], new[i]
            prog = self.setup.programs[i]
            self._sim.set_rate(i, new[i], now)  # a paused stream keeps it for the resume
            ev = RateChanged(
                self._now(), prog.name, prog.port, old, new[i], request, wall=self.wall()
            )
            self._emit(ev)

    async def pause(self, stream: str) -> None:
        self.calls.append(("pause", stream))
        self._pause(stream, True)

    async def resume(self, stream: str) -> None:
        self.calls.append(("resume", stream))
        self._pause(stream, False)

    def _pause(self, stream: str, paused: bool) -> None:
        i = self.setup.stream_pos(stream)
        if (i in self._paused) == paused:
            self._notice(f"stream {stream} is already {'paused' if paused else 'running'}")
            return
        now = self.clock()
        self._sim.advance(now)
        self._sim.pause(i, paused, now)
        if paused:
            self._paused.add(i)
        else:
            self._paused.discard(i)
        self._emit(StreamPaused(self._now(), stream, paused, wall=self.wall()))

    async def clear(self, ports: list[str] | None = None, streams: list[str] | None = None) -> None:
        """As the real engine: counters of ``ports`` (and the streams they send), of
        ``streams``, or of everything; senders and receivers reset together."""
        self.calls.append(("clear", ports, streams))
        everything, pnames, pos = clear_targets(self.setup, ports, streams)
        self._sim.advance(self.clock())
        seq = self._sim.clear(pos)
        self._acc.clear(
            self._sim.interfaces(), None if everything else pnames, None if everything else pos
        )
        if everything:
            reading = self._dut()
            self._acc.ct_start = reading.count if reading else None
        self._seq_floor.update(seq_floors(self.setup, pos, seq, self._acc.tx_raw_base))
        names = tuple(self.setup.programs[i].name for i in sorted(pos))
        self._emit(CountersCleared(self._now(), tuple(sorted(pnames)), names, wall=self.wall()))

    # ------------------------------------------------------------- protocol: captures
    async def start_capture(self, spec: CaptureSpec) -> CaptureView:
        """As the real engine: the spec checked (BadInput for a bad filter, port or
        stream), then frames of the simulated workers (ui/fake_capture.py)."""
        self.calls.append(("start_capture", spec.ports, spec.filter, spec.direction))
        self.latest_snapshot()
        return self._captures.start(spec, self.setup, self._sim, self.clock())

    async def stop_capture(
        self, cid: int, reason: str = "stopped", comment: str | None = None
    ) -> CaptureView:
        self.calls.append(("stop_capture", cid))
        self.latest_snapshot()
        return self._captures.stop(cid, reason, self.setup, self._sim, self.clock(), self.wall())

    def capture_views(self) -> list[CaptureView]:
        """Every capture, a new status every 250 ms of the fake's clock."""
        self.latest_snapshot()
        return self._captures.views(self.setup, self._sim, self.clock(), self.wall())

    def sent_frame(self, stream: str, seq: int, lane: int = 0) -> bytes | None:
        """As the real engine: the stream's frame ``seq`` rebuilt."""
        return self._sent_frames.frame(self.setup, stream, seq, lane)

    async def reload(self, compiled: CompiledProfile) -> None:
        """As the real engine: new rates only are applied live; anything else stops the
        ports and re-spawns the (simulated) workers, ports idle."""
        self.calls.append(("reload", compiled.name))
        setup = self.setup
        if setup.rates_only_change(compiled):
            new = setup.rates_of(compiled)
            for n in setup.ports:
                setup.check_line_rate(n, new, n)
            self._apply_rates(new, "reload")
            self.setup = dataclasses.replace(setup, compiled=compiled)
            self._notice(f"profile {compiled.name} reloaded: rates applied live")
            return
        setup = self._setup_of(compiled)  # a bad profile is refused before anything stops
        running = [n for n, s in self._states.items() if s == PortState.RUNNING]
        if running:
            self._stop(running)
        # the simulated workers are re-spawned: their captures end (the real taps go on)
        self._captures.stop_all(
            "profile reloaded", self.setup, self._sim, self.clock(), self.wall()
        )
        self._acc.close()
        self._configure(setup)
        self._notice(f"profile {compiled.name} reloaded: workers re-spawned, ports idle")


__all__ = ["FakeEngine", "SimWorkers", "write_rx_row"]
