"""How the engine reaches its workers: the :class:`WorkerTransport` protocol and the
:class:`LocalTransport` (worker processes on this machine, pipes and shared memory).

A transport spawns the workers of a :class:`~tgen_tui.engine.setup.Setup` and hands back,
for each, a :class:`SpawnedWorker`: the handle the engine sends commands through
(:class:`WorkerLink`) and the worker's counter block (a
:class:`~tgen_tui.worker.counters.CounterView`, mapped or copied). It also reads the
interface counters, link states and CPU figures the sampler needs, and frees everything
at the end. The Ray transport (several tester hosts) lives in ``tgen_tui.cluster`` and
comes in through ``EngineOptions.transport``: the engine never imports it.

Life of a transport, as the engine drives it::

    t = LocalTransport(options)
    await t.prepare(setup, notice)       # stale files, interfaces exist, port locks
    for plan in setup.plans:
        w = await t.spawn(plan, setup, on_event, nursery)
    for plan in setup.flow_plans:        # socket flows: flow workers on this machine
        w = await t.spawn_flows(plan, setup, on_event, nursery)
    await t.spawned()                    # start-up resources can go
    ... t.interfaces(), t.link_state(port), t.cores(), t.proc_cpu(...) at each sample
    t.check(new_setup); await t.release(); await t.prepare(new_setup, notice) ...  # reload
    await t.close()
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import trio

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.flowplan import FlowPlan
from tgen_tui.engine.lanes import lane_entries
from tgen_tui.engine.probes import CpuProbe, InterfaceProbe
from tgen_tui.engine.setup import PortSetup, Setup
from tgen_tui.engine.stats import ifc_key
from tgen_tui.engine.workers import WorkerDied, WorkerHandle, WorkerState, port_config
from tgen_tui.packets.flowprogram import flow_to_dict
from tgen_tui.worker import counters as C
from tgen_tui.worker import protocol as P
from tgen_tui.worker.flowcounters import FlowCounterView
from tgen_tui.worker.txstamps import StampTable

if TYPE_CHECKING:
    from tgen_tui.engine.options import EngineOptions, LearnSpec
    from tgen_tui.engine.snapshot import StatsSnapshot

SHM_DIR = "/dev/shm"
SHM_PREFIX = "tgen-"

EventSink = Callable[[WorkerState, "P.Event | None"], None]
Notice = Callable[[str], None]


@runtime_checkable
class WorkerLink(Protocol):
    """The engine's handle on one worker (local process or remote): commands and state.

    What the engine relies on: ``request`` answers with the event that echoes the
    command's id (``CommandRefused`` for an error event, ``WorkerDied`` when the worker
    is gone or silent); after a ``Stop``, the handle sets ``state.stopped[port]`` once the
    worker reported that port's final counters (``P.Stopped``, kept in
    ``state.stopped_info``); every event goes to the transport's ``on_event`` (None when
    the worker exits); ``state.pid``, ``state.alive``, ``state.layout`` (its ``Ready``)
    and ``state.exit_reason`` are kept current."""

    state: WorkerState

    @property
    def plan(self) -> WorkerPlan | FlowPlan: ...

    async def send(self, msg: P.Command) -> None:
        """Send a command without waiting for an answer (WorkerDied if it is gone)."""
        ...

    async def request(self, msg: P.Command, timeout: float = 5.0) -> P.Event:
        """Send a command with a request id and wait (bounded) for its acknowledgement."""
        ...

    def kill(self) -> None: ...


@dataclass
class SpawnedWorker:
    """A worker that is configured and ready: its handle and its counter block (a frame
    worker's, or a flow worker's)."""

    handle: WorkerLink
    view: C.CounterView | FlowCounterView
    where: str  # "core 3" or "host a, core 2" (for the engine's notice)
    host: str | None = None

    @property
    def state(self) -> WorkerState:
        return self.handle.state


@runtime_checkable
class WorkerTransport(Protocol):
    """Spawns workers and reads what the sampler needs besides their counters."""

    def check(self, setup: Setup) -> None:
        """Raise BadInput when this transport cannot run ``setup`` (before a reload
        stops anything)."""
        ...

    async def prepare(self, setup: Setup, notice: Notice) -> None:
        """Before ``setup``'s workers spawn: clean up after dead runs, check that every
        port's interface exists, take the port locks."""
        ...

    async def spawn(
        self, plan: WorkerPlan, setup: Setup, on_event: EventSink, nursery: trio.Nursery
    ) -> SpawnedWorker:
        """Spawn and configure ``plan``'s worker; its supervisor task runs in ``nursery``
        and reports every event (None: the process exited) to ``on_event``.
        EnvironmentProblem when it cannot start."""
        ...

    async def spawn_flows(
        self, plan: FlowPlan, setup: Setup, on_event: EventSink, nursery: trio.Nursery
    ) -> SpawnedWorker:
        """Spawn and configure a flow worker (socket flows; on this machine)."""
        ...

    async def spawned(self) -> None:
        """Every worker of the set-up was spawned (or failed): start-up resources go."""
        ...

    async def interfaces(self) -> dict[Any, dict]:
        """Interface counters of every port's namespace, keyed as ``stats.ifc_key``."""
        ...

    async def link_state(self, port: PortSetup) -> str: ...

    def cores(self) -> list[float]:
        """Per-core CPU use of this machine, % (blocking: call it in a thread)."""
        ...

    def proc_cpu(self, worker: SpawnedWorker) -> float:
        """CPU use of one worker process, % (blocking: call it in a thread)."""
        ...

    def adjust(self, snap: StatsSnapshot) -> StatsSnapshot:
        """The snapshot as the transport corrects it (cross-host latency), or as is."""
        ...

    def report(self) -> dict | None:
        """The result's ``cluster`` section: hosts, clocks, lost hosts (None: this
        machine only)."""
        ...

    async def release(self) -> None:
        """The set-up's workers are gone (a reload): free its port locks."""
        ...

    async def close(self) -> None:
        """The end: free everything (a remote host's agents kill what is left)."""
        ...


# ---------------------------------------------------------------------- files of dead runs
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


# ---------------------------------------------------------------------- shared steps
def missing_interfaces(setup: Setup, ifc: dict) -> None:
    """EnvironmentProblem naming the first port whose interface is not in its namespace."""
    for pr in setup.ports.values():
        have = ifc.get(ifc_key(pr.host, pr.netns), {})
        if pr.interface not in have:
            where = f"network namespace {pr.netns!r}" if pr.netns else "this namespace"
            if pr.host:
                where += f" of host {pr.host}"
            raise EnvironmentProblem(
                f"port {pr.name}: no interface {pr.interface!r} in {where} "
                f"(it has: {', '.join(sorted(have)) or 'nothing'})"
            )


def finish_port_entries(
    st: WorkerState,
    entries: list[dict],
    learn: dict[str, LearnSpec] | None,
    flows: dict | None = None,
) -> None:
    """Add the learn settings to the configure entries; note each port's send path and why."""
    for d in entries:
        spec = (learn or {}).get(d["name"])
        if spec is not None:
            d["learn"] = spec.to_worker()
        if (flows or {}).get(d["name"]):  # flow verification (engine.stateful)
            d["flows"] = dict(flows[d["name"]])  # type: ignore[index]
    # which send path each port uses and why (profile, tgen calibrate's cache, default)
    st.tx_why = {d["name"]: _why(d) for d in entries if d.get("tx_path_why")}
    for d in entries:  # and how its frames are spaced
        if d.get("pacing_why") and d["name"] in st.tx_why:
            st.tx_why[d["name"]] += f"; pacing {d['pacing']}: {d['pacing_why']}"


async def start_worker(
    nursery: trio.Nursery, handle: Any, entries: list[dict] | None, n_streams: int = 0
) -> None:
    """Run the handle's supervisor task until the worker is ready (EnvironmentProblem if
    not): a frame worker with its port ``entries``, a flow worker (``entries`` None) with
    its plan's flows."""
    st = handle.state
    try:
        if entries is None:
            await nursery.start(handle.run_flows, st.flow_specs)
        else:
            await nursery.start(handle.run, entries, n_streams)
    except (WorkerDied, BaseExceptionGroup) as e:
        reason: BaseException = e
        while isinstance(reason, BaseExceptionGroup):
            reason = reason.exceptions[0]
        with contextlib.suppress(OSError):
            os.unlink(st.shm_path)
        if isinstance(reason, trio.Cancelled):  # Ctrl-C while it started: the run ends
            raise
        what = "flow worker" if entries is None else "worker"
        raise EnvironmentProblem(
            f"{what} for port(s) {', '.join(st.plan.ports)} could not start: {reason}"
        ) from None


def _why(port_cfg: dict) -> str:
    """'source: reason' for a port's send path, without repeating the source."""
    src, why = str(port_cfg.get("tx_path_source", "default")), str(port_cfg["tx_path_why"])
    return why if why.startswith(src) else f"{src}: {why}"


# ---------------------------------------------------------------------- local
class LocalTransport:
    """Worker processes on this machine: pipes for commands, /dev/shm for counters."""

    parallel_spawn = True  # different ports' workers may start at once (engine._spawn)

    def __init__(self, options: EngineOptions) -> None:
        self.lock_ports = options.lock_ports
        self.learn = options.learn  # RFC 9693 Responder ports: what each one's worker learns
        self.flows: dict[str, dict] = {}  # ports that verify flows (engine.stateful)
        self._setup: Setup | None = None
        self._ifprobe = InterfaceProbe()
        self._cpu = CpuProbe()
        self._locks: Any = None
        self._stamps_path: str | None = None
        self._quiet: list = []  # (netns, interface) the engine silenced (engine/quiet.py)

    def check(self, setup: Setup) -> None:
        return None

    async def prepare(self, setup: Setup, notice: Notice) -> None:
        self._setup = setup
        remove_stale_counter_files()
        from tgen_tui.engine.stateful import live_options

        live_learn, self.flows = live_options(setup.programs)
        if live_learn:  # learn: true reply streams (RFC 9693's Responder ports win)
            self.learn = {**live_learn, **(self.learn or {})}
        missing_interfaces(setup, await self.interfaces())
        self._lock(setup)
        from tgen_tui.engine import quiet

        local = [(pr.netns, pr.interface) for pr in setup.ports.values() if pr.host is None]
        self._quiet = await quiet.silence(local, notice)
        # kernel tx timestamps of sampled frames, shared by the local workers (the sender
        # writes, the receiver joins): mapped by each worker at configure, then unlinked
        self._stamps_path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-wts-{id(self):x}")
        try:
            StampTable.create(self._stamps_path, setup.n_streams).close()
        except OSError as e:  # latency between workers then comes from signature stamps
            notice(f"no shared tx timestamp table ({e}): latency from signature stamps")
            self._stamps_path = None

    def _lock(self, setup: Setup) -> None:
        if not self.lock_ports or self._locks is not None:
            return
        from tgen_tui.engine.portlock import acquire_ports

        prs = [pr for pr in setup.ports.values() if pr.host is None]  # remote: one agent per host
        self._locks = acquire_ports(
            [(pr.netns, pr.interface) for pr in prs], names=[pr.name for pr in prs]
        )

    def shm_path(self, plan: WorkerPlan | FlowPlan) -> str:
        return os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-w{plan.id}-{id(self):x}")

    async def spawn(
        self, plan: WorkerPlan, setup: Setup, on_event: EventSink, nursery: trio.Nursery
    ) -> SpawnedWorker:
        shm = self.shm_path(plan)
        st = WorkerState(plan, shm, stamps_path=self._stamps_path)
        h = WorkerHandle(st, on_event)
        entries = [port_config(*a) for a in setup.port_specs(plan)]
        lane_entries(entries, plan, setup)
        finish_port_entries(st, entries, self.learn, self.flows)
        await start_worker(nursery, h, entries, setup.n_streams)
        try:
            view = C.CounterView.open(shm)
        except OSError as e:  # a running worker nobody would quit: end it here
            h.kill()
            raise EnvironmentProblem(f"worker {plan.id}: cannot map its counters: {e}") from None
        # mapped by the worker and by us: the name can go, so a SIGKILLed run leaves no file
        with contextlib.suppress(OSError):
            os.unlink(shm)
        return SpawnedWorker(h, view, f"core {plan.core}")

    async def spawn_flows(
        self, plan: FlowPlan, setup: Setup, on_event: EventSink, nursery: trio.Nursery
    ) -> SpawnedWorker:
        shm = self.shm_path(plan)
        st = WorkerState(plan, shm)
        st.flow_specs = [flow_to_dict(setup.flows[i]) for i in plan.flows]
        h = WorkerHandle(st, on_event)
        await start_worker(nursery, h, None)
        try:
            view = FlowCounterView.open(shm)
        except (OSError, ValueError) as e:  # a running worker nobody would quit: end it here
            h.kill()
            raise EnvironmentProblem(
                f"flow worker {plan.id}: cannot map its counters: {e}"
            ) from None
        with contextlib.suppress(OSError):
            os.unlink(shm)
        return SpawnedWorker(h, view, f"core {plan.core}")

    async def spawned(self) -> None:
        if self._stamps_path:
            with contextlib.suppress(OSError):
                os.unlink(self._stamps_path)

    async def interfaces(self) -> dict[Any, dict]:
        ifc: dict[Any, dict] = {}
        setup = self._setup
        netns = {pr.netns for pr in setup.ports.values() if pr.host is None} if setup else set()
        for ns in netns:
            try:
                ifc[ns] = await trio.to_thread.run_sync(self._ifprobe.read, ns)
            except OSError:
                ifc[ns] = {}
        return ifc

    async def link_state(self, port: PortSetup) -> str:
        return await trio.to_thread.run_sync(InterfaceProbe.link_state, port.netns, port.interface)

    def cores(self) -> list[float]:
        return self._cpu.cores()

    def proc_cpu(self, worker: SpawnedWorker) -> float:
        pid = worker.state.pid
        return self._cpu.process(pid) if pid else 0.0

    def adjust(self, snap: StatsSnapshot) -> StatsSnapshot:
        return snap

    def report(self) -> dict | None:
        return None

    async def release(self) -> None:
        if self._locks is not None:
            self._locks.release()
            self._locks = None

    async def close(self) -> None:
        self._ifprobe.close()
        if self._quiet:  # the kernel's stack gets the ports back
            from tgen_tui.engine import quiet

            with trio.CancelScope(shield=True):
                await quiet.restore(self._quiet)
            self._quiet = []
        await self.release()
        from tgen_tui.engine.stateful import remove_live_tables

        remove_live_tables(self.learn)


__all__ = [
    "SHM_DIR",
    "SHM_PREFIX",
    "LocalTransport",
    "SpawnedWorker",
    "WorkerLink",
    "WorkerTransport",
    "remove_files_of_gone_processes",
    "remove_stale_counter_files",
]
