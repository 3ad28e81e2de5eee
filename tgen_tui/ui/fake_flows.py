"""The fake counter source's socket flows (tgen_tui.ui.fake): what a flow worker
(:mod:`tgen_tui.worker.flows`) writes into its counter block, simulated on the fake's
clock, in the real layout (:mod:`tgen_tui.worker.flowcounters`), for the real
accumulator to read (``Accumulator.attach_flows``, as the real engine attaches them).

- A flow starts and stops with its port; its schedule (start, stop, on/off) is the
  profile's, through :mod:`tgen_tui.packets.schedule`: ``is_on`` says whether it sends
  now, and :class:`~tgen_tui.packets.schedule.DueTimes` counts a UDP flow's datagrams and
  every flow's time due to send (on a 1 ms tick clock: a TCP flow has no datagram rate).
- **TCP**: goodput near a fixed rate while on (:data:`TCP_BPS`, lower by
  :data:`TCP_STEP` for each TCP flow before it, with a slow ripple of
  :data:`TCP_RIPPLE`), every byte sent read at once; a smoothed RTT around
  :data:`RTT_US` over a min RTT of :data:`MIN_RTT_US`, a cwnd of rate × RTT, and
  :data:`RETRANS_SHARE` of the data segments retransmitted. Like the worker, a flow is
  connected from the set-up (one TCP_INFO read) and again at each start after a stop.
- **UDP**: its requested rate (``set_rate`` goes on from the datagrams sent, on the
  schedule's own on/off phases, as the worker's pacer does); the fake's ``loss`` share of
  the datagrams is lost; a jitter of :data:`UDP_JITTER_NS`.

A stop ends the flows at once (no drain): a UDP flow's receiver then expects every
datagram sent. Counters only grow; a clear is the accumulator's baselines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tgen_tui.engine.setup import Setup
from tgen_tui.packets.flowprogram import FlowProgram
from tgen_tui.packets.schedule import DueTimes, is_on
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker.rxstats import lat_bucket

TCP_BPS = 400e6  # goodput of the first TCP flow while on, bit/s
TCP_STEP = 0.08  # each further TCP flow gets this share less (Jain's index is not 1)
TCP_RIPPLE = 0.05  # goodput varies by this share around its rate ...
RIPPLE_S = 8.0  # ... over this many seconds of sending
MSS = 1448  # bytes
MIN_RTT_US = 1_600
RTT_US = 2_100  # the smoothed RTT's mean while sending
RTT_SWING = 0.1  # the smoothed RTT varies by this share around its mean
RTTVAR_US = 300
INIT_CWND = 10  # segments, before the flow sends
RETRANS_SHARE = 4e-4  # data segments retransmitted
INFO_HZ = 50  # TCP_INFO reads a second (the worker's INFO_EVERY_NS)
UDP_JITTER_NS = 45_000
TICK_HZ = 1000  # the on-time clock: ticks of the schedule counted by DueTimes
FLOW_CPU_PCT = 2.0  # a flow worker's load with nothing to send
CPU_PCT_PER_GBIT = 8.0  # and per Gbit/s it sends
APP_SETUP_NS = 180_000  # a simulated app connection's setup time (connect to writable)
APP_TXN_NS = 420_000  # and its transaction (request to response read)


def on_clock(prog: FlowProgram) -> DueTimes:
    """The flow's schedule as a 1 ms tick train: ticks due by t = its time due to send."""
    sc = replace(prog.schedule, pps=float(TICK_HZ), count=None, idt="constant", burst=0)
    return DueTimes(sc)


def tcp_bytes(rate_bps: float, phase: float, on_s: float) -> float:
    """Bytes a simulated TCP flow delivered after ``on_s`` seconds due to send: the
    integral of rate × (1 + TCP_RIPPLE sin(ωt + phase)) / 8 (it only grows)."""
    w = 2 * math.pi / RIPPLE_S
    ripple = TCP_RIPPLE / w * (math.cos(phase) - math.cos(w * on_s + phase))
    return rate_bps / 8.0 * (on_s + ripple)


def tcp_rate(rate_bps: float, phase: float, on_s: float) -> float:
    """The simulated TCP flow's goodput (bit/s) after ``on_s`` seconds due to send."""
    return rate_bps * (1 + TCP_RIPPLE * math.sin(2 * math.pi / RIPPLE_S * on_s + phase))


@dataclass
class SimFlow:
    """One simulated flow: its program, counter row, and where its current run began."""

    prog: FlowProgram
    row: np.ndarray  # its FLOW_STRIDE row in its worker's block
    rate_bps: float  # TCP: its goodput while on; UDP: its requested payload rate
    phase: float = 0.0  # TCP: its ripple's phase
    running: bool = False
    t0: float = 0.0  # clock at its port's start
    clock: DueTimes | None = None
    pacer: DueTimes | None = None  # UDP: datagrams due since the last re-base
    sent_base: int = 0  # UDP: datagrams sent at the last re-base ...
    t_base: float = 0.0  # ... and when (s after t0)
    base: dict[int, int] = field(default_factory=dict)  # the slots at this run's start

    @property
    def tcp(self) -> bool:
        return self.prog.protocol == "tcp"

    def slot(self, k: int) -> int:
        return int(self.row[k])


class SimFlows:
    """Every socket flow of a Setup, in blocks by flow worker (``views``)."""

    def __init__(self, setup: Setup, loss: float) -> None:
        self.setup = setup
        self.loss = loss
        self.views: dict[int, FC.FlowCounterView] = {}
        self.flows: list[SimFlow] = []
        tcp_k = 0
        for plan in setup.flow_plans:
            view = FC.FlowCounterView.anonymous([setup.flows[i].id for i in plan.flows])
            self.views[plan.id] = view
            for k, i in enumerate(plan.flows):  # rows in the plan's order (the sampler's)
                prog = setup.flows[i]
                f = SimFlow(prog, view.rows[k], float(prog.rate_bps or 0.0))
                if f.tcp:
                    f.rate_bps = TCP_BPS * max(0.2, 1 - TCP_STEP * tcp_k)
                    f.phase = 1.3 * tcp_k
                    tcp_k += 1
                self._configure(f)
                self.flows.append(f)
        self.by_pos = {setup.flow_pos(f.prog.name): f for f in self.flows}

    @staticmethod
    def _configure(f: SimFlow) -> None:
        """As the worker's configure: idle, the UDP rate, a TCP flow connected (the
        handshake's TCP_INFO: its RTT, the initial cwnd)."""
        r = f.row
        r[FC.FC_STATE] = FC.STATE_IDLE
        r[FC.FC_RATE_BPS] = round(f.prog.rate_bps or 0)
        if f.tcp:
            r[FC.FC_CONNECTIONS] = 1
            r[FC.FC_TI_READS] = 1
            r[FC.FC_RTT_US] = r[FC.FC_MIN_RTT_US] = MIN_RTT_US
            r[FC.FC_RTTVAR_US] = MIN_RTT_US // 2
            r[FC.FC_CWND], r[FC.FC_MSS] = INIT_CWND, MSS

    # ------------------------------------------------------------------ commands
    def start(self, ports: list[str], now: float) -> None:
        """The ports started: their flows' schedules run from ``now``."""
        for f in self.flows:
            if f.prog.port not in ports:
                continue
            if f.tcp and f.slot(FC.FC_STATE) == FC.STATE_STOPPED:
                f.row[FC.FC_CONNECTIONS] += 1  # a stop closed its connection
            f.running, f.t0 = True, now
            f.clock = on_clock(f.prog)
            f.base = {k: f.slot(k) for k in range(FC.FLOW_STRIDE)}
            f.row[FC.FC_STARTED_NS] = round(now * 1e9)
            f.row[FC.FC_STATE] = FC.STATE_OFF
            self._rebase(f, 0.0)

    def stop(self, ports: list[str], now: float) -> None:
        """The ports stopped: their flows end now (nothing is left in flight)."""
        self.advance(now)
        for f in self.flows:
            if f.prog.port not in ports or not f.running:
                continue
            f.running = False
            f.row[FC.FC_ON] = 0
            f.row[FC.FC_STATE] = FC.STATE_STOPPED
            if not f.tcp:
                f.row[FC.FC_EXPECTED] = max(f.slot(FC.FC_EXPECTED), f.slot(FC.FC_TX_PACKETS))

    def set_rate(self, pos: int, bps: float, now: float) -> None:
        """A UDP flow's new payload rate from now on, on the schedule's phases (as the
        worker: what the new rate makes due counts on from the datagrams sent)."""
        f = self.by_pos[pos]
        self.advance(now)
        f.prog, f.rate_bps = f.prog.with_rate(bps), float(bps)
        f.row[FC.FC_RATE_BPS] = round(bps)
        if f.running and not f.tcp and f.prog.schedule.pps > 0:
            f.pacer = DueTimes(f.prog.schedule)
            f.sent_base = f.slot(FC.FC_TX_PACKETS) - f.pacer.count_until(now - f.t0)
            f.t_base = 0.0

    @staticmethod
    def _rebase(f: SimFlow, rel: float) -> None:
        sc = f.prog.schedule
        f.pacer = DueTimes(sc) if not f.tcp and sc.pps > 0 else None
        f.sent_base, f.t_base = f.slot(FC.FC_TX_PACKETS), rel

    # ------------------------------------------------------------------ time
    def advance(self, now: float) -> None:
        """Every running flow's counters and gauges at ``now``."""
        for f in self.flows:
            if not f.running or f.clock is None:
                continue
            rel = now - f.t0
            on = is_on(f.prog.schedule, rel)
            on_s = f.clock.count_until(rel) / TICK_HZ
            r = f.row
            r[FC.FC_ON] = int(on)
            r[FC.FC_STATE] = FC.STATE_SENDING if on else FC.STATE_OFF
            r[FC.FC_ACTIVE_NS] = f.base[FC.FC_ACTIVE_NS] + round(on_s * 1e9)
            if f.prog.app is not None:
                self._app(f, rel, on_s)
            elif f.tcp:
                self._tcp(f, rel, on_s, on)
            else:
                self._udp(f, rel, on)

    @staticmethod
    def _tcp(f: SimFlow, rel: float, on_s: float, on: bool) -> None:
        r, b = f.row, f.base
        got = round(tcp_bytes(f.rate_bps, f.phase, on_s))
        for k in (FC.FC_TX_BYTES, FC.FC_RX_BYTES, FC.FC_RX_BYTES_DUE, FC.FC_BYTES_ACKED):
            r[k] = b[k] + got
        segs = b[FC.FC_DATA_SEGS_OUT] + math.ceil(got / MSS)
        r[FC.FC_DATA_SEGS_OUT] = segs
        r[FC.FC_RETRANS] = round(segs * RETRANS_SHARE)
        r[FC.FC_BYTES_RETRANS] = int(r[FC.FC_RETRANS]) * MSS
        samples = math.floor(on_s * INFO_HZ)  # reads while it had data acknowledged
        r[FC.FC_RTT_SAMPLES] = b[FC.FC_RTT_SAMPLES] + samples
        r[FC.FC_RTT_SUM_US] = b[FC.FC_RTT_SUM_US] + samples * RTT_US
        r[FC.FC_TI_READS] = b[FC.FC_TI_READS] + 1 + math.floor(rel * INFO_HZ)
        if on_s <= 0:
            return  # not sent yet: the handshake's figures stay
        rate = tcp_rate(f.rate_bps, f.phase, on_s) if on else 0.0
        rtt = RTT_US * (1 + RTT_SWING * math.sin(1.7 * on_s + f.phase))
        r[FC.FC_RTT_US], r[FC.FC_RTTVAR_US] = round(rtt), RTTVAR_US
        r[FC.FC_MIN_RTT_US] = MIN_RTT_US
        r[FC.FC_CWND] = max(INIT_CWND, round(rate / 8 * rtt / 1e6 / MSS))
        r[FC.FC_DELIVERY_RATE] = round(rate / 8)

    @staticmethod
    def _app(f: SimFlow, rel: float, on_s: float) -> None:
        """A request/response flow: its load's connections, each set up in APP_SETUP_NS
        and answered in APP_TXN_NS, none failing (the concurrent target held at once)."""
        a, r, b = f.prog.app, f.row, f.base
        assert a is not None
        n = round(a.conn_rate() * on_s) if a.mode != "concurrent" else round(a.target)
        held = round(a.target) if a.mode == "concurrent" else 0
        txn = n * a.per_connection
        for k, v in ((FC.FC_ATTEMPTED, n), (FC.FC_ESTABLISHED, n), (FC.FC_CLOSED, n - held),
                     (FC.FC_TRANSACTIONS, txn), (FC.FC_SERVED, txn),
                     (FC.FC_ACCEPTED, n)):  # fmt: skip
            r[k] = b[k] + v
        r[FC.FC_CONCURRENT] = held or round(a.conn_rate() * (APP_SETUP_NS + APP_TXN_NS) / 1e9)
        r[FC.FC_TARGET] = round(a.target_at(rel) * 1000)
        if a.mode != "concurrent":
            r[FC.FC_DUE] = b[FC.FC_DUE] + n  # the fake keeps up with its rate
        setup, done = int(r[FC.FC_ESTABLISHED]), int(r[FC.FC_TRANSACTIONS])
        for hist, total, lo, hi, count, ns in (
            (FC.FC_SETUP_HIST, FC.FC_SETUP_SUM_NS, FC.FC_SETUP_MIN_NS, FC.FC_SETUP_MAX_NS,
             setup, APP_SETUP_NS),
            (FC.FC_TXN_HIST, FC.FC_TXN_SUM_NS, FC.FC_TXN_MIN_NS, FC.FC_TXN_MAX_NS, done,
             APP_TXN_NS),
        ):  # fmt: skip
            r[hist + int(lat_bucket(np.array([ns]))[0])] = count
            r[total], r[lo], r[hi] = count * ns, ns if count else 0, ns if count else 0
        r[FC.FC_RX_BYTES] = r[FC.FC_RX_BYTES_DUE] = b[FC.FC_RX_BYTES] + txn * a.response
        r[FC.FC_TX_BYTES] = b[FC.FC_TX_BYTES] + txn * a.request

    def _udp(self, f: SimFlow, rel: float, on: bool) -> None:
        r = f.row
        if f.pacer is not None and on:  # the worker sends only while is_on says so
            due = f.sent_base + f.pacer.count_until(rel - f.t_base)
            r[FC.FC_TX_PACKETS] = max(f.slot(FC.FC_TX_PACKETS), due)
        sent = f.slot(FC.FC_TX_PACKETS)
        got = sent - int(sent * self.loss)
        r[FC.FC_TX_BYTES] = sent * f.prog.message
        r[FC.FC_RX_PACKETS] = got
        r[FC.FC_RX_BYTES] = r[FC.FC_RX_BYTES_DUE] = got * f.prog.message
        r[FC.FC_EXPECTED] = max(f.slot(FC.FC_EXPECTED), sent)
        r[FC.FC_JITTER_NS] = UDP_JITTER_NS if got >= 2 else 0

    # ------------------------------------------------------------------ probes
    def conntrack_entries(self) -> int:
        """The DUT's entries for the flows: a TCP flow's from its set-up (it connects
        then), a UDP flow's once it sent."""
        return sum(
            f.slot(FC.FC_ESTABLISHED) if f.prog.app else f.tcp or f.slot(FC.FC_TX_PACKETS) > 0
            for f in self.flows
        )

    def load_pct(self, worker: int) -> float:
        """A flow worker's CPU share now: a little, and more the more it sends."""
        plan = next(p for p in self.setup.flow_plans if p.id == worker)
        bps = sum(
            self.by_pos[i].rate_bps
            for i in plan.flows
            if self.by_pos[i].running and self.by_pos[i].slot(FC.FC_ON)
        )
        return min(100.0, FLOW_CPU_PCT + CPU_PCT_PER_GBIT * bps / 1e9)


__all__ = ["SimFlow", "SimFlows", "on_clock", "tcp_bytes", "tcp_rate"]
