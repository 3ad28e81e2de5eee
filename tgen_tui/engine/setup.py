"""The engine's set-up: what a compiled profile and the options say, frozen and pure.

A :class:`Setup` is built once per profile (and again by ``reload``): the ports in use,
their programs, the worker plans (:mod:`tgen_tui.engine.assignment`), the line rates,
the sample context of the sampler and the frozen description front ends see. Nothing
here opens a file, spawns a process or awaits: the transport, port control and sampler
take a Setup and do the work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tgen_tui.diagnostics import BadInput
from tgen_tui.dut.channel import pick_dut
from tgen_tui.engine import stats
from tgen_tui.engine.api import (
    EngineCommandError,
    EngineDescription,
    FlowInfo,
    PortInfo,
    RateError,
    StreamInfo,
    WorkerInfo,
)
from tgen_tui.engine.assignment import WorkerPlan, default_cores, plan_workers, spare_cores
from tgen_tui.engine.flowplan import (
    FlowPlan,
    flow_plan_lines,
    plan_flow_workers,
    shared_core_warning,
)
from tgen_tui.engine.flowsample import FlowCtx
from tgen_tui.engine.flowstats import stream_roles
from tgen_tui.engine.lanes import (
    assignment_lines,
    block_ports,
    live_learn_ports,
    one_lane_warning,
    plan_lanes,
    port_lanes,
)
from tgen_tui.engine.portsetup import (
    distinct_flows,
    host_warnings,
    l3_entries,
    port_setups,
    resolve_rate,
)
from tgen_tui.engine.stats import PortSetup
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.flowprogram import FlowProgram
from tgen_tui.packets.flowsplit import split_warnings
from tgen_tui.packets.program import FCS_LEN, StreamProgram
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.profiles.units import line_rate_fps
from tgen_tui.profiles.wire import L1_OVERHEAD

if TYPE_CHECKING:
    from tgen_tui.engine.options import EngineOptions


def _timer_paced(compiled: CompiledProfile, programs: tuple[StreamProgram, ...]) -> bool:
    """Whether a port may release frames one by one on the timer (``pacing: timer``, or
    auto with drawn gaps, bursts, on/off or recorded times): such a sender's wake-ups suffer
    from a receiver on its core, so receive-only workers then go to the engine's core
    (assignment.plan_workers). A constant-rate port is spaced by its TBF: it keeps them,
    and the DUT's receive work (RPS on the engine's core in the lab) keeps that core."""
    from tgen_tui.calibrate.pacing import plain

    for p in programs:
        pacing = getattr(compiled.ports[p.port], "pacing", "auto") or "auto"
        if pacing == "timer" or (pacing == "auto" and not plain(p)):
            return True
    return False


@dataclass(frozen=True, eq=False)
class Setup:
    """Everything fixed between two reloads (see the module docstring)."""

    compiled: CompiledProfile
    port_names: tuple[str, ...]
    programs: tuple[StreamProgram, ...]
    n_streams: int
    plans: tuple[WorkerPlan, ...]
    ports: Mapping[str, PortSetup]
    warnings: tuple[str, ...]
    dut_netns: str | None = None
    dut_ssh: str | None = None
    l3: Mapping[str, dict] = field(default_factory=dict)  # port -> worker "l3" entry
    lanes: int = 1  # the most sender lanes of any port; rx rows per stream (engine/lanes.py)
    flows: tuple[FlowProgram, ...] = ()  # socket flows of the ports in use
    flow_plans: tuple[FlowPlan, ...] = ()  # their workers (ids after the frame workers')

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, compiled: CompiledProfile, options: EngineOptions) -> Setup:
        """Plan the workers of ``compiled`` under ``options`` (BadInput: unknown --ports)."""
        used = list(options.ports or compiled.ports)
        unknown = [p for p in used if p not in compiled.ports]
        if unknown:
            raise BadInput(
                f"--ports: unknown port(s) {', '.join(unknown)} (profile has: {', '.join(compiled.ports)})"
            )
        programs = tuple(p for p in compiled.streams if p.port in used)
        port_streams = {p: [s.name for s in programs if s.port == p] for p in used}
        cores = options.cores or default_cores()
        try:
            live = live_learn_ports(programs)  # learn: true exchanges: one lane too
            learning = frozenset(options.learn or ()) | live | block_ports(programs)
            lanes = port_lanes(compiled, used, getattr(options, "lanes", None), learning)
        except ValueError as e:
            raise BadInput(str(e)) from None
        live_lanes = [p for p in used if p in live and lanes.get(p, 1) > 1]
        if live_lanes:  # tgen validate says it with the profile's line (profiles/models.py)
            raise BadInput(
                f"lanes: port {', '.join(live_lanes)} is in a learn: true exchange (it learns "
                "tuples or verifies flows): such a port has one lane"
            )
        kept = [p for p in used if p in learning and p not in live_lanes]
        if options.cluster and max(lanes.values(), default=1) > 1:
            raise BadInput(
                "lanes: sender lanes are not supported with --cluster yet (use lanes: 1)"
            )
        learners = [p for p in (options.learn or {}) if lanes.get(p, 1) > 1]
        if learners:  # the profile's lanes: each would see a share of the tuples
            raise BadInput(
                f"lanes: port {', '.join(learners)} learns tuples (RFC 9693 Responder): "
                "a learning port has one lane"
            )
        if max(lanes.values(), default=1) > 1:  # several workers per port (engine/lanes.py)
            plans, warnings = plan_lanes(port_streams, lanes, cores)
        else:
            spare = [] if options.cores or not _timer_paced(compiled, programs) else spare_cores()
            plans, warnings = plan_workers(port_streams, cores, spare)
        n_names = max(len(compiled.all_stream_names), 1)
        n_lanes = max(lanes.values(), default=1)
        neigh = options.neighbours or {}
        flows = _flows_of(compiled, used, options.cluster)
        flow_plans = plan_flow_workers(flows, cores, first_id=len(plans))
        warnings += shared_core_warning([p.core for p in plans], flow_plans, len(cores))
        ports = port_setups(compiled, plans, programs, lanes, neigh, options.cluster, flows)
        warnings += one_lane_warning(getattr(options, "lanes", None), kept)
        warnings += split_warnings(programs, lanes)  # flows that cannot keep to one lane
        warnings += host_warnings(compiled, used, options.cluster)
        dut = pick_dut(options.dut_netns, options.dut_ssh, compiled.dut_netns, compiled.dut_ssh)
        return cls(
            compiled=compiled,
            port_names=tuple(used),
            programs=programs,
            n_streams=n_names * n_lanes,  # rx rows: one per (stream, lane)
            plans=tuple(plans),
            ports=ports,
            warnings=tuple(warnings),
            dut_netns=dut[0],
            dut_ssh=dut[1],
            l3=l3_entries(compiled, used, neigh),
            lanes=n_lanes,
            flows=flows,
            flow_plans=tuple(flow_plans),
        )

    def rates_only_change(self, compiled: CompiledProfile) -> bool:
        """True when ``compiled`` differs from this set-up's profile in stream rates only."""
        mine = tuple(f for f in compiled.flows if f.port in self.port_names)
        return (
            mine == self.flows
            and list(compiled.ports) == list(self.compiled.ports)
            and all(compiled.ports[n] == self.compiled.ports[n] for n in compiled.ports)
            and [_sans_rate(p) for p in compiled.streams if p.port in self.port_names]
            == [_sans_rate(p) for p in self.programs]
        )

    def rates_of(self, compiled: CompiledProfile) -> dict[int, float]:
        """Requested fps by program position, as ``compiled`` says (for a live reload)."""
        mine = (x for x in compiled.streams if x.port in self.port_names)
        return {i: p.schedule.pps for i, p in enumerate(mine)}

    def initial_rates(self) -> dict[int, float]:
        return {i: p.schedule.pps for i, p in enumerate(self.programs)}

    # ------------------------------------------------------------------ lookups
    def hosts(self) -> dict[str, list[tuple[str | None, str]]]:
        """Tester hosts (besides this machine) and the (netns, interface) of their ports."""
        out: dict[str, list[tuple[str | None, str]]] = {}
        for pr in self.ports.values():
            if pr.host is not None:
                out.setdefault(pr.host, []).append((pr.netns, pr.interface))
        return out

    def host_of(self, plan: WorkerPlan) -> str | None:
        return self.ports[plan.ports[0]].host if plan.ports else None

    def select(self, ports: Any) -> list[str]:
        """Port names of a command (None: all); EngineCommandError for an unknown one."""
        if isinstance(ports, str):
            ports = [ports]
        names = list(self.ports) if ports is None else list(ports)
        unknown = [p for p in names if p not in self.ports]
        if unknown:
            raise EngineCommandError(
                ", ".join(unknown), f"no such port (ports: {', '.join(self.ports)})"
            )
        return names

    def flow_pos(self, name: str) -> int | None:
        """A socket flow's position in ``flows`` (None: no flow of that name)."""
        return next((i for i, f in enumerate(self.flows) if f.name == name), None)

    def flow_plan_of(self, pos: int) -> FlowPlan:
        """The flow worker that runs flow position ``pos``."""
        return next(p for p in self.flow_plans if pos in p.flows)

    def stream_pos(self, name: str) -> int:
        """A stream's position in ``programs``; EngineCommandError for an unknown name."""
        for i, p in enumerate(self.programs):
            if p.name == name:
                return i
        raise EngineCommandError(
            name, f"no such stream (streams: {', '.join(p.name for p in self.programs)})"
        )

    def port_specs(self, plan: WorkerPlan) -> list[tuple]:
        """(name, interface, netns, programs, tx_path) of each port of ``plan``: the
        arguments of :func:`~tgen_tui.engine.workers.port_config`."""
        return [
            (
                pn,
                self.ports[pn].interface,
                self.ports[pn].netns,
                [s for s in self.programs if s.port == pn],
                self.ports[pn].tx_path,
                self.l3.get(pn),
                self.ports[pn].pacing,
                self.ports[pn].lanes,
                bool(self.ports[pn].flows),
                [s for s in self.programs if s.replay is not None and s.rx_port == pn],
            )
            for pn in plan.ports
        ]

    def tx_rows(self, plan: WorkerPlan) -> tuple[tuple[int, int], ...]:
        """(program position, row in the worker's tx table) of the streams ``plan`` sends."""
        rows = []
        for pn in plan.ports:
            rows += [i for i, p in enumerate(self.programs) if p.port == pn]
        return tuple((i, row) for row, i in enumerate(rows))

    def worker_ctx(self, plan: WorkerPlan, shm_path: str) -> stats.WorkerCtx:
        return stats.WorkerCtx(
            plan.id,
            plan.core,
            plan.ports,
            plan.streams,
            shm_path,
            self.tx_rows(plan),
            plan.lane,
            plan.lanes,
        )

    def finite_total(self) -> int | None:
        """Frames all streams will send in total, or None if any stream or socket flow
        runs until stopped (a flow without a schedule stop time)."""
        if any(f.schedule.stop_s is None for f in self.flows):
            return None
        totals = [DueTimes(p.schedule).total() for p in self.programs]
        return None if None in totals else sum(t for t in totals if t is not None)

    # ------------------------------------------------------------------ line rates
    def mean_bytes(self, i: int) -> float:
        """Mean frame size of program ``i`` on the wire, FCS included."""
        return self.programs[i].sizes.mean + FCS_LEN

    def port_line_fps(self, port: str, rates: Mapping[int, float]) -> tuple[float, float]:
        """(line-rate fps at the port's rate-weighted mean frame size, that mean size)."""
        pr = self.ports[port]
        mine = pr.streams
        tot = sum(rates[i] for i in mine)
        if mine and tot > 0:
            mean = sum(rates[i] * self.mean_bytes(i) for i in mine) / tot
        elif mine:
            mean = sum(self.mean_bytes(i) for i in mine) / len(mine)
        else:
            mean = 64.0
        return line_rate_fps(pr.speed_bps, mean), mean

    def check_line_rate(self, port: str, rates: Mapping[int, float], target: str) -> None:
        """RateError when ``rates`` put more L1 bits/s on ``port`` than its speed."""
        pr = self.ports[port]
        bits = sum(rates[i] * (self.mean_bytes(i) + L1_OVERHEAD) * 8 for i in pr.streams)
        if bits > pr.speed_bps * (1 + 1e-9):
            top, mean = self.port_line_fps(port, rates)
            raise RateError(
                target,
                f"{bits / 1e6:,.1f} Mbit/s (L1) exceeds the line rate of port {port}: "
                f"the maximum is {pr.speed_bps / 1e9:g} Gbit/s = {top:,.0f} fps at {mean:g} B",
            )

    # ------------------------------------------------------------------ views
    def sample_context(self, dut_source: str) -> stats.SampleContext:
        return stats.SampleContext(
            ports=tuple(self.ports.values()),
            streams=tuple(
                stats.StreamCtx(p.name, p.index, p.port, p.rx_port, role, p.schedule)
                for p, role in zip(self.programs, stream_roles(self.programs), strict=True)
            ),
            n_streams=self.n_streams,
            warnings=self.warnings,
            lanes=self.lanes,
            dut_source=dut_source,
            flows=self.flow_ctx(),
        )

    def flow_ctx(self) -> tuple[FlowCtx, ...]:
        """Every socket flow as the sampler sees it (its worker and core)."""
        out = []
        for plan in self.flow_plans:
            for i in plan.flows:
                f = self.flows[i]
                app = (f.app.kind, f.app.mode) if f.app else (None, None)
                out.append(FlowCtx(i, *_ident(f), plan.id, plan.core, *app))
        return tuple(sorted(out, key=lambda c: c.pos))

    def describe(
        self,
        rates: Mapping[int, float],
        paused: frozenset[int] | set[int],
        workers: Mapping[int, tuple[int | None, str | None]],
        dut_source: str,
        flow_rates: Mapping[int, float] | None = None,
    ) -> EngineDescription:
        """The frozen description; ``workers``: worker id -> (pid, send paths);
        ``flow_rates``: UDP flows' bit/s now (default: the profile's)."""
        ports = [
            PortInfo(
                p.name,
                p.interface,
                p.netns,
                p.speed_bps,
                p.worker,
                p.core,
                tuple(self.programs[i].name for i in p.streams),
                self.port_line_fps(p.name, rates)[0],
            )
            for p in self.ports.values()
        ]
        streams = [
            StreamInfo(
                p.name,
                p.index,
                p.port,
                p.rx_port,
                rates[i],
                self.mean_bytes(i),
                distinct_flows(p),
                i in paused,
            )
            for i, p in enumerate(self.programs)
        ]
        infos = [
            WorkerInfo(
                plan.id,
                plan.core,
                plan.ports,
                plan.streams,
                *workers.get(plan.id, (None, None)),
                plan.lane,
                plan.lanes,
            )
            for plan in self.plans
        ]
        for fp in self.flow_plans:
            pid, _ = workers.get(fp.id, (None, None))
            infos.append(
                WorkerInfo(fp.id, fp.core, fp.ports, fp.names, pid, "sockets", kind="flows")
            )
        c = self.compiled
        return EngineDescription(
            c.name,
            c.profile_hash,
            c.seed,
            tuple(ports),
            tuple(streams),
            tuple(infos),
            dut_source,
            self.warnings,
            self._flow_infos(flow_rates or {}),
        )

    def _flow_infos(self, rates: Mapping[int, float]) -> tuple[FlowInfo, ...]:
        out = []
        for fp in self.flow_plans:
            for i in fp.flows:
                f = self.flows[i]
                bps = rates.get(i, f.rate_bps) if f.protocol == "udp" else None
                out.append(
                    FlowInfo(
                        *_ident(f),
                        bps,
                        fp.id,
                        fp.core,
                        f"{f.src_ip} (netns {f.src_netns})" if f.src_netns else f.src_ip,
                        f"{f.dst_ip} (netns {f.dst_netns})" if f.dst_netns else f.dst_ip,
                        f.app.kind if f.app else None,
                    )
                )
        return tuple(sorted(out, key=lambda x: self.flow_pos(x.name) or 0))

    def plan_text(self) -> list[str]:
        """Human-readable worker → core → port → streams mapping, each field labelled."""
        lines = assignment_lines(self.plans, self.host_of)
        lines += flow_plan_lines(self.flow_plans, self.flows)
        return lines + [f"warning: {w}" for w in self.warnings]


def _flows_of(
    compiled: CompiledProfile, used: list[str], cluster: str | None
) -> tuple[FlowProgram, ...]:
    """The socket flows sent from the ports in use; BadInput for one whose port is on
    another tester host (its hosts' namespaces are there: not supported yet)."""
    flows = tuple(f for f in compiled.flows if f.port in used)
    remote = sorted(
        {f.port for f in flows if cluster and getattr(compiled.ports[f.port], "host", None)}
    )
    if remote:
        raise BadInput(
            f"transport: socket flows of port(s) {', '.join(remote)} on another tester host "
            "are not supported yet (their hosts' namespaces are there); run them on this "
            "machine (no host: for that port) or leave --cluster out"
        )
    return flows


def _sans_rate(p: StreamProgram) -> StreamProgram:
    """A program with its rate blanked, to tell rate-only edits from the rest."""
    return replace(p, schedule=replace(p.schedule, pps=0.0))


def _ident(f) -> tuple[str, str, str, str, str, str | None]:
    """A flow's name, transport entry, ports, protocol and cc (FlowCtx and FlowInfo)."""
    return f.name, f.stream, f.port, f.rx_port, f.protocol, f.cc


__all__ = ["PortSetup", "Setup", "distinct_flows", "resolve_rate"]
