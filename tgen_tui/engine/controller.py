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
import glob
import math
import os
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

import trio

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.engine import stats
from tgen_tui.engine.api import (
    TRANSITIONS,
    CountersCleared,
    EngineCommandError,
    EngineDescription,
    EngineEvent,
    EngineNotice,
    EngineWarning,
    PortInfo,
    PortState,
    PortStateChanged,
    RateChanged,
    RateError,
    StreamInfo,
    StreamPaused,
    WorkerFailed,
    WorkerInfo,
)
from tgen_tui.engine.assignment import WorkerPlan, default_cores, plan_workers
from tgen_tui.engine.probes import CpuProbe, DutProbe, InterfaceProbe
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.workers import (
    CommandRefused,
    WorkerDied,
    WorkerHandle,
    WorkerState,
    port_config,
)
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.program import FCS_LEN, L1_OVERHEAD, StreamProgram
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.profiles.units import line_rate_fps
from tgen_tui.worker import protocol as P
from tgen_tui.worker.txstamps import StampTable

SHM_DIR = "/dev/shm"
SHM_PREFIX = "tgen-"
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


def remove_files_of_gone_processes(pattern: str, pid_field: int) -> list[str]:
    """Remove the files matching ``pattern`` whose owner is gone: the owner's pid is the
    ``pid_field``-th ``-``-separated part of the file name (a SIGKILLed run leaves them)."""
    removed = []
    for path in glob.glob(pattern):
        parts = os.path.basename(path).split("-")
        pid_text = parts[pid_field] if len(parts) > pid_field else ""
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # its owner is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


def remove_stale_counter_files(shm_dir: str = SHM_DIR) -> list[str]:
    """Remove counter files (and tx stamp tables) of tgen processes that no longer exist."""
    return remove_files_of_gone_processes(os.path.join(shm_dir, f"{SHM_PREFIX}*-w*"), 1)


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
        self._locks = None
        self._stamps_path: str | None = None
        self._ifprobe = InterfaceProbe()
        self._cpu = CpuProbe()
        self._configure(compiled)

    # ------------------------------------------------------------------ set-up
    def _configure(self, compiled: CompiledProfile) -> None:
        """Plan workers for a compiled profile (no processes yet)."""
        options = self.options
        self.compiled = compiled
        used = options.ports or list(compiled.ports)
        unknown = [p for p in used if p not in compiled.ports]
        if unknown:
            raise BadInput(
                f"--ports: unknown port(s) {', '.join(unknown)} (profile has: {', '.join(compiled.ports)})"
            )
        self.port_names = used
        self.programs: list[StreamProgram] = [p for p in compiled.streams if p.port in used]
        self.n_streams = max(len(compiled.all_stream_names), 1)
        cores = options.cores or default_cores()
        port_streams = {p: [s.name for s in self.programs if s.port == p] for p in used}
        self.plans, self.warnings = plan_workers(port_streams, cores)
        self.workers: dict[int, WorkerHandle] = {}
        self.states: dict[int, WorkerState] = {}
        old = getattr(self, "ports", {})
        self.ports: dict[str, PortRuntime] = {}
        for plan in self.plans:
            for pn in plan.ports:
                spec = compiled.ports[pn]
                pr = PortRuntime(
                    pn,
                    spec.interface,
                    spec.netns,
                    plan.id,
                    plan.core,
                    speed_bps=spec.speed_bps,
                    streams=[i for i, s in enumerate(self.programs) if s.port == pn],
                    host=getattr(spec, "host", None) if options.cluster else None,
                )
                if pn in old:
                    pr.lock = old[pn].lock
                    pr.link = old[pn].link
                self.ports[pn] = pr
        named = sorted({h for pn in used if (h := getattr(compiled.ports[pn], "host", None))})
        if named and not options.cluster:
            self.warnings.append(
                f"the profile places ports on host(s) {', '.join(named)}, but --cluster was "
                "not given: every port runs on this machine"
            )
        elif options.cluster and not named:
            self.warnings.append(
                f"--cluster {options.cluster}: no port names a host: every port runs on this machine"
            )
        self._cluster = getattr(self, "_cluster", None)
        self.t0: float | None = None
        dut_netns = options.dut_netns or compiled.dut_netns
        dut_ssh = options.dut_ssh or compiled.dut_ssh
        self._dut = DutProbe(dut_netns, dut_ssh) if (dut_netns or dut_ssh) else None
        self._rates: dict[int, float] = {i: p.schedule.pps for i, p in enumerate(self.programs)}
        self._paused: set[int] = set()
        self._seq_floor: dict[int, int] = {}
        self._dut_settings: tuple[tuple[str, str], ...] = ()
        self._last_link = 0.0
        self._acc = stats.Accumulator(self._context())

    def _context(self) -> stats.SampleContext:
        return stats.SampleContext(
            ports=tuple(
                stats.PortCtx(
                    pr.name,
                    pr.interface,
                    pr.netns,
                    pr.worker,
                    pr.core,
                    pr.speed_bps,
                    tuple(pr.streams),
                    host=pr.host,
                )
                for pr in self.ports.values()
            ),
            streams=tuple(
                stats.StreamCtx(p.name, p.index, p.port, p.rx_port) for p in self.programs
            ),
            n_streams=self.n_streams,
            warnings=tuple(self.warnings),
            dut_source=self.dut_source(),
        )

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

    async def _check_interfaces(self) -> None:
        """Every port's interface must exist in its namespace: say which one is missing."""
        ifc = await self._read_interfaces()
        for pr in self.ports.values():
            have = ifc.get(stats.ifc_key(pr.host, pr.netns), {})
            if pr.interface not in have:
                where = f"network namespace {pr.netns!r}" if pr.netns else "this namespace"
                if pr.host:
                    where += f" of host {pr.host}"
                raise EnvironmentProblem(
                    f"port {pr.name}: no interface {pr.interface!r} in {where} "
                    f"(it has: {', '.join(sorted(have)) or 'nothing'})"
                )

    def _lock_ports(self) -> None:
        if not self.options.lock_ports or self._locks is not None:
            return
        from tgen_tui.engine.portlock import acquire_ports

        prs = [pr for pr in self.ports.values() if pr.host is None]  # remote: one agent per host
        self._locks = acquire_ports(
            [(pr.netns, pr.interface) for pr in prs], names=[pr.name for pr in prs]
        )

    async def _spawn(self) -> None:
        remove_stale_counter_files()
        await self._connect_cluster()
        await self._check_interfaces()
        self._lock_ports()
        # kernel tx timestamps of sampled frames, shared by the local workers (the sender
        # writes, the receiver joins): mapped by each worker at configure, then unlinked
        self._stamps_path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-wts-{id(self):x}")
        try:
            StampTable.create(self._stamps_path, self.n_streams).close()
        except OSError as e:  # latency between workers then comes from signature stamps
            self._notice(f"no shared tx timestamp table ({e}): latency from signature stamps")
            self._stamps_path = None
        try:
            for plan in self.plans:
                await self._spawn_worker(plan)
        finally:
            if self._stamps_path:
                with contextlib.suppress(OSError):
                    os.unlink(self._stamps_path)
        for pr in self.ports.values():
            pr.link = await self._link_state(pr)
        self._last_link = time.monotonic()
        self._acc.prime(await self._read_interfaces())
        await self._baseline_dut()
        self._dut_settings = await trio.to_thread.run_sync(self._read_dut_settings)

    async def _spawn_worker(self, plan: WorkerPlan) -> None:
        shm = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-w{plan.id}-{id(self):x}")
        st = WorkerState(plan, shm)
        host = self.ports[plan.ports[0]].host
        if host is None:
            st.stamps_path = self._stamps_path
        if host is None:
            h = WorkerHandle(st, self._on_worker_event)
        else:  # the same worker on another host, through its agent (tgen_tui/cluster)
            from tgen_tui.cluster.remote import RemoteWorkerHandle

            h = RemoteWorkerHandle(st, self._on_worker_event, self._cluster, host)
        self.states[plan.id] = st
        specs = []
        for pn in plan.ports:
            spec = self.compiled.ports[pn]
            specs.append(
                (
                    pn,
                    spec.interface,
                    spec.netns,
                    [s for s in self.programs if s.port == pn],
                    getattr(spec, "tx_path", None),
                )
            )
        if host is None:
            ports = [port_config(*a) for a in specs]
        else:  # tx_path 'auto' is resolved on the port's own host (its calibration, its NIC)
            ports = await trio.to_thread.run_sync(self._cluster.port_configs, host, specs)
            for d in ports:
                skew = self._cluster.rx_skews(d["name"], self.programs)
                if skew:
                    d["clock_skew_ns"] = skew
        for d in ports:
            if (self.options.learn or {}).get(d["name"]):
                d["learn"] = dict(self.options.learn[d["name"]])
        # which send path each port uses and why (profile, tgen calibrate's cache, default)
        st.tx_why = {d["name"]: _why(d) for d in ports if d.get("tx_path_why")}
        try:
            await self._nursery.start(h.run, ports, self.n_streams)
        except (WorkerDied, BaseExceptionGroup) as e:
            reason = e
            while isinstance(reason, BaseExceptionGroup):
                reason = reason.exceptions[0]
            with contextlib.suppress(OSError):
                os.unlink(shm)
            raise EnvironmentProblem(
                f"worker for port(s) {', '.join(plan.ports)} could not start: {reason}"
            ) from None
        self.workers[plan.id] = h
        tx_rows = []
        row = 0
        for pn in plan.ports:
            for i, p in enumerate(self.programs):
                if p.port == pn:
                    tx_rows.append((i, row))
                    row += 1
        view = None
        if host is not None:
            view = await trio.to_thread.run_sync(self._cluster.new_view, host, plan.id, st.shm_path)
        self._acc.attach(
            stats.WorkerCtx(plan.id, plan.core, plan.ports, plan.streams, shm, tuple(tx_rows)),
            view,
        )
        # mapped by the worker and by us: the name can go, so a SIGKILLed run leaves no file
        with contextlib.suppress(OSError):
            os.unlink(shm)
        where = f"core {plan.core}" if host is None else f"host {host}, core {h.core}"
        self._notice(
            f"worker {plan.id} (pid {st.pid}) pinned to {where}: "
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

    async def _connect_cluster(self) -> None:
        """With --cluster: join Ray, place one agent per host, measure their clocks (once:
        a reload keeps the agents, and cannot add a host)."""
        if not self.options.cluster:
            return
        hosts: dict[str, list[tuple[str | None, str]]] = {}
        for pr in self.ports.values():
            if pr.host is not None:
                hosts.setdefault(pr.host, []).append((pr.netns, pr.interface))
        if self._cluster is not None:
            self._cluster.update_hosts(hosts)  # BadInput for a host without an agent
        elif not hosts:
            return
        else:
            from tgen_tui.cluster.remote import ClusterLink

            self._cluster = await trio.to_thread.run_sync(
                ClusterLink.connect, self.options.cluster, list(hosts), hosts
            )
            self._notice_cluster()
        self._cluster.set_streams(
            [(p.name, p.port, p.rx_port) for p in self.programs],
            {n: pr.host for n, pr in self.ports.items()},
        )

    def _notice_cluster(self) -> None:
        for h, hs in self._cluster.hosts.items():
            c = hs.clock
            self._notice(
                f"host {h}: agent pid {hs.info.get('pid')} on {hs.info.get('hostname')}; clock offset "
                + (
                    f"{c.offset_ns / 1e3:+.1f} us +/- {c.uncertainty_ns / 1e3:.1f} us"
                    if c
                    else f"not measured ({hs.clock_error})"
                )
            )

    async def _link_state(self, pr: PortRuntime) -> str:
        if pr.host is not None and self._cluster is not None:
            return self._cluster.link_state(pr.host, pr.netns, pr.interface)
        return await trio.to_thread.run_sync(InterfaceProbe.link_state, pr.netns, pr.interface)

    def cluster_report(self) -> dict | None:
        """The result's ``cluster`` section (None without --cluster)."""
        return self._cluster.report() if self._cluster is not None else None

    async def _read_interfaces(self) -> dict:
        ifc = {}
        if self._cluster is not None:  # remote blocks and counters, fetched together
            await self._cluster.refresh()
            ifc.update(self._cluster.interfaces())
        for ns in {pr.netns for pr in self.ports.values() if pr.host is None}:
            try:
                ifc[ns] = await trio.to_thread.run_sync(self._ifprobe.read, ns)
            except OSError:
                ifc[ns] = {}
        return ifc

    def plan_text(self) -> list[str]:
        """Human-readable worker → core → port → streams mapping, each field labelled."""
        lines = []
        for p in self.plans:
            streams = ", ".join(p.streams) or "(receive only)"
            host = self.ports[p.ports[0]].host if p.ports else None
            at = f"host {host}: " if host else ""
            lines.append(
                f"worker {p.id}: {at}core {p.core}: port {', '.join(p.ports)}: streams {streams}"
            )
        return lines + [f"warning: {w}" for w in self.warnings]

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
        if self._cluster is not None:  # every agent kills what is left, then goes
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._cluster.close)
        for ch in self._subscribers + self._event_subs:
            ch.close()
        self._acc.close()
        self._ifprobe.close()
        if self._locks is not None:
            self._locks.release()

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
        return self.programs[i].sizes.mean + FCS_LEN

    def _port_line_fps(self, port: str, rates: dict[int, float]) -> tuple[float, float]:
        """(line-rate fps at the port's rate-weighted mean frame size, that mean size)."""
        pr = self.ports[port]
        mine = pr.streams
        tot = sum(rates[i] for i in mine)
        if mine and tot > 0:
            mean = sum(rates[i] * self._stream_mean_bytes(i) for i in mine) / tot
        elif mine:
            mean = sum(self._stream_mean_bytes(i) for i in mine) / len(mine)
        else:
            mean = 64.0
        return line_rate_fps(pr.speed_bps, mean), mean

    def _check_line_rate(self, port: str, rates: dict[int, float], target: str) -> None:
        pr = self.ports[port]
        bits = sum(rates[i] * (self._stream_mean_bytes(i) + L1_OVERHEAD) * 8 for i in pr.streams)
        if bits > pr.speed_bps * (1 + 1e-9):
            top, mean = self._port_line_fps(port, rates)
            raise RateError(
                target,
                f"{bits / 1e6:,.1f} Mbit/s (L1) exceeds the line rate of port {port}: "
                f"the maximum is {pr.speed_bps / 1e9:g} Gbit/s = {top:,.0f} fps at {mean:g} B",
            )

    def _resolve_rate(
        self, rate: str | float, mean_bytes: float, speed: float, target: str
    ) -> float:
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
            total = self._resolve_rate(rate, mean, pr.speed_bps, target)
            have = sum(self._rates[i] for i in pr.streams) or 1.0
            for i in pr.streams:
                new[i] = self._rates[i] * total / have
            port = target
            result = total
        else:
            i = self._stream_pos(target)
            port = self.programs[i].port
            new[i] = self._resolve_rate(
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
        same = (
            list(compiled.ports) == list(self.compiled.ports)
            and all(compiled.ports[n] == self.compiled.ports[n] for n in compiled.ports)
            and [_sans_rate(p) for p in compiled.streams if p.port in self.port_names]
            == [_sans_rate(p) for p in self.programs]
        )
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
        if self._cluster is not None:  # refuse a new host before anything stops
            self._cluster.update_hosts(
                {h: [] for p in compiled.ports.values() if (h := getattr(p, "host", None))}
            )
        names = list(self.ports)
        async with self._holding(names):
            running = [n for n in names if self.ports[n].state == PortState.RUNNING]
            if running:
                await self._stop_locked(running, None)
            await self._quit_workers()
            self._acc.close()
            if self._locks is not None:
                self._locks.release()
                self._locks = None
            self._configure(compiled)
            await self._spawn()
        self._notice(f"profile {compiled.name} reloaded: workers re-spawned, ports idle")

    # ------------------------------------------------------------------ description
    def describe(self) -> EngineDescription:
        """A frozen description of ports, workers, cores and streams."""
        ports = []
        for pr in self.ports.values():
            top, _ = self._port_line_fps(pr.name, self._rates)
            ports.append(
                PortInfo(
                    pr.name,
                    pr.interface,
                    pr.netns,
                    pr.speed_bps,
                    pr.worker,
                    pr.core,
                    tuple(self.programs[i].name for i in pr.streams),
                    top,
                )
            )
        streams = []
        for i, p in enumerate(self.programs):
            flows = 1
            for f in p.fields:
                if f.mode != "fixed" and f.name in ("src_ip", "dst_ip", "src_port", "dst_port"):
                    flows *= f.span
            streams.append(
                StreamInfo(
                    p.name,
                    p.index,
                    p.port,
                    p.rx_port,
                    self._rates[i],
                    self._stream_mean_bytes(i),
                    flows,
                    i in self._paused,
                )
            )
        workers = []
        for plan in self.plans:
            st = self.states.get(plan.id)
            paths = st.layout.tx_path if st and st.layout else {}
            workers.append(
                WorkerInfo(
                    plan.id,
                    plan.core,
                    plan.ports,
                    plan.streams,
                    st.pid if st else None,
                    ", ".join(sorted(set(paths.values()))) or None,
                )
            )
        return EngineDescription(
            self.compiled.name,
            self.compiled.profile_hash,
            self.compiled.seed,
            tuple(ports),
            tuple(streams),
            tuple(workers),
            self.dut_source(),
            tuple(self.warnings),
        )

    def finite_total(self) -> int | None:
        """Frames all streams will send in total, or None if any runs until stopped."""
        totals = [DueTimes(p.schedule).total() for p in self.programs]
        return None if None in totals else sum(totals)

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
                    0.0
                    if not (st.pid and st.alive)
                    else self._cpu.process(st.pid)
                    if self._host_of(wid) is None
                    else self._cluster.proc_cpu(self._host_of(wid), wid)
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

    def _host_of(self, wid: int) -> str | None:
        st = self.states[wid]
        return self.ports[st.plan.ports[0]].host if st.plan.ports else None

    async def _publish(self, final: bool = False) -> StatsSnapshot:
        ifc = await self._read_interfaces()
        cores = await trio.to_thread.run_sync(self._cpu.cores)
        dut_reading = await trio.to_thread.run_sync(self._dut.read) if self._dut else None
        if time.monotonic() - self._last_link >= LINK_EVERY:
            self._last_link = time.monotonic()
            for pr in self.ports.values():
                pr.link = await self._link_state(pr)
        live = await trio.to_thread.run_sync(self._live)
        rd = stats.Readings(ifc, cores, dut_reading, self._dut_settings)
        snap = self._acc.sample(rd, live, final=final)
        if self._cluster is not None:  # latency notes of streams across hosts
            snap = self._cluster.adjust(snap)
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


def _why(port_cfg: dict) -> str:
    """'source: reason' for a port's send path, without repeating the source."""
    src, why = str(port_cfg.get("tx_path_source", "default")), str(port_cfg["tx_path_why"])
    return why if why.startswith(src) else f"{src}: {why}"


def _sans_rate(p: StreamProgram):
    """A program with its rate blanked, to tell rate-only edits from the rest."""
    from dataclasses import replace

    return replace(p, schedule=replace(p.schedule, pps=0.0))


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


__all__ = ["Engine", "EngineOptions", "WorkerPlan", "open_engine", "remove_stale_counter_files"]
