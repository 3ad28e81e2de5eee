"""Link and carrier changes of the tester ports, as events at the moment they happen.

Per network namespace of the engine's own ports, one rtnetlink socket joins the link
group (``RTNLGRP_LINK``): the kernel sends an ``RTM_NEWLINK`` to it when an interface's
flags or operstate change (a veth whose peer is set down loses its carrier at once),
and ``RTM_DELLINK`` when it goes. A trio task per namespace waits on its socket, so a
change becomes a :class:`~tgen_tui.engine.api.LinkChanged` event (console log, NDJSON,
the result's events) within milliseconds, its time taken when the message was read.

The kernel sends those messages when its linkwatch runs, which is at once unless another
link changed less than a second before (then up to a second late: on a busy host, or a
NIC whose ifindex is its own link's). So the sampler also reads every local port's
carrier bit (``IFLA_CARRIER``, set by the driver at once) at each sample, with its other
blocking reads (:func:`read_local`, one dump per namespace): a change is seen within a
sample interval at worst, and a carrier that went down and up between two readings is
seen by its down count (``IFLA_CARRIER_DOWN_COUNT``). A message read after a newer
reading (the listener ran late) is older than it by the carrier's change count
(``IFLA_CARRIER_CHANGES``) and is left out. Ports on other hosts
(``--cluster``) are read through the transport's ``link_state`` every
``sampler.LINK_EVERY`` s.

A port's link is one of :data:`STATES`: "up"; "no carrier" (the interface is up, its
link partner is not: the DUT's side was set down, a cable pulled); "down" (the
interface itself is set down); "missing"; "unknown" (netlink could not be asked).
``PortStats.link`` keeps the coarse word (:func:`coarse`: "no carrier" is "down").
"""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from tgen_tui.engine.api import LinkChanged
from tgen_tui.engine.events import EventLog
from tgen_tui.engine.probes import (
    IFF_UP,
    IFINFO,
    IFLA_CARRIER,
    IFLA_CARRIER_CHANGES,
    IFLA_CARRIER_DOWN_COUNT,
    IFLA_IFNAME,
    IFLA_OPERSTATE,
    RTM_NEWLINK,
    link_state_of,
    links_in,
)

UP, NO_CARRIER, DOWN, MISSING, UNKNOWN = "up", "no carrier", "down", "missing", "unknown"
STATES = (UP, NO_CARRIER, DOWN, MISSING, UNKNOWN)
RTM_DELLINK = 17
RTMGRP_LINK = 1  # the bit of RTNLGRP_LINK (1) in the bind mask
RCVBUF = 1 << 20


def detail_of(flags: int, operstate: int | None, carrier: bool | None = None) -> str:
    """ "down" when the interface is set down; else "up" or "no carrier": by the carrier
    bit when the kernel gives it (``IFLA_CARRIER``: set by the driver at once; operstate
    follows when the kernel's linkwatch runs, up to a second later when another link
    changed just before), else by operstate (:func:`~tgen_tui.engine.probes.link_state_of`)."""
    if not flags & IFF_UP:
        return DOWN
    if carrier is not None:
        return UP if carrier else NO_CARRIER
    return UP if link_state_of(flags, operstate) == "up" else NO_CARRIER


def coarse(detail: str) -> str:
    """The word ``PortStats.link`` shows: up, down, missing or unknown."""
    return "down" if detail == NO_CARRIER else detail


#: (state, carrier down count, carrier change count: None unknown)
Reading = tuple[str, int | None, int | None]


def read_local(where: dict[str | None, list[str]]) -> dict[tuple[str | None, str], Reading]:
    """Local interfaces' links now, ``where``: netns -> interfaces (blocking: one
    rtnetlink dump per namespace on its kept socket)."""
    out: dict[tuple[str | None, str], Reading] = {}
    for netns, names in where.items():
        try:
            links: dict | None = links_in(netns)
        except OSError:
            links = None
        for name in names:
            info = links.get(name) if links is not None else None
            if links is None:
                out[(netns, name)] = (UNKNOWN, None, None)
            elif info is None:
                out[(netns, name)] = (MISSING, None, None)
            else:
                d = detail_of(info["flags_word"], info["operstate_code"], info["carrier"])
                out[(netns, name)] = (d, info["carrier_down_count"], info["carrier_changes"])
    return out


def parse_link_messages(data: bytes) -> list[tuple[str, Reading]]:
    """(interface, (state, carrier down count, change count)) of every RTM_NEWLINK /
    RTM_DELLINK in one netlink read."""
    from tgen_tui.dut.netlink import NLMSG, attrs, cstr

    out: list[tuple[str, Reading]] = []
    off = 0
    while off + NLMSG.size <= len(data):
        ln, typ, _, _, _ = NLMSG.unpack_from(data, off)
        if ln < NLMSG.size:
            break
        body = data[off + NLMSG.size : off + ln]
        off += (ln + 3) & ~3
        if typ not in (RTM_NEWLINK, RTM_DELLINK) or len(body) < IFINFO.size:
            continue
        a = attrs(body, IFINFO.size)
        name = cstr(a.get(IFLA_IFNAME))
        if not name:
            continue
        if typ == RTM_DELLINK:
            out.append((name, (MISSING, None, None)))
            continue
        op, car = a.get(IFLA_OPERSTATE), a.get(IFLA_CARRIER)
        downs, changes = a.get(IFLA_CARRIER_DOWN_COUNT), a.get(IFLA_CARRIER_CHANGES)
        flags = IFINFO.unpack_from(body)[3]
        detail = detail_of(flags, op[0] if op else None, bool(car[0]) if car else None)
        out.append((name, (detail, _u32(downs), _u32(changes))))
    return out


def _u32(b: bytes | None) -> int | None:
    return struct.unpack("=I", b[:4])[0] if b and len(b) >= 4 else None


def open_link_socket(netns: str | None) -> socket.socket:
    """A non-blocking rtnetlink socket in ``netns`` that receives the link group."""
    from tgen_tui.worker.netns import in_thread_netns

    def make() -> socket.socket:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            s.bind((0, RTMGRP_LINK))
        except OSError:
            s.close()
            raise
        return s

    s = in_thread_netns(netns, make) if netns else make()
    s.setblocking(False)
    return s


class LinkWatch:
    """Each port's link as last seen, and the events of its changes.

    ``ports()``: the engine's port runtimes now (name -> ``PortRuntime``: ``spec`` and a
    ``link`` it sets); ``transport``: asked for ports on other hosts."""

    def __init__(
        self,
        ports: Callable[[], Mapping[str, Any]],
        log: EventLog,
        transport: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ports = ports
        self.log = log
        self.transport = transport
        self.clock = clock
        self.state: dict[str, str] = {}
        self.left_up: dict[str, float] = {}  # port -> monotonic s it stopped being up
        self.ever_lost: set[str] = set()  # ports whose link was not up at some time
        self.downs: dict[str, int] = {}  # port -> its carrier's down count at the last reading
        self.seen_at: dict[str, float] = {}  # port -> monotonic s of the last reading
        self.changes: dict[str, int] = {}  # port -> its carrier's change count, last seen
        self._scope: trio.CancelScope | None = None
        self._told: set[str] = set()  # namespaces whose socket failed (said once)

    # ------------------------------------------------------------------ the one rule
    def observe(
        self,
        name: str,
        detail: str,
        at: float | None = None,
        downs: int | None = None,
        changes: int | None = None,
    ) -> LinkChanged | None:
        """Port ``name``'s link is ``detail`` (seen at ``at``, monotonic s; default now;
        ``downs``, ``changes``: its carrier's down and change counts, None unknown): set
        the port's ``link``; a change is an event (returned). Up again at the next reading
        with the down count risen: the carrier was lost and came back in between (one
        event, ``flaps``). A reading with fewer changes than one seen before is stale."""
        at = self.clock() if at is None else at
        if detail == UNKNOWN:
            pr = self.ports().get(name)
            if pr is not None:
                pr.link = coarse(detail)
            return None  # netlink could not be asked: no change known
        last = self.changes.get(name)
        if changes is not None and last is not None and changes < last:
            return None  # older than what was seen (a message read late)
        if changes is not None:
            self.changes[name] = changes
        pr = self.ports().get(name)
        if pr is not None:
            pr.link = coarse(detail)
        old = self.state.get(name)
        before, since = self.downs.get(name), self.seen_at.get(name)
        if downs is not None:
            self.downs[name] = downs
        self.seen_at[name] = at
        if old == detail:
            if detail == UP and downs is not None and before is not None and downs > before:
                self.ever_lost.add(name)
                within = round(at - since, 3) if since is not None else None
                ev = LinkChanged(
                    at - self.log.t_open, port=name, old=UP, new=UP, away_s=within,
                    flaps=downs - before,
                )  # fmt: skip
                self.log.emit(ev)
                return ev
            return None
        self.state[name] = detail
        if detail != UP:
            self.ever_lost.add(name)
        if old is None and detail == UP:
            return None  # the first reading, as expected: nothing to say
        away = None
        if detail != UP and (old == UP or old is None):
            self.left_up[name] = at
        elif detail == UP and name in self.left_up:
            away = round(at - self.left_up.pop(name), 3)
        ev = LinkChanged(at - self.log.t_open, port=name, old=old, new=detail, away_s=away)
        self.log.emit(ev)
        return ev

    def forget(self) -> None:
        """A reload: ports may be other ones now; listen in their namespaces."""
        known = set(self.ports())
        for n in list(self.state):
            if n not in known:
                self.state.pop(n, None)
                self.left_up.pop(n, None)
        if self._scope is not None:
            self._scope.cancel()

    # ------------------------------------------------------------------ the poll
    def local(self) -> dict[str | None, list[str]]:
        """netns -> the interfaces of this machine's ports (what :func:`read_local` reads)."""
        out: dict[str | None, list[str]] = {}
        for pr in self.ports().values():
            if pr.spec.host is None:
                out.setdefault(pr.spec.netns, []).append(pr.spec.interface)
        return out

    def apply(self, readings: dict[tuple[str | None, str], Reading], at: float) -> None:
        """:func:`read_local`'s readings (taken at ``at``) into the ports' links."""
        for name, pr in list(self.ports().items()):
            r = readings.get((pr.spec.netns, pr.spec.interface))
            if pr.spec.host is None and r is not None:
                self.observe(name, r[0], at, r[1], r[2])

    async def poll(self, local: bool = True) -> None:
        """Read every port's link now: this machine's by rtnetlink (``local``), the others'
        through the transport."""
        if local:
            at = self.clock()
            self.apply(await trio.to_thread.run_sync(read_local, self.local()), at)
        for name, pr in list(self.ports().items()):
            if pr.spec.host is not None and self.transport is not None:
                detail = await self.transport.link_state(pr.spec)
                self.observe(name, detail if detail in STATES else UNKNOWN)

    # ------------------------------------------------------------------ the listeners
    def _namespaces(self) -> set[str | None]:
        return {pr.spec.netns for pr in self.ports().values() if pr.spec.host is None}

    async def run(self, closed: Callable[[], bool]) -> None:
        """Listen in every namespace of the local ports until cancelled (a reload restarts
        the listeners in the new set of namespaces)."""
        while not closed():
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as n:
                    for ns in self._namespaces():
                        n.start_soon(self._listen, ns)
                    await trio.sleep_forever()

    async def _listen(self, netns: str | None) -> None:
        try:
            sock = await trio.to_thread.run_sync(open_link_socket, netns)
        except OSError as e:
            if (netns or "") not in self._told:
                self._told.add(netns or "")
                self.log.notice(
                    f"link changes in {netns or 'this namespace'} are polled once a second "
                    f"(no rtnetlink link socket: {e})"
                )
            return
        try:
            while True:
                await trio.lowlevel.wait_readable(sock)
                missed = self._drain(sock, netns)
                if missed:
                    await self.poll()  # the socket overflowed: read every port now
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def _drain(self, sock: socket.socket, netns: str | None) -> bool:
        """Every message waiting on ``sock``; True when some were lost (ENOBUFS)."""
        missed = False
        while True:
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return missed
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    missed = True
                    continue
                raise
            at = self.clock()
            by_if: dict[str, list[str]] = {}
            for name, pr in self.ports().items():
                if pr.spec.host is None and pr.spec.netns == netns:
                    by_if.setdefault(pr.spec.interface, []).append(name)
            for ifname, (detail, downs, changes) in parse_link_messages(data):
                for port in by_if.get(ifname, ()):
                    self.observe(port, detail, at, downs, changes)


__all__ = [
    "DOWN",
    "MISSING",
    "NO_CARRIER",
    "STATES",
    "UNKNOWN",
    "UP",
    "LinkWatch",
    "coarse",
    "detail_of",
    "open_link_socket",
    "parse_link_messages",
    "read_local",
]
