"""Port control's socket-flow part: which flow workers a port command reaches, when a
port with flows is done sending, and live UDP rate changes.

A flow worker belongs to one port (its transport entry's sending side): ``start`` and
``stop`` of that port go to it as to the port's frame workers (one command each, the
same ``t0``), and the port is running or stopped once every one of them acknowledged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tgen_tui.engine.api import EngineCommandError, FlowRateChanged, PortState
from tgen_tui.engine.events import EventLog
from tgen_tui.engine.lanes import port_workers
from tgen_tui.engine.setup import Setup
from tgen_tui.engine.workers import CommandRefused, WorkerDied
from tgen_tui.worker import protocol as P


def flow_workers(setup: Setup, port: str) -> list[int]:
    """Ids of the flow workers of ``port`` (its transport entries' workers)."""
    return [p.id for p in setup.flow_plans if p.port == port]


def senders(setup: Setup, port: str) -> list[int]:
    """The workers whose ``tx_done`` a port waits for: its frame workers when it sends
    frame streams, and its flow workers."""
    frames = port_workers(setup.plans, port) if setup.ports[port].streams else []
    return frames + flow_workers(setup, port)


async def apply_flow_rates(
    setup: Setup,
    rates: dict[int, float],
    new: Mapping[int, float],
    *,
    states: Mapping[str, PortState],
    workers: Mapping[int, Any],
    log: EventLog,
    request: str,
    ack_timeout: float,
) -> None:
    """Send each changed UDP flow rate to its flow worker (acknowledged), then keep it in
    ``rates`` and log it; a failed port's flows only keep the rate."""
    for i, bps in new.items():
        old = rates.get(i, 0.0)
        if abs(bps - old) <= 1e-9 * max(bps, old):
            continue
        f = setup.flows[i]
        if states[f.port] != PortState.FAILED:
            try:
                await workers[setup.flow_plan_of(i).id].request(
                    P.SetFlowRate(flow=f.id, bps=float(bps)), ack_timeout
                )
            except (WorkerDied, CommandRefused) as e:
                raise EngineCommandError(f.name, f"rate change refused: {e}") from None
        rates[i] = float(bps)
        log.emit(FlowRateChanged(log.now(), f.name, f.port, old, float(bps), request))


__all__ = ["apply_flow_rates", "flow_workers", "senders"]
