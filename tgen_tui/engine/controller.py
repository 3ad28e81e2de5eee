"""The engine: a trio controller that runs a compiled profile on pinned worker processes.

Structure (DESIGN rule 5): a root nursery; one supervisor task per worker, started with
a ``nursery.start`` handshake so ``open_engine`` returns only when every worker is
configured and its RX rings are open; one sampler task that turns worker counters and
probes into immutable :class:`StatsSnapshot` objects at a fixed rate.

Ports move through :class:`~tgen_tui.engine.api.PortState` (idle, starting, running,
stopping, stopped, failed) under a per-port lock, so commands on one port never
interleave: a ``start`` that arrives while the port is stopping waits for the stop to
finish, then starts. Every command to a worker carries a request id and is acknowledged
(bounded wait). Starting a running port or stopping a stopped one does nothing and says
so in an :class:`~tgen_tui.engine.api.EngineNotice`. A worker that dies marks its ports
failed, with the reason, and the other workers keep running.

Sequence numbers continue across stop/start, so a restart never shows phantom loss;
``clear`` resets the sender's sequence and the receiver's window together.

Both front ends use this one API (:class:`~tgen_tui.engine.api.EngineAPI`)::

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
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

import trio

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine import stats
from tgen_tui.engine.api import (
    TRANSITIONS,
    CountersCleared,
    EngineCommandError,
    EngineDescription,
    EngineEvent,
    EngineNotice,
    EngineWarning,
    PortState,
    PortStateChanged,
    RateChanged,
    RateError,
    StreamPaused,
    WorkerFailed,
)
from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.probes import DutProbe
from tgen_tui.engine.setup import Setup, resolve_rate
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.transport import (
    LocalTransport,
    SpawnedWorker,
    TransportFactory,
    WorkerLink,
    WorkerTransport,
    remove_files_of_gone_processes,
    remove_stale_counter_files,
)
from tgen_tui.engine.workers import CommandRefused, WorkerDied, WorkerState
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.program import StreamProgram
from tgen_tui.worker import protocol as P

ACK_TIMEOUT = 5.0  # s: a worker that does not acknowledge a command within this is dead
LINK_EVERY = 1.0  # s between link-state re-reads


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
    # how workers are reached (None: LocalTransport); --cluster passes the cluster's
    # transport (tgen_tui.cluster.transport.cluster_transport): the engine never imports it
    transport: TransportFactory | None = None
    # RFC 9693 Responder: port name -> {"path", "streams", "max"}: the port learns the
    # tuples of those streams' frames and writes them to path when it stops
    learn: dict[str, dict] | None = None


@dataclass
class PortRuntime:
    """The engine's mutable view of one port (engine task only; front ends get snapshots)."""

    name: str
    interface: str
    netns: str | None
    worker: int
    core: int
    speed_bps: float = 0.0
    state: PortState = PortState.IDLE
    failure: str | None = None
    link: str = "unknown"
    started_at: float | None = None  # monotonic s of the last start
    stopped_at: float | None = None
    active_s: float = 0.0  # accumulated sending time
    streams: list[int] = field(default_factory=list)  # program positions sent from this port
    tx_done: bool = False  # the worker said every stream of the port reached its count/stop
    lock: trio.Lock = field(default_factory=trio.Lock)
    host: str | None = None  # tester host under --cluster (None: this machine)


class Engine:
    """Controller of one profile's workers. Create with :func:`open_engine`."""

    def __init__(
        self, compiled: CompiledProfile, options: EngineOptions, nursery: trio.Nursery
    ) -> None:
        self.options = options
        self._nursery = nursery
        self._t_open = time.monotonic()
        self._events: list[EngineEvent] = []
        self._n_events = 0
        self._event_subs: list[trio.MemorySendChannel] = []
        self._subscribers: list[trio.MemorySendChannel] = []
        self.latest: StatsSnapshot | None = None
        self._closed = False
        if options.cluster and options.transport is None:
            raise BadInput(
                f"--cluster {options.cluster}: the engine needs the cluster transport "
                "(EngineOptions.transport from tgen_tui.cluster.transport)"
            )
        self.transport: WorkerTransport = (options.transport or LocalTransport)(options)
        self._configure(Setup.build(compiled, options))

    # ------------------------------------------------------------------ set-up
    def _configure(self, setup: Setup) -> None:
        """Take a set-up (no processes yet): the ports' runtime state starts idle."""
        self.setup = setup
        self.compiled = setup.compiled
        self.port_names = list(setup.port_names)
        self.programs: list[StreamProgram] = list(setup.programs)
        self.n_streams = setup.n_streams
        self.plans = list(setup.plans)
        self.warnings = list(setup.warnings)
        self._spawned: dict[int, SpawnedWorker] = {}
        old = getattr(self, "ports", {})
        self.ports: dict[str, PortRuntime] = {}
        for ps in setup.ports.values():
            pr = PortRuntime(
                ps.name,
                ps.interface,
                ps.netns,
                ps.worker,
                ps.core,
                speed_bps=ps.speed_bps,
                streams=list(ps.streams),
                host=ps.host,
            )
            if ps.name in old:
                pr.lock = old[ps.name].lock
                pr.link = old[ps.name].link
            self.ports[ps.name] = pr
        self.t0: float | None = None
        dut_netns, dut_ssh = setup.dut_netns, setup.dut_ssh
        self._dut = DutProbe(dut_netns, dut_ssh) if (dut_netns or dut_ssh) else None
        self._rates: dict[int, float] = setup.initial_rates()
        self._paused: set[int] = set()
        self._seq_floor: dict[int, int] = {}
        self._dut_settings: tuple[tuple[str, str], ...] = ()
        self._last_link = 0.0
        self._acc = stats.Accumulator(setup.sample_context(self.dut_source()))

    @property
    def workers(self) -> dict[int, WorkerLink]:
        """Worker id -> the handle commands go through."""
        return {wid: w.handle for wid, w in self._spawned.items()}

    @property
    def states(self) -> dict[int, WorkerState]:
        """Worker id -> its supervisor-side state (pid, liveness, final reports)."""
        return {wid: w.state for wid, w in self._spawned.items()}

    def _now(self) -> float:
        return time.monotonic() - self._t_open

    def _emit(self, ev: EngineEvent) -> None:
        self._events.append(ev)
        self._n_events += 1
        del self._events[:-10000]  # bounded: a long console session keeps the last 10,000
        _fan_out(self._event_subs, ev)

    def _notice(self, message: str) -> None:
        self._emit(EngineNotice(self._now(), message))

    def _set_state(self, pr: PortRuntime, new: PortState, reason: str | None = None) -> None:
        old = pr.state
        if old == new:
            return
        if new not in TRANSITIONS[old]:
            raise RuntimeError(f"port {pr.name}: illegal transition {old} -> {new}")
        pr.state = new
        if new == PortState.FAILED:
            pr.failure = reason
        self._emit(PortStateChanged(self._now(), pr.name, str(old), str(new), reason))

    def _on_worker_event(self, st: WorkerState, ev: P.Event | None) -> None:
        if ev is None:  # the process exited
            if st.quitting:
                return
            reason = st.exit_reason or "worker exited"
            self._emit(
                WorkerFailed(self._now(), st.plan.id, st.plan.core, tuple(st.plan.ports), reason)
            )
            for pn in st.plan.ports:
                pr = self.ports.get(pn)
                if pr is not None and pr.state != PortState.FAILED:
                    self._set_state(pr, PortState.FAILED, reason)
        elif isinstance(ev, P.TxDone) and ev.port in self.ports:
            self.ports[ev.port].tx_done = True
        elif isinstance(ev, P.Error) and ev.id is None:
            self._emit(EngineWarning(self._now(), f"worker {st.plan.id}: {ev.message}"))

    async def _spawn(self) -> None:
        await self.transport.prepare(self.setup, self._notice)
        try:
            for plan in self.plans:
                await self._spawn_worker(plan)
        finally:
            await self.transport.spawned()
        for pr in self.ports.values():
            pr.link = await self._link_state(pr)
        self._last_link = time.monotonic()
        self._acc.prime(await self._read_interfaces())
        await self._baseline_dut()
        self._dut_settings = await trio.to_thread.run_sync(self._read_dut_settings)

    async def _spawn_worker(self, plan: WorkerPlan) -> None:
        w = await self.transport.spawn(
            plan, self.setup, self._on_worker_event, self._nursery, self.options.learn
        )
        self._spawned[plan.id] = w
        self._acc.attach(self.setup.worker_ctx(plan, w.state.shm_path), w.view)
        self._notice(
            f"worker {plan.id} (pid {w.state.pid}) pinned to {w.where}: "
            f"port {', '.join(plan.ports)}; streams {', '.join(plan.streams) or '(receive only)'}"
        )

    def _read_dut_settings(self) -> tuple[tuple[str, str], ...]:
        if self._dut is None or not self._dut.netns:
            return ()
        from tgen_tui.engine.result import dut_settings

        d = dut_settings(self._dut.netns) or {}
        return tuple((k, str(v)) for k, v in d.items() if v is not None and k != "nft")

    async def _baseline_dut(self) -> None:
        """The DUT's conntrack count before any port starts (the 'rise' is measured from it)."""
        if self._dut is not None:
            r = await trio.to_thread.run_sync(self._dut.read)
            self._acc.ct_start = r.count

    async def _link_state(self, pr: PortRuntime) -> str:
        return await self.transport.link_state(self.setup.ports[pr.name])

    def cluster_report(self) -> dict | None:
        """The result's ``cluster`` section (None without --cluster)."""
        return self.transport.report()

    async def _read_interfaces(self) -> dict:
        return await self.transport.interfaces()

    def plan_text(self) -> list[str]:
        """Human-readable worker → core → port → streams mapping, each field labelled."""
        return self.setup.plan_text()

    async def _quit_workers(self) -> None:
        for h in self.workers.values():
            h.state.quitting = True
            with contextlib.suppress(WorkerDied):
                await h.send(P.Quit())
        with trio.move_on_after(2):
            while any(st.alive for st in self.states.values()):
                await trio.sleep(0.02)
        for h in self.workers.values():
            h.kill()
        for st in self.states.values():
            with contextlib.suppress(OSError):
                os.unlink(st.shm_path)

    async def aclose(self) -> None:
        """Stop every running port (bounded), then quit workers; kill as the fallback."""
        if self._closed:
            return
        running = [n for n, p in self.ports.items() if p.state == PortState.RUNNING]
        if running:
            with contextlib.suppress(Exception):
                await self.stop(running)
        with contextlib.suppress(Exception):
            await self._publish(final=True)
        self._closed = True
        await self._quit_workers()
        with trio.CancelScope(shield=True):  # a remote host's agent kills what is left
            await self.transport.close()
        for ch in self._subscribers + self._event_subs:
            ch.close()
        self._acc.close()

    # ------------------------------------------------------------------ selection helpers
    def _select(self, ports: Iterable[str] | None) -> list[str]:
        if isinstance(ports, str):
            ports = [ports]
        names = list(self.ports) if ports is None else list(ports)
        unknown = [p for p in names if p not in self.ports]
        if unknown:
            raise EngineCommandError(
                ", ".join(unknown), f"no such port (ports: {', '.join(self.ports)})"
            )
        return names

    def _stream_pos(self, name: str) -> int:
        for i, p in enumerate(self.programs):
            if p.name == name:
                return i
        raise EngineCommandError(
            name, f"no such stream (streams: {', '.join(p.name for p in self.programs)})"
        )

    @contextlib.asynccontextmanager
    async def _holding(self, names: list[str]):
        """Hold the per-port locks of ``names`` (in a fixed order: no deadlock)."""
        async with contextlib.AsyncExitStack() as stack:
            for n in sorted(set(names)):
                await stack.enter_async_context(self.ports[n].lock)
            yield

    # ------------------------------------------------------------------ start / stop
    async def start(self, ports: list[str] | None = None) -> None:
        """Start sending on ports (default all). Ports started together share one t0.

        A running port is left alone (a notice says so); a stopping port is waited for,
        then started; a failed port is refused with :class:`EngineCommandError` when it
        was named, and skipped with a warning when all ports were asked for."""
        names = self._select(ports)
        refused: list[tuple[str, str]] = []
        async with self._holding(names):
            todo = []
            for n in names:
                pr = self.ports[n]
                if pr.state == PortState.FAILED:
                    refused.append((n, f"failed: {pr.failure}"))
                elif pr.state == PortState.RUNNING:
                    self._notice(f"port {n} is already running: start does nothing")
                else:
                    todo.append(n)
            if todo:
                await self._start_locked(todo)
        if refused:
            if ports is None:
                for n, why in refused:
                    self._emit(EngineWarning(self._now(), f"port {n} not started: {why}"))
            else:
                raise EngineCommandError(refused[0][0], f"cannot start: {refused[0][1]}")

    async def _start_locked(self, names: list[str]) -> None:
        now_ns = time.monotonic_ns() + 20_000_000  # 20 ms ahead, so every worker starts together
        if self.t0 is None:
            self.t0 = now_ns / 1e9
        by_worker: dict[int, list[str]] = {}
        for n in names:
            by_worker.setdefault(self.ports[n].worker, []).append(n)
        for wid, pns in by_worker.items():
            for pn in pns:
                self.ports[pn].tx_done = False  # before the command: its tx_done may come fast
                self._set_state(self.ports[pn], PortState.STARTING)
            try:
                await self.workers[wid].request(P.Start(ports=pns, t0_ns=now_ns), ACK_TIMEOUT)
            except (WorkerDied, CommandRefused) as e:
                for pn in pns:
                    if self.ports[pn].state != PortState.FAILED:
                        self._set_state(self.ports[pn], PortState.FAILED, f"start: {e}")
                continue
            for pn in pns:
                pr = self.ports[pn]
                if pr.state == PortState.STARTING:
                    pr.started_at, pr.stopped_at = now_ns / 1e9, None
                    self._set_state(pr, PortState.RUNNING)

    async def stop(self, ports: list[str] | None = None, drain_ms: int | None = None) -> None:
        """Stop ports: the worker stops sending at once, keeps counting for drain_ms, then
        reports final counters. Waits at most ``drain + stop_timeout``; a worker that does not
        answer is killed and its ports are marked failed. Stopping a port that is not
        running does nothing and says so."""
        names = self._select(ports)
        async with self._holding(names):
            todo = []
            for n in names:
                pr = self.ports[n]
                if pr.state == PortState.RUNNING:
                    todo.append(n)
                elif ports is not None and pr.state != PortState.FAILED:
                    self._notice(f"port {n} is not running ({pr.state}): stop does nothing")
            if todo:
                await self._stop_locked(todo, drain_ms)

    async def _stop_locked(self, names: list[str], drain_ms: int | None) -> None:
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
                self._set_state(self.ports[pn], PortState.STOPPING)
            try:
                await self.workers[wid].send(P.Stop(ports=pns, drain_ms=drain))
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
            if pr.state == PortState.FAILED:
                continue
            if not ev.is_set():
                h = self.workers[pr.worker]
                h.state.exit_reason = (
                    f"worker {pr.worker} did not report final counters within "
                    f"{drain / 1000 + self.options.stop_timeout:.1f} s: killed"
                )
                h.kill()
                self._set_state(pr, PortState.FAILED, h.state.exit_reason)
            else:
                self._set_state(pr, PortState.STOPPED)

    # ------------------------------------------------------------------ rates
    def _stream_mean_bytes(self, i: int) -> float:
        return self.setup.mean_bytes(i)

    def _port_line_fps(self, port: str, rates: dict[int, float]) -> tuple[float, float]:
        return self.setup.port_line_fps(port, rates)

    def _check_line_rate(self, port: str, rates: dict[int, float], target: str) -> None:
        self.setup.check_line_rate(port, rates, target)

    async def set_rate(self, target: str, rate: str | float) -> float:
        """Set the rate of a stream (by name) or of a port (its streams scaled in
        proportion so that they sum to the rate). ``rate`` is written as in profiles:
        ``25kpps``, ``100Mbit`` (L1; ``100Mbit L2``), ``10%`` of the port's speed, or a
        number of frames/s. Takes effect at once on a running port (the pacer re-bases
        at the current frame and time). Returns the target's new frames/s."""
        new = dict(self._rates)
        if target in self.ports:
            pr = self.ports[target]
            if not pr.streams:
                raise RateError(target, "the port sends no stream")
            _, mean = self._port_line_fps(target, self._rates)
            total = resolve_rate(rate, mean, pr.speed_bps, target)
            have = sum(self._rates[i] for i in pr.streams) or 1.0
            for i in pr.streams:
                new[i] = self._rates[i] * total / have
            port = target
            result = total
        else:
            i = self._stream_pos(target)
            port = self.programs[i].port
            new[i] = resolve_rate(
                rate, self._stream_mean_bytes(i), self.ports[port].speed_bps, target
            )
            result = new[i]
        self._check_line_rate(port, new, target)
        await self._apply_rates(new, str(rate))
        return result

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        """Multiply the rate of every stream (of ``ports``; default all) by ``factor``."""
        if not (factor > 0 and math.isfinite(factor)):
            raise RateError("scale", "the factor must be a positive number")
        names = self._select(ports)
        new = dict(self._rates)
        for n in names:
            for i in self.ports[n].streams:
                new[i] = self._rates[i] * factor
            self._check_line_rate(n, new, n)
        await self._apply_rates(new, f"x{factor:g}")

    async def _apply_rates(self, new: dict[int, float], request: str) -> None:
        for i, r in new.items():
            old = self._rates[i]
            if abs(r - old) <= 1e-9 * max(r, old):
                continue
            prog = self.programs[i]
            pr = self.ports[prog.port]
            self._rates[i] = r
            if i not in self._paused and pr.state != PortState.FAILED:
                try:
                    await self.workers[pr.worker].request(
                        P.SetRate(stream=prog.index, pps=r), ACK_TIMEOUT
                    )
                except (WorkerDied, CommandRefused) as e:
                    self._rates[i] = old
                    raise EngineCommandError(prog.name, f"rate change refused: {e}") from None
            self._emit(RateChanged(self._now(), prog.name, prog.port, old, r, request))

    async def pause(self, stream: str) -> None:
        """Stop one stream's frames from becoming due; the port keeps running."""
        await self._pause(stream, True)

    async def resume(self, stream: str) -> None:
        """Resume a paused stream at its rate, re-based at the current time."""
        await self._pause(stream, False)

    async def _pause(self, stream: str, paused: bool) -> None:
        i = self._stream_pos(stream)
        if (i in self._paused) == paused:
            self._notice(f"stream {stream} is already {'paused' if paused else 'running'}")
            return
        prog = self.programs[i]
        pr = self.ports[prog.port]
        if pr.state == PortState.FAILED:
            raise EngineCommandError(stream, f"port {prog.port} failed: {pr.failure}")
        try:
            await self.workers[pr.worker].request(
                (P.Pause if paused else P.Resume)(stream=prog.index), ACK_TIMEOUT
            )
        except (WorkerDied, CommandRefused) as e:
            raise EngineCommandError(stream, f"{'pause' if paused else 'resume'}: {e}") from None
        if paused:
            self._paused.add(i)
        else:
            self._paused.discard(i)
        self._emit(StreamPaused(self._now(), stream, paused))

    def requested_pps(self, stream_i: int) -> float:
        return 0.0 if stream_i in self._paused else self._rates[stream_i]

    # ------------------------------------------------------------------ clear
    async def clear(self, ports: list[str] | None = None, streams: list[str] | None = None) -> None:
        """Zero counters: of ``ports`` (their port counters and the streams they send), of
        ``streams``, or of everything (both None). Sender and receiver are reset together:
        an idle or stopped stream's sequence restarts at 0 with the receiver's window, and a
        sending stream's receiver re-bases on its next frames, so no phantom loss appears."""
        everything = ports is None and streams is None
        pnames = set(self._select(ports)) if ports is not None else set()
        pos = {self._stream_pos(s) for s in streams or []}
        for n in pnames:
            pos.update(self.ports[n].streams)
        if everything:
            pnames = set(self.ports)
            pos = set(range(len(self.programs)))
        gidx = sorted(self.programs[i].index for i in pos)
        seq: dict[int, tuple[int, int]] = {}
        for h in self.workers.values():
            if not h.state.alive:
                continue
            try:
                reply = await h.request(
                    P.Clear(ports=list(h.plan.ports), streams=gidx), ACK_TIMEOUT
                )
            except (WorkerDied, CommandRefused) as e:
                self._emit(EngineWarning(self._now(), f"clear on worker {h.plan.id}: {e}"))
                continue
            for k, v in (reply.get("seq") or {}).items():  # reply is a P.Cleared
                seq[int(k)] = (int(v[0]), int(v[1]))
        ifc = await self._read_interfaces()
        self._acc.clear(ifc, None if everything else pnames, None if everything else pos)
        for i in pos:
            g = self.programs[i].index
            if g in seq:
                sent, raw_tx = seq[g]
                self._seq_floor[i] = sent + max(0, self._acc.tx_raw_base(i) - raw_tx)
            else:
                self._seq_floor[i] = 0
        if everything:
            await self._baseline_dut()
        self._emit(
            CountersCleared(
                self._now(),
                tuple(sorted(pnames)),
                tuple(self.programs[i].name for i in sorted(pos)),
            )
        )

    # ------------------------------------------------------------------ reload
    async def reload(self, compiled: CompiledProfile) -> None:
        """Apply an edited profile. A change of rates only is applied live; anything else
        stops every port, quits the workers and spawns new ones (ports come back idle)."""
        same = self.setup.rates_only_change(compiled)
        if same:
            new = {
                i: p.schedule.pps
                for i, p in enumerate(x for x in compiled.streams if x.port in self.port_names)
            }
            for n in self.ports:
                self._check_line_rate(n, new, n)
            await self._apply_rates(new, "reload")
            self.compiled = compiled
            self._notice(f"profile {compiled.name} reloaded: rates applied live")
            return
        setup = Setup.build(compiled, self.options)
        self.transport.check(setup)  # e.g. refuse a new host before anything stops
        names = list(self.ports)
        async with self._holding(names):
            running = [n for n in names if self.ports[n].state == PortState.RUNNING]
            if running:
                await self._stop_locked(running, None)
            await self._quit_workers()
            self._acc.close()
            await self.transport.release()
            self._configure(setup)
            await self._spawn()
        self._notice(f"profile {compiled.name} reloaded: workers re-spawned, ports idle")

    # ------------------------------------------------------------------ description
    def describe(self) -> EngineDescription:
        """A frozen description of ports, workers, cores and streams."""
        workers = {}
        for wid, st in self.states.items():
            paths = st.layout.tx_path if st.layout else {}
            workers[wid] = (st.pid, ", ".join(sorted(set(paths.values()))) or None)
        return self.setup.describe(self._rates, self._paused, workers, self.dut_source())

    def finite_total(self) -> int | None:
        """Frames all streams will send in total, or None if any runs until stopped."""
        return self.setup.finite_total()

    def ports_done_sending(self) -> bool:
        """True when every sending port's worker reported ``tx_done`` (bursts, counts, stop times)."""
        sending = [pr for pr in self.ports.values() if pr.streams]
        return bool(sending) and all(pr.tx_done for pr in sending)

    # ------------------------------------------------------------------ events
    @property
    def events(self) -> list[str]:
        """The event log as text lines with times (for result files and logs)."""
        return [f"[{e.t:8.2f}s] {e.text()}" for e in self._events]

    def event_log(self) -> list[EngineEvent]:
        return list(self._events)

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        """Events after ``cursor`` (the count of events already read; start with 0) and
        the new cursor. The log keeps the last 10,000 events."""
        dropped = self._n_events - len(self._events)
        return self._n_events, self._events[max(0, cursor - dropped) :]

    def subscribe_events(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        """A channel of typed events from now on (close it to unsubscribe)."""
        send, recv = trio.open_memory_channel(buffer)
        self._event_subs.append(send)
        return recv

    # ------------------------------------------------------------------ sampling
    def snapshots(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        """Subscribe to snapshots (one per interval). Close the channel to unsubscribe.
        A slow subscriber loses the newest snapshots, never blocks the sampler."""
        send, recv = trio.open_memory_channel(buffer)
        self._subscribers.append(send)
        return recv

    def latest_snapshot(self) -> StatsSnapshot | None:
        """The newest snapshot: a latest-only subscription for front ends that draw at their pace."""
        return self.latest

    async def sample_now(self) -> StatsSnapshot:
        """Sample the counters now and publish the snapshot (a check at a deadline)."""
        return await self._publish()

    async def final_snapshot(self) -> StatsSnapshot:
        """Sample now and publish the result as a final snapshot."""
        return await self._publish(final=True)

    def _live(self) -> stats.LiveState:
        workers = {}
        for wid, st in self.states.items():
            workers[wid] = stats.WorkerLive(
                pid=st.pid,
                alive=st.alive,
                exit_reason=st.exit_reason if not st.quitting else None,
                tx_path=", ".join(sorted(set(st.layout.tx_path.values()))) if st.layout else None,
                tx_path_why="; ".join(f"{p}: {w}" for p, w in st.tx_why.items()) or None,
                proc_cpu_pct=(
                    self.transport.proc_cpu(self._spawned[wid]) if st.pid and st.alive else 0.0
                ),
            )
        return stats.LiveState(
            t0=self.t0,
            port_state={n: str(p.state) for n, p in self.ports.items()},
            port_failure={n: p.failure for n, p in self.ports.items()},
            port_link={n: p.link for n, p in self.ports.items()},
            rates=dict(self._rates),
            paused=frozenset(self._paused),
            seq_floor=dict(self._seq_floor),
            workers=workers,
        )

    async def _publish(self, final: bool = False) -> StatsSnapshot:
        ifc = await self._read_interfaces()
        cores = await trio.to_thread.run_sync(self.transport.cores)
        dut_reading = await trio.to_thread.run_sync(self._dut.read) if self._dut else None
        if time.monotonic() - self._last_link >= LINK_EVERY:
            self._last_link = time.monotonic()
            for pr in self.ports.values():
                pr.link = await self._link_state(pr)
        live = await trio.to_thread.run_sync(self._live)
        rd = stats.Readings(ifc, cores, dut_reading, self._dut_settings)
        snap = self._acc.sample(rd, live, final=final)
        snap = self.transport.adjust(snap)  # latency notes of streams across hosts
        self.latest = snap
        _fan_out(self._subscribers, snap)
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
            with contextlib.suppress(trio.ClosedResourceError):
                await self._publish()

    @property
    def dut_netns(self) -> str | None:
        """The DUT's namespace when it is probed through one (None: no DUT, or ssh)."""
        return self._dut.netns if self._dut else None

    def dut_source(self) -> str:
        return self._dut.source if self._dut else "none"


def _fan_out(channels: list, item) -> None:
    """Send ``item`` to every subscriber without waiting: one whose buffer is full misses
    it, a closed one is dropped from ``channels``."""
    for ch in list(channels):
        try:
            ch.send_nowait(item)
        except trio.WouldBlock:
            pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            channels.remove(ch)


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


__all__ = [
    "Engine",
    "EngineOptions",
    "WorkerPlan",
    "open_engine",
    "remove_files_of_gone_processes",
    "remove_stale_counter_files",
]
