"""Worker supervision: spawn one worker process, talk JSON lines to it, notice when it dies.

A frame worker runs ``python -m tgen_tui.worker --core N --parent-pid P``, a flow worker
(socket flows) ``python -m tgen_tui.worker.flows`` with the same options: import-light,
pinned, dying with its parent through PR_SET_PDEATHSIG. The supervisor task owns the
process: it configures it, hands the engine a handle once the worker reports ``ready``
(``nursery.start`` handshake), routes its events, and when the process exits for any
reason other than a requested quit, marks the worker's ports failed with the reason
(exit code or signal, and the last line the worker wrote on stderr).
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.flowplan import FlowPlan
from tgen_tui.packets.program import StreamProgram, program_to_dict
from tgen_tui.worker import protocol as P
from tgen_tui.worker.client import FLOW_WORKER, FRAME_WORKER, stderr_suffix, worker_argv
from tgen_tui.worker.client import describe_exit as _describe_exit


@dataclass
class WorkerState:
    """Mutable supervisor-side state of one worker (engine task only)."""

    plan: WorkerPlan | FlowPlan
    shm_path: str
    pid: int | None = None
    alive: bool = False
    quitting: bool = False
    exit_reason: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    stopped: dict[str, trio.Event] = field(default_factory=dict)
    stopped_info: dict[str, P.Stopped] = field(default_factory=dict)
    layout: P.Ready | None = None  # a frame worker's ready
    flows_ready: P.FlowsReady | None = None  # a flow worker's
    errors: list[str] = field(default_factory=list)
    replies: dict[str, tuple[trio.Event, list[P.Event]]] = field(default_factory=dict)
    tx_why: dict[str, str] = field(default_factory=dict)  # port -> why its send path was chosen
    stamps_path: str | None = None  # the shared kernel tx timestamp table (worker/txstamps)
    flow_specs: list[dict] = field(default_factory=list)  # a flow worker's flows (plain data)


class CommandRefused(Exception):
    """The worker answered a command with an error event (its message says why)."""


class WorkerDied(Exception):
    """The worker process exited before it was asked to."""


class WorkerHandle:
    """The engine's side of one worker: send commands, await events, read its pid and state."""

    def __init__(
        self, state: WorkerState, on_event: Callable[[WorkerState, P.Event | None], None]
    ) -> None:
        self.state = state
        self._on_event = on_event
        self._proc: trio.Process | None = None
        self._send_lock = trio.Lock()
        self._next_id = 0

    @property
    def plan(self) -> WorkerPlan | FlowPlan:
        return self.state.plan

    async def send(self, msg: P.Command) -> None:
        if self._proc is None or not self.state.alive or self._proc.stdin is None:
            raise WorkerDied(self.state.exit_reason or "worker not running")
        data = P.encode(msg)
        async with self._send_lock:
            try:
                await self._proc.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                raise WorkerDied(self.state.exit_reason or f"worker pipe closed: {e}") from None

    async def request(self, msg: P.Command, timeout: float = 5.0) -> P.Event:
        """Send a command with a request id and wait (bounded) for the event that echoes it.
        Raises CommandRefused when the worker answers with an error, WorkerDied when it
        exits or does not answer within ``timeout`` seconds."""
        self._next_id += 1
        rid = f"r{self._next_id}"
        ev = trio.Event()
        box: list[P.Event] = []
        self.state.replies[rid] = (ev, box)
        try:
            await self.send(dataclasses.replace(msg, id=rid))
            with trio.move_on_after(timeout):
                await ev.wait()
        finally:
            self.state.replies.pop(rid, None)
        if not box:
            if not self.state.alive:
                raise WorkerDied(self.state.exit_reason or "worker exited")
            raise WorkerDied(
                f"worker {self.state.plan.id} did not acknowledge {msg.KIND!r} within {timeout:g} s"
            )
        reply = box[0]
        if isinstance(reply, P.Error):
            raise CommandRefused(reply.message)
        return reply

    def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            try:
                self._proc.kill()
            except ProcessLookupError:
                pass

    async def run(
        self,
        ports: list[dict],
        n_streams: int,
        task_status: trio.TaskStatus[WorkerHandle] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """A frame worker's supervisor task: spawn, configure, report ready, then pump
        events until it exits."""
        st = self.state
        configure = P.Configure(
            shm=st.shm_path, n_streams=n_streams, ports=ports, stamps=st.stamps_path
        )
        await self._supervise(FRAME_WORKER, configure, task_status)

    async def run_flows(
        self,
        flows: list[dict],
        task_status: trio.TaskStatus[WorkerHandle] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """A flow worker's supervisor task (``flows``: its flows' plain data)."""
        configure = P.ConfigureFlows(shm=self.state.shm_path, flows=flows)
        await self._supervise(FLOW_WORKER, configure, task_status)

    async def _supervise(
        self, module: str, configure: P.Command, task_status: trio.TaskStatus[WorkerHandle]
    ) -> None:
        st = self.state
        proc = await trio.lowlevel.open_process(
            worker_argv(st.plan.core, module),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._proc = proc
        st.pid = proc.pid
        st.alive = True
        ready = trio.Event()
        started = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump_stderr, proc)
                await self.send(configure)

                async def pump_stdout() -> None:
                    buf = b""
                    assert proc.stdout is not None
                    while True:
                        chunk = await proc.stdout.receive_some(65536)
                        if not chunk:
                            break
                        buf += chunk
                        while b"\n" in buf:
                            line, buf = buf.split(b"\n", 1)
                            if not line.strip():
                                continue
                            self._take_line(line, ready)

                nursery.start_soon(pump_stdout)
                await self._await_ready(
                    ready,
                    task_status,
                    lambda: "worker did not become ready within 15 s" + self._tail(),
                )
                started = True
                rc = await proc.wait()
                st.alive = False
                if not st.quitting:
                    st.exit_reason = f"worker {st.plan.id} (core {st.plan.core}, pid {proc.pid}) {_describe_exit(rc)}{self._tail()}"
                self._wake_waiters()  # the process exited
                nursery.cancel_scope.cancel()
        finally:
            st.alive = False
            if proc.returncode is None:
                with trio.CancelScope(shield=True):
                    proc.kill()
                    await proc.wait()
            if not started and st.exit_reason is None:
                st.exit_reason = f"worker {st.plan.id} failed to start: {_describe_exit(proc.returncode)}{self._tail()}"

    def _tail(self) -> str:
        return stderr_suffix(self.state.stderr_tail)

    def _take_line(self, line: bytes, ready: trio.Event) -> None:
        """One line the worker wrote: an event is handled, anything else kept as stderr."""
        try:
            ev = P.decode_event(line)
        except ValueError:
            self.state.stderr_tail.append(line.decode(errors="replace")[:200])
            return
        self._handle(ev, ready)

    async def _await_ready(
        self, ready: trio.Event, task_status, not_ready: Callable[[], str]
    ) -> None:
        """Wait (15 s at most) for the worker's ready (or its error), then report it started."""
        st = self.state
        with trio.move_on_after(15) as cs:
            await ready.wait()
        if cs.cancelled_caught or not st.alive:
            raise WorkerDied(st.exit_reason or not_ready())
        if st.errors and not (st.layout or st.flows_ready):
            raise WorkerDied(st.errors[-1])
        task_status.started(self)

    def _wake_waiters(self) -> None:
        """The worker is gone: tell the engine (event None) and wake every waiter."""
        st = self.state
        self._on_event(st, None)
        for ev in st.stopped.values():
            ev.set()
        for ev, _box in st.replies.values():
            ev.set()

    def _handle(self, ev: P.Event, ready: trio.Event) -> None:
        st = self.state
        if ev.id is not None and ev.id in st.replies and not isinstance(ev, P.Stopped):
            waiter, box = st.replies[ev.id]
            if not box:
                box.append(ev)
                waiter.set()
        if isinstance(ev, P.Ready):
            st.layout = ev
            ready.set()
        elif isinstance(ev, P.FlowsReady):
            st.flows_ready = ev
            ready.set()
        elif isinstance(ev, P.Stopped):
            st.stopped_info[ev.port] = ev
            e = st.stopped.get(ev.port)
            if e is not None:
                e.set()
        elif isinstance(ev, P.Error):
            st.errors.append(ev.message)
            if not (st.layout or st.flows_ready):
                ready.set()
        self._on_event(st, ev)

    async def _pump_stderr(self, proc: trio.Process) -> None:
        assert proc.stderr is not None
        buf = b""
        while True:
            chunk = await proc.stderr.receive_some(65536)
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self.state.stderr_tail.append(line.decode(errors="replace")[:300])
            del self.state.stderr_tail[:-20]


def port_config(
    name: str,
    interface: str,
    netns: str | None,
    programs: list[StreamProgram],
    tx_path: str | None = None,
    l3: dict | None = None,
    pacing: str | None = None,
    lanes: int = 1,
    has_flows: bool = False,
    rx_replays: list[StreamProgram] | None = None,
) -> dict:
    """The ``ports`` entry of a configure command.

    ``tx_path`` 'auto' (or None) becomes the path ``tgen calibrate`` cached for this host
    and driver, else the default; the entry says which and why (``tx_path_source``:
    profile, cache or default; ``tx_path_why``). ``pacing`` 'auto' (or None) becomes what
    :func:`~tgen_tui.calibrate.pacing.resolve_pacing` picks for the port's streams and
    this host (``pacing``, ``pacing_why``).
    """
    from tgen_tui.calibrate.resolve import resolve

    d: dict[str, Any] = {
        "name": name,
        "interface": interface,
        "netns": netns,
        "rx": True,
        "tx_streams": [program_to_dict(p) for p in programs],
    }
    if l3 is not None:  # L3 identity: resolved MACs, ARP/ND responder (issue 19)
        d["l3"] = l3
    if rx_replays:  # replayed captures arriving here: their unsigned frames are counted by flow
        d["rx_replays"] = [program_to_dict(p) for p in rx_replays]
    if programs:
        biggest = max(len(p.template) for p in programs)
        pps = sum(p.schedule.pps for p in programs)
        d.update(resolve(tx_path, interface, netns, max_frame=biggest, pps=pps).port_fields())
        d.update(_pacing(pacing, programs, d["tx_path"], interface, netns, lanes, has_flows))
    return d


def _pacing(
    requested: str | None, programs: list[StreamProgram], tx_path: str, interface: str,
    netns: str | None, lanes: int, has_flows: bool,
) -> dict:  # fmt: skip
    """A port's pacing fields; the host's spacing ceilings only when auto needs them."""
    from tgen_tui.calibrate import iface
    from tgen_tui.calibrate.pacing import ceilings, resolve_pacing

    limits = (0.0, 0.0, "default")
    if (requested or "auto") == "auto":
        try:
            drv = iface.driver(interface, netns)
        except (OSError, ValueError):
            drv = "unknown"
        limits = ceilings(drv, interface, netns)
    return resolve_pacing(requested, programs, tx_path, lanes, has_flows, limits).port_fields()
