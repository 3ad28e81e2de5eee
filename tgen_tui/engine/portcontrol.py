"""Port control: the port state machine, per-port locks, acknowledged commands, rates,
pause/resume and clear.

Ports move through :class:`~tgen_tui.engine.api.PortState` (idle, starting, running,
stopping, stopped, failed; :data:`~tgen_tui.engine.api.TRANSITIONS`) under a per-port
lock, so commands on one port never interleave: a ``start`` that arrives while the port
is stopping waits for the stop to finish, then starts. Every command to a worker carries
a request id and is acknowledged (bounded wait). Starting a running port or stopping a
stopped one does nothing and says so in a notice. A worker that dies marks its ports
failed, with the reason, and the other workers keep running.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from tgen_tui.engine.api import (
    TRANSITIONS,
    CountersCleared,
    EngineCommandError,
    PortState,
    PortStateChanged,
    RateChanged,
    StreamPaused,
    WorkerFailed,
)
from tgen_tui.engine.events import EventLog
from tgen_tui.engine.flowcontrol import apply_flow_rates, flow_workers, senders
from tgen_tui.engine.flowrates import flow_target, initial_flow_rates, plan_flow_rate
from tgen_tui.engine.lanes import port_workers, rx_rows
from tgen_tui.engine.rate_plan import changed, plan_rate, plan_scale
from tgen_tui.engine.setup import PortSetup, Setup
from tgen_tui.engine.transport import SpawnedWorker, WorkerLink
from tgen_tui.engine.workers import CommandRefused, WorkerDied, WorkerState
from tgen_tui.worker import protocol as P

ACK_TIMEOUT = 5.0  # s: a worker that does not acknowledge a command within this is dead
FLOW_CONNECT_S = 5.0  # s more for a flow worker's start (its TCP connects: worker/flows.py)
START_LEAD_NS = 20_000_000  # every worker of a start begins 20 ms ahead, together

# clear's hook into the sampler: (ports, stream positions; None: everything) -> baselines
Rebase = Callable[[set[str] | None, set[int] | None], Awaitable[Callable[[int], int]]]


def clear_targets(
    setup: Setup, ports: list[str] | None, streams: list[str] | None
) -> tuple[bool, set[str], set[int]]:
    """What ``clear(ports, streams)`` zeroes: (everything?, port names, stream positions);
    a port's streams go with it. Pure: the engine and the fake share it."""
    everything = ports is None and streams is None
    pnames = set(setup.select(ports)) if ports is not None else set()
    pos = {setup.stream_pos(s) for s in streams or []}
    for n in pnames:
        pos.update(setup.ports[n].streams)
    if everything:
        pnames, pos = set(setup.ports), set(range(len(setup.programs)))
    return everything, pnames, pos


def seq_floors(
    setup: Setup,
    pos: set[int],
    seq: Mapping[int, tuple[int, int]],
    tx_raw_base: Callable[[int], int],
) -> dict[int, int]:
    """Each cleared stream's sequence floor: a sending stream's (frames sent at the clear,
    plus what it sent between that and the sampler's new baseline), else 0. ``seq``: the
    workers' {stream index: (frames sent, raw tx count)}. The receiver counts loss above it."""
    out = {}
    for i in pos:
        g = setup.programs[i].index
        if g in seq:
            sent, raw_tx = seq[g]
            out[i] = sent + max(0, tx_raw_base(i) - raw_tx)
        else:
            out[i] = 0
    return out


@dataclass
class PortRuntime:
    """The engine's mutable view of one port (engine task only; front ends get snapshots):
    its configuration (``spec``) and where it is in its life."""

    spec: PortSetup
    state: PortState = PortState.IDLE
    failure: str | None = None
    link: str = "unknown"
    started_at: float | None = None  # monotonic s of the last start
    stopped_at: float | None = None
    active_s: float = 0.0  # accumulated sending time
    tx_done: bool = False  # the worker said every stream of the port reached its count/stop
    lanes_done: set[int] = field(default_factory=set)  # lane workers that said tx_done
    lock: trio.Lock = field(default_factory=trio.Lock)

    @property
    def name(self) -> str:
        return self.spec.name


class PortControl:
    """Commands on ports and streams, over the workers of one :class:`Setup`."""

    def __init__(self, setup: Setup, log: EventLog, drain_ms: int, stop_timeout: float) -> None:
        self.log = log
        self.drain_ms = drain_ms
        self.stop_timeout = stop_timeout
        self.send_for_s: float | None = None  # EngineOptions.send_for_s: the first start's end
        self.ports: dict[str, PortRuntime] = {}
        self.configure(setup)

    def configure(self, setup: Setup) -> None:
        """Take a (new) set-up: no worker yet, every port idle. In place, so that a command
        queued on a port's lock during a reload runs on the new workers; each port keeps
        its lock and link state."""
        old = self.ports
        self.setup = setup
        self.spawned: dict[int, SpawnedWorker] = {}
        self.ports = {}
        for ps in setup.ports.values():
            pr = PortRuntime(ps)
            if ps.name in old:
                pr.lock = old[ps.name].lock
                pr.link = old[ps.name].link
            self.ports[ps.name] = pr
        self.t0: float | None = None
        self.rates: dict[int, float] = setup.initial_rates()
        self.flow_rates: dict[int, float] = initial_flow_rates(setup)  # UDP flows, bit/s
        self.paused: set[int] = set()
        self.seq_floor: dict[int, int] = {}

    @property
    def _flow_ids(self) -> set[int]:
        return {p.id for p in self.setup.flow_plans}

    @property
    def workers(self) -> dict[int, WorkerLink]:
        return {wid: w.handle for wid, w in self.spawned.items()}

    # ------------------------------------------------------------------ states
    def set_state(self, pr: PortRuntime, new: PortState, reason: str | None = None) -> None:
        old = pr.state
        if old == new:
            return
        if new not in TRANSITIONS[old]:
            raise RuntimeError(f"port {pr.name}: illegal transition {old} -> {new}")
        pr.state = new
        if new == PortState.FAILED:
            pr.failure = reason
        self.log.emit(PortStateChanged(self.log.now(), pr.name, str(old), str(new), reason))

    def on_worker_event(self, st: WorkerState, ev: P.Event | None) -> None:
        """A worker's event (None: its process exited)."""
        if ev is None:
            if st.quitting:
                return
            reason = st.exit_reason or "worker exited"
            now = self.log.now()
            self.log.emit(WorkerFailed(now, st.plan.id, st.plan.core, tuple(st.plan.ports), reason))
            for pn in st.plan.ports:
                pr = self.ports.get(pn)
                if pr is not None and pr.state != PortState.FAILED:
                    self.set_state(pr, PortState.FAILED, reason)
        elif isinstance(ev, P.TxDone) and ev.port in self.ports:
            pr = self.ports[ev.port]  # done when every lane and flow worker of it is
            pr.lanes_done.add(st.plan.id)
            pr.tx_done = pr.lanes_done >= set(senders(self.setup, ev.port))
        elif isinstance(ev, P.Error) and ev.id is None:
            self.log.warning(f"worker {st.plan.id}: {ev.message}")
        elif isinstance(ev, P.FlowsReady):
            for note in ev.notes:  # limits a flow worker raised in the tester's namespaces
                self.log.notice(f"worker {st.plan.id}: {note}")

    def ports_done_sending(self) -> bool:
        """True when every sending port's worker reported ``tx_done``."""
        sending = [pr for pr in self.ports.values() if pr.spec.streams or pr.spec.flows]
        return bool(sending) and all(pr.tx_done for pr in sending)

    def requested_pps(self, stream_i: int) -> float:
        return 0.0 if stream_i in self.paused else self.rates[stream_i]

    @contextlib.asynccontextmanager
    async def holding(self, names: list[str]) -> AsyncIterator[None]:
        """Hold the per-port locks of ``names`` (in a fixed order: no deadlock)."""
        async with contextlib.AsyncExitStack() as stack:
            for n in sorted(set(names)):
                await stack.enter_async_context(self.ports[n].lock)
            yield

    def _by_worker(self, names: list[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for n in names:  # its frame workers (one, or one per lane), then its flow workers
            for wid in port_workers(self.setup.plans, n) + flow_workers(self.setup, n):
                out.setdefault(wid, []).append(n)
        return out

    # ------------------------------------------------------------------ start / stop
    async def start(self, ports: list[str] | None = None) -> None:
        """Start sending on ports (default all). Ports started together share one t0.

        A running port is left alone (a notice says so); a stopping port is waited for,
        then started; a failed port is refused with :class:`EngineCommandError` when it
        was named, and skipped with a warning when all ports were asked for."""
        names = self.setup.select(ports)
        refused: list[tuple[str, str]] = []
        async with self.holding(names):
            todo = []
            for n in names:
                pr = self.ports[n]
                if pr.state == PortState.FAILED:
                    refused.append((n, f"failed: {pr.failure}"))
                elif pr.state == PortState.RUNNING:
                    self.log.notice(f"port {n} is already running: start does nothing")
                else:
                    todo.append(n)
            if todo:
                await self._start_locked(todo)
        if refused and ports is None:
            for n, why in refused:
                self.log.warning(f"port {n} not started: {why}")
        elif refused:
            raise EngineCommandError(refused[0][0], f"cannot start: {refused[0][1]}")

    async def _start_locked(self, names: list[str]) -> None:
        now_ns = time.monotonic_ns() + START_LEAD_NS
        end_ns = None
        if self.t0 is None:
            self.t0 = now_ns / 1e9
            if self.send_for_s:  # a run of known length: no frame due after its end
                end_ns = now_ns + int(self.send_for_s * 1e9)
        by_worker = self._by_worker(names)
        last = {pn: wid for wid, pns in by_worker.items() for pn in pns}  # a port's last lane
        for wid, pns in by_worker.items():  # a port with lanes: each lane, same t0
            for pn in pns:
                if self.ports[pn].state not in (PortState.STARTING, PortState.FAILED):
                    self.ports[pn].tx_done = False  # before the command: tx_done may come fast
                    self.ports[pn].lanes_done.clear()
                    self.set_state(self.ports[pn], PortState.STARTING)
            # a flow worker's start connects its TCP flows again after a stop (3 s at most)
            ack = ACK_TIMEOUT + (FLOW_CONNECT_S if wid in self._flow_ids else 0.0)
            try:
                await self.workers[wid].request(
                    P.Start(ports=pns, t0_ns=now_ns, end_ns=end_ns), ack
                )
            except (WorkerDied, CommandRefused) as e:
                for pn in pns:
                    if self.ports[pn].state != PortState.FAILED:
                        self.set_state(self.ports[pn], PortState.FAILED, f"start: {e}")
                continue
            for pn in pns:
                pr = self.ports[pn]
                if pr.state == PortState.STARTING and last[pn] == wid:
                    pr.started_at, pr.stopped_at = now_ns / 1e9, None
                    self.set_state(pr, PortState.RUNNING)

    async def stop(self, ports: list[str] | None = None, drain_ms: int | None = None) -> None:
        """Stop ports: the worker stops sending at once, keeps counting for drain_ms, then
        reports final counters. Waits at most ``drain + stop_timeout``; a worker that does not
        answer is killed and its ports are marked failed. Stopping a port that is not
        running does nothing and says so."""
        names = self.setup.select(ports)
        async with self.holding(names):
            todo = []
            for n in names:
                pr = self.ports[n]
                if pr.state == PortState.RUNNING:
                    todo.append(n)
                elif ports is not None and pr.state != PortState.FAILED:
                    self.log.notice(f"port {n} is not running ({pr.state}): stop does nothing")
            if todo:
                await self.stop_locked(todo, drain_ms)

    async def stop_locked(self, names: list[str], drain_ms: int | None) -> None:
        drain = self.drain_ms if drain_ms is None else drain_ms
        waits: list[tuple[str, int, trio.Event]] = []  # (port, worker, its stopped event)
        stop_at = time.monotonic()
        for wid, pns in self._by_worker(names).items():
            st = self.spawned[wid].state
            for pn in pns:
                ev = st.stopped[pn] = trio.Event()
                waits.append((pn, wid, ev))
                self.set_state(self.ports[pn], PortState.STOPPING)
            try:
                await self.workers[wid].send(P.Stop(ports=pns, drain_ms=drain))
            except WorkerDied:
                for pn in pns:
                    st.stopped[pn].set()
        for pn in dict.fromkeys(pn for pn, _, _ in waits):
            pr = self.ports[pn]
            pr.active_s += stop_at - (pr.started_at or stop_at)
            pr.stopped_at = stop_at
        limit = drain / 1000 + self.stop_timeout
        with trio.move_on_after(limit):
            for _, _, ev in waits:
                await ev.wait()
        for pn, wid, ev in waits:
            pr = self.ports[pn]
            if pr.state == PortState.FAILED:
                continue
            if ev.is_set():
                if all(e.is_set() for p, _, e in waits if p == pn):  # every lane reported
                    self.set_state(pr, PortState.STOPPED)
                continue
            h = self.workers[wid]
            h.state.exit_reason = (
                f"worker {wid} did not report final counters within {limit:.1f} s: killed"
            )
            h.kill()
            self.set_state(pr, PortState.FAILED, h.state.exit_reason)

    # ------------------------------------------------------------------ rates
    async def set_rate(self, target: str, rate: str | float) -> float:
        """Set the rate of a stream (by name) or of a port (its streams scaled in
        proportion so that they sum to the rate). ``rate`` is written as in profiles:
        ``25kpps``, ``100Mbit`` (L1; ``100Mbit L2``), ``10%`` of the port's speed, or a
        number of frames/s. Takes effect at once on a running port (the pacer re-bases
        at the current frame and time). Returns the target's new frames/s; for a UDP
        socket flow (or a port with only flows: :mod:`~tgen_tui.engine.flowrates`), its
        new bit/s."""
        if flow_target(self.setup, target):
            fnew, bps = plan_flow_rate(self.setup, self.flow_rates, target, rate)
            await apply_flow_rates(
                self.setup,
                self.flow_rates,
                fnew,
                states={n: p.state for n, p in self.ports.items()},
                workers=self.workers,
                log=self.log,
                request=str(rate),
                ack_timeout=ACK_TIMEOUT,
            )
            return bps
        new, result = plan_rate(self.setup, self.rates, target, rate)
        await self.apply_rates(new, str(rate))
        return result

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        """Multiply the rate of every stream (of ``ports``; default all) by ``factor``."""
        await self.apply_rates(plan_scale(self.setup, self.rates, factor, ports), f"x{factor:g}")

    async def apply_rates(self, new: dict[int, float], request: str) -> None:
        for i in changed(self.rates, new):
            old, r = self.rates[i], new[i]
            prog = self.setup.programs[i]
            pr = self.ports[prog.port]
            self.rates[i] = r
            # a paused stream gets the rate too: its pacer keeps it for the resume
            if pr.state != PortState.FAILED:
                try:
                    for wid in port_workers(self.setup.plans, prog.port):  # each lane: r / lanes
                        await self.workers[wid].request(
                            P.SetRate(stream=prog.index, pps=r), ACK_TIMEOUT
                        )
                except (WorkerDied, CommandRefused) as e:
                    self.rates[i] = old
                    raise EngineCommandError(prog.name, f"rate change refused: {e}") from None
            self.log.emit(RateChanged(self.log.now(), prog.name, prog.port, old, r, request))

    async def pause(self, stream: str, paused: bool = True) -> None:
        """Stop one stream's frames from becoming due (``paused``), or resume it at its
        rate, re-based at the current time; the port keeps running."""
        i = self.setup.stream_pos(stream)
        if (i in self.paused) == paused:
            self.log.notice(f"stream {stream} is already {'paused' if paused else 'running'}")
            return
        prog = self.setup.programs[i]
        pr = self.ports[prog.port]
        if pr.state == PortState.FAILED:
            raise EngineCommandError(stream, f"port {prog.port} failed: {pr.failure}")
        cmd = P.Pause if paused else P.Resume
        try:
            for wid in port_workers(self.setup.plans, prog.port):
                await self.workers[wid].request(cmd(stream=prog.index), ACK_TIMEOUT)
        except (WorkerDied, CommandRefused) as e:
            raise EngineCommandError(stream, f"{'pause' if paused else 'resume'}: {e}") from None
        if paused:
            self.paused.add(i)
        else:
            self.paused.discard(i)
        self.log.emit(StreamPaused(self.log.now(), stream, paused))

    # ------------------------------------------------------------------ clear
    async def clear(
        self, ports: list[str] | None, streams: list[str] | None, rebase: Rebase
    ) -> None:
        """Zero counters: of ``ports`` (their port counters and the streams they send), of
        ``streams``, or of everything (both None). Sender and receiver are reset together:
        an idle or stopped stream's sequence restarts at 0 with the receiver's window, and a
        sending stream's receiver re-bases on its next frames, so no phantom loss appears.
        ``rebase`` takes the sampler's baselines and returns the raw tx count of a stream
        position at its new baseline."""
        everything, pnames, pos = clear_targets(self.setup, ports, streams)
        seq = await self._clear_workers(sorted(self.setup.programs[i].index for i in pos))
        tx_raw_base = await rebase(None if everything else pnames, None if everything else pos)
        self.seq_floor.update(seq_floors(self.setup, pos, seq, tx_raw_base))
        names = tuple(self.setup.programs[i].name for i in sorted(pos))
        self.log.emit(CountersCleared(self.log.now(), tuple(sorted(pnames)), names))

    async def _clear_workers(self, gidx: list[int]) -> dict[int, tuple[int, int]]:
        """Tell every live worker; returns {stream index: (frames sent, raw tx count)} of
        the sending streams, from the workers' acknowledgements."""
        seq: dict[int, tuple[int, int]] = {}
        lanes = max(1, self.setup.lanes)
        if lanes > 1:  # every lane's rx row, also on a one-lane receiver (its block is 0)
            block = self.setup.n_streams // lanes
            gidx = [r for g in gidx for r in rx_rows(g, block, lanes)]
        for h in self.workers.values():
            if not h.state.alive:
                continue
            try:
                reply: Any = await h.request(
                    P.Clear(ports=list(h.plan.ports), streams=gidx), ACK_TIMEOUT
                )
            except (WorkerDied, CommandRefused) as e:
                self.log.warning(f"clear on worker {h.plan.id}: {e}")
                continue
            for k, v in (reply.get("seq") or {}).items():  # reply is a P.Cleared
                a = seq.get(int(k), (0, 0))  # a stream's lanes: their counts add up
                seq[int(k)] = (a[0] + int(v[0]), a[1] + int(v[1]))
        return seq

    # ------------------------------------------------------------------ the end
    async def quit_workers(self) -> None:
        """Ask every worker to quit (2 s at most), then kill what is left."""
        handles = list(self.workers.values())
        for h in handles:
            h.state.quitting = True
            with contextlib.suppress(WorkerDied):
                await h.send(P.Quit())
        with trio.move_on_after(2):
            while any(h.state.alive for h in handles):
                await trio.sleep(0.02)
        for h in handles:
            h.kill()
            with contextlib.suppress(OSError):
                os.unlink(h.state.shm_path)


__all__ = ["ACK_TIMEOUT", "PortControl", "PortRuntime"]
