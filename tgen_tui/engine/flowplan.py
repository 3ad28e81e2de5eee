"""Which flow worker runs which socket flows, on which core (DESIGN rule 6).

One flow worker per ``transport:`` entry (a request/response entry's ``parallel`` flows
get a worker each, every one with its share of the load): its ``parallel`` flows share
one process, which
holds both ends of each (the sender's socket in one host namespace, the receiver's in the
other). A flow worker belongs to its entry's sending port: it starts, stops and drains
with it. Flow workers are pinned round-robin onto the allowed cores, after the frame
workers, and sharing a core is said, never done silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from tgen_tui.packets.flowprogram import FlowProgram


@dataclass(frozen=True)
class FlowPlan:
    """One flow worker: its id (after the frame workers'), core, port and flows."""

    id: int
    core: int
    port: str  # the sending port its flows start and stop with
    flows: tuple[int, ...]  # positions in Setup.flows
    names: tuple[str, ...]  # the flows' names, for the plan text and the console
    kind: str = "flows"

    @property
    def ports(self) -> tuple[str, ...]:
        """The ports it serves (as a frame worker's plan says): its one port."""
        return (self.port,)


def plan_flow_workers(
    flows: tuple[FlowProgram, ...], cores: list[int], first_id: int
) -> list[FlowPlan]:
    """One plan per transport entry, in profile order; core round-robin from where the
    ``first_id`` frame workers left off."""
    entries: dict[str, list[int]] = {}
    for i, f in enumerate(flows):  # an app flow's parallel flows: a worker each
        entries.setdefault(f.stream if f.app is None else f.name, []).append(i)
    plans = []
    for k, pos in enumerate(entries.values()):
        wid = first_id + k
        plans.append(
            FlowPlan(
                id=wid,
                core=cores[wid % len(cores)],
                port=flows[pos[0]].port,
                flows=tuple(pos),
                names=tuple(flows[i].name for i in pos),
            )
        )
    return plans


def flow_plan_lines(plans: list[FlowPlan] | tuple[FlowPlan, ...], flows) -> list[str]:
    """``worker 2: core 1: port p0: flows bulk.1 (tcp/cubic), bulk.2 (tcp/cubic)``."""
    out = []
    for p in plans:
        what = ", ".join(_flow_text(flows[i]) for i in p.flows)
        out.append(f"worker {p.id}: core {p.core}: port {p.port}: flows {what}")
    return out


LOAD_UNITS = {"cps": "conn/s", "concurrent": "connections open", "tps": "transactions/s"}


def _flow_text(f: FlowProgram) -> str:
    """``bulk.1 (tcp/cubic)``; an app flow: ``web (http over tcp, 2,000 conn/s from 1,000
    clients)``."""
    if f.app is None:
        return f"{f.name} ({f.protocol}{'/' + f.cc if f.cc else ''})"
    a = f.app
    ramp = f", ramp {a.ramp_s:g} s" if a.ramp_s > 0 else ""
    return (
        f"{f.name} ({a.kind} over {f.protocol}, {a.target:,.0f} {LOAD_UNITS[a.mode]}{ramp} "
        f"from {a.clients_count:,} client(s) {a.clients_first}.. to {f.dst_ip}:{f.dst_port})"
    )


def shared_core_warning(frame_cores: list[int], plans: list[FlowPlan], n_cores: int) -> list[str]:
    """A warning when frame and flow workers outnumber the allowed cores."""
    total = len(frame_cores) + len(plans)
    if total <= n_cores or not plans:
        return []
    return [
        f"{len(plans)} flow worker(s) share {n_cores} core(s) with {len(frame_cores)} frame "
        "worker(s): socket flows and frame streams take turns on a core, so each gets less "
        "than a core's worth; allow more cores with --cores"
    ]


__all__ = ["FlowPlan", "flow_plan_lines", "plan_flow_workers", "shared_core_warning"]
