"""What the rate keys (``+``, ``-``, ``r``) act on, and the 1-2-5 steps they take.

- On the Flows screen: the highlighted socket flow. A UDP flow takes a bit rate; a TCP
  flow has none to set (it sends as fast as its congestion control allows): the keys
  say so and send nothing.
- Elsewhere: the selected port. A port with frame streams steps their frames/s; a port
  that sends no frame stream but UDP flows steps its flows' bit/s (the engine scales
  them in proportion: engine/flowrates.py); a port with neither has no rate.

The current rate comes from the newest snapshot (the description's until then); the
engine resolves and applies what is asked, and refuses what it cannot do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot

STEPS = (1.0, 2.0, 5.0)
TCP_REFUSAL = (
    "is a TCP flow: it sends as fast as its congestion control allows "
    "(r, + and - set a UDP flow's rate)"
)
APP_REFUSAL = "is a request/response flow: its profile's load: sets its pace"
FRAME_HINT = "50kpps, 200Mbit, 10%, or fps"
BIT_HINT = "a bit rate: 2M, 500kbit, 10% (of the port's speed)"


def rate_step(value: float, direction: int) -> float:
    """The next rate on the 1-2-5 series above (direction 1) or below (-1) ``value``
    (frames/s or bit/s alike)."""
    if value <= 0:
        return 1000.0 if direction > 0 else 0.0
    e = math.floor(math.log10(value))
    grid = sorted({m * 10.0**k for k in (e - 1, e, e + 1) for m in STEPS})
    if direction > 0:
        return next(g for g in grid if g > value * (1 + 1e-9))
    below = [g for g in grid if g < value * (1 - 1e-9)]
    return below[-1] if below else value / 2


@dataclass(frozen=True)
class RateTarget:
    """What a rate key changes: the engine's target name, its rate now and its unit."""

    name: str  # a port, stream or flow name, as set_rate takes it
    label: str  # "p0", "p1's UDP flows", "flow background"
    current: float
    bits: bool  # bit/s (socket flows) rather than frames/s

    def shown(self) -> str:
        return fmt.bps(self.current) if self.bits else fmt.pps(self.current)

    @property
    def hint(self) -> str:
        return BIT_HINT if self.bits else FRAME_HINT


class Refused(Exception):
    """The rate keys do not apply to what is selected (the message says why)."""


def flow_target(desc: EngineDescription, snap: StatsSnapshot | None, name: str) -> RateTarget:
    """A flow's rate target; Refused for a TCP flow."""
    info = desc.flow(name)
    if info.app is not None:
        raise Refused(f"{name} {APP_REFUSAL}")
    if info.protocol != "udp":
        raise Refused(f"{name} {TCP_REFUSAL}")
    now = _live_bps(snap, name)
    return RateTarget(name, f"flow {name}", now if now is not None else info.rate_bps or 0.0, True)


def port_target(desc: EngineDescription, snap: StatsSnapshot | None, port: str) -> RateTarget:
    """A port's rate target: its frame streams (frames/s) or else its UDP flows (bit/s);
    Refused for a port with neither."""
    info = desc.port(port)
    if info.streams:
        return RateTarget(port, port, port_pps(desc, snap, port), False)
    udp = [f for f in desc.port_flows(port) if f.protocol == "udp" and f.app is None]
    if not udp:
        raise Refused(f"port {port} sends no frame stream and no UDP flow: it has no rate")
    total = 0.0
    for f in udp:
        now = _live_bps(snap, f.name)
        total += now if now is not None else f.rate_bps or 0.0
    return RateTarget(port, f"{port}'s UDP flows", total, True)


def port_has_rate(desc: EngineDescription, port: str) -> bool:
    """True when the rate keys apply to ``port`` (frame streams or UDP flows)."""
    info = desc.port(port)
    return bool(info.streams) or any(f.protocol == "udp" for f in desc.port_flows(port))


def port_pps(desc: EngineDescription, snap: StatsSnapshot | None, port: str) -> float:
    """A port's requested frames/s now."""
    if snap is not None:
        try:
            return snap.port(port).requested_pps
        except StopIteration:
            pass
    return sum(s.pps for s in desc.streams if s.port == port)


def _live_bps(snap: StatsSnapshot | None, flow: str) -> float | None:
    if snap is None:
        return None
    f = next((x for x in snap.flows if x.name == flow), None)
    return f.requested_bps if f is not None else None


__all__ = [
    "BIT_HINT",
    "FRAME_HINT",
    "RateTarget",
    "Refused",
    "TCP_REFUSAL",
    "flow_target",
    "port_has_rate",
    "port_pps",
    "port_target",
    "rate_step",
]
