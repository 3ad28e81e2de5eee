"""The sampler's inputs, frozen: what is configured (:class:`SampleContext`: ports,
streams, socket flows, workers), the engine's state at the sampling instant
(:class:`LiveState`) and the probe readings (:class:`Readings`). Plain data, so the
accumulator (:mod:`tgen_tui.engine.stats`) is tested on its own and the console's fake
feeds it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tgen_tui.engine.flowsample import FlowCtx


@dataclass(frozen=True)
class PortSetup:
    """A port as configured: where it is, which worker and core serve it, what it sends."""

    name: str
    interface: str
    netns: str | None
    worker: int
    core: int
    speed_bps: float = 0.0
    streams: tuple[int, ...] = ()  # program positions sent from this port
    flows: tuple[int, ...] = ()  # socket flow positions (Setup.flows) sent from this port
    host: str | None = None  # tester host under --cluster (None: this machine)
    tx_path: str | None = None  # the profile's send path ('auto' or None: resolved at spawn)
    gateway_mac: str | None = None  # the resolved MAC of the port's gateway (issue 19)
    gateway6_mac: str | None = None
    lanes: int = 1  # sender workers sharing the port (tgen_tui.engine.lanes)
    mac: str | None = None  # the interface's own MAC (None: not read, e.g. a remote host)
    gateway: str | None = None  # the profile's gateway addresses, as text
    gateway6: str | None = None
    pacing: str | None = None  # the profile's pacing ('auto' or None: resolved at spawn)


def ifc_key(host: str | None, netns: str | None) -> Any:
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
    role: str = ""  # stateful: flowstats.ROLE_LEARN | ROLE_VERIFY | ""
    schedule: Any = None  # its program's Schedule (the spacing figure's law), None: unknown


@dataclass(frozen=True)
class WorkerCtx:
    """A worker as configured: its core, its ports and streams, its counter file."""

    id: int
    core: int
    ports: tuple[str, ...]
    streams: tuple[str, ...]
    shm_path: str
    tx_rows: tuple[tuple[int, int], ...]  # (stream position, row in the worker's tx table)
    lane: int = 0  # which of its port's sender lanes (tgen_tui.engine.lanes)
    lanes: int = 1


@dataclass(frozen=True)
class SampleContext:
    """Everything fixed between reloads."""

    ports: tuple[PortSetup, ...]
    streams: tuple[StreamCtx, ...]
    n_streams: int
    warnings: tuple[str, ...] = ()
    dut_source: str = "none"
    lanes: int = 1  # rx rows per stream (stream index + lane * n_streams/lanes)
    flows: tuple[FlowCtx, ...] = ()  # socket flows

    @property
    def block(self) -> int:
        """The stride between a stream's rx rows of successive lanes."""
        return self.n_streams // max(1, self.lanes)


@dataclass(frozen=True)
class WorkerLive:
    pid: int | None
    alive: bool
    exit_reason: str | None = None
    tx_path: str | None = None
    tx_path_why: str | None = None
    pacing: str | None = None  # qdisc | timer | burst (each port's, joined)
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
    link_lost: frozenset[str] = frozenset()  # ports whose link was not up at some time


@dataclass(frozen=True)
class Readings:
    """Probe readings of one sample: interface counters per netns, per-core CPU, the DUT."""

    ifc: dict
    cores: list[float]
    dut: Any = None  # probes.DutReading
    dut_settings: tuple[tuple[str, str], ...] = ()


def with_asked_rates(live: LiveState, streams: Any, tx: dict[int, Any], req_col: int) -> LiveState:
    """The live state with each shaped stream's requested rate replaced by its shape's rate
    now (the workers' requested-rate column, ``req_col``, in mpps), and each multi-burst
    stream's by its mean rate, so "requested" and the achieved rate are what the stream
    sends on average; the engine's own rates (a shape's peak, a burst's rate, which the
    rate keys scale) are left as they are."""
    new = {}
    for i, sc in enumerate(streams):
        sched = getattr(sc, "schedule", None)
        if i in live.paused or sched is None:
            continue
        if getattr(sched, "shape", ()):
            tv = tx.get(i)
            if tv is not None:
                new[i] = int(tv[req_col]) / 1000.0
        elif getattr(sched, "burst", 0) and live.rates.get(i, 0.0) > 0:
            # multi-burst: the mean over bursts and pauses, not the rate inside a burst
            # (at line rate that would be the port's whole speed)
            pps = live.rates[i]
            new[i] = sched.burst / (sched.burst / pps + sched.burst_gap_s)
    return replace(live, rates={**live.rates, **new}) if new else live


__all__ = [
    "with_asked_rates",
    "LiveState",
    "PortSetup",
    "Readings",
    "SampleContext",
    "StreamCtx",
    "WorkerCtx",
    "WorkerLive",
    "ifc_key",
]
