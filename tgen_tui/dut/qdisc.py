"""Qdisc drops and overlimits of a namespace through rtnetlink, without a process: what
``tc -s -j qdisc`` prints, from one ``RTM_GETQDISC`` dump on a socket opened in the
namespace once (a socket keeps the namespace it was created in).

Keys are ``tc``'s, so the netns reader (this) and the ssh reader (``tc -s -j qdisc``)
name a qdisc alike: ``(dev, kind, handle)`` with the handle as ``tc`` prints it (``8043:``,
``1:10``). Interface names come from an ``RTM_GETLINK`` dump, re-read when an unknown
index appears. Imports: the standard library only.
"""

from __future__ import annotations

import os
import socket
import struct
import threading

from tgen_tui.worker.netns import in_thread_netns

NETLINK_ROUTE = 0
RTM_GETLINK, RTM_NEWLINK = 18, 16
RTM_GETQDISC, RTM_NEWQDISC = 38, 36
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFLA_IFNAME = 3
TCA_KIND, TCA_STATS = 1, 3
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_TCMSG = struct.Struct("=BxxxiIII")  # family, ifindex, handle, parent, info
_IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change
_RTA = struct.Struct("=HH")
_TC_STATS = struct.Struct("=QIII")  # bytes, packets, drops, overlimits (then bps, pps, ...)


def handle_text(h: int) -> str:
    """A qdisc handle as ``tc`` prints it: ``8043:`` (minor 0), ``1:10``, ``0:``."""
    major, minor = h >> 16, h & 0xFFFF
    return f"{major:x}:" + (f"{minor:x}" if minor else "")


def _attrs(buf: bytes, off: int, end: int) -> dict[int, bytes]:
    out = {}
    while off + 4 <= end:
        ln, typ = _RTA.unpack_from(buf, off)
        if ln < 4:
            break
        out[typ & 0x3FFF] = buf[off + 4 : off + ln]
        off += (ln + 3) & ~3
    return out


class QdiscReader:
    """Drops and overlimits of every qdisc in ``netns`` (None: this namespace)."""

    def __init__(self, netns: str | None) -> None:
        self.netns = netns
        self._sock: socket.socket | None = None
        self._names: dict[int, str] = {}
        self._seq = 0
        self._lock = threading.Lock()

    def _open(self) -> socket.socket:
        def make() -> socket.socket:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)

        s = in_thread_netns(self.netns, make) if self.netns else make()
        s.bind((0, 0))
        s.settimeout(2.0)
        return s

    def _dump(self, msg_type: int, body: bytes) -> list[tuple[int, bytes]]:
        """Send one dump request; the (type, payload) of every answer until DONE."""
        if self._sock is None:
            self._sock = self._open()
        self._seq += 1
        req = _NLMSG.pack(
            _NLMSG.size + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0
        )
        self._sock.send(req + body)
        out: list[tuple[int, bytes]] = []
        while True:
            data = self._sock.recv(1 << 16)
            off = 0
            while off + _NLMSG.size <= len(data):
                ln, typ, _, seq, _ = _NLMSG.unpack_from(data, off)
                if ln < _NLMSG.size:
                    return out
                if seq == self._seq:
                    if typ == NLMSG_DONE:
                        return out
                    if typ == NLMSG_ERROR:
                        err = -struct.unpack_from("=i", data, off + _NLMSG.size)[0]
                        raise OSError(err, os.strerror(err))
                    out.append((typ, data[off + _NLMSG.size : off + ln]))
                off += (ln + 3) & ~3

    def _links(self) -> None:
        self._names = {}
        for typ, p in self._dump(RTM_GETLINK, _IFINFO.pack(0, 0, 0, 0, 0)):
            if typ == RTM_NEWLINK:
                index = _IFINFO.unpack_from(p)[2]
                name = _attrs(p, _IFINFO.size, len(p)).get(IFLA_IFNAME, b"").rstrip(b"\0")
                self._names[index] = name.decode(errors="replace")

    def read(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """``{(dev, kind, handle): (drops, overlimits)}``, as :func:`counters.parse_tc`."""
        with self._lock:
            try:
                return self._read()
            except OSError:
                self.close_locked()  # a namespace re-created, a socket gone: open anew
                return self._read()

    def _read(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        rows = []
        for typ, p in self._dump(RTM_GETQDISC, _TCMSG.pack(0, 0, 0, 0, 0)):
            if typ != RTM_NEWQDISC or len(p) < _TCMSG.size:
                continue
            _, ifindex, handle, _, _ = _TCMSG.unpack_from(p)
            a = _attrs(p, _TCMSG.size, len(p))
            kind = a.get(TCA_KIND, b"?").rstrip(b"\0").decode(errors="replace")
            st = a.get(TCA_STATS)
            drops, over = (_TC_STATS.unpack_from(st)[2:4]) if st and len(st) >= 20 else (0, 0)
            rows.append((ifindex, kind, handle_text(handle), drops, over))
        if any(r[0] not in self._names for r in rows):
            self._links()
        return {(self._names.get(i, f"if{i}"), k, h): (d, o) for i, k, h, d, o in rows}

    def close_locked(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()
