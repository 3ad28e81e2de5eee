"""What a rate command asks for, as new per-stream rates: pure, shared by every engine.

``set_rate`` and ``scale_rates`` resolve their argument here, on a :class:`Setup` and the
current rates, before anything is sent to a worker: the rate syntax of the profiles
(:func:`~tgen_tui.engine.setup.resolve_rate`: ``25kpps``, ``100Mbit`` L1 or ``L2``,
``10%``, a number of frames/s), a port's streams scaled in proportion, and the line-rate
check. The real engine's port control and the console's fake engine both call these, so
a rate means the same frames/s on both (tests/engine/test_contract.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tgen_tui.engine.api import RateError
from tgen_tui.engine.setup import Setup, resolve_rate


def plan_rate(
    setup: Setup, rates: Mapping[int, float], target: str, rate: str | float
) -> tuple[dict[int, float], float]:
    """(the new rate of every stream position, the target's new frames/s) for ``set_rate``
    of a stream (by name) or of a port (its streams scaled in proportion so that they sum
    to the rate). RateError for a bad rate or one above the line rate;
    EngineCommandError for an unknown target."""
    new = dict(rates)
    if target in setup.ports:
        ps = setup.ports[target]
        if not ps.streams:
            raise RateError(target, "the port sends no stream")
        _, mean = setup.port_line_fps(target, rates)
        total = resolve_rate(rate, mean, ps.speed_bps, target)
        have = sum(rates[i] for i in ps.streams) or 1.0
        for i in ps.streams:
            new[i] = rates[i] * total / have
        port, result = target, total
    else:
        i = setup.stream_pos(target)
        port = setup.programs[i].port
        new[i] = resolve_rate(rate, setup.mean_bytes(i), setup.ports[port].speed_bps, target)
        result = new[i]
    setup.check_line_rate(port, new, target)
    return new, result


def plan_scale(
    setup: Setup, rates: Mapping[int, float], factor: float, ports: list[str] | None
) -> dict[int, float]:
    """The new rate of every stream position for ``scale_rates(factor, ports)``."""
    if not (factor > 0 and math.isfinite(factor)):
        raise RateError("scale", "the factor must be a positive number")
    new = dict(rates)
    for n in setup.select(ports):
        for i in setup.ports[n].streams:
            new[i] = rates[i] * factor
        setup.check_line_rate(n, new, n)
    return new


def changed(old: Mapping[int, float], new: Mapping[int, float]) -> list[int]:
    """Stream positions whose rate differs (beyond float noise), in order."""
    return [i for i, r in new.items() if abs(r - old[i]) > 1e-9 * max(r, old[i])]


__all__ = ["changed", "plan_rate", "plan_scale"]
