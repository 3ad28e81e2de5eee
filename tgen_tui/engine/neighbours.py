"""Ports with an L3 identity (issue 19): resolve their gateways at start, and the ``l3``
entry of their worker configuration (resolved MACs, the responder's address ranges).

:func:`resolve_gateways` runs before the engine builds its set-up (``open_engine``): for
every port of this machine with a ``gateway`` (``gateway6``) it sends ARP requests
(Neighbour Solicitations) from the port's address, with retries, and fails with one line
naming the port, the gateway and what was tried. The result (port -> a
:class:`~tgen_tui.engine.options.Neighbours`) travels in ``EngineOptions.neighbours``; :func:`l3_entry` turns it and the
compiled port into the worker's ``l3`` entry, so the set-up stays pure.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.engine.options import Neighbours
from tgen_tui.packets.compile import CompiledProfile, PortSpec

TRIES = 3
TIMEOUT_S = 1.0


def _ip(text: str | None) -> int | None:
    if text is None:
        return None
    return int(ipaddress.ip_interface(text).ip)


def wants_resolution(spec: PortSpec) -> bool:
    return bool(getattr(spec, "gateway", None) or getattr(spec, "gateway6", None))


def resolve_port(
    spec: PortSpec, tags: list | None = None, tries: int = TRIES, timeout_s: float = TIMEOUT_S
) -> tuple[Neighbours, list[str]]:
    """(its Neighbours, problems) of one port (blocking; enters the port's netns).

    A problem is one line: ``port p0: gateway 198.18.0.9: no ARP reply from 198.18.0.9 to
    3 requests from 198.18.0.2 on p0 (netns x), 1 s apart``."""
    from tgen_tui.worker.arpnd import mac_str
    from tgen_tui.worker.netns import netns
    from tgen_tui.worker.responder import resolve

    out: dict[str, Any] = {"mac": None, "gw4": None, "gw6": None}
    problems: list[str] = []
    where = f"{spec.interface}" + (f" (netns {spec.netns})" if spec.netns else "")
    for fam, own, gw, key, proto in (
        (4, spec.ipv4, spec.gateway, "gw4", "ARP"),
        (6, spec.ipv6, spec.gateway6, "gw6", "Neighbour Advertisement (ND)"),
    ):
        if gw is None:
            continue
        label = "gateway" if fam == 4 else "gateway6"
        own_ip = _ip(own)
        if own_ip is None:
            problems.append(
                f"port {spec.name}: {label} {gw} needs the port's own "
                f"{'ipv4' if fam == 4 else 'ipv6'} address to ask from"
            )
            continue
        try:
            with netns(spec.netns):
                mac, got = resolve(
                    spec.interface,
                    fam,
                    own_ip,
                    _ip(gw) or 0,
                    tags,
                    tries,
                    timeout_s,
                    quiet=not getattr(spec, "respond", True),
                )
        except OSError as e:
            problems.append(f"port {spec.name}: {label} {gw}: cannot send on {where}: {e}")
            continue
        out["mac"] = mac_str(mac)
        if got is None:
            problems.append(
                f"port {spec.name}: {label} {gw}: no {proto} reply from {gw} to {tries} "
                f"requests from {own_ip and ipaddress.ip_address(own_ip)} on {where}, "
                f"{timeout_s:g} s apart"
            )
        else:
            out[key] = mac_str(got)
    # asked: what was resolved (a reload compares it with the edited profile's gateways)
    return Neighbours(**out, asked=(spec.gateway, spec.gateway6)), problems


def interface_mac(netns_name: str | None, interface: str) -> str | None:
    """The interface's own MAC (an AF_PACKET socket bound to it, opened in its namespace
    by a thread of its own); None when it cannot be read (no such interface or namespace,
    not allowed)."""
    from tgen_tui.worker.arpnd import mac_str
    from tgen_tui.worker.netns import in_thread_netns

    def read() -> bytes:
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
            s.bind((interface, 0))
            return bytes(s.getsockname()[4][:6])

    try:
        mac = in_thread_netns(netns_name, read) if netns_name else read()
    except OSError:
        return None
    return mac_str(mac) if len(mac) == 6 else None


def resolve_all(
    compiled: CompiledProfile,
    ports: list[str] | None = None,
    tries: int = TRIES,
    timeout_s: float = TIMEOUT_S,
) -> tuple[dict[str, Neighbours], list[str]]:
    """Resolve every port (of ``ports``) that has a gateway; (results, problems)."""
    res: dict[str, Neighbours] = {}
    problems: list[str] = []
    for name in ports or list(compiled.ports):
        spec = compiled.ports[name]
        if not wants_resolution(spec):
            continue
        if getattr(spec, "host", None):  # its namespace is on another machine, not here
            from tgen_tui.diagnostics import BadInput

            raise BadInput(
                f"port {name}: gateway resolution for a port on another host ({spec.host}) "
                "is not supported yet: give its streams eth.dst (the gateway's MAC)"
            )
        tags = _tags_of(compiled, name)
        r, p = resolve_port(spec, tags, tries, timeout_s)
        res[name] = r
        problems += p
    return res, problems


def _tags_of(compiled: CompiledProfile, port: str) -> list:
    """The tag stack of the port's first ``eth_auto`` stream (the gateway sits on it)."""
    from tgen_tui.worker.responder import template_tags

    for p in compiled.streams:
        if p.port == port and getattr(p, "eth_auto", False):
            return template_tags(p.template)
    return []


async def resolve_gateways(
    compiled: CompiledProfile, ports: list[str] | None, notice: Callable[[str], None] | None = None
) -> dict[str, Neighbours]:
    """:func:`resolve_all` in a thread; EnvironmentProblem (one line each) on failure."""
    import trio

    if not any(wants_resolution(compiled.ports[n]) for n in (ports or compiled.ports)):
        return {}
    res, problems = await trio.to_thread.run_sync(resolve_all, compiled, ports)
    if problems:
        raise EnvironmentProblem("\n".join(problems))
    if notice is not None:
        for name, r in res.items():
            gws = ", ".join(f"{k} {v}" for k, v in (("gateway", r.gw4), ("gateway6", r.gw6)) if v)
            notice(f"port {name}: resolved {gws}")
    return res


async def resolve_again(compiled: CompiledProfile, options: Any) -> Any:
    """``options`` with the gateways of ``compiled`` resolved again when a port's gateways
    differ from those resolved at start (an edited profile); unchanged otherwise."""
    import dataclasses

    known = options.neighbours or {}
    ports = options.ports or list(compiled.ports)
    stale = [
        n
        for n in ports
        if n in compiled.ports
        and wants_resolution(compiled.ports[n])
        and (known.get(n) or Neighbours()).asked
        != (compiled.ports[n].gateway, compiled.ports[n].gateway6)
    ]
    if not stale:
        return options
    return dataclasses.replace(options, neighbours=await resolve_gateways(compiled, options.ports))


def l3_entry(spec: PortSpec, resolved: Neighbours | None) -> dict | None:
    """The worker's ``l3`` entry of a port: resolved MACs and the responder's spec."""
    respond = None
    if getattr(spec, "respond", True) and (spec.ipv4 or spec.ipv6):
        respond = {
            "v4": [list(r) for r in spec.respond_v4],
            "v6": [[str(a), str(b)] for a, b in spec.respond_v6],
            "own4": _ip(spec.ipv4),
            "own6": None if spec.ipv6 is None else str(_ip(spec.ipv6)),
        }
    if respond is None and resolved is None:
        return None
    r = resolved or Neighbours()
    return {"mac": r.mac, "gw4": r.gw4, "gw6": r.gw6, "respond": respond}


__all__ = [
    "interface_mac",
    "l3_entry",
    "resolve_again",
    "resolve_all",
    "resolve_gateways",
    "resolve_port",
]
