"""The engine's public, front-end-facing types: port states, typed events, the frozen
description, typed command errors, and the contract: :class:`EngineAPI` (commands) and
:class:`EngineFeed` (snapshots, events, the final snapshot, the report).

Front ends (the console, ``tgen run``, the methodology runner) depend on these and on
:mod:`tgen_tui.engine.snapshot`, never on the controller's mutable state. The console's
fake engine implements the contract too, so most UI tests run without root.
Nothing here imports trio or Textual.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tgen_tui.diagnostics import BadInput

if TYPE_CHECKING:
    from tgen_tui.engine.capture import CaptureSpec, CaptureView
    from tgen_tui.engine.snapshot import StatsSnapshot
    from tgen_tui.packets.compile import CompiledProfile
    from tgen_tui.results.models import RunResult


class PortState(StrEnum):
    """Where a port is in its life (DESIGN rule 5)."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


# allowed transitions; anything else is a bug in the controller
TRANSITIONS: dict[PortState, frozenset[PortState]] = {
    PortState.IDLE: frozenset({PortState.STARTING, PortState.FAILED}),
    PortState.STARTING: frozenset({PortState.RUNNING, PortState.STOPPED, PortState.FAILED}),
    PortState.RUNNING: frozenset({PortState.STOPPING, PortState.FAILED}),
    PortState.STOPPING: frozenset({PortState.STOPPED, PortState.FAILED}),
    PortState.STOPPED: frozenset({PortState.STARTING, PortState.FAILED}),
    PortState.FAILED: frozenset(),
}


class EngineCommandError(BadInput):
    """A command the engine refused: names the port (or stream) and the reason."""

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(f"{target}: {reason}")
        self.target = target
        self.reason = reason


class RateError(EngineCommandError):
    """A rate that cannot be applied (unparseable, zero, or above the port's line rate)."""


# ---------------------------------------------------------------------- events
@dataclass(frozen=True)
class EngineEvent:
    """Base of every typed event. ``t`` is seconds since the engine opened (monotonic)."""

    t: float
    wall: float = field(default_factory=time.time, kw_only=True)

    @property
    def kind(self) -> str:
        return _KIND[type(self)]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"event": self.kind, **d}

    def text(self) -> str:  # pragma: no cover - overridden
        return self.kind


@dataclass(frozen=True)
class PortStateChanged(EngineEvent):
    port: str
    old: str
    new: str
    reason: str | None = None

    def text(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"port {self.port}: {self.old} -> {self.new}{why}"


@dataclass(frozen=True)
class WorkerFailed(EngineEvent):
    worker: int
    core: int
    ports: tuple[str, ...]
    reason: str

    def text(self) -> str:
        return f"worker {self.worker} (core {self.core}, ports {', '.join(self.ports)}) failed: {self.reason}"


@dataclass(frozen=True)
class ThresholdBreached(EngineEvent):
    threshold: str
    where: str
    value: float

    def text(self) -> str:
        return f"threshold {self.threshold} breached: {self.where} = {self.value:.6g}"


@dataclass(frozen=True)
class RateChanged(EngineEvent):
    stream: str
    port: str
    old_pps: float
    new_pps: float
    request: str = ""  # what the user typed, e.g. "10%" or "25kpps"

    def text(self) -> str:
        req = f" ({self.request})" if self.request else ""
        return f"stream {self.stream} on {self.port}: rate {self.old_pps:,.0f} -> {self.new_pps:,.0f} fps{req}"


@dataclass(frozen=True)
class FlowRateChanged(EngineEvent):
    """A UDP socket flow's payload rate changed (bit/s)."""

    flow: str
    port: str
    old_bps: float
    new_bps: float
    request: str = ""

    def text(self) -> str:
        req = f" ({self.request})" if self.request else ""
        return f"flow {self.flow} on {self.port}: rate {self.old_bps:,.0f} -> {self.new_bps:,.0f} bit/s{req}"


@dataclass(frozen=True)
class StreamPaused(EngineEvent):
    stream: str
    paused: bool

    def text(self) -> str:
        return f"stream {self.stream} {'paused' if self.paused else 'resumed'}"


@dataclass(frozen=True)
class CountersCleared(EngineEvent):
    ports: tuple[str, ...]
    streams: tuple[str, ...]

    def text(self) -> str:
        return f"counters cleared: ports {', '.join(self.ports) or '-'}; streams {', '.join(self.streams) or '-'}"


@dataclass(frozen=True)
class EngineNotice(EngineEvent):
    """Information: a command that did nothing and why, a reload, a worker start."""

    message: str

    def text(self) -> str:
        return self.message


@dataclass(frozen=True)
class LinkChanged(EngineEvent):
    """A port's link changed (engine/linkwatch.py): ``old``/``new`` are "up", "no
    carrier" (the interface is up, its link partner is not), "down" (the interface is
    set down), "missing" or "unknown"; ``old`` None: the first reading, at open.
    ``away_s``: on coming back up, how long the link was not up."""

    port: str
    old: str | None
    new: str
    away_s: float | None = None
    # up at two readings with the carrier's down count risen by this many: lost and back
    # in between (``away_s``: within how long)
    flaps: int = 0

    def text(self) -> str:
        from tgen_tui.engine.linktext import link_text

        return link_text(self.port, self.old, self.new, self.away_s, self.flaps)


@dataclass(frozen=True)
class EngineWarning(EngineEvent):
    message: str

    def text(self) -> str:
        return f"warning: {self.message}"


_KIND: dict[type, str] = {
    PortStateChanged: "port_state",
    WorkerFailed: "worker_failed",
    ThresholdBreached: "threshold",
    RateChanged: "rate",
    FlowRateChanged: "flow_rate",
    StreamPaused: "pause",
    CountersCleared: "cleared",
    EngineNotice: "notice",
    EngineWarning: "warning",
    LinkChanged: "link",
}


# ---------------------------------------------------------------------- description
@dataclass(frozen=True)
class StreamInfo:
    name: str
    index: int
    port: str
    rx_port: str | None
    pps: float  # requested frames/s now
    mean_frame_bytes: float  # incl. FCS
    flows: int  # distinct flows (product of the varying fields' spans)
    paused: bool = False


@dataclass(frozen=True)
class PortInfo:
    name: str
    interface: str
    netns: str | None
    speed_bps: float
    worker: int
    core: int
    streams: tuple[str, ...]
    line_rate_fps: float  # at the port's streams' mean frame size (64 B if it sends nothing)


@dataclass(frozen=True)
class FlowInfo:
    """A socket flow as configured (kernel TCP or UDP between the transport hosts)."""

    name: str
    stream: str  # its transport: entry
    port: str
    rx_port: str
    protocol: str
    cc: str | None
    rate_bps: float | None  # UDP payload bit/s now (None: TCP)
    worker: int
    core: int
    src: str  # "198.18.100.2 (netns tgen-h0)"
    dst: str
    app: str | None = None  # a request/response flow's kind (http, dns, request-response)


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    core: int
    ports: tuple[str, ...]
    streams: tuple[str, ...]
    pid: int | None = None
    tx_path: str | None = None
    lane: int = 0  # which of its port's sender lanes (tgen_tui.engine.lanes)
    lanes: int = 1
    kind: str = "frames"  # frames | flows (a flow worker: ``streams`` are its flows)


@dataclass(frozen=True)
class EngineDescription:
    """What a front end may know about the running set-up, frozen."""

    profile: str
    profile_hash: str
    seed: int
    ports: tuple[PortInfo, ...]
    streams: tuple[StreamInfo, ...]
    workers: tuple[WorkerInfo, ...]
    dut_source: str = "none"
    warnings: tuple[str, ...] = ()
    flows: tuple[FlowInfo, ...] = ()

    def port(self, name: str) -> PortInfo:
        return next(p for p in self.ports if p.name == name)

    def flow(self, name: str) -> FlowInfo:
        return next(f for f in self.flows if f.name == name)

    def port_flows(self, port: str) -> tuple[FlowInfo, ...]:
        """The socket flows sent from ``port``."""
        return tuple(f for f in self.flows if f.port == port)

    def stream(self, name: str) -> StreamInfo:
        return next(s for s in self.streams if s.name == name)


# ---------------------------------------------------------------------- the contract
@runtime_checkable
class EngineAPI(Protocol):
    """The commands a front end may give. The real
    :class:`~tgen_tui.engine.controller.Engine` satisfies it; so does the console's fake
    engine. Commands are coroutines; in the console they run inside the engine's trio
    guest run (see ``tgen_tui.ui.host``). ``latest_snapshot`` and ``events_since`` (the
    console's pull side of :class:`EngineFeed`) are here too, so a front end typed on
    EngineAPI can draw."""

    def describe(self) -> EngineDescription: ...

    def latest_snapshot(self) -> StatsSnapshot | None:
        """The newest snapshot (latest-only subscription: front ends draw at their pace)."""
        ...

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        """Events after ``cursor`` (start with 0) and the new cursor: a pull-based log."""
        ...

    async def start(self, ports: list[str] | None = None) -> None: ...

    async def stop(self, ports: list[str] | None = None) -> None: ...

    async def set_rate(self, target: str, rate: str | float) -> float:
        """Set a stream's or a port's rate (``25kpps``, ``100Mbit``, ``10%``, or fps);
        returns the new total frames/s of the target. Raises RateError."""
        ...

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None: ...

    async def pause(self, stream: str) -> None: ...

    async def resume(self, stream: str) -> None: ...

    async def clear(
        self, ports: list[str] | None = None, streams: list[str] | None = None
    ) -> None: ...

    async def reload(self, compiled: CompiledProfile) -> None: ...

    # captures (engine/capture.py): start (BadInput for a bad spec), stop, views; and a
    # stream's frame for a seq, rebuilt (None when it cannot be)
    async def start_capture(self, spec: CaptureSpec) -> CaptureView: ...

    async def stop_capture(
        self, cid: int, reason: str = "stopped", comment: str | None = None
    ) -> CaptureView: ...

    def capture_views(self) -> list[CaptureView]: ...

    def sent_frame(self, stream: str, seq: int, lane: int = 0) -> bytes | None: ...


@runtime_checkable
class EngineFeed(Protocol):
    """What a front end may read: snapshots, events, the final snapshot and the report.
    ``tgen run``, methodology and the console read nothing else of an engine."""

    def latest_snapshot(self) -> StatsSnapshot | None: ...

    def snapshots(self, buffer: int = 1000) -> Any:
        """A trio receive channel of every snapshot from now on (close it to unsubscribe)."""
        ...

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]: ...

    def subscribe_events(self, buffer: int = 1000) -> Any:
        """A trio receive channel of typed events from now on."""
        ...

    def event_log(self) -> list[EngineEvent]: ...

    @property
    def events(self) -> list[str]:
        """The event log as text lines with times (for result files and logs)."""
        ...

    async def sample_now(self) -> StatsSnapshot:
        """Sample the counters now and publish the snapshot."""
        ...

    async def final_snapshot(self) -> StatsSnapshot:
        """Sample now and publish it as the final snapshot."""
        ...

    def port_states(self) -> dict[str, str]: ...

    def ports_done_sending(self) -> bool:
        """Every sending port's worker reported that its streams reached count or stop."""
        ...

    def finite_total(self) -> int | None:
        """Frames all streams will send in total (None: some run until stopped)."""
        ...

    def plan_text(self) -> list[str]:
        """The worker → core → port → streams mapping, one line each, then the warnings."""
        ...

    def learned(self) -> dict[str, dict]:
        """Port -> the tuples its worker learned (``EngineOptions.learn``)."""
        ...

    def report(
        self,
        final: StatsSnapshot,
        *,
        duration_s: float,
        partial: bool,
        profile_path: str,
        thresholds: list[str] | None = None,
    ) -> RunResult:
        """The run's result (``tgen run --json`` is its ``to_doc()``) from its final snapshot."""
        ...


__all__ = [
    "TRANSITIONS",
    "CountersCleared",
    "EngineAPI",
    "EngineCommandError",
    "EngineDescription",
    "EngineFeed",
    "EngineEvent",
    "EngineNotice",
    "EngineWarning",
    "FlowInfo",
    "FlowRateChanged",
    "LinkChanged",
    "PortInfo",
    "PortState",
    "PortStateChanged",
    "RateChanged",
    "RateError",
    "StreamInfo",
    "StreamPaused",
    "ThresholdBreached",
    "WorkerFailed",
    "WorkerInfo",
]
