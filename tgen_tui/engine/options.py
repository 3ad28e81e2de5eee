"""The engine's input besides the compiled profile: :class:`EngineOptions`, with the typed
parts it carries (what a learning port learns, what a port's gateways resolved to).

It lives apart from the controller (the engine's composition root) so that the rooms
below it (set-up, transports, the fake) import it without importing the controller back.
Plain data: nothing here opens, spawns or awaits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LearnSpec:
    """An RFC 9693 Responder port: it learns the tuples of ``streams``' frames (global
    stream indexes), at most ``max`` of them (a ring), and writes the table to ``path``
    when it stops (:mod:`tgen_tui.worker.learn`)."""

    path: str
    streams: tuple[int, ...]
    max: int

    def to_worker(self) -> dict:
        """The ``learn`` entry of the worker's configure command."""
        return {"path": self.path, "streams": list(self.streams), "max": int(self.max)}


@dataclass(frozen=True)
class Neighbours:
    """A port's own MAC and its gateways' MACs, resolved by ARP/ND before the set-up is
    built (:mod:`tgen_tui.engine.neighbours`); ``asked`` is the (gateway, gateway6) they
    were resolved for, so a reload knows when to resolve again."""

    mac: str | None = None
    gw4: str | None = None
    gw6: str | None = None
    asked: tuple[str | None, str | None] = (None, None)


#: options -> a :class:`~tgen_tui.engine.transport.WorkerTransport` (typed ``Any`` here: the
#: transport module sits above this one, and this module imports nothing of the engine)
TransportFactory = Callable[["EngineOptions"], Any]


@dataclass
class EngineOptions:
    """How to run: cores, sampling interval, drain time, port subset, DUT probe."""

    cores: list[int] | None = None  # default: all but the first core
    interval: float = 0.1  # snapshot period, s (10 Hz)
    drain_ms: int = 500  # keep counting after sending stops
    stop_timeout: float = 5.0  # bounded wait for final counters before kill
    ports: list[str] | None = None  # which ports to use (default: all with streams or rx)
    dut_netns: str | None = None
    dut_ssh: str | None = None
    lock_ports: bool = True  # take an exclusive lock per interface (two tgens never share one)
    cluster: str | None = None  # Ray head address or 'auto': ports with a host run on it
    # RFC 9693 Responder ports: port name -> what its worker learns
    learn: dict[str, LearnSpec] | None = None
    # ports with a gateway, resolved by open_engine before the set-up is built
    neighbours: dict[str, Neighbours] | None = None
    # how workers are reached (None: LocalTransport); --cluster passes the cluster's
    # transport (tgen_tui.cluster.transport.cluster_transport): the engine never imports it
    transport: TransportFactory | None = None
    lanes: int | None = None  # --lanes: sender lanes of every port (None: each port's own)
    # a run of this long (tgen run --duration): the first start tells each worker when it
    # ends, so it sends exactly the frames due until then; a pacer that hands frames to
    # the kernel ahead of time (a TBF's lookahead) or a compiled timer loop holding the
    # worker for a turn then sends none due after the end (None: until stopped)
    send_for_s: float | None = None


__all__ = ["EngineOptions", "LearnSpec", "Neighbours", "TransportFactory"]
