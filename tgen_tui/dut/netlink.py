"""A minimal netlink dump client for the DUT readers (:mod:`~tgen_tui.dut.qdisc`,
:mod:`~tgen_tui.dut.nftnl`): one socket per namespace, opened there once (a socket keeps
the namespace it was created in), one request and its multipart answer per read, no
process. Imports: the standard library only.
"""

from __future__ import annotations

import os
import socket
import struct

from tgen_tui.worker.netns import in_thread_netns

NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
RTA = struct.Struct("=HH")


def attrs(buf: bytes, off: int = 0, end: int | None = None) -> dict[int, bytes]:
    """Netlink attributes ``{type: payload}`` (nested/byte-order flags masked off)."""
    end = len(buf) if end is None else end
    out = {}
    while off + 4 <= end:
        ln, typ = RTA.unpack_from(buf, off)
        if ln < 4:
            break
        out[typ & 0x3FFF] = buf[off + 4 : off + ln]
        off += (ln + 3) & ~3
    return out


def attr_list(buf: bytes) -> list[tuple[int, bytes]]:
    """Attributes in order, repeats kept (a nested list of elements)."""
    out = []
    off = 0
    while off + 4 <= len(buf):
        ln, typ = RTA.unpack_from(buf, off)
        if ln < 4:
            break
        out.append((typ & 0x3FFF, buf[off + 4 : off + ln]))
        off += (ln + 3) & ~3
    return out


def attr(typ: int, payload: bytes) -> bytes:
    """One attribute, padded to 4 bytes."""
    raw = RTA.pack(4 + len(payload), typ) + payload
    return raw + b"\0" * (-len(raw) % 4)


def cstr(b: bytes | None) -> str:
    return (b or b"").split(b"\0", 1)[0].decode(errors="replace")


class Dumper:
    """Dump requests on one netlink socket of ``protocol`` in ``netns`` (None: here)."""

    def __init__(self, protocol: int, netns: str | None) -> None:
        self.protocol = protocol
        self.netns = netns
        self._sock: socket.socket | None = None
        self._seq = 0

    def _open(self) -> socket.socket:
        def make() -> socket.socket:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, self.protocol)

        s = in_thread_netns(self.netns, make) if self.netns else make()
        s.bind((0, 0))
        s.settimeout(2.0)
        return s

    def dump(self, msg_type: int, body: bytes) -> list[tuple[int, bytes]]:
        """Send one dump request; the (type, payload) of every answer until DONE."""
        sock = self._sock
        if sock is None:
            sock = self._sock = self._open()
        # the local name: close() may run meanwhile (another thread, the run ending); the
        # closed socket then raises OSError, which the readers handle, never AttributeError
        self._seq += 1
        flags = NLM_F_REQUEST | NLM_F_DUMP
        sock.send(NLMSG.pack(NLMSG.size + len(body), msg_type, flags, self._seq, 0) + body)
        out: list[tuple[int, bytes]] = []
        while True:
            data = sock.recv(1 << 20)
            off = 0
            while off + NLMSG.size <= len(data):
                ln, typ, _, seq, _ = NLMSG.unpack_from(data, off)
                if ln < NLMSG.size:
                    return out
                if seq == self._seq:
                    if typ == NLMSG_DONE:
                        return out
                    if typ == NLMSG_ERROR:
                        err = -struct.unpack_from("=i", data, off + NLMSG.size)[0]
                        if err == 0:
                            return out
                        raise OSError(err, os.strerror(err))
                    out.append((typ, data[off + NLMSG.size : off + ln]))
                off += (ln + 3) & ~3

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
