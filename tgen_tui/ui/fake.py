"""A simulated engine that satisfies :class:`~tgen_tui.engine.api.EngineAPI` without root.

Pilot and snapshot tests (and ``tgen tui --fake``, a demo) run the console on it. Counters
are integrals of the requested rates over simulated time, so numbers move like the real
engine's; with ``clock`` fixed they stay put (snapshot tests). Its coroutines await
nothing, so they run on asyncio as well as on trio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tgen_tui.engine.api import (
    CountersCleared,
    EngineCommandError,
    EngineDescription,
    EngineEvent,
    EngineNotice,
    PortInfo,
    PortState,
    PortStateChanged,
    RateChanged,
    RateError,
    StreamInfo,
    StreamPaused,
    WorkerInfo,
)
from tgen_tui.engine.snapshot import (
    DutStats,
    Latency,
    PortStats,
    StatsSnapshot,
    StreamStats,
    WorkerStats,
)
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.profiles.units import line_rate_fps, parse_bitrate, parse_count


def describe_compiled(
    compiled: CompiledProfile, cores: list[int] | None = None
) -> EngineDescription:
    """An EngineDescription from a compiled profile: one worker per port, cores 1, 2, ..."""
    cores = cores or [1]
    ports, streams, workers = [], [], []
    for i, (name, spec) in enumerate(compiled.ports.items()):
        mine = [s for s in compiled.streams if s.port == name]
        mean = (sum(s.sizes.mean for s in mine) / len(mine) + 4) if mine else 64.0
        core = cores[i % len(cores)]
        ports.append(
            PortInfo(
                name=name,
                interface=spec.interface,
                netns=spec.netns,
                speed_bps=spec.speed_bps,
                worker=i,
                core=core,
                streams=tuple(s.name for s in mine),
                line_rate_fps=line_rate_fps(spec.speed_bps, mean),
            )
        )
        workers.append(WorkerInfo(i, core, (name,), tuple(s.name for s in mine), None, "sendmmsg"))
    for s in compiled.streams:
        flows = 1
        for f in s.fields:
            if f.mode != "fixed":
                flows *= (f.max - f.min) // max(f.step, 1) + 1
        streams.append(
            StreamInfo(s.name, s.index, s.port, s.rx_port, s.schedule.pps, s.sizes.mean + 4, flows)
        )
    return EngineDescription(
        profile=compiled.name,
        profile_hash=compiled.profile_hash,
        seed=compiled.seed,
        ports=tuple(ports),
        streams=tuple(streams),
        workers=tuple(workers),
        dut_source=f"netns:{compiled.dut_netns}" if compiled.dut_netns else "none",
    )


def parse_rate(text: str | float, *, mean_bytes: float, line_rate_bps: float) -> float:
    """``25kpps``, ``100Mbit``, ``10%`` or a bare number (frames/s) → frames/s; RateError-free
    ValueError on nonsense (the caller names the target)."""
    if isinstance(text, int | float):
        v = float(text)
    else:
        s = text.strip().replace(" ", "")
        if s.endswith("%"):
            v = line_rate_fps(line_rate_bps, mean_bytes) * float(s[:-1]) / 100.0
        elif s.lower().endswith(("bit", "bit/s", "bps", "b/s")):
            bits = s
            for suffix in ("bit/s", "bit", "bps", "b/s"):
                if bits.lower().endswith(suffix):
                    bits = bits[: -len(suffix)]
                    break
            v = parse_bitrate(bits) / (8.0 * mean_bytes)
        else:
            v = parse_count(s)
    if not v > 0:
        raise ValueError("a rate must be > 0")
    return v


@dataclass
class _Port:
    info: PortInfo
    state: PortState = PortState.IDLE
    since: float | None = None  # clock at the last start
    sent_before: dict[str, float] = field(default_factory=dict)  # frames before `since`


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
        self.compiled = compiled
        self.clock = clock
        self.wall = wall
        self._cores = cores
        self.loss = loss
        self._desc = describe_compiled(compiled, cores)
        self._t0 = clock()
        self._ports = {p.name: _Port(p) for p in self._desc.ports}
        self._rates = {s.name: s.pps for s in self._desc.streams}
        self._paused: dict[str, bool] = {s.name: False for s in self._desc.streams}
        self._base: dict[str, float] = {}  # counters at the last clear, per stream
        self._events: list[EngineEvent] = []
        self._seq = 0
        self.conntrack_max = conntrack_max
        self._full_at: float | None = None
        self._history: dict[str, tuple[float, float]] = {}  # name -> (t, frames) for rates
        self.calls: list[tuple] = []  # what the UI asked for, in order (tests read it)

    # ------------------------------------------------------------- protocol: reading
    def describe(self) -> EngineDescription:
        return self._desc

    def _now(self) -> float:
        return self.clock() - self._t0

    def _sent(self, stream: str) -> float:
        info = self._desc.stream(stream)
        p = self._ports[info.port]
        total = p.sent_before.get(stream, 0.0)
        if p.state == PortState.RUNNING and p.since is not None and not self._paused[stream]:
            total += self._rates[stream] * max(0.0, self.clock() - p.since)
        return total

    def latest_snapshot(self) -> StatsSnapshot:
        self._seq += 1
        t = self._now()
        streams, ports = [], []
        per_port_tx: dict[str, list[float]] = {n: [0, 0, 0.0] for n in self._ports}
        per_port_rx: dict[str, list[float]] = {n: [0, 0, 0.0] for n in self._ports}
        for s in self._desc.streams:
            sent = int(self._sent(s.name) - self._base.get(s.name, 0.0))
            rx = int(sent * (1 - self.loss))
            running = self._ports[s.port].state == PortState.RUNNING and not self._paused[s.name]
            pps = self._rates[s.name] if running else 0.0
            lat = (
                Latency(8_000, 21_000, 19_000, 64_000, 90_000, 180_000, 2_500) if rx else Latency()
            )
            streams.append(
                StreamStats(
                    name=s.name,
                    index=s.index,
                    port=s.port,
                    rx_port=s.rx_port,
                    requested_pps=self._rates[s.name],
                    tx_frames=sent,
                    tx_bytes=int(sent * (s.mean_frame_bytes - 4)),
                    rx_frames=rx,
                    rx_bytes=int(rx * (s.mean_frame_bytes - 4)),
                    tx_pps=pps,
                    rx_pps=pps * (1 - self.loss) if s.rx_port else 0.0,
                    lost=sent - rx,
                    loss_pct=100.0 * (sent - rx) / sent if sent else 0.0,
                    latency_ns=lat,
                    due_frames=sent,
                    achieved_pps=self._rates[s.name] if sent else 0.0,
                    paused=self._paused[s.name],
                )
            )
            acc = per_port_tx[s.port]
            acc[0] += sent
            acc[1] += int(sent * (s.mean_frame_bytes - 4))
            acc[2] += pps
            if s.rx_port in per_port_rx:
                r = per_port_rx[s.rx_port]
                r[0] += rx
                r[1] += int(rx * (s.mean_frame_bytes - 4))
                r[2] += pps * (1 - self.loss)
        for name, p in self._ports.items():
            tx, txb, txp = per_port_tx[name]
            rx, rxb, rxp = per_port_rx[name]
            req = sum(self._rates[s] for s in p.info.streams)
            ports.append(
                PortStats(
                    name=name,
                    interface=p.info.interface,
                    netns=p.info.netns,
                    state=str(p.state),
                    link="up",
                    worker=p.info.worker,
                    core=p.info.core,
                    tx_frames=int(tx),
                    rx_frames=int(rx),
                    tx_bytes=int(txb),
                    rx_bytes=int(rxb),
                    tx_pps=txp,
                    rx_pps=rxp,
                    tx_bps=txp * 84 * 8 if txp else 0.0,
                    rx_bps=rxp * 84 * 8 if rxp else 0.0,
                    requested_pps=req,
                    achieved_pps=req if tx else 0.0,
                    if_tx_frames=int(tx),
                    if_rx_frames=int(rx),
                    speed_bps=p.info.speed_bps,
                )
            )
        workers = tuple(
            WorkerStats(
                id=w.id,
                core=w.core,
                pid=4000 + w.id,
                ports=w.ports,
                streams=w.streams,
                alive=True,
                tx_pps=sum(p.tx_pps for p in ports if p.name in w.ports),
                core_cpu_pct=35.0 if any(p.tx_pps for p in ports if p.name in w.ports) else 1.0,
                proc_cpu_pct=30.0 if any(p.tx_pps for p in ports if p.name in w.ports) else 0.5,
                heartbeat_age_s=0.01,
                busy_pct=22.0 if any(p.tx_pps for p in ports if p.name in w.ports) else 0.0,
                tx_path=w.tx_path,
            )
            for w in self._desc.workers
        )
        flows = sum(min(s.flows, int(self._sent(s.name))) for s in self._desc.streams if s.rx_port)
        count = min(self.conntrack_max, flows)
        if count >= self.conntrack_max and self._full_at is None:
            self._full_at = t
        new_ps = sum(
            self._rates[s.name]
            for s in self._desc.streams
            if s.rx_port
            and self._ports[s.port].state == PortState.RUNNING
            and self._sent(s.name) < s.flows
        )
        dut = DutStats(
            source=self._desc.dut_source,
            conntrack_count=count,
            conntrack_max=self.conntrack_max,
            conntrack_peak=count,
            conntrack_start=0,
            new_per_s=float(new_ps) if count < self.conntrack_max else 0.0,
            full_at_s=self._full_at,
            mem_available_bytes=3_500_000_000,
            settings=(
                ("conntrack_max", str(self.conntrack_max)),
                ("conntrack_buckets", "16384"),
                ("udp_timeout", "30"),
                ("udp_stream_timeout", "120"),
            ),
        )
        return StatsSnapshot(
            t=t,
            seq=self._seq,
            ports=tuple(ports),
            streams=tuple(streams),
            workers=workers,
            dut=dut if self._desc.dut_source != "none" else None,
        )

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        return len(self._events), self._events[cursor:]

    # ------------------------------------------------------------- protocol: commands
    def _emit(self, ev: EngineEvent) -> None:
        self._events.append(ev)

    def _select(self, ports: list[str] | None) -> list[str]:
        names = list(self._ports) if ports is None else list(ports)
        for n in names:
            if n not in self._ports:
                raise EngineCommandError(n, f"no such port (have: {', '.join(self._ports)})")
        return names

    def _move(self, name: str, new: PortState) -> None:
        p = self._ports[name]
        old = p.state
        if new == PortState.RUNNING:
            p.since = self.clock()
        elif old == PortState.RUNNING:
            for s in p.info.streams:
                p.sent_before[s] = self._sent(s)
            p.since = None
        p.state = new
        self._emit(PortStateChanged(self._now(), name, str(old), str(new), wall=self.wall()))

    async def start(self, ports: list[str] | None = None) -> None:
        self.calls.append(("start", ports))
        for n in self._select(ports):
            if self._ports[n].state in (PortState.IDLE, PortState.STOPPED):
                self._move(n, PortState.RUNNING)

    async def stop(self, ports: list[str] | None = None) -> None:
        self.calls.append(("stop", ports))
        for n in self._select(ports):
            if self._ports[n].state == PortState.RUNNING:
                self._move(n, PortState.STOPPED)

    def _freeze(self, stream: str) -> None:
        """Fold frames sent so far into sent_before before a rate or pause change."""
        info = self._desc.stream(stream)
        p = self._ports[info.port]
        if p.state == PortState.RUNNING:
            p.sent_before[stream] = self._sent(stream)
            # restart every stream of the port from now, keeping their totals
            for s in p.info.streams:
                if s != stream:
                    p.sent_before[s] = self._sent(s)
            p.since = self.clock()

    async def set_rate(self, target: str, rate: str | float) -> float:
        self.calls.append(("set_rate", target, rate))
        if target in self._ports:
            info = self._ports[target].info
            streams = list(info.streams)
            speed = info.speed_bps
        else:
            try:
                s = self._desc.stream(target)
            except StopIteration:
                raise RateError(target, "no such port or stream") from None
            streams, speed = [target], self._ports[s.port].info.speed_bps
        if not streams:
            raise RateError(target, "sends nothing")
        mean = sum(self._desc.stream(s).mean_frame_bytes for s in streams) / len(streams)
        try:
            new = parse_rate(rate, mean_bytes=mean, line_rate_bps=speed)
        except ValueError as e:
            raise RateError(target, str(e)) from None
        top = line_rate_fps(speed, mean)
        if new > top * (1 + 1e-9):
            raise RateError(target, f"{new:,.0f} fps is above the line rate ({top:,.0f} fps)")
        old_total = sum(self._rates[s] for s in streams) or 1.0
        for s in streams:
            self._freeze(s)
            old = self._rates[s]
            self._rates[s] = old * new / old_total
            self._emit(
                RateChanged(
                    self._now(),
                    s,
                    self._desc.stream(s).port,
                    old,
                    self._rates[s],
                    str(rate),
                    wall=self.wall(),
                )
            )
        return new

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        self.calls.append(("scale_rates", factor, ports))
        names = self._select(ports)
        for n in names:
            total = sum(self._rates[s] for s in self._ports[n].info.streams)
            if total:
                await self.set_rate(n, total * factor)

    async def pause(self, stream: str) -> None:
        self.calls.append(("pause", stream))
        if stream not in self._paused:
            raise EngineCommandError(stream, "no such stream")
        if not self._paused[stream]:
            self._freeze(stream)
            self._paused[stream] = True
            self._emit(StreamPaused(self._now(), stream, True, wall=self.wall()))

    async def resume(self, stream: str) -> None:
        self.calls.append(("resume", stream))
        if stream not in self._paused:
            raise EngineCommandError(stream, "no such stream")
        if self._paused[stream]:
            self._freeze(stream)
            self._paused[stream] = False
            self._emit(StreamPaused(self._now(), stream, False, wall=self.wall()))

    async def clear(self, ports: list[str] | None = None, streams: list[str] | None = None) -> None:
        self.calls.append(("clear", ports, streams))
        names = [s.name for s in self._desc.streams]
        for s in names:
            self._base[s] = self._sent(s)
        self._full_at = None
        self._emit(CountersCleared(self._now(), tuple(self._ports), tuple(names), wall=self.wall()))

    async def reload(self, compiled: CompiledProfile) -> None:
        self.calls.append(("reload", compiled.name))
        running = [n for n, p in self._ports.items() if p.state == PortState.RUNNING]
        for n in running:
            self._move(n, PortState.STOPPED)
        calls, events = self.calls, self._events
        self.__init__(  # type: ignore[misc]
            compiled,
            clock=self.clock,
            loss=self.loss,
            conntrack_max=self.conntrack_max,
            cores=self._cores,
            wall=self.wall,
        )
        self.calls, self._events = calls, events
        self._emit(EngineNotice(self._now(), f"reloaded profile {compiled.name}", wall=self.wall()))
