"""The Ray transport: the engine's :class:`~tgen_tui.engine.transport.WorkerTransport`
for ports placed on other tester hosts (``--cluster``).

Ports without a host run on this machine exactly as with the
:class:`~tgen_tui.engine.transport.LocalTransport` (this class extends it); a port that
names a host runs on that host's :class:`~tgen_tui.cluster.agent.TesterAgent`, through
:class:`~tgen_tui.cluster.remote.ClusterLink` and
:class:`~tgen_tui.cluster.remote.RemoteWorkerHandle`. Front ends that take ``--cluster``
pass :func:`cluster_transport` as ``EngineOptions.transport``; the engine never imports
this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from tgen_tui.engine.transport import (
    EventSink,
    LocalTransport,
    Notice,
    SpawnedWorker,
    finish_port_entries,
    start_worker,
)
from tgen_tui.engine.workers import WorkerState

if TYPE_CHECKING:
    from tgen_tui.cluster.remote import ClusterLink
    from tgen_tui.engine.assignment import WorkerPlan
    from tgen_tui.engine.options import EngineOptions, TransportFactory
    from tgen_tui.engine.setup import PortSetup, Setup
    from tgen_tui.engine.snapshot import StatsSnapshot


class ClusterTransport(LocalTransport):
    """Local ports here, ports with a host on that host's agent (one agent per host)."""

    parallel_spawn = False  # one request at a time over the cluster link

    def __init__(self, address: str, options: EngineOptions) -> None:
        super().__init__(options)
        self.address = address
        self.link: ClusterLink | None = None

    def check(self, setup: Setup) -> None:
        if self.link is not None:  # BadInput for a host without an agent
            self.link.update_hosts({h: [] for h in setup.hosts()})

    async def prepare(self, setup: Setup, notice: Notice) -> None:
        """Join Ray, place one agent per host and measure their clocks (once: a reload
        keeps the agents, and cannot add a host); then as the local transport."""
        hosts = setup.hosts()
        if self.link is not None:
            self.link.update_hosts(hosts)
        elif hosts:
            from tgen_tui.cluster.remote import ClusterLink

            self.link = await trio.to_thread.run_sync(
                ClusterLink.connect, self.address, list(hosts), hosts
            )
            self._notice_hosts(notice)
        if self.link is not None:
            self.link.set_streams(
                [(p.name, p.port, p.rx_port) for p in setup.programs],
                {n: pr.host for n, pr in setup.ports.items()},
            )
        await super().prepare(setup, notice)

    def _notice_hosts(self, notice: Notice) -> None:
        assert self.link is not None
        for h, hs in self.link.hosts.items():
            c = hs.clock
            notice(
                f"host {h}: agent pid {hs.info.get('pid')} on {hs.info.get('hostname')}; clock offset "
                + (
                    f"{c.offset_ns / 1e3:+.1f} us +/- {c.uncertainty_ns / 1e3:.1f} us"
                    if c
                    else f"not measured ({hs.clock_error})"
                )
            )

    async def spawn(
        self, plan: WorkerPlan, setup: Setup, on_event: EventSink, nursery: trio.Nursery
    ) -> SpawnedWorker:
        host = setup.host_of(plan)
        if host is None or self.link is None:
            return await super().spawn(plan, setup, on_event, nursery)
        from tgen_tui.cluster.remote import RemoteWorkerHandle

        link = self.link
        st = WorkerState(plan, self.shm_path(plan))
        h = RemoteWorkerHandle(st, on_event, link, host)
        # tx_path 'auto' is resolved on the port's own host (its calibration, its NIC)
        entries = await trio.to_thread.run_sync(link.port_configs, host, setup.port_specs(plan))
        for d in entries:
            skew = link.rx_skews(d["name"], setup.programs)
            if skew:
                d["clock_skew_ns"] = skew
        finish_port_entries(st, entries, self.learn, self.flows)  # live learn, verification
        await start_worker(nursery, h, entries, setup.n_streams)
        try:
            view = await trio.to_thread.run_sync(link.new_view, host, plan.id, st.shm_path)
        except Exception:  # a running worker nobody would quit: end it here
            h.kill()
            raise
        return SpawnedWorker(h, view, f"host {host}, core {h.core}", host=host)

    async def interfaces(self) -> dict[Any, dict]:
        ifc: dict[Any, dict] = {}
        if self.link is not None:  # remote blocks and counters, fetched together
            await self.link.refresh()
            ifc.update(self.link.interfaces())
        ifc.update(await super().interfaces())
        return ifc

    async def link_state(self, port: PortSetup) -> str:
        if port.host is not None and self.link is not None:
            return self.link.link_state(port.host, port.netns, port.interface)
        return await super().link_state(port)

    def proc_cpu(self, worker: SpawnedWorker) -> float:
        if worker.host is not None and self.link is not None:
            return self.link.proc_cpu(worker.host, worker.state.plan.id)
        return super().proc_cpu(worker)

    def adjust(self, snap: StatsSnapshot) -> StatsSnapshot:
        return self.link.adjust(snap) if self.link is not None else snap

    def report(self) -> dict | None:
        return self.link.report() if self.link is not None else None

    async def close(self) -> None:
        if self.link is not None:  # every agent kills what is left, then goes
            await trio.to_thread.run_sync(self.link.close)
        await super().close()


def cluster_transport(address: str | None) -> TransportFactory | None:
    """``EngineOptions.transport`` for ``--cluster ADDRESS`` (None without it)."""
    if not address:
        return None

    def factory(options: EngineOptions) -> ClusterTransport:
        return ClusterTransport(address, options)

    return factory


__all__ = ["ClusterTransport", "cluster_transport"]
