"""The engine's side of a cluster: agents on hosts, remote worker handles, remote counter views.

The only module that imports Ray; only the cluster transport (``--cluster``) imports it.

- :class:`ClusterLink` connects to the Ray cluster, checks that a node offers
  ``tgen:<host>`` for every host the profile names, places one
  :class:`~tgen_tui.cluster.agent.TesterAgent` per host, measures each host's clock
  offset (:mod:`tgen_tui.cluster.clock`), and at every sample polls every live agent
  (in parallel, bounded wait) for its counter blocks and interface counters.
- :class:`RemoteWorkerHandle` is a :class:`~tgen_tui.engine.workers.WorkerHandle`
  whose transport is the agent: same ``run`` / ``send`` / ``request`` / ``kill`` /
  ``state``; the start time ``t0_ns`` is translated into the host's clock.
- :class:`RemoteCounterView` is a :class:`~tgen_tui.worker.counters.CounterView` over a
  copy of the remote block, refreshed before each sample: the sampler cannot tell it
  from a local one.

A host whose node dies (or whose agent does not answer within ``HOST_TIMEOUT``) is
marked lost: its workers report an exit with the reason, so the engine marks their
ports failed, and the other hosts go on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np
import trio

from tgen_tui.cluster import clock as K
from tgen_tui.cluster.agent import TesterAgent
from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.engine.workers import WorkerDied, WorkerHandle
from tgen_tui.worker import counters as C
from tgen_tui.worker import protocol as P

HOST_TIMEOUT = 5.0  # s: an agent that does not answer a call within this is lost
PLACE_TIMEOUT = 60.0  # s: for every agent to be placed and answer
EVENT_WAIT = 0.5  # s: the agent's long poll for worker events
POLL_TIMEOUT = 2.0  # s: one sample's wait for the agents' counter blocks
CLOCK_ROUNDS = 16
RESOURCE_PREFIX = "tgen:"

# every remote call waits in a thread; long polls must not starve trio's default limiter
_LIMITER: trio.CapacityLimiter | None = None


def _limiter() -> trio.CapacityLimiter:
    global _LIMITER
    if _LIMITER is None:
        _LIMITER = trio.CapacityLimiter(256)
    return _LIMITER


class HostLost(Exception):
    """The host's agent died or stopped answering."""


RAY_MESSAGES: list[str] = []  # first lines of Ray's own error messages (a node died, ...)


def _keep_ray_messages_off_stdout() -> None:
    """Ray prints cluster error messages (a dead raylet's log tail) on the driver's
    *stdout*, which would corrupt ``--ndjson -`` and ``--json -``: keep their first lines
    for the result instead."""
    try:
        from ray._private import worker as rw
    except ImportError:
        return

    def keep(data, ignore_prefix=False) -> None:
        for line in data.get("lines", [])[:1]:
            first = str(line).strip().splitlines()[0][:300] if str(line).strip() else ""
            if first and len(RAY_MESSAGES) < 50:
                RAY_MESSAGES.append(first)

    if hasattr(rw, "print_to_stdstream"):
        rw.print_to_stdstream = keep


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return f"{type(e).__name__}: {text[:200]}"


def _get(ref, timeout: float, host: str):
    """ray.get with the errors a caller can act on: HostLost, or the agent's own error."""
    import ray
    from ray import exceptions as rx

    try:
        return ray.get(ref, timeout=timeout)
    except rx.GetTimeoutError:
        raise HostLost(f"host {host}: its agent did not answer within {timeout:g} s") from None
    except (rx.RayActorError, rx.NodeDiedError, rx.WorkerCrashedError) as e:
        raise HostLost(f"host {host}: node lost (Ray: {type(e).__name__})") from None
    except rx.RayTaskError as e:
        cause = getattr(e, "cause", None)
        raise RuntimeError(str(cause) if cause is not None else _short(e)) from None


@dataclass
class HostState:
    """One tester host as the engine sees it."""

    name: str
    agent: object  # ray ActorHandle
    info: dict = field(default_factory=dict)
    clock: K.ClockOffset | None = None
    clock_error: str | None = None
    lost: str | None = None
    ifaces: list[tuple[str | None, str]] = field(default_factory=list)
    ifc: dict = field(default_factory=dict)
    links: dict = field(default_factory=dict)
    cpu: dict = field(default_factory=dict)
    views: dict[int, RemoteCounterView] = field(default_factory=dict)
    polls: int = 0
    slow_since: float | None = None  # monotonic s of the first unanswered poll in a row


class RemoteCounterView(C.CounterView):
    """A counter block copied from another host, refreshed in place before each sample.

    The header, slot layout and ``arr`` are those of the worker's block; the worker's
    clock gauges the sampler reads (the heartbeat, the receive gaps' start) are shifted
    into the engine's clock."""

    def __init__(self, name: str, data: bytes, offset_ns: int = 0) -> None:
        self._buf = bytearray(data)
        self._w = np.frombuffer(self._buf, dtype=np.int64)
        self._offset_ns = int(offset_ns)
        super().__init__(name, self._buf, writable=False)  # type: ignore[arg-type]
        self._shift()

    def _shift(self) -> None:
        if self._offset_ns:
            w = self._w
            if w[C.H_HEARTBEAT_NS]:
                w[C.H_HEARTBEAT_NS] -= self._offset_ns
            _, _, rx = self.tables(w)  # when each stream's longest receive gap began
            gap = rx[:, :, C.R_GAP_START]
            gap[gap != 0] -= self._offset_ns

    def refresh(self, data: bytes) -> None:
        if self.arr is None or len(data) != len(self._buf):
            return
        self._w[:] = np.frombuffer(data, dtype=np.int64)
        self._shift()

    def close(self) -> None:
        self.header = self.ports = self.tx = self.rx = self.arr = None  # type: ignore[assignment]


class RemoteWorkerHandle(WorkerHandle):
    """A worker on another host, driven through its agent; the engine's interface."""

    def __init__(self, state, on_event, link: ClusterLink, host: str) -> None:
        super().__init__(state, on_event)
        self.link = link
        self.host = host
        self._exited = trio.Event()

    @property
    def _hs(self) -> HostState:
        return self.link.hosts[self.host]

    async def _call(self, method: str, *args, timeout: float = HOST_TIMEOUT):
        hs = self._hs
        if hs.lost:
            raise HostLost(hs.lost)
        ref = getattr(hs.agent, method).remote(*args)
        try:
            return await trio.to_thread.run_sync(
                functools.partial(_get, ref, timeout, self.host),
                abandon_on_cancel=True,
                limiter=_limiter(),
            )
        except HostLost as e:
            self.link.mark_lost(self.host, str(e))
            raise

    async def send(self, msg: P.Command) -> None:
        st = self.state
        if not st.alive:
            raise WorkerDied(st.exit_reason or "worker not running")
        if isinstance(msg, P.Start) and msg.t0_ns is not None:
            # the worker paces against its own clock: translate the engine's t0
            from dataclasses import replace

            msg = replace(msg, t0_ns=int(msg.t0_ns) + self.link.offset_ns(self.host))
        try:
            async with self._send_lock:  # one at a time: the actor runs calls in parallel
                await self._call("send", st.plan.id, P.encode(msg))
        except HostLost as e:
            raise WorkerDied(str(e)) from None
        except RuntimeError as e:
            raise WorkerDied(st.exit_reason or str(e)) from None

    def kill(self) -> None:
        hs = self._hs
        if not hs.lost:
            with contextlib.suppress(Exception):
                hs.agent.kill.remote(self.state.plan.id)  # fire and forget

    async def run(
        self,
        ports: list[dict],
        n_streams: int,
        task_status: trio.TaskStatus[WorkerHandle] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Supervisor task: spawn on the host, configure, report ready, relay events until exit."""
        st = self.state
        plan = st.plan
        try:
            info = await self._call("spawn", plan.id, plan.core, timeout=30)
        except (HostLost, RuntimeError) as e:
            st.exit_reason = f"worker {plan.id} on host {self.host} could not start: {e}"
            raise WorkerDied(st.exit_reason) from None
        st.pid = int(info["pid"])
        st.shm_path = str(info["shm"])
        self.core = int(info["core"])
        st.alive = True
        ready = trio.Event()
        started = False
        where = f"worker {plan.id} (host {self.host}, core {self.core}, pid {st.pid})"
        try:
            async with trio.open_nursery() as nursery:

                async def pump() -> None:
                    try:
                        while True:
                            lines, ex = await self._call(
                                "events", plan.id, EVENT_WAIT, timeout=EVENT_WAIT + HOST_TIMEOUT
                            )
                            for line in lines:
                                self._take_line(line, ready)
                            if ex is not None:
                                if not st.quitting:
                                    st.exit_reason = f"{where} {ex['reason']}"
                                break
                    except (HostLost, RuntimeError) as e:
                        if not st.quitting:
                            st.exit_reason = f"{where}: {e}"
                    st.alive = False
                    self._exited.set()
                    ready.set()

                nursery.start_soon(pump)
                await self.send(P.Configure(shm=st.shm_path, n_streams=n_streams, ports=ports))
                await self._await_ready(
                    ready, task_status, lambda: f"{where} did not become ready within 15 s"
                )
                started = True
                await self._exited.wait()
                st.alive = False
                self._wake_waiters()  # the process exited (or its host was lost)
                nursery.cancel_scope.cancel()
        finally:
            st.alive = False
            if not self._exited.is_set():
                self.kill()
            if not started and st.exit_reason is None:
                st.exit_reason = f"{where} failed to start"


class ClusterLink:
    """The engine's connection to the Ray cluster and its agents (one per host)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.hosts: dict[str, HostState] = {}
        self.clocks: dict[str, K.StreamClock] = {}
        self.events: list[str] = []

    # ------------------------------------------------------------------ connect
    @classmethod
    def connect(
        cls, address: str, hosts: list[str], ifaces: dict[str, list[tuple[str | None, str]]]
    ) -> ClusterLink:
        """Blocking (call it in a thread): join the cluster, place and greet the agents,
        measure their clocks."""
        if not address or not address.strip():
            raise BadInput("--cluster: give the head node's address (IP:PORT) or 'auto'")
        try:
            import ray
        except ImportError:
            raise EnvironmentProblem(
                "--cluster needs Ray, which is not installed here: pip install 'tgen-tui[cluster]'"
            ) from None
        link = cls(address)
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
            except Exception as e:  # noqa: BLE001 - every failure to join is an environment problem
                raise EnvironmentProblem(
                    f"--cluster {address}: cannot join the Ray cluster: {_short(e)} "
                    "(start it with: ray start --head --port 6379 --num-cpus 0)"
                ) from None
        _keep_ray_messages_off_stdout()
        offered = sorted(
            k[len(RESOURCE_PREFIX) :]
            for k in ray.cluster_resources()
            if k.startswith(RESOURCE_PREFIX)
        )
        missing = [h for h in hosts if h not in offered]
        if missing:
            raise EnvironmentProblem(
                f"--cluster {address}: no Ray node offers host(s) {', '.join(missing)} "
                f"(hosts offered: {', '.join(offered) or 'none'}); on each, run: "
                f"ray start --address HEAD --resources '{{\"tgen:{missing[0]}\": 1}}'"
            )
        Agent = ray.remote(TesterAgent)
        for h in hosts:
            agent = Agent.options(
                resources={RESOURCE_PREFIX + h: 1},
                num_cpus=0,
                max_concurrency=64,
                max_restarts=0,
            ).remote(h)
            link.hosts[h] = HostState(h, agent, ifaces=list(ifaces.get(h, [])))
        refs = {h: hs.agent.hello.remote() for h, hs in link.hosts.items()}
        for h, ref in refs.items():
            try:
                link.hosts[h].info = _get(ref, PLACE_TIMEOUT, h)
            except HostLost as e:
                link.close()
                raise EnvironmentProblem(
                    f"{e} while placing its agent (is another tgen using host {h}? "
                    f"each host runs one agent at a time)"
                ) from None
        for h, hs in link.hosts.items():
            try:
                hs.clock = K.measure(
                    h,
                    lambda hs=hs: _get(hs.agent.clock.remote(), HOST_TIMEOUT, hs.name),
                    CLOCK_ROUNDS,
                )
            except (HostLost, RuntimeError, ValueError) as e:
                hs.clock_error = str(e)
        return link

    def update_hosts(self, ifaces: dict[str, list[tuple[str | None, str]]]) -> None:
        """After a reload: the same agents serve the new ports; a new host needs a new engine."""
        new = [h for h in ifaces if h not in self.hosts]
        if new:
            raise BadInput(
                f"reload: port(s) now on host(s) {', '.join(new)}, which this engine has no "
                "agent on: restart tgen to add a host"
            )
        for h, hs in self.hosts.items():
            if h in ifaces and ifaces[h]:
                hs.ifaces = list(ifaces[h])

    def port_configs(self, host: str, specs: list[tuple]) -> list[dict]:
        """Blocking: the configure entries of ports on ``host``, made there (tx_path
        'auto' is that host's calibrated path)."""
        return _get(self.hosts[host].agent.port_configs.remote(specs), HOST_TIMEOUT * 2, host)

    def offset_ns(self, host: str) -> int:
        c = self.hosts[host].clock
        return c.offset_ns if c is not None else 0

    def offsets(self) -> dict[str | None, K.ClockOffset | None]:
        d: dict[str | None, K.ClockOffset | None] = {K.LOCAL: K.LOCAL_CLOCK}
        d.update({h: hs.clock for h, hs in self.hosts.items()})
        return d

    def set_streams(self, streams, port_host: dict[str, str | None]) -> None:
        """Decide each cross-host stream's clock skew (or that it has no latency)."""
        why = {h: hs.clock_error or "not measured" for h, hs in self.hosts.items()}
        self.clocks = K.stream_clocks(streams, port_host, self.offsets(), why)

    def rx_skews(self, port: str, programs) -> dict[str, int]:
        """``clock_skew_ns`` for receiving port ``port``'s configure entry: {stream index: ns}
        of the streams it receives from another host whose offset was measured."""
        out = {}
        for p in programs:
            c = self.clocks.get(p.name)
            if p.rx_port == port and c is not None and c.usable and c.skew_ns:
                out[str(p.index)] = c.skew_ns
        return out

    def mark_lost(self, host: str, reason: str) -> None:
        hs = self.hosts.get(host)
        if hs is not None and hs.lost is None:
            hs.lost = reason
            self.events.append(reason)

    def new_view(self, host: str, wid: int, shm: str) -> RemoteCounterView:
        """The worker's block, fetched now (it exists once the worker is ready)."""
        hs = self.hosts[host]
        data = _get(hs.agent.poll.remote(hs.ifaces), HOST_TIMEOUT, host)
        self._take(hs, data)
        block = data["blocks"].get(wid)
        if block is None:
            raise WorkerDied(f"host {host}: worker {wid}'s counter block is not mapped")
        view = RemoteCounterView(f"{host}:{shm}", block, self.offset_ns(host))
        hs.views[wid] = view
        return view

    # ------------------------------------------------------------------ sampling
    def _take(self, hs: HostState, data: dict) -> None:
        hs.polls += 1
        hs.ifc = data["ifc"]
        hs.links = data["links"]
        hs.cpu = data["cpu"]
        for wid, block in data["blocks"].items():
            v = hs.views.get(wid)
            if v is not None:
                v.refresh(block)

    def _poll_all(self) -> dict[str, dict | Exception]:
        import ray

        live = {h: hs for h, hs in self.hosts.items() if not hs.lost}
        refs = {h: hs.agent.poll.remote(hs.ifaces) for h, hs in live.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=POLL_TIMEOUT)
        ready_ids = set(ready)
        out: dict[str, dict | Exception] = {}
        for h, ref in refs.items():
            if ref not in ready_ids:
                out[h] = TimeoutError(
                    f"host {h}: its agent did not answer within {POLL_TIMEOUT:g} s"
                )
                continue
            try:
                out[h] = _get(ref, 0.1, h)
            except (HostLost, RuntimeError) as e:
                out[h] = e
        return out

    async def refresh(self) -> None:
        """Fetch every live host's counter blocks and interface counters (one parallel
        round of calls), and copy them into the views before the sampler reads them."""
        if not any(not hs.lost for hs in self.hosts.values()):
            return
        res = await trio.to_thread.run_sync(self._poll_all, abandon_on_cancel=True)
        now = time.monotonic()
        for h, data in res.items():
            hs = self.hosts[h]
            if isinstance(data, HostLost):
                self.mark_lost(h, str(data))
            elif isinstance(data, TimeoutError):  # a slow sample keeps the last values
                hs.slow_since = hs.slow_since or now
                if now - hs.slow_since > HOST_TIMEOUT:
                    self.mark_lost(h, f"host {h}: its agent did not answer for {HOST_TIMEOUT:g} s")
            elif isinstance(data, Exception):
                continue
            else:
                hs.slow_since = None
                self._take(hs, data)

    def interfaces(self) -> dict:
        """Interface counters keyed by (host, netns), as the sampler looks them up."""
        out = {}
        for h, hs in self.hosts.items():
            for ns, d in hs.ifc.items():
                out[(h, ns)] = d
        return out

    def link_state(self, host: str, netns: str | None, interface: str) -> str:
        hs = self.hosts[host]
        if hs.lost:
            return "unknown"
        return hs.links.get((netns, interface), "unknown")

    def proc_cpu(self, host: str, wid: int) -> float:
        return float(self.hosts[host].cpu.get(wid, 0.0))

    def adjust(self, snap):
        return K.apply_to_snapshot(snap, self.clocks)

    # ------------------------------------------------------------------ report
    def report(self) -> dict:
        """The result's ``cluster`` section."""
        hosts = []
        for h, hs in self.hosts.items():
            d = {
                "host": h,
                "hostname": hs.info.get("hostname"),
                "agent_pid": hs.info.get("pid"),
                "clock_offset_ns": hs.clock.offset_ns if hs.clock else None,
                "uncertainty_ns": hs.clock.uncertainty_ns if hs.clock else None,
                "best_rtt_ns": hs.clock.rtt_ns if hs.clock else None,
                "clock_rounds": hs.clock.rounds if hs.clock else 0,
                "clock_error": hs.clock_error,
                "lost": hs.lost,
            }
            hosts.append(d)
        pairs = []
        names = list(self.hosts)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ca, cb = self.hosts[a].clock, self.hosts[b].clock
                pairs.append(
                    {
                        "from": a,
                        "to": b,
                        "clock_offset_ns": cb.offset_ns - ca.offset_ns if ca and cb else None,
                        "uncertainty_ns": cb.uncertainty_ns + ca.uncertainty_ns
                        if ca and cb
                        else None,
                    }
                )
        return {
            "address": self.address,
            "engine_hostname": os.uname().nodename,
            "hosts": hosts,
            "between_hosts": pairs,  # clock of 'to' minus clock of 'from'
            "latency": {n: c.note for n, c in self.clocks.items()},
            "ray_messages": list(RAY_MESSAGES),
        }

    # ------------------------------------------------------------------ the end
    def close(self) -> None:
        """Blocking: every agent kills its workers (bounded wait), then the agents go."""
        try:
            import ray
        except ImportError:
            return
        refs = [hs.agent.shutdown.remote() for hs in self.hosts.values() if not hs.lost]
        if refs:
            with contextlib.suppress(Exception):
                ray.wait(refs, num_returns=len(refs), timeout=HOST_TIMEOUT)
        for hs in self.hosts.values():
            for v in hs.views.values():
                v.close()
            with contextlib.suppress(Exception):
                ray.kill(hs.agent)


__all__ = [
    "ClusterLink",
    "HostLost",
    "RemoteCounterView",
    "RemoteWorkerHandle",
]
