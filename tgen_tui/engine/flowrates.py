"""What a rate command asks of the socket flows: new UDP payload rates, pure.

``set_rate(target, rate)`` names a stream, a port or a socket flow. A UDP flow takes a
bit rate as the profiles write it (``2M``, ``500 kbit/s``, a number of bit/s) or a share
of its port's speed (``10%``). A port that sends no frame stream but UDP flows scales
those in proportion so that they sum to the rate (as a port scales its frame streams).
A TCP flow has no rate to set: it sends as fast as its congestion control allows. The
real engine's port control and the console's fake share these.
"""

from __future__ import annotations

from collections.abc import Mapping

from tgen_tui.engine.api import RateError
from tgen_tui.engine.setup import Setup
from tgen_tui.profiles.units import parse_bitrate


def flow_target(setup: Setup, target: str) -> bool:
    """True when ``set_rate(target, ...)`` is for socket flows: a flow's name, or a port
    whose only sending is UDP flows."""
    if setup.flow_pos(target) is not None:
        return True
    ps = setup.ports.get(target)
    return ps is not None and not ps.streams and bool(ps.flows)


def resolve_bps(rate: str | float, speed_bps: float, target: str) -> float:
    """A UDP rate in bit/s: ``2M``, ``500 kbit/s``, ``10%`` (of ``speed_bps``) or a
    number of bit/s; RateError otherwise."""
    text = str(rate).strip()
    try:
        if text.endswith("%"):
            pct = float(text[:-1])
            if not 0 < pct <= 100:
                raise ValueError("a share of the port's speed is 0-100 %")
            return speed_bps * pct / 100.0
        return parse_bitrate(rate)
    except ValueError as e:
        raise RateError(
            target, f"{e} (a UDP flow's rate is a bit rate: 2M, 500kbit, 10%)"
        ) from None


def plan_flow_rate(
    setup: Setup, rates: Mapping[int, float], target: str, rate: str | float
) -> tuple[dict[int, float], float]:
    """(every UDP flow's new bit/s by flow position, the target's new bit/s)."""
    new = dict(rates)
    pos = setup.flow_pos(target)
    if pos is not None:
        f = setup.flows[pos]
        if f.app is not None:
            raise RateError(target, "a request/response flow's load: sets its pace")
        if f.protocol != "udp":
            raise RateError(target, "a TCP flow sends as fast as its congestion control allows")
        new[pos] = resolve_bps(rate, setup.ports[f.port].speed_bps, target)
        return new, new[pos]
    ps = setup.ports[target]
    udp = [i for i in ps.flows if setup.flows[i].protocol == "udp" and setup.flows[i].app is None]
    if not udp:
        raise RateError(target, "the port sends no frame stream and no UDP flow")
    total = resolve_bps(rate, ps.speed_bps, target)
    have = sum(rates[i] for i in udp) or 1.0
    for i in udp:
        new[i] = rates[i] * total / have
    return new, total


def initial_flow_rates(setup: Setup) -> dict[int, float]:
    """Every UDP flow's payload bit/s as the profile asks."""
    return {
        i: float(f.rate_bps or 0.0)
        for i, f in enumerate(setup.flows)
        if f.protocol == "udp" and f.app is None
    }


__all__ = ["flow_target", "initial_flow_rates", "plan_flow_rate", "resolve_bps"]
