"""Preflight of socket flows: each flow's path between its two transport hosts, through
the DUT, before a test counts on it.

For a TCP flow a connection is opened from the sending host to a listener on the
receiving host (on a free port: the flow's own port may be in use by a run) and closed;
for a UDP flow one datagram goes across and must arrive. Each host pair and protocol is
checked once. Blocking (the preflight runs it in a trio worker thread, which enters each
host's namespace to make a socket there and comes back: :func:`tgen_tui.worker.netns.netns`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TypeVar

from tgen_tui.engine.checks import Check
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.flowprogram import FlowProgram

TIMEOUT_S = 2.0
T = TypeVar("T")


def _in(ns: str | None, fn: Callable[[], T]) -> T:
    from tgen_tui.worker.netns import netns

    with netns(ns):
        return fn()


def _socket(ns: str | None, kind: int, ip: str) -> socket.socket:
    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, kind)
        s.bind((ip, 0))
        return s

    return _in(ns, make)


def _tcp(f: FlowProgram) -> str | None:
    """None when a connection opened, else why not."""
    lst = _socket(f.dst_netns, socket.SOCK_STREAM, f.dst_ip)
    snd = _socket(f.src_netns, socket.SOCK_STREAM, f.src_ip)
    try:
        lst.listen(1)
        snd.settimeout(TIMEOUT_S)
        snd.connect((f.dst_ip, lst.getsockname()[1]))
        lst.settimeout(TIMEOUT_S)
        lst.accept()[0].close()
    except OSError as e:
        return str(e.strerror or e)
    finally:
        snd.close()
        lst.close()
    return None


def _udp(f: FlowProgram) -> str | None:
    rcv = _socket(f.dst_netns, socket.SOCK_DGRAM, f.dst_ip)
    snd = _socket(f.src_netns, socket.SOCK_DGRAM, f.src_ip)
    try:
        rcv.settimeout(TIMEOUT_S)
        snd.sendto(b"tgen preflight", (f.dst_ip, rcv.getsockname()[1]))
        data = rcv.recv(64)
        return None if data == b"tgen preflight" else "a different datagram arrived"
    except OSError as e:
        return str(e.strerror or e) if not isinstance(e, TimeoutError) else "nothing arrived"
    finally:
        snd.close()
        rcv.close()


def flow_checks(compiled: CompiledProfile, ports: list[str]) -> list[Check]:
    """One check per (protocol, sending host, receiving host) of the flows of ``ports``."""
    out: list[Check] = []
    seen: set[tuple] = set()
    for f in compiled.flows:
        key = (f.protocol, f.src_netns, f.src_ip, f.dst_netns, f.dst_ip)
        if f.port not in ports or key in seen:
            continue
        seen.add(key)
        where = f"{f.src_ip} -> {f.dst_ip}"
        try:
            why = _tcp(f) if f.protocol == "tcp" else _udp(f)
        except OSError as e:  # a host namespace or address that is not there
            why = f"cannot open a socket on a transport host: {e.strerror or e}"
        detail = (
            f"{where}: {'a connection opened' if f.protocol == 'tcp' else 'a datagram arrived'}"
            if why is None
            else f"{where}: {why} (is the lab up with --transport-hosts, does hosts: match it?)"
        )
        out.append(Check(f"flow {f.name}", f.protocol, why is None, detail))
    return out


__all__ = ["flow_checks"]
