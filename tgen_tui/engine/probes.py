"""Probes the engine samples next to the worker counters: interfaces, CPU and the DUT.

All of them are blocking reads, so the engine calls them through ``trio.to_thread`` and a
slow probe never stalls sampling. File descriptors are opened once inside the right
network namespace (a short-lived thread does ``setns``) and then re-read with
``pread``: a few microseconds a call, no process spawned.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

import psutil

from tgen_tui.dut.channel import open_in_netns, pread_all  # /proc files read through a kept fd
from tgen_tui.dut.probe import DutProbe, DutReading  # the DUT probe lives in tgen_tui.dut

__all__ = ["CpuProbe", "DutProbe", "DutReading", "IfCounters", "InterfaceProbe"]


@dataclass(frozen=True)
class IfCounters:
    rx_bytes: int
    rx_packets: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_dropped: int


class InterfaceProbe:
    """Kernel interface counters (``/proc/net/dev`` of the port's namespace) and link state."""

    def __init__(self) -> None:
        self._fds: dict[str | None, int] = {}
        self._lock = threading.Lock()

    def read(self, netns: str | None) -> dict[str, IfCounters]:
        with self._lock:
            fd = self._fds.get(netns)
            if fd is None:
                fd = self._fds[netns] = open_in_netns(netns, "/proc/thread-self/net/dev")
        text = pread_all(fd)
        out = {}
        for line in text.splitlines()[2:]:
            name, _, rest = line.partition(":")
            f = rest.split()
            if len(f) >= 16:
                out[name.strip()] = IfCounters(
                    int(f[0]), int(f[1]), int(f[3]), int(f[8]), int(f[9]), int(f[11])
                )
        return out

    @staticmethod
    def link_state(netns: str | None, interface: str) -> str:
        """ "up", "down" or "missing", from rtnetlink on a socket kept per namespace (no
        process: forking ``ip`` from the console's process every second cost more CPU than
        the reading); "unknown" when netlink cannot be asked."""
        try:
            info = link_info(netns, interface)
        except OSError:
            return "unknown"
        if info is None:
            return "missing"
        return link_state_of(info["flags_word"], info["operstate_code"])

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()


_LINK_SOCKETS: dict[str | None, Any] = {}  # netns -> dut.netlink.Dumper (rtnetlink)
_LINK_LOCK = threading.Lock()
RTM_GETLINK, RTM_NEWLINK, IFLA_IFNAME, IFLA_OPERSTATE = 18, 16, 3, 16
IFF_UP, IFF_LOWER_UP, IF_OPER_UNKNOWN, IF_OPER_UP = 0x1, 0x10000, 0, 6
IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change


def link_state_of(flags: int, operstate: int | None) -> str:
    """RFC 2863 operstate UP is up; an unknown one (drivers that do not set it) is up when
    the interface is up with carrier; anything else (down, lower layer down: a veth whose
    peer is down, no carrier) is down."""
    if operstate == IF_OPER_UP:
        return "up"
    if operstate in (None, IF_OPER_UNKNOWN):
        return "up" if flags & IFF_UP and flags & IFF_LOWER_UP else "down"
    return "down"


OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
IFLA_MTU = 4
# the carrier bit as the driver set it (operstate follows it later, when the kernel's
# linkwatch runs: up to a second later when other links changed just before), and how
# many times it went down
IFLA_CARRIER, IFLA_CARRIER_CHANGES, IFLA_CARRIER_DOWN_COUNT = 33, 35, 48


def link_info(netns: str | None, interface: str, again: bool = True) -> dict | None:
    """An interface as iproute2 shows it (``operstate``, ``flags``, ``mtu``), from the
    namespace's kept rtnetlink socket; None: no such interface. "Missing" is asked once
    more on a new socket (a namespace deleted and made again under the same name keeps
    the old one)."""
    links = links_in(netns)
    if interface in links:
        return links[interface]
    if again:
        with _LINK_LOCK:
            stale = _LINK_SOCKETS.pop(netns, None)
        if stale is not None:
            stale.close()
        return link_info(netns, interface, again=False)
    return None


def links_in(netns: str | None) -> dict[str, dict]:
    """Every interface of ``netns`` (name -> :func:`link_info`'s fields, plus
    ``carrier``, ``carrier_changes`` and ``carrier_down_count`` when the kernel gives
    them), one dump."""
    from tgen_tui.dut.netlink import Dumper, attrs, cstr

    with _LINK_LOCK:
        d = _LINK_SOCKETS.get(netns)
        if d is None:
            d = _LINK_SOCKETS[netns] = Dumper(socket.NETLINK_ROUTE, netns)
        try:
            msgs = d.dump(RTM_GETLINK, IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
        except OSError:
            d.close()
            _LINK_SOCKETS.pop(netns, None)
            raise
    out = {}
    for typ, body in msgs:
        if typ != RTM_NEWLINK or len(body) < IFINFO.size:
            continue
        a = attrs(body, IFINFO.size)
        out[cstr(a.get(IFLA_IFNAME))] = _link_fields(IFINFO.unpack_from(body)[3], a)
    return out


def _link_fields(flags: int, a: dict[int, bytes]) -> dict:
    op = a.get(IFLA_OPERSTATE)
    code = op[0] if op else None
    names = [n for bit, n in ((IFF_UP, "UP"), (IFF_LOWER_UP, "LOWER_UP")) if flags & bit]
    if flags & IFF_UP and not flags & IFF_LOWER_UP:
        names.insert(0, "NO-CARRIER")  # as iproute2 prints it
    mtu = a.get(IFLA_MTU)
    carrier, downs = a.get(IFLA_CARRIER), a.get(IFLA_CARRIER_DOWN_COUNT)
    changes = a.get(IFLA_CARRIER_CHANGES)
    return {
        "carrier_changes": struct.unpack("=I", changes[:4])[0] if changes else None,
        "carrier": bool(carrier[0]) if carrier else None,
        "carrier_down_count": struct.unpack("=I", downs[:4])[0] if downs else None,
        "operstate": OPERSTATES[code] if code is not None and code < len(OPERSTATES) else "UNKNOWN",
        "operstate_code": code,
        "flags": names,
        "flags_word": flags,
        "mtu": struct.unpack("=I", mtu[:4])[0] if mtu else 0,
    }


class CpuProbe:
    """Per-core CPU % (psutil deltas between calls) and per-process CPU %."""

    def __init__(self) -> None:
        psutil.cpu_percent(percpu=True)
        self._procs: dict[int, psutil.Process] = {}

    def cores(self) -> list[float]:
        return psutil.cpu_percent(percpu=True)

    def process(self, pid: int) -> float:
        p = self._procs.get(pid)
        try:
            if p is None:
                p = self._procs[pid] = psutil.Process(pid)
                p.cpu_percent()
                return 0.0
            return p.cpu_percent()
        except psutil.Error:
            return 0.0
