"""The engine: a trio controller that runs a compiled profile on pinned worker processes.

It composes the engine's rooms (DESIGN.md):

- :class:`~tgen_tui.engine.setup.Setup`: what the profile and options say (frozen, pure);
- a :class:`~tgen_tui.engine.transport.WorkerTransport`: how workers are spawned and
  reached (``LocalTransport``, or the Ray transport of ``tgen_tui.cluster`` given as
  ``EngineOptions.transport``);
- :class:`~tgen_tui.engine.portcontrol.PortControl`: the port state machine, locks,
  acknowledged commands, rates, pause/resume, clear;
- :class:`~tgen_tui.engine.sampler.Sampler`: counters and probes to snapshots.

Structure (DESIGN rule 5): a root nursery; one supervisor task per worker, started with
a ``nursery.start`` handshake so ``open_engine`` returns only when every worker is
configured and its RX rings are open; one sampler task. Front ends use the contract
(:class:`~tgen_tui.engine.api.EngineAPI` + :class:`~tgen_tui.engine.api.EngineFeed`)::

    async with open_engine(compiled, EngineOptions()) as eng:
        await eng.start()
        async for snap in eng.snapshots():
            ...
        await eng.stop()
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import trio

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.api import EngineDescription, EngineEvent, PortState
from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.capture import Captures, CaptureSpec, CaptureView, SentFrames
from tgen_tui.engine.events import EventLog
from tgen_tui.engine.flowplan import FlowPlan
from tgen_tui.engine.linkwatch import LinkWatch
from tgen_tui.engine.options import EngineOptions
from tgen_tui.engine.portcontrol import PortControl, PortRuntime
from tgen_tui.engine.sampler import Sampler
from tgen_tui.engine.setup import Setup
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.transport import (
    LocalTransport,
    WorkerLink,
    WorkerTransport,
    remove_files_of_gone_processes,
    remove_stale_counter_files,
)
from tgen_tui.engine.workers import WorkerState
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.results.models import RunResult


class Engine:
    """Controller of one profile's workers. Create with :func:`open_engine`."""

    def __init__(
        self, compiled: CompiledProfile, options: EngineOptions, nursery: trio.Nursery
    ) -> None:
        if options.cluster and options.transport is None:
            raise BadInput(
                f"--cluster {options.cluster}: the engine needs the cluster transport "
                "(EngineOptions.transport from tgen_tui.cluster.transport)"
            )
        self.options = options
        self._nursery = nursery
        self._log = EventLog()
        self._closed = False
        self.transport: WorkerTransport = (options.transport or LocalTransport)(options)
        self.setup = Setup.build(compiled, options)
        self.control = PortControl(self.setup, self._log, options.drain_ms, options.stop_timeout)
        self.control.send_for_s = options.send_for_s
        self.links = LinkWatch(lambda: self.control.ports, self._log, self.transport)
        self.sampler = Sampler(self.setup, self.transport, self.control, self.links)
        self.captures = Captures(nursery, lambda: self.setup, self.latest_snapshot)
        self._sent_frames = SentFrames()

    # ------------------------------------------------------------------ views of the rooms
    @property
    def compiled(self) -> CompiledProfile:
        return self.setup.compiled

    @property
    def ports(self) -> dict[str, PortRuntime]:
        """Port name -> its runtime state (state, failure, link, worker)."""
        return self.control.ports

    @property
    def workers(self) -> dict[int, WorkerLink]:
        """Worker id -> the handle commands go through."""
        return self.control.workers

    @property
    def states(self) -> dict[int, WorkerState]:
        """Worker id -> its supervisor-side state (pid, liveness, final reports)."""
        return {wid: w.state for wid, w in self.control.spawned.items()}

    # ------------------------------------------------------------------ set-up
    async def _spawn(self) -> None:
        """Spawn the set-up's workers (through the transport) and take the baselines.

        A port's workers (its lanes) start one after the other (each joins the port's
        fanout group in lane order); different ports' workers and the flow workers start
        at once when the transport allows it (``parallel_spawn``: local processes), so an
        engine opens in about one worker's start-up time."""
        await self.transport.prepare(self.setup, self._log.notice)
        await self._rps_check()
        groups: dict[str, list[WorkerPlan | FlowPlan]] = {}
        for wp in self.setup.plans:
            groups.setdefault(wp.ports[0] if wp.ports else f"w{wp.id}", []).append(wp)
        for fp in self.setup.flow_plans:
            groups[f"flows{fp.id}"] = [fp]
        try:
            if getattr(self.transport, "parallel_spawn", False) and len(groups) > 1:
                await _all_at_once([self._spawn_in_order(g) for g in groups.values()])
            else:
                for g in groups.values():
                    await self._spawn_in_order(g)
        finally:
            await self.transport.spawned()
        every: list[WorkerPlan | FlowPlan] = [*self.setup.plans, *self.setup.flow_plans]
        started = dict(self.control.spawned)
        self.control.spawned.clear()
        for plan in every:  # workers, their counters and notices in plan order
            w = started[plan.id]
            self.control.spawned[plan.id] = w
            self.sampler.attach(w)
            if isinstance(plan, FlowPlan):
                what = f"flows {', '.join(plan.names)}"
            else:
                what = f"streams {', '.join(plan.streams) or '(receive only)'}"
            kind = "flow worker" if isinstance(plan, FlowPlan) else "worker"
            port = ", ".join(plan.ports)
            self._log.notice(
                f"{kind} {plan.id} (pid {w.state.pid}) pinned to {w.where}: port {port}; {what}"
            )
        await self.sampler.prime()

    async def _spawn_in_order(self, plans: list[WorkerPlan | FlowPlan]) -> None:
        for plan in plans:
            on_event = self.control.on_worker_event
            if isinstance(plan, FlowPlan):
                w = await self.transport.spawn_flows(plan, self.setup, on_event, self._nursery)
            else:
                w = await self.transport.spawn(plan, self.setup, on_event, self._nursery)
            self.control.spawned[plan.id] = w

    async def aclose(self) -> None:
        """Stop every running port (bounded), then quit workers; kill as the fallback."""
        if self._closed:
            return
        running = [n for n, p in self.ports.items() if p.state == PortState.RUNNING]
        if running:
            with contextlib.suppress(Exception):
                await self.stop(running)
        with contextlib.suppress(Exception):
            await self.sampler.publish(final=True)
        with contextlib.suppress(Exception):  # after the drain: the last frames are in
            await self.captures.stop_all()
        self._closed = True
        await self.control.quit_workers()
        with trio.CancelScope(shield=True):  # a remote host's agent kills what is left
            await self.transport.close()
        self.sampler.close_subscribers()
        self._log.close()
        self.sampler.close()

    # ------------------------------------------------------------------ commands (EngineAPI)
    async def start(self, ports: list[str] | None = None) -> None:
        """Start sending on ports (default all); see :meth:`PortControl.start`."""
        await self.control.start(ports)

    async def stop(self, ports: list[str] | None = None, drain_ms: int | None = None) -> None:
        """Stop ports (bounded wait for the final counters); see :meth:`PortControl.stop`."""
        await self.control.stop(ports, drain_ms)

    async def set_rate(self, target: str, rate: str | float) -> float:
        """Set a stream's or a port's rate; see :meth:`PortControl.set_rate`."""
        return await self.control.set_rate(target, rate)

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        """Multiply the rate of every stream (of ``ports``; default all) by ``factor``."""
        await self.control.scale_rates(factor, ports)

    async def pause(self, stream: str) -> None:
        """Stop one stream's frames from becoming due; the port keeps running."""
        await self.control.pause(stream, True)

    async def resume(self, stream: str) -> None:
        """Resume a paused stream at its rate, re-based at the current time."""
        await self.control.pause(stream, False)

    async def clear(self, ports: list[str] | None = None, streams: list[str] | None = None) -> None:
        """Zero counters of ``ports``, of ``streams``, or of everything (both None)."""
        await self.control.clear(ports, streams, self.sampler.rebase)

    # ------------------------------------------------------------------ captures
    async def start_capture(self, spec: CaptureSpec) -> CaptureView:
        """Start a capture (engine/capture.py): BadInput for a bad spec or filter."""
        return await self.captures.start(spec)

    async def stop_capture(
        self, cid: int, reason: str = "stopped", comment: str | None = None
    ) -> CaptureView:
        """Stop capture ``cid`` (its last frames drained); its final view."""
        return await self.captures.stop(cid, reason, comment)

    def capture_views(self) -> list[CaptureView]:
        """Every capture of this engine, newest state (counts, the last frames)."""
        return self.captures.views()

    def sent_frame(self, stream: str, seq: int, lane: int = 0) -> bytes | None:
        """The frame ``stream`` sent as ``seq``, rebuilt (engine/capture.py SentFrames)."""
        return self._sent_frames.frame(self.setup, stream, seq, lane)

    def requested_pps(self, stream_i: int) -> float:
        return self.control.requested_pps(stream_i)

    async def reload(self, compiled: CompiledProfile) -> None:
        """Apply an edited profile. A change of rates only is applied live; anything else
        stops every port, quits the workers and spawns new ones (ports come back idle)."""
        if self.setup.rates_only_change(compiled):
            new = self.setup.rates_of(compiled)
            for n in self.ports:
                self.setup.check_line_rate(n, new, n)
            await self.control.apply_rates(new, "reload")
            self._use(dataclasses.replace(self.setup, compiled=compiled))
            self._log.notice(f"profile {compiled.name} reloaded: rates applied live")
            return
        from tgen_tui.engine.neighbours import resolve_again

        self.options = await resolve_again(compiled, self.options)  # a new or changed gateway
        setup = Setup.build(compiled, self.options)
        self.transport.check(setup)  # e.g. refuse a new host before anything stops
        names = list(self.ports)
        async with self.control.holding(names):
            running = [n for n in names if self.ports[n].state == PortState.RUNNING]
            if running:
                await self.control.stop_locked(running, None)
            await self.control.quit_workers()
            self.sampler.close()
            await self.transport.release()
            self.control.configure(setup)
            self.setup = setup
            self.sampler.configure(setup, self.control)
            self.links.forget()  # the new ports' namespaces
            await self._spawn()
        self._log.notice(f"profile {compiled.name} reloaded: workers re-spawned, ports idle")

    async def _rps_check(self) -> None:
        """A worker on a core that RPS steers receive work to: a warning of the run."""
        from tgen_tui.engine.rpscheck import setup_warnings

        extra = [w for w in await setup_warnings(self.setup) if w not in self.setup.warnings]
        if extra:  # no worker is attached yet: the sampler takes the set-up again
            self.setup = dataclasses.replace(self.setup, warnings=(*self.setup.warnings, *extra))
            self.control.setup = self.setup
            self.sampler.configure(self.setup, self.control)
            for w in extra:
                self._log.warning(w)

    def _use(self, setup: Setup) -> None:
        self.setup = self.control.setup = self.sampler.setup = setup

    def describe(self) -> EngineDescription:
        """A frozen description of ports, workers, cores and streams."""
        workers = {}
        for wid, st in self.states.items():
            paths = st.layout.tx_path if st.layout else {}
            workers[wid] = (st.pid, ", ".join(sorted(set(paths.values()))) or None)
        c = self.control
        return self.setup.describe(c.rates, c.paused, workers, self.dut_source(), c.flow_rates)

    # ------------------------------------------------------------------ feed (EngineFeed)
    def latest_snapshot(self) -> StatsSnapshot | None:
        """The newest snapshot: a latest-only subscription for front ends that draw at their pace."""
        return self.sampler.latest

    def snapshots(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        """Subscribe to snapshots (one per interval). Close the channel to unsubscribe.
        A slow subscriber loses the newest snapshots, never blocks the sampler."""
        return self.sampler.subscribe(buffer)

    async def sample_now(self) -> StatsSnapshot:
        """Sample the counters now and publish the snapshot (a check at a deadline)."""
        return await self.sampler.publish()

    async def final_snapshot(self) -> StatsSnapshot:
        """Sample now and publish the result as a final snapshot."""
        return await self.sampler.publish(final=True)

    @property
    def events(self) -> list[str]:
        """The event log as text lines with times (for result files and logs)."""
        return self._log.lines()

    def event_log(self) -> list[EngineEvent]:
        return self._log.all()

    def notice(self, message: str) -> None:
        """Put a notice in the event log now: what the run owner did to the run from
        outside the engine (a DUT event) is named at its time, in the log and NDJSON."""
        self._log.notice(message)

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        """Events after ``cursor`` (the count of events already read; start with 0) and
        the new cursor. The log keeps the last 10,000 events."""
        return self._log.since(cursor)

    def subscribe_events(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        """A channel of typed events from now on (close it to unsubscribe)."""
        return self._log.subscribe(buffer)

    def port_states(self) -> dict[str, str]:
        """Port name -> its state now (idle, starting, running, stopping, stopped, failed)."""
        return {n: str(p.state) for n, p in self.ports.items()}

    def ports_done_sending(self) -> bool:
        """True when every sending port's worker reported ``tx_done`` (bursts, counts, stop times)."""
        return self.control.ports_done_sending()

    def finite_total(self) -> int | None:
        """Frames all streams will send in total, or None if any runs until stopped."""
        return self.setup.finite_total()

    def plan_text(self) -> list[str]:
        """Human-readable worker → core → port → streams mapping, each field labelled."""
        return self.setup.plan_text()

    def learned(self) -> dict[str, dict]:
        """Port -> what its worker learned (``EngineOptions.learn``), from its final report."""
        return {
            port: ev.learned
            for st in self.states.values()
            for port, ev in st.stopped_info.items()
            if ev.learned is not None
        }

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
        from tgen_tui.engine.result import build_result

        result = build_result(
            self.compiled,
            final,
            duration_s=duration_s,
            partial=partial,
            profile_path=profile_path,
            events=self.events,
            plan=self.plan_text(),
            thresholds=thresholds,
            dut_channel=self.sampler.dut.channel if self.sampler.dut else None,
        )
        from tgen_tui.engine.stateful import apply_flow_reports

        flows = {
            port: ev.flows
            for st in self.states.values()
            for port, ev in st.stopped_info.items()
            if getattr(ev, "flows", None)
        }
        apply_flow_reports(result, self.setup.programs, flows, self.learned(), self.control.t0)
        cluster = self.transport.report()
        if cluster is not None:  # the section exists only under --cluster
            result.cluster = cluster
        return result

    def dut_source(self) -> str:
        return self.sampler.dut_source


async def _all_at_once(jobs: list) -> None:
    """Await the coroutines together; the first failure is raised as itself (not in a
    group), the others' start-ups cancelled."""
    errors: list[BaseException] = []

    async def one(job) -> None:
        try:
            await job
        except trio.Cancelled:
            raise
        except BaseException as e:
            errors.append(e)
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)
    if errors:
        raise errors[0]


@contextlib.asynccontextmanager
async def open_engine(
    compiled: CompiledProfile, options: EngineOptions | None = None
) -> AsyncIterator[Engine]:
    """Spawn and configure the workers; yield the engine; always stop and reap them."""
    options = options or EngineOptions()
    if options.neighbours is None:
        from tgen_tui.engine.neighbours import resolve_gateways

        found = await resolve_gateways(compiled, options.ports)
        options = dataclasses.replace(options, neighbours=found)
    async with trio.open_nursery() as nursery:
        eng = Engine(compiled, options, nursery)
        try:
            await eng._spawn()
            nursery.start_soon(eng.sampler.run, options.interval, lambda: eng._closed)
            nursery.start_soon(eng.links.run, lambda: eng._closed)  # link changes: events
            yield eng
        finally:
            with trio.CancelScope(shield=True):
                await eng.aclose()
            nursery.cancel_scope.cancel()


__all__ = [
    "Engine",
    "EngineOptions",
    "WorkerPlan",
    "open_engine",
    "remove_files_of_gone_processes",
    "remove_stale_counter_files",
]
