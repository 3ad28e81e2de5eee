"""The per-port parts of the engine's set-up: each port's :class:`PortSetup` (its worker,
core, MACs and gateways), the L3 entries of the workers' configuration, warnings about
tester hosts, a stream's distinct flows, and rates as written in profiles.

Pure, like :mod:`tgen_tui.engine.setup`: nothing here opens, spawns or awaits (but the
interface's own MAC is read once per port).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tgen_tui.engine.api import RateError
from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.neighbours import interface_mac
from tgen_tui.engine.options import Neighbours
from tgen_tui.engine.stats import PortSetup
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.flowprogram import FlowProgram
from tgen_tui.packets.program import StreamProgram

FLOW_FIELDS = (
    "ip.src",
    "ip.dst",
    "l4.src_port",
    "l4.dst_port",
    "icmp.id",
)  # packets/compile.py names


def distinct_flows(p: StreamProgram) -> int:
    """Distinct flows of a stream, as its field program emits them: the inc/dec address
    and port fields (period span / gcd(step, span)) and the unique group repeat together
    after the least common multiple of their periods; a random field multiplies by its
    span (the model's Stream.distinct_flows, from the program)."""
    period, unique, drawn = 1, 1, 1
    for f in p.fields:
        if f.name not in FLOW_FIELDS or f.mode == "fixed" or f.span <= 1:
            continue
        if f.mode == "unique":
            unique *= f.span
        elif f.mode in ("inc", "dec"):
            period = math.lcm(period, f.span // math.gcd(f.step % f.span, f.span))
        else:  # random, or a learned table's column
            drawn *= f.span
    return math.lcm(period, unique) * drawn


def resolve_rate(rate: str | float, mean_bytes: float, speed: float, target: str) -> float:
    """A rate as written in profiles (``25kpps``, ``100Mbit``, ``10%``) or a number of
    frames/s, in frames/s at ``mean_bytes`` on a port of ``speed`` bit/s; RateError."""
    from tgen_tui.profiles.models import parse_rate, rate_to_pps

    if isinstance(rate, int | float) and not isinstance(rate, bool):
        if not (rate > 0 and math.isfinite(rate)):
            raise RateError(target, "rate must be a positive number of frames/s")
        return float(rate)
    try:
        spec = parse_rate(rate)
    except ValueError as e:
        raise RateError(target, str(e)) from None
    return rate_to_pps(spec, mean_bytes, speed)


def port_setups(
    compiled: CompiledProfile,
    plans: list[WorkerPlan],
    programs: tuple[StreamProgram, ...],
    lanes: dict[str, int],
    neigh: Mapping[str, Neighbours],
    cluster: str | None,
    flows: tuple[FlowProgram, ...] = (),
) -> dict[str, PortSetup]:
    """Each port's PortSetup (its lane 0's worker and core; MACs, gateways)."""
    ports: dict[str, PortSetup] = {}
    for plan in plans:
        for pn in plan.ports:
            if pn in ports:  # another lane of a port already set up (its lane 0)
                continue
            spec = compiled.ports[pn]
            found = neigh.get(pn) or Neighbours()
            ports[pn] = PortSetup(
                pn,
                spec.interface,
                spec.netns,
                plan.id,
                plan.core,
                speed_bps=spec.speed_bps,
                streams=tuple(i for i, s in enumerate(programs) if s.port == pn),
                flows=tuple(i for i, f in enumerate(flows) if f.port == pn),
                host=getattr(spec, "host", None) if cluster else None,
                tx_path=getattr(spec, "tx_path", None),
                pacing=getattr(spec, "pacing", None),
                gateway_mac=found.gw4,
                gateway6_mac=found.gw6,
                lanes=lanes[pn],
                mac=found.mac or (None if cluster else interface_mac(spec.netns, spec.interface)),
                gateway=str(spec.gateway) if getattr(spec, "gateway", None) else None,
                gateway6=str(spec.gateway6) if getattr(spec, "gateway6", None) else None,
            )
    return ports


def host_warnings(compiled: CompiledProfile, used: list[str], cluster: str | None) -> list[str]:
    named = sorted({h for pn in used if (h := getattr(compiled.ports[pn], "host", None))})
    if named and not cluster:
        return [
            f"the profile places ports on host(s) {', '.join(named)}, but --cluster was "
            "not given: every port runs on this machine"
        ]
    if cluster and not named:
        return [f"--cluster {cluster}: no port names a host: every port runs on this machine"]
    return []


def l3_entries(compiled: CompiledProfile, used: list[str], neigh: Mapping) -> dict[str, dict]:
    from tgen_tui.engine.neighbours import l3_entry

    out = {}
    for pn in used:
        e = l3_entry(compiled.ports[pn], neigh.get(pn))
        if e is not None:
            out[pn] = e
    return out


__all__ = [
    "FLOW_FIELDS",
    "distinct_flows",
    "host_warnings",
    "l3_entries",
    "port_setups",
    "resolve_rate",
]
