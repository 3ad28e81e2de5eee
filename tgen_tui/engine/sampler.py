"""The sampler task: reads the counters and probes at a fixed rate and publishes
immutable :class:`~tgen_tui.engine.snapshot.StatsSnapshot` objects (DESIGN rule 4).

The counters become figures in :mod:`tgen_tui.engine.stats` (the accumulator) and
:mod:`tgen_tui.engine.figures` (each figure defined once); this module gathers the
inputs (interface counters, link states, CPU, the DUT's conntrack) through the
transport and the DUT probe, and hands the snapshots out: the newest one
(``latest``), and a channel per subscriber.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import trio

from tgen_tui.dut.ctstates import EVERY_S as STATES_EVERY_S
from tgen_tui.dut.ctstates import ConntrackStates
from tgen_tui.dut.settings import dut_settings
from tgen_tui.engine import stats
from tgen_tui.engine.events import EventLog, fan_out
from tgen_tui.engine.flowplan import FlowPlan
from tgen_tui.engine.linkwatch import LinkWatch, read_local
from tgen_tui.engine.losscauses import LossCauses
from tgen_tui.engine.portcontrol import PortControl
from tgen_tui.engine.probes import DutProbe
from tgen_tui.engine.setup import Setup
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.transport import SpawnedWorker, WorkerTransport
from tgen_tui.worker import counters as C

LINK_EVERY = 1.0  # s between link-state reads of ports on other hosts (local: every sample)


class Sampler:
    """Snapshots of the workers, ports and DUT of a set-up (a reload configures it anew;
    ``latest`` and the subscribers stay)."""

    def __init__(
        self,
        setup: Setup,
        transport: WorkerTransport,
        control: PortControl,
        links: LinkWatch | None = None,
    ) -> None:
        self.transport = transport
        # link states and their changes (the engine's watcher: its events go to the log)
        self.links = links or LinkWatch(lambda: self.control.ports, EventLog(), transport)
        self.latest: StatsSnapshot | None = None
        self.subscribers: list[trio.MemorySendChannel] = []
        self.configure(setup, control)

    def configure(self, setup: Setup, control: PortControl) -> None:
        """Take a (new) set-up and its port control; no worker is attached yet."""
        self.setup = setup
        self.control = control
        self.dut = (
            DutProbe(setup.dut_netns, setup.dut_ssh) if (setup.dut_netns or setup.dut_ssh) else None
        )
        self.acc = stats.Accumulator(setup.sample_context(self.dut_source))
        apps = any(f.app is not None for f in setup.flows)
        old_states: ConntrackStates | None = self.__dict__.get("states")
        if old_states is not None:
            old_states.close()
        self.states = ConntrackStates(setup.dut_netns) if apps and setup.dut_netns else None
        self.states_now: tuple[tuple[str, int], ...] = ()
        old: LossCauses | None = self.__dict__.get("losses")
        if old is not None:
            old.close()
        self.losses: LossCauses = LossCauses(
            setup.programs,
            [(p.name, p.netns, p.interface) for p in setup.ports.values() if p.host is None],
            self.dut.channel if self.dut else None,
        )
        self.dut_settings: tuple[tuple[str, str], ...] = ()
        self._last_link = 0.0

    @property
    def dut_source(self) -> str:
        return self.dut.source if self.dut else "none"

    def attach(self, w: SpawnedWorker) -> None:
        plan = w.state.plan
        if isinstance(plan, FlowPlan):
            self.acc.attach_flows(plan.id, w.view)
            return
        assert isinstance(w.view, C.CounterView)
        self.acc.attach(self.setup.worker_ctx(plan, w.state.shm_path), w.view)

    async def prime(self) -> None:
        """After spawning: link states, interface and DUT baselines, the DUT's settings."""
        await self._read_links()
        self.acc.prime(await self.transport.interfaces())
        await self._baseline_dut()
        self.dut_settings = await trio.to_thread.run_sync(self._read_dut_settings)
        await trio.to_thread.run_sync(self.losses.prime)

    async def _read_links(self) -> None:
        self._last_link = time.monotonic()
        await self.links.poll()

    def _read_dut_settings(self) -> tuple[tuple[str, str], ...]:
        if self.dut is None:
            return ()
        d = dut_settings(self.dut.channel) or {}
        return tuple((k, str(v)) for k, v in d.items() if v is not None and k != "nft")

    async def _baseline_dut(self) -> None:
        """The DUT's conntrack count before any port starts (the 'rise' is measured from it)."""
        if self.dut is not None:
            r = await trio.to_thread.run_sync(self.dut.read)
            self.acc.ct_start = r.count

    async def rebase(
        self, ports: set[str] | None, streams: set[int] | None
    ) -> Callable[[int], int]:
        """New baselines for a clear (None, None: everything, the DUT's included)."""
        self.acc.clear(await self.transport.interfaces(), ports, streams)
        if ports is None and streams is None:
            await self._baseline_dut()
            await trio.to_thread.run_sync(self.losses.rebase)
        return self.acc.tx_raw_base

    # ------------------------------------------------------------------ sampling
    def _live(self) -> stats.LiveState:
        c = self.control
        workers = {}
        for wid, w in c.spawned.items():
            st = w.state
            workers[wid] = stats.WorkerLive(
                pid=st.pid,
                alive=st.alive,
                exit_reason=st.exit_reason if not st.quitting else None,
                tx_path=(
                    ", ".join(sorted(set(st.layout.tx_path.values())))
                    if st.layout
                    else ("sockets" if st.flows_ready else None)
                ),
                tx_path_why="; ".join(f"{p}: {w}" for p, w in st.tx_why.items()) or None,
                pacing=(
                    ", ".join(sorted(set(st.layout.pacing.values())))
                    if st.layout and st.layout.pacing
                    else None
                ),
                proc_cpu_pct=self.transport.proc_cpu(w) if st.pid and st.alive else 0.0,
            )
        return stats.LiveState(
            t0=c.t0,
            port_state={n: str(p.state) for n, p in c.ports.items()},
            port_failure={n: p.failure for n, p in c.ports.items()},
            port_link={n: p.link for n, p in c.ports.items()},
            rates=dict(c.rates),
            paused=frozenset(c.paused),
            seq_floor=dict(c.seq_floor),
            workers=workers,
            link_lost=frozenset(self.links.ever_lost),
        )

    def _blocking_reads(self, where: dict) -> tuple[Any, Any, Any, stats.LiveState, Any]:
        """The local ports' links (linkwatch.read_local: ``where``), per-core CPU, the
        DUT's conntrack, the drop counters and the live state."""
        at = time.monotonic()
        links = (at, read_local(where)) if where else None
        cores = self.transport.cores()
        dut_reading = self.dut.read() if self.dut else None
        return cores, dut_reading, self.losses.read(), self._live(), links

    async def publish(self, final: bool = False) -> StatsSnapshot:
        """Sample now; the snapshot becomes ``latest`` and goes to every subscriber."""
        pre = self.acc.take()  # this machine's blocks first, then the interfaces
        ifc = await self.transport.interfaces()
        if time.monotonic() - self._last_link >= LINK_EVERY:
            self._last_link = time.monotonic()
            await self.links.poll(local=False)  # ports on other hosts
        # the blocking reads in one thread hop (in the console each hop wakes the trio
        # guest loop and asyncio: five hops a sample cost more than the reads)
        reads = await trio.to_thread.run_sync(self._blocking_reads, self.links.local())
        cores, dut_reading, counters, live, links = reads
        if links is not None:  # the carrier bits, at every sample: events in the trio thread
            self.links.apply(links[1], links[0])
            live = dataclasses.replace(
                live,
                port_link={n: p.link for n, p in self.control.ports.items()},
                link_lost=frozenset(self.links.ever_lost),
            )
        rd = stats.Readings(ifc, cores, dut_reading, self.dut_settings)
        snap = self.acc.sample(rd, live, final=final, pre=pre)
        snap = self.transport.adjust(snap)  # latency notes of streams across hosts
        snap = self.losses.apply(snap, counters)  # loss causes, DUT counters and CPU
        if self.states is not None and snap.dut is not None:
            if final:  # the result's figure is read now, not up to STATES_EVERY_S ago
                await self._read_states()
            snap = dataclasses.replace(
                snap, dut=dataclasses.replace(snap.dut, conntrack_states=self.states_now)
            )
        self.latest = snap
        fan_out(self.subscribers, snap)
        return snap

    async def _read_states(self) -> None:
        assert self.states is not None
        try:
            got = await trio.to_thread.run_sync(self.states.read)
        except OSError:
            return  # the count and its probe error say what is wrong with the DUT
        self.states_now = tuple(got.items())

    async def _states_loop(self) -> None:
        """The DUT's entries by state every STATES_EVERY_S (a dump walks the table)."""
        while True:
            await self._read_states()
            await trio.sleep(STATES_EVERY_S)

    async def run(self, interval: float, closed: Callable[[], bool]) -> None:
        """The sampler task: one snapshot per ``interval`` until ``closed()`` (and the
        DUT's entries by state beside it, for request/response flows)."""
        async with trio.open_nursery() as nursery:
            if self.states is not None:
                nursery.start_soon(self._states_loop)
            await self._sample_loop(interval, closed)
            nursery.cancel_scope.cancel()

    async def _sample_loop(self, interval: float, closed: Callable[[], bool]) -> None:
        next_t = trio.current_time() + interval  # trio's clock, not time.monotonic()
        while True:
            await trio.sleep_until(next_t)
            next_t += interval
            if trio.current_time() > next_t:  # fell behind: skip, do not burst
                next_t = trio.current_time() + interval
            if closed():
                return
            with contextlib.suppress(trio.ClosedResourceError):
                await self.publish()

    def subscribe(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        send, recv = trio.open_memory_channel[StatsSnapshot](buffer)
        self.subscribers.append(send)
        return recv

    def close(self) -> None:
        """The set-up's workers are gone: unmap their counter blocks."""
        self.acc.close()
        self.losses.close()
        if self.states is not None:
            self.states.close()

    def close_subscribers(self) -> None:
        for ch in self.subscribers:
            ch.close()


__all__ = ["LINK_EVERY", "Sampler"]
