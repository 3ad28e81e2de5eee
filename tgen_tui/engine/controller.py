"""The engine: a trio controller that runs a compiled profile on pinned worker processes.

Structure (DESIGN rule 5): a root nursery; one supervisor task per worker, started with
a ``nursery.start`` handshake so ``open_engine`` returns only when every worker is
configured and its RX rings are open; one sampler task that turns worker counters and
probes into immutable :class:`StatsSnapshot` objects at a fixed rate. Ports are started
and stopped by command; a stop waits (bounded) for the worker's final counters, and only
if that wait times out is the worker killed. A worker that dies marks its ports failed,
with the reason, and the other workers keep running.

Both front ends use this one API::

    async with open_engine(compiled, EngineOptions()) as eng:
        await eng.start()
        async for snap in eng.snapshots():
            ...
        await eng.stop()
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import trio

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.engine import stats
from tgen_tui.engine.assignment import WorkerPlan, default_cores, plan_workers
from tgen_tui.engine.probes import CpuProbe, DutProbe, InterfaceProbe
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.workers import WorkerDied, WorkerHandle, WorkerState, port_config
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.schedule import DueTimes


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


@dataclass
class PortRuntime:
    name: str
    interface: str
    netns: str | None
    worker: int
    core: int
    state: str = "idle"
    failure: str | None = None
    link: str = "unknown"
    started_at: float | None = None  # monotonic s of the last start
    stopped_at: float | None = None
    active_s: float = 0.0  # accumulated sending time
    streams: list[int] = field(default_factory=list)  # program indexes sent from this port
    tx_done: bool = False  # the worker said every stream of the port reached its count/stop


class Engine:
    """Controller of one profile's workers. Create with :func:`open_engine`."""

    def __init__(
        self, compiled: CompiledProfile, options: EngineOptions, nursery: trio.Nursery
    ) -> None:
        self.compiled = compiled
        self.options = options
        self._nursery = nursery
        self.programs = list(compiled.streams)
        self.n_streams = max(len(compiled.all_stream_names), 1)
        used = options.ports or list(compiled.ports)
        unknown = [p for p in used if p not in compiled.ports]
        if unknown:
            raise BadInput(
                f"--ports: unknown port(s) {', '.join(unknown)} (profile has: {', '.join(compiled.ports)})"
            )
        self.port_names = used
        self.programs = [p for p in self.programs if p.port in used]
        cores = options.cores or default_cores()
        port_streams = {p: [s.name for s in self.programs if s.port == p] for p in used}
        self.plans, self.warnings = plan_workers(port_streams, cores)
        self.shm_dir = "/dev/shm"
        self.workers: dict[int, WorkerHandle] = {}
        self.states: dict[int, WorkerState] = {}
        self.ports: dict[str, PortRuntime] = {}
        for plan in self.plans:
            for pn in plan.ports:
                spec = compiled.ports[pn]
                self.ports[pn] = PortRuntime(
                    pn,
                    spec.interface,
                    spec.netns,
                    plan.id,
                    plan.core,
                    streams=[i for i, s in enumerate(self.programs) if s.port == pn],
                )
        self.t0: float | None = None  # monotonic s of the first start
        self._ifprobe = InterfaceProbe()
        self._cpu = CpuProbe()
        dut_netns = options.dut_netns or compiled.dut_netns
        dut_ssh = options.dut_ssh or compiled.dut_ssh
        self._dut = DutProbe(dut_netns, dut_ssh) if (dut_netns or dut_ssh) else None
        self._acc = stats.Accumulator(self)
        self._subscribers: list[trio.MemorySendChannel] = []
        self.latest: StatsSnapshot | None = None
        self.events: list[str] = []  # human-readable log: starts, stops, failures
        self._closed = False
        self._rates: dict[int, float] = {i: p.schedule.pps for i, p in enumerate(self.programs)}

    # ------------------------------------------------------------------ lifecycle
    def _log(self, msg: str) -> None:
        t = 0.0 if self.t0 is None else time.monotonic() - self.t0
        self.events.append(f"[{t:7.2f}s] {msg}")

    def _on_worker_event(self, st: WorkerState, ev: dict) -> None:
        kind = ev.get("event")
        if kind == "exit" and not st.quitting:
            for pn in st.plan.ports:
                pr = self.ports[pn]
                if pr.state != "failed":
                    pr.state = "failed"
                    pr.failure = st.exit_reason
                    self._log(f"port {pn} failed: {st.exit_reason}")
        elif kind == "tx_done" and ev.get("port") in self.ports:
            self.ports[ev["port"]].tx_done = True
        elif kind == "error":
            self._log(f"worker {st.plan.id}: {ev.get('message')}")

    async def _check_interfaces(self) -> None:
        """Every port's interface must exist in its namespace: say which one is missing."""
        ifc = await self._read_interfaces()
        for pr in self.ports.values():
            have = ifc.get(pr.netns, {})
            if pr.interface not in have:
                where = f"network namespace {pr.netns!r}" if pr.netns else "this namespace"
                raise EnvironmentProblem(
                    f"port {pr.name}: no interface {pr.interface!r} in {where} "
                    f"(it has: {', '.join(sorted(have)) or 'nothing'})"
                )

    async def _spawn(self) -> None:
        await self._check_interfaces()
        for plan in self.plans:
            st = WorkerState(plan, os.path.join(self.shm_dir, f"tgen-{os.getpid()}-w{plan.id}"))
            h = WorkerHandle(st, self._on_worker_event)
            self.states[plan.id] = st
            ports = []
            for pn in plan.ports:
                spec = self.compiled.ports[pn]
                ports.append(
                    port_config(
                        pn,
                        spec.interface,
                        spec.netns,
                        [s for s in self.programs if s.port == pn],
                        tx_path=spec.tx_path,
                    )
                )
            try:
                await self._nursery.start(h.run, ports, self.n_streams)
            except (WorkerDied, BaseExceptionGroup) as e:
                reason = e
                while isinstance(reason, BaseExceptionGroup):
                    reason = reason.exceptions[0]
                raise EnvironmentProblem(
                    f"worker for port(s) {', '.join(plan.ports)} could not start: {reason}"
                ) from None
            self.workers[plan.id] = h
            self._acc.attach(plan.id, st)
            self._log(
                f"worker {plan.id} pid {st.pid} on core {plan.core}: ports {', '.join(plan.ports)}"
            )
        for pr in self.ports.values():
            pr.link = await trio.to_thread.run_sync(
                InterfaceProbe.link_state, pr.netns, pr.interface
            )
        self._acc.prime(await self._read_interfaces())
        await self._baseline_dut()

    async def _baseline_dut(self) -> None:
        """The DUT's conntrack count before any port starts (the 'rise' is measured from it)."""
        if self._dut is not None:
            r = await trio.to_thread.run_sync(self._dut.read)
            self._acc.ct_start = r.count

    async def _read_interfaces(self) -> dict:
        ifc = {}
        for ns in {pr.netns for pr in self.ports.values()}:
            try:
                ifc[ns] = await trio.to_thread.run_sync(self._ifprobe.read, ns)
            except OSError:
                ifc[ns] = {}
        return ifc

    def plan_text(self) -> list[str]:
        """Human-readable worker → core → ports/streams mapping, plus warnings."""
        lines = []
        for p in self.plans:
            streams = ", ".join(p.streams) or "(receive only)"
            lines.append(f"worker {p.id}: core {p.core}: port {', '.join(p.ports)}: {streams}")
        return lines + [f"warning: {w}" for w in self.warnings]

    async def aclose(self) -> None:
        """Stop every running port (bounded), then quit workers; kill as the fallback."""
        if self._closed:
            return
        self._closed = True
        running = [n for n, p in self.ports.items() if p.state in ("running", "stopping")]
        if running:
            with contextlib.suppress(Exception):
                await self.stop(running)
        await self._publish(final=True)
        for h in self.workers.values():
            h.state.quitting = True
            with contextlib.suppress(WorkerDied):
                await h.send({"cmd": "quit"})
        with trio.move_on_after(2):
            while any(st.alive for st in self.states.values()):
                await trio.sleep(0.02)
        for h in self.workers.values():
            h.kill()
        for ch in self._subscribers:
            ch.close()
        self._acc.close()
        self._ifprobe.close()
        for st in self.states.values():
            with contextlib.suppress(OSError):
                os.unlink(st.shm_path)

    # ------------------------------------------------------------------ commands
    def _select(self, ports: list[str] | None) -> list[str]:
        names = list(self.ports) if ports is None else list(ports)
        unknown = [p for p in names if p not in self.ports]
        if unknown:
            raise BadInput(f"unknown port(s) {', '.join(unknown)} (have: {', '.join(self.ports)})")
        return names

    async def start(self, ports: list[str] | None = None) -> None:
        """Start sending on ports (default all). Frames are due from a common t0."""
        names = [n for n in self._select(ports) if self.ports[n].state not in ("running", "failed")]
        if not names:
            return
        now_ns = time.monotonic_ns() + 20_000_000  # 20 ms ahead, so every worker starts together
        if self.t0 is None:
            self.t0 = now_ns / 1e9
        by_worker: dict[int, list[str]] = {}
        for n in names:
            by_worker.setdefault(self.ports[n].worker, []).append(n)
        for wid, pns in by_worker.items():
            for pn in pns:
                self.ports[pn].tx_done = False  # before the command: its tx_done may come fast
            try:
                await self.workers[wid].send({"cmd": "start", "ports": pns, "t0_ns": now_ns})
            except WorkerDied as e:
                for pn in pns:
                    self.ports[pn].state, self.ports[pn].failure = "failed", str(e)
                continue
            for pn in pns:
                pr = self.ports[pn]
                pr.state, pr.started_at, pr.stopped_at = "running", now_ns / 1e9, None
                self._log(f"port {pn} started")

    async def stop(self, ports: list[str] | None = None, drain_ms: int | None = None) -> None:
        """Stop ports: the worker stops sending at once, keeps counting for drain_ms, then
        reports final counters. Waits at most ``drain + stop_timeout``; a worker that does not
        answer is killed and its ports are marked failed."""
        names = [n for n in self._select(ports) if self.ports[n].state == "running"]
        if not names:
            return
        drain = self.options.drain_ms if drain_ms is None else drain_ms
        by_worker: dict[int, list[str]] = {}
        for n in names:
            by_worker.setdefault(self.ports[n].worker, []).append(n)
        waits: list[tuple[str, trio.Event]] = []
        stop_at = time.monotonic()
        for wid, pns in by_worker.items():
            st = self.states[wid]
            for pn in pns:
                ev = st.stopped[pn] = trio.Event()
                waits.append((pn, ev))
                self.ports[pn].state = "stopping"
            try:
                await self.workers[wid].send({"cmd": "stop", "ports": pns, "drain_ms": drain})
            except WorkerDied:
                for pn in pns:
                    st.stopped[pn].set()
        for pn, _ in waits:
            pr = self.ports[pn]
            pr.active_s += stop_at - (pr.started_at or stop_at)
            pr.stopped_at = stop_at
        with trio.move_on_after(drain / 1000 + self.options.stop_timeout):
            for _, ev in waits:
                await ev.wait()
        for pn, ev in waits:
            pr = self.ports[pn]
            if pr.state == "failed":
                continue
            if not ev.is_set():
                h = self.workers[pr.worker]
                h.state.exit_reason = f"worker {pr.worker} did not report final counters within {drain / 1000 + self.options.stop_timeout:.1f} s: killed"
                h.kill()
                pr.state, pr.failure = "failed", h.state.exit_reason
            else:
                pr.state = "stopped"
                self._log(f"port {pn} stopped")

    async def set_rate(self, target: str, pps: float) -> None:
        """Change the rate of a stream (by name), or of every stream of a port (by port name,
        scaled proportionally so the port total becomes ``pps``)."""
        if not (pps > 0 and math.isfinite(pps)):
            raise BadInput("rate must be a positive number of frames/s")
        idx = [i for i, p in enumerate(self.programs) if p.name == target]
        if idx:
            scale = {idx[0]: pps}
        elif target in self.ports:
            mine = self.ports[target].streams
            total = sum(self._rates[i] for i in mine) or 1.0
            scale = {i: self._rates[i] * pps / total for i in mine}
        else:
            raise BadInput(f"unknown stream or port {target!r}")
        for i, r in scale.items():
            self._rates[i] = r
            pr = self.ports[self.programs[i].port]
            with contextlib.suppress(WorkerDied):
                await self.workers[pr.worker].send(
                    {"cmd": "set_rate", "stream": self.programs[i].index, "pps": r}
                )
            self._log(f"stream {self.programs[i].name} rate {r:,.0f} fps")

    async def clear(self) -> None:
        """Zero the displayed counters (baselines; the shared counters stay monotonic)."""
        for h in self.workers.values():
            with contextlib.suppress(WorkerDied):
                await h.send({"cmd": "clear"})
        self._acc.clear(await self._read_interfaces())
        await self._baseline_dut()
        self._log("counters cleared")

    def requested_pps(self, stream_i: int) -> float:
        return self._rates[stream_i]

    def finite_total(self) -> int | None:
        """Frames all streams will send in total, or None if any runs until stopped."""
        totals = [DueTimes(p.schedule).total() for p in self.programs]
        return None if None in totals else sum(totals)

    def ports_done_sending(self) -> bool:
        """True when every sending port's worker reported ``tx_done`` (bursts, counts, stop times)."""
        sending = [pr for pr in self.ports.values() if pr.streams]
        return bool(sending) and all(pr.tx_done for pr in sending)

    # ------------------------------------------------------------------ sampling
    def snapshots(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        """Subscribe to snapshots (one per interval). Close the channel to unsubscribe.
        A slow subscriber loses the oldest snapshots, never blocks the sampler."""
        send, recv = trio.open_memory_channel(buffer)
        self._subscribers.append(send)
        return recv

    async def _publish(self, final: bool = False) -> StatsSnapshot:
        ifc = await self._read_interfaces()
        cores = await trio.to_thread.run_sync(self._cpu.cores)
        dut_reading = await trio.to_thread.run_sync(self._dut.read) if self._dut else None
        snap = self._acc.sample(ifc, cores, dut_reading, final=final)
        self.latest = snap
        for ch in list(self._subscribers):
            try:
                ch.send_nowait(snap)
            except trio.WouldBlock:
                pass
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._subscribers.remove(ch)
        return snap

    async def _sampler(self) -> None:
        period = self.options.interval
        next_t = trio.current_time() + period  # trio's clock, not time.monotonic()
        while True:
            await trio.sleep_until(next_t)
            next_t += period
            if trio.current_time() > next_t:  # fell behind: skip, do not burst
                next_t = trio.current_time() + period
            if self._closed:
                return
            await self._publish()

    def dut_source(self) -> str:
        return self._dut.source if self._dut else "none"


@contextlib.asynccontextmanager
async def open_engine(
    compiled: CompiledProfile, options: EngineOptions | None = None
) -> AsyncIterator[Engine]:
    """Spawn and configure the workers; yield the engine; always stop and reap them."""
    options = options or EngineOptions()
    async with trio.open_nursery() as nursery:
        eng = Engine(compiled, options, nursery)
        try:
            await eng._spawn()
            nursery.start_soon(eng._sampler)
            yield eng
        finally:
            with trio.CancelScope(shield=True):
                await eng.aclose()
            nursery.cancel_scope.cancel()


__all__ = ["Engine", "EngineOptions", "WorkerPlan", "open_engine"]
