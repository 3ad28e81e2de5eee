"""Qdisc drops and overlimits of a namespace through rtnetlink, without a process: what
``tc -s -j qdisc`` prints, from one ``RTM_GETQDISC`` dump on a socket opened in the
namespace once (:class:`~tgen_tui.dut.netlink.Dumper`; ~80 us a read against ~2 ms for a
``tc`` process).

Keys are ``tc``'s, so the netns reader (this) and the ssh reader (``tc -s -j qdisc``)
name a qdisc alike: ``(dev, kind, handle)`` with the handle as ``tc`` prints it (``8043:``,
``1:10``). Interface names come from an ``RTM_GETLINK`` dump, re-read when an unknown
index appears. Imports: the standard library only.
"""

from __future__ import annotations

import struct
import threading

from tgen_tui.dut.netlink import Dumper, attrs, cstr

NETLINK_ROUTE = 0
RTM_GETLINK, RTM_NEWLINK = 18, 16
RTM_GETQDISC, RTM_NEWQDISC = 38, 36
IFLA_IFNAME = 3
TCA_KIND, TCA_STATS = 1, 3
_TCMSG = struct.Struct("=BxxxiIII")  # family, ifindex, handle, parent, info
_IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change
_TC_STATS = struct.Struct("=QIII")  # bytes, packets, drops, overlimits (then bps, pps, ...)


def handle_text(h: int) -> str:
    """A qdisc handle as ``tc`` prints it: ``8043:`` (minor 0), ``1:10``, ``0:``."""
    major, minor = h >> 16, h & 0xFFFF
    return f"{major:x}:" + (f"{minor:x}" if minor else "")


class QdiscReader:
    """Drops and overlimits of every qdisc in ``netns`` (None: this namespace)."""

    def __init__(self, netns: str | None) -> None:
        self.nl = Dumper(NETLINK_ROUTE, netns)
        self._names: dict[int, str] = {}
        self._lock = threading.Lock()

    def _links(self) -> None:
        self._names = {}
        for typ, p in self.nl.dump(RTM_GETLINK, _IFINFO.pack(0, 0, 0, 0, 0)):
            if typ == RTM_NEWLINK:
                index = _IFINFO.unpack_from(p)[2]
                self._names[index] = cstr(attrs(p, _IFINFO.size).get(IFLA_IFNAME))

    def read(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """``{(dev, kind, handle): (drops, overlimits)}``, as :func:`counters.parse_tc`."""
        with self._lock:
            try:
                return self._read()
            except OSError:
                self.nl.close()  # a namespace re-created, a socket gone: open anew
                return self._read()

    def _read(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        rows = []
        for typ, p in self.nl.dump(RTM_GETQDISC, _TCMSG.pack(0, 0, 0, 0, 0)):
            if typ != RTM_NEWQDISC or len(p) < _TCMSG.size:
                continue
            _, ifindex, handle, _, _ = _TCMSG.unpack_from(p)
            a = attrs(p, _TCMSG.size)
            st = a.get(TCA_STATS)
            drops, over = (_TC_STATS.unpack_from(st)[2:4]) if st and len(st) >= 20 else (0, 0)
            rows.append((ifindex, cstr(a.get(TCA_KIND)), handle_text(handle), drops, over))
        if any(r[0] not in self._names for r in rows):
            self._links()
        return {(self._names.get(i, f"if{i}"), k, h): (d, o) for i, k, h, d, o in rows}

    def close(self) -> None:
        with self._lock:
            self.nl.close()
